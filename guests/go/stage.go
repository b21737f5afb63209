package pdk

import "github.com/morphhost/morph/abi"

// HandleStage registers the handle_stage hook: the plugin runs the stages
// of morph's pipelines whose node's type is "wasm:<plugin>" (or that set
// handler="<plugin>"), SPEC section 11. fn is given the node's id and
// attributes, the pipeline's goal, a copy of the run's context and the
// previous stage's outcome, and answers the stage's outcome: its Status
// (one of abi.StageSuccess, abi.StageFail, abi.StagePartialSuccess,
// abi.StageRetry, abi.StageSkipped) is required.
//
// The host checks the outcome (abi.StageOutcome.Check: bounded names,
// counts and sizes, no context key the pipeline runner owns) and fails the
// stage on one that breaks a rule, as it does when fn returns an error (the
// stage's failure reason then quotes it) or panics. A test of the plugin
// can call Check on fn's outcomes to catch such mistakes natively.
func HandleStage(fn func(abi.StageInput) (abi.StageOutcome, error)) {
	register(abi.HookHandleStage, fn)
}

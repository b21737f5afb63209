package host

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/pipeline"
)

// StageHandler is a plugin's handle_stage hook as a pipeline.Handler (ABI
// SPEC section 11): the pipeline runs a node whose type is "wasm:<plugin>"
// by calling the plugin's morph_handle_stage, on the plugin's instances and
// under its limits, like any hook. Whatever goes wrong in the guest, the
// stage fails with a reason; the run and the host go on.
type StageHandler struct {
	p *Plugin
}

// StageHandler returns the plugin's stage handler when the plugin
// implements handle_stage and has it enabled (Config.Hooks); ok is false
// otherwise. The handler calls the plugin for as long as it is open; after
// Close every stage it runs fails, saying the plugin is closed.
func (p *Plugin) StageHandler() (h *StageHandler, ok bool) {
	if !slices.Contains(p.hooks, abi.HookHandleStage) {
		return nil, false
	}
	return &StageHandler{p: p}, true
}

// Type is the handler type a pipeline node names to run this plugin:
// pipeline.TypeWasmPrefix and the plugin's name ("wasm:verify").
func (h *StageHandler) Type() string { return pipeline.TypeWasmPrefix + h.p.name }

// Call is the typed ABI call beneath Execute, for callers that must tell
// failures apart (Execute folds them into a reason): it runs morph_handle_stage
// with in and returns the guest's outcome once abi.StageOutcome.Check has
// passed it. A failure is the host's *Error, whose kind errors.Is tells:
// ErrTimeout, ErrTrap, ErrBadOutput (an outcome Check refuses included),
// ErrOutputTooLarge, ErrInputTooLarge, ErrGuest, ErrCanceled, ErrClosed.
func (h *StageHandler) Call(ctx context.Context, in abi.StageInput) (abi.StageOutcome, error) {
	return invokeChecked(ctx, h.p, abi.ExportHandleStage, in, (*abi.StageOutcome).Check)
}

// Execute runs the stage: the input is StageInput's, the outcome
// PipelineOutcome's, which is also the stage's file stagePluginFile (so
// the stage keeps its status.json).
func (h *StageHandler) Execute(ctx context.Context, node *pipeline.Node, pctx *pipeline.Context, _ *pipeline.ArtifactStore) (*pipeline.Outcome, error) {
	out, err := h.Call(ctx, StageInput(ctx, node, pctx))
	o := PipelineOutcome(h.p.name, node, out, err)
	writeStagePluginFile(ctx, h.p.name, o)
	return o, nil
}

// stagePluginFile is a plugin stage's file in its stage directory: the
// plugin's name, the status it gave and its notes or why it failed (the
// guest's words escaped, as in the outcome), as JSON.
const stagePluginFile = "plugin.json"

// writeStagePluginFile writes stagePluginFile for the stage ctx runs.
func writeStagePluginFile(ctx context.Context, plugin string, o *pipeline.Outcome) {
	b, _ := json.Marshal(struct {
		Plugin        string               `json:"plugin"`
		Status        pipeline.StageStatus `json:"status"`
		Notes         string               `json:"notes,omitempty"`
		FailureReason string               `json:"failure_reason,omitempty"`
	}{plugin, o.Status, o.Notes, o.FailureReason})
	_ = pipeline.ExecutionFrom(ctx).WriteStageFile(stagePluginFile, b)
}

// StageInput is what a stage handler is given for node: its id and
// attributes, the context's graph.goal, a snapshot of the context and the
// previous stage's outcome (pipeline.ExecutionFrom(ctx)). A host that runs
// the call elsewhere (a Temporal activity) builds it with this, as Execute
// does.
func StageInput(ctx context.Context, node *pipeline.Node, pctx *pipeline.Context) abi.StageInput {
	in := abi.StageInput{NodeID: node.ID, Attrs: maps.Clone(node.Attrs), Goal: pctx.GetString(pipeline.KeyGoal), Context: pctx.Snapshot()}
	if in.Attrs == nil {
		in.Attrs = map[string]string{} // the input's attrs are an object, never null
	}
	if x := pipeline.ExecutionFrom(ctx); x != nil && x.Previous != nil {
		in.Previous = stageOutcomeOf(x.Previous)
	}
	return in
}

// PipelineOutcome is the pipeline's outcome of node's stage from what
// plugin's Call returned for it. A failed call (err) is a FAIL outcome,
// never an error or a panic, whose reason names the node and says why
// (timed out, trapped, bad output: err's text, the guest's words in it
// escaped and cut). The guest's own notes and failure reason are passed on
// escaped (safetext.Escape): they are shown to people.
func PipelineOutcome(plugin string, node *pipeline.Node, out abi.StageOutcome, err error) *pipeline.Outcome {
	if err != nil {
		return pipeline.Fail("node %q: %v", node.ID, err)
	}
	o := &pipeline.Outcome{Status: pipeline.StageStatus(out.Status), PreferredLabel: out.PreferredLabel,
		SuggestedNextIDs: out.SuggestedNextIDs, ContextUpdates: out.ContextUpdates,
		Notes: safetext.Escape(out.Notes), FailureReason: safetext.Escape(out.FailureReason)}
	if o.Status == pipeline.StatusFail {
		o.FailureReason = cmp.Or(o.FailureReason, fmt.Sprintf("plugin %q failed the stage without a reason", plugin))
	}
	return o
}

// stageOutcomeOf is a pipeline outcome as a stage handler is told it: the
// fields of the ABI (a jump or the usage are the runner's business).
func stageOutcomeOf(o *pipeline.Outcome) *abi.StageOutcome {
	return &abi.StageOutcome{Status: string(o.Status), PreferredLabel: o.PreferredLabel, SuggestedNextIDs: o.SuggestedNextIDs,
		ContextUpdates: o.ContextUpdates, Notes: o.Notes, FailureReason: o.FailureReason}
}

// StageHandlers are the stage handlers of the WebAssembly plugins of an
// engine's status (st, from Engine.Status once the engine is initialized)
// that implement handle_stage, in the status's order: how a pipeline finds
// the plugins its configuration loaded, which the engine knows only by
// their Extension.
func StageHandlers(st engine.Status) []*StageHandler {
	var out []*StageHandler
	for _, ps := range st.Plugins {
		if d, ok := ps.Details.(*Details); ok && d.stage != nil {
			out = append(out, d.stage)
		}
	}
	return out
}

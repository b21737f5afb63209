// Package temporal runs morph's agent sessions as Temporal workflows, so
// that a turn survives a crashed worker and never repeats a model call or a
// tool call it finished: durable inside a turn, not only between turns.
//
// The turn's workflow (TurnWorkflow) runs morph's own engine, unchanged,
// inside workflow code: everything the engine does that reaches outside
// itself is an activity, which Temporal records once done and replays from
// its history after a crash. The engine of the workflow is given, in place
// of the real model, tools and plugins, stand-ins that schedule activities
// (a model call, a tool call, each engine hook), and the workflow's clock;
// the workers (Activities) hold the real ones, loaded from the same
// morph.toml. The engine's loop is deterministic given what the activities
// answer, which is what Temporal requires of workflow code.
//
// A DOT pipeline's workflow (PipelineWorkflow) runs morph's pipeline runner
// the same way, on the workflow's engine, with the workflow's time,
// timers and coroutines through the runner's executor seam
// (pipeline.Executor); its human gates wait for a signal, its progress is
// a query, and a long run continues as new at a checkpoint.
//
// Session middleware runs in the workflow's engine too, each hook an
// activity: its policy and quarantine are the workflow's, decided by the
// workflow's clock, so that they are part of its history. A quarantine
// lasts the turn (a workflow); the local engine's lasts the process.
//
// The package is a module of its own, so that the core module does not
// pull in the Temporal SDK.
package temporal

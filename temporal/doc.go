// Package temporal runs morph's agent sessions as Temporal workflows, so
// that a turn survives a crashed worker and does not repeat a model call or
// a tool call whose result was recorded: durable inside a turn, not only
// between turns. A call runs twice only when Temporal gave up on an
// attempt while the call ran, before its result was recorded (see
// Journal).
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
// A session of several turns is one workflow (SessionWorkflow, its ID
// SessionWorkflowID of the session's): each turn an update (UpdateTurn,
// sent by StartTurn, its result waited for by WaitTurn, both retrying
// what a busy service fails for a while), run one at a time by the same
// engine TurnWorkflow runs, whose session keeps the history. Past SessionLimits (turns, the
// size of its Temporal history, or when Temporal suggests it) it continues
// as new between turns, once the turns already asked for have run,
// carrying the history and its middleware's quarantines (SessionState);
// idle past its timeout, it ends with its state, from which StartTurn
// starts it again at the session's next turn.
//
// A DOT pipeline's workflow (PipelineWorkflow) runs morph's pipeline runner
// the same way, on the workflow's engine, with the workflow's time,
// timers and coroutines through the runner's executor seam
// (pipeline.Executor); its human gates wait for an update, its progress is
// a query, and a long run continues as new at a checkpoint.
//
// Session middleware runs in the workflow's engine too, each hook an
// activity: its policy and quarantine are the workflow's, decided by the
// workflow's clock, so that they are part of its history. Which state is
// where:
//
//   - Durable, the workflow's: the middleware's policy and quarantine
//     (faults in a row, backoff, quarantined until), kept by the
//     workflow's engine across the session's turns, carried across a
//     continue-as-new (engine.Quarantines, RestoreQuarantines), and
//     rebuilt by replay on whichever worker takes the workflow up after
//     another stops or dies. A fault that happened is in the history as a
//     failed activity, so a restarted worker decides as the first did.
//   - Per worker, lost when it stops: the plugin instances (a faulted one
//     is discarded, as locally) and compiled modules, and the host's own
//     counters of calls and faults per plugin. A worker that restarts
//     starts them afresh, as a local morph that restarts does; none of the
//     workflow's decisions depends on them. A plugin in session isolation
//     keeps sessions apart on a worker as locally: each middleware hook,
//     engine hook and tool call carries its session (CallSession), which
//     the worker serves it as (TestSessionIsolationOnWorker). Its
//     instances are the worker's: a session served by another worker next
//     runs there on a fresh instance, which is told (reason moved), warned
//     of and counted, the workflow numbering the session's calls of each
//     plugin, middleware, engine hooks and tools alike
//     (SessionState.MiddlewareCalls; TestSessionMovedToAnotherWorker), as
//     is one back on a worker that holds an older instance of it, which
//     missed the calls served elsewhere (it is released). A session that
//     ends in a workflow ends on every worker (sessionend.go;
//     TestSessionEndReachesWorkers). A hook that traps or outruns its
//     plugin's deadline fails its activity, and the workflow's engine
//     applies the rule it applies locally: an engine hook's fallback (the
//     default prompt, ...), a middleware's policy and quarantine.
//
// Each activity's timeout (Timeouts, answered by the worker's Setup, so
// that it is in the workflow's history) is what bounds its call on the
// worker, plus a second: a plugin's deadlines for its hooks, tools and
// stage handler, the engine's deadline on a middleware hook, the model
// client's attempts and waits; at most ActivityTimeout, which is also the
// timeout of a call nothing bounds. Every activity that may run longer
// than the [temporal] heartbeat_timeout (4 s) heartbeats every
// heartbeat_interval (2 s) while it runs, so that a lost worker's call is
// taken by another after heartbeat_timeout
// (TestKilledWorkerSeenByHeartbeat, TestWorkerKilledInHook,
// TestStoppedWorkersCallIsTakenUp), and a workflow's next step waits
// sticky_timeout (2 s) for the worker that ran its last one before another
// takes it. A call's own failure is its answer, returned non-retryable;
// Temporal runs a call again only when its attempt was lost: a missed
// heartbeat, its timeout passed (a starved worker's), its worker stopping;
// a failure the call returned after its attempt's context ended is not its
// answer (lostAttempt: TestLostAttemptIsRetried), while a result it
// returned then is journaled and answered by the next attempt; a model
// client's own
// deadline on a call, its attempt live, is (TestActivitiesHeartbeat).
// retryPolicy allows the worker's [temporal] lost_attempts attempts (ten
// by default); a call whose attempts are all lost, or that the result
// journal fails, is no answer: its turn or pipeline run ends with a
// *CallError naming the activity and, when its attempts were lost, how
// many it had (TestUnansweredCallEndsTheTurn).
//
// A session's turn update whose task is larger than turn_max_kb is
// rejected by its validator (nothing of it enters the history), and so is
// a human gate's answer update larger than answer_max_kb, for no gate
// waiting at its node, or naming none of its choices: the sender gets the
// typed refusal, the workflow logs it escaped (TestTurnTooLargeIsRefused,
// TestGateAnswerRefusedLeavesNoHistory). The deprecated answer signal,
// still taken for the workflows started before the update, is checked the
// same way but stays in the history whole (TestGateAnswerSignal); a
// history of the version before the update replays on this one
// (TestGateAnswerSignalHistoryReplays). A workflow numbers its model
// calls (ChatRequest.Call, carried across continue-as-new), and a scripted
// model answers the reply of that number, so that its replies come in the
// script's order whichever worker makes each call
// (TestScriptedModelOnTwoWorkers).
//
// A worker records each call's result in the queue's result journal
// (Journal, [temporal] journal_dir) before it tells Temporal: a worker
// that dies after the call returned and before Temporal recorded it
// leaves the activity to another attempt, which answers the record
// without calling; a call's own failure, a panic included, is recorded
// and answered alike. A call is made again when Temporal gave up on an
// attempt (its worker died, its heartbeat came later than
// heartbeat_timeout from a live but starved worker, its timeout passed,
// its worker was stopping) while the call ran and before its result was
// in the journal, or when the next worker does not share the journal.
// The attempt given up on may still run, so attempts of one call may run
// at once: its tool gets the same call ID on each (engine.CallID: the
// workflow, run and activity IDs), by which it does its effects once,
// atomically (an O_EXCL file, a unique key; not a check and then an
// append).
//
// Payloads (a session's history, a large tool output) go into Temporal's
// history unless a PayloadCodec (DataConverter, the config's payload_dir)
// moves those above a threshold to a content-addressed PayloadStore,
// leaving a reference that is checked by hash when read.
//
// The package is a module of its own, so that the core module does not
// pull in the Temporal SDK.
package temporal

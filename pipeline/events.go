package pipeline

import (
	"time"

	"github.com/morphhost/morph/engine"
)

// EventKind names a pipeline event.
type EventKind string

// Pipeline events. Every stage, parallel and interview event carries the
// node id.
const (
	EventPipelineStarted   EventKind = "pipeline.started"
	EventPipelineCompleted EventKind = "pipeline.completed"
	EventPipelineFailed    EventKind = "pipeline.failed"
	EventStageStarted      EventKind = "stage.started"
	EventStageCompleted    EventKind = "stage.completed"
	EventStageFailed       EventKind = "stage.failed"
	EventStageRetrying     EventKind = "stage.retrying"
	EventParallelStarted   EventKind = "parallel.started"
	EventBranchStarted     EventKind = "parallel.branch_started"
	EventBranchCompleted   EventKind = "parallel.branch_completed"
	EventParallelCompleted EventKind = "parallel.completed"
	EventInterviewStarted  EventKind = "interview.started"
	EventInterviewDone     EventKind = "interview.completed"
	EventInterviewTimeout  EventKind = "interview.timeout"
	EventCheckpointSaved   EventKind = "checkpoint.saved"
	// EventManagerObserved is a manager loop's poll of its child: Message
	// says the child's state and active stage.
	EventManagerObserved EventKind = "manager.observed"
	// EventLoopRestarted is a loop_restart edge taken: NodeID is where the
	// fresh loop starts, Attempt the restart's number.
	EventLoopRestarted EventKind = "pipeline.restarted"
	// EventAgent wraps an event of a stage's agent run (Event.Agent).
	EventAgent EventKind = "agent"
	// EventWarning is something the operator should know that does not
	// stop the run (a bad attribute ignored, a checkpoint of another graph).
	EventWarning EventKind = "warning"
)

// Event is a report from a pipeline run, for progress display and logs.
type Event struct {
	Kind    EventKind
	RunID   string
	NodeID  string // the stage's node; "" for pipeline events
	Branch  string // in a parallel branch, the branch's first node
	Attempt int    // 1 for a stage's first attempt
	Status  StageStatus
	Message string // a failure reason, a retry's wait, the chosen answer
	Time    time.Time
	// Duration is the stage's (or the run's, for the pipeline events).
	Duration time.Duration
	// Usage is the stage's model usage (stage events) or the run's (pipeline
	// events).
	Usage Usage
	// Agent is the agent event for EventAgent.
	Agent *engine.Event
}

// EngineEvent is an agent event of a stage, with the node it belongs to.
type EngineEvent struct {
	NodeID string
	engine.Event
}

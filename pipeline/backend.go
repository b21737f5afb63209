package pipeline

import (
	"context"
)

// CodergenBackend runs an agent for a stage: codergen nodes, hybrid
// diamonds and a fan-in that ranks with a prompt. EngineBackend is the one
// on morph's engine.
type CodergenBackend interface {
	RunAgent(ctx context.Context, cfg AgentRunConfig) (*AgentRunResult, error)
}

// AgentRunConfig is one agent run of a stage, from the node's attributes.
type AgentRunConfig struct {
	Prompt   string
	Model    string // llm_model; "" for the backend's default
	Provider string // llm_provider; "" for the backend's default
	BaseURL  string // base_url; "" for the backend's default
	WorkDir  string
	Goal     string
	NodeID   string
	MaxTurns int // the agent's step limit; 0 for the backend's default
	// MaxTokens is what is left of the run's token budget (0: no budget):
	// the agent should conclude before it spends more.
	MaxTokens int
	// FidelityMode is how much of the run so far the agent sees: "full"
	// (one session per ThreadID), "truncate", "compact" or
	// "summary:low|medium|high".
	FidelityMode string
	ThreadID     string
	// StateDir is the run directory, where a backend keeps what a resumed
	// run needs of it (the full-fidelity threads' conversations); "" when
	// the run has none.
	StateDir string
	// Preamble is the run so far, as the fidelity mode has it, for modes
	// other than full.
	Preamble        string
	SystemPrompt    string
	ReasoningEffort string
	EventHandler    func(EngineEvent)
}

// AgentRunResult is what an agent run produced.
type AgentRunResult struct {
	Output     string
	Success    bool
	StopReason string // the engine's stop reason
	Steps      int
	ToolCalls  int
	Usage      Usage
}

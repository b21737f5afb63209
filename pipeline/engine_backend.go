package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm"
)

// EngineBackend runs stages' agents on morph's engine: its model client,
// its plugins' hooks, middleware and tools. It is also the ToolRunner of
// tool nodes, over the engine's tool registry. Use one EngineBackend per
// run: full-fidelity threads are sessions it keeps.
type EngineBackend struct {
	// Engine runs the agents.
	Engine *engine.Engine
	// Options are every agent run's base options (model, step limit,
	// parameters); a node's attributes override them.
	Options engine.RunOptions
	// ForEndpoint returns the engine for a node that names another
	// llm_provider or base_url than the configuration's; nil, such nodes
	// fail saying so.
	ForEndpoint func(ctx context.Context, provider, baseURL string) (*engine.Engine, error)
	// SessionID names a full-fidelity thread's session; nil, each run's
	// threads get fresh sessions. A durable executor that continues a run
	// in a new process (package temporal's continue-as-new) names them so
	// that the thread goes on in the same session, its plugins' instances
	// with it.
	SessionID func(threadID string) string

	mu       sync.Mutex
	sessions map[string]*engine.Session
	order    []*engine.Session // sessions, in the order they began: Close's
}

// Close ends the full-fidelity threads' sessions (engine.Session.Close), so
// that the plugins that keep something per session let go of it now: call
// it when the run ends, before the engine closes (not when it stops to go
// on elsewhere: SessionID). A resumed run continues the threads from their
// saved history, in new sessions unless SessionID names them.
func (b *EngineBackend) Close(ctx context.Context) error {
	b.mu.Lock()
	// in the order they began, not the map's: in a Temporal workflow each
	// end schedules activities, which a replay must schedule alike
	sessions := b.order
	b.sessions, b.order = nil, nil
	b.mu.Unlock()
	var errs []error
	for _, s := range sessions {
		errs = append(errs, s.Close(ctx))
	}
	return errors.Join(errs...)
}

// RunAgent runs one agent: a turn of the thread's session under fidelity
// full, else a fresh run whose task opens with the preamble. The stage's
// tool_hooks, if any, run around its agent's tool calls (ToolHooks).
func (b *EngineBackend) RunAgent(ctx context.Context, cfg AgentRunConfig) (*AgentRunResult, error) {
	eng := b.Engine
	if cfg.Provider != "" || cfg.BaseURL != "" {
		if b.ForEndpoint == nil {
			return nil, fmt.Errorf("node %s asks for llm_provider %q base_url %q, and this backend has only its configured model", cfg.NodeID, cfg.Provider, cfg.BaseURL)
		}
		var err error
		if eng, err = b.ForEndpoint(ctx, cfg.Provider, cfg.BaseURL); err != nil {
			return nil, err
		}
	}
	if eng == nil {
		return nil, fmt.Errorf("EngineBackend has no Engine")
	}
	ctx, err := withToolHooks(ctx, eng, cfg)
	if err != nil {
		return nil, err
	}
	opts := b.Options
	opts.Parameters = maps.Clone(b.Options.Parameters)
	if cfg.Model != "" {
		opts.Model = cfg.Model
	}
	if cfg.MaxTurns > 0 {
		opts.MaxSteps = cfg.MaxTurns
	}
	if cfg.MaxTokens > 0 && (opts.TokenBudget == 0 || cfg.MaxTokens < opts.TokenBudget) {
		opts.TokenBudget = cfg.MaxTokens
	}
	if cfg.SystemPrompt != "" {
		opts.Identity = cfg.SystemPrompt
	}
	if cfg.ReasoningEffort != "" {
		if opts.Parameters == nil {
			opts.Parameters = map[string]any{}
		}
		opts.Parameters["reasoning_effort"] = cfg.ReasoningEffort
	}
	if cfg.EventHandler != nil {
		opts.OnEvent = func(ev engine.Event) { cfg.EventHandler(EngineEvent{NodeID: cfg.NodeID, Event: ev}) }
	}
	task := cfg.Prompt
	var (
		final *engine.Final
		rc    *engine.Context
	)
	if cfg.FidelityMode == FidelityFull {
		s := b.session(eng, cfg)
		final, rc, err = s.RunTurn(ctx, task, opts)
		saveThread(cfg, s)
	} else {
		if cfg.Preamble != "" {
			task = strings.TrimSpace(cfg.Preamble) + "\n\nYour stage (" + cfg.NodeID + "):\n" + task
		}
		final, rc, err = eng.Run(ctx, task, opts)
	}
	if err != nil {
		return nil, err
	}
	m := rc.Metrics
	res := &AgentRunResult{
		Output:     finalText(final),
		Success:    rc.StopReason == engine.StopFinal,
		StopReason: rc.StopReason,
		Steps:      len(rc.Steps),
		ToolCalls:  m.ToolCalls,
		Usage: Usage{InputTokens: m.InputTokens, OutputTokens: m.OutputTokens, TotalTokens: m.TotalTokens, CostUSD: m.TotalCost,
			CostUnknown: m.CostUnknown},
	}
	return res, nil
}

// session is the thread's session: the one this backend holds, else the
// one the run directory kept (a resumed run), else a new one.
func (b *EngineBackend) session(eng *engine.Engine, cfg AgentRunConfig) *engine.Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sessions == nil {
		b.sessions = map[string]*engine.Session{}
	}
	s := b.sessions[cfg.ThreadID]
	if s == nil {
		// a fresh ID, not one of the thread's name: the runs of one engine
		// (the pipeline workflows of a Temporal worker, an embedder's runs)
		// have threads of the same names, whose sessions must be apart
		id := ""
		if b.SessionID != nil {
			id = b.SessionID(cfg.ThreadID)
		}
		s = eng.ResumeSession(id, loadThread(cfg))
		b.order = append(b.order, s)
		b.sessions[cfg.ThreadID] = s
	}
	return s
}

// threadFile is where a full-fidelity thread's conversation is kept in the
// run directory, or "" when it cannot be.
func threadFile(cfg AgentRunConfig) string {
	if cfg.StateDir == "" || !nodeID.MatchString(cfg.ThreadID) {
		return ""
	}
	return filepath.Join(threadsDir(cfg.StateDir), cfg.ThreadID+".json")
}

// saveThread keeps the thread's conversation after each turn, so that a
// resumed run continues it (engine.ResumeSession) instead of starting over.
func saveThread(cfg AgentRunConfig, s *engine.Session) {
	if path := threadFile(cfg); path != "" {
		if b, err := json.Marshal(s.History()); err == nil {
			_ = writeFileAtomic(path, b)
		}
	}
}

// threadsDir is where a run directory keeps the full-fidelity threads.
func threadsDir(runDir string) string { return filepath.Join(runDir, "threads") }

// LoadThreads returns the full-fidelity threads' conversations the run
// directory dir keeps, by thread id (none: an empty map): with the
// checkpoint and the manifest, what a resume needs of a run directory, for
// a host that moves a run from one directory to another.
func LoadThreads(dir string) (map[string]json.RawMessage, error) {
	entries, err := os.ReadDir(threadsDir(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]json.RawMessage{}, nil
	} else if err != nil {
		return nil, fmt.Errorf("threads: %w", err)
	}
	out := map[string]json.RawMessage{}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !nodeID.MatchString(id) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(threadsDir(dir), e.Name()))
		if err != nil {
			return nil, fmt.Errorf("threads: %w", err)
		}
		out[id] = b
	}
	return out, nil
}

// SaveThreads writes threads (LoadThreads') into the run directory dir.
func SaveThreads(dir string, threads map[string]json.RawMessage) error {
	for id, b := range threads {
		if !nodeID.MatchString(id) {
			return fmt.Errorf("threads: %q is not a thread id", id)
		}
		if err := writeFileAtomic(filepath.Join(threadsDir(dir), id+".json"), b); err != nil {
			return fmt.Errorf("threads: %w", err)
		}
	}
	return nil
}

func loadThread(cfg AgentRunConfig) []llm.Message {
	path := threadFile(cfg)
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var hist []llm.Message
	if json.Unmarshal(b, &hist) != nil {
		return nil
	}
	return hist
}

// finalText is a final's output as text: a string as it is, anything else
// as JSON.
func finalText(f *engine.Final) string {
	if f == nil {
		return ""
	}
	if s, ok := f.Output.(string); ok {
		return s
	}
	b, err := json.Marshal(f.Output)
	if err != nil {
		return fmt.Sprint(f.Output)
	}
	return string(b)
}

// HasTool reports whether the engine has the tool.
func (b *EngineBackend) HasTool(name string) bool {
	_, ok := b.Engine.Registry().Get(name)
	return ok
}

// RunTool runs the tool through the engine as a model's call runs
// (Engine.CallTool): the run options' tools and mode, the plugins'
// before_tool_call and after_tool_call middleware, schema validation; a
// plugin tool runs in its sandbox, under its limits and grants.
func (b *EngineBackend) RunTool(ctx context.Context, name string, input map[string]any) (string, error) {
	return b.Engine.CallTool(ctx, "pipeline", name, input, b.Options)
}

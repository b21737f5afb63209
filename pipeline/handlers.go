package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/morphhost/morph/internal/safetext"
)

// Bounds of what agent stages put in the context: the full output is an
// artifact; the context, which every checkpoint stores, gets a cut copy.
const (
	maxContextOutputBytes = 16 << 10
	// DefaultDiamondMaxTurns is a hybrid diamond's step limit when it sets
	// no max_turns.
	DefaultDiamondMaxTurns = 20
)

// StartHandler runs the start node: nothing to do.
type StartHandler struct{}

// Type returns "start".
func (StartHandler) Type() string { return TypeStart }

// Execute succeeds.
func (StartHandler) Execute(context.Context, *Node, *Context, *ArtifactStore) (*Outcome, error) {
	return Success(), nil
}

// ExitHandler runs an exit node: nothing to do; the runner has checked the
// goal gates before it gets here.
type ExitHandler struct{}

// Type returns "exit".
func (ExitHandler) Type() string { return TypeExit }

// Execute succeeds.
func (ExitHandler) Execute(context.Context, *Node, *Context, *ArtifactStore) (*Outcome, error) {
	return Success(), nil
}

// CodergenHandler runs an LLM agent on the node's prompt (else its label).
// The outcome is the agent's: an OUTCOME marker in its output wins (see
// DetectOutcomeMarker; besides the five statuses, a marker may name a
// custom outcome that a condition on the node's outgoing edges tests,
// OUTCOME: needs_dod for outcome=needs_dod); without one, with auto_status (default true), the
// agent's success flag decides, so an agent that ran out of steps or fell
// back does not report success; with auto_status=false a missing marker is
// a FAIL.
type CodergenHandler struct {
	// Backend runs the agent (nil: the Runner's).
	Backend CodergenBackend
	// EventHandler, if set, hears the agent's events (besides the
	// runner's OnEvent).
	EventHandler func(EngineEvent)
}

// Type returns "codergen".
func (*CodergenHandler) Type() string { return TypeCodergen }

// Execute runs the agent.
func (h *CodergenHandler) Execute(ctx context.Context, node *Node, pctx *Context, store *ArtifactStore) (*Outcome, error) {
	prompt := node.Prompt()
	if prompt == "" {
		prompt = node.ID
	}
	// A manager's steer (stack.steer) is read by one stage.
	steer := pctx.GetString(KeySteer)
	if steer != "" {
		pctx.Delete(KeySteer)
	}
	res, out := runAgentStage(ctx, agentStage{node: node, pctx: pctx, store: store, backend: h.Backend, events: h.EventHandler, prompt: prompt, steer: steer})
	if res == nil {
		return out, nil
	}
	auto, err := node.Bool("auto_status", true)
	if err != nil {
		return nil, err
	}
	if st, reason, ok := markerOutcome(ctx, node, res.Output); ok {
		out.Status, out.FailureReason = st, reason
	} else if !auto {
		out.Status = StatusFail
		out.FailureReason = "the agent's reply has no OUTCOME:SUCCESS or OUTCOME:FAIL marker, and auto_status=false asks for one"
	} else {
		out.Status = agentStatus(res)
	}
	if out.Status == StatusFail && out.FailureReason == "" {
		out.FailureReason = agentFailure(res)
	}
	return out, nil
}

// ConditionalHandler is the diamond. Without a prompt it passes the
// upstream outcome through (the context's outcome; success when there is
// none), so edges route on it. With a prompt it is the hybrid diamond: an
// agent runs on the prompt, and the stage's status is its outcome marker
// (OUTCOME:PASS/SUCCESS, OUTCOME:FAIL, another status or a custom outcome
// its edges test, as for CodergenHandler; FAIL wins when several appear),
// else its success flag. Routing then follows the diamond's edges' conditions.
type ConditionalHandler struct {
	// Backend runs the agent (nil: the Runner's).
	Backend CodergenBackend
	// BaseURL is the model endpoint when neither the node nor the context
	// sets base_url ("": the backend's default).
	BaseURL string
	// EventHandler, if set, hears the agent's events.
	EventHandler func(EngineEvent)
}

// Type returns "conditional".
func (*ConditionalHandler) Type() string { return TypeConditional }

// Execute passes the outcome through, or runs the agent.
func (h *ConditionalHandler) Execute(ctx context.Context, node *Node, pctx *Context, store *ArtifactStore) (*Outcome, error) {
	prompt := node.Attrs["prompt"]
	if strings.TrimSpace(prompt) == "" {
		st := StatusSuccess
		if s := pctx.GetString(KeyOutcome); s != "" {
			if parsed, err := ParseStageStatus(s); err == nil {
				st = parsed
			}
		}
		out := &Outcome{Status: st, Notes: "pass-through of the upstream outcome"}
		if st == StatusFail {
			out.FailureReason = "upstream stage failed"
			if x := ExecutionFrom(ctx); x != nil && x.Previous != nil && x.Previous.FailureReason != "" {
				out.FailureReason = x.Previous.FailureReason
			}
		}
		return out, nil
	}
	res, out := runAgentStage(ctx, agentStage{node: node, pctx: pctx, store: store, backend: h.Backend, events: h.EventHandler,
		prompt: prompt, baseURL: h.BaseURL, maxTurns: DefaultDiamondMaxTurns})
	if res == nil {
		return out, nil
	}
	if st, reason, ok := markerOutcome(ctx, node, res.Output); ok {
		out.Status, out.FailureReason = st, reason
	} else {
		out.Status = agentStatus(res)
	}
	if out.Status == StatusFail && out.FailureReason == "" {
		out.FailureReason = agentFailure(res)
	}
	out.ContextUpdates[KeyOutcome] = string(out.Status)
	return out, nil
}

// outcomeMarker finds OUTCOME:FAIL, OUTCOME=needs_dod, ... (any case,
// spaces allowed around the separator); the word is checked after.
var outcomeMarker = regexp.MustCompile(`(?i)\bOUTCOME\s*[:=]\s*([a-z_][a-z0-9_.:-]*)`)

// markerStatuses are the words every outcome marker may give.
var markerStatuses = map[string]StageStatus{"pass": StatusSuccess, "success": StatusSuccess, "fail": StatusFail,
	"partial_success": StatusPartialSuccess, "retry": StatusRetry, "skipped": StatusSkipped}

// DetectOutcomeMarker finds an agent's outcome marker in its output:
// OUTCOME:<status> or OUTCOME=<status>, in any case, where the status is
// success (or PASS), fail, partial_success, retry or skipped; it returns
// the status's name. When several appear, "fail" wins (an agent that
// reports a failure anywhere has not succeeded), else the last. A stage
// also takes the custom outcomes its edges' conditions test (see
// CodergenHandler).
func DetectOutcomeMarker(output string) (marker string, found bool) {
	st, found := detectMarker(output, nil)
	return string(st), found
}

// detectMarker is DetectOutcomeMarker that also takes the custom
// outcomes in custom (lowercase) as markers.
func detectMarker(output string, custom []string) (StageStatus, bool) {
	var last StageStatus
	for _, m := range outcomeMarker.FindAllStringSubmatch(output, -1) {
		word := strings.ToLower(strings.TrimRight(m[1], ".:-")) // "OUTCOME: fail." ends a sentence
		st, ok := markerStatuses[word]
		if !ok && slices.Contains(custom, word) {
			st, ok = StageStatus(word), true
		}
		switch {
		case !ok:
			continue
		case st == StatusFail:
			return st, true
		}
		last = st
	}
	return last, last != ""
}

// edgeOutcomes are the custom outcomes the conditions of node's outgoing
// edges test (outcome=needs_dod): an agent's marker may report them.
func edgeOutcomes(ctx context.Context, node *Node) []string {
	x := ExecutionFrom(ctx)
	if x == nil || x.Graph == nil {
		return nil
	}
	var out []string
	for _, e := range x.Graph.Outgoing(node.ID) {
		if c, err := ParseCondition(e.Condition()); err == nil {
			out = append(out, c.customOutcomes()...)
		}
	}
	return out
}

// markerOutcome is the status an agent's output sets by its marker (see
// detectMarker), with the agent's words as the reason of a FAIL; found is
// false without one.
func markerOutcome(ctx context.Context, node *Node, output string) (st StageStatus, reason string, found bool) {
	st, found = detectMarker(output, edgeOutcomes(ctx, node))
	if st == StatusFail {
		reason = "the agent reported OUTCOME:FAIL: " + safetext.Truncate(strings.TrimSpace(output), 300)
	}
	return st, reason, found
}

func agentStatus(res *AgentRunResult) StageStatus {
	if res.Success {
		return StatusSuccess
	}
	return StatusFail
}

func agentFailure(res *AgentRunResult) string {
	if res.StopReason != "" {
		return fmt.Sprintf("the agent did not succeed (stopped: %s)", res.StopReason)
	}
	return "the agent reported failure"
}

// agentStage is one agent run of a stage, what codergen, the hybrid diamond
// and a ranking fan-in share.
type agentStage struct {
	node     *Node
	pctx     *Context
	store    *ArtifactStore
	backend  CodergenBackend
	events   func(EngineEvent)
	prompt   string
	baseURL  string // the handler's default endpoint
	maxTurns int    // the default step limit (0: the backend's)
	steer    string // the manager's steer, before the preamble
}

// runAgentStage runs the agent and records its files and artifact. It
// returns the result and an outcome holding the usage and context updates,
// for the caller to give a status; or a nil result and a FAIL outcome when
// no agent ran or it failed to run.
func runAgentStage(ctx context.Context, a agentStage) (*AgentRunResult, *Outcome) {
	x := ExecutionFrom(ctx)
	backend := a.backend
	if backend == nil && x != nil && x.Runner != nil {
		backend = x.Runner.Backend
	}
	if backend == nil {
		return nil, Fail("node %s needs an agent backend, and none is configured: run it with 'morph pipeline run --config morph.toml' (an [llm] section), or give the Runner a Backend", a.node.ID)
	}
	cfg, err := agentConfig(ctx, a)
	if err != nil {
		return nil, Fail("%v", err)
	}
	_ = x.WriteStageFile("prompt.md", []byte(cfg.Prompt))
	res, err := backend.RunAgent(ctx, cfg)
	if err != nil {
		if timedOut(ctx) {
			return nil, Fail("the agent did not finish in time (the node's timeout or the run's wall-time budget)")
		}
		if ctx.Err() != nil {
			return nil, Fail("canceled: %v", ctx.Err())
		}
		return nil, Fail("agent backend error: %s", safetext.Truncate(err.Error(), 2000))
	}
	_ = x.WriteStageFile("response.md", []byte(res.Output))
	out := &Outcome{Usage: res.Usage, ContextUpdates: map[string]any{
		KeyLastStage:          a.node.ID,
		KeyLastResponse:       safetext.Truncate(res.Output, maxContextOutputBytes),
		a.node.ID + ".output": safetext.Truncate(res.Output, maxContextOutputBytes),
	}}
	if a.store != nil {
		if _, err := a.store.Store(a.node.ID+".output", a.node.Label(), []byte(res.Output)); err != nil {
			out.Notes = "output not stored: " + err.Error()
		}
	}
	return res, out
}

// agentConfig reads the agent's settings from the node, then the context,
// then the handler's defaults.
func agentConfig(ctx context.Context, a agentStage) (AgentRunConfig, error) {
	n, pctx := a.node, a.pctx
	maxTurns, err := n.Int("max_turns", a.maxTurns)
	if err != nil {
		return AgentRunConfig{}, err
	}
	first := func(vals ...string) string {
		for _, v := range vals {
			if strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	x := ExecutionFrom(ctx)
	cfg := AgentRunConfig{
		Prompt:          ExpandVars(a.prompt, pctx),
		Model:           n.Attrs["llm_model"],
		Provider:        n.Attrs["llm_provider"],
		BaseURL:         first(n.Attrs["base_url"], pctx.GetString(KeyBaseURL), a.baseURL),
		SystemPrompt:    first(n.Attrs["system_prompt"], pctx.GetString(KeySystemPrompt)),
		ReasoningEffort: n.Attrs["reasoning_effort"],
		Goal:            pctx.GetString(KeyGoal),
		NodeID:          n.ID,
		MaxTurns:        maxTurns,
		FidelityMode:    fidelityOf(x, n, pctx),
		ThreadID:        threadOf(x, n),
		WorkDir:         n.Attrs["workdir"],
	}
	if x != nil {
		cfg.StateDir = x.RunDir
		if x.run != nil && x.run.lim.MaxTokens > 0 {
			cfg.MaxTokens = max(x.run.lim.MaxTokens-x.run.usedTokens(), 1)
		}
	}
	if cfg.WorkDir == "" && a.store != nil {
		cfg.WorkDir = a.store.BaseDir()
	}
	if cfg.FidelityMode != FidelityFull {
		cfg.Preamble = Preamble(cfg.FidelityMode, pctx)
	}
	if a.steer != "" {
		cfg.Preamble = strings.TrimSpace("The manager supervising this pipeline steers it:\n" + a.steer + "\n\n" + cfg.Preamble)
	}
	events := a.events
	var emit func(Event)
	if x != nil {
		emit = x.Emit
	}
	if events != nil || emit != nil {
		cfg.EventHandler = func(ev EngineEvent) {
			if events != nil {
				events(ev)
			}
			if emit != nil {
				e := ev.Event
				emit(Event{Kind: EventAgent, NodeID: ev.NodeID, Agent: &e})
			}
		}
	}
	return cfg, nil
}

// stageDir is the directory of a node's files in the run directory, or ""
// when there is no run directory or the id cannot name a directory safely.
func stageDir(x *Execution, id string) string {
	if x == nil || x.RunDir == "" || !nodeID.MatchString(id) {
		return ""
	}
	if runDirNames[id] { // a node named like the run directory's own folders
		id = "node_" + id
	}
	if x.run != nil { // restart-<n>/ after a loop_restart
		return filepath.Join(x.run.loopDir(), id)
	}
	return filepath.Join(x.RunDir, id)
}

// runDirNames are the run directory's own folders, which a stage's may not be.
var runDirNames = map[string]bool{"artifacts": true, "threads": true}

// nodeID is what a node id may be: the DOT identifiers the parser accepts,
// which are also safe directory names.
var nodeID = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// statusFile is a stage's status.json, the spec's contract for tools that
// read a stage's result (Appendix C): its status is "outcome".
type statusFile struct {
	Outcome          StageStatus    `json:"outcome"`
	PreferredLabel   string         `json:"preferred_label,omitempty"`
	SuggestedNextIDs []string       `json:"suggested_next_ids,omitempty"`
	ContextUpdates   map[string]any `json:"context_updates,omitempty"`
	Notes            string         `json:"notes,omitempty"`
	FailureReason    string         `json:"failure_reason,omitempty"`
}

// writeStatusFile records a stage's outcome as status.json.
func writeStatusFile(x *Execution, id string, o *Outcome) {
	if dir := stageDir(x, id); dir != "" {
		b, _ := json.MarshalIndent(statusFile{Outcome: o.Status, PreferredLabel: o.PreferredLabel, SuggestedNextIDs: o.SuggestedNextIDs,
			ContextUpdates: o.ContextUpdates, Notes: o.Notes, FailureReason: o.FailureReason}, "", "  ")
		_ = writeFileQuick(filepath.Join(dir, "status.json"), b)
	}
}

// placeholder matches ${context.key} and ${key}, and $goal.
var placeholder = regexp.MustCompile(`\$\{([A-Za-z0-9_.\-]+)\}|\$goal\b`)

// ExpandVars replaces $goal with the run's goal and ${context.key} (or
// ${key}) with the context's value of key, as text; a missing key is "".
func ExpandVars(s string, pctx *Context) string {
	if !strings.Contains(s, "$") {
		return s
	}
	return placeholder.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$goal" {
			return pctx.GetString(KeyGoal)
		}
		key := strings.TrimSuffix(strings.TrimPrefix(m, "${"), "}")
		if v, ok := pctx.Lookup(key); ok {
			return valueString(v)
		}
		return pctx.GetString(strings.TrimPrefix(key, "context."))
	})
}

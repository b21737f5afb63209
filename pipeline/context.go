package pipeline

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Context keys the runner sets.
const (
	KeyOutcome        = "outcome"         // the last stage's status
	KeyPreferredLabel = "preferred_label" // the last stage's preferred label
	KeyGoal           = "graph.goal"
	KeyCurrentNode    = "current_node"
	KeyLastStage      = "last_stage"    // set by agent handlers: the node id
	KeyLastResponse   = "last_response" // set by agent handlers: the agent's output (cut)
	keyRetryPrefix    = "internal.retry_count."
	// KeyBaseURL and KeySystemPrompt, when the host sets them in the
	// context, are the endpoint and identity of agent stages that set none
	// (a stage handler plugin may not set them: abi.ReservedStageKey).
	KeyBaseURL      = "base_url"
	KeySystemPrompt = "system_prompt"
	// KeyParallelResults holds the parallel handler's branch results, a
	// map of branch (target node id) to its BranchResult.
	KeyParallelResults = "parallel.results"
	// KeyFanInBestID and KeyFanInBestOutcome are the branch a fan-in
	// picked and its status (spec 4.9).
	KeyFanInBestID      = "parallel.fan_in.best_id"
	KeyFanInBestOutcome = "parallel.fan_in.best_outcome"
	// KeyHumanGateSelected and KeyHumanGateLabel are a human gate's
	// answer: the choice's accelerator key and its label (spec 4.6).
	KeyHumanGateSelected = "human.gate.selected"
	KeyHumanGateLabel    = "human.gate.label"
)

// Context is the state a run's stages share: a map of values and an
// append-only log. It is safe for concurrent use. Values must marshal as
// JSON, since checkpoints store them; Set keeps what it is given, Snapshot
// hands out copies.
type Context struct {
	mu     sync.RWMutex
	values map[string]any
	log    []string
	// dirty (key -> set, or deleted) and logMark are what changed since
	// takeChanges: a journal record holds only them.
	dirty   map[string]bool
	logMark int
}

// NewContext returns an empty context.
func NewContext() *Context { return &Context{values: map[string]any{}} }

// Set sets key to v.
func (c *Context) Set(key string, v any) {
	c.mu.Lock()
	c.values[key] = v
	c.mark(key, true)
	c.mu.Unlock()
}

// Get returns the value of key, or nil.
func (c *Context) Get(key string) any {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.values[key]
}

// GetString returns the value of key as text: a string as it is, nil as
// "", anything else as its JSON.
func (c *Context) GetString(key string) string {
	return valueString(c.Get(key))
}

// Lookup returns the value of key and whether it is set.
func (c *Context) Lookup(key string) (any, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.values[key]
	return v, ok
}

// Delete removes key.
func (c *Context) Delete(key string) {
	c.mu.Lock()
	delete(c.values, key)
	c.mark(key, false)
	c.mu.Unlock()
}

// Apply sets every key of updates.
func (c *Context) Apply(updates map[string]any) {
	if len(updates) == 0 {
		return
	}
	c.mu.Lock()
	maps.Copy(c.values, updates)
	for k := range updates {
		c.mark(k, true)
	}
	c.mu.Unlock()
}

// AppendLog adds a line to the log.
func (c *Context) AppendLog(line string) {
	c.mu.Lock()
	c.log = append(c.log, line)
	c.mu.Unlock()
}

// Log returns a copy of the log.
func (c *Context) Log() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]string(nil), c.log...)
}

// Snapshot returns a deep copy of the values, made through JSON, so the
// caller may keep or change it; a value that does not marshal is given as
// its fmt text.
func (c *Context) Snapshot() map[string]any {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return deepCopy(c.values)
}

// Clone returns an independent copy: values and log.
func (c *Context) Clone() *Context {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return &Context{values: deepCopy(c.values), log: append([]string(nil), c.log...)}
}

// restore replaces the whole state (resume from a checkpoint).
func (c *Context) restore(values map[string]any, log []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if values == nil {
		values = map[string]any{}
	}
	c.values = values
	c.log = log
	clear(c.dirty)
	c.logMark = len(log)
}

// mark notes key as set (or deleted) since the last takeChanges; c.mu is
// held.
func (c *Context) mark(key string, set bool) {
	if c.dirty == nil {
		c.dirty = map[string]bool{}
	}
	c.dirty[key] = set
}

// takeChanges returns the keys set since the last call, the keys deleted
// since, and the log lines appended since, and forgets them. The values
// are the context's own, not copies: the caller encodes them at once,
// between stages, when no stage changes them.
func (c *Context) takeChanges() (set map[string]any, deleted, lines []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := make(map[string]any, len(c.dirty))
	for k, isSet := range c.dirty {
		if isSet {
			changed[k] = c.values[k]
		} else {
			deleted = append(deleted, k)
		}
	}
	clear(c.dirty)
	slices.Sort(deleted)
	lines = slices.Clip(c.log[c.logMark:]) // the log is append-only: these lines never change
	c.logMark = len(c.log)
	if len(changed) > 0 {
		set = changed
	}
	return set, deleted, lines
}

// deepCopy copies m through JSON, per key, so one bad value does not cost
// the others.
func deepCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		b, err := json.Marshal(v)
		if err != nil {
			out[k] = fmt.Sprint(v)
			continue
		}
		var cp any
		if err := json.Unmarshal(b, &cp); err != nil {
			out[k] = fmt.Sprint(v)
			continue
		}
		out[k] = cp
	}
	return out
}

// valueString is v as text for conditions and prompts.
func valueString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case StageStatus:
		return string(x)
	case fmt.Stringer:
		return x.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(string(b))
}

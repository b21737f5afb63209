package abi

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pipeline stage handlers (ABI v1, additive; SPEC section 11). A pipeline
// is a graph of stages; a node whose type is "wasm:<plugin>" is run by that
// plugin's handle_stage hook, which is given the node and the run's context
// and answers how the stage went. The host checks the answer (Check) before
// the pipeline acts on it, so that a guest cannot make the runner route to
// nowhere, overwrite its bookkeeping or hold megabytes of context.

// HookHandleStage is the stage handler's hook name, as in Manifest.Hooks.
const HookHandleStage = "handle_stage"

// ExportHandleStage runs one pipeline stage: StageInput -> StageOutcome.
const ExportHandleStage = "morph_handle_stage"

// Stage statuses, as in StageOutcome.Status: the pipeline's own, lowercase.
const (
	StageSuccess        = "success"         // the stage did its work
	StageFail           = "fail"            // it failed; failure_reason says why
	StagePartialSuccess = "partial_success" // done in part; counts as done for goal gates
	StageRetry          = "retry"           // run the stage again, as the node's retry policy allows
	StageSkipped        = "skipped"         // nothing to do
)

// Bounds of a StageOutcome (Check). They keep what one stage adds to a
// run's context, which every later stage is sent and every checkpoint
// stores, small beside the output limit, and the names the runner matches
// against its graph short.
const (
	// MaxStageContextUpdates bounds the keys of ContextUpdates.
	MaxStageContextUpdates = 64
	// MaxStageContextBytes bounds ContextUpdates: its keys and their values
	// as compact JSON, together.
	MaxStageContextBytes = 256 << 10
	// MaxStageSuggestedIDs bounds SuggestedNextIDs.
	MaxStageSuggestedIDs = 16
	// MaxStageNameBytes bounds a context key, a suggested node id and the
	// preferred label.
	MaxStageNameBytes = 256
	// MaxStageTextBytes bounds Notes and FailureReason, each.
	MaxStageTextBytes = 16 << 10
)

// StageInput is what a stage handler is given: the node it runs, the
// pipeline's goal, a snapshot of the run's context, and how the stage
// before it ended.
type StageInput struct {
	NodeID string `json:"node_id"`
	// Attrs are every attribute of the node in the pipeline's DOT (its
	// defaults and stylesheet applied): the handler's own settings, as
	// text.
	Attrs map[string]string `json:"attrs"`
	Goal  string            `json:"goal"` // the pipeline's goal, "" when it has none
	// Context is a copy of the run's context: what earlier stages wrote
	// and the runner's own keys (outcome, last_response, ...).
	Context map[string]any `json:"context"`
	// Previous is the outcome of the stage that led here; absent for the
	// first stage.
	Previous *StageOutcome `json:"previous,omitempty"`
}

// StageOutcome is a stage handler's answer: the stage's status, hints for
// choosing the next edge, and what to set in the run's context.
type StageOutcome struct {
	Status string `json:"status"` // one of the Stage* constants
	// PreferredLabel picks the outgoing edge of that label.
	PreferredLabel string `json:"preferred_label,omitempty"`
	// SuggestedNextIDs pick the first outgoing edge to one of these nodes.
	SuggestedNextIDs []string `json:"suggested_next_ids,omitempty"`
	// ContextUpdates are set in the run's context after the stage.
	ContextUpdates map[string]any `json:"context_updates,omitempty"`
	Notes          string         `json:"notes,omitempty"`          // for the run's log and summary
	FailureReason  string         `json:"failure_reason,omitempty"` // why the stage failed
}

// stageStatuses are the valid StageOutcome.Status values.
var stageStatuses = []string{StageSuccess, StageFail, StagePartialSuccess, StageRetry, StageSkipped}

// runnerKeys and runnerPrefixes are the context keys the pipeline runner
// owns: it sets them itself (the last status and label, the current node,
// the graph's attributes, retry counts, parallel results) and routes and
// retries by them, so a stage's update of one would corrupt the run.
var (
	runnerKeys     = []string{"outcome", "preferred_label", "current_node", "parallel.results", "base_url", "system_prompt"}
	runnerPrefixes = []string{"graph.", "internal."}
)

// ReservedStageKey reports whether a stage may not set key in its
// ContextUpdates because the pipeline runner owns it: "outcome",
// "preferred_label", "current_node", "parallel.results", every key under
// "graph." or "internal.", and the keys later agent stages take settings
// from, "base_url" and "system_prompt" (a plugin must not point the
// operator's model key at another server, nor rewrite later agents).
func ReservedStageKey(key string) bool {
	for _, k := range runnerKeys {
		if key == k {
			return true
		}
	}
	for _, p := range runnerPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// Check reports the first way o breaks SPEC section 11's rules, naming the
// field: a status not one of the five, a name (context key, suggested id,
// preferred label) empty where it must not be, too long or holding control
// or format characters, a reserved context key, too many context updates
// or suggested ids, context updates or a text over their byte bounds. The
// host refuses an outcome that fails it; a guest may call it in its tests.
func (o *StageOutcome) Check() error {
	valid := false
	for _, s := range stageStatuses {
		valid = valid || o.Status == s
	}
	if !valid {
		return fmt.Errorf("status %s: want one of %s", quoteCut(o.Status), strings.Join(stageStatuses, ", "))
	}
	if o.PreferredLabel != "" {
		if err := checkName(o.PreferredLabel); err != nil {
			return fmt.Errorf("preferred_label: %w", err)
		}
	}
	if n := len(o.SuggestedNextIDs); n > MaxStageSuggestedIDs {
		return fmt.Errorf("suggested_next_ids: %d ids, more than %d", n, MaxStageSuggestedIDs)
	}
	for i, id := range o.SuggestedNextIDs {
		if err := checkName(id); err != nil {
			return fmt.Errorf("suggested_next_ids[%d]: %w", i, err)
		}
	}
	if err := checkUpdates(o.ContextUpdates); err != nil {
		return fmt.Errorf("context_updates: %w", err)
	}
	for _, t := range []struct{ field, text string }{{"notes", o.Notes}, {"failure_reason", o.FailureReason}} {
		if len(t.text) > MaxStageTextBytes {
			return fmt.Errorf("%s: %d bytes, more than %d", t.field, len(t.text), MaxStageTextBytes)
		}
	}
	return nil
}

// checkUpdates checks the keys and the size of a stage's context updates,
// in the keys' order, so that the first problem reported is always the same.
func checkUpdates(updates map[string]any) error {
	if n := len(updates); n > MaxStageContextUpdates {
		return fmt.Errorf("%d keys, more than %d", n, MaxStageContextUpdates)
	}
	keys := make([]string, 0, len(updates))
	for k := range updates {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	size := 0
	for _, k := range keys {
		if err := checkName(k); err != nil {
			return fmt.Errorf("key %w", err)
		}
		if ReservedStageKey(k) {
			return fmt.Errorf("key %s is the pipeline runner's", quoteCut(k))
		}
		v, err := json.Marshal(updates[k])
		if err != nil {
			return fmt.Errorf("key %s: %w", quoteCut(k), err)
		}
		if size += len(k) + len(v); size > MaxStageContextBytes {
			return fmt.Errorf("more than %d bytes of keys and JSON values (at key %s)", MaxStageContextBytes, quoteCut(k))
		}
	}
	return nil
}

// checkName refuses a name that is empty, longer than MaxStageNameBytes,
// not UTF-8, or holds a character that would hide or forge text where the
// name is shown or matched: controls (line breaks, escapes), format
// characters (bidirectional overrides, zero-width characters), line and
// paragraph separators.
func checkName(s string) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case len(s) > MaxStageNameBytes:
		return fmt.Errorf("%s is %d bytes, more than %d", quoteCut(s), len(s), MaxStageNameBytes)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not UTF-8", quoteCut(s))
	}
	for _, r := range s {
		if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
			return fmt.Errorf("%s holds the character %U", quoteCut(s), r)
		}
	}
	return nil
}

// quoteCut quotes s, Go-escaped, cut to 64 bytes: how a message names a
// value a guest chose.
func quoteCut(s string) string {
	const max = 64
	if len(s) <= max {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q...", s[:max])
}

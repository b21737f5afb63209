package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/record"
)

// DefaultReplayTimeout bounds each replayed call (ReplayOptions.Timeout).
const DefaultReplayTimeout = 10 * time.Second

// Bounds of a replay report: the differences listed per call, and each
// value shown.
const (
	maxDiffPaths  = 5
	maxDiffValue  = 200
	maxReplayDiff = 1000 // calls listed in Diffs; the rest are counted only
)

// ReplayOptions say what Loader.Replay replays.
type ReplayOptions struct {
	// Only keeps the calls of these hooks and tools (by name); empty: all.
	Only []string
	// Ignore lists JSON pointers ("/output/time") left out of the
	// comparison of outputs.
	Ignore []string
	// Timeout bounds each call (default DefaultReplayTimeout): a new build
	// that hangs is a timeout fault, a difference.
	Timeout time.Duration
}

// ReplayReport is what Replay found. Its JSON form is what `morph plugin
// replay --json` prints, stable for CI.
type ReplayReport struct {
	File      string         `json:"file"`
	Plugin    string         `json:"plugin"`
	Calls     int            `json:"calls"` // the recorded calls of Plugin replayed
	Same      int            `json:"same"`
	Different int            `json:"different"`
	Skipped   []ReplaySkip   `json:"skipped"`
	Diffs     []ReplayDiff   `json:"diffs"` // the first maxReplayDiff differences
	Manifest  ManifestChange `json:"manifest"`
	// Incomplete is set when the file has no end line (the recorded run
	// crashed): what it holds was replayed.
	Incomplete bool `json:"incomplete,omitempty"`
}

// ReplaySkip is a recorded call Replay did not run, and why.
type ReplaySkip struct {
	Seq    int64  `json:"seq"`
	Reason string `json:"reason"`
}

// ReplayDiff is a call whose fault or output differs from the recording.
// Was and Now are escaped and cut to 200 bytes; Paths are up to five JSON
// pointers into the output where they differ.
type ReplayDiff struct {
	Seq      int64    `json:"seq"`
	Export   string   `json:"export"`
	Hook     string   `json:"hook,omitempty"`
	Tool     string   `json:"tool,omitempty"`
	Session  string   `json:"session,omitempty"`
	FaultWas string   `json:"fault_was"` // "" when the recorded call did not fail
	FaultNow string   `json:"fault_now"`
	Paths    []string `json:"paths,omitempty"`
	Was      string   `json:"was"`
	Now      string   `json:"now"`
}

// ManifestChange is how the new build's manifest differs from the recorded
// one.
type ManifestChange struct {
	HooksAdded   []string `json:"hooks_added,omitempty"`
	HooksRemoved []string `json:"hooks_removed,omitempty"`
	ToolsAdded   []string `json:"tools_added,omitempty"`
	ToolsRemoved []string `json:"tools_removed,omitempty"`
	ToolsChanged []string `json:"tools_changed,omitempty"` // description or parameters
}

// Replay loads cfg (the new build of the recorded plugin cfg.Name, with
// its grants and values) and runs every call the recording f holds of it
// again, in the recorded order and under the recorded sessions, comparing
// each fault and output with the recording. Calls whose input the
// recording cut (record.max_call_bytes) or scrubbed of a secret, and calls
// of hooks or tools the new build lacks, are skipped with the reason. It
// fails (not a report) when the plugin does not load or the file is
// damaged.
func (l *Loader) Replay(ctx context.Context, cfg Config, f *record.File, o ReplayOptions) (*ReplayReport, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultReplayTimeout
	}
	p, err := l.Load(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer p.Close(ctx)
	rep := &ReplayReport{File: f.Path(), Plugin: cfg.Name, Skipped: []ReplaySkip{}, Diffs: []ReplayDiff{}}
	now := p.Manifest()
	for _, info := range f.Plugins {
		if info.Name == cfg.Name {
			var was abi.Manifest
			if json.Unmarshal(info.Manifest, &was) == nil {
				rep.Manifest = manifestChange(was, now)
			}
		}
	}
	hooks, tools := map[string]bool{}, map[string]bool{}
	for _, h := range now.Hooks {
		hooks[h] = true
	}
	for _, t := range now.Tools {
		tools[t.Name] = true
	}
	for {
		c, err := f.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		c.Hook = hookOfExport[c.Export] // from the export, not the file's word for it
		if c.Plugin != cfg.Name || (len(o.Only) > 0 && !slices.Contains(o.Only, c.Hook) && !slices.Contains(o.Only, c.Tool)) {
			continue
		}
		rep.Calls++
		if reason := skipReason(c, f.Header.Limits, hooks, tools); reason != "" {
			rep.Skipped = append(rep.Skipped, ReplaySkip{Seq: c.Seq, Reason: reason})
			continue
		}
		d := replayCall(ctx, p, c, o)
		if d == nil {
			rep.Same++
			continue
		}
		rep.Different++
		if len(rep.Diffs) < maxReplayDiff {
			rep.Diffs = append(rep.Diffs, *d)
		}
	}
	rep.Incomplete = f.End == nil
	return rep, nil
}

// skipReason is why c cannot be replayed, "" when it can.
func skipReason(c *record.Call, lim record.Limits, hooks, tools map[string]bool) string {
	switch {
	case c.InputTruncated:
		return fmt.Sprintf("input over record.max_call_bytes (%d): not recorded", lim.MaxCallBytes)
	case c.OutputTruncated:
		return fmt.Sprintf("output over record.max_call_bytes (%d): nothing to compare with", lim.MaxCallBytes)
	case c.Hook == "" && c.Export != abi.ExportCallTool && c.Export != abi.ExportHandleStage && !strings.HasPrefix(c.Export, guest.MCPExportPrefix):
		// A recording holds hook, tool, stage and MCP calls only: a file
		// naming another export (morph_destroy, morph_alloc) is not run.
		return "export " + safetext.Quote(c.Export, 100) + " is not one a recording holds"
	case len(c.Redacted) > 0:
		return "a secret was scrubbed from it (" + strings.Join(c.Redacted, ", ") + ")"
	case c.Hook != "" && !hooks[c.Hook]:
		return "hook " + c.Hook + " is not in the new build's manifest"
	case c.Export == abi.ExportCallTool && !tools[c.Tool]:
		return "tool " + safetext.Quote(c.Tool, 100) + " is not in the new build's manifest"
	}
	return ""
}

// replayCall runs c on p and is its difference, nil when there is none.
func replayCall(ctx context.Context, p *Plugin, c *record.Call, o ReplayOptions) *ReplayDiff {
	ctx, cancel := context.WithTimeout(engine.WithSession(ctx, c.Session, c.Turn), o.Timeout)
	defer cancel()
	var out []byte
	err := p.CallFunc(ctx, c.Export, c.Input, func(view []byte) error {
		out = append([]byte{}, view...)
		return nil
	})
	d := &ReplayDiff{Seq: c.Seq, Export: c.Export, Hook: c.Hook, Tool: c.Tool, Session: c.Session}
	if c.Fault != nil {
		d.FaultWas = c.Fault.Kind
	}
	var msg string
	if err != nil {
		d.FaultNow, msg = KindName(err), record.FaultMessage(err.Error())
	}
	switch {
	case d.FaultWas != d.FaultNow:
		d.Was, d.Now = shown(c.Output, c.Fault), shown(out, faultOf(d.FaultNow, msg))
		return d
	case c.Fault != nil && c.Fault.Kind == "guest": // a guest's error message is its answer
		if c.Fault.Message == msg {
			return nil
		}
		d.Was, d.Now = safetext.Line(c.Fault.Message, maxDiffValue), safetext.Line(msg, maxDiffValue)
		return d
	case c.Fault != nil: // a trap's or a timeout's message is the runtime's, not compared
		return nil
	}
	paths := diffJSON(c.Output, out, o.Ignore)
	if len(paths) == 0 {
		return nil
	}
	d.Paths, d.Was, d.Now = paths, shown(c.Output, nil), shown(out, nil)
	return d
}

func faultOf(kind, msg string) *record.Fault {
	if kind == "" {
		return nil
	}
	return &record.Fault{Kind: kind, Message: msg}
}

// shown is an output or a fault as a report shows it: one escaped line of
// at most maxDiffValue bytes.
func shown(out []byte, f *record.Fault) string {
	if f != nil {
		return safetext.Line(f.Kind+": "+f.Message, maxDiffValue)
	}
	return safetext.Line(string(out), maxDiffValue)
}

// diffJSON is up to maxDiffPaths JSON pointers where was and now differ,
// once the ignored pointers are left out of both; outputs that are not
// JSON compare as bytes (a difference at "").
func diffJSON(was, now []byte, ignore []string) []string {
	a, aerr := decodeJSON(was)
	b, berr := decodeJSON(now)
	if aerr != nil || berr != nil {
		if bytes.Equal(was, now) {
			return nil
		}
		return []string{""}
	}
	for _, ptr := range ignore {
		a, b = deletePointer(a, ptr), deletePointer(b, ptr)
	}
	var paths []string
	diffValue("", a, b, &paths)
	return paths
}

func decodeJSON(b []byte) (any, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil // an empty output is the hooks' "nothing to say"
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// diffValue adds to paths the pointers under at where a and b differ.
func diffValue(at string, a, b any, paths *[]string) {
	if len(*paths) >= maxDiffPaths {
		return
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := make([]string, 0, len(am)+len(bm))
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			diffValue(at+"/"+escapePointer(k), am[k], bm[k], paths)
		}
		return
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		for i := range as {
			diffValue(at+"/"+strconv.Itoa(i), as[i], bs[i], paths)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*paths = append(*paths, at)
	}
}

func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// deletePointer is v without the member ptr points at (RFC 6901; only
// object members are deleted, array elements are left).
func deletePointer(v any, ptr string) any {
	if ptr == "" || !strings.HasPrefix(ptr, "/") {
		return v
	}
	parts := strings.Split(ptr[1:], "/")
	cur := v
	for i, raw := range parts {
		k := strings.ReplaceAll(strings.ReplaceAll(raw, "~1", "/"), "~0", "~")
		switch m := cur.(type) {
		case map[string]any:
			if i == len(parts)-1 {
				delete(m, k)
				return v
			}
			cur = m[k]
		case []any:
			n, err := strconv.Atoi(k)
			if err != nil || n < 0 || n >= len(m) || i == len(parts)-1 {
				return v
			}
			cur = m[n]
		default:
			return v
		}
	}
	return v
}

// manifestChange is how now differs from was.
func manifestChange(was, now abi.Manifest) ManifestChange {
	var mc ManifestChange
	mc.HooksAdded, mc.HooksRemoved = setChange(was.Hooks, now.Hooks)
	wt, nt := map[string]abi.ToolSpec{}, map[string]abi.ToolSpec{}
	for _, t := range was.Tools {
		wt[t.Name] = t
	}
	for _, t := range now.Tools {
		nt[t.Name] = t
	}
	mc.ToolsAdded, mc.ToolsRemoved = setChange(slices.Collect(maps.Keys(wt)), slices.Collect(maps.Keys(nt)))
	for name, t := range nt {
		if w, ok := wt[name]; ok && !reflect.DeepEqual(w, t) {
			mc.ToolsChanged = append(mc.ToolsChanged, name)
		}
	}
	slices.Sort(mc.ToolsChanged)
	return mc
}

// setChange is what now adds to was and what it removes, each sorted.
func setChange(was, now []string) (added, removed []string) {
	for _, s := range now {
		if !slices.Contains(was, s) {
			added = append(added, s)
		}
	}
	for _, s := range was {
		if !slices.Contains(now, s) {
			removed = append(removed, s)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

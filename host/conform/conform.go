// Package conform is the conformance runner behind `morph plugin test`: it
// loads a module with a host.Loader and calls every hook and tool its
// manifest declares, with built-in sample payloads and the author's own
// fixtures, and checks every answer against the ABI's payload schemas. It
// uses only host's public API, as any host embedding morph's loader could.
//
// The schemas of abi/schema/ live in another Go module (abi), so this package
// cannot embed them, and the CLI must work away from the source tree. The
// answers are instead checked in Go against what those schemas say: each
// output's JSON type, its required fields, the type of every field the
// schema defines, and the few extra constraints the schemas carry (a
// non-blank system_prompt, the plan step statuses). abi's own tests
// (abi/schema_test.go) keep the schema files and the Go types of package abi
// in step field by field, so checking against the types is checking against
// the schemas. Tool params, on the other hand, are checked against each
// tool's own JSON Schema exactly as the engine does (engine.Registry, with
// santhosh-tekuri/jsonschema).
package conform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/internal/safetext"
)

// Report is the outcome of Run.
type Report struct {
	Path     string        `json:"path"`
	Plugin   string        `json:"plugin,omitempty"` // the manifest's name; empty when the module did not load
	Manifest *abi.Manifest `json:"manifest,omitempty"`
	// LoadError is why the module did not load (no call was made); empty when it loaded.
	LoadError string `json:"load_error,omitempty"`
	// LoadTime covers compiling the module (or reading it from the
	// compilation cache), instantiating it and calling morph_describe.
	LoadTime time.Duration `json:"load_ns"`
	// MemoryBytes is the linear memory of the instance that answered morph_describe.
	MemoryBytes uint32 `json:"memory_bytes"`
	Calls       []Call `json:"calls"`
	// Conforms is true when the module loaded and no call failed.
	Conforms bool `json:"conforms"`
	Passed   int  `json:"passed"`  // calls that conform, those with a note included
	Noted    int  `json:"noted"`   // of which with a note
	Skipped  int  `json:"skipped"` // entries that were not called
	Failed   int  `json:"failed"`  // entries that do not conform
	// Instances and Discarded count the instances created (the one of
	// morph_describe included) and those thrown away after a fault.
	Instances uint64 `json:"instances"`
	Discarded uint64 `json:"discarded"`
}

// Call is one call of a conformance run, or one entry that could not
// be called (Status Skip, or Fail for a bad fixture).
type Call struct {
	Name   string `json:"name"`   // the hook or tool name; "destroy" for morph_destroy; a fixture's key when it matches nothing
	Kind   string `json:"kind"`   // Hook, Tool, Destroy or Fixture
	Export string `json:"export"` // the export called, e.g. morph_build_prompt
	Input  string `json:"input"`  // "sample" (built in), or the fixture's key ("word_count-long"), with "#n" when the key has several
	Status string `json:"status"` // OK, Note, Skip or Fail
	// ErrorKind names the failure: timeout, trap, bad_output, output_too_large,
	// input_too_large, guest (a guest-reported error), invalid_fixture,
	// invalid_schema (a tool's parameters schema does not compile), ...
	ErrorKind string `json:"error_kind,omitempty"`
	Error     string `json:"error,omitempty"`
	Note      string `json:"note,omitempty"` // why a conforming call has a note, or why an entry was skipped
	// Output is what the call answered, its JSON or the bytes of an output
	// that is not the payload; beyond 1 KiB, its first and last 512 bytes.
	Output   string        `json:"output,omitempty"`
	Duration time.Duration `json:"duration_ns"`
	// MemoryBytes is the linear memory of the instance after the call, in
	// bytes (MemoryPages in 64 KiB pages); 0 when the call discarded it.
	MemoryBytes uint32 `json:"memory_bytes"`
	MemoryPages uint32 `json:"memory_pages"`
	// NewInstance is true when the call ran on a fresh instance (after a
	// fault), so Duration includes instantiating the module.
	NewInstance bool `json:"new_instance,omitempty"`
	// Err is the failure as an error: a *host.Error (errors.Is with host.ErrTrap,
	// host.ErrTimeout, host.ErrBadOutput, ...), or a fixture's or schema's error.
	Err error `json:"-"`
}

// Call statuses.
const (
	OK   = "ok"   // the call answered a valid payload
	Note = "note" // it conforms, with a note: a tool answered a guest-reported error, a guard denied the sample call
	Skip = "skip" // not called: a hook this host does not know, a tool sample the schema rejects
	Fail = "fail" // the call trapped, timed out, answered no valid payload, or the fixture is bad
)

// Call kinds.
const (
	Hook    = "hook"
	Tool    = "tool"
	Destroy = "destroy" // morph_destroy, called last when the module exports it
	Fixture = "fixture" // a fixture that matches no hook or tool of the plugin
)

// ErrInvalidFixture marks a fixture that is not a payload of the hook or tool
// it is for, or that matches none of the plugin's.
var ErrInvalidFixture = errors.New("invalid fixture")

// Run loads the module of cfg with l and calls, one after the other on one
// instance (a fresh one after a fault, as the host always does):
//
//   - every hook the manifest declares, with a built-in sample input (the
//     examples of abi/SPEC.md as abi values; the prompt input carries the
//     engine's default prompt for the plugin's own tools, and the middleware
//     inputs carry a history when the manifest asks for one), then with each
//     of the author's fixtures for the hook;
//   - every tool, with params built from its parameters schema (see
//     SampleParams), then with each of the author's fixtures for the tool;
//   - morph_destroy, when the module exports it.
//
// cfg.Hooks is ignored: every declared hook is called. fixtures maps a hook
// or tool name, optionally followed by a suffix ("build_prompt",
// "word_count-long"), to input payloads; a key goes to the longest hook or
// tool name it starts with (a hook before a tool of the same name). A hook's
// fixture is its input payload (a PromptInput for build_prompt, ...); a
// tool's is the ToolCallInput morph_call_tool receives, {"tool": ...,
// "params": {...}}, where "tool" may be left out. ReadFixtures reads them
// from a directory.
//
// Verdicts: a call conforms when it answers the export's payload, as the
// schemas of abi/schema/ define it (see the checks in this file). A trap, a
// timeout, output that is not the payload or too large, and a guest-reported
// error from a hook are failures. A tool may reject its input with a
// guest-reported error (SPEC.md section 4): that conforms, with a note. A
// tool sample that does not satisfy the tool's schema (the generator is
// simple), or whose schema asks for more than the sampler builds (see
// SampleParams), is not sent, and the entry is skipped with a note naming
// the tool: add a fixture.
// A fixture that is not the payload it is for, or whose params do not
// satisfy the tool's schema (the engine would never send it), or whose key
// matches nothing, fails without a call.
//
// The error is only for a module that cannot be read (a missing file, not
// WebAssembly); a module that does not load is a report with LoadError set.
func Run(ctx context.Context, l *host.Loader, cfg host.Config, fixtures map[string][]json.RawMessage) (*Report, error) {
	if cfg.Wasm == nil {
		wasm, err := l.ReadModule(cfg.Path)
		if err != nil {
			return nil, err
		}
		cfg.Wasm = wasm
	}
	cfg.Hooks = nil
	rep := &Report{Path: cfg.Path, Calls: []Call{}}
	start := time.Now()
	p, err := l.Load(ctx, cfg)
	rep.LoadTime = time.Since(start)
	if err != nil {
		rep.LoadError = err.Error()
		return rep, nil
	}
	defer p.Close(context.Background())
	m := p.Manifest()
	rep.Plugin, rep.Manifest = m.Name, &m
	rep.MemoryBytes, _ = p.IdleMemory()

	c := &conformer{p: p, ctx: ctx, reg: engine.NewRegistry(), samplesUntil: time.Now().Add(maxConformSampleTime)}
	for _, t := range p.Tools() {
		c.reg.RegisterFrom(engine.PluginSource(p.Name()), t)
	}
	c.samples = hookSamples(m)
	hooks, unknown := declaredHooks(m.Hooks)
	byName, orphans := matchFixtures(fixtures, hooks, m.Tools)

	for _, h := range hooks {
		c.hook(h, "sample", c.samples[h])
		for _, f := range byName[fixtureTarget{Hook, h}] {
			c.hookFixture(h, f)
		}
	}
	for _, h := range unknown {
		c.add(Call{Name: h, Kind: Hook, Export: "morph_" + h, Input: "sample", Status: Skip,
			Note: "a hook this host does not know: it is never called"})
	}
	for _, t := range m.Tools {
		c.tool(t, byName[fixtureTarget{Tool, t.Name}])
	}
	for _, key := range orphans {
		for _, f := range fixtureList(key, fixtures[key]) {
			c.add(badFixture(Call{Name: key, Kind: Fixture, Input: f.label},
				fmt.Sprintf("its name starts with no hook or tool of the plugin (hooks: %s; tools: %s)", orNone(hooks), orNone(toolNames(m.Tools)))))
		}
	}
	if p.Exports(abi.ExportDestroy) {
		c.destroy()
	}

	rep.Calls = append(rep.Calls, c.calls...)
	for _, call := range c.calls {
		switch call.Status {
		case OK:
			rep.Passed++
		case Note:
			rep.Passed++
			rep.Noted++
		case Skip:
			rep.Skipped++
		default:
			rep.Failed++
		}
	}
	rep.Conforms = rep.Failed == 0
	st := p.Stats()
	rep.Instances, rep.Discarded = st.Instantiated, st.Discarded
	return rep, nil
}

// ReadFixtures reads the fixtures of Run from dir: each file named
// *.json is one input payload, keyed by its name without ".json"
// ("word_count-long.json" is the key "word_count-long"). Other files and
// subdirectories are ignored. A file that is not JSON is an error naming it.
func ReadFixtures(dir string) (map[string][]json.RawMessage, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]json.RawMessage{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if !json.Valid(b) {
			var v any
			return nil, fmt.Errorf("fixture %s is not JSON: %v", path, json.Unmarshal(b, &v))
		}
		key := strings.TrimSuffix(e.Name(), ".json")
		out[key] = append(out[key], json.RawMessage(bytes.TrimSpace(b)))
	}
	return out, nil
}

// conformer makes the calls of one Run.
type conformer struct {
	p            *host.Plugin
	ctx          context.Context
	reg          *engine.Registry // the plugin's tools, to validate params as the engine does
	samples      map[string]any   // built-in input of each hook
	samplesUntil time.Time        // when building tool samples is given up
	calls        []Call
}

func (c *conformer) add(call Call) { c.calls = append(c.calls, call) }

// hookOrder is the order of the rows: the engine hooks, the middleware in
// the order a turn calls them, then the pipeline stage handler.
var hookOrder = []string{
	abi.HookBuildPrompt, abi.HookBuildParams, abi.HookOnToolSuccess, abi.HookFallbackFinal,
	abi.HookOnTurnStart, abi.HookBeforeRun, abi.HookOnAction, abi.HookBeforeToolCall,
	abi.HookAfterToolCall, abi.HookOnObservation, abi.HookOnFinal, abi.HookAfterRun,
	abi.HookHandleStage,
}

// declaredHooks splits the manifest's hooks into those this host calls, in
// hookOrder, and those it does not know, in the manifest's order.
func declaredHooks(declared []string) (known, unknown []string) {
	for _, h := range hookOrder {
		if slices.Contains(declared, h) {
			known = append(known, h)
		}
	}
	for _, h := range declared {
		if _, ok := conformHooks[h]; !ok && !slices.Contains(unknown, h) {
			unknown = append(unknown, h)
		}
	}
	return known, unknown
}

// payloadCheck describes a hook's payloads for the runner.
type payloadCheck struct {
	input  func() any // a new input value, to check a fixture's shape
	output func() any // a new output value: the host's own decode (a failure is host.ErrBadOutput and retires the instance)
	// check applies the output schema; note is for a conforming answer worth a remark.
	check func(out []byte) (note string, err error)
}

// hookExport is the export of a hook of conformHooks.
func hookExport(hook string) string {
	h, _ := abi.HookByName(hook)
	return h.Export
}

func newOf[T any]() func() any { return func() any { return new(T) } }

// newOfType is newOf of a reflect.Type.
func newOfType(t reflect.Type) func() any { return func() any { return reflect.New(t).Interface() } }

// answerChecks are the checks of the answers of the hooks that answer
// something (abi.Hook.Mutates); the others must answer nothing.
var answerChecks = map[string]func(out []byte) (note string, err error){
	abi.HookBuildPrompt:    noNote(checkPromptOutput),
	abi.HookBuildParams:    noNote(checkParamsOutput),
	abi.HookFallbackFinal:  noNote(checkFinal),
	abi.HookBeforeRun:      noNote(checkBeforeRunOutput),
	abi.HookBeforeToolCall: checkBeforeToolCallOutput,
	abi.HookAfterToolCall:  noNote(checkAfterToolCallOutput),
	abi.HookHandleStage:    checkStageOutcome,
}

// conformHooks is every hook this host calls, with its payloads: those of
// abi.Hooks, and the checks above.
var conformHooks = func() map[string]payloadCheck {
	m := map[string]payloadCheck{}
	for _, h := range abi.Hooks {
		pc := payloadCheck{input: newOfType(h.Input), output: newOf[json.RawMessage](), check: noNote(checkEmptyOutput)}
		if h.Mutates {
			pc.output, pc.check = newOfType(h.Output), answerChecks[h.Name]
		}
		m[h.Name] = pc
	}
	return m
}()

var toolPayloads = payloadCheck{newOf[abi.ToolCallInput](), newOf[abi.ToolCallOutput](), noNote(checkToolCallOutput)}

func noNote(f func([]byte) error) func([]byte) (string, error) {
	return func(b []byte) (string, error) { return "", f(b) }
}

// hook calls hook h with input, a Go value to encode.
func (c *conformer) hook(h, label string, input any) {
	export := hookExport(h)
	c.add(c.call(Call{Name: h, Kind: Hook, Export: export, Input: label}, mustJSON(input), conformHooks[h], ""))
}

func (c *conformer) hookFixture(h string, f fixtureInput) {
	export := hookExport(h)
	pc := conformHooks[h]
	if err := decodeObject(f.raw, pc.input()); err != nil {
		c.add(badFixture(Call{Name: h, Kind: Hook, Export: export, Input: f.label},
			fmt.Sprintf("not a %s input: %v", h, err)))
		return
	}
	c.add(c.call(Call{Name: h, Kind: Hook, Export: export, Input: f.label}, f.raw, pc, ""))
}

// tool calls tool t with a sample built from its schema, then with its fixtures.
func (c *conformer) tool(t abi.ToolSpec, fixtures []fixtureInput) {
	row := func(label string) Call {
		return Call{Name: t.Name, Kind: Tool, Export: abi.ExportCallTool, Input: label}
	}
	if err := c.schemaError(t.Name); err != nil {
		call := row("sample")
		call.Status, call.ErrorKind, call.Error, call.Err = Fail, "invalid_schema", err.Error(), err
		c.add(call)
		for _, f := range fixtures {
			c.add(badFixture(row(f.label), "not sent: the tool's parameters schema does not compile"))
		}
		return
	}
	params, err := c.sample(t.Parameters)
	if err == nil {
		err = c.reg.Validate(t.Name, params)
	}
	if err != nil {
		call := row("sample")
		call.Status = Skip
		call.Note = fmt.Sprintf("no sample call: could not build params that satisfy the tool's schema (%v); add a fixture %s.json", err, t.Name)
		c.add(call)
	} else {
		raw, _ := json.Marshal(abi.ToolCallInput{Tool: t.Name, Params: params})
		c.add(c.call(row("sample"), raw, toolPayloads, "the tool rejected the sample params "+guest.Truncate(mustJSON(params), 200)))
	}
	for _, f := range fixtures {
		var in abi.ToolCallInput
		if err := decodeObject(f.raw, &in); err != nil {
			c.add(badFixture(row(f.label), fmt.Sprintf("not a ToolCallInput {\"tool\": ..., \"params\": {...}}: %v", err)))
			continue
		}
		raw := f.raw
		switch in.Tool {
		case t.Name:
		case "":
			in.Tool = t.Name
			raw, _ = json.Marshal(in)
		default:
			c.add(badFixture(row(f.label), fmt.Sprintf("names the tool %q, but its key is for %q", in.Tool, t.Name)))
			continue
		}
		if err := c.reg.Validate(t.Name, in.Params); err != nil {
			c.add(badFixture(row(f.label), fmt.Sprintf("the engine would never send it: %v", err)))
			continue
		}
		c.add(c.call(row(f.label), raw, toolPayloads, "the tool reported an error"))
	}
}

// sample is SampleParams within what is left of the run's time for
// samples.
func (c *conformer) sample(schema json.RawMessage) (map[string]any, error) {
	deadline, bound := time.Now().Add(maxSampleTime), maxSampleTime.String()
	if c.samplesUntil.Before(deadline) {
		deadline, bound = c.samplesUntil, maxConformSampleTime.String()+", the bound of all the plugin's samples"
	}
	return sampleParams(schema, deadline, bound)
}

// schemaError is the error of a tool whose parameters schema does not compile.
func (c *conformer) schemaError(name string) error {
	reg := engine.NewRegistry()
	if t, ok := c.reg.Get(name); ok {
		reg.Register(t)
	}
	return reg.Check()
}

// call makes one call and fills in call's verdict. guestNote, when not
// empty, makes a guest-reported error conform with that note (tools only).
func (c *conformer) call(call Call, input []byte, pc payloadCheck, guestNote string) Call {
	p := c.p
	before := p.Stats()
	var out []byte
	start := time.Now()
	err := p.CallFunc(c.ctx, call.Export, input, func(view []byte) error {
		out = append([]byte(nil), view...)
		if len(view) == 0 {
			return nil
		}
		return json.Unmarshal(view, pc.output()) // what the host's adapters do
	})
	call.Duration = time.Since(start)
	after := p.Stats()
	call.NewInstance = after.Instantiated > before.Instantiated
	if after.Discarded == before.Discarded {
		call.MemoryBytes, _ = p.IdleMemory()
		call.MemoryPages = call.MemoryBytes / 65536
	}
	if len(out) > 0 {
		call.Output = clip(out, 1024)
	}
	var note string
	if err == nil {
		if note, err = pc.check(out); err != nil {
			err = &host.Error{Plugin: p.Name(), Export: call.Export, Kind: host.ErrBadOutput, Msg: err.Error()}
		}
	}
	switch {
	case err == nil:
		call.Status, call.Note = OK, note
		if note != "" {
			call.Status = Note
		}
	case guestNote != "" && errors.Is(err, host.ErrGuest):
		var he *host.Error
		errors.As(err, &he)
		call.Status, call.Note = Note, guestNote+": "+he.Msg
	default:
		call.Status, call.ErrorKind, call.Error, call.Err = Fail, errorKindName(err), err.Error(), err
	}
	return call
}

// destroy calls morph_destroy on an instance (see Plugin.CallDestroy).
func (c *conformer) destroy() {
	p := c.p
	call := Call{Name: "destroy", Kind: Destroy, Export: abi.ExportDestroy, Input: "(empty)"}
	before := p.Stats()
	start := time.Now()
	out, mem, err := p.CallDestroy(c.ctx)
	call.MemoryBytes, call.MemoryPages = mem, mem/65536
	if len(out) > 0 {
		call.Output = clip(out, 1024)
	}
	call.Duration = time.Since(start)
	call.NewInstance = p.Stats().Instantiated > before.Instantiated
	if err == nil {
		call.Status = OK
	} else {
		call.Status, call.ErrorKind, call.Error, call.Err = Fail, errorKindName(err), err.Error(), err
	}
	c.add(call)
}

// clip is b, or its first and last n/2 bytes around " ... " when longer than n.
func clip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n/2]) + " ... " + string(b[len(b)-n/2:])
}

func badFixture(call Call, msg string) Call {
	call.Status, call.ErrorKind = Fail, "invalid_fixture"
	call.Err = fmt.Errorf("%w %s: %s", ErrInvalidFixture, call.Input, msg)
	call.Error = call.Err.Error()
	return call
}

// errorKindName is the short name of err's kind, for reports.
func errorKindName(err error) string {
	for _, k := range []struct {
		kind error
		name string
	}{
		{host.ErrTimeout, "timeout"}, {host.ErrTrap, "trap"}, {host.ErrInputTooLarge, "input_too_large"},
		{host.ErrOutputTooLarge, "output_too_large"}, {host.ErrBadOutput, "bad_output"}, {host.ErrABIMismatch, "abi_mismatch"},
		{host.ErrGuest, "guest"}, {host.ErrLoad, "load"}, {host.ErrClosed, "closed"}, {host.ErrCanceled, "canceled"}, {ErrInvalidFixture, "invalid_fixture"},
		{engine.ErrInvalidSchema, "invalid_schema"}, {engine.ErrInvalidParams, "invalid_params"},
	} {
		if errors.Is(err, k.kind) {
			return k.name
		}
	}
	return "error"
}

// ---- fixtures ----

type fixtureInput struct {
	label string
	raw   json.RawMessage
}

type fixtureTarget struct{ kind, name string }

func fixtureList(key string, raws []json.RawMessage) []fixtureInput {
	out := make([]fixtureInput, len(raws))
	for i, raw := range raws {
		out[i] = fixtureInput{label: key, raw: raw}
		if len(raws) > 1 {
			out[i].label = fmt.Sprintf("%s#%d", key, i+1)
		}
	}
	return out
}

// matchFixtures sends each key to the longest hook or tool name it starts
// with, a hook before a tool of the same name; orphans match none. Both come
// sorted by key.
func matchFixtures(fixtures map[string][]json.RawMessage, hooks []string, tools []abi.ToolSpec) (map[fixtureTarget][]fixtureInput, []string) {
	var targets []fixtureTarget
	for _, h := range hooks {
		targets = append(targets, fixtureTarget{Hook, h})
	}
	for _, t := range tools {
		targets = append(targets, fixtureTarget{Tool, t.Name})
	}
	keys := make([]string, 0, len(fixtures))
	for k := range fixtures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := map[fixtureTarget][]fixtureInput{}
	var orphans []string
	for _, key := range keys {
		best := -1
		for i, t := range targets {
			if t.name != "" && strings.HasPrefix(key, t.name) && (best < 0 || len(t.name) > len(targets[best].name)) {
				best = i
			}
		}
		if best < 0 {
			orphans = append(orphans, key)
			continue
		}
		out[targets[best]] = append(out[targets[best]], fixtureList(key, fixtures[key])...)
	}
	return out, orphans
}

// decodeObject decodes a JSON object into v, refusing any other JSON value
// (null included, which encoding/json would take for the zero value).
func decodeObject(raw []byte, v any) error {
	if t := jsonType(raw); t != "object" {
		return fmt.Errorf("a JSON %s, not an object", t)
	}
	return json.Unmarshal(raw, v)
}

// ---- built-in samples ----

// Sample identifiers, from the examples of abi/SPEC.md.
const (
	sampleSession = "s-7f3a"
	sampleTask    = "Count the words of the first sentence: the quick brown fox jumps over the lazy dog."
)

// hookSamples is the built-in input of every hook, the examples of
// abi/SPEC.md as abi values. The tools are the plugin's own (SPEC.md's
// word_count when it has none), the prompt input's default prompt is the
// engine's for them, and the middleware inputs carry a two-message history
// when the manifest asks for one, as the engine would send.
func hookSamples(m abi.Manifest) map[string]any {
	tools := m.Tools
	if len(tools) == 0 {
		tools = []abi.ToolSpec{{Name: "word_count", Description: "Counts words",
			Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}}
	}
	names := toolNames(tools)
	var history []abi.Message
	if m.History {
		history = []abi.Message{
			{Role: "user", Content: "Count the words of the first sentence."},
			{Role: "assistant", Content: `{"thought":"Counted them.","output":5}`},
		}
	}
	usage := abi.Usage{InputTokens: 1700, OutputTokens: 95, TotalTokens: 1795, Cost: 0.0006}
	final := abi.Final{Thought: "Counted with the tool.", Output: 9,
		Plan: &abi.Plan{Summary: "count the words", Steps: []abi.PlanStep{{Step: "count them", Status: abi.StepCompleted}}}}
	finalText, _ := json.Marshal(final)
	params := map[string]any{"text": "the quick brown fox"}
	if len(m.Tools) > 0 {
		if p, err := SampleParams(m.Tools[0].Parameters); err == nil {
			params = p
		}
	}
	return map[string]any{
		abi.HookBuildPrompt: abi.PromptInput{Task: sampleTask, Tools: tools,
			DefaultPrompt: engine.DefaultPrompt(engine.DefaultIdentity, engine.DefaultRules, tools)},
		abi.HookBuildParams: abi.ParamsInput{Task: sampleTask, Options: abi.RunOptions{Model: "gpt-4o-mini", MaxSteps: 15, ParseRetries: 2,
			Parameters: map[string]any{"temperature": 0.2}}},
		abi.HookOnToolSuccess: abi.ToolSuccessInput{Tool: names[0], Step: 3, Params: params, Observation: "4"},
		abi.HookFallbackFinal: abi.FallbackInput{Task: sampleTask,
			Reason: "reached max steps (15); the forced conclusion did not parse: invalid character 'H' looking for beginning of value",
			Steps:  15, Usage: abi.Usage{InputTokens: 1200, OutputTokens: 300, TotalTokens: 1500, Cost: 0.0042}},
		abi.HookOnTurnStart: abi.TurnStart{SessionID: sampleSession, Turn: 2, Input: "And the second sentence?", History: history},
		abi.HookBeforeRun: abi.BeforeRunInput{SessionID: sampleSession, Turn: 2, SystemPrompt: engine.DefaultPrompt(engine.DefaultIdentity, engine.DefaultRules, tools),
			Tools: names, Model: "gpt-4o-mini"},
		abi.HookOnAction: abi.Action{SessionID: sampleSession, Turn: 2, Step: 1, Tool: names[0], Thought: "Count them with the tool.",
			Input: params, History: history},
		abi.HookBeforeToolCall: abi.BeforeToolCallInput{SessionID: sampleSession, Turn: 2, Step: 1, Tool: names[0], Input: params},
		abi.HookAfterToolCall:  abi.AfterToolCallInput{SessionID: sampleSession, Turn: 2, Step: 1, Tool: names[0], Input: params, Output: "4"},
		abi.HookOnObservation: abi.Observation{SessionID: sampleSession, Turn: 2, Step: 1, Tool: names[0], Observation: "4",
			History: history},
		abi.HookOnFinal: abi.TurnFinal{SessionID: sampleSession, Turn: 2, Step: 2, Final: string(finalText), Status: abi.StatusFinal,
			StepUsage: abi.Usage{InputTokens: 900, OutputTokens: 40, TotalTokens: 940, Cost: 0.0003}, TurnUsage: usage},
		abi.HookAfterRun: abi.AfterRunInput{SessionID: sampleSession, Turn: 2, Final: &final, Status: abi.StatusFinal, Usage: usage, Steps: 2},
		abi.HookHandleStage: abi.StageInput{NodeID: "verify", Attrs: map[string]string{"type": "wasm:" + m.Name, "label": "Verify"},
			Goal: sampleTask, Context: map[string]any{"graph.goal": sampleTask, "outcome": abi.StageSuccess, "last_stage": "count",
				"last_response": string(finalText)},
			Previous: &abi.StageOutcome{Status: abi.StageSuccess, Notes: "counted"}},
	}
}

func toolNames(tools []abi.ToolSpec) []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return names
}

// SampleParams builds tool params from a tool's parameters schema, simply:
//
//   - a const, else the first enum value, else the default, else the first
//     of examples, when the schema has one;
//   - an object gets its required properties, each built from its own
//     schema (an empty schema: the string "sample"), and, short of
//     minProperties, its other properties in name order, then additional
//     ones ("sample_1", ...) unless additionalProperties is false; a string
//     is "sample" (padded to minLength, cut to maxLength; a few formats get a
//     value of theirs: date-time, date, time, email, uri, uuid, ipv4); a
//     number or an integer is 1, moved into [minimum, maximum]; a boolean is
//     true; an array gets minItems items; null is null;
//   - with several types, the first that is not null; without one, an object
//     when the schema has properties, required or minProperties, else a
//     string;
//   - anyOf and oneOf take their first branch, allOf merges its branches'
//     properties and required lists; a $ref is followed within the schema
//     ("#/$defs/...", "#/definitions/...").
//
// An empty or absent schema gives {}. Patterns, formats beyond those and
// cross-field rules are not attempted: Run validates the sample against
// the schema and skips the call when it does not satisfy it.
//
// The schema is the plugin's, and a few hundred bytes of it can ask for a
// string of 1e18 bytes or, through $refs, a tree of 10^15 values. So a
// sample nests at most 16 levels (each $ref followed is one), is at most
// 64 KiB of JSON, and is given up after 500ms; a schema beyond those bounds
// is an error matching ErrUnsampleable that names the keyword, where it is,
// and the bound.
func SampleParams(schema json.RawMessage) (map[string]any, error) {
	return sampleParams(schema, time.Now().Add(maxSampleTime), maxSampleTime.String())
}

// sampleParams is SampleParams given up at deadline, which bound describes.
func sampleParams(schema json.RawMessage, deadline time.Time, bound string) (map[string]any, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return map[string]any{}, nil
	}
	if err := abi.CheckDepth(schema, abi.MaxDepth); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsampleable, err)
	}
	var root any
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil, fmt.Errorf("the parameters schema is not JSON: %v", err)
	}
	if b, ok := root.(bool); ok && b {
		return map[string]any{}, nil
	}
	s, ok := root.(map[string]any)
	if !ok {
		return nil, errors.New("the parameters schema is not a JSON object")
	}
	if _, hasType := s["type"]; !hasType && s["properties"] == nil && s["required"] == nil && s["minProperties"] == nil &&
		s["$ref"] == nil && s["allOf"] == nil && s["anyOf"] == nil && s["oneOf"] == nil {
		return map[string]any{}, nil // no constraint on the object's shape
	}
	sm := &sampler{root: root, deadline: deadline, bound: bound}
	v, err := sm.value(s, &schemaPath{tok: "#"}, 0)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the parameters schema describes a JSON %s, not an object", jsonTypeOf(v))
	}
	return obj, nil
}

// The bounds of SampleParams.
const (
	maxSampleDepth = 16       // levels of the sample, each $ref followed counting as one
	maxSampleBytes = 64 << 10 // the sample's JSON, about
	maxSampleTime  = 500 * time.Millisecond
	// maxConformSampleTime bounds the samples of all the tools of one
	// Run: a plugin may declare hundreds of tools.
	maxConformSampleTime = 5 * time.Second
)

// ErrUnsampleable marks a parameters schema that SampleParams gives up on
// because its sample would go beyond the sampler's bounds.
var ErrUnsampleable = errors.New("unsampleable schema")

// sampler builds one sample, counting what it spends.
type sampler struct {
	root     any
	deadline time.Time
	bound    string // what deadline is, for the error: "500ms"
	bytes    int    // JSON bytes of the sample so far
}

// schemaPath is where the sampler is in the schema: a list of JSON pointer
// tokens up to "#" or the $ref last followed, spelled out for errors only.
type schemaPath struct {
	parent *schemaPath
	tok    string
}

func (p *schemaPath) child(toks ...string) *schemaPath {
	for _, t := range toks {
		p = &schemaPath{p, t}
	}
	return p
}

var (
	pointerEscaper   = strings.NewReplacer("~", "~0", "/", "~1")
	pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
)

func (p *schemaPath) String() string {
	var toks []string
	for ; p.parent != nil; p = p.parent {
		toks = append(toks, pointerEscaper.Replace(p.tok))
	}
	toks = append(toks, p.tok)
	slices.Reverse(toks)
	return strings.Join(toks, "/")
}

// unsampleable is the error of a bound the schema at p goes beyond.
func (sm *sampler) unsampleable(p *schemaPath, format string, args ...any) error {
	return fmt.Errorf("%w: %s (at %s)", ErrUnsampleable, fmt.Sprintf(format, args...), safetext.Truncate(p.String(), 200))
}

// spend counts n bytes of the sample's JSON.
func (sm *sampler) spend(n int, p *schemaPath) error {
	if sm.bytes += n; sm.bytes > maxSampleBytes {
		return sm.unsampleable(p, "the sample would be larger than %d bytes", maxSampleBytes)
	}
	return nil
}

// count reads one of the schema's lower bounds on a count (minLength,
// minItems, minProperties): 0 when absent or not positive, an error when
// more bytes than the sample may have, each counted thing taking one at
// least.
func (sm *sampler) count(s map[string]any, key string, p *schemaPath) (int, error) {
	n, ok := number(s[key])
	if !ok || n <= 0 {
		return 0, nil
	}
	if n > maxSampleBytes {
		return 0, sm.unsampleable(p, "%s %g: the sample would be larger than %d bytes", key, n, maxSampleBytes)
	}
	return int(math.Ceil(n)), nil
}

// literal is a value the schema spells out (const, enum, default,
// examples), counted at its size.
func (sm *sampler) literal(v any, p *schemaPath) (any, error) {
	b, _ := json.Marshal(v)
	if err := sm.spend(len(b), p); err != nil {
		return nil, err
	}
	return v, nil
}

func (sm *sampler) value(schema any, p *schemaPath, depth int) (any, error) {
	switch {
	case depth > maxSampleDepth:
		return nil, sm.unsampleable(p, "the schema nests deeper than %d levels (or its $refs loop)", maxSampleDepth)
	case time.Now().After(sm.deadline):
		return nil, sm.unsampleable(p, "building the sample took longer than %s", sm.bound)
	}
	s, ok := schema.(map[string]any)
	if !ok { // true, absent: anything goes
		return sm.literal("sample", p)
	}
	if ref, ok := s["$ref"].(string); ok {
		target, err := sm.resolve(ref)
		if err != nil {
			return nil, err
		}
		return sm.value(target, &schemaPath{tok: ref}, depth+1)
	}
	if v, ok := s["const"]; ok {
		return sm.literal(v, p.child("const"))
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return sm.literal(enum[0], p.child("enum", "0"))
	}
	if v, ok := s["default"]; ok {
		return sm.literal(v, p.child("default"))
	}
	if ex, ok := s["examples"].([]any); ok && len(ex) > 0 {
		return sm.literal(ex[0], p.child("examples", "0"))
	}
	if all, ok := s["allOf"].([]any); ok && len(all) > 0 {
		return sm.value(sm.merge(s, all), p, depth+1)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if branches, ok := s[k].([]any); ok && len(branches) > 0 {
			return sm.value(branches[0], p.child(k, "0"), depth+1)
		}
	}
	switch schemaType(s) {
	case "object":
		return sm.object(s, p, depth)
	case "array":
		n, err := sm.count(s, "minItems", p)
		if err != nil {
			return nil, err
		}
		if err := sm.spend(2, p); err != nil {
			return nil, err
		}
		items := make([]any, 0, n)
		for range n {
			v, err := sm.value(s["items"], p.child("items"), depth+1)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
		}
		return items, nil
	case "integer", "number":
		v := 1.0
		if lo, ok := number(s["minimum"]); ok && v < lo {
			v = lo
		}
		if lo, ok := number(s["exclusiveMinimum"]); ok && v <= lo {
			v = lo + 1
		}
		if hi, ok := number(s["maximum"]); ok && v > hi {
			v = hi
		}
		if hi, ok := number(s["exclusiveMaximum"]); ok && v >= hi {
			v = hi - 1
		}
		if err := sm.spend(24, p); err != nil { // the longest float64 in JSON
			return nil, err
		}
		// An integer beyond 2^53 (a minimum of 1e308) stays a float64,
		// which int64 cannot hold.
		if schemaType(s) == "integer" {
			if v = math.Ceil(v); math.Abs(v) < 1<<53 {
				return int64(v), nil
			}
		}
		return v, nil
	case "boolean":
		return sm.literal(true, p)
	case "null":
		return sm.literal(nil, p)
	default:
		str := "sample"
		switch f, _ := s["format"].(string); f {
		case "date-time":
			str = "2025-01-02T03:04:05Z"
		case "date":
			str = "2025-01-02"
		case "time":
			str = "03:04:05Z"
		case "email":
			str = "sample@example.com"
		case "uri", "url", "iri":
			str = "https://example.com/sample"
		case "uuid":
			str = "00000000-0000-4000-8000-000000000000"
		case "ipv4":
			str = "192.0.2.1"
		}
		n, err := sm.count(s, "minLength", p)
		if err != nil {
			return nil, err
		}
		if len(str) < n {
			str += strings.Repeat("s", n-len(str))
		}
		if max, ok := number(s["maxLength"]); ok && max >= 0 && float64(len(str)) > max {
			str = str[:int(max)]
		}
		return sm.literal(str, p)
	}
}

// object builds an object: its required properties, then, short of
// minProperties, its other properties and additional ones.
func (sm *sampler) object(s map[string]any, p *schemaPath, depth int) (any, error) {
	obj := map[string]any{}
	props, _ := s["properties"].(map[string]any)
	add := func(name string, schema any, at *schemaPath) error {
		if _, done := obj[name]; done {
			return nil
		}
		if err := sm.spend(len(name)+4, p); err != nil { // "name": and a comma
			return err
		}
		v, err := sm.value(schema, at, depth+1)
		if err != nil {
			return err
		}
		obj[name] = v
		return nil
	}
	if err := sm.spend(2, p); err != nil {
		return nil, err
	}
	req, _ := s["required"].([]any)
	for _, r := range req {
		if name, ok := r.(string); ok {
			if err := add(name, props[name], p.child("properties", name)); err != nil {
				return nil, err
			}
		}
	}
	min, err := sm.count(s, "minProperties", p)
	if err != nil || len(obj) >= min {
		return obj, err
	}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		if len(obj) >= min {
			return obj, nil
		}
		if err := add(name, props[name], p.child("properties", name)); err != nil {
			return nil, err
		}
	}
	if extra, ok := s["additionalProperties"].(bool); ok && !extra {
		return obj, nil // too few properties: the validation says so
	}
	for i := 1; len(obj) < min; i++ {
		if err := add(fmt.Sprintf("sample_%d", i), s["additionalProperties"], p.child("additionalProperties")); err != nil {
			return nil, err
		}
	}
	return obj, nil
}

// merge folds allOf's branches into one schema: their properties and
// required lists together, the first type found.
func (sm *sampler) merge(s map[string]any, branches []any) map[string]any {
	out := map[string]any{}
	for k, v := range s {
		if k != "allOf" {
			out[k] = v
		}
	}
	props := map[string]any{}
	if p, ok := s["properties"].(map[string]any); ok {
		for k, v := range p {
			props[k] = v
		}
	}
	req, _ := s["required"].([]any)
	req = slices.Clone(req)
	for _, b := range branches {
		bm, _ := b.(map[string]any)
		for i := 0; i < maxSampleDepth && bm != nil; i++ { // a branch that is only a $ref
			ref, ok := bm["$ref"].(string)
			if !ok {
				break
			}
			t, err := sm.resolve(ref)
			if err != nil {
				break
			}
			bm, _ = t.(map[string]any)
		}
		if bm == nil {
			continue
		}
		if p, ok := bm["properties"].(map[string]any); ok {
			for k, v := range p {
				if _, seen := props[k]; !seen {
					props[k] = v
				}
			}
		}
		if r, ok := bm["required"].([]any); ok {
			req = append(req, r...)
		}
		if _, ok := out["type"]; !ok && bm["type"] != nil {
			out["type"] = bm["type"]
		}
	}
	out["properties"], out["required"] = props, req
	return out
}

// resolve follows a $ref within the schema: "#" or a JSON pointer "#/...".
func (sm *sampler) resolve(ref string) (any, error) {
	if ref == "#" {
		return sm.root, nil
	}
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("$ref %q: only references within the schema are followed", safetext.Truncate(ref, 200))
	}
	v := sm.root
	for _, tok := range strings.Split(ref[2:], "/") {
		tok = pointerUnescaper.Replace(tok)
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", safetext.Truncate(ref, 200))
		}
		if v, ok = m[tok]; !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", safetext.Truncate(ref, 200))
		}
	}
	return v, nil
}

// schemaType is the schema's type, the first that is not null of a list,
// or a guess from its keywords.
func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if name, ok := x.(string); ok && name != "null" {
				return name
			}
		}
		if len(t) > 0 {
			return "null"
		}
	}
	switch {
	case s["properties"] != nil || s["required"] != nil || s["minProperties"] != nil:
		return "object"
	case s["items"] != nil:
		return "array"
	}
	return "string"
}

func number(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok
}

// ---- output checks: the schemas of abi/schema/, in Go ----

// jsonType is the JSON type of a raw value: object, array, string, number,
// boolean or null ("empty" for no bytes).
func jsonType(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func jsonTypeOf(v any) string {
	b, _ := json.Marshal(v)
	return jsonType(b)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// field is what a schema says of one property: whether it is required and
// the JSON types it may have (none listed: any).
type field struct {
	name     string
	required bool
	types    []string
}

// checkPayload checks out against an object schema of fields: out must be a
// JSON object (or, with emptyOK, no bytes at all: the zero payload), with
// every required field and every listed field of an allowed type. Field
// names are exact: encoding/json would match them case-insensitively.
// Unknown fields are allowed (SPEC.md section 7).
func checkPayload(typ string, out []byte, emptyOK bool, fields ...field) (map[string]json.RawMessage, error) {
	if len(bytes.TrimSpace(out)) == 0 {
		if emptyOK {
			return map[string]json.RawMessage{}, nil
		}
		return nil, fmt.Errorf("empty output: the export must answer a %s object", typ)
	}
	var obj map[string]json.RawMessage
	if t := jsonType(out); t != "object" {
		return nil, fmt.Errorf("a JSON %s, not a %s object", t, typ)
	}
	if err := json.Unmarshal(out, &obj); err != nil {
		return nil, fmt.Errorf("not a %s: %v", typ, err)
	}
	var errs []string
	for _, f := range fields {
		raw, ok := obj[f.name]
		if !ok {
			if f.required {
				errs = append(errs, fmt.Sprintf("%s lacks the required field %q", typ, f.name))
			}
			continue
		}
		if t := jsonType(raw); len(f.types) > 0 && !slices.Contains(f.types, t) &&
			!(t == "number" && slices.Contains(f.types, "integer")) {
			errs = append(errs, fmt.Sprintf("%s.%s is a JSON %s, want %s", typ, f.name, t, strings.Join(f.types, " or ")))
		}
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return obj, nil
}

// checkPromptOutput: prompt_output.json; system_prompt is required and not blank.
func checkPromptOutput(out []byte) error {
	obj, err := checkPayload("PromptOutput", out, false, field{"system_prompt", true, []string{"string"}})
	if err != nil {
		return err
	}
	var s string
	if json.Unmarshal(obj["system_prompt"], &s); strings.TrimSpace(s) == "" {
		return errors.New("PromptOutput.system_prompt is blank: morph would use its default prompt")
	}
	return nil
}

// checkParamsOutput: params_output.json; the zero payload is no override.
func checkParamsOutput(out []byte) error {
	_, err := checkPayload("ParamsOutput", out, true, field{"parameters", false, []string{"object", "null"}})
	return err
}

// checkFinal: final.json and plan.json.
func checkFinal(out []byte) error {
	obj, err := checkPayload("Final", out, false,
		field{"thought", true, []string{"string"}}, field{"output", true, nil}, field{"plan", false, []string{"object"}})
	if err != nil {
		return err
	}
	raw, ok := obj["plan"]
	if !ok {
		return nil
	}
	plan, err := checkPayload("Plan", raw, false,
		field{"thought", false, []string{"string"}}, field{"summary", false, []string{"string"}},
		field{"steps", true, []string{"array"}}, field{"risks", false, []string{"array"}},
		field{"questions", false, []string{"array"}}, field{"completion", false, []string{"string"}})
	if err != nil {
		return fmt.Errorf("Final.plan: %v", err)
	}
	var steps []json.RawMessage
	if err := json.Unmarshal(plan["steps"], &steps); err != nil {
		return fmt.Errorf("Final.plan.steps: %v", err)
	}
	for i, st := range steps {
		if jsonType(st) == "string" {
			continue
		}
		step, err := checkPayload("PlanStep", st, false, field{"step", true, []string{"string"}}, field{"status", false, []string{"string"}})
		if err != nil {
			return fmt.Errorf("Final.plan.steps[%d]: %v (a step is a string or an object)", i, err)
		}
		if raw, ok := step["status"]; ok {
			var status string
			json.Unmarshal(raw, &status)
			if status != abi.StepPending && status != abi.StepInProgress && status != abi.StepCompleted {
				return fmt.Errorf("Final.plan.steps[%d].status is %q, want %s, %s or %s", i, status, abi.StepPending, abi.StepInProgress, abi.StepCompleted)
			}
		}
	}
	return nil
}

// checkToolCallOutput: tool_call_output.json; output is required.
func checkToolCallOutput(out []byte) error {
	_, err := checkPayload("ToolCallOutput", out, false, field{"output", true, []string{"string"}})
	return err
}

// checkBeforeRunOutput: before_run_output.json; tools may also be null
// (unchanged), as SPEC.md section 10.1 says.
func checkBeforeRunOutput(out []byte) error {
	obj, err := checkPayload("BeforeRunOutput", out, true,
		field{"system_prompt", false, []string{"string"}}, field{"tools", false, []string{"array", "null"}})
	if err != nil {
		return err
	}
	var tools []string
	if raw, ok := obj["tools"]; ok {
		if err := json.Unmarshal(raw, &tools); err != nil {
			return fmt.Errorf("BeforeRunOutput.tools is not a list of strings: %v", err)
		}
	}
	return nil
}

// checkBeforeToolCallOutput: before_tool_call_output.json; input may also be
// null (unchanged). A denial conforms, with a note.
func checkBeforeToolCallOutput(out []byte) (string, error) {
	obj, err := checkPayload("BeforeToolCallOutput", out, true,
		field{"input", false, []string{"object", "null"}}, field{"deny", false, []string{"boolean"}}, field{"reason", false, []string{"string"}})
	if err != nil {
		return "", err
	}
	var deny bool
	var reason string
	json.Unmarshal(obj["deny"], &deny)
	json.Unmarshal(obj["reason"], &reason)
	if deny {
		return fmt.Sprintf("denies the sample call (reason %q)", reason), nil
	}
	return "", nil
}

// checkAfterToolCallOutput: after_tool_call_output.json.
func checkAfterToolCallOutput(out []byte) error {
	_, err := checkPayload("AfterToolCallOutput", out, true, field{"output", false, []string{"string", "null"}})
	return err
}

// checkStageOutcome: stage_outcome.json, and the rules of SPEC.md section
// 11.2 the host applies (abi.StageOutcome.Check). A failed stage conforms,
// with a note: a handler that checks something may well fail the sample.
func checkStageOutcome(out []byte) (string, error) {
	if _, err := checkPayload("StageOutcome", out, false,
		field{"status", true, []string{"string"}}, field{"preferred_label", false, []string{"string"}},
		field{"suggested_next_ids", false, []string{"array"}}, field{"context_updates", false, []string{"object"}},
		field{"notes", false, []string{"string"}}, field{"failure_reason", false, []string{"string"}}); err != nil {
		return "", err
	}
	var o abi.StageOutcome
	if err := json.Unmarshal(out, &o); err != nil {
		return "", fmt.Errorf("StageOutcome: %v", err)
	}
	if err := o.Check(); err != nil {
		return "", fmt.Errorf("StageOutcome.%v", err)
	}
	if o.Status == abi.StageFail {
		return fmt.Sprintf("fails the sample stage (reason %q)", o.FailureReason), nil
	}
	return "", nil
}

// checkEmptyOutput: observing hooks and on_tool_success answer nothing, or
// JSON the host ignores; the host's decode has checked it is JSON.
func checkEmptyOutput([]byte) error { return nil }

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

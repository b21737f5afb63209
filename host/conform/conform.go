// Package conform is the conformance runner behind `morph plugin test`: it
// loads a module with a host.Loader and calls every hook and tool its
// manifest declares, with built-in sample payloads and the author's own
// fixtures, and checks every answer against the ABI's payload schemas. It
// uses only host's public API, as any host embedding morph's loader could.
//
// Every answer is checked against its payload's JSON Schema of
// abi/schema/, embedded by package abi/schema (so the CLI needs no source
// tree), with santhosh-tekuri/jsonschema; a failure names the schema
// keyword and the JSON pointer of the value that breaks it. What a schema
// cannot say (the host's byte-counted rules on a stage outcome) is checked
// in Go after it. Tool params are checked against each tool's own JSON
// Schema exactly as the engine does (engine.Registry).
package conform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
)

// Report is the outcome of Run.
type Report struct {
	Path     string        `json:"path"`
	Plugin   string        `json:"plugin,omitempty"` // the manifest's name; empty when the module did not load
	Manifest *abi.Manifest `json:"manifest,omitempty"`
	// Loader is the loader that ran the module (host.LoaderNative or
	// host.LoaderExtism); empty when it did not load.
	Loader string `json:"loader,omitempty"`
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
// schemas of abi/schema/ define it and as the host checks it. A trap, a
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
	rep.Plugin, rep.Manifest, rep.Loader = m.Name, &m, p.Loader()
	rep.MemoryBytes, _ = p.IdleMemory()

	c := &conformer{p: p, ctx: ctx, reg: engine.NewRegistry(), schemaLimits: cfg.SchemaLimits, samplesUntil: time.Now().Add(maxConformSampleTime)}
	c.reg.SetSchemaLimits(cfg.SchemaLimits)
	ext, err := p.Extender(engine.MiddlewareConfig{}).Open(ctx) // p stays ours: no engine is given it
	if err != nil {
		return nil, err
	}
	for _, t := range ext.Tools {
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

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// Package pdk is the plugin development kit for writing morph plugins in Go.
//
// A plugin is a WebAssembly module that implements morph's plugin ABI v1
// (abi/SPEC.md in the morph repository). With this package a plugin author
// writes plain Go functions over the wire types of package abi and registers
// them; the package does the rest: the ABI marker, morph_alloc and the memory
// exchange, JSON decoding and encoding, the manifest returned by
// morph_describe, and turning errors (and, built by standard Go, panics) into
// guest-reported errors.
//
// Register everything in an init function (or in package-level variable
// initializers). A module built with -buildmode=c-shared is a WASI reactor:
// the host runs its _initialize export, which runs package initialization,
// but main is never called. main must still exist, and is usually empty:
//
//	package main
//
//	import (
//		"github.com/morphhost/morph/abi"
//		"github.com/morphhost/morph/guests/go/pdk"
//	)
//
//	func init() {
//		pdk.Plugin("hello", "0.1.0")
//		pdk.BuildPrompt(func(in abi.PromptInput) (abi.PromptOutput, error) {
//			return abi.PromptOutput{SystemPrompt: in.DefaultPrompt + "\n\nBe brief."}, nil
//		})
//	}
//
//	func main() {}
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o hello.wasm .
//
// or with TinyGo 0.34 (see the README).
//
// What a panic in a hook does depends on the compiler. Built by standard Go,
// the package recovers it and the host gets a guest-reported error
// ("morph_build_prompt: panic: ..."), the instance staying in service. Built
// by TinyGo, which does not implement recover on WebAssembly, a panic traps:
// the call fails with the host's trap error and the host discards the
// instance, with the state it kept. In a TinyGo plugin, report a failure by
// returning an error.
//
// Every export of ABI v1 is present in every module, whichever hooks are
// registered; the manifest lists only the registered hooks, and an
// unregistered hook called anyway answers a guest-reported error.
//
// State kept in package variables lives in one instance. The host may run
// several instances of a module at once and replaces an instance after a trap
// or a timeout, so such state is a per-instance cache, never a store.
//
// Calls on one instance never overlap, so hooks need no locking. A hook must
// not start goroutines that outlive the call.
package pdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/morphhost/morph/abi"
)

// Capabilities a plugin may ask of the host (abi.Manifest.Capabilities).
// The host grants log and config to every plugin; http, fs and env only as
// its operator configures the plugin, and it compares the request with the
// grants at load, so ask for what the plugin uses.
const (
	// CapLog is the host function log, used by Log and Logf.
	CapLog = abi.CapabilityLog
	// CapConfig is the host function config_get, used by Config.
	CapConfig = abi.CapabilityConfig
	// CapHTTP is the host function http_request, used by HTTP.
	CapHTTP = abi.CapabilityHTTP
	// CapFS is the directories the operator grants, read with package os
	// (os.ReadFile("/notes/a.txt")): WASI preopens, read-only unless granted
	// writable.
	CapFS = abi.CapabilityFS
	// CapEnv is the environment variables the operator names, read with
	// os.Getenv; the guest sees no others.
	CapEnv = abi.CapabilityEnv
)

// DefaultSchema is the parameter schema of a tool registered with an empty
// schema: any JSON object.
const DefaultSchema = `{"type":"object"}`

// registry is everything the author registered. There is one per module:
// registration happens during package initialization, before any export is
// called.
type registry struct {
	name, version string

	handlers   map[string]handler         // registered hooks, by hook name (abi.Hook*)
	onDestroy  func()                     // run by morph_destroy
	onReplaced func(abi.InstanceReplaced) // run by morph_instance_replaced
	history    bool                       // WantHistory: the manifest's history
	requires   []string                   // Requires: the manifest's requires

	tools   []abi.ToolSpec
	toolFns map[string]func(map[string]any) (string, error)

	declared []string        // from Capabilities; nil when it was never called
	used     map[string]bool // capabilities used so far (Log, Config)

	errs []string // registration mistakes, reported by morph_describe
}

var reg = newRegistry()

func newRegistry() *registry {
	return &registry{handlers: map[string]handler{}, toolFns: map[string]func(map[string]any) (string, error){}, used: map[string]bool{}}
}

func (r *registry) fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// Plugin sets the plugin's name and version, as the manifest reports them.
// It is required: without a name, morph_describe fails and the host refuses
// to load the module.
func Plugin(name, version string) {
	if strings.TrimSpace(name) == "" {
		reg.fail("pdk.Plugin: empty plugin name")
	}
	reg.name, reg.version = name, version
}

// register records fn as the hook name's handler, or the registration
// mistake (nil fn, a second registration).
func register[In, Out any](name string, fn func(In) (Out, error)) {
	if checkHook(name, fn == nil, reg.handlers[name] != nil) {
		reg.handlers[name] = func(input []byte) ([]byte, error) { return hook(name, fn, input) }
	}
}

// observe registers an observing hook: it answers nothing (empty output).
func observe[In any](name string, fn func(In) error) {
	var h func(In) (none, error)
	if fn != nil {
		h = func(in In) (none, error) { return none{}, fn(in) }
	}
	register(name, h)
}

func checkHook(name string, isNil, dup bool) bool {
	switch {
	case isNil:
		reg.fail("pdk: hook %s registered with a nil function", name)
	case dup:
		reg.fail("pdk: hook %s registered twice", name)
	default:
		return true
	}
	return false
}

// Tool registers a tool the model can call. schemaJSON is the JSON Schema of
// the params object (empty: DefaultSchema); the host validates every call
// against it before fn sees the params, so fn may trust their shape. fn's
// string is the observation the model sees; an error it returns reaches the
// model as "error: <message>".
//
// A tool with an empty or duplicate name, a nil fn, or a schema that is not a
// JSON object is a registration mistake: morph_describe then fails, naming
// it, and the host refuses to load the module.
func Tool(name, description, schemaJSON string, fn func(params map[string]any) (string, error)) {
	if strings.TrimSpace(schemaJSON) == "" {
		schemaJSON = DefaultSchema
	}
	var obj map[string]json.RawMessage
	switch {
	case strings.TrimSpace(name) == "":
		reg.fail("pdk.Tool: empty tool name")
		return
	case fn == nil:
		reg.fail("pdk.Tool %q: nil function", name)
		return
	case reg.toolFns[name] != nil:
		reg.fail("pdk.Tool %q: registered twice", name)
		return
	case json.Unmarshal([]byte(schemaJSON), &obj) != nil || obj == nil:
		reg.fail("pdk.Tool %q: the schema is not a JSON object", name)
		return
	}
	reg.tools = append(reg.tools, abi.ToolSpec{Name: name, Description: description, Parameters: json.RawMessage(schemaJSON)})
	reg.toolFns[name] = fn
}

// CallID is the ID of the tool call being served (ToolCallInput's
// call_id), "" outside one or from a host before it. It is opaque, no
// other call's, and the same when the host makes the call again (on
// Temporal, a worker that died while the tool ran, its result never
// recorded): a tool whose call has effects outside it (an append, a
// message sent) can keep the IDs it served and answer a repeated one as
// it did the first time.
func CallID() string { return callID }

// callID is CallID's answer, set for the length of a tool's call (a guest
// serves one call at a time).
var callID string

// Capabilities declares what the plugin asks of the host (CapLog,
// CapConfig, CapHTTP, CapFS, CapEnv). Without a call to Capabilities the
// manifest lists log and config, since any hook may call Log or Config; a
// call narrows the list to the declared capabilities plus those already used
// during initialization. A plugin that uses HTTP, files or the environment
// declares them, so that the host can tell its operator what to grant.
// Unknown names are passed on to the host as they are.
func Capabilities(caps ...string) {
	if reg.declared == nil {
		reg.declared = []string{}
	}
	reg.declared = append(reg.declared, caps...)
}

// Log writes msg to the host's log under the plugin's name, at level (the
// abi.Log* values, which are log/slog's: abi.LogDebug, abi.LogInfo,
// abi.LogWarn, abi.LogError). Outside WebAssembly it writes to stderr.
func Log(level int, msg string) {
	reg.used[CapLog] = true
	hostLog(int32(level), msg)
}

// Logf is Log with fmt.Sprintf formatting.
func Logf(level int, format string, args ...any) {
	Log(level, fmt.Sprintf(format, args...))
}

// configBufSize is the first buffer Config offers the host; a longer value
// costs one more host call.
const configBufSize = 256

// Config returns the plugin's own config value for key (from the
// [plugins.config] table of the host's morph.toml) and whether it is set.
// Outside WebAssembly nothing is set.
func Config(key string) (string, bool) {
	reg.used[CapConfig] = true
	buf := make([]byte, configBufSize)
	for try := 0; try < 4; try++ { // a value cannot change between calls; the bound only guards against a buggy host
		n := hostConfigGet(key, buf)
		switch {
		case n < 0:
			return "", false
		case int(n) <= len(buf):
			return string(buf[:n]), true
		}
		buf = make([]byte, n)
	}
	return "", false
}

// HTTP sends req through the host's http_request and returns the response,
// after any redirects. It needs the http capability: the host sends the
// request only to the hosts its operator allows the plugin (every redirect
// hop included), within its time and size limits. A denial or a failure is
// the error, with the host's message; a 4xx or 5xx status is a response,
// not an error. Bodies are text. Outside WebAssembly it fails, unless a
// test of this package sets nativeHTTP.
func HTTP(req abi.HTTPRequest) (abi.HTTPResponse, error) {
	reg.used[CapHTTP] = true
	in, err := json.Marshal(req)
	if err != nil {
		return abi.HTTPResponse{}, fmt.Errorf("pdk.HTTP: %w", err)
	}
	out, isErr, err := hostHTTP(in)
	var resp abi.HTTPResponse
	switch {
	case err != nil:
		return resp, fmt.Errorf("pdk.HTTP: %w", err)
	case isErr && len(out) == 0:
		return resp, errors.New("pdk.HTTP: the host's answer could not be allocated (the plugin's memory is full: raise memory_mb)")
	case isErr:
		return resp, fmt.Errorf("pdk.HTTP: %s", out)
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return resp, fmt.Errorf("pdk.HTTP: the host's answer is not an HTTPResponse: %w", err)
	}
	return resp, nil
}

// manifest is what morph_describe answers, or the registration mistakes.
func (r *registry) manifest() (abi.Manifest, error) {
	if r.name == "" && len(r.errs) == 0 {
		r.fail("pdk.Plugin(name, version) was not called (register in an init function: main is not run in a c-shared module)")
	}
	if len(r.errs) > 0 {
		return abi.Manifest{}, fmt.Errorf("plugin registration: %s", strings.Join(r.errs, "; "))
	}
	m := abi.Manifest{Name: r.name, Version: r.version, ABIVersion: abi.Version, Hooks: []string{}, Tools: r.tools, History: r.history, Requires: r.requires}
	for _, h := range abi.Hooks {
		if r.handlers[h.Name] != nil {
			m.Hooks = append(m.Hooks, h.Name)
		}
	}
	m.Capabilities = r.capabilities()
	return m, nil
}

func (r *registry) capabilities() []string {
	if r.declared == nil {
		return []string{CapLog, CapConfig}
	}
	var caps []string
	seen := map[string]bool{}
	add := func(c string) {
		if c != "" && !seen[c] {
			seen[c] = true
			caps = append(caps, c)
		}
	}
	for _, c := range []string{CapLog, CapConfig} { // the known ones first, in a fixed order
		if r.used[c] {
			add(c)
		}
		for _, d := range r.declared {
			if d == c {
				add(c)
			}
		}
	}
	for _, d := range r.declared {
		add(d)
	}
	return caps
}

package mcp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/internal/testenv"
	"github.com/morphhost/morph/mcp"
)

// TestMain keeps the tests to a temporary home and cache directory, and
// the default logger quiet.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	testenv.Main(m)
}

// shared is the runtime the tests share: loading the plugins takes seconds,
// and each test ends the sessions it opens, so they see the plugins as the
// one before left them. The process's exit releases it.
var shared struct {
	once sync.Once
	rt   *config.Runtime
	err  error
}

// openRuntime is a morph.toml with three plugins opened: "rh", the Rust
// guest examples/rust-hooks (native ABI: reverse, char_stats; small, so
// quick to compile) in session isolation; "ext", the Extism fixture
// extism_tools_http (tools fail and crash, a trap); and "spin", the fixture
// spin_tool (its tool spins until stopped) in session isolation with a
// five-minute deadline; beside the built-in tools.
func openRuntime(t *testing.T) *config.Runtime {
	t.Helper()
	rh := absolute(t, testenv.Built(t, filepath.Join("..", "examples", "rust-hooks", "target", "wasm32-unknown-unknown", "release", "rust_hooks.wasm"), "rust"))
	ext := absolute(t, testenv.Built(t, filepath.Join("..", "guests", "testdata", "extism_tools_http.wasm"), "fixtures"))
	spin := absolute(t, testenv.Built(t, filepath.Join("..", "guests", "testdata", "spin_tool.wasm"), "fixtures"))
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "mcp-test")
		if err != nil {
			shared.err = err
			return
		}
		toml := "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n" +
			"[[plugins]]\nname = \"rh\"\npath = " + strconv.Quote(rh) + "\nisolation = \"session\"\n" +
			"[[plugins]]\nname = \"ext\"\npath = " + strconv.Quote(ext) + "\n" +
			"[[plugins]]\nname = \"spin\"\npath = " + strconv.Quote(spin) + "\nisolation = \"session\"\ntimeout = \"5m\"\n"
		replies := `{"model":"scripted-test","replies":[{"reply":{"type":"final","final":{"thought":"t","output":"ok"}}}]}`
		for name, content := range map[string]string{"morph.toml": toml, "replies.json": replies} {
			if shared.err = os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); shared.err != nil {
				return
			}
		}
		cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
		if err != nil {
			shared.err = err
			return
		}
		cfg.Wasm.CacheDir = testenv.CompileCache()
		shared.rt, shared.err = cfg.Open(context.Background(), nil)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.rt
}

// absolute is path made absolute: the config resolves relative paths
// against its own directory.
func absolute(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// newServer serves eng.
func newServer(t *testing.T, eng *engine.Engine, opts mcp.Options) *mcp.Server {
	t.Helper()
	srv, err := mcp.NewServer(context.Background(), eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// connect starts one session of srv over the SDK's in-memory transport and
// connects the SDK's client to it. done gets Serve's error when the session
// has ended. At the test's end the client closes, and the session's end is
// waited for, so that the next test finds no session of this one open.
func connect(t *testing.T, srv *mcp.Server) (cs *sdk.ClientSession, done <-chan error) {
	t.Helper()
	st, ct := sdk.NewInMemoryTransports()
	served, ended := make(chan error, 1), make(chan struct{})
	go func() {
		served <- srv.Serve(context.Background(), st)
		close(ended)
	}()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		select {
		case <-ended:
		case <-time.After(time.Minute):
			t.Error("Serve did not return within a minute of the client closing")
		}
	})
	return cs, served
}

// call calls tool with args, failing t on a protocol error.
func call(t *testing.T, cs *sdk.ClientSession, tool string, args any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: protocol error %v, want a result", tool, err)
	}
	return res
}

// text is a result's text content, joined.
func text(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// openSessions is how many sessions the plugin called name holds
// instances for, as `morph plugin status` reports it.
func openSessions(t *testing.T, eng *engine.Engine, name string) int {
	t.Helper()
	for _, p := range eng.Status().Plugins {
		if p.Name != name {
			continue
		}
		d, ok := p.Details.(*host.Details)
		if !ok || d.Sessions == nil {
			t.Fatalf("plugin %s reports no sessions (details %#v)", name, p.Details)
		}
		return d.Sessions.Open
	}
	t.Fatalf("no plugin %s in the engine's status", name)
	return 0
}

// Every tool of the engine is listed, with its schema as the registry has it.
func TestListTools(t *testing.T) {
	rt := openRuntime(t)
	srv := newServer(t, rt.Engine, mcp.Options{})
	cs, _ := connect(t, srv)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]*sdk.Tool{}
	for _, tl := range res.Tools {
		listed[tl.Name] = tl
	}
	specs := rt.Engine.Registry().Specs()
	if len(listed) != len(specs) {
		t.Errorf("listed %d tools, the engine has %d", len(listed), len(specs))
	}
	for _, spec := range specs {
		tl, ok := listed[spec.Name]
		if !ok {
			t.Errorf("tool %s is not listed", spec.Name)
			continue
		}
		if tl.Description != spec.Description {
			t.Errorf("tool %s: description %q, want %q", spec.Name, tl.Description, spec.Description)
		}
	}
	wc, ok := listed["reverse"]
	if !ok {
		t.Fatal("reverse (plugin rh) is not listed")
	}
	got, err := json.Marshal(wc.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Type     string   `json:"type"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(got, &schema); err != nil || schema.Type != "object" || !slices.Equal(schema.Required, []string{"text"}) {
		t.Errorf("reverse's schema %s (%v), want rust-hooks' object schema requiring text", got, err)
	}
}

// A call runs the plugin's tool in the engine and answers its output; a
// trapping tool, invalid params, a name that is no tool and arguments that
// are not an object are each a failed call, and the session goes on.
func TestCallTool(t *testing.T) {
	rt := openRuntime(t)
	cs, _ := connect(t, newServer(t, rt.Engine, mcp.Options{}))

	res := call(t, cs, "reverse", map[string]any{"text": "one two three"})
	if res.IsError || text(res) != "eerht owt eno" {
		t.Errorf("reverse: isError %v, text %q, want %q", res.IsError, text(res), "eerht owt eno")
	}

	res = call(t, cs, "reverse", map[string]any{"text": strings.Repeat("x", 10001)})
	if !res.IsError || !strings.Contains(text(res), "reverse takes at most 10000") {
		t.Errorf("reverse of 10001 characters: isError %v, text %q, want the plugin's own error", res.IsError, text(res))
	}

	res = call(t, cs, "crash", map[string]any{})
	if !res.IsError || !strings.Contains(text(res), "plugin trapped") {
		t.Errorf("crash: isError %v, text %q, want a failed call saying the plugin trapped", res.IsError, text(res))
	}

	res = call(t, cs, "reverse", map[string]any{"txt": "x"})
	if !res.IsError || !strings.Contains(text(res), "missing property 'text'") {
		t.Errorf("reverse without text: isError %v, text %q, want a failed call naming the field", res.IsError, text(res))
	}

	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "no_such_tool"})
	if err == nil || !strings.Contains(err.Error(), "no_such_tool") {
		t.Errorf("no_such_tool: error %v, want the SDK's unknown-tool error naming it", err)
	}

	res = call(t, cs, "reverse", []int{1, 2})
	if !res.IsError || !strings.Contains(text(res), "JSON object") {
		t.Errorf("arguments [1,2]: isError %v, text %q, want a failed call saying they must be an object", res.IsError, text(res))
	}

	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	res = call(t, cs, "reverse", json.RawMessage(`{"text":`+deep+`}`))
	if !res.IsError || !strings.Contains(text(res), "deep") {
		t.Errorf("arguments 200 deep: isError %v, text %q, want a failed call saying they nest too deep", res.IsError, text(res))
	}

	res = call(t, cs, "reverse", map[string]any{"text": "still here"})
	if res.IsError || text(res) != "ereh llits" {
		t.Errorf("reverse after the failures: isError %v, text %q, want %q", res.IsError, text(res), "ereh llits")
	}
}

// An MCP session is a morph session: a plugin in session isolation keeps
// one instance per client session while it lasts, and releases it when the
// client ends the session.
func TestSessionIsolation(t *testing.T) {
	rt := openRuntime(t)
	srv := newServer(t, rt.Engine, mcp.Options{})
	a, doneA := connect(t, srv)
	b, doneB := connect(t, srv)
	for _, cs := range []*sdk.ClientSession{a, b, a} {
		if res := call(t, cs, "reverse", map[string]any{"text": "x"}); res.IsError {
			t.Fatalf("reverse: %s", text(res))
		}
	}
	if n := openSessions(t, rt.Engine, "rh"); n != 2 {
		t.Errorf("%d sessions open in plugin rh after two clients called, want 2", n)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, doneA); err != nil {
		t.Errorf("Serve of the session the client closed: %v, want nil", err)
	}
	if n := openSessions(t, rt.Engine, "rh"); n != 1 {
		t.Errorf("%d sessions open in plugin rh after one client closed, want 1", n)
	}
	b.Close()
	wait(t, doneB)
	if n := openSessions(t, rt.Engine, "rh"); n != 0 {
		t.Errorf("%d sessions open in plugin rh after both clients closed, want 0", n)
	}
}

// wait is what Serve returned, failing t when it does not return within a
// generous bound.
func wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("Serve did not return within a minute of the client closing")
		return nil
	}
}

// A request line over MaxRequestBytes is answered with a JSON-RPC error
// to its id, counted, and skipped: the session goes on. The limit is the
// message's bytes: lines of 60 KiB pass under 64 KiB.
func TestMaxRequestBytes(t *testing.T) {
	rt := openRuntime(t)
	srv := newServer(t, rt.Engine, mcp.Options{MaxRequestBytes: 64 << 10})
	c1, c2 := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.ServeStdio(context.Background(), c1, c1) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), &sdk.IOTransport{Reader: c2, Writer: c2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if res := call(t, cs, "char_stats", map[string]any{"text": strings.Repeat("x", 60<<10)}); res.IsError {
			t.Fatalf("char_stats of a request just under the limit: %.200s", text(res))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "char_stats", Arguments: map[string]any{"text": strings.Repeat("x", 64<<10)}})
	if err == nil || !strings.Contains(err.Error(), "over 65536 bytes") {
		t.Errorf("a request over the 64 KiB limit: %v, want the JSON-RPC error naming the limit", err)
	}
	if n := srv.Refusals().Requests; n != 1 {
		t.Errorf("Refusals().Requests = %d, want 1", n)
	}
	if res := call(t, cs, "reverse", map[string]any{"text": "ab"}); res.IsError || text(res) != "ba" {
		t.Errorf("reverse after the refusal, in the same session: %s", text(res))
	}
	cs.Close()
	if err := wait(t, done); err != nil {
		t.Errorf("Serve: %v", err)
	}
	if n := openSessions(t, rt.Engine, "rh"); n != 0 {
		t.Errorf("%d sessions open in plugin rh after the session ended, want 0", n)
	}
}

// A tool whose schema MCP cannot carry is not served, and is reported;
// one without a type is served as an object schema.
func TestSchemaNotServable(t *testing.T) {
	reg := engine.NewRegistry()
	reg.Register(schemaTool{name: "scalar", schema: `{"type":"string"}`})
	reg.Register(schemaTool{name: "untyped", schema: `{"properties":{"a":{"type":"integer"}}}`})
	eng := engine.New(nil, reg)
	srv, err := mcp.NewServer(context.Background(), eng, mcp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	skipped := srv.Skipped()
	if len(skipped) != 1 || skipped[0].Tool != "scalar" || !errors.Is(skipped[0].Err, mcp.ErrSchema) {
		t.Errorf("Skipped() = %v, want scalar with ErrSchema", skipped)
	}
	if got := srv.Tools(); !slices.Equal(got, []string{"untyped"}) {
		t.Errorf("Tools() = %v, want [untyped]", got)
	}
	cs, _ := connect(t, srv)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) != 1 {
		t.Fatalf("ListTools: %v, %v; want one tool", res, err)
	}
	got, _ := json.Marshal(res.Tools[0].InputSchema)
	if !strings.Contains(string(got), `"type":"object"`) || !strings.Contains(string(got), `"a":{"type":"integer"}`) {
		t.Errorf("untyped's schema %s, want its own with type object", got)
	}
}

// schemaTool is a tool of a given schema that answers "ok".
type schemaTool struct{ name, schema string }

func (s schemaTool) Name() string            { return s.name }
func (s schemaTool) Description() string     { return "a tool with schema " + s.schema }
func (s schemaTool) ParameterSchema() string { return s.schema }
func (s schemaTool) Execute(context.Context, map[string]any) (string, error) {
	return "ok", nil
}

// The versions issue 26 asks for are negotiated as asked; a client asking
// for another (the SDK's client asks for the stateless 2026-07-28 when
// told nothing) gets the newest served, and its session works.
func TestProtocolVersions(t *testing.T) {
	srv := newServer(t, openRuntime(t).Engine, mcp.Options{})
	for asked, want := range map[string]string{"2025-11-25": "2025-11-25", "2025-06-18": "2025-06-18", "": mcp.ProtocolVersions()[0], "2026-07-28": mcp.ProtocolVersions()[0]} {
		st, ct := sdk.NewInMemoryTransports()
		done := make(chan error, 1)
		go func() { done <- srv.Serve(context.Background(), st) }()
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), ct, &sdk.ClientSessionOptions{ProtocolVersion: asked})
		if err != nil {
			t.Fatalf("asking %q: %v", asked, err)
		}
		if got := cs.InitializeResult().ProtocolVersion; got != want {
			t.Errorf("asking %q: negotiated %q, want %q", asked, got, want)
		}
		if res := call(t, cs, "reverse", map[string]any{"text": "x"}); res.IsError {
			t.Errorf("asking %q: reverse: %s", asked, text(res))
		}
		cs.Close()
		wait(t, done)
	}
}

// Sessions calling at once each get their own instance, and every call
// its own answer (run with -race: the session table is shared).
func TestConcurrentSessions(t *testing.T) {
	rt := openRuntime(t)
	srv := newServer(t, rt.Engine, mcp.Options{})
	const sessions, calls = 4, 8
	clients := make([]*sdk.ClientSession, sessions)
	for i := range clients {
		clients[i], _ = connect(t, srv)
	}
	var wg sync.WaitGroup
	errs := make(chan string, sessions*calls)
	for i, cs := range clients {
		for j := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				in := fmt.Sprintf("<%d.%d", i, j)
				want := fmt.Sprintf("%d.%d<", j, i)
				res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "reverse", Arguments: map[string]any{"text": in}})
				switch {
				case err != nil:
					errs <- err.Error()
				case res.IsError || text(res) != want:
					errs <- "session " + strconv.Itoa(i) + " call " + strconv.Itoa(j) + ": " + text(res)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := openSessions(t, rt.Engine, "rh"); n != sessions {
		t.Errorf("%d sessions open in plugin rh, want %d", n, sessions)
	}
}

// Serve's context ending (morph mcp serve's signal) ends the session: a call
// in flight is canceled, its plugin interrupted long before its five-minute
// deadline, the session's instances are released, and Serve returns the
// context's error.
func TestServeCanceled(t *testing.T) {
	rt := openRuntime(t)
	srv := newServer(t, rt.Engine, mcp.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := sdk.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, st) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res := call(t, cs, "reverse", map[string]any{"text": "x"}); res.IsError {
		t.Fatalf("reverse: %s", text(res))
	}
	go cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "spin"}) // its answer never comes
	for deadline := time.Now().Add(time.Minute); openSessions(t, rt.Engine, "spin") != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the spin call did not start within a minute")
		}
	}
	cancel()
	if err := wait(t, done); !errors.Is(err, context.Canceled) {
		t.Errorf("Serve: %v, want context.Canceled", err)
	}
	for _, p := range []string{"rh", "spin"} {
		if n := openSessions(t, rt.Engine, p); n != 0 {
			t.Errorf("%d sessions open in plugin %s after Serve's context ended, want 0", n, p)
		}
	}
}

// Large arguments under the request limit are the engine's to judge: a
// long text is counted, an object of 10,000 unknown keys is refused by the
// schema, a failed call like any other.
func TestLargeArguments(t *testing.T) {
	cs, _ := connect(t, newServer(t, openRuntime(t).Engine, mcp.Options{}))
	res := call(t, cs, "char_stats", map[string]any{"text": strings.Repeat("w ", 128<<10)})
	if res.IsError || !strings.Contains(text(res), `"chars":262144,`) {
		t.Errorf("char_stats of 256 KiB: isError %v, text %.200q", res.IsError, text(res))
	}
	many := map[string]any{"text": "x"}
	for i := range 10000 {
		many["k"+strconv.Itoa(i)] = i
	}
	res = call(t, cs, "reverse", many)
	if !res.IsError || !strings.Contains(text(res), "additional properties") {
		t.Errorf("reverse with 10,000 extra keys: isError %v, text %.200q, want the schema's refusal", res.IsError, text(res))
	}
	if len(text(res)) > engine.DefaultMaxObservationBytes+64 {
		t.Errorf("the refusal is %d bytes, over the observation cap %d", len(text(res)), engine.DefaultMaxObservationBytes)
	}
}

// Options.Run.Tools, the run's tool list, is what is served: the others
// are neither listed nor callable.
func TestRunToolsServed(t *testing.T) {
	srv := newServer(t, openRuntime(t).Engine, mcp.Options{Run: engine.RunOptions{Tools: []string{"reverse"}}})
	if got := srv.Tools(); !slices.Equal(got, []string{"reverse"}) {
		t.Errorf("Tools() = %v, want [reverse]", got)
	}
	cs, _ := connect(t, srv)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) != 1 || res.Tools[0].Name != "reverse" {
		t.Fatalf("ListTools: %v, %v; want reverse alone", res, err)
	}
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "char_stats", Arguments: map[string]any{"text": "x"}}); err == nil {
		t.Error("char_stats, not in the run's tools, was called")
	}
	if res := call(t, cs, "reverse", map[string]any{"text": "ab"}); res.IsError || text(res) != "ba" {
		t.Errorf("reverse: isError %v, text %q, want ba", res.IsError, text(res))
	}
}

// A call in flight when its client goes away is canceled (the SDK cancels
// the requests of a connection whose reader ended): the plugin is
// interrupted long before its five-minute deadline, Serve returns, and the
// session's instance is released.
func TestClientGoneMidCall(t *testing.T) {
	rt := openRuntime(t)
	srv := newServer(t, rt.Engine, mcp.Options{})
	c1, c2 := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.ServeStdio(context.Background(), c1, c1) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), &sdk.IOTransport{Reader: c2, Writer: c2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "spin"}) // its answer never comes
	for deadline := time.Now().Add(time.Minute); openSessions(t, rt.Engine, "spin") != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the spin call did not start within a minute")
		}
	}
	// The client dies: its end of the connection closes under it (the
	// client's own Close would wait for the call's answer first).
	c2.Close()
	if err := wait(t, done); err != nil {
		t.Errorf("Serve: %v, want nil (the client's end closed)", err)
	}
	if n := openSessions(t, rt.Engine, "spin"); n != 0 {
		t.Errorf("%d sessions open in plugin spin after its client went away mid-call, want 0", n)
	}
}

// imageTool is a tool answering a caption and one image of data (base64).
type imageTool struct {
	schemaTool
	data string
}

func (t imageTool) ExecuteImages(context.Context, map[string]any) (string, []abi.Image, error) {
	return "a chart", []abi.Image{{MimeType: "image/png", Data: t.data}}, nil
}

// A tool's images are image content, as bytes, when the engine gives them
// to its model (WithImages), and not otherwise; one whose data is not
// base64 is left out.
func TestImages(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n")
	for _, on := range []bool{true, false} {
		reg := engine.NewRegistry()
		reg.Register(imageTool{schemaTool{name: "chart", schema: `{"type":"object"}`}, base64.StdEncoding.EncodeToString(png)})
		reg.Register(imageTool{schemaTool{name: "bad_chart", schema: `{"type":"object"}`}, "not base64!"})
		cs, _ := connect(t, newServer(t, engine.New(nil, reg, engine.WithImages(on)), mcp.Options{}))
		res := call(t, cs, "chart", nil)
		want := 1
		if on {
			want = 2
		}
		if res.IsError || len(res.Content) != want || text(res) != "a chart" {
			t.Fatalf("images %v: chart: isError %v, %d contents, text %q; want %d, a chart", on, res.IsError, len(res.Content), text(res), want)
		}
		if on {
			img, ok := res.Content[1].(*sdk.ImageContent)
			if !ok || img.MIMEType != "image/png" || !bytes.Equal(img.Data, png) {
				t.Errorf("chart's image %#v, want the PNG bytes", res.Content[1])
			}
		}
		if res := call(t, cs, "bad_chart", nil); res.IsError || len(res.Content) != 1 || text(res) != "a chart" {
			t.Errorf("images %v: bad_chart: isError %v, %d contents, text %q; want the text alone", on, res.IsError, len(res.Content), text(res))
		}
	}
}

// A closed engine can run no tool: a call is a protocol error, the one a
// handler returns, and the session goes on answering.
func TestEngineClosed(t *testing.T) {
	reg := engine.NewRegistry()
	reg.Register(schemaTool{name: "ok_tool", schema: `{"type":"object"}`})
	eng := engine.New(nil, reg)
	cs, _ := connect(t, newServer(t, eng, mcp.Options{}))
	if res := call(t, cs, "ok_tool", nil); res.IsError || text(res) != "ok" {
		t.Fatalf("ok_tool: isError %v, text %q", res.IsError, text(res))
	}
	if err := eng.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "ok_tool"}); err == nil || !strings.Contains(err.Error(), engine.ErrClosed.Error()) {
		t.Errorf("ok_tool on a closed engine: error %v, want a protocol error saying %q", err, engine.ErrClosed)
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Errorf("ListTools after the engine closed: %v", err)
	}
}

// A tool whose name some clients cannot pass to their model (a dot, over
// 48 characters) is served, with one warning naming it; a portable name
// gets none.
func TestPortableToolNames(t *testing.T) {
	long := strings.Repeat("n", 49)
	reg := engine.NewRegistry()
	for _, name := range []string{"plain_name-1", "plugin.tool", long} {
		reg.Register(schemaTool{name: name, schema: `{"type":"object"}`})
	}
	var logs bytes.Buffer
	srv, err := mcp.NewServer(context.Background(), engine.New(nil, reg), mcp.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Tools(); len(got) != 3 {
		t.Errorf("Tools() = %v, want all three served", got)
	}
	for name, want := range map[string]int{"tool=plugin.tool": 1, "tool=" + long: 1, "tool=plain_name-1": 0} {
		if n := strings.Count(logs.String(), name+"\n"); n != want {
			t.Errorf("%d warnings for %s, want %d; log:\n%s", n, name, want, logs.String())
		}
	}
}

package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/mcp"
)

const initLines = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
`

// rawStdio serves a session of one built-in tool (ok_tool) over pipes the
// test writes raw lines to; answers are read as decoded lines.
type rawStdio struct {
	srv     *mcp.Server
	in      *io.PipeWriter
	answers *bufio.Scanner
	done    chan error
	cancel  context.CancelFunc
}

func newRawStdio(t *testing.T, opts mcp.Options, tools ...engine.Tool) *rawStdio {
	t.Helper()
	reg := engine.NewRegistry()
	reg.Register(schemaTool{name: "ok_tool", schema: `{"type":"object"}`})
	for _, tool := range tools {
		reg.Register(tool)
	}
	srv := newServer(t, engine.New(nil, reg), opts)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	r := &rawStdio{srv: srv, in: inW, done: make(chan error, 1), cancel: cancel}
	go func() { r.done <- srv.ServeStdio(ctx, inR, outW) }()
	r.answers = bufio.NewScanner(outR)
	r.answers.Buffer(nil, 8<<20)
	t.Cleanup(func() { cancel(); inW.Close(); outR.Close() })
	return r
}

// answer is the next answer, decoded.
func (r *rawStdio) answer(t *testing.T) map[string]any {
	t.Helper()
	if !r.answers.Scan() {
		t.Fatalf("no answer: %v", r.answers.Err())
	}
	var m map[string]any
	if err := json.Unmarshal(r.answers.Bytes(), &m); err != nil {
		t.Fatalf("an answer that is not JSON: %.200q", r.answers.Text())
	}
	return m
}

// A line the server cannot take is answered with a JSON-RPC error (to the
// request's id when the line shows it), counted, and skipped: the answer
// due before it is written, and the request after it is served. The
// message spread over lines never reaches the decoder whole.
func TestStdioRefusedLines(t *testing.T) {
	const limit = 4096
	pad := strings.Repeat("x", limit)
	for _, c := range []struct {
		name, line string
		code       float64
		id         any
		want       string
	}{
		{"not JSON", "not json", -32700, nil, "not a JSON-RPC message"},
		{"a batch", `[{"jsonrpc":"2.0","id":7,"method":"ping"}]`, -32600, nil, "batch"},
		{"too long, id first", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ok_tool","arguments":{"p":"` + pad + `"}}}`, -32600, 7.0, "over 4096 bytes"},
		{"too long, id last", `{"method":"tools/call","params":{"name":"ok_tool","arguments":{"p":"` + pad + `"}},"jsonrpc":"2.0","id":"s7"}`, -32600, "s7", "over 4096 bytes"},
		{"nested too deep", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ok_tool","arguments":{"a":` + strings.Repeat("[", 1500) + strings.Repeat("]", 1500) + `}}}`, -32700, 7.0, "not a JSON-RPC message"},
		{"spread over lines", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ok_tool","arguments":{"pad":[`, -32700, 7.0, "not a JSON-RPC message"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRawStdio(t, mcp.Options{MaxRequestBytes: limit})
			go io.WriteString(r.in, initLines+c.line+"\n"+`{"jsonrpc":"2.0","id":9,"method":"ping"}`+"\n")
			// Answers come as calls finish, not in order.
			byID := map[any]map[string]any{}
			for range 3 {
				a := r.answer(t)
				if _, ok := a["id"]; !ok {
					t.Errorf("an answer without an id member (JSON-RPC: null when unknown): %v", a)
				}
				byID[a["id"]] = a
			}
			if a := byID[1.0]; a["result"] == nil {
				t.Errorf("the initialize before the bad line: %v", a)
			}
			if a := byID[9.0]; a["result"] == nil {
				t.Errorf("the ping after the bad line: %v", a)
			}
			a := byID[c.id]
			e, _ := a["error"].(map[string]any)
			if e == nil || e["code"] != c.code || a["id"] != c.id || !strings.Contains(fmt.Sprint(e["message"]), c.want) {
				t.Errorf("answer to the bad line: %v, want code %v, id %v, a message naming %q", a, c.code, c.id, c.want)
			}
			if n := r.srv.Refusals().Requests; n != 1 {
				t.Errorf("Refusals().Requests = %d, want 1", n)
			}
		})
	}
}

// The limit is the message's bytes: a line of exactly the limit is served;
// spaces around a message are not part of it.
func TestStdioExactLimit(t *testing.T) {
	const limit = 4096
	r := newRawStdio(t, mcp.Options{MaxRequestBytes: limit})
	head := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ok_tool","arguments":{"pad":"`
	tail := `"}}}`
	line := head + strings.Repeat("x", limit-len(head)-len(tail)) + tail
	go io.WriteString(r.in, initLines+line+"\r\n"+`{"jsonrpc":"2.0","id":3,"method":"ping"} `+"\n")
	byID := map[any]map[string]any{}
	for range 3 {
		a := r.answer(t)
		byID[a["id"]] = a
	}
	if a := byID[2.0]; a["result"] == nil {
		t.Errorf("a line of exactly MaxRequestBytes: %v", a)
	}
	if a := byID[3.0]; a["result"] == nil {
		t.Errorf("a message with a space before its line end: %v", a)
	}
}

// blockTool runs until its call is canceled, counting calls running.
type blockTool struct {
	schemaTool
	running *atomic.Int32
}

func (b blockTool) Execute(ctx context.Context, _ map[string]any) (string, error) {
	b.running.Add(1)
	defer b.running.Add(-1)
	<-ctx.Done()
	return "", ctx.Err()
}

// A client that sends calls and never reads its answers: morph runs no
// more than MaxCallsPerSession of them, reads no more than twice that
// (the client's writes block), and a signal still ends Serve at once.
func TestStdioNeverReads(t *testing.T) {
	var running atomic.Int32
	r := newRawStdio(t, mcp.Options{MaxCallsPerSession: 4}, blockTool{schemaTool{name: "block", schema: `{"type":"object"}`}, &running})
	var written atomic.Int32
	go func() {
		io.WriteString(r.in, initLines)
		for i := range 1000 {
			if _, err := fmt.Fprintf(r.in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"block"}}`+"\n", 10+i); err != nil {
				return
			}
			written.Add(1)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for running.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // let the reader go as far as it would
	if n := running.Load(); n != 4 {
		t.Errorf("%d calls running, want MaxCallsPerSession (4)", n)
	}
	// Read: the initialize (1 slot, not answered: the answers are not read)
	// plus at most 2*4 requests; the pipe holds one more write.
	if n := written.Load(); n > 2*4+1 {
		t.Errorf("the client wrote %d calls unanswered, want the reader to stop after 2*MaxCallsPerSession", n)
	}
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return within 20 s of its context ending, with a client that does not read")
	}
	if n := running.Load(); n != 0 {
		t.Errorf("%d calls still running after Serve returned", n)
	}
}

// Past MaxCallsPerSession a call is refused at once: a result with isError
// naming the limit, counted; a slot frees when a call ends.
func TestMaxCallsPerSession(t *testing.T) {
	var running atomic.Int32
	reg := engine.NewRegistry()
	reg.Register(blockTool{schemaTool{name: "block", schema: `{"type":"object"}`}, &running})
	reg.Register(schemaTool{name: "ok_tool", schema: `{"type":"object"}`})
	srv := newServer(t, engine.New(nil, reg), mcp.Options{MaxCallsPerSession: 3})
	cs, _ := connect(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	results := make(chan *sdk.CallToolResult, 10)
	for range 3 {
		go func() {
			res, _ := cs.CallTool(ctx, &sdk.CallToolParams{Name: "block"})
			results <- res
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for running.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for range 5 {
		res := call(t, cs, "block", nil)
		if !res.IsError || !strings.Contains(text(res), "max_calls_per_session") {
			t.Errorf("a call past the limit: isError %v, %q", res.IsError, text(res))
		}
	}
	if n := srv.Refusals().Calls; n != 5 {
		t.Errorf("Refusals().Calls = %d, want 5", n)
	}
	cancel() // the three running calls end
	for range 3 {
		<-results
	}
	for running.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if res := call(t, cs, "ok_tool", nil); res.IsError || text(res) != "ok" {
		t.Errorf("a call once the running ones ended was refused for the limit: %q", text(res))
	}
}

// A client's notifications/cancelled cancels the call: the tool's context
// ends, long before any deadline.
func TestClientCancels(t *testing.T) {
	var running atomic.Int32
	reg := engine.NewRegistry()
	reg.Register(blockTool{schemaTool{name: "block", schema: `{"type":"object"}`}, &running})
	cs, _ := connect(t, newServer(t, engine.New(nil, reg), mcp.Options{}))
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	go func() {
		cs.CallTool(ctx, &sdk.CallToolParams{Name: "block"})
		close(returned)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for running.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if running.Load() == 0 {
		t.Fatal("the call never started")
	}
	cancel()
	<-returned
	for running.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := running.Load(); n != 0 {
		t.Errorf("the tool still runs 30 s after the client canceled its call (%d running)", n)
	}
}

// watchExt is a plugin whose tools change while it runs (as an MCP
// plugin's notify_tool_list_changed, or an [[mcp_servers]] list change).
type watchExt struct {
	update func(context.Context, []engine.Tool) error
}

func (*watchExt) Name() string { return "changing" }
func (w *watchExt) Open(context.Context) (*engine.Extension, error) {
	return &engine.Extension{Tools: []engine.Tool{schemaTool{name: "first", schema: `{"type":"object"}`}},
		WatchTools: func(u func(context.Context, []engine.Tool) error) { w.update = u }}, nil
}

// A plugin's own tool list change reaches the client as
// notifications/tools/list_changed, and the served list follows it
// (Engine.OnToolsChanged, SyncTools).
func TestPluginToolChangeServed(t *testing.T) {
	ext := &watchExt{}
	eng := engine.New(nil, engine.NewRegistry(), engine.WithExtenders(ext))
	srv := newServer(t, eng, mcp.Options{})
	changed := make(chan struct{}, 10)
	st, ct := sdk.NewInMemoryTransports()
	go srv.Serve(context.Background(), st)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} }}).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := ext.update(context.Background(), []engine.Tool{schemaTool{name: "second", schema: `{"type":"object"}`}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(time.Minute):
		t.Fatal("no notifications/tools/list_changed within a minute of the plugin's change")
	}
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Equal(names, []string{"second"}) {
		t.Errorf("tools served after the plugin's change: %v, want [second]", names)
	}
}

// A request reusing the id of one still running is refused with an error
// (the SDK would drop it unanswered, and its read-ahead slot with it):
// with MaxCallsPerSession 1 (two slots), the ping after it is still read
// and answered while the call runs.
func TestStdioDuplicateID(t *testing.T) {
	var running atomic.Int32
	r := newRawStdio(t, mcp.Options{MaxCallsPerSession: 1}, blockTool{schemaTool{name: "block", schema: `{"type":"object"}`}, &running})
	go io.WriteString(r.in, initLines+`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"block"}}`+"\n")
	r.answer(t) // initialize
	deadline := time.Now().Add(time.Minute)
	for running.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	go io.WriteString(r.in, `{"jsonrpc":"2.0","id":5,"method":"ping"}`+"\n"+`{"jsonrpc":"2.0","id":6,"method":"ping"}`+"\n")
	dup, pong := r.answer(t), r.answer(t)
	if e, _ := dup["error"].(map[string]any); dup["id"] != 5.0 || e == nil || !strings.Contains(fmt.Sprint(e["message"]), "id 5") {
		t.Errorf("the duplicate id 5: %v, want an error naming the id", dup)
	}
	if pong["id"] != 6.0 || pong["result"] == nil {
		t.Errorf("the ping after the duplicate: %v", pong)
	}
}

// chattyTool logs n messages through the call's notifier, then answers.
type chattyTool struct {
	schemaTool
	n    int
	done chan struct{}
}

func (c chattyTool) Execute(ctx context.Context, _ map[string]any) (string, error) {
	defer close(c.done)
	for range c.n {
		if n := engine.CallNotifierOf(ctx); n != nil {
			n.Log("info", "", json.RawMessage(`"hello"`))
		}
	}
	return "ok", nil
}

// A client that stops reading while a call notifies: the first
// notification the client does not take stalls the call's others, which
// are dropped and counted, so the call ends after one send's bound, not
// after one per notification (256 x 5 s).
func TestNotificationsToAClientNotReading(t *testing.T) {
	done := make(chan struct{})
	r := newRawStdio(t, mcp.Options{MaxNotifications: 256}, chattyTool{schemaTool{name: "chatty", schema: `{"type":"object"}`}, 256, done})
	go io.WriteString(r.in, initLines+`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`+"\n")
	// Read the initialize's and setLevel's answers (the level must hold
	// before the call: a message below it is neither sent nor counted),
	// then call and stop reading.
	r.answer(t)
	r.answer(t)
	go io.WriteString(r.in, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"chatty"}}`+"\n")
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the call still notifying two minutes after its client stopped reading")
	}
	if n := r.srv.Refusals().Notifications; n == 0 {
		t.Error("no notification counted as dropped")
	}
}

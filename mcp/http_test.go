package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/mcp"
)

// serveHTTP serves srv's Handler(o) on 127.0.0.1 for the test.
func serveHTTP(t *testing.T, srv *mcp.Server, o mcp.HTTPOptions) *httptest.Server {
	t.Helper()
	h, err := srv.Handler(o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.CloseSessions(ctx); err != nil {
			t.Error(err)
		}
		hs.Close()
	})
	return hs
}

// connectHTTP connects the SDK's client to url, with hc as its HTTP client
// (nil: the default).
func connectHTTP(t *testing.T, url string, hc *http.Client) (*sdk.ClientSession, error) {
	t.Helper()
	return sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
}

// waitSessions polls until the plugin called name holds want sessions,
// failing t when that does not happen within a generous bound.
func waitSessions(t *testing.T, eng *engine.Engine, name string, want int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		n := openSessions(t, eng, name)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions open in plugin %s after a minute, want %d", n, name, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Over Streamable HTTP each MCP session is a morph session: a plugin in
// session isolation keeps one instance per client session, released when
// the client deletes the session (Close), or when the session is idle for
// SessionIdle.
func TestHTTPSessions(t *testing.T) {
	rt := openRuntime(t)
	srv := newServer(t, rt.Engine, mcp.Options{})
	hs := serveHTTP(t, srv, mcp.HTTPOptions{Loopback: true})
	a, err := connectHTTP(t, hs.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := connectHTTP(t, hs.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, cs := range []*sdk.ClientSession{a, b, a} {
		if res := call(t, cs, "reverse", map[string]any{"text": "one two"}); res.IsError || text(res) != "owt eno" {
			t.Fatalf("reverse over HTTP: isError %v, text %q", res.IsError, text(res))
		}
	}
	if n := openSessions(t, rt.Engine, "rh"); n != 2 {
		t.Errorf("%d sessions open in plugin rh after two HTTP clients called, want 2", n)
	}
	if err := a.Close(); err != nil { // a DELETE
		t.Fatal(err)
	}
	waitSessions(t, rt.Engine, "rh", 1)
	if _, err := a.CallTool(context.Background(), &sdk.CallToolParams{Name: "reverse", Arguments: map[string]any{"text": "x"}}); err == nil {
		t.Error("a call on the deleted session succeeded")
	}
	b.Close()
	waitSessions(t, rt.Engine, "rh", 0)
}

// A session that sees no request for SessionIdle is ended, and its
// instances released, though the client never deleted it.
func TestHTTPSessionIdle(t *testing.T) {
	rt := openRuntime(t)
	srv := newServer(t, rt.Engine, mcp.Options{})
	hs := serveHTTP(t, srv, mcp.HTTPOptions{Loopback: true, SessionIdle: 500 * time.Millisecond})
	cs, err := connectHTTP(t, hs.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res := call(t, cs, "reverse", map[string]any{"text": "ab"}); res.IsError {
		t.Fatalf("reverse: %s", text(res))
	}
	// The client's standing GET stream is no request: the session idles.
	waitSessions(t, rt.Engine, "rh", 0)
}

// post sends a JSON-RPC initialize to url with the given headers, and
// answers the response's status and the start of its body.
func post(t *testing.T, url string, header map[string]string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	req.Host = req.Header.Get("Host")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(resp.Body, head)
	resp.Body.Close()
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" { // end the session it made
		del, _ := http.NewRequest(http.MethodDelete, url, nil)
		del.Header.Set("Mcp-Session-Id", id)
		for k, v := range header {
			del.Header.Set(k, v)
		}
		if resp, err := http.DefaultClient.Do(del); err == nil {
			resp.Body.Close()
		}
	}
	return resp.StatusCode, string(head[:n])
}

// A request from an Origin not allowed is refused with 403 (DNS-rebinding
// protection); loopback origins and AllowedOrigins are served, as is a
// request with no Origin.
func TestHTTPOrigin(t *testing.T) {
	rt := openRuntime(t)
	srv := newServer(t, rt.Engine, mcp.Options{})
	hs := serveHTTP(t, srv, mcp.HTTPOptions{Loopback: true, AllowedOrigins: []string{"https://app.example.com"}})
	for _, c := range []struct {
		origin string
		want   int
	}{
		{"", http.StatusOK},
		{"http://localhost:6274", http.StatusOK},
		{"http://127.0.0.1:9", http.StatusOK},
		{"https://app.example.com", http.StatusOK},
		{"http://evil.example", http.StatusForbidden},
		{"https://app.example.com.evil.example", http.StatusForbidden},
		{"http://localhost.evil.example", http.StatusForbidden},
		{"null", http.StatusForbidden},
	} {
		h := map[string]string{}
		if c.origin != "" {
			h["Origin"] = c.origin
		}
		if got, _ := post(t, hs.URL, h); got != c.want {
			t.Errorf("Origin %q: status %d, want %d", c.origin, got, c.want)
		}
	}
	// The SDK's own check: a loopback listener refuses a Host that is not.
	if got, _ := post(t, hs.URL, map[string]string{"Host": "evil.example"}); got != http.StatusForbidden {
		t.Errorf("Host evil.example: status %d, want 403", got)
	}
	// Without Loopback, loopback origins are not allowed by default.
	hs2 := serveHTTP(t, srv, mcp.HTTPOptions{Token: "t"})
	if got, _ := post(t, hs2.URL, map[string]string{"Origin": "http://localhost:6274", "Authorization": "Bearer t"}); got != http.StatusForbidden {
		t.Errorf("not loopback, Origin http://localhost:6274: status %d, want 403", got)
	}
}

// bearer is an http.RoundTripper adding a bearer token.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// Beyond loopback a bearer token is required: Handler refuses to serve
// without one; a request without it or with another is refused with 401;
// the SDK's client with it calls tools.
func TestHTTPToken(t *testing.T) {
	rt := openRuntime(t)
	srv := newServer(t, rt.Engine, mcp.Options{})
	if _, err := srv.Handler(mcp.HTTPOptions{}); !errors.Is(err, mcp.ErrNoToken) {
		t.Errorf("Handler beyond loopback without a token: %v, want ErrNoToken", err)
	}
	hs := serveHTTP(t, srv, mcp.HTTPOptions{Token: "s3cret"})
	for _, h := range []map[string]string{{}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}} {
		if got, _ := post(t, hs.URL, h); got != http.StatusUnauthorized {
			t.Errorf("headers %v: status %d, want 401", h, got)
		}
	}
	if got, _ := post(t, hs.URL, map[string]string{"Authorization": "Bearer s3cret"}); got != http.StatusOK {
		t.Errorf("the right token: status %d, want 200", got)
	}
	if _, err := connectHTTP(t, hs.URL, nil); err == nil {
		t.Error("the SDK's client connected without the token")
	}
	cs, err := connectHTTP(t, hs.URL, &http.Client{Transport: bearer{"s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res := call(t, cs, "reverse", map[string]any{"text": "ab"}); res.IsError || text(res) != "ba" {
		t.Errorf("reverse with the token: isError %v, text %q", res.IsError, text(res))
	}
	// Loopback with a token set still requires it.
	hs2 := serveHTTP(t, srv, mcp.HTTPOptions{Loopback: true, Token: "s3cret"})
	if got, _ := post(t, hs2.URL, nil); got != http.StatusUnauthorized {
		t.Errorf("loopback with a token set, none sent: status %d, want 401", got)
	}
}

// CloseSessions, a server's shutdown, cancels the calls in flight over
// HTTP and returns once the sessions' instances are released.
func TestHTTPCloseSessions(t *testing.T) {
	rt := openRuntime(t)
	srv := newServer(t, rt.Engine, mcp.Options{})
	hs := serveHTTP(t, srv, mcp.HTTPOptions{Loopback: true})
	cs, err := connectHTTP(t, hs.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	called := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "spin"})
		called <- err
	}()
	waitSessions(t, rt.Engine, "spin", 1) // the call is running
	closed := make(chan struct{})
	go func() {
		srv.CloseSessions(context.Background())
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("CloseSessions did not return within a minute (the plugin's deadline is 5 minutes)")
	}
	if n := openSessions(t, rt.Engine, "spin"); n != 0 {
		t.Errorf("%d sessions open in plugin spin after CloseSessions, want 0", n)
	}
	select {
	case <-called:
	case <-time.After(time.Minute):
		t.Error("the call in flight did not end within a minute of CloseSessions")
	}
}

// Past MaxSessions a new session is refused with 503 and a JSON-RPC error
// naming the limit, and counted; the sessions open go on, and once one
// ends a new one is served.
func TestHTTPMaxSessions(t *testing.T) {
	rt := openRuntime(t)
	srv := newServer(t, rt.Engine, mcp.Options{})
	hs := serveHTTP(t, srv, mcp.HTTPOptions{Loopback: true, MaxSessions: 2})
	var open []*sdk.ClientSession
	for range 2 {
		cs, err := connectHTTP(t, hs.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		open = append(open, cs)
	}
	if _, err := connectHTTP(t, hs.URL, nil); err == nil || !strings.Contains(err.Error(), "Service Unavailable") {
		t.Errorf("a third session: %v, want a refusal (503)", err)
	}
	refused := srv.Refusals().Sessions
	if got, body := post(t, hs.URL, nil); got != http.StatusServiceUnavailable || !strings.Contains(body, "max_sessions") || !strings.Contains(body, `"jsonrpc":"2.0"`) {
		t.Errorf("a raw initialize past the cap: status %d, body %q; want 503 with a JSON-RPC error naming max_sessions", got, body)
	}
	if n := srv.Refusals().Sessions; n != refused+1 {
		t.Errorf("Refusals().Sessions %d after one more refusal, want %d", n, refused+1)
	}
	if res := call(t, open[0], "reverse", map[string]any{"text": "ab"}); res.IsError || text(res) != "ba" {
		t.Errorf("a call in an open session at the cap: isError %v, text %q", res.IsError, text(res))
	}
	open[0].Close()
	waitSessions(t, rt.Engine, "rh", 0)
	deadline := time.Now().Add(time.Minute)
	for {
		cs, err := connectHTTP(t, hs.URL, nil)
		if err == nil {
			cs.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new session a minute after one ended: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A client opening 10,000 sessions (initializes 64 at a time, none ended
// by the client): exactly MaxSessions are served, every other is refused
// with 503 and counted. (That an idle session ends, freeing its slot, is
// TestHTTPSessionIdle and TestHTTPMaxSessions.)
func TestHTTPTenThousandSessions(t *testing.T) {
	srv := newServer(t, engine.New(nil, engine.NewRegistry()), mcp.Options{})
	hs := serveHTTP(t, srv, mcp.HTTPOptions{Loopback: true, MaxSessions: 256, SessionIdle: time.Hour})
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()
	const n = 10000
	var served, refused, other atomic.Int32
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			switch initialize(t, hc, hs.URL) {
			case http.StatusOK:
				served.Add(1)
			case http.StatusServiceUnavailable:
				refused.Add(1)
			default:
				other.Add(1)
			}
		}()
	}
	wg.Wait()
	if served.Load() != 256 || refused.Load() != n-256 || other.Load() != 0 {
		t.Errorf("10,000 initializes: %d served, %d refused, %d other; want 256, %d, 0", served.Load(), refused.Load(), other.Load(), n-256)
	}
	if got := srv.Refusals().Sessions; got != n-256 {
		t.Errorf("Refusals().Sessions = %d, want %d", got, n-256)
	}
}

// initialize posts an initialize that starts a session (left open) and is
// the status.
func initialize(t *testing.T, hc *http.Client, url string) int {
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// bigTool answers n bytes of text.
type bigTool struct {
	schemaTool
	n   int
	ran *atomic.Bool
}

func (b bigTool) Execute(context.Context, map[string]any) (string, error) {
	b.ran.Store(true)
	return strings.Repeat("x", b.n), nil
}

// An HTTP client that sends a call and never reads its answer cannot hold
// the server: the answer's write fails past WriteTimeout, so closing the
// sessions (a signal) ends. (Without the deadline the SDK's write blocks
// for ever, and closing the session waits for it.)
func TestHTTPClientNeverReads(t *testing.T) {
	var ran atomic.Bool
	reg := engine.NewRegistry()
	reg.Register(bigTool{schemaTool{name: "big", schema: `{"type":"object"}`}, 16 << 20, &ran})
	srv := newServer(t, engine.New(nil, reg, engine.WithMaxObservationBytes(32<<20)), mcp.Options{})
	h, err := srv.Handler(mcp.HTTPOptions{Loopback: true, WriteTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	id := initSession(t, hs.URL)
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big","arguments":{}}}`
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-06-18\r\nContent-Length: %d\r\n\r\n%s",
		hs.Listener.Addr(), id, len(body), body)
	// The client never reads conn: the 16 MiB answer fills the connection.
	deadline := time.Now().Add(time.Minute)
	for !ran.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second) // the answer is being written, and blocks
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.CloseSessions(ctx); err != nil {
		t.Fatalf("CloseSessions with a client that stopped reading its answer: %v", err)
	}
}

// initSession initializes an HTTP session with net/http and is its id.
func initSession(t *testing.T, url string) string {
	t.Helper()
	do := func(body, id string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if id != "" {
			req.Header.Set("Mcp-Session-Id", id)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := do(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, "")
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		t.Fatalf("initialize: %s, no session id", resp.Status)
	}
	do(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, id)
	return id
}

// The bodies of the POSTs being served are bounded together: with two
// calls of 31 KiB of arguments running under a 64 KiB MaxBytesInFlight, a
// third is refused with 503 naming the limit, and counted; once the calls
// end, it is served.
func TestHTTPMaxBytesInFlight(t *testing.T) {
	var running atomic.Int32
	reg := engine.NewRegistry()
	reg.Register(blockTool{schemaTool{name: "block", schema: `{"type":"object"}`}, &running})
	reg.Register(schemaTool{name: "ok_tool", schema: `{"type":"object"}`})
	srv := newServer(t, engine.New(nil, reg), mcp.Options{})
	hs := serveHTTP(t, srv, mcp.HTTPOptions{Loopback: true, MaxBytesInFlight: 64 << 10})
	cs, err := connectHTTP(t, hs.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	args := map[string]any{"pad": strings.Repeat("x", 31<<10)}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{}, 2)
	for range 2 {
		go func() {
			cs.CallTool(ctx, &sdk.CallToolParams{Name: "block", Arguments: args})
			ended <- struct{}{}
		}()
	}
	deadline := time.Now().Add(time.Minute)
	for running.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	third, stop := context.WithTimeout(context.Background(), 30*time.Second) // not refused, it would block
	defer stop()
	if _, err := cs.CallTool(third, &sdk.CallToolParams{Name: "block", Arguments: args}); err == nil || !strings.Contains(err.Error(), "Service Unavailable") {
		t.Errorf("a third call of 31 KiB: %v, want a refusal (503)", err)
	}
	if n := srv.Refusals().Requests; n != 1 {
		t.Errorf("Refusals().Requests = %d, want 1", n)
	}
	cancel()
	<-ended
	<-ended
	for running.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	again, err := connectHTTP(t, hs.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if res := call(t, again, "ok_tool", args); res.IsError || text(res) != "ok" {
		t.Errorf("a call of 31 KiB once the others ended: isError %v, %q", res.IsError, text(res))
	}
}

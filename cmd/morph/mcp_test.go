package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/internal/testenv"
	"github.com/morphhost/morph/mcp"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader in two
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// morph mcp serve speaks MCP on standard input and output (the SDK's
// client on the other end), nothing else: the summary goes to standard
// error; a call runs the config's tool; the client closing standard input
// ends the command with exit 0.
func TestMCPServe(t *testing.T) {
	cfg := setup(t, []string{finalReply}, "")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(context.Background(), []string{"mcp", "serve", "--config", cfg}, inR, outW, &stderr)
		outW.Close()
	}()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).
		Connect(context.Background(), &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connecting: %v; stderr:\n%s", err, stderr.String())
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "calc", Arguments: map[string]any{"expression": "409.5 + 42"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*sdk.TextContent).Text; res.IsError || got != "451.5" {
		t.Errorf("calc: isError %v, text %q, want 451.5", res.IsError, got)
	}
	res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "calc", Arguments: map[string]any{"expression": "1 +"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError {
		t.Errorf("calc of a bad expression: %+v, want isError", res)
	}
	cs.Close()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("exit %d after the client closed, want 0; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("morph mcp serve did not return within a minute of the client closing standard input")
	}
	if !strings.Contains(stderr.String(), "morph: serving 1 tool over MCP") {
		t.Errorf("stderr does not say what is served:\n%s", stderr.String())
	}
}

// A request line over --max-request-kb is answered with a JSON-RPC error
// naming the limit, and warned about on standard error; exit 0 when the
// client closes standard input. (That the session goes on past the line
// is mcp's TestStdioRefusedLines: here the SDK cancels what is in flight
// at the end of input, so a request after the line may go unanswered.)
func TestMCPServeRequestTooLarge(t *testing.T) {
	cfg := setup(t, []string{finalReply}, "")
	line := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"},"pad":"` +
		strings.Repeat("x", 2<<10) + `"}}` + "\n"
	for _, args := range [][]string{{"--max-request-kb", "1"}, {"--config", setup(t, []string{finalReply}, "[mcp]\nmax_request_kb = 1\n")}} {
		code, stdout, stderr := morph(t, line, append([]string{"mcp", "serve", "--config", cfg}, args...)...)
		if code != 0 || !strings.Contains(stdout, `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"mcp: a request line over 1024 bytes (max_request_kb) was refused"}}`) ||
			!strings.Contains(stderr, "a request line over 1024 bytes") {
			t.Errorf("%v: exit %d, stdout %q, stderr:\n%s\nwant exit 0, the error to id 1 naming the limit, and a warning", args, code, stdout, stderr)
		}
	}
	// The flag overrides [mcp]. (Whether the initialize is answered is a
	// race with the end of input; that it is not refused is not.)
	small := setup(t, []string{finalReply}, "[mcp]\nmax_request_kb = 1\n")
	if code, stdout, stderr := morph(t, line, "mcp", "serve", "--config", small, "--max-request-kb", "8"); code != 0 || strings.Contains(stdout, "error") || strings.Contains(stderr, "refused") {
		t.Errorf("--max-request-kb 8 over [mcp] max_request_kb = 1: exit %d, stdout %q, stderr:\n%s\nwant the initialize not refused", code, stdout, stderr)
	}
}

// With --http, morph mcp serve serves Streamable HTTP on the address
// (port 0: one the kernel picks, which the summary names) to the SDK's
// client, until its context ends (a signal): then exit 0. A browser's
// request from an origin not allowed is refused, one from --allow-origin's
// is not.
func TestMCPServeHTTP(t *testing.T) {
	cfg := setup(t, []string{finalReply}, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"mcp", "serve", "--config", cfg, "--http", "127.0.0.1:0", "--allow-origin", "https://app.example.com"}, strings.NewReader(""), io.Discard, &stderr)
	}()
	var url string
	deadline := time.Now().Add(time.Minute)
	for url == "" {
		if _, rest, ok := strings.Cut(stderr.String(), "over MCP at "); ok {
			url = strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0])
		} else if time.Now().After(deadline) {
			t.Fatalf("no address on stderr after a minute:\n%s", stderr.String())
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).
		Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v; stderr:\n%s", url, err, stderr.String())
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "calc", Arguments: map[string]any{"expression": "409.5 + 42"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*sdk.TextContent).Text; res.IsError || got != "451.5" {
		t.Errorf("calc over HTTP: isError %v, text %q, want 451.5", res.IsError, got)
	}
	for origin, want := range map[string]int{"http://evil.example": http.StatusForbidden, "https://app.example.com": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Origin", origin)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("a ping from Origin %s: status %d, want %d", origin, resp.StatusCode, want)
		}
	}
	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("exit %d after the signal, want 0; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("morph mcp serve --http did not return within a minute of its context ending")
	}
	cs.Close()
}

// An address beyond loopback without the token's variable set is refused
// before anything is bound, naming the variable.
func TestMCPServeHTTPNeedsToken(t *testing.T) {
	cfg := setup(t, []string{finalReply}, "")
	t.Setenv("MORPH_TEST_NO_TOKEN", "")
	code, _, stderr := morph(t, "", "mcp", "serve", "--config", cfg, "--http", "192.0.2.1:0", "--token-env", "MORPH_TEST_NO_TOKEN")
	if code != exitUsage || !strings.Contains(stderr, "$MORPH_TEST_NO_TOKEN") || !strings.Contains(stderr, "not a loopback address") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit %d naming $MORPH_TEST_NO_TOKEN", code, stderr, exitUsage)
	}
}

// Bad flags are usage errors, before any config is read.
func TestMCPServeFlags(t *testing.T) {
	for _, args := range [][]string{{"--max-request-kb", "0"}, {"--max-request-kb", "9999999999"}, {"--max-calls-per-session", "0"}, {"--shutdown-timeout", "0s"}, {"--session-idle", "0s"}, {"--max-sessions", "0"}, {"--max-notifications", "0"}, {"--max-items", "0"}, {"--http", "nocolon"}, {"stray"}} {
		code, stdout, stderr := morph(t, "", append([]string{"mcp", "serve", "--config", "/nonexistent/morph.toml"}, args...)...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, args[0]) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d naming %s", args, code, stdout, stderr, exitUsage, args[0])
		}
	}
}

// The official TypeScript SDK's client (Node 22, from `make tools-mcp`)
// drives the built morph binary over stdio: it negotiates the newest
// protocol morph serves, lists the built-in and the plugin's tools, and
// calls the plugin's.
func TestMCPServeTypeScriptClient(t *testing.T) {
	tools, cfg := tsClientSetup(t)
	tsClient(t, tools, "stdio", morphBinary(t), "mcp", "serve", "--config", cfg)
}

// The official TypeScript SDK's client does the same over Streamable HTTP
// (the built binary with --http on a port the kernel picks); an interrupt
// then ends the server, exit 0.
func TestMCPServeTypeScriptClientHTTP(t *testing.T) {
	tools, cfg := tsClientSetup(t)
	url, stop := startMCPHTTP(t, cfg)
	tsClient(t, tools, "http", url)
	stop()
}

// startMCPHTTP starts the built morph mcp serve --http on a port the
// kernel picks, and is its URL; stop interrupts it, which must exit 0.
func startMCPHTTP(t testing.TB, cfg string) (url string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	server := exec.CommandContext(ctx, morphBinary(t), "mcp", "serve", "--config", cfg, "--http", "127.0.0.1:0")
	var stderr syncBuffer
	server.Stderr = &stderr
	if err := server.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); url == ""; time.Sleep(20 * time.Millisecond) {
		if _, rest, ok := strings.Cut(stderr.String(), "over MCP at "); ok {
			url = strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0])
		} else if time.Now().After(deadline) {
			server.Process.Kill()
			cancel()
			t.Fatalf("no address on stderr after a minute:\n%s", stderr.String())
		}
	}
	return url, func() {
		defer cancel()
		if err := server.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		if err := server.Wait(); err != nil {
			t.Errorf("morph mcp serve --http after an interrupt: %v, want exit 0; stderr:\n%s", err, stderr.String())
		}
	}
}

// The official Inspector CLI drives morph mcp serve over stdio and over
// HTTP: it lists the tools, calls one, and reads a failure as a result
// with isError (not a protocol error).
func TestMCPServeInspectorCLI(t *testing.T) {
	tools, cfg := tsClientSetup(t)
	url, stop := startMCPHTTP(t, cfg)
	defer stop()
	for _, target := range [][]string{{morphBinary(t), "mcp", "serve", "--config", cfg}, {url}} {
		t.Run(map[bool]string{true: "http", false: "stdio"}[target[0] == url], func(t *testing.T) {
			var list struct{ Tools []struct{ Name string } }
			inspector(t, tools, target, &list, "--method", "tools/list")
			var names []string
			for _, tool := range list.Tools {
				names = append(names, tool.Name)
			}
			slices.Sort(names)
			if want := []string{"calc", "char_stats", "reverse"}; !slices.Equal(names, want) {
				t.Errorf("tools/list: %v, want %v", names, want)
			}
			type result struct {
				Content []struct{ Type, Text string }
				IsError bool
			}
			var ok, bad result
			inspector(t, tools, target, &ok, "--method", "tools/call", "--tool-name", "reverse", "--tool-arg", "text=abc")
			if ok.IsError || len(ok.Content) != 1 || ok.Content[0].Text != "cba" {
				t.Errorf("reverse of abc: %+v, want one text content cba", ok)
			}
			inspector(t, tools, target, &bad, "--method", "tools/call", "--tool-name", "reverse", "--tool-arg", "text=5")
			if !bad.IsError || len(bad.Content) != 1 || !strings.Contains(bad.Content[0].Text, "text") {
				t.Errorf("reverse of a number: %+v, want isError naming the field", bad)
			}
		})
	}
}

// inspector runs the Inspector CLI against target (a command and its
// arguments, or a URL) and decodes what it prints into v. (It is run from
// its build directory: version 1.0.3 finds its package.json relative to
// the working directory.)
func inspector(t *testing.T, tools string, target []string, v any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	transport := "stdio"
	if strings.HasPrefix(target[0], "http") {
		transport = "http" // not told, it guesses by the URL's path
	}
	// The command first, its arguments after --: the options between.
	args = append(append([]string{"index.js", target[0]}, args...), "--transport", transport, "--")
	cmd := exec.CommandContext(ctx, filepath.Join(tools, "node_modules", ".bin", "node"), append(args, target[1:]...)...)
	cmd.Dir = filepath.Join(tools, "node_modules", "@modelcontextprotocol", "inspector-cli", "build")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("inspector %v: %v\nstderr:\n%s", args, err, stderr.String())
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("inspector %v printed %q: %v", args, out, err)
	}
}

// tsClientSetup is the cached MCP tools' directory and a config with the
// rust-hooks example in session isolation beside the built-in calc.
func tsClientSetup(t testing.TB) (tools, cfg string) {
	t.Helper()
	tools = testenv.MCPTools(t)
	rustHooks, err := filepath.Abs(testenv.Built(t, filepath.Join("..", "..", "examples", "rust-hooks", "target", "wasm32-unknown-unknown", "release", "rust_hooks.wasm"), "rust"))
	if err != nil {
		t.Fatal(err)
	}
	return tools, setup(t, []string{finalReply}, "\n[[plugins]]\nname = \"rh\"\npath = "+strconv.Quote(rustHooks)+"\nisolation = \"session\"\n")
}

// tsClient runs testdata/mcp-client.mjs with the transport arguments
// (stdio COMMAND ARG... or http URL): it must negotiate the newest protocol
// morph serves, list the built-in and the plugin's tools, and call reverse.
func tsClient(t *testing.T, tools string, transport ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(tools, "node_modules", ".bin", "node"), append([]string{filepath.Join("testdata", "mcp-client.mjs"),
		"--call", "reverse", "--args", `{"text":"one two three"}`}, transport...)...)
	cmd.Env = append(os.Environ(), "MCP_TOOLS="+tools)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcp-client.mjs: %v\nstderr:\n%s", err, stderr.String())
	}
	var got struct {
		Server          struct{ Name string }
		ProtocolVersion string
		Tools           []string
		Result          struct {
			Content []struct{ Type, Text string }
			IsError bool
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("mcp-client.mjs printed %q: %v", out, err)
	}
	if got.Server.Name != "morph" || got.ProtocolVersion != mcp.ProtocolVersions()[0] {
		t.Errorf("server %q, protocol %q; want morph, %s", got.Server.Name, got.ProtocolVersion, mcp.ProtocolVersions()[0])
	}
	slices.Sort(got.Tools)
	if want := []string{"calc", "char_stats", "reverse"}; !slices.Equal(got.Tools, want) {
		t.Errorf("tools %v, want %v", got.Tools, want)
	}
	if r := got.Result; r.IsError || len(r.Content) != 1 || r.Content[0].Text != "eerht owt eno" {
		t.Errorf("reverse: %+v, want one text content, eerht owt eno\nstderr:\n%s", r, stderr.String())
	}
}

package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/morphhost/morph/internal/testenv"
	"github.com/morphhost/morph/mcp"
)

// rawHTTPServer is a hand-written Streamable HTTP MCP server on 127.0.0.1
// (JSON responses, no event streams) with tools echo and huge (a 100 MB
// JSON answer). Every request must carry "Authorization: Bearer tok";
// it counts those that do not.
func rawHTTPServer(t *testing.T) (url string, unauthorized *atomic.Int64) {
	t.Helper()
	unauthorized = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			unauthorized.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
			} `json:"params"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || len(req.ID) == 0 {
			w.WriteHeader(http.StatusAccepted) // a notification
			return
		}
		w.Header().Set("Content-Type", "application/json")
		reply := func(result any) {
			json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
		}
		switch req.Method {
		case "initialize":
			reply(map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "raw", "version": "0.1"}})
		case "tools/list":
			reply(map[string]any{"tools": []any{map[string]any{"name": "echo", "inputSchema": map[string]any{"type": "object"}},
				map[string]any{"name": "huge", "inputSchema": map[string]any{"type": "object"}}}})
		case "tools/call":
			if req.Params.Name == "echo" {
				reply(map[string]any{"content": []any{map[string]any{"type": "text", "text": "echo: " + req.Params.Arguments["message"].(string)}}})
				return
			}
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"content":[{"type":"text","text":"`)
			chunk := strings.Repeat("x", 1<<20)
			for range 100 {
				if _, err := io.WriteString(w, chunk); err != nil {
					return // the client stopped reading
				}
			}
			io.WriteString(w, `"}]}}`)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", unauthorized
}

// An HTTP server gets the entry's headers with every request; a 100 MB
// JSON answer (which the SDK would read whole) is refused at the body cap
// with ErrOutputTooLarge, naming the server.
func TestClientHTTPHeadersAndBodyCap(t *testing.T) {
	t.Parallel()
	url, unauthorized := rawHTTPServer(t)
	cfg := mcp.ServerConfig{Name: "raw", URL: url, Headers: map[string]string{"Authorization": "Bearer tok"}, MaxOutputBytes: 64 << 10}
	eng, _, _, err := clientEngine(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := callRemote(t, eng, "echo", map[string]any{"message": "over http"}); err != nil || out != "echo: over http" {
		t.Errorf("echo: %q, %v", out, err)
	}
	_, _, err = callRemote(t, eng, "huge", nil)
	var se *mcp.ServerError
	if !errors.Is(err, mcp.ErrOutputTooLarge) || !errors.As(err, &se) || se.Server != "raw" {
		t.Errorf("huge: %v, want ErrOutputTooLarge naming raw", err)
	}
	if n := unauthorized.Load(); n != 0 {
		t.Errorf("%d requests without the header", n)
	}
}

// serverEverything is the path of @modelcontextprotocol/server-everything
// and of the Node that runs it, from the cached MCP tools.
func serverEverything(t *testing.T) (node, script string) {
	t.Helper()
	tools := testenv.MCPTools(t)
	return filepath.Join(tools, "node_modules", ".bin", "node"),
		filepath.Join(tools, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
}

// checkEverything checks the tools of server-everything (prefix "se")
// through eng: a call, an image result, structured content, and a long
// operation cut by the entry's timeout (the server told), after which the
// server still answers.
func checkEverything(t *testing.T, call func(name string, params map[string]any) (string, int, error)) {
	t.Helper()
	if out, _, err := call("se.echo", map[string]any{"message": "hi"}); err != nil || out != "Echo: hi" {
		t.Errorf("echo: %q, %v", out, err)
	}
	if out, images, err := call("se.get-tiny-image", nil); err != nil || images != 1 || !strings.Contains(out, "[image 1: image/png]") {
		t.Errorf("get-tiny-image: %q, %d images, %v", out, images, err)
	}
	if out, _, err := call("se.get-structured-content", map[string]any{"location": "Chicago"}); err != nil || !strings.Contains(out, `"temperature"`) {
		t.Errorf("get-structured-content: %q, %v", out, err)
	}
	if _, _, err := call("se.trigger-long-running-operation", map[string]any{"duration": 60, "steps": 60}); !errors.Is(err, mcp.ErrCallTimeout) {
		t.Errorf("a long operation: %v, want ErrCallTimeout", err)
	}
	if out, _, err := call("se.echo", map[string]any{"message": "after"}); err != nil || out != "Echo: after" {
		t.Errorf("echo after the timeout: %q, %v", out, err)
	}
}

// morph's agent uses server-everything over stdio and Streamable HTTP.
func TestClientServerEverything(t *testing.T) {
	t.Parallel()
	node, script := serverEverything(t)
	port := startEverythingHTTP(t, node, script)
	stdio := mcp.ServerConfig{Name: "se", Prefix: "se", Command: node, Args: []string{script, "stdio"}, Timeout: 3 * time.Second,
		StopGrace: 500 * time.Millisecond}
	http := mcp.ServerConfig{Name: "se", Prefix: "se", URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp", Timeout: 3 * time.Second}
	for _, cfg := range []mcp.ServerConfig{stdio, http} {
		t.Run(map[bool]string{true: "http", false: "stdio"}[cfg.URL != ""], func(t *testing.T) {
			eng, _, _, err := clientEngine(t, cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkEverything(t, func(name string, params map[string]any) (string, int, error) {
				out, images, err := callRemote(t, eng, name, params)
				return out, len(images), err
			})
		})
	}
}

// startEverythingHTTP runs server-everything's Streamable HTTP server on a
// free port of 127.0.0.1's (it binds every interface; the tests reach it
// on loopback only) until t ends, and returns the port.
func startEverythingHTTP(t *testing.T, node, script string) int {
	t.Helper()
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, node, script, "streamableHttp")
		cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				if strings.Contains(sc.Text(), "listening on port") {
					ready <- true
					io.Copy(io.Discard, stderr)
					return
				}
			}
			ready <- false
		}()
		select {
		case ok := <-ready:
			if ok {
				t.Cleanup(func() { cancel(); cmd.Wait() })
				return port
			}
		case <-time.After(time.Minute):
		}
		cancel()
		cmd.Wait()
		if attempt == 2 {
			t.Fatal("server-everything's HTTP server did not start (three ports tried)")
		}
	}
}

// morph's agent uses server-filesystem (stdio) with an allow list: a file
// inside its root is read; one outside is the server's isError result.
func TestClientServerFilesystem(t *testing.T) {
	t.Parallel()
	tools := testenv.MCPTools(t)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello from fs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := mcp.ServerConfig{Name: "fs", Prefix: "fs", Tools: []string{"read_text_file", "list_directory"},
		Command: filepath.Join(tools, "node_modules", ".bin", "node"),
		Args:    []string{filepath.Join(tools, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js"), root}}
	eng, _, _, err := clientEngine(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range eng.Registry().Names() {
		if strings.HasPrefix(n, "fs.") {
			names = append(names, n)
		}
	}
	if got := strings.Join(names, " "); got != "fs.list_directory fs.read_text_file" {
		t.Errorf("tools %s, want the allow list's", got)
	}
	if out, _, err := callRemote(t, eng, "fs.read_text_file", map[string]any{"path": filepath.Join(root, "a.txt")}); err != nil || out != "hello from fs\n" {
		t.Errorf("read_text_file inside: %q, %v", out, err)
	}
	_, _, err = callRemote(t, eng, "fs.read_text_file", map[string]any{"path": "/etc/passwd"})
	var te *mcp.ToolError
	if !errors.As(err, &te) || !strings.Contains(te.Text, "Access denied") {
		t.Errorf("read_text_file outside: %v, want the server's isError result", err)
	}
}

// An HTTP server that never answers: the start fails within
// startup_timeout with ErrStartup naming the server.
func TestClientHTTPNeverAnswers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // read, so the server sees the client hang up
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	cfg := mcp.ServerConfig{Name: "silent", URL: srv.URL + "/mcp", StartupTimeout: 500 * time.Millisecond}
	_, _, _, err := clientEngine(t, cfg)
	var se *mcp.ServerError
	if !errors.Is(err, mcp.ErrStartup) || !errors.As(err, &se) || se.Server != "silent" || !strings.Contains(err.Error(), "startup_timeout") {
		t.Fatalf("Initialize: %v, want ErrStartup naming silent and startup_timeout", err)
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/mcp"
)

// BenchmarkMCPCall is one tools/call round trip from the official Go SDK's
// client, over stdio and over Streamable HTTP: to morph mcp serve (the
// built binary) calling the rust-hooks example's reverse in its sandbox,
// and to the reference server-everything (Node 22) calling its echo, a
// tool of the same shape (one string in, one text out). bare is the same
// plugin call inside the process (Engine.CallTool), without MCP, and
// inmemory the MCP layers (the SDK's and morph's) without a process or a
// pipe. The SDK client's rows are what users' clients pay; the raw rows
// time the servers alone: their client writes the request line and reads
// the answer line (rawClient), without decoding it. rawstdio/morph minus
// bare is what morph's server and the pipe add to the plugin call, and
// rawpipe/morph (morph's stdio server in this process, over pipes) the
// same without the second process, for profiles.
func BenchmarkMCPCall(b *testing.B) {
	tools, cfg := tsClientSetup(b)
	node := filepath.Join(tools, "node_modules", ".bin", "node")
	everything := filepath.Join(tools, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	morphURL, stop := startMCPHTTP(b, cfg)
	defer stop()
	everythingURL := startEverythingHTTP(b, node, everything)
	reverse := func() (string, map[string]any) { return "reverse", map[string]any{"text": "hello"} }
	echo := func() (string, map[string]any) { return "echo", map[string]any{"message": "hello"} }
	ctx := context.Background()
	c, err := config.Load(cfg)
	if err != nil {
		b.Fatal(err)
	}
	rt, err := c.Open(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	b.Run("bare", func(b *testing.B) {
		id := rt.Engine.NewSession("").ID()
		name, args := reverse()
		defer reportCPU(b, os.Getpid())()
		for b.Loop() {
			if _, err := rt.Engine.CallTool(ctx, id, name, args, c.RunOptions()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("inmemory/morph", func(b *testing.B) {
		srv, err := mcp.NewServer(ctx, rt.Engine, mcp.Options{Run: c.RunOptions(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		st, ct := sdk.NewInMemoryTransports()
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ctx, st) }()
		benchMCPCall(b, ct, os.Getpid, reverse)
		<-served
	})
	b.Run("stdio/morph", func(b *testing.B) {
		cmd := exec.Command(morphBinary(b), "mcp", "serve", "--config", cfg)
		benchMCPCall(b, &sdk.CommandTransport{Command: cmd}, func() int { return cmd.Process.Pid }, reverse)
	})
	b.Run("stdio/everything", func(b *testing.B) {
		cmd := exec.Command(node, everything, "stdio")
		benchMCPCall(b, &sdk.CommandTransport{Command: cmd}, func() int { return cmd.Process.Pid }, echo)
	})
	b.Run("rawpipe/morph", func(b *testing.B) {
		srv, err := mcp.NewServer(ctx, rt.Engine, mcp.Options{Run: c.RunOptions(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		inR, inW, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- srv.ServeStdio(ctx, inR, outW) }()
		benchRawCall(b, inW, outR, os.Getpid(), reverse, "olleh")
		inW.Close() // the session ends
		<-served
		outR.Close()
	})
	b.Run("rawstdio/morph", func(b *testing.B) {
		benchRawProcess(b, exec.Command(morphBinary(b), "mcp", "serve", "--config", cfg), reverse, "olleh")
	})
	b.Run("rawstdio/everything", func(b *testing.B) {
		benchRawProcess(b, exec.Command(node, everything, "stdio"), echo, "Echo: hello")
	})
	b.Run("http/morph", func(b *testing.B) {
		benchMCPCall(b, &sdk.StreamableClientTransport{Endpoint: morphURL}, nil, reverse)
	})
	b.Run("http/everything", func(b *testing.B) {
		benchMCPCall(b, &sdk.StreamableClientTransport{Endpoint: everythingURL}, nil, echo)
	})
}

// benchMCPCall times call's tool over one session of t, after a first
// call (the session's instance, the server's warm-up) outside the timing,
// and reports the CPU time of the server's process (server, once
// connected; none when nil).
func benchMCPCall(b *testing.B, t sdk.Transport, server func() int, call func() (string, map[string]any)) {
	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, t, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	name, args := call()
	params := &sdk.CallToolParams{Name: name, Arguments: args}
	if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
		b.Fatalf("%s: %v %+v", name, err, res)
	}
	if server != nil {
		defer reportCPU(b, server())()
	}
	for b.Loop() {
		if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
			b.Fatalf("%s: %v %+v", name, err, res)
		}
	}
}

// benchRawProcess times call's tool over cmd's standard input and output
// with rawClient (see benchRawCall).
func benchRawProcess(b *testing.B, cmd *exec.Cmd, call func() (string, map[string]any), want string) {
	w, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	r, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		w.Close() // the server's end of input: it exits
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-done
		}
	}()
	benchRawCall(b, w, r, cmd.Process.Pid, call, want)
}

// benchRawCall initializes an MCP session over w and r with rawClient and
// times call's tool over it, after a first call, decoded and checked in
// full, outside the timing. Each timed answer is checked for want and for
// not being an error, without being decoded.
func benchRawCall(b *testing.B, w io.Writer, r io.Reader, server int, call func() (string, map[string]any), want string) {
	c := &rawClient{w: w, r: bufio.NewReaderSize(r, 1<<20)}
	if _, err := c.roundTrip("initialize", fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`, mcp.ProtocolVersions()[0])); err != nil {
		b.Fatal(err)
	}
	if _, err := io.WriteString(w, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		b.Fatal(err)
	}
	name, args := call()
	raw, err := json.Marshal(sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		b.Fatal(err)
	}
	params := string(raw)
	line, err := c.roundTrip("tools/call", params)
	if err != nil {
		b.Fatal(err)
	}
	var first struct {
		Result sdk.CallToolResult
		Error  *struct{ Message string }
	}
	if err := json.Unmarshal(line, &first); err != nil || first.Error != nil || first.Result.IsError || len(first.Result.Content) != 1 {
		b.Fatalf("%s: %v: %s", name, err, line)
	}
	if text, ok := first.Result.Content[0].(*sdk.TextContent); !ok || !strings.Contains(text.Text, want) {
		b.Fatalf("%s: %s, want a text holding %q", name, line, want)
	}
	wantText, isError := []byte(want), []byte(`"isError":true`)
	defer reportCPU(b, server)()
	for b.Loop() {
		line, err := c.roundTrip("tools/call", params)
		if err != nil {
			b.Fatal(err)
		}
		if !bytes.Contains(line, wantText) || bytes.Contains(line, isError) {
			b.Fatalf("%s: %s, want a result holding %q", name, line, want)
		}
	}
}

// rawClient is the least an MCP client over stdio can do: write a request
// line, and read lines until the one answering it (its id; notifications
// are skipped), without decoding them. Its cost is a few hundred
// nanoseconds, so a round trip's time is the server's and the pipe's.
type rawClient struct {
	w             io.Writer
	r             *bufio.Reader
	id            int
	req, id1, id2 []byte
}

// roundTrip sends a request of method with params (JSON) and is the
// answer's line, valid until the next call.
func (c *rawClient) roundTrip(method, params string) ([]byte, error) {
	c.id++
	c.req = append(strconv.AppendInt(append(c.req[:0], `{"jsonrpc":"2.0","id":`...), int64(c.id), 10), `,"method":"`...)
	c.req = append(append(append(append(c.req, method...), `","params":`...), params...), "}\n"...)
	// The id ends with a comma (Go's encoding, id before result) or a
	// brace (JavaScript's, id last).
	c.id1 = append(strconv.AppendInt(append(c.id1[:0], `"id":`...), int64(c.id), 10), ',')
	c.id2 = append(c.id2[:0], c.id1...)
	c.id2[len(c.id2)-1] = '}'
	if _, err := c.w.Write(c.req); err != nil {
		return nil, err
	}
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return nil, fmt.Errorf("%s: reading the answer: %w (%q)", method, err, line)
		}
		if bytes.Contains(line, c.id1) || bytes.HasSuffix(bytes.TrimSpace(line), c.id2) {
			return line, nil
		}
	}
}

// reportCPU reads the CPU time process pid has used, and the function it
// returns reports what it used since as cpu-ns/op: the server's work per
// call, which a loaded machine does not inflate as it does the wall time
// (waiting for a core is not counted). For the rows in this process it is
// the client's too. It is the sum over the process's threads of Linux's
// /proc/PID/task/TID/schedstat; elsewhere, or without schedstat, nothing
// is reported.
func reportCPU(b *testing.B, pid int) func() {
	before, ok := cpuTime(pid)
	return func() {
		if after, ok2 := cpuTime(pid); ok && ok2 {
			b.ReportMetric(float64(after-before)/float64(b.N), "cpu-ns/op")
		}
	}
}

// cpuTime is the CPU time, in nanoseconds, the threads of process pid
// have run: a thread that ended is no longer counted (Go's and Node's
// threads live as long as their process).
func cpuTime(pid int) (int64, bool) {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(stats) == 0 {
		return 0, false
	}
	var sum int64
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			return 0, false
		}
		run, _, _ := strings.Cut(string(data), " ")
		ns, err := strconv.ParseInt(run, 10, 64)
		if err != nil {
			return 0, false
		}
		sum += ns
	}
	return sum, true
}

// startEverythingHTTP starts server-everything's Streamable HTTP mode on a
// free loopback port (it takes the port from PORT and cannot report one
// it picked) and is its endpoint.
func startEverythingHTTP(b *testing.B, node, everything string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(node, everything, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr + "/mcp"
		}
		if time.Now().After(deadline) {
			b.Fatalf("server-everything did not listen on %s within a minute", addr)
		}
	}
}

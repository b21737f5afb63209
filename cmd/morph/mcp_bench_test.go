package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
// pipe: what morph's server adds is stdio/morph minus bare, and of that
// inmemory/morph minus bare is MCP's, the rest the pipe's and the
// processes'.
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
		benchMCPCall(b, ct, reverse)
		<-served
	})
	b.Run("stdio/morph", func(b *testing.B) {
		benchMCPCall(b, &sdk.CommandTransport{Command: exec.Command(morphBinary(b), "mcp", "serve", "--config", cfg)}, reverse)
	})
	b.Run("stdio/everything", func(b *testing.B) {
		benchMCPCall(b, &sdk.CommandTransport{Command: exec.Command(node, everything, "stdio")}, echo)
	})
	b.Run("http/morph", func(b *testing.B) {
		benchMCPCall(b, &sdk.StreamableClientTransport{Endpoint: morphURL}, reverse)
	})
	b.Run("http/everything", func(b *testing.B) {
		benchMCPCall(b, &sdk.StreamableClientTransport{Endpoint: everythingURL}, echo)
	})
}

// benchMCPCall times call's tool over one session of t, after a first
// call (the session's instance, the server's warm-up) outside the timing.
func benchMCPCall(b *testing.B, t sdk.Transport, call func() (string, map[string]any)) {
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
	for b.Loop() {
		if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
			b.Fatalf("%s: %v %+v", name, err, res)
		}
	}
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

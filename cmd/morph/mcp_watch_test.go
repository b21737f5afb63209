package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// morph mcp serve --watch reloads a [[plugins]] file that changes: the
// client is told the tool list changed, and the new module's tools answer.
func TestMCPServeWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reload.wasm")
	copyFile := func(src string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(fixture(t, "reload_a"))
	cfg := setup(t, []string{finalReply}, "\n[[plugins]]\nname = \"reload\"\npath = "+strconv.Quote(path)+"\n")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(context.Background(), []string{"mcp", "serve", "--watch", "--config", cfg}, inR, outW, &stderr)
		outW.Close()
	}()
	changed := make(chan struct{}, 1)
	opts := &sdk.ClientOptions{ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts).
		Connect(context.Background(), &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connecting: %v; stderr:\n%s", err, stderr.String())
	}
	answer := func(tool string) string {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("calling %s: %v; stderr:\n%s", tool, err, stderr.String())
		}
		return res.Content[0].(*sdk.TextContent).Text
	}
	if got := answer("version"); got != "a" {
		t.Fatalf("version answered %q, want a", got)
	}
	copyFile(fixture(t, "reload_b"))
	select {
	case <-changed:
	case <-time.After(time.Minute):
		t.Fatalf("no notifications/tools/list_changed within a minute of the file's change; stderr:\n%s", stderr.String())
	}
	if got := answer("added"); got != "b" {
		t.Errorf("the reloaded module's new tool answered %q, want b", got)
	}
	cs.Close()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("exit %d after the client closed, want 0; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("morph mcp serve --watch did not return within a minute of the client closing standard input")
	}
}

package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// reviewDOT is a pipeline of two agent stages.
const reviewDOT = `digraph review {
  goal = "Review the change"
  start  [shape=Mdiamond]
  read   [prompt="Read: $goal"]
  judge  [prompt="Judge: $goal"]
  done   [shape=Msquare]
  start -> read -> judge -> done
}`

// pipelineConfig is a config serving the pipeline dot (review.dot beside
// it) as a tool, its runs under the config's directory.
func pipelineConfig(t *testing.T, dot string) string {
	t.Helper()
	cfg := setup(t, []string{`{"reply":{"type":"final","final":{"thought":"t","output":"read it"}}}`, `{"reply":{"type":"final","final":{"thought":"t","output":"looks right"}}}`},
		"\n[mcp]\npipelines = [\"review.dot\"]\n")
	dir := filepath.Dir(cfg)
	if err := os.WriteFile(filepath.Join(dir, "review.dot"), []byte(dot), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runs, _ := json.Marshal(filepath.Join(dir, "runs")) // a TOML basic string
	if _, err := f.WriteString("[pipeline]\nruns_dir = " + string(runs) + "\n"); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// morph mcp serve --config serves [mcp] pipelines beside the config's
// tools: a call runs the pipeline on the config's model and returns its
// outcome.
func TestMCPServePipeline(t *testing.T) {
	cfg := pipelineConfig(t, reviewDOT)
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
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "review", Arguments: map[string]any{"task": "Review PR 7"}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*sdk.TextContent).Text
	var got map[string]any
	if err := json.Unmarshal([]byte(text), &got); err != nil || res.IsError || got["status"] != "success" || got["answer"] != "looks right" ||
		!strings.HasPrefix(got["run_dir"].(string), filepath.Join(filepath.Dir(cfg), "runs")) {
		t.Errorf("review: isError %v, %s; want success with judge's answer, run under [pipeline] runs_dir", res.IsError, text)
	}
	cs.Close()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("exit %d, want 0; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("morph mcp serve did not return within a minute of the client closing standard input")
	}
	if !strings.Contains(stderr.String(), "morph: serving 2 tools over MCP") {
		t.Errorf("stderr does not count calc and review:\n%s", stderr.String())
	}
}

// A pipeline that does not validate stops morph mcp serve before it
// serves: exit 2, naming the file and the node.
func TestMCPServePipelineInvalid(t *testing.T) {
	cfg := pipelineConfig(t, `digraph review { start [shape=Mdiamond]; judge [prompt="x"]; done [shape=Msquare]; start -> done; lost -> judge }`)
	code, stdout, stderr := morph(t, "", "mcp", "serve", "--config", cfg)
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "review.dot") || !strings.Contains(stderr, "judge") {
		t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit 2 naming review.dot and node judge", code, stdout, stderr)
	}
}

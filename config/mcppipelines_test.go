package config_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/pipeline"
)

// [mcp] pipelines are resolved against the config file's directory; the
// pipeline tools' options come from [mcp] and [pipeline] runs_dir.
func TestMCPPipelines(t *testing.T) {
	dir := write(t, map[string]string{"replies.json": replies, "p/review.dot": "digraph review {}", "morph.toml": `[llm]
provider = "scripted"
scripted_replies = "replies.json"
[pipeline]
runs_dir = "/var/runs"
[mcp]
pipelines = ["p/review.dot"]
pipeline_timeout = "5m"
max_pipeline_runs = 2
`})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "p", "review.dot"); len(cfg.MCP.Pipelines) != 1 || cfg.MCP.Pipelines[0] != want {
		t.Errorf("Pipelines %q, want [%s]", cfg.MCP.Pipelines, want)
	}
	if o := cfg.PipelineToolOptions(); o != (pipeline.ToolOptions{RunsDir: "/var/runs", Timeout: 5 * time.Minute, MaxRuns: 2}) {
		t.Errorf("PipelineToolOptions() = %+v", o)
	}
}

// A pipeline file that is not there, a bad timeout or bound is an error
// naming the key.
func TestMCPPipelinesErrors(t *testing.T) {
	for _, tc := range []struct{ line, key, want string }{
		{`pipelines = ["nope.dot"]`, "mcp.pipelines", "nope.dot"},
		{`pipelines = [""]`, "mcp.pipelines", "entry 1 is empty"},
		{`pipeline_timeout = "0s"`, "mcp.pipeline_timeout", "must be positive"},
		{`max_pipeline_runs = 0`, "mcp.max_pipeline_runs", "leave it out for the default"},
	} {
		ce, err := loadErr(t, "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[mcp]\n"+tc.line+"\n")
		if ce.Key != tc.key || ce.Line != 5 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: key %q, line %d: %v; want %s at line 5, saying %q", tc.line, ce.Key, ce.Line, err, tc.key, tc.want)
		}
	}
}

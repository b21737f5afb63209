package config_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/pipeline"
)

func TestPipelineLimits(t *testing.T) {
	dir := write(t, map[string]string{"replies.json": replies, "morph.toml": `[llm]
provider = "scripted"
scripted_replies = "replies.json"
[pipeline]
allow_shell = true
runs_dir = "out"
max_node_visits = 7
max_restarts = 3
max_tool_output_kb = 2
tool_timeout = "30s"
max_cost_usd = 0.5
max_wall_time = "1h"
`})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Pipeline.AllowShell || cfg.Pipeline.RunsDir != "out" {
		t.Errorf("pipeline %+v", cfg.Pipeline)
	}
	want := pipeline.Limits{MaxNodeVisits: 7, MaxRestarts: 3, MaxToolOutputBytes: 2048, ToolTimeout: 30 * time.Second, MaxCostUSD: 0.5, MaxWallTime: time.Hour}
	if got := cfg.Pipeline.Limits(); got != want {
		t.Errorf("limits %+v, want %+v", got, want)
	}
}

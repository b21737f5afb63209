package config

import (
	"os"
	"path/filepath"

	"github.com/BurntSushi/toml"

	"github.com/morphhost/morph/pipeline"
)

// PipelineToolOptions are the settings of the pipelines [mcp] pipelines
// serves as tools: [mcp] pipeline_timeout and max_pipeline_runs, and the
// run directories under [pipeline] runs_dir.
func (c *Config) PipelineToolOptions() pipeline.ToolOptions {
	dir := c.Pipeline.RunsDir
	if dir == "" {
		dir = DefaultRunsDir
	}
	return pipeline.ToolOptions{RunsDir: dir, Timeout: c.MCP.PipelineTimeout, MaxRuns: c.MCP.MaxPipelineRuns}
}

// mcpPipelines resolves [mcp] pipelines against the config file's
// directory and checks that each is a file; the pipelines are parsed and
// checked when morph mcp serve opens them, against the config's tools.
func (v *validator) mcpPipelines() {
	m := &v.c.MCP
	key := toml.Key{"mcp", "pipelines"}
	for i, p := range m.Pipelines {
		if p == "" {
			v.fail(key, nil, "entry %d is empty: give a DOT file's path", i+1)
			continue
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(v.c.File), p)
			m.Pipelines[i] = p
		}
		if fi, err := os.Stat(p); err != nil {
			v.fail(key, err, "pipeline %s: %v (a relative path is resolved against the config file's directory)", p, err)
		} else if !fi.Mode().IsRegular() {
			v.fail(key, nil, "pipeline %s is not a regular file", p)
		}
	}
	if v.md.IsDefined("mcp", "pipeline_timeout") && m.PipelineTimeout <= 0 {
		v.fail(toml.Key{"mcp", "pipeline_timeout"}, nil, "must be positive, got %s (leave it out for the default, 30m)", m.PipelineTimeout)
	}
	v.limit(toml.Key{"mcp", "max_pipeline_runs"}, m.MaxPipelineRuns)
}

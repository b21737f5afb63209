package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/pipeline"
)

// servePipelines registers the pipelines of [mcp] pipelines as tools of
// eng, each run on a pipeline runtime of its own (config.OpenPipeline, as
// morph pipeline run): its engine does not have the pipeline tools, so a
// stage's agent cannot start a pipeline. It returns that runtime, nil when
// there are no pipelines; close it after the server.
func servePipelines(ctx context.Context, cfg *config.Config, eng *engine.Engine, logger *slog.Logger) (*config.PipelineRuntime, error) {
	if len(cfg.MCP.Pipelines) == 0 {
		return nil, nil
	}
	p, err := cfg.OpenPipeline(ctx, logger)
	if err != nil {
		return nil, openFailed(err)
	}
	set := pipeline.NewToolSet(p.Runner, cfg.PipelineToolOptions())
	var tools []*pipeline.Tool
	for _, file := range cfg.MCP.Pipelines {
		t, err := set.Load(file) // a file that does not parse or validate is a bad config
		if err != nil {
			return nil, &exitError{exitUsage, errors.Join(err, p.Close(context.WithoutCancel(ctx)))}
		}
		tools = append(tools, t)
	}
	if err := pipeline.RegisterTools(eng.Registry(), tools); err != nil {
		return nil, &exitError{exitUsage, errors.Join(err, p.Close(context.WithoutCancel(ctx)))}
	}
	return p, nil
}

package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/pipeline"
)

// PipelineRuntime is a pipeline Runner on the engine Open builds: what
// `morph pipeline run` runs a pipeline with.
type PipelineRuntime struct {
	// Runner has what the config gives: the agent backend and tools on the
	// engine, the built-in stage handlers and the plugins' (wasm:<plugin>),
	// [pipeline] allow_shell and limits, the logger. A node that names a
	// model endpoint of its own (llm_provider, base_url) gets an engine of
	// its own, opened at its first stage with the config's plugins, if
	// [pipeline] endpoints allows it. The Interviewer, OnEvent and the
	// run's own limits are the caller's to set.
	Runner *pipeline.Runner

	closers []interface{ Close(context.Context) error } // closed in order
}

// OpenPipeline opens the config's engine (Open, whose errors it returns
// unchanged) and a pipeline Runner on it. Close the runtime when the runs
// are over.
func (c *Config) OpenPipeline(ctx context.Context, logger *slog.Logger) (*PipelineRuntime, error) {
	if logger == nil {
		logger = slog.Default()
	}
	rt, err := c.Open(ctx, logger, c.Pipeline.EngineOptions()...)
	if err != nil {
		return nil, err
	}
	endpoints := &endpointEngines{cfg: c, logger: logger}
	backend := &pipeline.EngineBackend{Engine: rt.Engine, Options: c.RunOptions(), ForEndpoint: endpoints.get}
	handlers := pipeline.DefaultHandlerRegistry()
	for _, h := range rt.StageHandlers() {
		handlers.Register(h)
	}
	r := &pipeline.Runner{Handlers: handlers, Backend: backend, Tools: backend, AllowShell: c.Pipeline.AllowShell,
		Limits: c.Pipeline.Limits(), Logger: logger, Telemetry: rt.Telemetry()}
	// The threads' sessions end before their engine.
	return &PipelineRuntime{Runner: r, closers: []interface{ Close(context.Context) error }{backend, rt, endpoints}}, nil
}

// Close ends the runner's sessions and closes its engines (each plugin's
// destroy hook runs once per engine), joining their errors.
func (p *PipelineRuntime) Close(ctx context.Context) error {
	var errs []error
	for _, c := range p.closers {
		errs = append(errs, c.Close(ctx))
	}
	return errors.Join(errs...)
}

// endpointEngines opens an engine per other model endpoint that nodes name
// (llm_provider, base_url), with the config's plugins, once each.
type endpointEngines struct {
	cfg    *Config
	logger *slog.Logger
	mu     sync.Mutex
	open   map[string]*Runtime
}

func (e *endpointEngines) get(ctx context.Context, provider, baseURL string) (*engine.Engine, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if baseURL != "" && !e.cfg.AllowsEndpoint(baseURL) {
		return nil, fmt.Errorf("base_url %q is not an endpoint morph.toml allows: the model's API key would be sent to it; list it in [pipeline] endpoints to allow it", baseURL)
	}
	key := provider + "\x00" + baseURL
	if rt := e.open[key]; rt != nil {
		return rt.Engine, nil
	}
	c := *e.cfg
	if provider != "" {
		c.LLM.Provider = provider
	}
	if baseURL != "" {
		c.LLM.BaseURL = baseURL
	}
	rt, err := c.Open(ctx, e.logger, c.Pipeline.EngineOptions()...)
	if err != nil {
		return nil, fmt.Errorf("the model endpoint (llm_provider %q, base_url %q): %w", provider, baseURL, err)
	}
	if e.open == nil {
		e.open = map[string]*Runtime{}
	}
	e.open[key] = rt
	return rt.Engine, nil
}

// Close closes the engines opened.
func (e *endpointEngines) Close(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, rt := range e.open {
		errs = append(errs, rt.Close(ctx))
	}
	return errors.Join(errs...)
}

package config

import (
	"time"

	"github.com/BurntSushi/toml"

	"github.com/morphhost/morph/mcp"
)

// MCPServe is the [mcp] table: the limits of `morph mcp serve`, which its
// flags override. Zero values take package mcp's defaults.
type MCPServe struct {
	// MaxRequestKB bounds one request: a line on standard input, a body
	// over HTTP (default 4096).
	MaxRequestKB int `toml:"max_request_kb"`
	// MaxCallsPerSession bounds the tool calls a session runs at once
	// (default 32).
	MaxCallsPerSession int `toml:"max_calls_per_session"`
	// MaxSessions bounds the HTTP sessions open at once (default 256).
	MaxSessions int `toml:"max_sessions"`
	// MaxNotifications bounds the progress and log notifications (and
	// elicitations) a plugin sends one call's client (default 256).
	MaxNotifications int `toml:"max_notifications"`
	// MaxInFlightKB bounds the request bodies of the HTTP requests being
	// served at once (default 262144: 256 MiB).
	MaxInFlightKB int `toml:"max_in_flight_kb"`
	// WriteTimeout bounds each write to an HTTP client (default 30s): one
	// that stopped reading fails its request past it.
	WriteTimeout time.Duration `toml:"write_timeout"`
	// WatchInterval is how often --watch looks at the plugin files
	// (default 500ms).
	WatchInterval time.Duration `toml:"watch_interval"`
	// MaxItems bounds the prompts, the resources and the resource
	// templates served of each plugin (default 1000).
	MaxItems int `toml:"max_items"`
	// SessionIdle ends an HTTP session without a request for this long
	// (default 30m).
	SessionIdle time.Duration `toml:"session_idle"`
	// Pipelines are DOT pipelines served as tools, one each (relative
	// paths are resolved against the config file's directory): see
	// pipeline.ToolSet.
	Pipelines []string `toml:"pipelines"`
	// PipelineTimeout bounds one call of a pipeline tool (default 30m).
	PipelineTimeout time.Duration `toml:"pipeline_timeout"`
	// MaxPipelineRuns bounds the pipeline tool calls running at once, in
	// all sessions (default 4).
	MaxPipelineRuns int `toml:"max_pipeline_runs"`
	// MaxSamplingPerCall bounds the sampling requests a plugin sends one
	// call's client (default 4).
	MaxSamplingPerCall int `toml:"max_sampling_per_call"`
	// MaxSubscriptions bounds the resources one session subscribes to
	// (default 256).
	MaxSubscriptions int `toml:"max_subscriptions"`
	// EventStoreKB bounds the events kept over HTTP for clients to resume
	// a dropped stream (Last-Event-ID), all sessions together (default
	// 16384: 16 MiB); 0 keeps none.
	EventStoreKB *int `toml:"event_store_kb"`
	// SSEPollAfter closes the SSE stream of an HTTP tool call still
	// running after this long, for the client to resume it (default: never).
	SSEPollAfter time.Duration `toml:"sse_poll_after"`
}

// Options are the server's options the table sets.
func (m MCPServe) Options() mcp.Options {
	return mcp.Options{MaxRequestBytes: m.MaxRequestKB << 10, MaxCallsPerSession: m.MaxCallsPerSession, MaxNotifications: m.MaxNotifications, MaxItems: m.MaxItems,
		MaxSamplingPerCall: m.MaxSamplingPerCall, MaxSubscriptions: m.MaxSubscriptions}
}

// HTTPOptions are the HTTP transport's options the table sets.
func (m MCPServe) HTTPOptions() mcp.HTTPOptions {
	o := mcp.HTTPOptions{MaxSessions: m.MaxSessions, SessionIdle: m.SessionIdle, WriteTimeout: m.WriteTimeout, MaxBytesInFlight: m.MaxInFlightKB << 10,
		SSEPollAfter: m.SSEPollAfter}
	switch {
	case m.EventStoreKB == nil: // the default
	case *m.EventStoreKB == 0:
		o.EventStoreBytes = -1 // none
	default:
		o.EventStoreBytes = *m.EventStoreKB << 10
	}
	return o
}

func (v *validator) mcpServe() {
	m := v.c.MCP
	v.limit(toml.Key{"mcp", "max_request_kb"}, m.MaxRequestKB)
	v.limit(toml.Key{"mcp", "max_calls_per_session"}, m.MaxCallsPerSession)
	v.limit(toml.Key{"mcp", "max_sessions"}, m.MaxSessions)
	v.limit(toml.Key{"mcp", "max_in_flight_kb"}, m.MaxInFlightKB)
	v.limit(toml.Key{"mcp", "max_notifications"}, m.MaxNotifications)
	v.limit(toml.Key{"mcp", "max_items"}, m.MaxItems)
	v.limit(toml.Key{"mcp", "max_sampling_per_call"}, m.MaxSamplingPerCall)
	v.limit(toml.Key{"mcp", "max_subscriptions"}, m.MaxSubscriptions)
	if kb := m.EventStoreKB; kb != nil && (*kb < 0 || *kb > MaxKB) {
		v.fail(toml.Key{"mcp", "event_store_kb"}, nil, "must be from 0 (keep none) to %d, got %d (leave it out for the default, 16384)", MaxKB, *kb)
	}
	if v.md.IsDefined("mcp", "sse_poll_after") && m.SSEPollAfter < time.Second {
		v.fail(toml.Key{"mcp", "sse_poll_after"}, nil, "must be at least 1s, got %s (leave it out for the default, never: a call's stream stays open)", m.SSEPollAfter)
	}
	if v.md.IsDefined("mcp", "session_idle") && m.SessionIdle <= 0 {
		v.fail(toml.Key{"mcp", "session_idle"}, nil, "must be positive, got %s (leave it out for the default, 30m)", m.SessionIdle)
	}
	if v.md.IsDefined("mcp", "write_timeout") && m.WriteTimeout <= 0 {
		v.fail(toml.Key{"mcp", "write_timeout"}, nil, "must be positive, got %s (leave it out for the default, 30s)", m.WriteTimeout)
	}
	if v.md.IsDefined("mcp", "watch_interval") && m.WatchInterval < 10*time.Millisecond {
		v.fail(toml.Key{"mcp", "watch_interval"}, nil, "must be at least 10ms, got %s (leave it out for the default, 500ms)", m.WatchInterval)
	}
	v.mcpPipelines()
}

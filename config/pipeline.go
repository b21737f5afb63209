package config

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/pipeline"
)

// Pipeline is the [pipeline] table: the settings of `morph pipeline run`.
// Zero values take the defaults of package pipeline.
type Pipeline struct {
	// AllowShell lets tool nodes run tool_command in a shell, outside any
	// sandbox. Off by default: a DOT file should not be able to run
	// commands on the operator's machine unless the operator says so.
	// It also lets agent stages run tool_hooks.pre and tool_hooks.post
	// around their tool calls (EngineOptions).
	AllowShell bool `toml:"allow_shell"`
	// Endpoints are the model endpoints (OpenAI-compatible API roots)
	// that a node's base_url may name besides [llm] base_url. The model's
	// API key is sent to them, so a pipeline file cannot send it anywhere
	// the operator did not list. Default: none.
	Endpoints []string `toml:"endpoints"`
	// RunsDir is where runs get their directory when --run-dir is not
	// given (default "runs", relative to the current directory).
	RunsDir string `toml:"runs_dir"`
	// MaxNodeVisits bounds how often one node runs in a run (default 25).
	MaxNodeVisits int `toml:"max_node_visits"`
	// MaxSteps bounds the stages of a run (default: the graph's max_steps,
	// else max(1000, 4 x its nodes)).
	MaxSteps int `toml:"max_steps"`
	// MaxGoalGateRetries bounds the jumps unsatisfied goal gates cause
	// (default 5).
	MaxGoalGateRetries int `toml:"max_goal_gate_retries"`
	// MaxRestarts bounds the loop_restart edges a run takes (default: the
	// graph's max_restarts, else 5); set, it wins over the graph's.
	MaxRestarts int `toml:"max_restarts"`
	// ToolTimeout is a tool node's timeout when it sets none (default 5m).
	ToolTimeout time.Duration `toml:"tool_timeout"`
	// MaxToolOutputKB bounds a tool node's output (default 1024).
	MaxToolOutputKB int `toml:"max_tool_output_kb"`
	// MaxTokens, MaxCostUSD and MaxWallTime are run budgets (0: none); the
	// --max-tokens, --max-cost and --max-wall-time flags override them.
	MaxTokens   int           `toml:"max_tokens"`
	MaxCostUSD  float64       `toml:"max_cost_usd"`
	MaxWallTime time.Duration `toml:"max_wall_time"`
}

// DefaultRunsDir is where run directories go by default.
const DefaultRunsDir = "runs"

// Limits are the runner's limits the table sets.
func (p Pipeline) Limits() pipeline.Limits {
	return pipeline.Limits{
		MaxNodeVisits:      p.MaxNodeVisits,
		MaxSteps:           p.MaxSteps,
		MaxGoalGateRetries: p.MaxGoalGateRetries,
		MaxRestarts:        p.MaxRestarts,
		MaxTokens:          p.MaxTokens,
		MaxCostUSD:         p.MaxCostUSD,
		MaxWallTime:        p.MaxWallTime,
		MaxToolOutputBytes: p.MaxToolOutputKB << 10,
		ToolTimeout:        p.ToolTimeout,
	}
}

// EngineOptions are what a pipeline's engine needs of the table: the
// middleware that runs stages' tool hooks (pipeline.ToolHooksOption) when
// shell commands are allowed; none otherwise, and validation refuses
// pipelines that set hooks.
func (p Pipeline) EngineOptions() []engine.Option {
	if !p.AllowShell {
		return nil
	}
	return []engine.Option{pipeline.ToolHooksOption()}
}

// AllowsEndpoint reports whether a node may send its agent's requests, and
// the API key, to baseURL: [llm] base_url or one of [pipeline] endpoints
// (a trailing slash aside).
func (c *Config) AllowsEndpoint(baseURL string) bool {
	norm := func(u string) string { return strings.TrimRight(strings.TrimSpace(u), "/") }
	if norm(baseURL) == norm(c.LLM.BaseURL) {
		return true
	}
	for _, e := range c.Pipeline.Endpoints {
		if norm(e) == norm(baseURL) {
			return true
		}
	}
	return false
}

func (v *validator) pipeline() {
	p := v.c.Pipeline
	for _, e := range p.Endpoints {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.fail(toml.Key{"pipeline", "endpoints"}, err, "%q is not an http or https URL (an API root such as \"http://localhost:8000/v1\")", e)
		}
	}
	v.limit(toml.Key{"pipeline", "max_node_visits"}, p.MaxNodeVisits)
	v.limit(toml.Key{"pipeline", "max_steps"}, p.MaxSteps)
	v.limit(toml.Key{"pipeline", "max_goal_gate_retries"}, p.MaxGoalGateRetries)
	v.limit(toml.Key{"pipeline", "max_restarts"}, p.MaxRestarts)
	v.limit(toml.Key{"pipeline", "max_tool_output_kb"}, p.MaxToolOutputKB)
	if p.MaxTokens < 0 {
		v.fail(toml.Key{"pipeline", "max_tokens"}, nil, "must not be negative, got %d (0 means unlimited)", p.MaxTokens)
	}
	if p.MaxCostUSD < 0 {
		v.fail(toml.Key{"pipeline", "max_cost_usd"}, nil, "must not be negative, got %g (0 means unlimited)", p.MaxCostUSD)
	}
	if p.ToolTimeout < 0 {
		v.fail(toml.Key{"pipeline", "tool_timeout"}, nil, "must not be negative, got %s", p.ToolTimeout)
	}
	if p.MaxWallTime < 0 {
		v.fail(toml.Key{"pipeline", "max_wall_time"}, nil, "must not be negative, got %s (0 means unlimited)", p.MaxWallTime)
	}
}

// UnpricedBudget is the warning for a cost budget of maxCostUSD (the
// --max-cost flag or [pipeline] max_cost_usd) under a configuration with
// no [llm.pricing] table: every call then costs $0, marked unknown, and
// the budget cannot trip. It is "" when there is no budget or a table;
// a model without a price is warned of (llm.Pricer) as the run calls it.
func (c *Config) UnpricedBudget(maxCostUSD float64) string {
	if maxCostUSD <= 0 || len(c.LLM.Pricing) > 0 {
		return ""
	}
	model := `"<model>"`
	if c.LLM.Model != "" {
		model = strconv.Quote(c.LLM.Model)
	}
	return fmt.Sprintf("a cost budget of $%.4f is set (--max-cost or [pipeline] max_cost_usd), but the configuration has no [llm.pricing] table: "+
		"every call costs $0, marked unknown, so the budget cannot trip. Add [llm.pricing.%s] (input and output USD per million tokens), or bound the run with --max-tokens",
		maxCostUSD, model)
}

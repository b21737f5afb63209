package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/morphhost/morph/builtin"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm"
	"github.com/morphhost/morph/llm/openai"
	"github.com/morphhost/morph/llm/scripted"
)

// Client builds the model client the config describes; logger (nil:
// slog.Default()) receives the client's logs. Each call returns a new
// client; for provider "scripted", one that replays its file from the
// first reply.
//
// This is where the environment is read: for provider "openai" the API key
// comes from the variable named by api_key_env, and a missing model or an
// unset variable is an *Error naming the key to fix. Its chat errors name
// the key to change too, where one is the cause: llm.model for a model the
// server does not have, llm.max_reply_kb for a reply over it, llm.timeout
// and llm.total_timeout for a call that timed out (see openai's
// ErrModelNotFound, ErrReplyTooLarge, ErrAttemptTimeout and
// ErrTotalTimeout, which they still match).
func (c *Config) Client(logger *slog.Logger) (llm.Client, error) {
	if logger == nil {
		logger = slog.Default()
	}
	l := c.LLM
	switch l.Provider {
	case ProviderScripted:
		client, err := scripted.Load(l.ScriptedReplies, l.Pricing, scripted.WithLogger(logger))
		if err != nil {
			return nil, c.errorAt(toml.Key{"llm", "scripted_replies"}, err, err.Error())
		}
		return client, nil
	case ProviderOpenAI:
		if strings.TrimSpace(l.Model) == "" {
			return nil, c.errorAt(toml.Key{"llm", "model"}, nil, `missing: provider "openai" needs a model (or pass one with --model)`)
		}
		key := ""
		if l.APIKeyEnv != "" {
			if key = os.Getenv(l.APIKeyEnv); key == "" {
				return nil, c.errorAt(toml.Key{"llm", "api_key_env"}, nil,
					fmt.Sprintf("the environment variable %s is not set; export it with the API key, or set api_key_env = \"\" for a server that needs no key", l.APIKeyEnv))
			}
		}
		retries := 0 // the client's default
		if l.MaxRetries != nil {
			if retries = *l.MaxRetries; retries == 0 {
				retries = -1 // openai.Config: negative means none
			}
		}
		client, err := openai.New(openai.Config{
			BaseURL:       l.BaseURL,
			APIKey:        key,
			Model:         l.Model,
			Timeout:       l.Timeout,
			TotalTimeout:  l.TotalTimeout,
			MaxReplyBytes: int64(l.MaxReplyKB) << 10,
			MaxRetries:    retries,
			Pricing:       l.Pricing,
			JSONMode:      l.JSONMode,
			ExtraBody:     l.ExtraBody,
			Logger:        logger,
		})
		if err != nil {
			return nil, c.errorAt(toml.Key{"llm", "base_url"}, err, strings.TrimPrefix(err.Error(), "openai: "))
		}
		return hinted{client, c.File}, nil
	}
	return nil, c.errorAt(toml.Key{"llm", "provider"}, nil, fmt.Sprintf("unknown provider %q (known: %s, %s)", l.Provider, ProviderOpenAI, ProviderScripted))
}

// hinted is an openai client whose chat errors name the setting of file
// to change, which the client, knowing no config file, cannot. Embedding
// keeps the client's other methods (CheckParameters, CallBound), which
// the engine and package temporal look for.
type hinted struct {
	*openai.Client
	file string
}

// Chat is the client's Chat, with the setting named in its error.
func (h hinted) Chat(ctx context.Context, req llm.Request) (llm.Result, error) {
	res, err := h.Client.Chat(ctx, req)
	switch {
	case err == nil:
	case errors.Is(err, openai.ErrModelNotFound):
		err = fmt.Errorf("%w: set llm.model in %s to a model the server has, or pass --model", err, h.file)
	case errors.Is(err, openai.ErrTotalTimeout):
		err = fmt.Errorf("%w: llm.total_timeout in %s bounds a call with all its attempts (llm.timeout, each attempt)", err, h.file)
	case errors.Is(err, openai.ErrReplyTooLarge):
		err = fmt.Errorf("%w: llm.max_reply_kb in %s bounds a reply's body", err, h.file)
	case errors.Is(err, openai.ErrAttemptTimeout):
		err = fmt.Errorf("%w: llm.timeout in %s bounds each attempt; raise it for a slow server", err, h.file)
	}
	return res, err
}

// Registry returns a registry with the [tools] schema limits and
// agent.max_json_depth for tool parameters, holding the enabled built-in
// tools, with their schemas checked.
func (c *Config) Registry() (*engine.Registry, error) {
	reg := engine.NewRegistry()
	limits := c.Tools.SchemaLimits()
	limits.MaxParamsDepth = c.Agent.MaxJSONDepth
	reg.SetSchemaLimits(limits)
	for _, name := range c.Tools.Builtin {
		tool, ok := builtin.Lookup(name)
		if !ok {
			return nil, c.errorAt(toml.Key{"tools", "builtin"}, nil,
				fmt.Sprintf("unknown built-in tool %q (built-in tools: %s)", name, strings.Join(builtin.Names(), ", ")))
		}
		reg.RegisterFrom(engine.SourceBuiltin, tool)
	}
	if err := reg.Check(); err != nil {
		return nil, err
	}
	return reg, nil
}

// EngineOptions returns the engine options the [agent] table sets: the
// identity and rules of the default system prompt, when given, and the
// observation and JSON depth limits. (The [tools] schema limits are the
// registry's: see Registry.)
func (c *Config) EngineOptions() []engine.Option {
	opts := []engine.Option{engine.WithMaxObservationBytes(c.Agent.MaxObservationKB << 10), engine.WithMaxJSONDepth(c.Agent.MaxJSONDepth)}
	if c.Agent.Identity != "" {
		opts = append(opts, engine.WithIdentity(c.Agent.Identity))
	}
	if len(c.Agent.Rules) > 0 {
		opts = append(opts, engine.WithRules(c.Agent.Rules...))
	}
	if c.LLM.Images {
		opts = append(opts, engine.WithImages(true))
	}
	return opts
}

// RunOptions returns the per-run options: the model, the [agent] limits and
// a copy of [llm.parameters].
func (c *Config) RunOptions() engine.RunOptions {
	o := engine.RunOptions{
		Model:       c.LLM.Model,
		MaxSteps:    c.Agent.MaxSteps,
		TokenBudget: c.Agent.TokenBudget,
		Parameters:  maps.Clone(c.LLM.Parameters),
	}
	if p := c.Agent.ParseRetries; p != nil {
		o.ParseRetries = *p
		if *p == 0 {
			o.ParseRetries = -1 // RunOptions: 0 is the default, negative is none
		}
	}
	return o
}

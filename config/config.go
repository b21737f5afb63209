// Package config reads morph.toml, the configuration that the morph CLI and
// embedding hosts share, and builds from it what a run needs: the model
// client, the tool registry, engine options and run options.
//
// A complete file:
//
//	[llm]
//	provider = "openai"                  # or "scripted": replay replies from a file, offline
//	model = "gpt-4o-mini"
//	base_url = "https://api.openai.com/v1"  # the API root: not .../chat/completions
//	api_key_env = "OPENAI_API_KEY"       # the environment variable holding the key
//	timeout = "60s"                      # per attempt
//	total_timeout = "150s"               # all attempts and waits; default 150s, or twice timeout if longer
//	max_reply_kb = 16384                 # each reply's body
//	max_retries = 3                      # each wait is logged as a warning
//	scripted_replies = "demo/replies.json"   # provider "scripted"; relative to this file
//	json_mode = "json_object"            # or "json_schema" (structured output), "off" (no response_format)
//
//	[llm.parameters]                     # sent with every request
//	temperature = 0.2
//	max_tokens = 4096                    # a reply cut here that does not parse says so
//
//	[llm.extra_body]                     # server-specific fields, sent verbatim (vLLM, llama.cpp, Ollama)
//	top_k = 20
//
//	[llm.pricing."gpt-4o-mini"]          # USD per million tokens (of estimated counts if the server reports none)
//	input = 0.15
//	output = 0.6
//
//	[agent]
//	max_steps = 15
//	parse_retries = 2
//	token_budget = 0                     # 0: unlimited
//	max_observation_kb = 64              # each tool result the model is given
//	max_json_depth = 64                  # nesting of model replies, tool and model parameters, finals
//	identity = "You are ..."
//	rules = ["...", "..."]
//
//	[tools]
//	builtin = ["calc"]
//	max_schema_kb = 64                   # each tool's parameter schema
//	max_schema_depth = 64
//	max_schema_steps = 500000            # validation work of one tool call
//	max_description_kb = 16              # each tool's description, sent to the model
//	max_pattern_kb = 4                   # each regular expression a schema or a "format": "regex" value holds
//	max_pattern_insts = 10000            # the program of each, repetitions expanded
//
// Load checks everything it can without side effects: unknown keys, wrong
// types, values out of range, the replies file, built-in tool names, and
// for provider "openai" the base URL (the API root, not the
// /chat/completions endpoint), json_mode, the [llm.parameters] keys and
// values (a table-valued parameter's inner keys are its value's, not
// checked as config keys), and that [llm.extra_body] holds no standard
// parameter or field morph sets. Every message names the TOML key. What depends on the environment is checked when the client is
// built (Client): that provider "openai" has a model, and that the API key
// variable is set. So a command that only reads the config loads it
// without an API key.
//
// The API key never appears in the file: a key named api_key is an error.
// It is read from the environment variable named by api_key_env when
// Client is called, and from nowhere else; no plugin may be granted that
// variable (a [[plugins]] env naming it is an error).
//
// Every mistake is reported as an *Error naming the file, the line where
// known, and the full key path; errors.Is(err, ErrConfig) tells them apart
// from run-time failures.
package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/morphhost/morph/builtin"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/llm"
	"github.com/morphhost/morph/llm/openai"
	"github.com/morphhost/morph/llm/scripted"
)

// Providers.
const (
	ProviderOpenAI   = "openai"   // any OpenAI-compatible server, see package llm/openai
	ProviderScripted = "scripted" // replies replayed from a file, see package llm/scripted
)

// DefaultAPIKeyEnv is the api_key_env of an openai config that sets none.
const DefaultAPIKeyEnv = "OPENAI_API_KEY"

// Config is a loaded morph.toml. Load fills and checks it; a caller may then
// change fields (the CLI applies its --model and --max-steps flags so)
// before building a client and running.
type Config struct {
	LLM   LLM   `toml:"llm"`   // the [llm] table
	Agent Agent `toml:"agent"` // the [agent] table
	Tools Tools `toml:"tools"` // the [tools] table
	// Plugins are the [[plugins]] entries: WebAssembly modules, in order.
	Plugins []PluginEntry `toml:"plugins"`
	// MCPServers are the [[mcp_servers]] entries: MCP servers whose tools
	// the agent uses.
	MCPServers []MCPServerEntry `toml:"mcp_servers"`
	// Wasm is the [wasm] table: settings shared by all plugins.
	Wasm Wasm `toml:"wasm"`
	// Discovery is the [discovery] table: plugin directories.
	Discovery Discovery `toml:"discovery"`
	// Pipeline is the [pipeline] table: DOT pipeline runs.
	Pipeline Pipeline `toml:"pipeline"`
	// Temporal is the [temporal] table: where durable runs go (morph
	// worker, morph run --temporal).
	Temporal Temporal `toml:"temporal"`
	// MCP is the [mcp] table: the limits of morph mcp serve.
	MCP MCPServe `toml:"mcp"`
	// Verify is the [verify] table: which plugins must be signed (see oci.go).
	Verify Verification `toml:"verify"`
	// OCI is the [oci] table: plugins from OCI registries (see oci.go).
	OCI OCI `toml:"oci"`
	// Record is the [record] table: the caps of morph run --record (see record.go).
	Record Record `toml:"record"`
	// Telemetry is the [telemetry] table: OpenTelemetry (see telemetry.go).
	Telemetry Telemetry `toml:"telemetry"`

	// File is the path the config was loaded from, as given to Load.
	File string `toml:"-"`
	// AuthPrompt, when set, is where Open's [[mcp_servers]] print an OAuth
	// authorization URL for the user, whose browser step then completes
	// within the entry's startup_timeout (mcp.ServersOptions.AuthPrompt):
	// a command sets it to a terminal. Nil (an unattended run): such a
	// server without usable cached tokens, and no BROWSER, fails at start.
	AuthPrompt io.Writer `toml:"-"`

	src []byte // the file's contents, to locate keys in later errors
}

// LLM is the [llm] table: which model to talk to and how.
type LLM struct {
	// Provider is ProviderOpenAI or ProviderScripted.
	Provider string `toml:"provider"`
	// Model is the model name sent with every request and used to look up
	// its price. Provider "openai" needs one; for "scripted" it defaults to
	// the replies file's model.
	Model string `toml:"model"`
	// BaseURL is the OpenAI-compatible API root, e.g.
	// "http://localhost:8000/v1"; empty means OpenAI's. A URL ending in
	// /chat/completions (the endpoint, which the client appends) is an
	// error naming the root to write instead.
	BaseURL string `toml:"base_url"`
	// APIKeyEnv names the environment variable holding the API key. Load
	// sets DefaultAPIKeyEnv when the key is absent for provider "openai";
	// an explicit "" means the server needs no key.
	APIKeyEnv string `toml:"api_key_env"`
	// Timeout bounds each attempt of a model call; 0 means the client's default.
	Timeout time.Duration `toml:"timeout"`
	// TotalTimeout bounds a whole model call, its attempts and the waits
	// between them; 0 means the client's default (openai.Config.TotalTimeout:
	// 150s, or twice Timeout when that is longer). It must be at least
	// Timeout, which it would otherwise cut.
	TotalTimeout time.Duration `toml:"total_timeout"`
	// MaxReplyKB caps the body of each reply of provider "openai", in
	// KiB; 0 means the client's default (openai.DefaultMaxReplyBytes).
	MaxReplyKB int `toml:"max_reply_kb"`
	// MaxRetries is how many times a failed model call is retried; nil
	// means the client's default, 0 means none.
	MaxRetries *int `toml:"max_retries"`
	// ScriptedReplies is the replies file of provider "scripted". Load
	// resolves a relative path against the config file's directory, so the
	// field holds a path usable from the current directory.
	ScriptedReplies string `toml:"scripted_replies"`
	// ExtraBody is the [llm.extra_body] table: server-specific request
	// fields (top_k, min_p, repetition_penalty, ...) that provider "openai"
	// adds verbatim to every request body. A standard parameter or a field
	// the client sets is refused (it belongs in [llm.parameters] or its own
	// key). See openai.Config.ExtraBody.
	ExtraBody map[string]any `toml:"extra_body"`
	// JSONMode is how provider "openai" asks for the protocol's JSON reply:
	// "json_object" (the default, for ""), "json_schema" (the protocol's
	// schema as structured output) or "off" (no response_format, for
	// servers that refuse it). See openai.Config.JSONMode.
	JSONMode string `toml:"json_mode"`
	// Parameters are the base model parameters (temperature, max_tokens, ...)
	// sent with every request of a run.
	Parameters map[string]any `toml:"parameters"`
	// Pricing gives each model's price, to compute run costs.
	Pricing llm.Pricing `toml:"pricing"`
	// Images says the model takes images: the images of tool results (an
	// MCP plugin's image content) go to it with the observation, as
	// image_url parts; without it they are dropped and the model reads the
	// result's text, which names them. Default false.
	Images bool `toml:"images"`
}

// Agent is the [agent] table: the run loop's limits and the system prompt.
type Agent struct {
	// MaxSteps caps the model replies of a run; 0 means the engine default.
	MaxSteps int `toml:"max_steps"`
	// ParseRetries is how many unparseable replies in a row are corrected
	// before the run is forced to conclude; nil means the engine default, 0
	// means none.
	ParseRetries *int `toml:"parse_retries"`
	// TokenBudget forces a conclusion once a run has used more tokens; 0
	// means unlimited.
	TokenBudget int `toml:"token_budget"`
	// MaxObservationKB caps each tool output or error given to the model,
	// and the text of each event; 0 means the engine default (64).
	MaxObservationKB int `toml:"max_observation_kb"`
	// MaxJSONDepth caps how deeply a model reply, a tool call's parameters,
	// the model parameters a plugin builds and a fallback final may nest;
	// 0 means the engine default (64).
	MaxJSONDepth int `toml:"max_json_depth"`
	// Identity replaces the first paragraph of the default system prompt.
	Identity string `toml:"identity"`
	// Rules replace the rules of the default system prompt.
	Rules []string `toml:"rules"`
}

// Tools is the [tools] table.
type Tools struct {
	// Builtin names the built-in tools to enable (see package builtin).
	Builtin []string `toml:"builtin"`
	// MaxSchemaKB caps each tool's parameter schema, which plugins write;
	// 0 means the engine default (64).
	MaxSchemaKB int `toml:"max_schema_kb"`
	// MaxSchemaDepth caps how deeply a schema nests; 0 means the engine
	// default (64).
	MaxSchemaDepth int `toml:"max_schema_depth"`
	// MaxSchemaSteps caps the work of validating one tool call (see
	// engine.SchemaLimits); 0 means the engine default (500000).
	MaxSchemaSteps int `toml:"max_schema_steps"`
	// MaxDescriptionKB caps each tool's description, which goes to the
	// model with every request; 0 means the engine default (16).
	MaxDescriptionKB int `toml:"max_description_kb"`
	// MaxPatternKB caps each regular expression compiled: a schema's
	// pattern and patternProperties, and each value "format": "regex"
	// checks; 0 means the engine default (4).
	MaxPatternKB int `toml:"max_pattern_kb"`
	// MaxPatternInsts caps the program of each regular expression, its
	// repetitions expanded; 0 means the engine default (10000).
	MaxPatternInsts int `toml:"max_pattern_insts"`
}

// SchemaLimits are the engine's tool schema limits the table sets.
func (t Tools) SchemaLimits() engine.SchemaLimits {
	return engine.SchemaLimits{MaxBytes: t.MaxSchemaKB << 10, MaxDepth: t.MaxSchemaDepth, MaxSteps: t.MaxSchemaSteps,
		MaxDescriptionBytes: t.MaxDescriptionKB << 10, MaxPatternBytes: t.MaxPatternKB << 10, MaxPatternInsts: t.MaxPatternInsts}
}

// Load reads and checks the config file at path. The error is an *Error, or
// several joined with errors.Join; errors.Is(err, ErrConfig) holds for all.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		msg := "cannot read the config file: " + err.Error()
		if errors.Is(err, os.ErrNotExist) {
			msg = "config file not found"
		}
		return nil, &Error{File: path, Msg: msg, Err: err}
	}
	c := &Config{File: path, src: data}
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(c)
	if err != nil {
		e := decodeError(path, err, len(md.Keys()) > 0)
		if e.Line == 0 && e.Key != "" {
			e.Line = keyLine(data, strings.Split(e.Key, "."))
		}
		return nil, e
	}
	v := &validator{c: c, md: md}
	v.unknownKeys()
	v.llm()
	v.agent()
	v.tools()
	v.pipeline()
	v.mcpServe()
	v.temporal()
	v.plugins()
	v.verification()
	v.mcpServers()
	v.moduleLimits()
	v.record()
	v.telemetry()
	// In file order; mistakes that have no line go last.
	slices.SortStableFunc(v.errs, func(a, b error) int { return lineOf(a) - lineOf(b) })
	switch len(v.errs) {
	case 0:
		return c, nil
	case 1:
		return nil, v.errs[0]
	}
	return nil, errors.Join(v.errs...)
}

func lineOf(err error) int {
	var e *Error
	if errors.As(err, &e) && e.Line > 0 {
		return e.Line
	}
	return math.MaxInt32
}

// validator collects every mistake of one file, so they are fixed in one go.
type validator struct {
	c    *Config
	md   toml.MetaData
	errs []error
}

// fail records a mistake about key (given as its parts).
func (v *validator) fail(key toml.Key, err error, format string, args ...any) {
	v.errs = append(v.errs, v.c.errorAt(key, err, fmt.Sprintf(format, args...)))
}

// errorAt builds an *Error about key, located in the loaded file.
func (c *Config) errorAt(key toml.Key, err error, msg string) *Error {
	e := &Error{File: c.File, Key: key.String(), Msg: msg, Err: err}
	if len(key) > 0 {
		e.Line = keyLine(c.src, key)
	}
	return e
}

func (v *validator) unknownKeys() {
	var reported []toml.Key
	for _, key := range v.md.Undecoded() {
		if slices.ContainsFunc(reported, func(r toml.Key) bool { return hasPrefix(key, r) }) {
			continue // inside an unknown table already reported
		}
		if len(key) > 3 && hasPrefix(key, toml.Key{"llm", "parameters"}) || len(key) > 2 && hasPrefix(key, toml.Key{"llm", "extra_body"}) ||
			len(key) > 3 && hasPrefix(key, toml.Key{"plugins", "tools", "parameters"}) || len(key) == 4 && hasPrefix(key, toml.Key{"plugins", "modules"}) {
			continue // inside a table-valued parameter, an extra body field or a tool's JSON Schema (free-form), or a linked module's table (decoded by LinkedModuleEntry)
		}
		reported = append(reported, key)
		if key[len(key)-1] == "api_key" {
			v.fail(key, nil, "the API key must not be in the config file; set api_key_env to the name of the environment variable that holds it (e.g. api_key_env = %q)", DefaultAPIKeyEnv)
			continue
		}
		msg := "unknown key"
		if known := knownKeys(key); len(known) > 0 {
			where := "at the top level"
			if len(key) > 1 {
				where = "in [" + key[:len(key)-1].String() + "]"
			}
			msg += fmt.Sprintf(" (known keys %s: %s)", where, strings.Join(known, ", "))
		}
		v.fail(key, nil, "%s", msg)
	}
}

func (v *validator) llm() {
	l := &v.c.LLM
	switch l.Provider {
	case ProviderOpenAI, ProviderScripted:
	case "":
		v.fail(toml.Key{"llm", "provider"}, nil, "missing: set provider = %q or %q", ProviderOpenAI, ProviderScripted)
	default:
		v.fail(toml.Key{"llm", "provider"}, nil, "unknown provider %q (known: %s, %s)", l.Provider, ProviderOpenAI, ProviderScripted)
	}

	if v.md.IsDefined("llm", "api_key_env") {
		if l.APIKeyEnv != "" && host.CheckEnvName(l.APIKeyEnv) != nil {
			// Never echo the value: it may be the key itself, pasted here by mistake.
			v.fail(toml.Key{"llm", "api_key_env"}, nil, "must be the name of an environment variable (such as %s), not the key itself", DefaultAPIKeyEnv)
		}
	} else if l.Provider == ProviderOpenAI {
		l.APIKeyEnv = DefaultAPIKeyEnv
	}

	if v.md.IsDefined("llm", "timeout") {
		switch {
		case v.md.Type("llm", "timeout") != "String":
			v.fail(toml.Key{"llm", "timeout"}, nil, "want a duration string such as \"60s\", got %s", strings.ToLower(v.md.Type("llm", "timeout")))
		case l.Timeout <= 0:
			v.fail(toml.Key{"llm", "timeout"}, nil, "must be positive, got %s", l.Timeout)
		}
	}
	if v.md.IsDefined("llm", "total_timeout") {
		attempt := cmp.Or(l.Timeout, openai.DefaultTimeout)
		switch {
		case v.md.Type("llm", "total_timeout") != "String":
			v.fail(toml.Key{"llm", "total_timeout"}, nil, "want a duration string such as \"150s\", got %s", strings.ToLower(v.md.Type("llm", "total_timeout")))
		case l.TotalTimeout <= 0:
			v.fail(toml.Key{"llm", "total_timeout"}, nil, "must be positive, got %s", l.TotalTimeout)
		case l.TotalTimeout < attempt:
			v.fail(toml.Key{"llm", "total_timeout"}, nil, "%s is shorter than one attempt (timeout, %s), which it would cut: raise total_timeout or lower timeout", l.TotalTimeout, attempt)
		}
	}
	v.limit(toml.Key{"llm", "max_reply_kb"}, l.MaxReplyKB)
	if l.MaxRetries != nil && *l.MaxRetries < 0 {
		v.fail(toml.Key{"llm", "max_retries"}, nil, "must not be negative, got %d (0 means no retries)", *l.MaxRetries)
	}

	for _, model := range slices.Sorted(maps.Keys(l.Pricing)) {
		p := l.Pricing[model]
		if p.InputPerMillion < 0 {
			v.fail(toml.Key{"llm", "pricing", model, "input"}, nil, "must not be negative, got %v", p.InputPerMillion)
		}
		if p.OutputPerMillion < 0 {
			v.fail(toml.Key{"llm", "pricing", model, "output"}, nil, "must not be negative, got %v", p.OutputPerMillion)
		}
	}

	switch l.Provider {
	case ProviderScripted:
		v.scripted()
	case ProviderOpenAI:
		v.openai()
	}
}

func (v *validator) scripted() {
	l := &v.c.LLM
	key := toml.Key{"llm", "scripted_replies"}
	if l.ScriptedReplies == "" {
		v.fail(key, nil, "missing: provider %q needs the path of its replies file", ProviderScripted)
		return
	}
	if !filepath.IsAbs(l.ScriptedReplies) {
		l.ScriptedReplies = filepath.Join(filepath.Dir(v.c.File), l.ScriptedReplies)
	}
	client, err := scripted.Load(l.ScriptedReplies, nil)
	switch {
	case errors.Is(err, os.ErrNotExist):
		v.fail(key, err, "replies file %s not found (a relative path is resolved against the config file's directory)", l.ScriptedReplies)
	case err != nil:
		v.fail(key, err, "%v", err)
	case l.Model == "":
		l.Model = client.Model()
	}
}

func (v *validator) openai() {
	l := &v.c.LLM
	// New checks the base URL; it needs no key, so it also gives the
	// parameter checker without touching the environment.
	if root, ok := openai.TrimChatPath(l.BaseURL); ok {
		v.fail(toml.Key{"llm", "base_url"}, nil, "%q ends in /chat/completions, which morph appends: write base_url = %q (the API root, usually ending in /v1)", l.BaseURL, root)
		return
	}
	if l.JSONMode != "" && !slices.Contains(openai.JSONModes, l.JSONMode) {
		v.fail(toml.Key{"llm", "json_mode"}, nil, "unknown mode %q (known: %s)", l.JSONMode, strings.Join(openai.JSONModes, ", "))
		return
	}
	var xerr *openai.ParametersError
	if errors.As(openai.CheckExtraBody(l.ExtraBody), &xerr) {
		for _, p := range xerr.Problems {
			msg := p.Reason
			switch why, refused := refusedParameters[p.Key]; {
			case refused:
				msg = "morph sets it: " + why
			case slices.Contains(openai.SupportedParameters(), p.Key):
				msg = "a standard parameter: set it in [llm.parameters], where its value is checked"
			}
			v.fail(toml.Key{"llm", "extra_body", p.Key}, p, "%s", msg)
		}
	}
	client, err := openai.New(openai.Config{BaseURL: l.BaseURL, Model: l.Model, Timeout: l.Timeout, TotalTimeout: l.TotalTimeout})
	if err != nil {
		v.fail(toml.Key{"llm", "base_url"}, err, "%s", strings.TrimPrefix(err.Error(), "openai: "))
		return
	}
	err = client.CheckParameters(l.Parameters)
	var perr *openai.ParametersError
	switch {
	case errors.As(err, &perr):
		for _, p := range perr.Problems {
			msg := p.Reason
			if why, ok := refusedParameters[p.Key]; ok {
				msg = why
			}
			unknown := strings.HasPrefix(msg, "unknown parameter")
			if msg == "unknown parameter" && len(perr.Supported) > 0 { // no "did you mean": list them
				msg += " (supported: " + strings.Join(perr.Supported, ", ") + ")"
			}
			if unknown {
				msg += "; a server-specific parameter (top_k, min_p, ...) goes in [llm.extra_body]"
			}
			v.fail(toml.Key{"llm", "parameters", p.Key}, p, "%s", msg)
		}
	case err != nil:
		v.fail(toml.Key{"llm", "parameters"}, err, "%v", err)
	}
}

// refusedParameters words, in morph.toml's terms, why the openai client
// refuses these [llm.parameters] keys (its own reasons name Go fields).
var refusedParameters = map[string]string{
	"model":           "set [llm] model instead",
	"messages":        "the messages are the run's, not a parameter",
	"response_format": "set [llm] json_mode instead (json_object, json_schema or off)",
	"stream":          "streaming is chosen by the program that runs the agent, not by the config",
	"stream_options":  "streaming is chosen by the program that runs the agent, not by the config (usage is always requested)",
}

func (v *validator) agent() {
	a := &v.c.Agent
	if v.md.IsDefined("agent", "max_steps") && a.MaxSteps < 1 {
		v.fail(toml.Key{"agent", "max_steps"}, nil, "must be at least 1, got %d", a.MaxSteps)
	}
	if a.ParseRetries != nil && *a.ParseRetries < 0 {
		v.fail(toml.Key{"agent", "parse_retries"}, nil, "must not be negative, got %d (0 means no retries)", *a.ParseRetries)
	}
	if a.TokenBudget < 0 {
		v.fail(toml.Key{"agent", "token_budget"}, nil, "must not be negative, got %d (0 means unlimited)", a.TokenBudget)
	}
	v.limit(toml.Key{"agent", "max_observation_kb"}, a.MaxObservationKB)
	v.limit(toml.Key{"agent", "max_json_depth"}, a.MaxJSONDepth)
	for i, r := range a.Rules {
		if strings.TrimSpace(r) == "" {
			v.fail(toml.Key{"agent", "rules"}, nil, "rule %d is empty", i+1)
		}
	}
}

func (v *validator) tools() {
	t := v.c.Tools
	for _, name := range t.Builtin {
		if _, ok := builtin.Lookup(name); !ok {
			v.fail(toml.Key{"tools", "builtin"}, nil, "unknown built-in tool %q (built-in tools: %s)", name, strings.Join(builtin.Names(), ", "))
		}
	}
	v.limit(toml.Key{"tools", "max_schema_kb"}, t.MaxSchemaKB)
	v.limit(toml.Key{"tools", "max_schema_depth"}, t.MaxSchemaDepth)
	v.limit(toml.Key{"tools", "max_schema_steps"}, t.MaxSchemaSteps)
	v.limit(toml.Key{"tools", "max_description_kb"}, t.MaxDescriptionKB)
	v.limit(toml.Key{"tools", "max_pattern_kb"}, t.MaxPatternKB)
	v.limit(toml.Key{"tools", "max_pattern_insts"}, t.MaxPatternInsts)
}

// limit checks a limit that, when set, must be from 1 (absent, the
// engine's default applies) to what its setting can hold: MaxKB for a
// *_kb key, math.MaxInt32 for a count.
func (v *validator) limit(key toml.Key, n int) {
	if top := highest(key[len(key)-1]); v.md.IsDefined(key...) && (n < 1 || n > top) {
		v.fail(key, nil, "must be from 1 to %d, got %d (leave it out for the default)", top, n)
	}
}

// MaxKB is the largest value of a *_kb key (and of a CLI flag that sets
// one): 4 GiB less 1 KiB, more than any cap needs, in bytes within every
// setting. Larger values, shifted into bytes, overflowed and silently
// became the default.
const MaxKB = math.MaxUint32 >> 10

// maxDepth is the largest value of a *_depth key: far deeper than real
// JSON nests, and the engine analyses each tool schema's validation cost
// level by level down to agent.max_json_depth.
const maxDepth = 1000

// highest is the largest value of the limit called name: MaxKB for a
// *_kb key, maxDepth for a *_depth key, math.MaxInt32 for a count.
func highest(name string) int {
	switch {
	case strings.HasSuffix(name, "_kb"):
		return MaxKB
	case strings.HasSuffix(name, "_depth"):
		return maxDepth
	}
	return math.MaxInt32
}

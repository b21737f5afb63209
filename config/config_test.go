package config_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/llm"
	"github.com/morphhost/morph/llm/scripted"
)

const replies = `{"model":"scripted-test","replies":[
  {"reply":{"type":"final","final":{"thought":"t","output":"ok"}},"input_tokens":1000,"output_tokens":100}
]}`

// write creates the files (name -> content) in a fresh directory and returns
// the directory.
func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// loadErr loads content as morph.toml (with a valid replies file next to
// it) and returns the *Error, failing the test if there is none.
func loadErr(t *testing.T, content string) (*config.Error, error) {
	t.Helper()
	dir := write(t, map[string]string{"morph.toml": content, "replies.json": replies})
	_, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err == nil {
		t.Fatalf("Load succeeded on:\n%s", content)
	}
	if !errors.Is(err, config.ErrConfig) {
		t.Fatalf("error %v does not match ErrConfig", err)
	}
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *config.Error", err)
	}
	return ce, err
}

func TestLoadScripted(t *testing.T) {
	dir := write(t, map[string]string{
		"conf/morph.toml": `
[llm]
provider = "scripted"
scripted_replies = "../demo/replies.json"
timeout = "30s"

[llm.parameters]
temperature = 0.2

[llm.pricing."scripted-test"]
input = 2.5
output = 10

[agent]
max_steps = 7
parse_retries = 0
token_budget = 5000
identity = "You are a test."
rules = ["Be brief.", "Be right."]

[tools]
builtin = ["calc"]
`,
		"demo/replies.json": replies,
	})
	// Run from elsewhere: the replies path is relative to the config file,
	// not to the working directory.
	t.Chdir(t.TempDir())
	cfg, err := config.Load(filepath.Join(dir, "conf/morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "demo/replies.json"); cfg.LLM.ScriptedReplies != want {
		t.Errorf("ScriptedReplies = %q, want %q", cfg.LLM.ScriptedReplies, want)
	}
	if cfg.LLM.Model != "scripted-test" {
		t.Errorf("Model = %q, want the replies file's model", cfg.LLM.Model)
	}
	if cfg.LLM.Timeout != 30*time.Second || cfg.LLM.Pricing["scripted-test"].OutputPerMillion != 10 {
		t.Errorf("LLM = %+v", cfg.LLM)
	}

	ro := cfg.RunOptions()
	if ro.Model != "scripted-test" {
		t.Errorf("RunOptions.Model = %q, want %q", ro.Model, "scripted-test")
	}
	if ro.MaxSteps != 7 {
		t.Errorf("RunOptions.MaxSteps = %d, want 7", ro.MaxSteps)
	}
	if ro.ParseRetries != -1 {
		t.Errorf("RunOptions.ParseRetries = %d, want -1", ro.ParseRetries)
	}
	if ro.TokenBudget != 5000 {
		t.Errorf("RunOptions.TokenBudget = %d, want 5000", ro.TokenBudget)
	}
	if ro.Parameters["temperature"] != 0.2 {
		t.Errorf("RunOptions.Parameters[temperature] = %v, want 0.2", ro.Parameters["temperature"])
	}
	ro.Parameters["temperature"] = 1.0
	if cfg.LLM.Parameters["temperature"] != 0.2 {
		t.Error("RunOptions shares the config's parameters map")
	}
	if n := len(cfg.EngineOptions()); n != 4 {
		t.Errorf("%d engine options, want 4 (observation and depth limits, identity, rules)", n)
	}

	reg, err := cfg.Registry()
	if err != nil {
		t.Fatal(err)
	}
	if names := reg.Names(); len(names) != 1 || names[0] != "calc" {
		t.Errorf("tools %v, want [calc]", names)
	}

	client, err := cfg.Client(nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Chat(context.Background(), llm.Request{Model: ro.Model})
	if err != nil {
		t.Fatal(err)
	}
	if want := (1000*2.5 + 100*10) / 1e6; res.Usage.Cost != want {
		t.Errorf("cost %v, want %v", res.Usage.Cost, want)
	}

	// The whole engine, end to end.
	rt, err := cfg.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	final, rc, err := rt.Engine.Run(context.Background(), "test", cfg.RunOptions())
	if err != nil {
		t.Fatal(err)
	}
	if final.Output != "ok" {
		t.Errorf("final.Output = %q, want %q", final.Output, "ok")
	}
	if rc.Metrics.TotalCost == 0 {
		t.Errorf("Metrics.TotalCost = 0, want the priced run's cost (metrics %+v)", rc.Metrics)
	}
	if !strings.HasPrefix(rc.SystemPrompt, "You are a test.") {
		t.Errorf("SystemPrompt = %q, want it to start with %q", rc.SystemPrompt, "You are a test.")
	}
}

func TestModelOverridesScriptModel(t *testing.T) {
	dir := write(t, map[string]string{"morph.toml": `
[llm]
provider = "scripted"
model = "mine"
scripted_replies = "replies.json"
`, "replies.json": replies})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.Model != "mine" {
		t.Fatalf("Model = %q, want the config's", cfg.LLM.Model)
	}
}

const openaiConfig = `
[llm]
provider = "openai"
model = "gpt-test"
base_url = "http://localhost:9/v1"
api_key_env = "MORPH_TEST_API_KEY"
max_retries = 0

[llm.parameters]
temperature = 0.5
max_tokens = 512
`

func TestOpenAILoadsWithoutTheKey(t *testing.T) {
	t.Setenv("MORPH_TEST_API_KEY", "")
	os.Unsetenv("MORPH_TEST_API_KEY")
	dir := write(t, map[string]string{"morph.toml": openaiConfig})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatalf("Load needs no API key, but: %v", err)
	}
	_, err = cfg.Client(nil)
	var ce *config.Error
	if !errors.As(err, &ce) || !errors.Is(err, config.ErrConfig) {
		t.Fatalf("Client without the variable: err = %v, want a *config.Error", err)
	}
	if ce.Key != "llm.api_key_env" {
		t.Errorf("Key = %q, want %q", ce.Key, "llm.api_key_env")
	}
	if ce.Line != 6 {
		t.Errorf("Line = %d, want 6", ce.Line)
	}
	if !strings.Contains(ce.Msg, "MORPH_TEST_API_KEY is not set") {
		t.Errorf("Msg = %q, want it to say %q", ce.Msg, "MORPH_TEST_API_KEY is not set")
	}

	t.Setenv("MORPH_TEST_API_KEY", "sk-test-secret")
	client, err := cfg.Client(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The openai client, with errors naming the config keys: its CallBound
	// kept for package temporal's timeouts.
	if _, ok := client.(interface{ CallBound() time.Duration }); !ok {
		t.Fatalf("client is %T, want the openai client with its CallBound", client)
	}
	if err := client.(llm.ParameterChecker).CheckParameters(cfg.RunOptions().Parameters); err != nil {
		t.Fatalf("the loaded parameters do not pass the client's check: %v", err)
	}
}

func TestOpenAIDefaultsAndNoKey(t *testing.T) {
	dir := write(t, map[string]string{
		"default.toml": "[llm]\nprovider = \"openai\"\nmodel = \"m\"\n",
		"nokey.toml":   "[llm]\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = \"http://localhost:8000/v1\"\napi_key_env = \"\"\n",
	})
	cfg, err := config.Load(filepath.Join(dir, "default.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.APIKeyEnv != config.DefaultAPIKeyEnv {
		t.Errorf("APIKeyEnv = %q, want %q", cfg.LLM.APIKeyEnv, config.DefaultAPIKeyEnv)
	}
	cfg, err = config.Load(filepath.Join(dir, "nokey.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Client(nil); err != nil {
		t.Fatalf("api_key_env = \"\" needs no variable, but: %v", err)
	}
}

func TestOpenAIModelCheckedAtClientTime(t *testing.T) {
	t.Setenv("MORPH_TEST_API_KEY", "k")
	dir := write(t, map[string]string{"morph.toml": "[llm]\nprovider = \"openai\"\napi_key_env = \"MORPH_TEST_API_KEY\"\n"})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	var ce *config.Error
	if _, err := cfg.Client(nil); !errors.As(err, &ce) || ce.Key != "llm.model" {
		t.Fatalf("err = %v, want an error about llm.model", err)
	}
	cfg.LLM.Model = "from-a-flag"
	if _, err := cfg.Client(nil); err != nil {
		t.Fatal(err)
	}
}

func TestLoadErrors(t *testing.T) {
	const scriptedHead = "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n"
	tests := []struct {
		name, content string
		key           string
		line          int
		msg           string // in Error()
	}{
		{"unknown key", scriptedHead + "[agent]\nmax_stepz = 15\n", "agent.max_stepz", 5,
			"agent.max_stepz: unknown key (known keys in [agent]: identity, max_json_depth, max_observation_kb, max_steps, parse_retries, rules, token_budget)"},
		{"unknown table", scriptedHead + "[agents]\nmax_steps = 15\n", "agents", 4, "agents: unknown key (known keys at the top level: agent, discovery, llm, mcp, mcp_servers, oci, pipeline, plugins, record, telemetry, temporal, tools, verify, wasm)"},
		{"unknown key in pricing", scriptedHead + "[llm.pricing.\"gpt-4.1\"]\ninput = 1\noutptu = 2\n", `llm.pricing."gpt-4.1".outptu`, 6, "unknown key (known keys in [llm.pricing.\"gpt-4.1\"]: input, output)"},
		{"wrong type", scriptedHead + "[agent]\nmax_steps = \"15\"\n", "agent.max_steps", 5, "agent.max_steps: want integer, got string"},
		{"wrong type float", scriptedHead + "[agent]\ntoken_budget = 1.5\n", "agent.token_budget", 5, "want integer, got float"},
		{"wrong type array", scriptedHead + "[agent]\nrules = \"be nice\"\n", "agent.rules", 5, "want array, got string"},
		{"table expected", "llm = 3\n", "llm", 1, "want table, got integer"},
		{"pipeline visits", scriptedHead + "[pipeline]\nmax_node_visits = 0\n", "pipeline.max_node_visits", 5, "must be from 1 to"},
		{"pipeline restarts", scriptedHead + "[pipeline]\nmax_restarts = 0\n", "pipeline.max_restarts", 5, "must be from 1 to"},
		{"pipeline budget", scriptedHead + "[pipeline]\nmax_cost_usd = -1.0\n", "pipeline.max_cost_usd", 5, "must not be negative"},
		{"pipeline shell", scriptedHead + "[pipeline]\nallow_shell = \"yes\"\n", "pipeline.allow_shell", 5, "want boolean, got string"},
		{"pipeline endpoint", scriptedHead + "[pipeline]\nendpoints = [\"file:///etc\"]\n", "pipeline.endpoints", 5, "is not an http or https URL"},
		{"pipeline unknown key", scriptedHead + "[pipeline]\nallow_shel = true\n", "pipeline.allow_shel", 5, "known keys in [pipeline]: allow_shell,"},
		{"syntax", scriptedHead + "[agent\n", "", 5, "expected"},
		{"bad duration", scriptedHead + "timeout = \"6x\"\n", "llm.timeout", 4, `invalid duration: "6x"`},
		{"integer duration", scriptedHead + "timeout = 60\n", "llm.timeout", 4, `want a duration string such as "60s", got integer`},
		{"negative duration", scriptedHead + "timeout = \"-1s\"\n", "llm.timeout", 4, "must be positive"},
		{"reply limit", scriptedHead + "max_reply_kb = 0\n", "llm.max_reply_kb", 4, "must be from 1 to"},
		{"integer total timeout", scriptedHead + "total_timeout = 60\n", "llm.total_timeout", 4, `want a duration string such as "150s", got integer`},
		{"negative total timeout", scriptedHead + "total_timeout = \"-1s\"\n", "llm.total_timeout", 4, "must be positive"},
		{"total timeout under the default attempt's", scriptedHead + "total_timeout = \"30s\"\n", "llm.total_timeout", 4, "30s is shorter than one attempt (timeout, 1m0s)"},
		{"total timeout under the attempt's", scriptedHead + "timeout = \"2m\"\ntotal_timeout = \"90s\"\n", "llm.total_timeout", 5, "raise total_timeout or lower timeout"},
		{"missing provider", "[llm]\nmodel = \"m\"\n", "llm.provider", 0, "missing: set provider"},
		{"unknown provider", "[llm]\nprovider = \"anthropic\"\n", "llm.provider", 2, `unknown provider "anthropic"`},
		{"missing replies setting", "[llm]\nprovider = \"scripted\"\n", "llm.scripted_replies", 0, "needs the path of its replies file"},
		{"missing replies file", "[llm]\nprovider = \"scripted\"\nscripted_replies = \"nope/replies.json\"\n", "llm.scripted_replies", 3,
			filepath.Join("nope", "replies.json") + " not found"},
		{"bad replies file", "[llm]\nprovider = \"scripted\"\nscripted_replies = \"morph.toml\"\n", "llm.scripted_replies", 3, "invalid JSON"},
		{"api_key in file", "[llm]\nprovider = \"openai\"\nmodel = \"m\"\napi_key = \"sk-secret-123\"\n", "llm.api_key", 4,
			"the API key must not be in the config file; set api_key_env"},
		{"key pasted as api_key_env", "[llm]\nprovider = \"openai\"\nmodel = \"m\"\napi_key_env = \"sk-secret-123\"\n", "llm.api_key_env", 4,
			"must be the name of an environment variable"},
		{"unknown parameter", "[llm]\nprovider = \"openai\"\nmodel = \"m\"\n[llm.parameters]\ntemperatur = 0.2\n", "llm.parameters.temperatur", 5,
			`llm.parameters.temperatur: unknown parameter (did you mean "temperature"?)`},
		{"unknown parameter no suggestion", "[llm]\nprovider = \"openai\"\nmodel = \"m\"\nparameters = { frobnicate = 1 }\n", "llm.parameters.frobnicate", 4,
			"unknown parameter (supported: "},
		{"bad parameter value", "[llm]\nprovider = \"openai\"\nmodel = \"m\"\n[llm.parameters]\ntop_p = 7\n", "llm.parameters.top_p", 5, "want a number between 0 and 1, got 7"},
		{"bad base_url", "[llm]\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = \"ftp://x\"\n", "llm.base_url", 4, "want an http:// or https:// URL"},
		{"base_url is the endpoint", "[llm]\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = \"http://localhost:8000/v1/chat/completions/\"\n", "llm.base_url", 4,
			`ends in /chat/completions, which morph appends: write base_url = "http://localhost:8000/v1"`},
		{"unknown json_mode", "[llm]\nprovider = \"openai\"\nmodel = \"m\"\njson_mode = \"schema\"\n", "llm.json_mode", 4,
			`unknown mode "schema" (known: json_object, json_schema, off)`},
		{"response_format parameter", "[llm]\nprovider = \"openai\"\nmodel = \"m\"\n[llm.parameters]\nresponse_format = \"json\"\n", "llm.parameters.response_format", 5,
			"set [llm] json_mode instead"},
		{"model parameter", "[llm]\nprovider = \"openai\"\nmodel = \"m\"\n[llm.parameters]\nmodel = \"x\"\n", "llm.parameters.model", 5,
			"set [llm] model instead"},
		{"standard parameter in extra_body", "[llm]\nprovider = \"openai\"\nmodel = \"m\"\n[llm.extra_body]\ntop_p = 0.5\n", "llm.extra_body.top_p", 5,
			"a standard parameter: set it in [llm.parameters]"},
		{"client field in extra_body", "[llm]\nprovider = \"openai\"\nmodel = \"m\"\n[llm.extra_body]\nmessages = []\n", "llm.extra_body.messages", 5,
			"morph sets it: the messages are the run's"},
		{"server parameter in parameters", "[llm]\nprovider = \"openai\"\nmodel = \"m\"\n[llm.parameters]\ntop_k = 20\n", "llm.parameters.top_k", 5,
			`unknown parameter (did you mean "top_p"?); a server-specific parameter (top_k, min_p, ...) goes in [llm.extra_body]`},
		{"bad table parameter", "[llm]\nprovider = \"openai\"\nmodel = \"m\"\n[llm.parameters]\nmetadata = { run = 1 }\n", "llm.parameters.metadata", 5,
			"metadata"},
		{"negative retries", scriptedHead + "max_retries = -1\n", "llm.max_retries", 4, "must not be negative"},
		{"negative price", scriptedHead + "[llm.pricing.m]\ninput = -1\n", "llm.pricing.m.input", 5, "must not be negative"},
		{"zero max_steps", scriptedHead + "[agent]\nmax_steps = 0\n", "agent.max_steps", 5, "must be at least 1, got 0"},
		{"negative parse_retries", scriptedHead + "[agent]\nparse_retries = -2\n", "agent.parse_retries", 5, "must not be negative"},
		{"negative budget", scriptedHead + "[agent]\ntoken_budget = -2\n", "agent.token_budget", 5, "must not be negative"},
		{"empty rule", scriptedHead + "[agent]\nrules = [\"a\", \" \"]\n", "agent.rules", 5, "rule 2 is empty"},
		{"unknown builtin", scriptedHead + "[tools]\nbuiltin = [\"calc\", \"web\"]\n", "tools.builtin", 5, `unknown built-in tool "web" (built-in tools: calc)`},
		{"zero observation limit", scriptedHead + "[agent]\nmax_observation_kb = 0\n", "agent.max_observation_kb", 5, "must be from 1 to"},
		{"zero schema size", scriptedHead + "[tools]\nmax_schema_kb = 0\n", "tools.max_schema_kb", 5, "must be from 1 to"},
		{"negative schema depth", scriptedHead + "[tools]\nmax_schema_depth = -1\n", "tools.max_schema_depth", 5, "must be from 1 to"},
		{"zero schema steps", scriptedHead + "[tools]\nmax_schema_steps = 0\n", "tools.max_schema_steps", 5, "must be from 1 to"},
		// A huge *_kb value, shifted into bytes, overflowed to the default.
		{"huge observation limit", scriptedHead + "[agent]\nmax_observation_kb = 9007199254740992\n", "agent.max_observation_kb", 5, "must be from 1 to 4194303"},
		{"huge schema size", scriptedHead + "[tools]\nmax_schema_kb = 9223372036854775807\n", "tools.max_schema_kb", 5, "must be from 1 to 4194303"},
		{"huge pattern size", scriptedHead + "[tools]\nmax_pattern_kb = 4194304\n", "tools.max_pattern_kb", 5, "must be from 1 to 4194303"},
		{"huge schema steps", scriptedHead + "[tools]\nmax_schema_steps = 2147483648\n", "tools.max_schema_steps", 5, "must be from 1 to 2147483647"},
		{"too deep", scriptedHead + "[agent]\nmax_json_depth = 1001\n", "agent.max_json_depth", 5, "must be from 1 to 1000"},
		{"zero pattern size", scriptedHead + "[tools]\nmax_pattern_kb = 0\n", "tools.max_pattern_kb", 5, "must be from 1 to"},
		{"zero pattern program", scriptedHead + "[tools]\nmax_pattern_insts = 0\n", "tools.max_pattern_insts", 5, "must be from 1 to"},
		{"zero module limit", scriptedHead + "[wasm.limits]\nfunction_locals = 0\n", "wasm.limits.function_locals", 5, "must be from 1 to 4294967295, got 0"},
		{"module size over wasm32", scriptedHead + "[wasm.limits]\nmodule_mb = 5000\n", "wasm.limits.module_mb", 5, "must be from 1 to 4096"},
		{"unknown module limit", scriptedHead + "[wasm.limits]\nlocals = 1\n", "wasm.limits.locals", 5, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ce, err := loadErr(t, tt.content)
			if ce.Key != tt.key || ce.Line != tt.line {
				t.Errorf("key %q line %d, want %q line %d (%v)", ce.Key, ce.Line, tt.key, tt.line, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
			if !strings.HasPrefix(err.Error(), ce.File) || !strings.HasSuffix(ce.File, "morph.toml") {
				t.Errorf("error %q does not start with the file name", err)
			}
			if strings.Contains(err.Error(), "Request.") || strings.Contains(err.Error(), "Config.") {
				t.Errorf("error %q names a Go field, not a TOML key", err)
			}
			if strings.Contains(err.Error(), "sk-secret-123") {
				t.Errorf("error %q echoes a secret", err)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	ce, err := loadErr(t, "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[agent]\nmax_stepz = 15\n")
	want := ce.File + ":5: agent.max_stepz: unknown key"
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %q, want it to start with %q", err, want)
	}
	e := &config.Error{File: "morph.toml", Msg: "config file not found"}
	if e.Error() != "morph.toml: config file not found" {
		t.Fatalf("Error() = %q", e.Error())
	}
}

func TestAllMistakesAtOnceInFileOrder(t *testing.T) {
	_, err := loadErr(t, `[llm]
provider = "scripted"
scripted_replies = "replies.json"
api_key = "x"
[agent]
max_stepz = 15
token_budget = -1
[tools]
builtin = ["nope"]
`)
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d errors, want 4:\n%v", len(lines), err)
	}
	for i, key := range []string{":4: llm.api_key:", ":6: agent.max_stepz:", ":7: agent.token_budget:", ":9: tools.builtin:"} {
		if !strings.Contains(lines[i], key) {
			t.Errorf("error %d = %q, want %q", i, lines[i], key)
		}
	}
}

func TestMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "morph.toml")
	_, err := config.Load(path)
	if !errors.Is(err, config.ErrConfig) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want ErrConfig wrapping ErrNotExist", err)
	}
	if err.Error() != path+": config file not found" {
		t.Fatalf("err = %q", err)
	}
}

func TestScriptedClientIsFreshEachTime(t *testing.T) {
	dir := write(t, map[string]string{"morph.toml": "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n", "replies.json": replies})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		c, err := cfg.Client(nil)
		if err != nil {
			t.Fatal(err)
		}
		if n := c.(*scripted.Client).Remaining(); n != 1 {
			t.Fatalf("a new client has %d replies left, want 1", n)
		}
		_, _ = c.Chat(context.Background(), llm.Request{})
	}
}

// The [tools] keys reach the registry's schema limits: a pattern over
// max_pattern_kb is refused, naming the key.
func TestToolsSchemaLimits(t *testing.T) {
	dir := write(t, map[string]string{"morph.toml": "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n" +
		"[tools]\nmax_pattern_kb = 1\nmax_pattern_insts = 500\n", "replies.json": replies})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Tools.SchemaLimits(); l.MaxPatternBytes != 1024 || l.MaxPatternInsts != 500 {
		t.Fatalf("SchemaLimits = %+v", l)
	}
	reg, err := cfg.Registry()
	if err != nil {
		t.Fatal(err)
	}
	reg.Register(schemaTool(`{"properties":{"s":{"pattern":"` + strings.Repeat("a", 1025) + `"}}}`))
	if err := reg.Check(); err == nil || !strings.Contains(err.Error(), "limit of 1024 (tools.max_pattern_kb") {
		t.Fatalf("Check = %v, want the pattern refused", err)
	}
}

// schemaTool is a tool "probe" with the parameter schema given.
type schemaTool string

func (schemaTool) Name() string                                            { return "probe" }
func (schemaTool) Description() string                                     { return "" }
func (s schemaTool) ParameterSchema() string                               { return string(s) }
func (schemaTool) Execute(context.Context, map[string]any) (string, error) { return "", nil }

// agent.max_json_depth reaches the engine and the registry: a reply and a
// tool call nested 80 deep pass a limit of 100, which before the fix was
// an unknown key (the depth was 64, fixed).
func TestAgentJSONDepth(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 80) + "1" + strings.Repeat("}", 80)
	dir := write(t, map[string]string{
		"morph.toml": "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[agent]\nmax_json_depth = 100\n" +
			"[discovery]\nproject = false\nuser = false\n",
		"replies.json": `{"model":"m","replies":[{"reply":{"type":"final","final":{"output":` + deep + `}}}]}`,
	})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := cfg.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	rt.Engine.Registry().Register(schemaTool(`{"type":"object"}`))
	var params map[string]any
	if err := json.Unmarshal([]byte(deep), &params); err != nil {
		t.Fatal(err)
	}
	if err := rt.Engine.Registry().Validate("probe", params); err != nil {
		t.Errorf("tool parameters 80 deep: %v", err)
	}
	if _, rc, err := rt.Engine.Run(context.Background(), "t", cfg.RunOptions()); err != nil || rc.StopReason != "final" {
		t.Errorf("a reply 80 deep: err %v, stop reason %q", err, rc.StopReason)
	}
}

// Table-valued parameters and [llm.extra_body] load, nested tables and all.
func TestTableParametersAndExtraBody(t *testing.T) {
	dir := write(t, map[string]string{"morph.toml": `[llm]
provider = "openai"
model = "m"
[llm.parameters]
chat_template_kwargs = { enable_thinking = false, nested = { a = 1 } }
metadata = { run = "x" }
logit_bias = { "50256" = -100 }
[llm.extra_body]
top_k = 20
min_p = 0.05
repetition_penalty = 1.1
guided_decoding_backend = { name = "xgrammar" }
`})
	c, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.LLM.ExtraBody["top_k"] != int64(20) || c.LLM.Parameters["metadata"] == nil {
		t.Errorf("extra body %v, parameters %v", c.LLM.ExtraBody, c.LLM.Parameters)
	}
}

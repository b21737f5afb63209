package host

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm"
)

// goSDKWasm is a module of go-sdk's own test set (its wasm/ directory, in
// the module cache since go-sdk is a dependency): published Extism
// plugins, built by others, that follow no tool convention.
func goSDKWasm(t testing.TB, name string) string {
	t.Helper()
	dir, err := goSDKDir()
	if err != nil {
		t.Fatalf("go-sdk's module directory: %v", err)
	}
	return filepath.Join(dir, "wasm", name+".wasm")
}

var goSDKDir = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/extism/go-sdk").Output()
	return strings.TrimSpace(string(out)), err
})

// Plugins of go-sdk's test set, made usable by configuration alone: a
// plain export as a tool, two modules linked by name, and a host function
// of the embedding host's.
func TestPlainExportPlugins(t *testing.T) {
	l, _ := extismLoader()
	t.Run("count_vowels", func(t *testing.T) {
		p := load(t, l, Config{Path: goSDKWasm(t, "count_vowels"), Tools: []ExportTool{
			{Export: "count_vowels", Description: "Counts vowels.", Input: "field:text"}}})
		if p.Name() != "count_vowels" || len(p.engineTools()) != 1 || p.engineTools()[0].ParameterSchema() !=
			`{"properties":{"text":{"type":"string"}},"required":["text"],"type":"object"}` {
			t.Fatalf("name %q, tools %+v", p.Name(), p.Manifest().Tools)
		}
		out, err := callTool(t, p, "count_vowels", map[string]any{"text": "Hello, World"})
		if err != nil || !strings.Contains(out, `"count":3`) {
			t.Fatalf("out %q err %v", out, err)
		}
	})
	t.Run("linked modules", func(t *testing.T) {
		p := load(t, l, Config{Path: goSDKWasm(t, "main"), Modules: []LinkedModule{{Name: "lib", Path: goSDKWasm(t, "lib")}},
			Tools: []ExportTool{{Export: "run_test", Name: "greet", Input: "field:name"}}})
		out, err := callTool(t, p, "greet", map[string]any{"name": "benjamin"})
		if err != nil || out != "Hello, BENJAMIN" {
			t.Fatalf("out %q err %v", out, err)
		}
	})
	t.Run("no Extism import", func(t *testing.T) { // noop.wasm imports nothing: configuration picks the Extism loader
		p := load(t, l, Config{Path: goSDKWasm(t, "noop"), Tools: []ExportTool{{Export: "run_test"}}})
		if p.Loader() != LoaderExtism {
			t.Errorf("Loader = %s, want %s", p.Loader(), LoaderExtism)
		}
		out, err := callTool(t, p, "run_test", nil)
		if err != nil {
			t.Fatalf("run_test: %v", err)
		}
		if out != "" {
			t.Errorf("run_test = %q, want no output", out)
		}
	})
	t.Run("host function of its own namespace", func(t *testing.T) { // host_memory.wasm imports host.to_upper
		i64 := []api.ValueType{api.ValueTypeI64}
		p := load(t, l, Config{Path: goSDKWasm(t, "host_memory"), Tools: []ExportTool{{Export: "run_test", Input: "field:name"}},
			HostFunctions: []HostFunction{{Module: "host", Name: "to_upper", Params: i64, Results: i64,
				Func: func(_ context.Context, call *HostCall, stack []uint64) (err error) {
					b, err := call.Read(stack[0])
					if err == nil {
						stack[0], err = call.Write([]byte(strings.ToUpper(string(b))))
					}
					return err
				}}}})
		if out, err := callTool(t, p, "run_test", map[string]any{"name": "benjamin"}); err != nil || out != "HELLO BENJAMIN!" {
			t.Fatalf("out %q err %v", out, err)
		}
	})
	t.Run("host function", func(t *testing.T) {
		cfg := Config{Path: goSDKWasm(t, "host"), Tools: []ExportTool{{Export: "run_test", Name: "mult"}}}
		_, err := l.Load(context.Background(), cfg)
		if !errors.Is(err, ErrLoad) {
			t.Fatalf("Load: error %v, want ErrLoad", err)
		}
		for _, want := range []string{"extism:host/user.mult, a host function neither morph nor the embedding host provides", "host.Config.HostFunctions"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Load: error %q, want it to say %q", err, want)
			}
		}
		i64 := []api.ValueType{api.ValueTypeI64}
		cfg.HostFunctions = []HostFunction{{Name: "mult", Params: append(i64, i64...), Results: i64,
			Func: func(_ context.Context, _ *HostCall, stack []uint64) error {
				stack[0] = api.EncodeI32(api.DecodeI32(stack[0]) * api.DecodeI32(stack[1]))
				return nil
			}}}
		out, err := callTool(t, load(t, l, cfg), "mult", nil)
		if err != nil || out != "42 x 2 = 84" {
			t.Fatalf("out %q err %v", out, err)
		}
		cfg.HostFunctions[0].Params = i64
		if _, err := l.Load(context.Background(), cfg); err == nil || !strings.Contains(err.Error(),
			"imports extism:host/user.mult with signature (i64, i64) -> (i64), but the host function provided is (i64) -> (i64)") {
			t.Fatalf("err = %v", err)
		}
	})
}

// A command module's _start, () -> (), serves as a tool; its exit code
// other than 0 fails the call, and the next call gets a fresh instance.
func TestCommandModuleTool(t *testing.T) {
	l, _ := extismLoader()
	p := load(t, l, Config{Path: fixture(t, "extism_command"), Tools: []ExportTool{{Export: "_start", Name: "start", Input: "field:input"}}})
	if out, err := callTool(t, p, "start", map[string]any{"input": ""}); err != nil || out != "started" {
		t.Fatalf("out %q err %v", out, err)
	}
	if _, err := callTool(t, p, "start", map[string]any{"input": "exit"}); !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), "exit_code(3)") {
		t.Fatalf("err = %v", err)
	}
	if out, err := callTool(t, p, "start", map[string]any{"input": ""}); err != nil || out != "started" {
		t.Fatalf("after the exit: out %q err %v", out, err)
	}
}

// mcpv2Config is the hyper-mcp v2 test plugin with its plain exports
// configured and the host function it imports.
func mcpv2Config(t testing.TB, lookup func(ctx context.Context, call *HostCall, stack []uint64) error) Config {
	i64 := []api.ValueType{api.ValueTypeI64}
	return Config{Path: extismGuestWasm(t, "mcpv2"), Name: "wild",
		Limits: Limits{MaxInstances: 1}, // unlock's state is its instance's
		Tools: []ExportTool{
			{Export: "shout", Input: "field:text", Description: "Shouts."},
			{Export: "lookup", Input: "field:key"},
			{Export: "bad_utf8"},
		},
		HookExports:   map[string]string{"build_prompt": "prompt"},
		HostFunctions: []HostFunction{{Name: "lookup", Params: i64, Results: i64, Func: lookup}},
	}
}

// A hyper-mcp v2 plugin in a run: its tools listed and called with the
// request context it wants, text items without a type, an image, a tool
// list that changes (notify_tool_list_changed) and reaches the engine,
// plain exports as tools and as a hook, and the embedding host's function.
func TestMCPv2PluginInARun(t *testing.T) {
	l, logs := extismLoader()
	cfg := mcpv2Config(t, func(_ context.Context, call *HostCall, stack []uint64) error {
		key, err := call.Read(stack[0])
		if err != nil {
			return err
		}
		stack[0], err = call.Write([]byte(call.Plugin + " knows " + string(key)))
		return err
	})
	m := &recordingModel{scriptModel: scriptModel{replies: []string{
		`{"type":"tool_call","tool_call":{"tool_name":"echo","tool_params":{"text":"hi"}}}`,
		`{"type":"tool_call","tool_call":{"tool_name":"chart","tool_params":{}}}`,
		`{"type":"tool_call","tool_call":{"tool_name":"secret","tool_params":{}}}`,
		`{"type":"tool_call","tool_call":{"tool_name":"unlock","tool_params":{}}}`,
		`{"type":"tool_call","tool_call":{"tool_name":"secret","tool_params":{}}}`,
		`{"type":"tool_call","tool_call":{"tool_name":"shout","tool_params":{"text":"ahoy"}}}`,
		`{"type":"tool_call","tool_call":{"tool_name":"lookup","tool_params":{"key":"k1"}}}`,
		`{"type":"tool_call","tool_call":{"tool_name":"bad_utf8","tool_params":{}}}`,
		`{"type":"final","final":{"output":"done"}}`,
	}}}
	e := engine.New(m, nil, engine.WithExtenders(l.Extender(cfg, engine.MiddlewareConfig{})), engine.WithImages(true))
	defer e.Close(context.Background())
	final, rc, err := e.NewSession("s").RunTurn(context.Background(), "go", engine.RunOptions{})
	if err != nil || final.Output != "done" {
		t.Fatalf("final %+v err %v", final, err)
	}
	if !strings.HasSuffix(rc.SystemPrompt, "Answer like a pirate.") || !strings.Contains(rc.SystemPrompt, "- shout: Shouts.") {
		t.Errorf("system prompt not the prompt export's:\n%s", rc.SystemPrompt)
	}
	for i, want := range []string{"hi", "a chart of one pixel\n[image 1: image/png]", "tool 'secret' not found", "unlocked", "42", "AHOY!",
		"wild knows k1", "not UTF-8 text"} {
		if obs := rc.Steps[i].Observation; !strings.Contains(obs, want) {
			t.Errorf("step %d observation %q, want %q", i+1, obs, want)
		}
	}
	var images []abi.Image
	for _, msg := range m.last.Messages {
		images = append(images, msg.Images...)
	}
	if len(images) != 1 {
		t.Errorf("%d images sent to the model, want 1: %+v", len(images), images)
	} else {
		if images[0].MimeType != "image/png" {
			t.Errorf("the image's MimeType = %q, want image/png", images[0].MimeType)
		}
		if !strings.HasPrefix(images[0].Data, "iVBORw0KGgo") {
			t.Errorf("the image's Data = %.20q..., want a PNG's base64 (iVBORw0KGgo...)", images[0].Data)
		}
	}
	if !strings.Contains(logs.String(), "secret unlocked") {
		t.Errorf("notify_logging_message not logged:\n%s", logs.String())
	}
	// secret, which the change added, answered; bad_utf8's bad output then
	// replaced the instance, so the list is the initial one again.
	if tools := e.Tools(); len(tools) != 7 || slices.ContainsFunc(tools, func(t abi.ToolSpec) bool { return t.Name == "secret" }) {
		t.Errorf("engine tools after the instance's replacement: %+v", tools)
	}
}

// The instance that replaces one whose tools changed has its initial
// tools, and the engine gets them: secret, which unlock added, is gone
// again after crash traps the instance, where the engine offered it still
// and the new instance answered it locked.
func TestToolChangeAfterFault(t *testing.T) {
	l, _ := extismLoader()
	m := &scriptModel{replies: []string{
		`{"type":"tool_call","tool_call":{"tool_name":"unlock","tool_params":{}}}`,
		`{"type":"tool_call","tool_call":{"tool_name":"crash","tool_params":{}}}`,
		`{"type":"tool_call","tool_call":{"tool_name":"secret","tool_params":{}}}`,
		`{"type":"final","final":{"output":"done"}}`,
	}}
	cfg := mcpv2Config(t, func(context.Context, *HostCall, []uint64) error { return nil })
	e := engine.New(m, nil, engine.WithExtenders(l.Extender(cfg, engine.MiddlewareConfig{})))
	defer e.Close(context.Background())
	final, rc, err := e.NewSession("s").RunTurn(context.Background(), "go", engine.RunOptions{})
	if err != nil || final.Output != "done" {
		t.Fatalf("final %+v err %v", final, err)
	}
	if len(rc.Steps) < 3 {
		t.Fatalf("%d steps, want at least 3: %+v", len(rc.Steps), rc.Steps)
	}
	if got := rc.Steps[0].Observation; got != "unlocked" {
		t.Errorf("step 1 (unlock) observation %q, want %q", got, "unlocked")
	}
	if rc.Steps[1].Error == "" {
		t.Errorf("step 2 (crash) has no error: %+v", rc.Steps[1])
	}
	if got := rc.Steps[2].Observation + rc.Steps[2].Error; !strings.Contains(got, "tool 'secret' not found") {
		t.Errorf("step 3 (secret) observation and error %q, want %q", got, "tool 'secret' not found")
	}
	var names []string
	for _, tool := range e.Tools() {
		names = append(names, tool.Name)
	}
	if slices.Contains(names, "secret") || len(names) != 7 {
		t.Errorf("engine tools after the fault: %v", names)
	}
}

// recordingModel is scriptModel keeping the last request.
type recordingModel struct {
	scriptModel
	last llm.Request
}

func (m *recordingModel) Chat(ctx context.Context, req llm.Request) (llm.Result, error) {
	m.last = req
	return m.scriptModel.Chat(ctx, req)
}

// What configuration can get wrong is refused at load, naming the setting.
func TestPlainExportConfigErrors(t *testing.T) {
	l, _ := extismLoader()
	cases := []struct {
		name string
		cfg  Config
		kind error
		want string
	}{
		{"missing export", Config{Path: fixture(t, "extism_nohooks"), Tools: []ExportTool{{Export: "count"}}}, ErrABIMismatch,
			`the configuration names export "count", which the module does not export; its plain exports are: count_vowels`},
		{"bad input", Config{Path: fixture(t, "extism_nohooks"), Tools: []ExportTool{{Export: "count_vowels", Input: "text"}}}, ErrLoad,
			`tools[0]: input "text": want "json"`},
		{"bad name", Config{Path: fixture(t, "extism_nohooks"), Tools: []ExportTool{{Export: "count_vowels", Name: "count vowels"}}}, ErrLoad,
			`tools[0]: name:`},
		{"unknown hook", Config{Path: fixture(t, "extism_nohooks"), HookExports: map[string]string{"prompt": "count_vowels"}}, ErrLoad,
			`hook_exports: "prompt" is no hook`},
		{"morph plugin", Config{Path: fixture(t, "extism_echo"), Tools: []ExportTool{{Export: "count_vowels"}}}, ErrABIMismatch,
			"remove the plugin's [[plugins.tools]]"},
		{"native module", Config{Path: fixture(t, "minimal"), Tools: []ExportTool{{Export: "x"}}}, ErrABIMismatch,
			"the module exports morph_describe, so it is a morph plugin"},
		{"linked name", Config{Path: fixture(t, "extism_nohooks"), Modules: []LinkedModule{{Name: "main", Path: fixture(t, "minimal")}}}, ErrLoad,
			`modules[0]: name "main"`},
		{"reserved linked name", Config{Path: fixture(t, "extism_nohooks"), Modules: []LinkedModule{{Name: "morph:internal", Path: fixture(t, "minimal")}}}, ErrLoad,
			`modules[0]: name "morph:internal": give each linked module the unique name its importer uses (not main, extism:* but extism:host/user, WASI's or morph:internal`},
		{"linked module pin", Config{Path: fixture(t, "extism_nohooks"), Tools: []ExportTool{{Export: "count_vowels"}},
			Modules: []LinkedModule{{Name: "lib", Path: fixture(t, "minimal"), SHA256: strings.Repeat("0", 64)}}}, ErrLoad,
			"modules[0] (lib): sha256 mismatch"},
		{"host function namespace", Config{Path: fixture(t, "extism_nohooks"), Tools: []ExportTool{{Export: "count_vowels"}},
			HostFunctions: []HostFunction{{Module: "morph:internal", Name: "check_interrupt", Func: func(context.Context, *HostCall, []uint64) error { return nil }}}}, ErrLoad,
			`module "morph:internal" is Extism's, morph's, WASI's or a linked module's`},
		{"no convention", Config{Path: fixture(t, "extism_nohooks")}, ErrABIMismatch,
			"its exports that could be are count_vowels; `morph plugin inspect` prints the lines to add"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := l.Load(context.Background(), c.cfg)
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %v with %q", err, c.kind, c.want)
			}
		})
	}
}

// A host function is the plugin's: what it reads and writes is bounded by
// the plugin's limits, an offset that is no block is an error, and its
// error, its panic or a deadline fails the call, not the host.
func TestHostFunctionBounds(t *testing.T) {
	l, _ := extismLoader()
	var mode string
	cfg := mcpv2Config(t, func(ctx context.Context, call *HostCall, stack []uint64) error {
		switch mode {
		case "bad offset":
			_, err := call.Read(stack[0] + 1<<40)
			return err
		case "big write":
			_, err := call.Write(make([]byte, 2<<20))
			return err
		case "block":
			<-ctx.Done()
			return ctx.Err()
		case "panic":
			panic("the embedding host's bug")
		}
		stack[0] = 0
		return nil
	})
	cfg.Limits.MaxInputBytes, cfg.Limits.Timeout = 1<<20, 500*time.Millisecond
	p := load(t, l, cfg)
	for _, c := range []struct{ mode, want string }{
		{"bad offset", "is not an Extism memory block"},
		{"big write", "over the plugin's input limit"},
		{"block", "timed out"},
		{"panic", "the embedding host's bug"},
	} {
		mode = c.mode
		_, err := callTool(t, p, "lookup", map[string]any{"key": "k"})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.mode, err, c.want)
		}
	}
	mode = ""
	if out, err := callTool(t, p, "shout", map[string]any{"text": "still here"}); err != nil || out != "STILL HERE!" {
		t.Fatalf("after the faults: %q %v", out, err)
	}
}

// A plugin's tools are one list for every session: a change one instance
// says it made is applied only for a plugin of one pooled instance, and
// otherwise ignored with a warning (session B must not be offered the tool
// session A's instance unlocked).
func TestToolChangeNeedsOnePooledInstance(t *testing.T) {
	l, logs := extismLoader()
	for _, c := range []struct {
		isolation string
		instances int
	}{{IsolationSession, 1}, {IsolationPooled, 2}} {
		cfg := mcpv2Config(t, func(context.Context, *HostCall, []uint64) error { return nil })
		cfg.Name, cfg.Isolation, cfg.Limits.MaxInstances = "wild-"+c.isolation, c.isolation, c.instances
		var updates int
		p := load(t, l, cfg)
		p.extension(engine.MiddlewareConfig{}).WatchTools(func(context.Context, []engine.Tool) error { updates++; return nil })
		if out, err := callTool(t, p, "unlock", nil); err != nil || out != "unlocked" {
			t.Fatalf("%s: %q %v", c.isolation, out, err)
		}
		if updates != 0 || len(p.engineTools()) != 7 {
			t.Errorf("%s x%d: %d updates, tools %+v", c.isolation, c.instances, updates, p.Manifest().Tools)
		}
		if len(linesWith(logs.String(), "plugin=wild-"+c.isolation, "max_instances = 1; ignored")) != 1 {
			t.Errorf("%s: no warning:\n%s", c.isolation, logs.String())
		}
	}
}

// The description that follows a call which said the plugin's tools
// changed has a timeout of its own (Details.CallBound counts it apart from
// the call's): inside a Bounded middleware hook whose deadline the call
// used up, the engine still gets the new list, not a warning that the
// description timed out and the old list stays.
func TestToolRefreshAfterHookDeadline(t *testing.T) {
	l, logs := extismLoader()
	cfg := mcpv2Config(t, func(context.Context, *HostCall, []uint64) error { return nil })
	cfg.Name = "wild-refresh"
	p := load(t, l, cfg)
	var lists [][]engine.Tool
	p.extension(engine.MiddlewareConfig{}).WatchTools(func(_ context.Context, tools []engine.Tool) error {
		lists = append(lists, tools)
		return nil
	})
	policy := &engine.Funcs{ID: "policy", Bounded: true,
		TurnStart: func(ctx context.Context, _ abi.TurnStart) error {
			// as a tool call this hook made would have, had it run to the
			// hook's deadline and said the plugin's tools changed
			for deadline := engine.BoundedCallOf(ctx).Deadline(); time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			sh := p.shards.local()
			inst, _, err := p.acquire(ctx, sh)
			if err != nil {
				return err
			}
			defer p.slots.give(sh)
			p.refreshTools(ctx, inst)
			p.put(inst)
			return nil
		}}
	e := engine.New(finalOnly{}, nil, engine.WithMiddleware(policy, engine.MiddlewareConfig{Timeout: time.Millisecond}))
	defer e.Close(context.Background())
	if _, _, err := e.Run(context.Background(), "the task", engine.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(lists) != 1 || len(lists[0]) != 7 {
		t.Fatalf("the engine got %d tool lists, want the 7 tools once; log:\n%s", len(lists), linesWith(logs.String(), "plugin=wild-refresh"))
	}
}

//go:build !wasip1

package pdk

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
)

// fakeMem hands out fake but distinct addresses and remembers what each
// one names, so tests can follow a packed result back to its bytes.
type fakeMem struct {
	next uint32
	bufs map[uint32][]byte
}

func (m *fakeMem) addr(b []byte) uint32 {
	m.next += 16
	m.bufs[m.next] = b
	return m.next
}

var mems = map[*exchange]*fakeMem{}

// fresh gives the test an empty registry and a native exchange, and
// restores the package state after.
func fresh(t *testing.T) *exchange {
	t.Helper()
	oldReg, oldCfg, oldLog := reg, nativeConfig, nativeLog
	reg, nativeConfig = newRegistry(), nil
	t.Cleanup(func() { reg, nativeConfig, nativeLog = oldReg, oldCfg, oldLog })
	m := &fakeMem{bufs: map[uint32][]byte{}}
	x := newExchange(m.addr)
	mems[x] = m
	return x
}

// run calls export the way the host does: alloc, write, call, read.
func run(t *testing.T, x *exchange, export, input string) (string, bool) {
	t.Helper()
	var ptr uint32
	if input != "" {
		ptr = x.alloc(uint32(len(input)))
		if ptr == 0 {
			t.Fatal("alloc returned 0")
		}
		copy(x.pending[ptr], input)
	}
	res := x.call(export, ptr, uint32(len(input)))
	if res == 0 {
		return "", false
	}
	rptr, rlen, isErr := abi.Unpack(res)
	buf := mems[x].bufs[rptr]
	if int(rlen) != len(buf) || len(x.last) != len(buf) || &buf[0] != &x.last[0] {
		t.Fatalf("result %#x does not point at the kept output", res)
	}
	return string(x.last), isErr
}

func registerAll() {
	Plugin("t", "1.2.3")
	BuildPrompt(func(in abi.PromptInput) (abi.PromptOutput, error) {
		return abi.PromptOutput{SystemPrompt: in.DefaultPrompt + "+" + in.Task}, nil
	})
	BuildParams(func(in abi.ParamsInput) (abi.ParamsOutput, error) {
		return abi.ParamsOutput{Parameters: map[string]any{"temperature": 0.2, "model": in.Options.Model}}, nil
	})
	OnToolSuccess(func(in abi.ToolSuccessInput) error {
		if in.Tool == "bad" {
			return errors.New("refused")
		}
		return nil
	})
	FallbackFinal(func(in abi.FallbackInput) (abi.Final, error) {
		return abi.Final{Thought: "t", Output: map[string]any{"reason": in.Reason, "steps": in.Steps}}, nil
	})
	Tool("echo", "echoes", `{"type":"object","properties":{"s":{"type":"string"}}}`, func(p map[string]any) (string, error) {
		s, _ := p["s"].(string)
		if s == "" {
			return "", errors.New("s is empty")
		}
		return s, nil
	})
	Tool("any", "", "", func(p map[string]any) (string, error) { return "n=" + string(rune('0'+len(p))), nil })
}

func TestManifest(t *testing.T) {
	x := fresh(t)
	Plugin("t", "1.2.3")
	FallbackFinal(func(abi.FallbackInput) (abi.Final, error) { return abi.Final{}, nil })
	BuildPrompt(func(abi.PromptInput) (abi.PromptOutput, error) { return abi.PromptOutput{}, nil })
	Tool("any", "anything", "", func(map[string]any) (string, error) { return "", nil })
	out, isErr := run(t, x, abi.ExportDescribe, "")
	if isErr {
		t.Fatal(out)
	}
	var m abi.Manifest
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	want := abi.Manifest{Name: "t", Version: "1.2.3", ABIVersion: 1,
		Hooks:        []string{abi.HookBuildPrompt, abi.HookFallbackFinal}, // registered ones only, in ABI order
		Tools:        []abi.ToolSpec{{Name: "any", Description: "anything", Parameters: json.RawMessage(DefaultSchema)}},
		Capabilities: []string{CapLog, CapConfig}}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("manifest\n got %+v\nwant %+v", m, want)
	}
	if !strings.Contains(out, `"hooks":["build_prompt","fallback_final"]`) {
		t.Fatalf("manifest JSON %s", out)
	}
}

func TestManifestNoHooksIsEmptyList(t *testing.T) {
	x := fresh(t)
	Plugin("bare", "")
	out, _ := run(t, x, abi.ExportDescribe, "")
	if !strings.Contains(out, `"hooks":[]`) || strings.Contains(out, "tools") {
		t.Fatalf("manifest %s", out)
	}
}

func TestCapabilities(t *testing.T) {
	fresh(t)
	Capabilities()
	if got := reg.capabilities(); len(got) != 0 {
		t.Fatalf("declared none: %v", got)
	}
	Capabilities("net", CapConfig)
	if got := reg.capabilities(); !reflect.DeepEqual(got, []string{CapConfig, "net"}) {
		t.Fatalf("declared: %v", got)
	}
	nativeLog = func(int32, string) {}
	Log(abi.LogInfo, "used during init")
	if got := reg.capabilities(); !reflect.DeepEqual(got, []string{CapLog, CapConfig, "net"}) {
		t.Fatalf("declared and used: %v", got)
	}
}

func TestRegistrationMistakes(t *testing.T) {
	nop := func(map[string]any) (string, error) { return "", nil }
	cases := map[string]struct {
		register func()
		want     string
	}{
		"no plugin call":  {func() {}, "pdk.Plugin(name, version) was not called"},
		"empty name":      {func() { Plugin(" ", "1") }, "empty plugin name"},
		"nil hook":        {func() { Plugin("p", ""); BuildParams(nil) }, "hook build_params registered with a nil function"},
		"duplicate hook":  {func() { registerAll(); OnToolSuccess(func(abi.ToolSuccessInput) error { return nil }) }, "hook on_tool_success registered twice"},
		"duplicate tool":  {func() { registerAll(); Tool("echo", "", "", nop) }, `"echo": registered twice`},
		"bad schema":      {func() { Plugin("p", ""); Tool("x", "", `{"type":`, nop) }, `"x": the schema is not a JSON object`},
		"schema not obj":  {func() { Plugin("p", ""); Tool("x", "", `[1]`, nop) }, `"x": the schema is not a JSON object`},
		"nil tool":        {func() { Plugin("p", ""); Tool("x", "", "", nil) }, `"x": nil function`},
		"empty tool name": {func() { Plugin("p", ""); Tool("", "", "", nop) }, "empty tool name"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			x := fresh(t)
			c.register()
			out, isErr := run(t, x, abi.ExportDescribe, "")
			if !isErr || !strings.Contains(out, c.want) {
				t.Fatalf("describe = %q (error %v), want an error containing %q", out, isErr, c.want)
			}
		})
	}
}

func TestHooks(t *testing.T) {
	x := fresh(t)
	registerAll()
	// Unknown input fields are accepted (ABI v1 only adds fields).
	out, isErr := run(t, x, abi.ExportBuildPrompt, `{"task":"T","tools":[],"default_prompt":"D","new_field":{"a":[1]}}`)
	if isErr || out != `{"system_prompt":"D+T"}` {
		t.Fatalf("build_prompt = %q, %v", out, isErr)
	}
	out, isErr = run(t, x, abi.ExportBuildParams, `{"task":"T","options":{"model":"m","max_steps":3,"future":1}}`)
	if isErr || out != `{"parameters":{"model":"m","temperature":0.2}}` {
		t.Fatalf("build_params = %q, %v", out, isErr)
	}
	// on_tool_success answers empty output: a zero result.
	if res := x.call(abi.ExportOnToolSuccess, 0, 0); res != 0 || x.last != nil {
		t.Fatalf("on_tool_success with empty input = %#x", res)
	}
	out, isErr = run(t, x, abi.ExportOnToolSuccess, `{"tool":"bad","step":1,"params":{},"observation":"x"}`)
	if !isErr || out != "refused" {
		t.Fatalf("on_tool_success error = %q, %v", out, isErr)
	}
	out, isErr = run(t, x, abi.ExportFallbackFinal, `{"task":"T","reason":"why","steps":4,"usage":{"input_tokens":1}}`)
	if isErr || out != `{"thought":"t","output":{"reason":"why","steps":4}}` {
		t.Fatalf("fallback_final = %q, %v", out, isErr)
	}
	out, isErr = run(t, x, abi.ExportBuildPrompt, `{"task":`)
	if !isErr || !strings.HasPrefix(out, "build_prompt: invalid input") {
		t.Fatalf("bad input = %q, %v", out, isErr)
	}
}

func TestUnregisteredHook(t *testing.T) {
	x := fresh(t)
	Plugin("p", "")
	for _, h := range abi.Hooks { // the engine hooks and the middleware
		out, isErr := run(t, x, h.Export, `{}`)
		if !isErr || !strings.Contains(out, h.Name+": hook not registered by this plugin") {
			t.Fatalf("%s = %q, %v", h.Export, out, isErr)
		}
	}
	out, isErr := run(t, x, "morph_on_something_later", `{}`)
	if !isErr || !strings.Contains(out, "not an export") {
		t.Fatalf("unknown export = %q, %v", out, isErr)
	}
}

func TestTools(t *testing.T) {
	x := fresh(t)
	registerAll()
	out, isErr := run(t, x, abi.ExportCallTool, `{"tool":"echo","params":{"s":"hi"},"extra":true}`)
	if isErr || out != `{"output":"hi"}` {
		t.Fatalf("echo = %q, %v", out, isErr)
	}
	out, isErr = run(t, x, abi.ExportCallTool, `{"tool":"echo","params":{}}`)
	if !isErr || out != "s is empty" {
		t.Fatalf("echo error = %q, %v", out, isErr)
	}
	out, isErr = run(t, x, abi.ExportCallTool, `{"tool":"any"}`) // absent params: an empty map, not nil
	if isErr || out != `{"output":"n=0"}` {
		t.Fatalf("any = %q, %v", out, isErr)
	}
	out, isErr = run(t, x, abi.ExportCallTool, `{"tool":"nope","params":{}}`)
	if !isErr || out != `unknown tool "nope"` {
		t.Fatalf("unknown tool = %q, %v", out, isErr)
	}
}

// A tool reads its call's ID (call_id) with CallID, for the length of its
// call only.
func TestToolCallID(t *testing.T) {
	x := fresh(t)
	Plugin("p", "")
	Tool("id", "", "", func(map[string]any) (string, error) { return "id=" + CallID(), nil })
	out, isErr := run(t, x, abi.ExportCallTool, `{"tool":"id","params":{},"call_id":"w/r/7"}`)
	if isErr || out != `{"output":"id=w/r/7"}` {
		t.Fatalf("with call_id = %q, %v", out, isErr)
	}
	if CallID() != "" {
		t.Errorf("CallID after the call: %q", CallID())
	}
	out, isErr = run(t, x, abi.ExportCallTool, `{"tool":"id","params":{}}`)
	if isErr || out != `{"output":"id="}` {
		t.Fatalf("without call_id = %q, %v", out, isErr)
	}
}

func TestPanicsBecomeGuestErrors(t *testing.T) {
	x := fresh(t)
	Plugin("p", "")
	BuildPrompt(func(abi.PromptInput) (abi.PromptOutput, error) { panic("boom") })
	FallbackFinal(func(abi.FallbackInput) (abi.Final, error) {
		var m map[string]int
		m["x"]++ // a runtime error
		return abi.Final{}, nil
	})
	Tool("idx", "", "", func(p map[string]any) (string, error) { return []string{}[len(p)], nil })
	for export, want := range map[string]string{
		abi.ExportBuildPrompt:   "morph_build_prompt: panic: boom",
		abi.ExportFallbackFinal: "morph_fallback_final: panic: assignment to entry in nil map",
		abi.ExportCallTool:      "morph_call_tool: panic: runtime error: index out of range",
	} {
		out, isErr := run(t, x, export, `{"tool":"idx"}`)
		if !isErr || !strings.HasPrefix(out, want) {
			t.Fatalf("%s = %q, %v; want an error starting %q", export, out, isErr, want)
		}
	}
	// Still serving after the panics.
	if _, isErr := run(t, x, abi.ExportDescribe, ""); isErr {
		t.Fatal("describe failed after a panic")
	}
}

func TestErrorsAreFlaggedAndNeverEmpty(t *testing.T) {
	x := fresh(t)
	Plugin("p", "")
	OnToolSuccess(func(abi.ToolSuccessInput) error { return errors.New("") })
	res := x.call(abi.ExportOnToolSuccess, 0, 0)
	_, n, isErr := abi.Unpack(res)
	if !isErr || res&abi.ErrorFlag == 0 || n == 0 || string(x.last) != "morph_on_tool_success: error" {
		t.Fatalf("result %#x, last %q", res, x.last)
	}
}

func TestMemoryExchange(t *testing.T) {
	x := fresh(t)
	registerAll()
	// An output stays referenced until the next call, then is released.
	out, _ := run(t, x, abi.ExportDescribe, "")
	if string(x.last) != out || out == "" {
		t.Fatal("output not kept")
	}
	// Pending inputs stay referenced until a call consumes them; a call
	// releases every pending buffer, consumed or not.
	p1, p2 := x.alloc(3), x.alloc(5)
	if p1 == 0 || p2 == 0 || p1 == p2 || len(x.pending) != 2 {
		t.Fatalf("alloc: %d %d, pending %d", p1, p2, len(x.pending))
	}
	if res := x.call(abi.ExportOnToolSuccess, 0, 0); res != 0 || len(x.pending) != 0 {
		t.Fatalf("pending after call: %d", len(x.pending))
	}
	// An input that is not a buffer from alloc, or longer than it, is refused.
	p := x.alloc(2)
	res := x.call(abi.ExportBuildPrompt, p, 3)
	if _, _, isErr := abi.Unpack(res); !isErr || !strings.Contains(string(x.last), "is not a buffer from morph_alloc") {
		t.Fatalf("oversized input: %q", x.last)
	}
	res = x.call(abi.ExportBuildPrompt, 12345, 2)
	if _, _, isErr := abi.Unpack(res); !isErr || x.last == nil {
		t.Fatalf("foreign input: %q", x.last)
	}
	if x.alloc(maxAlloc+1) != 0 {
		t.Fatal("an impossible allocation did not answer 0")
	}
	if x.alloc(0) == 0 {
		t.Fatal("alloc(0) answered 0")
	}
}

func TestPackLayout(t *testing.T) {
	x := newExchange(func([]byte) uint32 { return 0x1234 })
	res := x.pack([]byte("abc"), false)
	if res != 0x1234<<32|3 {
		t.Fatalf("packed %#x", res)
	}
	res = x.pack([]byte("bad"), true)
	if res != 0x1234<<32|1<<31|3 {
		t.Fatalf("packed error %#x", res)
	}
	if x.pack(nil, false) != 0 {
		t.Fatal("empty success is not 0")
	}
}

func TestConfigGrowAndRetry(t *testing.T) {
	fresh(t)
	long := strings.Repeat("v", configBufSize*3+1)
	nativeConfig = map[string]string{"short": "s", "long": long, "empty": "", "exact": strings.Repeat("e", configBufSize)}
	for key, want := range nativeConfig {
		if got, ok := Config(key); !ok || got != want {
			t.Fatalf("Config(%q) = %d bytes, %v; want %d bytes", key, len(got), ok, len(want))
		}
	}
	if got, ok := Config("absent"); ok || got != "" {
		t.Fatalf("absent key: %q, %v", got, ok)
	}
	if !reg.used[CapConfig] {
		t.Fatal("config use not recorded")
	}
}

func TestLogf(t *testing.T) {
	fresh(t)
	var got []string
	nativeLog = func(level int32, msg string) { got = append(got, string(rune('0'+level))+msg) }
	Logf(abi.LogWarn, "%s=%d", "n", 3)
	Log(abi.LogInfo, "")
	if !reflect.DeepEqual(got, []string{"4n=3", "0"}) {
		t.Fatalf("logged %q", got)
	}
}

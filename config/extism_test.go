package config_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/internal/testenv"
)

// fixtureWasm is the absolute path of a fixture of guests/testdata (make fixtures).
func fixtureWasm(t *testing.T, name string) string {
	t.Helper()
	wasm, err := filepath.Abs(filepath.Join("..", "guests", "testdata", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return testenv.Built(t, wasm, "fixtures")
}

// [[plugins.tools]], [plugins.hook_exports] and [plugins.modules] reach the
// host: the parameters a table or a string of JSON, the modules' paths
// resolved against the config file's directory; and the plugin loads.
func TestExtismPluginKeys(t *testing.T) {
	dir := write(t, map[string]string{"replies.json": replies, "lib.wasm": "", "morph.toml": `[llm]
provider = "scripted"
scripted_replies = "replies.json"

[[plugins]]
name = "vowels"
path = ` + strconv.Quote(fixtureWasm(t, "extism_nohooks")) + `
[[plugins.tools]]
export = "count_vowels"
description = "Counts vowels."
input = "field:text"
[[plugins.tools]]
export = "count_vowels"
name = "count_json"
parameters = { type = "object", properties = { text = { type = "string" } } }
[[plugins.tools]]
export = "count_vowels"
name = "count_string"
parameters = '{"type": "object"}'
[plugins.hook_exports]
build_prompt = "count_vowels"
[plugins.modules]
lib = "lib.wasm"
pinned = { path = "lib.wasm", sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" }
`})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	hc := cfg.Plugins[0].HostConfig()
	params := func(i int) string { b, _ := json.Marshal(json.RawMessage(hc.Tools[i].Parameters)); return string(b) }
	if len(hc.Tools) != 3 || hc.Tools[0].Input != "field:text" || hc.Tools[0].Parameters != nil ||
		params(1) != `{"properties":{"text":{"type":"string"}},"type":"object"}` || params(2) != `{"type":"object"}` ||
		hc.HookExports["build_prompt"] != "count_vowels" ||
		len(hc.Modules) != 2 || hc.Modules[0].Name != "lib" || hc.Modules[0].Path != filepath.Join(dir, "lib.wasm") ||
		hc.Modules[1].Name != "pinned" || hc.Modules[1].SHA256 != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("host config %+v", hc)
	}
	// Without the linked module (the fixture imports none), it loads and serves the three tools.
	hc.Modules = nil
	l, err := host.NewLoader(host.LoaderOptions{CacheDir: "off", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	p, err := l.Load(context.Background(), hc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if m := p.Manifest(); len(m.Tools) != 3 || strings.Join(p.Hooks(), ",") != "build_prompt" {
		t.Fatalf("manifest %+v, hooks %v", m, p.Hooks())
	}
}

func TestExtismPluginKeyErrors(t *testing.T) {
	head := "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[[plugins]]\nname = \"x\"\npath = " +
		strconv.Quote(fixtureWasm(t, "extism_nohooks")) + "\n"
	cases := []struct{ lines, key, want string }{
		{"[[plugins.tools]]\nexport = \"count_vowels\"\ninput = \"text\"", "plugins.0.tools.0", `input "text": want "json"`},
		{"[[plugins.tools]]\ndescription = \"d\"", "plugins.0.tools.0", "export: name the module's export"},
		{"[[plugins.tools]]\nexport = \"e\"\nparameters = 3", "plugins.0.tools.0.parameters", "want a table or a string of JSON"},
		{"[[plugins.tools]]\nexport = \"e\"\nparameters = '{not json'", "plugins.0.tools.0.parameters", "not a JSON object"},
		{"[plugins.hook_exports]\nprompt = \"e\"", "plugins.0.hook_exports.prompt", `want hook = "export" with a hook of after_run,`},
		{"[plugins.modules]\nlib = \"missing.wasm\"", "plugins.0.modules.lib", "missing.wasm not found"},
		{"[plugins.modules]\nlib = { path = \"replies.json\", sha256 = \"xyz\" }", "plugins.0.modules.lib", "sha256: want 64 hex digits"},
		{"[plugins.modules]\nlib = 3", "plugins.modules.lib", `want "PATH" or { path = "PATH", sha256 = "HEX" }`}, // TOML's decoding: no index, no plugin name
	}
	for _, c := range cases {
		t.Run(c.key, func(t *testing.T) {
			ce, err := loadErr(t, head+c.lines+"\n")
			if ce.Key != c.key {
				t.Errorf("Key = %q, want %q (%v)", ce.Key, c.key, err)
			}
			if ce.Line == 0 {
				t.Errorf("Line = 0, want the line of %s (%v)", c.key, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
			if strings.Contains(c.key, ".0.") && !strings.Contains(err.Error(), `plugin "x"`) {
				t.Errorf("error %q does not name plugin \"x\"", err)
			}
		})
	}
}

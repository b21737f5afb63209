package config_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/host"
)

// capWasm is a capability test guest (make fixtures) that requests http.
func capWasm(t *testing.T) string { return fixtureWasm(t, "cap_http") }

// The grant keys of [[plugins]] reach the host as Grants: paths resolved
// against the config file's directory, limits in the host's units.
func TestPluginGrants(t *testing.T) {
	abs := t.TempDir()
	dir := write(t, map[string]string{"replies.json": replies, "conf/data/a.txt": "a", "conf/out/.keep": ""})
	os.WriteFile(filepath.Join(dir, "conf", "morph.toml"), []byte(`
[llm]
provider = "scripted"
scripted_replies = "../replies.json"
[[plugins]]
name = "cap"
path = `+strconv.Quote(capWasm(t))+`
allowed_paths = ["data", "out:/out:rw", `+strconv.Quote(abs+":/abs:ro")+`]
allowed_hosts = ["api.example.com", "*.example.org:8443"]
env = ["LANG", "MORPH_NOTES_DIR"]
http_timeout = "3s"
http_max_response_kb = 64
http_max_redirects = 0
ungranted = "error"
`), 0o644)
	c, err := config.Load(filepath.Join(dir, "conf", "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "conf", "data")
	want := host.Grants{
		Paths: []host.PathGrant{
			{Host: data, Guest: filepath.ToSlash(data)},
			{Host: filepath.Join(dir, "conf", "out"), Guest: "/out", Writable: true},
			{Host: abs, Guest: "/abs"},
		},
		Hosts:                []string{"api.example.com", "*.example.org:8443"},
		Env:                  []string{"LANG", "MORPH_NOTES_DIR"},
		HTTPTimeout:          3 * time.Second,
		HTTPMaxResponseBytes: 64 << 10,
		HTTPMaxRedirects:     -1, // none
		Ungranted:            host.UngrantedError,
	}
	if got := c.Plugins[0].HostConfig().Grants; !reflect.DeepEqual(got, want) {
		t.Fatalf("grants\n got %+v\nwant %+v", got, want)
	}
	// Without the keys: no grants at all, the host's defaults.
	c, err = config.Load(filepath.Join(write(t, map[string]string{"replies.json": replies, "morph.toml": `
[llm]
provider = "scripted"
scripted_replies = "replies.json"
[[plugins]]
name = "cap"
path = ` + strconv.Quote(capWasm(t)) + `
`}), "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Plugins[0].HostConfig().Grants; !reflect.DeepEqual(got, host.Grants{}) {
		t.Fatalf("no keys, grants %+v", got)
	}
}

// Every mistake in a grant key names the file, the line, the key and the
// plugin, and says what to do; the model's API key cannot be granted.
func TestPluginGrantErrors(t *testing.T) {
	wasm := capWasm(t) // here, not in a subtest: a missing fixture fails this test
	head := func(llm string) string {
		return llm + "\n[[plugins]]\nname = \"cap\"\npath = " + strconv.Quote(wasm) + "\n"
	}
	scripted := "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\""
	cases := []struct {
		llm, line, key, want string
	}{
		{scripted, `allowed_paths = ["missing"]`, "allowed_paths", "no such file or directory (a relative directory is resolved against the config file's directory)"},
		{scripted, `allowed_paths = ["replies.json"]`, "allowed_paths", "is not a directory"},
		{scripted, `allowed_paths = ["a:b:c:d"]`, "allowed_paths", `want "HOST_DIR", "HOST_DIR:GUEST_DIR"`},
		{scripted, `allowed_paths = [".:relative"]`, "allowed_paths", "must be absolute"},
		{scripted, `allowed_paths = [".:/x", ".:/x:rw"]`, "allowed_paths", "both mount at /x"},
		{scripted, `allowed_hosts = ["https://api.example.com"]`, "allowed_hosts", "not a URL"},
		{scripted, `allowed_hosts = ["*"]`, "allowed_hosts", "name the hosts"},
		{scripted, `env = ["NOT-A-NAME"]`, "env", "is not an environment variable name"},
		{"[llm]\nprovider = \"openai\"\nmodel = \"m\"", `env = ["LANG", "OPENAI_API_KEY"]`, "env", "OPENAI_API_KEY holds the model's API key (llm.api_key_env)"},
		{scripted + "\napi_key_env = \"MY_LLM_KEY\"", `env = ["MY_LLM_KEY"]`, "env", "MY_LLM_KEY holds the model's API key"},
		{scripted, `env = ["TEMPORAL_API_KEY"]`, "env", "TEMPORAL_API_KEY is one of Temporal's client settings (TEMPORAL_*)"},
		{scripted, `env = ["TEMPORAL_GRPC_META_AUTHORIZATION"]`, "env", "no plugin may see them"},
		{scripted, `http_timeout = "0s"`, "http_timeout", "must be positive"},
		{scripted, `http_max_response_kb = -1`, "http_max_response_kb", "must be from 0 to 4194303, got -1"},
		// A huge *_kb value, shifted into bytes, overflowed to the default.
		{scripted, `max_log_kb = 9007199254740992`, "max_log_kb", "must be from 0 to 4194303"},
		{scripted, `max_error_kb = 4194304`, "max_error_kb", "must be from 0 to 4194303"},
		{scripted, `max_stack_kb = 1048577`, "max_stack_kb", "must be from 0 to 1048576"},
		{scripted, `max_linked_depth = 1025`, "max_linked_depth", "must be from 0 to 1024"},
		{scripted, `max_linked_depth = -1`, "max_linked_depth", "must be from 0 to 1024, got -1"},
		{scripted, `max_input_kb = 9223372036854775807`, "max_input_kb", "must be from 0 to 4194303"},
		{scripted, `http_max_response_kb = 18014398509481984`, "http_max_response_kb", "must be from 0 to 4194303"},
		{scripted, `http_max_redirects = -1`, "http_max_redirects", "0 means no redirects"},
		{scripted, `ungranted = "ignore"`, "ungranted", `unknown policy "ignore" (ungranted: warn, error)`},
		// Not grants, but the same check of a duration set to zero.
		{scripted, `timeout = "0s"`, "timeout", "must be positive"},
		{scripted, `quarantine_for = "0s"`, "quarantine_for", "must be positive"},
		{scripted, `session_idle = "0s"`, "session_idle", "must be positive"},
		{scripted, `session_wait = "-1s"`, "session_wait", "must be positive"},
		{scripted, `max_sessions = -1`, "max_sessions", "must be from 0 to 2147483647, got -1"},
	}
	for _, c := range cases {
		t.Run(c.key+" "+c.line, func(t *testing.T) {
			ce, err := loadErr(t, head(c.llm)+c.line+"\n")
			if ce.Key != "plugins.0."+c.key {
				t.Errorf("Key = %q, want plugins.0.%s (%v)", ce.Key, c.key, err)
			}
			if ce.Line == 0 {
				t.Errorf("Line = 0, want the line of plugins.0.%s (%v)", c.key, err)
			}
			if !strings.HasSuffix(ce.File, "morph.toml") {
				t.Errorf("File = %q, want it to end in morph.toml", ce.File)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `plugin "cap"`) {
				t.Errorf("error %q does not name the plugin and say %q", err, c.want)
			}
		})
	}
}

// Open loads the plugin with its grants: ungranted = "error" refuses a
// plugin whose manifest asks for more, naming it and the key to set.
func TestOpenUngranted(t *testing.T) {
	cache := t.TempDir()
	files := func(keys string) string {
		return write(t, map[string]string{"replies.json": replies, "data/.keep": "", "morph.toml": `
[llm]
provider = "scripted"
scripted_replies = "replies.json"
[wasm]
cache_dir = ` + strconv.Quote(cache) + `
[discovery]
project = false
user = false
[[plugins]]
name = "cap"
path = ` + strconv.Quote(capWasm(t)) + `
ungranted = "error"
` + keys})
	}
	c, err := config.Load(filepath.Join(files(`env = ["LANG"]`), "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Open(context.Background(), nil)
	if !errors.Is(err, host.ErrNotGranted) || !errors.Is(err, config.ErrConfig) || !strings.Contains(err.Error(), `"cap"`) ||
		!strings.Contains(err.Error(), "http (set allowed_hosts)") {
		t.Fatalf("Open: %v", err)
	}
	c, err = config.Load(filepath.Join(files("allowed_hosts = [\"api.example.com\"]\nallowed_paths = [\"data:/data\"]\nenv = [\"LANG\"]\n"), "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := c.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	caps := rt.Engine.Status().Plugins[0].Details.(*host.Details).Capabilities
	if len(caps) != 3 || caps[0].String() != "http (requested, granted: api.example.com)" || !strings.HasSuffix(caps[1].String(), "/data -> /data (ro), not requested)") ||
		caps[2].String() != "env (granted: LANG, not requested)" {
		t.Fatalf("capabilities %v", caps)
	}
}

// [wasm.limits] reaches the loader: a module over one is refused at Open,
// at its plugin's entry, naming the key to raise; the per-plugin output
// limits reach the host in its units.
func TestModuleAndOutputLimits(t *testing.T) {
	dir := write(t, map[string]string{"replies.json": replies})
	path := filepath.Join(dir, "morph.toml")
	os.WriteFile(path, []byte(`
[llm]
provider = "scripted"
scripted_replies = "replies.json"
[wasm]
cache_dir = "off"
[wasm.limits]
functions = 2
[discovery]
project = false
user = false
[[plugins]]
name = "cap"
path = `+strconv.Quote(capWasm(t))+`
max_log_kb = 8
max_error_kb = 2
max_json_depth = 16
max_stack_kb = 512
max_linked_depth = 8
`), 0o644)
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	l := c.Plugins[0].HostConfig().Limits
	if l.MaxLogBytes != 8<<10 {
		t.Errorf("MaxLogBytes = %d, want %d", l.MaxLogBytes, 8<<10)
	}
	if l.MaxErrorBytes != 2<<10 {
		t.Errorf("MaxErrorBytes = %d, want %d", l.MaxErrorBytes, 2<<10)
	}
	if l.MaxJSONDepth != 16 {
		t.Errorf("MaxJSONDepth = %d, want 16", l.MaxJSONDepth)
	}
	if l.MaxStackBytes != 512<<10 {
		t.Errorf("MaxStackBytes = %d, want %d", l.MaxStackBytes, 512<<10)
	}
	if l.MaxLinkedDepth != 8 {
		t.Errorf("MaxLinkedDepth = %d, want 8", l.MaxLinkedDepth)
	}
	if ml := c.Wasm.Limits.Host(); ml.Functions != 2 || ml.FunctionLocals != 0 {
		t.Fatalf("module limits %+v: want functions only, the rest to the host's defaults", ml)
	}
	_, err = c.Open(context.Background(), nil)
	var ce *config.Error
	if !errors.As(err, &ce) || !errors.Is(err, host.ErrLoad) || !strings.Contains(err.Error(), "[wasm.limits] functions") ||
		!strings.Contains(err.Error(), "over the limit of 2") || ce.Key != "plugins.0" {
		t.Fatalf("Open = %v; want a load failure at the plugin's entry naming [wasm.limits] functions", err)
	}
}

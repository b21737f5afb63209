package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/internal/testenv"
)

// fixture is the absolute path of a guests/testdata module built by `make fixtures`.
func fixture(t *testing.T, name string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "guests", "testdata", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return testenv.Built(t, path, "fixtures")
}

func TestPluginInspectAndCheck(t *testing.T) {
	code, stdout, stderr := morph(t, "", "plugin", "inspect", "--cache-dir", "off", fixture(t, "minimal"))
	if code != 0 {
		t.Fatalf("inspect exit %d: %s", code, stderr)
	}
	for _, want := range []string{"markers:  morph_abi_v1", "plugin:   min 1, ABI v1", "hooks:    build_prompt", "morph_build_prompt (i32, i32) -> (i64)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = morph(t, "", "plugin", "inspect", "--json", "--cache-dir", "off", fixture(t, "minimal"))
	var rep struct {
		Manifest struct{ Name string } `json:"manifest"`
	}
	if code != 0 {
		t.Fatalf("inspect --json: exit %d, want 0: %s", code, stdout)
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, stdout)
	}
	if rep.Manifest.Name != "min" {
		t.Errorf("inspect --json: manifest name %q, want min", rep.Manifest.Name)
	}

	code, stdout, _ = morph(t, "", "plugin", "check", "--cache-dir", "off", fixture(t, "minimal"))
	if code != 0 || !strings.HasPrefix(stdout, "ok: min 1, ABI v1, hooks [build_prompt], 0 tools") {
		t.Fatalf("check exit %d: %s", code, stdout)
	}
	for fx, reason := range map[string]string{
		"wrongversion":  "found morph_abi_v2, this host supports morph_abi_v1",
		"nomarker":      "no ABI marker export",
		"missingexport": "does not export morph_build_prompt",
	} {
		code, _, stderr = morph(t, "", "plugin", "check", "--cache-dir", "off", fixture(t, fx))
		if code != 1 || !strings.Contains(stderr, reason) {
			t.Errorf("check %s: exit %d, stderr %q; want 1 and %q", fx, code, stderr, reason)
		}
	}
	code, _, stderr = morph(t, "", "plugin", "check", "--cache-dir", "off", filepath.Join(t.TempDir(), "absent.wasm"))
	if code != 2 || !strings.Contains(stderr, "absent.wasm") {
		t.Fatalf("check of a missing file: exit %d, %s", code, stderr)
	}
}

// A plugin that cannot be loaded is a config error (exit 2) naming the plugin and the file.
func TestRunWithBadPlugin(t *testing.T) {
	cases := map[string]struct{ entry, want string }{
		"missing file": {`path = "nope.wasm"`, "nope.wasm not found"},
		"abi mismatch": {`path = "` + fixture(t, "wrongversion") + `"`, "found morph_abi_v2"},
		"sha mismatch": {`path = "` + fixture(t, "minimal") + `"` + "\nsha256 = \"" + strings.Repeat("ab", 32) + `"`, "sha256 mismatch"},
		"not wasm":     {`path = "replies.json"`, "not a WebAssembly module"},
		"unknown hook": {`path = "` + fixture(t, "minimal") + `"` + "\nhooks = [\"build_promt\"]", `unknown hook "build_promt"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := setup(t, []string{finalReply}, "\n[wasm]\ncache_dir = \"off\"\n\n[[plugins]]\nname = \"badplug\"\n"+c.entry+"\n")
			code, _, stderr := morph(t, "", "run", "--config", cfg, "task")
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr)
			}
			assertHas(t, "stderr", stderr, c.want, "badplug")
		})
	}
}

// A plugin whose hook fails at run time does not fail the run.
func TestRunWithFaultyPlugin(t *testing.T) {
	cfg := setup(t, []string{finalReply}, "\n[wasm]\ncache_dir = \"off\"\n\n[[plugins]]\nname = \"trapper\"\npath = \""+fixture(t, "trap")+"\"\ntimeout = \"500ms\"\n")
	code, stdout, stderr := morph(t, "", "run", "--config", cfg, "task")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if out := decode(t, stdout); out.StopReason != "final" {
		t.Fatalf("stop reason %q", out.StopReason)
	}
	if !strings.Contains(stderr, "warning: build_prompt hook failed") || !strings.Contains(stderr, `plugin "trapper"`) {
		t.Fatalf("no warning naming the plugin:\n%s", stderr)
	}
}

func TestPluginStatus(t *testing.T) {
	cfg := setup(t, []string{finalReply}, "\n[wasm]\ncache_dir = \"off\"\n[discovery]\nproject = false\nuser = false\n\n[[plugins]]\nname = \"min\"\npath = \""+fixture(t, "minimal")+"\"\npolicy = \"fail_closed\"\n")
	code, stdout, stderr := morph(t, "", "plugin", "status", "--config", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// Loading described the plugin on an instance, which stays idle.
	for _, want := range []string{"engine: initialized, mode normal", "plugin min 1 (", "hooks: build_prompt", "calc (builtin)", "hooks: build_prompt x1",
		"  memory: 1 idle instance, ", " resident of 64.0 MiB reserved, 4 KiB snapshot image shared\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, stderr = morph(t, "", "plugin", "status", "--json", "--config", cfg)
	var st struct {
		Plugins []struct {
			Details struct{ Memory *host.MemoryStatus }
		}
	}
	if code != 0 {
		t.Fatalf("status --json: exit %d, want 0: %s", code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	if len(st.Plugins) != 1 {
		t.Fatalf("status --json: %d plugins, want 1:\n%s", len(st.Plugins), stdout)
	}
	m := st.Plugins[0].Details.Memory
	if m == nil {
		t.Fatalf("status --json: no memory in the plugin's details:\n%s", stdout)
	}
	if m.Instances != 1 {
		t.Errorf("memory: %d idle instances, want 1", m.Instances)
	}
	if m.Reserved != 64<<20 {
		t.Errorf("memory: %d bytes reserved, want 64 MiB", m.Reserved)
	}
	if m.Resident == 0 || m.Resident > m.Reserved {
		t.Errorf("memory: %d bytes resident, want more than 0 and at most the %d reserved", m.Resident, m.Reserved)
	}
	if m.Image != 4<<10 {
		t.Errorf("memory: a %d-byte image, want 4 KiB (minimal's data page)", m.Image)
	}
	code, _, stderr = morph(t, "", "run", "--config", cfg, "task")
	if code != 0 || !strings.HasPrefix(stderr, "morph: 1 plugin (min 1), 1 tool, hooks: build_prompt\n") {
		t.Fatalf("exit %d, summary line: %q", code, strings.SplitN(stderr, "\n", 2)[0])
	}
}

// A plugin in session isolation reports its sessions: how many are open,
// its limit (max_sessions), and how many were replaced or refused, in text
// and in JSON.
func TestPluginStatusSessions(t *testing.T) {
	cfg := setup(t, []string{finalReply}, "\n[wasm]\ncache_dir = \"off\"\n[discovery]\nproject = false\nuser = false\n\n[[plugins]]\nname = \"ctr\"\npath = \""+
		fixture(t, "mw_counter")+"\"\nmax_sessions = 7\n")
	code, stdout, stderr := morph(t, "", "plugin", "status", "--config", cfg)
	if code != 0 || !strings.Contains(stdout, "  sessions: 0 open of 7 (max_sessions), 0 replaced, 0 refused\n") {
		t.Fatalf("exit %d, status:\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = morph(t, "", "plugin", "status", "--json", "--config", cfg)
	var st struct {
		Plugins []struct {
			Details struct{ Sessions *host.SessionStatus }
		}
	}
	if code != 0 {
		t.Fatalf("status --json: exit %d, want 0: %s", code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	if len(st.Plugins) != 1 {
		t.Fatalf("status --json: %d plugins, want 1:\n%s", len(st.Plugins), stdout)
	}
	if ss := st.Plugins[0].Details.Sessions; ss == nil || *ss != (host.SessionStatus{Max: 7}) {
		t.Fatalf("sessions %+v:\n%s", ss, stdout)
	}
}

// An init warning (here: a hook replaced) is printed once, by the status;
// before the fix the engine's log printed it too.
func TestPluginStatusWarnsOnce(t *testing.T) {
	entry := func(name string) string {
		return "\n[[plugins]]\nname = \"" + name + "\"\npath = \"" + fixture(t, "minimal") + "\"\n"
	}
	cfg := setup(t, []string{finalReply}, "\n[wasm]\ncache_dir = \"off\"\n[discovery]\nproject = false\nuser = false\n"+entry("first")+entry("second"))
	for _, args := range [][]string{{"plugin", "status", "--config", cfg}, {"plugin", "status", "--json", "--config", cfg}} {
		code, stdout, stderr := morph(t, "", args...)
		if n := strings.Count(stdout+stderr, `replaces plugin`); code != 0 || n != 1 {
			t.Errorf("%v: exit %d, the warning %d times:\n%s\n%s", args, code, n, stdout, stderr)
		}
	}
}

// A plugin that fails the engine's initialization is in the status, with
// why and how long it took to load, in text and in JSON, besides the error
// (exit 2); what the plugin wrote is escaped.
func TestPluginStatusReportsFailure(t *testing.T) {
	cfg := setup(t, []string{finalReply}, "\n[wasm]\ncache_dir = \"off\"\n[discovery]\nproject = false\nuser = false\n\n[[plugins]]\nname = \"old\"\npath = \""+fixture(t, "wrongversion")+"\"\n")
	code, stdout, stderr := morph(t, "", "plugin", "status", "--config", cfg)
	if code != 2 || !strings.Contains(stderr, "found morph_abi_v2") {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	if !strings.Contains(stdout, "engine: failed, mode normal") || !regexp.MustCompile(`(?m)^failed old \(in [0-9.]+[µm]?s\): .*found morph_abi_v2`).MatchString(stdout) {
		t.Fatalf("status:\n%s", stdout)
	}
	code, stdout, _ = morph(t, "", "plugin", "status", "--json", "--config", cfg)
	var st engine.Status
	if err := json.Unmarshal([]byte(stdout), &st); code != 2 || err != nil || st.State != "failed" || len(st.Failed) != 1 ||
		st.Failed[0].Name != "old" || st.Failed[0].LoadTime <= 0 || !strings.Contains(st.Failed[0].Reasons[0], "found morph_abi_v2") {
		t.Fatalf("exit %d, err %v, status %s", code, err, stdout)
	}
}

// A plugin without a snapshot says why on its memory line.
func TestPluginStatusNoSnapshot(t *testing.T) {
	cfg := setup(t, []string{finalReply}, "\n[wasm]\ncache_dir = \"off\"\n[discovery]\nproject = false\nuser = false\n\n[[plugins]]\nname = \"min\"\npath = \""+fixture(t, "minimal")+"\"\nsnapshot = false\n")
	code, stdout, stderr := morph(t, "", "plugin", "status", "--config", cfg)
	if code != 0 || !strings.Contains(stdout, " resident of 64.0 MiB reserved, no snapshot: turned off (snapshot = false)\n") {
		t.Fatalf("exit %d: no reason on the memory line:\n%s%s", code, stdout, stderr)
	}
}

package config_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/host"
)

// [[plugins]] isolation: validated at Load, passed to the host as is.
func TestPluginIsolation(t *testing.T) {
	wasm := fixtureWasm(t, "counter")
	head := "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[[plugins]]\nname = \"ctr\"\npath = " + strconv.Quote(wasm) + "\n"
	files := func(isolation string) map[string]string {
		return map[string]string{"replies.json": replies, "morph.toml": head + isolation}
	}
	for _, mode := range []string{"", host.IsolationPooled, host.IsolationSession, host.IsolationCall} {
		line := ""
		if mode != "" {
			line = "isolation = \"" + mode + "\"\n"
		}
		c, err := config.Load(filepath.Join(write(t, files(line)), "morph.toml"))
		if err != nil {
			t.Fatalf("isolation %q: %v", mode, err)
		}
		if got := c.Plugins[0].HostConfig().Isolation; got != mode {
			t.Errorf("isolation %q: host config has %q", mode, got)
		}
	}
	ce, err := loadErr(t, files("isolation = \"shared\"\n")["morph.toml"])
	if ce.Key != "plugins.0.isolation" {
		t.Errorf("key %q, want plugins.0.isolation (%v)", ce.Key, err)
	}
	if !strings.Contains(err.Error(), `unknown isolation "shared" (isolation: pooled, session, call)`) || !strings.Contains(err.Error(), `"ctr"`) {
		t.Errorf("error %q does not name the plugin, the value and the allowed values", err)
	}
}

// [[plugins]] snapshot: on unless set to false.
func TestPluginSnapshot(t *testing.T) {
	wasm := fixtureWasm(t, "counter")
	head := "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[[plugins]]\nname = \"ctr\"\npath = " + strconv.Quote(wasm) + "\n"
	for line, off := range map[string]bool{"": false, "snapshot = true\n": false, "snapshot = false\n": true} {
		c, err := config.Load(filepath.Join(write(t, map[string]string{"replies.json": replies, "morph.toml": head + line}), "morph.toml"))
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if got := c.Plugins[0].HostConfig().NoSnapshot; got != off {
			t.Errorf("%q: NoSnapshot %v, want %v", line, got, off)
		}
	}
}

// [[plugins]] session_idle, max_sessions and session_wait: passed to the
// host's limits, unset ones zero (the host's defaults).
func TestPluginSessionKeys(t *testing.T) {
	wasm := fixtureWasm(t, "counter")
	head := "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[[plugins]]\nname = \"ctr\"\npath = " + strconv.Quote(wasm) + "\n"
	keys := "session_idle = \"1h\"\nmax_sessions = 50000\nsession_wait = \"2s\"\n"
	c, err := config.Load(filepath.Join(write(t, map[string]string{"replies.json": replies, "morph.toml": head + keys}), "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	l := c.Plugins[0].HostConfig().Limits
	if l.SessionIdle != time.Hour {
		t.Errorf("SessionIdle = %v, want 1h", l.SessionIdle)
	}
	if l.MaxSessions != 50000 {
		t.Errorf("MaxSessions = %d, want 50000", l.MaxSessions)
	}
	if l.SessionWait != 2*time.Second {
		t.Errorf("SessionWait = %v, want 2s", l.SessionWait)
	}
}

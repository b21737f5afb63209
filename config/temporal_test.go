package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/config"
)

// The [temporal] table: defaults when absent, and each bad value named.
func TestTemporalTable(t *testing.T) {
	dir := write(t, map[string]string{"replies.json": replies, "morph.toml": "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n"})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Temporal.WithDefaults(); got != (config.Temporal{HostPort: "127.0.0.1:7233", Namespace: "default", TaskQueue: "morph", DialTimeout: 30 * time.Second,
		SessionMaxTurns: 100, SessionMaxHistoryKB: 4096, SessionIdleTimeout: 24 * time.Hour, PayloadThresholdKB: 64, PayloadMaxKB: 256 << 10,
		JournalMaxKB: 64 << 10, JournalRetention: 24 * time.Hour,
		HeartbeatInterval: 2 * time.Second, HeartbeatTimeout: 4 * time.Second, LostAttempts: 10, StickyTimeout: 2 * time.Second, AnswerMaxKB: 64, TurnMaxKB: 1024}) {
		t.Errorf("defaults %+v", got)
	}
	head := "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[temporal]\n"
	if err := os.WriteFile(filepath.Join(dir, "morph.toml"), []byte(head+"lost_attempts = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err := config.Load(filepath.Join(dir, "morph.toml")); err != nil {
		t.Error(err)
	} else if got := cfg.Temporal.WithDefaults().LostAttempts; got != 3 {
		t.Errorf("lost_attempts = 3 read as %d", got)
	}
	for _, c := range []struct{ line, key, want string }{
		{`host_port = "localhost"`, "temporal.host_port", `want "host:port"`},
		{`namespace = "a b"`, "temporal.namespace", "want letters, digits"},
		{`task_queue = "-x"`, "temporal.task_queue", "want letters, digits"},
		{`dial_timeout = 30`, "temporal.dial_timeout", "want a duration string"},
		{`dial_timeout = "0s"`, "temporal.dial_timeout", "must be positive"},
		{`session_max_turns = 0`, "temporal.session_max_turns", "must be from 1"},
		{`session_max_history_kb = -1`, "temporal.session_max_history_kb", "must be from 1"},
		{`payload_threshold_kb = 0`, "temporal.payload_threshold_kb", "must be from 1"},
		{`payload_max_kb = 0`, "temporal.payload_max_kb", "must be from 1"},
		{`session_idle_timeout = 5`, "temporal.session_idle_timeout", "want a duration string"},
		{`session_idle_timeout = "-1h"`, "temporal.session_idle_timeout", "must be positive"},
		{`journal_max_kb = 0`, "temporal.journal_max_kb", "must be from 1"},
		{`journal_retention = 3600`, "temporal.journal_retention", "want a duration string"},
		{`journal_retention = "0s"`, "temporal.journal_retention", "must be at least 1h0m0s"},
		{`journal_retention = "59m"`, "temporal.journal_retention", "must be at least 1h0m0s"},
		{"payload_dir = \"blobs\"\njournal_dir = \"blobs\"", "temporal.journal_dir", "is or holds payload_dir"},
		{"payload_dir = \"data/blobs\"\njournal_dir = \"data\"", "temporal.journal_dir", "is or holds payload_dir"},
		{"payload_dir = \"blobs\"\njournal_dir = \"blobs/ab\"", "temporal.journal_dir", "is inside payload_dir"},
		{`heartbeat_interval = 1`, "temporal.heartbeat_interval", "want a duration string"},
		{`heartbeat_interval = "0s"`, "temporal.heartbeat_interval", "must be positive"},
		{`heartbeat_timeout = "3s"`, "temporal.heartbeat_timeout", "at least twice heartbeat_interval (2s)"},
		{`heartbeat_interval = "3s"`, "temporal.heartbeat_interval", "heartbeat_timeout (4s) must be at least twice"},
		{`lost_attempts = 0`, "temporal.lost_attempts", "must be from 1"},
		{`lost_attempts = 2147483648`, "temporal.lost_attempts", "must be from 1 to 2147483647"},
		{`sticky_timeout = "500ms"`, "temporal.sticky_timeout", "must be at least 1s"},
		{`answer_max_kb = 0`, "temporal.answer_max_kb", "must be from 1"},
		{`turn_max_kb = -5`, "temporal.turn_max_kb", "must be from 1"},
	} {
		ce, err := loadErr(t, head+c.line+"\n")
		if ce.Key != c.key {
			t.Errorf("%s: Key = %q, want %q (%v)", c.line, ce.Key, c.key, err)
		}
		if ce.Line == 0 {
			t.Errorf("%s: Line = 0, want the line of %s (%v)", c.line, c.key, err)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not say %q", c.line, err, c.want)
		}
	}
}

// [temporal] payload_dir and journal_dir are resolved against the config
// file's directory; the journal may be in the payloads' directory, as its
// "journal" directory.
func TestTemporalPayloadDir(t *testing.T) {
	dir := write(t, map[string]string{"replies.json": replies,
		"morph.toml": "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[temporal]\npayload_dir = \"blobs\"\njournal_dir = \"blobs/journal\"\n"})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "blobs"); cfg.Temporal.PayloadDir != want {
		t.Errorf("payload_dir %q, want %q", cfg.Temporal.PayloadDir, want)
	}
	if want := filepath.Join(dir, "blobs", "journal"); cfg.Temporal.JournalDir != want {
		t.Errorf("journal_dir %q, want %q", cfg.Temporal.JournalDir, want)
	}
}

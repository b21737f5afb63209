package config

import (
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Temporal is the [temporal] table: the Temporal service that durable runs
// go through (`morph worker`, `morph run --temporal`, package temporal).
// Without it nothing changes: runs are local.
type Temporal struct {
	// HostPort is the Temporal frontend, "host:port" (default
	// 127.0.0.1:7233, a local dev server).
	HostPort string `toml:"host_port"`
	// Namespace is the Temporal namespace (default "default").
	Namespace string `toml:"namespace"`
	// TaskQueue is the queue workers poll and runs are started on (default
	// "morph"): the workers of one queue must load the same configuration.
	TaskQueue string `toml:"task_queue"`

	// SessionMaxTurns is how many turns a session's workflow (`morph run
	// --temporal --session`) runs before it continues as new, carrying
	// the session's history and its middleware's quarantines (default 100).
	SessionMaxTurns int `toml:"session_max_turns"`
	// SessionMaxHistoryKB is the size of the workflow's own Temporal
	// history past which a session continues as new after its turn
	// (default 4096): well below Temporal's limit (50 MiB), as each model
	// call's activity records the messages it sends.
	SessionMaxHistoryKB int `toml:"session_max_history_kb"`
	// SessionIdleTimeout is how long a session's workflow waits for its
	// next turn before it ends (default 24h); a turn after that starts
	// the session afresh, without its history.
	SessionIdleTimeout time.Duration `toml:"session_idle_timeout"`

	// PayloadDir, when set, is a directory where payloads larger than
	// PayloadThresholdKB (histories, tool outputs, images) are kept, by
	// the SHA-256 of their content, leaving a reference in Temporal's
	// history. Every worker and client of the task queue must see the same
	// directory (a shared volume when they are on several machines). A
	// relative path is resolved against the config file's directory.
	// Empty (the default): payloads go into the history as they are.
	PayloadDir string `toml:"payload_dir"`
	// PayloadThresholdKB is the size from which a payload goes to
	// PayloadDir (default 64).
	PayloadThresholdKB int `toml:"payload_threshold_kb"`
	// PayloadMaxKB is the largest payload read back from PayloadDir
	// (default 262144, 256 MiB): a larger blob is refused, not read.
	PayloadMaxKB int `toml:"payload_max_kb"`
}

// Defaults of the [temporal] table.
const (
	DefaultTemporalHostPort  = "127.0.0.1:7233"
	DefaultTemporalNamespace = "default"
	DefaultTemporalTaskQueue = "morph"

	DefaultSessionMaxTurns     = 100
	DefaultSessionMaxHistoryKB = 4096
	DefaultSessionIdleTimeout  = 24 * time.Hour
	DefaultPayloadThresholdKB  = 64
	DefaultPayloadMaxKB        = 256 << 10
)

// WithDefaults is t with its empty keys set to their defaults.
func (t Temporal) WithDefaults() Temporal {
	if t.HostPort == "" {
		t.HostPort = DefaultTemporalHostPort
	}
	if t.Namespace == "" {
		t.Namespace = DefaultTemporalNamespace
	}
	if t.TaskQueue == "" {
		t.TaskQueue = DefaultTemporalTaskQueue
	}
	if t.SessionMaxTurns == 0 {
		t.SessionMaxTurns = DefaultSessionMaxTurns
	}
	if t.SessionMaxHistoryKB == 0 {
		t.SessionMaxHistoryKB = DefaultSessionMaxHistoryKB
	}
	if t.SessionIdleTimeout == 0 {
		t.SessionIdleTimeout = DefaultSessionIdleTimeout
	}
	if t.PayloadThresholdKB == 0 {
		t.PayloadThresholdKB = DefaultPayloadThresholdKB
	}
	if t.PayloadMaxKB == 0 {
		t.PayloadMaxKB = DefaultPayloadMaxKB
	}
	return t
}

// temporalName is what a namespace or task queue may be here: what a
// person types and a log shows unambiguously.
var temporalName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`)

func (v *validator) temporal() {
	t := &v.c.Temporal
	if t.HostPort != "" {
		if _, _, err := net.SplitHostPort(t.HostPort); err != nil {
			v.fail(toml.Key{"temporal", "host_port"}, err, "want \"host:port\" (e.g. %q): %v", DefaultTemporalHostPort, err)
		}
	}
	for key, val := range map[string]string{"namespace": t.Namespace, "task_queue": t.TaskQueue} {
		if val != "" && !temporalName.MatchString(val) {
			v.fail(toml.Key{"temporal", key}, nil, "%q: want letters, digits, '.', '_' or '-' (at most 200)", val)
		}
	}
	v.limit(toml.Key{"temporal", "session_max_turns"}, t.SessionMaxTurns)
	v.limit(toml.Key{"temporal", "session_max_history_kb"}, t.SessionMaxHistoryKB)
	v.limit(toml.Key{"temporal", "payload_threshold_kb"}, t.PayloadThresholdKB)
	v.limit(toml.Key{"temporal", "payload_max_kb"}, t.PayloadMaxKB)
	if v.md.IsDefined("temporal", "session_idle_timeout") {
		switch {
		case v.md.Type("temporal", "session_idle_timeout") != "String":
			v.fail(toml.Key{"temporal", "session_idle_timeout"}, nil, "want a duration string such as \"24h\", got %s",
				strings.ToLower(v.md.Type("temporal", "session_idle_timeout")))
		case t.SessionIdleTimeout <= 0:
			v.fail(toml.Key{"temporal", "session_idle_timeout"}, nil, "must be positive, got %s", t.SessionIdleTimeout)
		}
	}
	if t.PayloadDir != "" && !filepath.IsAbs(t.PayloadDir) {
		t.PayloadDir = filepath.Join(filepath.Dir(v.c.File), t.PayloadDir)
	}
}

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

	// JournalDir is the result journal's directory: each worker records
	// there the result of each model call, tool call and hook call before
	// it answers Temporal, and an attempt of a call that is recorded there
	// (its worker died after the call, before Temporal recorded it)
	// answers the record instead of calling again. Every worker of the
	// task queue must see the same directory (a shared volume when they
	// are on several machines): a worker that does not see a record makes
	// the call again. A relative path is resolved against the config
	// file's directory. Default: "journal" in PayloadDir when that is
	// set, else ".morph/journal" beside the config file, which the workers
	// of one machine loading the same file share. It may not be, or hold,
	// PayloadDir: old records are removed from it (JournalRetention).
	JournalDir string `toml:"journal_dir"`
	// JournalMaxKB is the largest record of the journal (default 65536,
	// 64 MiB): a call whose result is larger fails, loudly, rather than
	// going unrecorded; a record larger is refused, not read.
	JournalMaxKB int `toml:"journal_max_kb"`
	// JournalRetention is how long a record is kept (default 168h, a
	// week): it is needed until Temporal has recorded its call's
	// completion, which is at most its attempts' timeouts after it is
	// written, unless every worker is down meanwhile. Each worker removes
	// older records when it starts and every hour.
	JournalRetention time.Duration `toml:"journal_retention"`
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
	DefaultJournalMaxKB        = 64 << 10
	DefaultJournalRetention    = 7 * 24 * time.Hour
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
	if t.JournalMaxKB == 0 {
		t.JournalMaxKB = DefaultJournalMaxKB
	}
	if t.JournalRetention == 0 {
		t.JournalRetention = DefaultJournalRetention
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
	v.limit(toml.Key{"temporal", "journal_max_kb"}, t.JournalMaxKB)
	v.duration(toml.Key{"temporal", "session_idle_timeout"}, t.SessionIdleTimeout, "24h")
	v.duration(toml.Key{"temporal", "journal_retention"}, t.JournalRetention, "168h")
	for _, dir := range []*string{&t.PayloadDir, &t.JournalDir} {
		if *dir != "" && !filepath.IsAbs(*dir) {
			*dir = filepath.Join(filepath.Dir(v.c.File), *dir)
		}
	}
	if t.PayloadDir != "" && t.JournalDir != "" {
		if rel, err := filepath.Rel(t.JournalDir, t.PayloadDir); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			v.fail(toml.Key{"temporal", "journal_dir"}, nil, "%q is or holds payload_dir %q, whose blobs the journal's cleaning would remove: "+
				"give the journal a directory of its own (by default, \"journal\" in payload_dir)", t.JournalDir, t.PayloadDir)
		}
	}
}

// duration checks the duration key, which must be a positive duration
// string (such as example) when it is set.
func (v *validator) duration(key toml.Key, d time.Duration, example string) {
	if !v.md.IsDefined(key...) {
		return
	}
	switch {
	case v.md.Type(key...) != "String":
		v.fail(key, nil, "want a duration string such as %q, got %s", example, strings.ToLower(v.md.Type(key...)))
	case d <= 0:
		v.fail(key, nil, "must be positive, got %s", d)
	}
}

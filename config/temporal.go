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
	// DialTimeout is how long `morph worker`, `morph run --temporal` and
	// `morph pipeline run|resume --temporal` try to reach the Temporal
	// service when they start, backing off between attempts, before they
	// give up naming HostPort and the last error (default 30s): a worker
	// started with, or a little before, its server waits for it rather
	// than failing at once. An answer that refuses the connection (a bad
	// API key) is not tried again.
	DialTimeout time.Duration `toml:"dial_timeout"`

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
	// PayloadDir, nor be in it but as its "journal" directory (the
	// default), which no payload blob uses: old records are removed from
	// it (JournalRetention), and a payload's blob is kept as long as the
	// history that names it.
	JournalDir string `toml:"journal_dir"`
	// JournalMaxKB is the largest record of the journal (default 65536,
	// 64 MiB): a call whose result is larger fails, loudly, rather than
	// going unrecorded; a record larger is refused, not read.
	JournalMaxKB int `toml:"journal_max_kb"`
	// JournalRetention is how long a record is kept (default 24h): it is
	// needed until Temporal has recorded its call's completion, which is
	// at most the call's attempts' timeouts and their backoff after it is
	// written (LostAttempts attempts of at most the workers' activity
	// timeout, ten of 10 minutes by default: under two hours), unless no
	// worker of the queue runs meanwhile; a call whose record is removed
	// before then (an outage of every worker longer than the retention) is
	// made again. At least 1h. Each worker removes older records when it
	// starts and every hour.
	JournalRetention time.Duration `toml:"journal_retention"`
	// HeartbeatInterval is how often a worker tells Temporal that an
	// activity it runs is alive (default 2s), and how long each heartbeat
	// may take to reach Temporal before the SDK gives the attempt up;
	// HeartbeatTimeout how long Temporal waits for one before it gives the
	// activity to another worker (default 4s, at least twice the
	// interval): a lost worker's call is taken up after it. Shorter, and a
	// loaded worker whose heartbeat is late has its call, perhaps a paid
	// model call, made again by another worker. Every activity that may
	// run longer than HeartbeatTimeout heartbeats.
	HeartbeatInterval time.Duration `toml:"heartbeat_interval"`
	HeartbeatTimeout  time.Duration `toml:"heartbeat_timeout"`
	// LostAttempts is how many attempts one activity call may have, each
	// after the one before was lost (its worker died or stopped, its
	// heartbeat or its timeout passed), before the call fails with no
	// answer and ends its turn or pipeline run (default 10): more lost in
	// a row is no longer a lost worker but a call that kills its worker,
	// or an outage. An attempt of a call whose result is journaled only
	// reads its record, so the attempts cost little; ten ride out a few
	// workers killed in a row, or a starved one. The workers answer it in
	// Setup, so the workflow's history holds the value its calls used.
	LostAttempts int `toml:"lost_attempts"`
	// StickyTimeout is how long a workflow's next step waits for the
	// worker that ran its last one (which has the workflow in memory)
	// before any worker takes it, replaying its history (default 2s, at
	// least 1s): what a worker lost between two steps costs.
	StickyTimeout time.Duration `toml:"sticky_timeout"`

	// AnswerMaxKB caps a human gate's answer (its node, choice and
	// text) that a pipeline's workflow accepts (default 64): a larger one
	// is refused to its sender by the answer update's validator, so that
	// nothing of it enters the workflow's history or state.
	AnswerMaxKB int `toml:"answer_max_kb"`
	// TurnMaxKB caps the task of a durable turn (default 1024): a larger
	// one is refused before it reaches Temporal, and a session's workflow
	// rejects a turn update carrying one.
	TurnMaxKB int `toml:"turn_max_kb"`
}

// minJournalRetention is the least journal_retention taken.
const minJournalRetention = time.Hour

// Defaults of the [temporal] table.
const (
	DefaultTemporalHostPort  = "127.0.0.1:7233"
	DefaultTemporalNamespace = "default"
	DefaultTemporalTaskQueue = "morph"
	DefaultDialTimeout       = 30 * time.Second

	DefaultSessionMaxTurns     = 100
	DefaultSessionMaxHistoryKB = 4096
	DefaultSessionIdleTimeout  = 24 * time.Hour
	DefaultPayloadThresholdKB  = 64
	DefaultPayloadMaxKB        = 256 << 10
	DefaultJournalMaxKB        = 64 << 10
	DefaultJournalRetention    = 24 * time.Hour
	DefaultHeartbeatInterval   = 2 * time.Second
	DefaultHeartbeatTimeout    = 4 * time.Second
	DefaultLostAttempts        = 10
	DefaultStickyTimeout       = 2 * time.Second
	DefaultAnswerMaxKB         = 64
	DefaultTurnMaxKB           = 1024
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
	if t.DialTimeout == 0 {
		t.DialTimeout = DefaultDialTimeout
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
	if t.HeartbeatInterval == 0 {
		t.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if t.HeartbeatTimeout == 0 {
		t.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if t.LostAttempts == 0 {
		t.LostAttempts = DefaultLostAttempts
	}
	if t.StickyTimeout == 0 {
		t.StickyTimeout = DefaultStickyTimeout
	}
	if t.AnswerMaxKB == 0 {
		t.AnswerMaxKB = DefaultAnswerMaxKB
	}
	if t.TurnMaxKB == 0 {
		t.TurnMaxKB = DefaultTurnMaxKB
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
	v.limit(toml.Key{"temporal", "answer_max_kb"}, t.AnswerMaxKB)
	v.limit(toml.Key{"temporal", "turn_max_kb"}, t.TurnMaxKB)
	v.limit(toml.Key{"temporal", "lost_attempts"}, t.LostAttempts)
	v.duration("temporal", "dial_timeout", t.DialTimeout, 0)
	v.duration("temporal", "session_idle_timeout", t.SessionIdleTimeout, 0)
	// a record is needed until Temporal has recorded its call, which
	// takes an attempt's timeout at least: one shorter than an hour would
	// have a worker that restarts prune the record a retry needs
	v.duration("temporal", "journal_retention", t.JournalRetention, minJournalRetention)
	v.duration("temporal", "heartbeat_interval", t.HeartbeatInterval, 0)
	v.duration("temporal", "heartbeat_timeout", t.HeartbeatTimeout, 0)
	v.duration("temporal", "sticky_timeout", t.StickyTimeout, time.Second) // Temporal counts it in seconds
	if d := t.WithDefaults(); d.HeartbeatInterval > 0 && d.HeartbeatTimeout > 0 && d.HeartbeatTimeout < 2*d.HeartbeatInterval {
		key := "heartbeat_timeout"
		if !v.md.IsDefined("temporal", key) {
			key = "heartbeat_interval"
		}
		v.fail(toml.Key{"temporal", key}, nil, "heartbeat_timeout (%s) must be at least twice heartbeat_interval (%s): a heartbeat a little late would lose the call",
			d.HeartbeatTimeout, d.HeartbeatInterval)
	}
	for _, dir := range []*string{&t.PayloadDir, &t.JournalDir} {
		if *dir != "" && !filepath.IsAbs(*dir) {
			*dir = filepath.Join(filepath.Dir(v.c.File), *dir)
		}
	}
	if t.PayloadDir != "" && t.JournalDir != "" {
		if rel, err := filepath.Rel(t.JournalDir, t.PayloadDir); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			v.fail(toml.Key{"temporal", "journal_dir"}, nil, "%q is or holds payload_dir %q, whose blobs the journal's cleaning would remove: "+
				"give the journal a directory of its own (by default, \"journal\" in payload_dir)", t.JournalDir, t.PayloadDir)
		} else if rel, err := filepath.Rel(t.PayloadDir, t.JournalDir); err == nil && filepath.IsLocal(rel) && rel != "journal" {
			v.fail(toml.Key{"temporal", "journal_dir"}, nil, "%q is inside payload_dir %q, where it could hold payload blobs that the journal's cleaning would remove: "+
				"inside payload_dir, the journal's directory is \"journal\" (the default); else give it a directory outside", t.JournalDir, t.PayloadDir)
		}
	}
}

// duration checks the duration key name of table, set to d: a string
// such as "4s", at least least (positive when least is 0).
func (v *validator) duration(table, name string, d, least time.Duration) {
	if !v.md.IsDefined(table, name) {
		return
	}
	key := toml.Key{table, name}
	switch {
	case v.md.Type(table, name) != "String":
		v.fail(key, nil, "want a duration string such as \"4s\", got %s", strings.ToLower(v.md.Type(table, name)))
	case least == 0 && d <= 0:
		v.fail(key, nil, "must be positive, got %s", d)
	case d < least:
		v.fail(key, nil, "must be at least %s, got %s", least, d)
	}
}

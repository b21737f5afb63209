package config

import (
	"net"
	"regexp"

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
}

// Defaults of the [temporal] table.
const (
	DefaultTemporalHostPort  = "127.0.0.1:7233"
	DefaultTemporalNamespace = "default"
	DefaultTemporalTaskQueue = "morph"
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
	return t
}

// temporalName is what a namespace or task queue may be here: what a
// person types and a log shows unambiguously.
var temporalName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`)

func (v *validator) temporal() {
	t := v.c.Temporal
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
}

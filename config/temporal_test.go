package config_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/morphhost/morph/config"
)

// The [temporal] table: defaults when absent, and each bad value named.
func TestTemporalTable(t *testing.T) {
	dir := write(t, map[string]string{"replies.json": replies, "morph.toml": "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n"})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Temporal.WithDefaults(); got != (config.Temporal{HostPort: "127.0.0.1:7233", Namespace: "default", TaskQueue: "morph"}) {
		t.Errorf("defaults %+v", got)
	}
	head := "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[temporal]\n"
	for _, c := range []struct{ line, key, want string }{
		{`host_port = "localhost"`, "temporal.host_port", `want "host:port"`},
		{`namespace = "a b"`, "temporal.namespace", "want letters, digits"},
		{`task_queue = "-x"`, "temporal.task_queue", "want letters, digits"},
	} {
		ce, err := loadErr(t, head+c.line+"\n")
		if ce.Key != c.key || ce.Line == 0 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: key %q line %d: %v", c.line, ce.Key, ce.Line, err)
		}
	}
}

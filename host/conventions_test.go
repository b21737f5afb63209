package host

import (
	"context"
	"strings"
	"testing"
)

// A module built for a convention morph does not provide (Extism's pre-1.0
// ABI, Dylibso's Observe SDK) is refused at load with one error for the
// convention, naming it and what to rebuild with, the same from either
// loader: configured, the Extism one; unconfigured, the native one for a
// module that does not import extism:host/env. Other imports keep their
// loader's own refusal.
func TestRefusedConventions(t *testing.T) {
	l := newLoader(t)
	cases := []struct {
		fixture, convention string
		named               []string // imports the error names
		more                string   // how it counts the rest
		other               [2]string
	}{
		{fixture: "extism_preabi", convention: "of Extism's pre-1.0 ABI: ",
			named: []string{"env.extism_input_length", "env.extism_input_load_u8", "env.extism_alloc"}, more: "and 2 more",
			other: [2]string{"imports other.thing: an Extism plugin may import only", "imports other.thing: only morph:host/v1 and wasi_snapshot_preview1 are available"}},
		{fixture: "extism_observe", convention: "of Dylibso's Observe SDK: ",
			named: []string{"dylibso_observe.instrument_enter", "dylibso_observe.instrument_exit", "dylibso:observe/instrument.memory-grow"}, more: "and 1 more"},
	}
	for _, c := range cases {
		for i, configured := range []bool{true, false} {
			cfg := Config{Path: fixture(t, c.fixture)}
			if configured {
				cfg.Tools = []ExportTool{{Export: "run"}}
			}
			_, err := l.Load(context.Background(), cfg)
			what := c.fixture
			if !configured {
				what += " unconfigured"
			}
			checkErr(t, what, err, ErrLoad, append([]string{c.convention, "rebuild", c.more}, c.named...)...)
			if err == nil {
				continue
			}
			if n := strings.Count(err.Error(), c.convention); n != 1 {
				t.Errorf("%s: the convention is named %d times, want once (one error per convention): %v", what, n, err)
			}
			if c.other[i] != "" && !strings.Contains(err.Error(), c.other[i]) {
				t.Errorf("%s: error %q, want the other import refused by its loader (%q)", what, err, c.other[i])
			}
		}
	}
}

// `morph plugin inspect` suggests no [plugins.modules] entry for a refused
// convention's module (no module can provide it), and reports its refusal.
func TestInspectRefusedConvention(t *testing.T) {
	rep, err := newLoader(t).Inspect(context.Background(), Config{Path: fixture(t, "extism_preabi"), Tools: []ExportTool{{Export: "run"}}})
	if err != nil {
		t.Fatal(err)
	}
	suggested := strings.Join(rep.Suggested, "\n")
	if strings.Contains(suggested, `"env"`) || !strings.Contains(suggested, `"other"`) {
		t.Errorf("suggested:\n%s\nwant other.thing's module, not env's", suggested)
	}
	if problems := strings.Join(rep.Problems, "\n"); !strings.Contains(problems, "of Extism's pre-1.0 ABI") {
		t.Errorf("problems %q, want the convention's refusal", problems)
	}
}

package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/pipeline"
	"github.com/morphhost/morph/record"
)

// echoToolConfig is a scripted run calling echo_tool's tool twice, with
// extra appended to the config.
func echoToolConfig(t *testing.T, extra string) string {
	call := func(text string) string {
		return `{"reply":{"type":"tool_call","tool_call":{"thought":"echo","tool_name":"echo_input","tool_params":{"text":"` + text + `"}}}}`
	}
	return setup(t, []string{call("one"), call("two"), finalReply}, "[discovery]\nproject = false\nuser = false\n"+extra+`
[[plugins]]
name = "echo_tool"
path = `+strconv.Quote(fixture(t, "echo_tool"))+"\n")
}

// The two-command flow: morph run --record, then morph plugin replay
// against the same build (exit 0), and against one that answers
// differently (exit 1, the --json report in its documented shape).
func TestRecordThenReplay(t *testing.T) {
	cfg := echoToolConfig(t, "")
	file := filepath.Join(t.TempDir(), "run.jsonl")
	code, stdout, stderr := morph(t, "", "run", "--config", cfg, "--record", file, "echo twice")
	if code != 0 || !strings.Contains(stderr, "morph: recorded 2 calls to "+file+"\n") {
		t.Fatalf("run --record: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = morph(t, "", "plugin", "replay", file, "--plugin", "echo_tool="+fixture(t, "echo_tool"))
	if code != 0 || !strings.Contains(stdout, "echo_tool: 2 calls replayed: 2 same, 0 different, 0 skipped") {
		t.Fatalf("replay against the same build: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = morph(t, "", "plugin", "replay", file, "--plugin", "echo_tool="+fixture(t, "echo_tool"), "--config", cfg)
	if code != 0 || !strings.Contains(stdout, "2 same") {
		t.Fatalf("replay with the run's config: exit %d\n%s%s", code, stdout, stderr)
	}
	upper := "echo_tool=" + fixture(t, "echo_tool_upper")
	code, stdout, stderr = morph(t, "", "plugin", "replay", file, "--plugin", upper)
	if code != 1 || !strings.Contains(stdout, "call 1 (morph_call_tool tool echo_input, session ") || !strings.Contains(stdout, `"TEXT":"ONE"`) {
		t.Fatalf("replay against another build: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = morph(t, "", "plugin", "replay", file, "--plugin", upper, "--json")
	var rep struct {
		File, Plugin           string
		Calls, Same, Different int
		Skipped                []struct{ Seq int64 }
		Diffs                  []struct {
			Seq                                   int64
			Export, Tool, FaultWas, FaultNow, Was string
			Now                                   string
			Paths                                 []string
		}
		Manifest map[string]any
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 1 {
		t.Fatalf("--json: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	if rep.File != file || rep.Plugin != "echo_tool" || rep.Calls != 2 || rep.Different != 2 || len(rep.Diffs) != 2 || rep.Skipped == nil ||
		rep.Diffs[1].Seq != 2 || rep.Diffs[1].Tool != "echo_input" || !strings.Contains(rep.Diffs[1].Now, `"TEXT":"TWO"`) {
		t.Fatalf("--json report %+v", rep)
	}
	for _, args := range [][]string{
		{"plugin", "replay", file, "--plugin", "echo_tool"},
		{"plugin", "replay", cfg, "--plugin", upper},               // not a record file
		{"plugin", "replay", file, "--plugin", "echo_tool=" + cfg}, // not a module
	} {
		if code, _, stderr := morph(t, "", args...); code != 2 || stderr == "" {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, stderr)
		}
	}
}

// A secret granted through env never reaches the file, raw or as JSON
// writes it (here the model passes it to echo_tool, which echoes it back
// in its error; a guest reading its environment is the same bytes); one
// too short to scrub refuses the run, naming it.
func TestRecordScrubsGrantedSecret(t *testing.T) {
	key := make([]byte, 16)
	rand.Read(key)
	secret := hex.EncodeToString(key) + `"\q`
	t.Setenv("MORPH_TEST_SECRET", secret)
	params, _ := json.Marshal(map[string]string{"text": secret})
	cfg := setup(t, []string{`{"reply":{"type":"tool_call","tool_call":{"tool_name":"echo_input","tool_params":` + string(params) + `}}}`, finalReply},
		"[discovery]\nproject = false\nuser = false\n[[plugins]]\nname = \"echo_tool\"\npath = "+strconv.Quote(fixture(t, "echo_tool"))+
			"\nenv = [\"MORPH_TEST_SECRET\"]\n")
	file := filepath.Join(t.TempDir(), "run.jsonl")
	if code, stdout, stderr := morph(t, "", "run", "--config", cfg, "--record", file, "echo the secret"); code != 0 {
		t.Fatalf("run --record: exit %d\n%s%s", code, stdout, stderr)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	quoted, _ := json.Marshal(secret)
	for _, form := range []string{secret, string(quoted[1 : len(quoted)-1]), hex.EncodeToString(key)} {
		if strings.Contains(string(raw), form) {
			t.Fatalf("the record holds the secret as %q:\n%s", form, raw)
		}
	}
	if strings.Count(string(raw), "«redacted:MORPH_TEST_SECRET»") < 2 { // the input, and the fault's message
		t.Fatalf("the secret is not marked where it was:\n%s", raw)
	}
	t.Setenv("MORPH_TEST_SECRET", "abc")
	code, _, stderr := morph(t, "", "run", "--config", cfg, "--record", file, "echo the secret")
	if code != 2 || !strings.Contains(stderr, "MORPH_TEST_SECRET granted to plugin echo_tool is 3 bytes") {
		t.Fatalf("a 3-byte secret: exit %d\n%s", code, stderr)
	}
}

// A recording that reaches record.max_bytes stops loudly (one warning, the
// dropped calls counted, the end line saying why) and the run goes on.
func TestRecordMaxBytes(t *testing.T) {
	cfg := echoToolConfig(t, "[record]\nmax_bytes = 1024\n")
	file := filepath.Join(t.TempDir(), "run.jsonl")
	code, stdout, stderr := morph(t, "", "run", "--config", cfg, "--record", file, "echo twice")
	if code != 0 || strings.Count(stderr, "recording stopped") != 1 || !strings.Contains(stderr, "record.max_bytes (1024 bytes)") ||
		!strings.Contains(stderr, "dropped: record.max_bytes)") {
		t.Fatalf("run: exit %d\n%s%s", code, stdout, stderr)
	}
	raw, _ := os.ReadFile(file)
	if !strings.Contains(string(raw), `"stopped":"max_bytes"`) {
		t.Fatalf("the end line does not say why:\n%s", raw)
	}
}

// morph pipeline run takes --record as morph run does; neither records a
// run on Temporal, whose workers run the plugins.
func TestRecordPipelineAndTemporal(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pipeline.jsonl")
	code, s, stderr := runExample(t, "plan-implement-verify", "", "--record", file)
	if code != 0 || s.Status != pipeline.RunSuccess || !strings.Contains(stderr, "morph: recorded 0 calls to "+file) {
		t.Fatalf("pipeline run --record: exit %d\n%s", code, stderr)
	}
	if f, err := record.Open(file); err != nil {
		t.Fatalf("the pipeline's record: %v", err)
	} else if _, err := f.Next(); err != io.EOF || f.End == nil {
		t.Fatalf("the pipeline's record: %v, end %+v", err, f.End)
	}
	for _, args := range [][]string{
		{"run", "--temporal", "--record", file, "task"},
		{"pipeline", "run", "--temporal", "--record", file, examples + "plan-implement-verify.dot"},
	} {
		if code, _, stderr := morph(t, "", args...); code != 2 || !strings.Contains(stderr, "--record is for a local run") {
			t.Errorf("%v: exit %d\n%s", args, code, stderr)
		}
	}
}

// An export name is the record file's bytes: the terminal gets it escaped.
func TestReplayReportEscapesExport(t *testing.T) {
	var out strings.Builder
	printReplay(&out, &host.ReplayReport{Different: 1, Diffs: []host.ReplayDiff{{Export: "x\x1b[2J\nFORGED"}}})
	if strings.ContainsAny(out.String(), "\x1b") || strings.Contains(out.String(), "\nFORGED") {
		t.Fatalf("report printed the export raw: %q", out.String())
	}
}

package temporal

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/testenv"
)

// The tests' worker is the test binary run again with these variables
// (TestMain): its config file, where it kills itself (killAt), and the
// directory of its ledger tool. Only the test binary reads them.
const (
	testWorkerEnv = "MORPH_TEST_WORKER"
	testKillEnv   = "MORPH_TEST_KILL"
	testLedgerEnv = "MORPH_TEST_LEDGER"
)

// testWorker is the main of the tests' worker: a worker of the config
// file's task queue, with the ledger tool besides the config's, an
// activity timeout of 30 s (far above what any attempt takes on a loaded
// machine: a killed worker's calls are taken up by their heartbeat
// timeout, set by the config) and a sticky queue's of 1 s (so that its
// workflow tasks go to another soon), which kills itself with SIGKILL
// where $MORPH_TEST_KILL says (killAt).
func testWorker(path string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "test worker:", err); return 2 }
	cfg, err := config.Load(path)
	if err != nil {
		return fail(err)
	}
	ActivityTimeout = 30 * time.Second
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a, err := NewActivities(ctx, cfg, logger)
	if err != nil {
		return fail(err)
	}
	a.rt.Engine.Registry().Register(ledgerTool{dir: os.Getenv(testLedgerEnv)})
	journalPoint = func(ctx context.Context, point string) { killAt(activity.GetInfo(ctx).ActivityType.Name + ":" + point) }
	c, err := client.Dial(client.Options{HostPort: cfg.Temporal.HostPort, Logger: quiet, DataConverter: DataConverter(cfg.Temporal)})
	if err != nil {
		return fail(err)
	}
	a.cfg.Temporal.StickyTimeout = time.Second
	w := NewWorker(c, cfg.Temporal.TaskQueue, a)
	if err := w.Run(worker.InterruptCh()); err != nil {
		return fail(err)
	}
	return 0
}

// killAt kills the worker with SIGKILL, saying so first, when point is
// $MORPH_TEST_KILL: "<activity>:<point>", a journal's point (journalPoint)
// or the ledger tool's "CallTool:during".
func killAt(point string) {
	if point != os.Getenv(testKillEnv) {
		return
	}
	fmt.Fprintf(os.Stderr, "test worker: killed at %s\n", point)
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// ledgerTool makes its entry in the ledger in its directory, with its
// call's ID, once per ID, as the docs advise a tool with effects outside
// it: atomically, a file per ID created with O_EXCL (two attempts of one
// call may run at once, so a check of the ledger and then an append would
// not do), and a call whose ID has its entry answers as the first did.
// Each execution appends the ID to the attempts file too.
type ledgerTool struct{ dir string }

func (ledgerTool) Name() string        { return "ledger" }
func (ledgerTool) Description() string { return "Appends an entry to the ledger." }
func (ledgerTool) ParameterSchema() string {
	return `{"type":"object","properties":{"entry":{"type":"string"}},"required":["entry"]}`
}

func (l ledgerTool) Execute(ctx context.Context, params map[string]any) (string, error) {
	id, entry := engine.CallID(ctx), fmt.Sprint(params["entry"])
	if id == "" {
		return "", errors.New("no call ID")
	}
	if err := appendLine(filepath.Join(l.dir, "attempts"), id); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(id))
	f, err := os.OpenFile(filepath.Join(l.dir, "ledger-"+hex.EncodeToString(sum[:])), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return "recorded " + entry, nil // the call's entry, made by an attempt before
	}
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(id + "\t" + entry + "\n")
	if err == nil {
		err = f.Sync()
	}
	if err := errors.Join(err, f.Close()); err != nil {
		return "", err
	}
	killAt("CallTool:during")
	return "recorded " + entry, nil
}

// ledgerEntries are the ledger's entries in dir ("<call ID>\t<entry>"),
// in the order of their entries.
func ledgerEntries(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "ledger-*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		lines, err := readLines(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lines...)
	}
	slices.SortFunc(out, func(a, b string) int {
		return strings.Compare(a[strings.LastIndex(a, "\t"):], b[strings.LastIndex(b, "\t"):])
	})
	return out
}

// appendLine appends line to the file at path, synced.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// readLines are the lines of the file at path, none if it is missing.
func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		out = append(out, s.Text())
	}
	return out, s.Err()
}

// ledgerModel is an OpenAI-compatible server that answers by where the
// conversation is, not by how many calls it had: a call made again gets
// the answer it got before. It answers a request with n tool results in
// it with replies[n], and counts the calls it answered for each n.
type ledgerModel struct {
	*httptest.Server
	mu      sync.Mutex
	answers map[int]int
}

// ledgerReplies are a turn of two ledger entries and a final.
var ledgerReplies = []string{
	`{"type":"tool_call","tool_call":{"thought":"a","tool_name":"ledger","tool_params":{"entry":"a"}}}`,
	`{"type":"tool_call","tool_call":{"thought":"b","tool_name":"ledger","tool_params":{"entry":"b"}}}`,
	`{"type":"final","final":{"thought":"done","output":42}}`,
}

func newLedgerModel(t *testing.T) *ledgerModel {
	m := &ledgerModel{answers: map[int]int{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n := strings.Count(string(body), "Tool Result (ledger)")
		m.mu.Lock()
		m.answers[n]++
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, ledgerReplies[min(n, 2)])
	}))
	t.Cleanup(m.Close)
	return m
}

// A worker killed at each point of a call, a session's turn of two model
// calls, two calls of the ledger tool and a final; another worker
// finishes the turn, with its final:
//
//   - Chat:before, CallTool:before: the worker took the call and died
//     before making it (CallTool's: once the first model call was
//     recorded by Temporal). Nothing is made twice.
//   - Chat:recorded, CallTool:recorded: the call returned and its result
//     is in the journal, and the worker died before Temporal recorded it
//     (the measured repeats of issue 24). The next attempt answers the
//     record: nothing is made twice.
//   - Chat:called, CallTool:called: the call returned and the worker died
//     before its result was in the journal; CallTool:during: the tool
//     did its effect and the worker died in it. The window: the call is
//     made again, with the same call ID, so that the ledger, which
//     deduplicates by it, has each entry once. (A model call killed in
//     flight: TestWorkerKilledMidTurn.)
func TestJournalKills(t *testing.T) {
	c := dev(t)
	for _, kill := range []string{"Chat:before", "Chat:called", "Chat:recorded", "CallTool:before", "CallTool:during", "CallTool:called", "CallTool:recorded"} {
		t.Run(strings.Replace(kill, ":", "-", 1), func(t *testing.T) {
			t.Parallel()
			model := newLedgerModel(t)
			ledger := t.TempDir()
			srv, _ := devServer()
			cfg := filepath.Join(t.TempDir(), "morph.toml")
			queue := fmt.Sprintf("journal-%s-%d", strings.Replace(kill, ":", "-", 1), time.Now().UnixNano())
			os.WriteFile(cfg, []byte(fmt.Sprintf("[llm]\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = %q\napi_key_env = \"\"\nmax_retries = 0\n\n"+
				"[tools]\nbuiltin = []\n\n[discovery]\nproject = false\nuser = false\n\n[temporal]\nhost_port = %q\ntask_queue = %q\n"+
				"heartbeat_interval = \"1s\"\nheartbeat_timeout = \"4s\"\n",
				model.URL+"/v1", srv.FrontendHostPort(), queue)), 0o644)
			var logs testenv.Buffer
			start := func(kill string) *exec.Cmd {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), testWorkerEnv+"="+cfg, testKillEnv+"="+kill, testLedgerEnv+"="+ledger)
				cmd.Stdout, cmd.Stderr = &logs, &logs
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
				return cmd
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			first := start(kill)
			h, err := StartTurn(ctx, c, queue, queue, LimitsOf(config.Temporal{}), SessionTurn{Task: "log a, then b"})
			if err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() { waited <- first.Wait() }()
			select {
			case <-waited:
			case <-ctx.Done():
				t.Fatalf("the first worker was never killed:\n%s", logs.String())
			}
			if ws, _ := first.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the first worker ended %v, want killed by SIGKILL:\n%s", first.ProcessState, logs.String())
			}
			if !strings.Contains(logs.String(), "test worker: killed at "+kill+"\n") {
				t.Fatalf("the first worker was not killed at %s:\n%s", kill, logs.String())
			}
			start("")
			var res TurnResult
			if err := h.Get(ctx, &res); err != nil {
				t.Fatalf("%v\n%s", err, logs.String())
			}
			if res.Error != "" {
				t.Errorf("result Error = %q, want none\n%s", res.Error, logs.String())
			}
			checkTurn(t, "the turn", res, "42", 3, "recorded a", "recorded b")

			model.mu.Lock()
			answers := fmt.Sprint(model.answers)
			model.mu.Unlock()
			wantAnswers := "map[0:1 1:1 2:1]" // each model call once
			if kill == "Chat:called" {
				wantAnswers = "map[0:2 1:1 2:1]" // the first made again
			}
			if answers != wantAnswers {
				t.Errorf("model calls answered, by tool results in the conversation: %s, want %s\n%s", answers, wantAnswers, logs.String())
			}
			entries := ledgerEntries(t, ledger)
			attempts, _ := readLines(filepath.Join(ledger, "attempts"))
			if len(entries) != 2 {
				t.Errorf("ledger %q, want a and b, once each", entries)
			} else {
				for i, want := range []string{"\ta", "\tb"} {
					if !strings.HasSuffix(entries[i], want) {
						t.Errorf("ledger entry %d %q, want it to end %q", i+1, entries[i], want)
					}
				}
				if id := entries[0][:len(entries[0])-2]; id == entries[1][:len(entries[1])-2] {
					t.Errorf("ledger %q: a and b have the one ID %q, want IDs of their own", entries, id)
				}
			}
			wantAttempts := 2 // each tool call once
			if kill == "CallTool:during" || kill == "CallTool:called" {
				wantAttempts = 3 // the first made again, with its ID
			}
			if len(attempts) != wantAttempts {
				t.Errorf("the tool ran with the IDs %q; want %d runs", attempts, wantAttempts)
			} else if wantAttempts == 3 && attempts[0] != attempts[1] {
				t.Errorf("the tool ran with the IDs %q; want the repeated run with the first's ID", attempts)
			}
			if strings.HasSuffix(kill, ":recorded") && !strings.Contains(logs.String(), "answered the recorded result") {
				t.Errorf("no attempt answered from the journal:\n%s", logs.String())
			}
		})
	}
}

// A result the journal cannot record (here, over journal_max_kb) fails
// its call, not retried, with the journal's error: the turn ends naming
// the key, and the model is not called again (its second reply would end
// the turn with a final).
func TestJournalRefusesLoudly(t *testing.T) {
	c := dev(t)
	long := strings.Repeat("x", 2<<10)
	path := appendConfig(t, writeConfig(t, `{"type":"final","final":{"thought":"t","output":"`+long+`"}}`, `{"type":"final","final":{"thought":"t","output":1}}`),
		"\n[temporal]\njournal_max_kb = 1\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	res, run := runOnWorker(t, c, cfg, "say it long")
	if res.Final != nil {
		t.Errorf("final %+v, want none", res.Final)
	}
	for _, says := range []string{"call Chat has no answer: the result journal failed it", "journal_max_kb"} {
		if !strings.Contains(res.Error, says) {
			t.Errorf("result Error = %q, want it to say %q", res.Error, says)
		}
	}
	if res.Metrics.LLMRounds != 0 {
		t.Errorf("Metrics.LLMRounds = %d, want none", res.Metrics.LLMRounds)
	}
	// The scripted model is numbered by the workflow, so a second attempt
	// would answer the same long reply: the history tells it, one attempt
	// of Chat, failed non-retryable by the journal.
	chat, attempts, failed := int64(0), []int32{}, false
	for _, ev := range workflowEvents(t, c, run.GetID(), run.GetRunID()) {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "Chat" {
			chat = ev.GetEventId()
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetScheduledEventId() == chat {
			attempts = append(attempts, a.GetAttempt())
		}
		if a := ev.GetActivityTaskFailedEventAttributes(); a != nil && a.GetScheduledEventId() == chat {
			info := a.GetFailure().GetApplicationFailureInfo()
			failed = info.GetNonRetryable() && info.GetType() == journalFailure
		}
	}
	if chat == 0 {
		t.Fatal("no Chat activity scheduled in the history")
	}
	if got := fmt.Sprint(attempts); got != "[1]" {
		t.Errorf("Chat started at attempts %s, want [1]", got)
	}
	if !failed {
		t.Error("Chat did not fail non-retryable by the journal")
	}
	if recs := files(t, journalDir(cfg)); len(recs) != 0 { // Setup is not journaled, the model call's record refused
		t.Errorf("journal files %v, want none", recs)
	}
}

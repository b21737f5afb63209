package temporal

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/morphhost/morph/internal/testenv"
	"go.temporal.io/sdk/client"
)

// modelServer is an OpenAI-compatible server that answers the n-th model
// call it completes with replies[n-1]: a call whose client goes away before
// the answer (a killed worker's) is aborted, not completed, and does not
// count. With hold set, the call that would complete second waits until
// its client goes away, after sending on arrived.
type modelServer struct {
	*httptest.Server
	mu                 sync.Mutex
	completed, aborted int
	hold               bool
	arrived            chan struct{}
}

func newModelServer(t *testing.T, replies ...string) *modelServer {
	s := &modelServer{arrived: make(chan struct{}, 1)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		n := s.completed + 1
		hold := s.hold && n == 2
		if hold {
			s.hold = false
		}
		s.mu.Unlock()
		if hold {
			s.arrived <- struct{}{}
			<-r.Context().Done()
			s.mu.Lock()
			s.aborted++
			s.mu.Unlock()
			return
		}
		if n > len(replies) {
			http.Error(w, `{"error":{"message":"no more replies"}}`, http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.completed++
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, replies[n-1])
	}))
	t.Cleanup(s.Close)
	return s
}

// calls are the model calls completed and aborted.
func (s *modelServer) calls() (completed, aborted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.completed, s.aborted
}

// buildBin builds morph-temporal and morph, side by side as make build
// puts them, once, and returns their directory.
var buildBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "morph-temporal-test")
	if err != nil {
		return "", err
	}
	for _, pkg := range []string{"./cmd/morph-temporal", "../cmd/morph"} {
		if out, err := exec.Command("go", "build", "-o", dir+"/", pkg).CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	}
	return dir, nil
})

// bin is the path of a program buildBin built.
func bin(t testing.TB, name string) string {
	t.Helper()
	dir, err := buildBin()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// A worker killed with SIGKILL in the middle of a turn, after the turn's
// first model call and tool call, while its second model call waits for the
// model: a second worker finishes the turn. Nothing that finished runs
// again (the model answered 3 calls, the tool ran twice); the call in
// flight at the kill, which never answered, is made again.
func TestWorkerKilledMidTurn(t *testing.T) {
	c := dev(t)
	srv, _ := devServer()
	model := newModelServer(t,
		`{"type":"tool_call","tool_call":{"thought":"a","tool_name":"calc","tool_params":{"expression":"6*7"}}}`,
		`{"type":"tool_call","tool_call":{"thought":"b","tool_name":"calc","tool_params":{"expression":"1+1"}}}`,
		`{"type":"final","final":{"thought":"done","output":42}}`)
	model.hold = true
	queue := "kill-" + fmt.Sprint(time.Now().UnixNano())
	dir := t.TempDir()
	cfg := filepath.Join(dir, "morph.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("[llm]\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = %q\napi_key_env = \"\"\nmax_retries = 0\n\n"+
		"[tools]\nbuiltin = [\"calc\"]\n\n[discovery]\nproject = false\nuser = false\n\n[temporal]\nhost_port = %q\ntask_queue = %q\n",
		model.URL+"/v1", srv.FrontendHostPort(), queue)), 0o644)
	var logs testenv.Buffer
	start := func() *exec.Cmd {
		cmd := exec.Command(bin(t, "morph-temporal"), "worker", "--config", cfg, "--activity-timeout", "3s")
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	a := start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, TurnWorkflow, TurnInput{SessionID: "s", Task: "6*7?"})
	if err != nil {
		t.Fatal(err)
	}
	select { // the first model call and tool call are done, the second model call is in flight
	case <-model.arrived:
	case <-ctx.Done():
		t.Fatalf("the second model call never came:\n%s", logs.String())
	}
	a.Process.Signal(syscall.SIGKILL)
	a.Wait()
	start()
	var res TurnResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	if res.Final == nil || fmt.Sprint(res.Final.Output) != "42" || len(res.Steps) != 3 || res.Steps[0].Observation != "42" || res.Steps[1].Observation != "2" {
		t.Fatalf("result %+v", res)
	}
	if completed, aborted := model.calls(); completed != 3 || aborted != 1 {
		t.Errorf("%d model calls answered, %d aborted; want 3 (none repeated) and 1 (the one in flight)", completed, aborted)
	}
	if n := strings.Count(logs.String(), "msg=\"tool called\""); n != 2 {
		t.Errorf("%d tool executions, want 2 (none repeated):\n%s", n, logs.String())
	}
}

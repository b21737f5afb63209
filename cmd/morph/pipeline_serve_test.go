package main

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/internal/testenv"
	"github.com/morphhost/morph/pipeline"
)

// Beyond loopback without a token, serve refuses to start (exit 2) and
// says which variable to set; bad --pipeline flags are usage errors.
func TestPipelineServeRefuses(t *testing.T) {
	dot := examples + "release-review.dot"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "0.0.0.0:0", "--token-env", "MORPH_TEST_UNSET_TOKEN", "--pipeline", "r=" + dot}, "$MORPH_TEST_UNSET_TOKEN"},
		{[]string{"--pipeline", "r"}, "NAME=FILE.dot"},
		{[]string{"--pipeline", "r=" + dot, "--pipeline", "r=" + dot}, "given twice"},
		{[]string{"--pipeline", "r=no-such.dot"}, "no-such.dot"},
		{nil, "nothing to serve"},
		{[]string{"--pipeline", "r=" + dot, "--max-runs", "0"}, "--max-runs"},
		{[]string{"--pipeline", "r=" + dot, "--max-kept-runs", "0"}, "--max-kept-runs"},
		{[]string{"--pipeline", "r=" + dot, "--ring-kb", "-1"}, "--ring-kb"},
		{[]string{"--pipeline", "r=" + dot, "--max-streams", "0"}, "--max-streams"},
		{[]string{"--pipeline", "r=" + dot, "--keep-events", "0"}, "--keep-events"},
		{[]string{"--pipeline", "r=" + dot, "--write-timeout", "0s"}, "--write-timeout"},
	} {
		code, _, stderr := morph(t, "", append([]string{"pipeline", "serve"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// A served example pipeline runs over HTTP: started by name, its gate
// answered, to success; a signal stops the server with exit 0.
func TestPipelineServeRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr testenv.Buffer
	exited := make(chan int, 1)
	runs := t.TempDir()
	go func() {
		exited <- run(ctx, []string{"pipeline", "serve", "--config", examples + "release-review.toml", "--http", "127.0.0.1:0",
			"--runs", runs, "--pipeline", "review=" + examples + "release-review.dot"}, strings.NewReader(""), &testenv.Buffer{}, &stderr)
	}()
	addr := regexp.MustCompile(`serving 1 pipeline at (http://[0-9.:]+/)`)
	var base string
	waitFor(t, "the server's address", func() bool {
		if m := addr.FindStringSubmatch(stderr.String()); m != nil {
			base = m[1]
			return true
		}
		return false
	})
	call := func(method, path, body string, out any) int {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}
	var info struct{ ID string }
	if code := call("POST", "v1/runs", `{"name":"review"}`, &info); code != http.StatusCreated {
		t.Fatalf("start: %d; stderr %s", code, stderr.String())
	}
	var qs struct {
		Questions []struct{ QID, Text string }
	}
	waitFor(t, "the gate's question", func() bool {
		call("GET", "v1/runs/"+info.ID+"/questions", "", &qs)
		return len(qs.Questions) == 1
	})
	if qs.Questions[0].Text != "Publish these notes?" {
		t.Errorf("question %+v", qs.Questions[0])
	}
	if code := call("POST", "v1/runs/"+info.ID+"/questions/"+qs.Questions[0].QID+"/answer", `{"choice":"A"}`, nil); code != http.StatusOK {
		t.Fatalf("answer: %d", code)
	}
	var st struct {
		State  string
		Active bool
		Path   []string `json:"completed_nodes"`
	}
	waitFor(t, "the run's end", func() bool { call("GET", "v1/runs/"+info.ID, "", &st); return !st.Active })
	if st.State != pipeline.RunSuccess || !slices.Contains(st.Path, "publish") {
		t.Errorf("status %+v; stderr %s", st, stderr.String())
	}
	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Errorf("exit %d after the signal: %s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop within a minute of the signal")
	}
}

// waitFor polls cond for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
	}
}

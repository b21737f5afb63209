package serve

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/morphhost/morph/internal/renderproc"
	"github.com/morphhost/morph/pipeline"
)

// fakeRender writes a morph-render stand-in: a shell script that runs
// body, then keeps its request in dir/req.json and writes an SVG.
func fakeRender(t *testing.T, dir, body string) string {
	t.Helper()
	prog := filepath.Join(dir, "morph-render")
	script := "#!/bin/sh\n" + body + "\ncat > '" + dir + "/req.json'\nprintf '<?xml version=\"1.0\"?><svg>drawn</svg>'\n"
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return prog
}

// get returns the status, Content-Type and body of a GET.
func (f *fixture) get(path string) (int, string, string) {
	f.t.Helper()
	resp, err := http.Get(f.http.URL + path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// GET .../graph draws the run with morph-render (its statuses so far, the
// node it waits at) and serves the SVG, without scripts; ?format=dot is
// the source; another format is 400.
func TestServeGraph(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, Options{RenderProgram: fakeRender(t, dir, "")})
	id := f.start()
	f.question(id)
	code, ctype, body := f.get("/v1/runs/" + id + "/graph")
	if code != http.StatusOK || ctype != "image/svg+xml" || body != `<?xml version="1.0"?><svg>drawn</svg>` {
		t.Fatalf("graph: %d %s %q", code, ctype, body)
	}
	var req renderproc.Request
	b, err := os.ReadFile(filepath.Join(dir, "req.json"))
	if err == nil {
		err = json.Unmarshal(b, &req)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(req.DOT, `"Ship it?"`) || req.Statuses["start"] != string(pipeline.StatusSuccess) || req.Next != "ask" || req.Timeout != DefaultRenderTimeout {
		t.Errorf("render request: statuses %v, next %q, timeout %s, DOT:\n%s", req.Statuses, req.Next, req.Timeout, req.DOT)
	}
	if code, ctype, body := f.get("/v1/runs/" + id + "/graph?format=dot"); code != http.StatusOK || !strings.HasPrefix(ctype, "text/vnd.graphviz") || body != gateDOT {
		t.Errorf("graph?format=dot: %d %s %q", code, ctype, body)
	}
	if code, _, body := f.get("/v1/runs/" + id + "/graph?format=%1b[2Jpng"); code != http.StatusBadRequest || strings.Contains(body, "\x1b") {
		t.Errorf("graph?format=png: %d %q, want 400, escaped", code, body)
	}
}

// A drawing is bounded: morph-render is killed at RenderTimeout (504),
// MaxRenders run at once (one more is 429, counted), and without a
// morph-render the answer is 503 naming ?format=dot.
func TestServeGraphBounded(t *testing.T) {
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	started := filepath.Join(dir, "started")
	blocking := fakeRender(t, dir, ": > '"+started+"'; while [ ! -e '"+release+"' ]; do sleep 0.02; done")
	f := newFixture(t, Options{RenderProgram: blocking, MaxRenders: 1})
	id := f.start()
	f.question(id)
	var wg sync.WaitGroup
	wg.Add(1)
	first := 0
	go func() {
		defer wg.Done()
		first, _, _ = f.get("/v1/runs/" + id + "/graph")
	}()
	poll(t, "the first drawing", func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	if code, _, _ := f.get("/v1/runs/" + id + "/graph"); code != http.StatusTooManyRequests {
		t.Errorf("a second drawing while the first runs: %d, want 429", code)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if first != http.StatusOK {
		t.Errorf("the first drawing: %d, want 200", first)
	}
	if n := f.srv.Counters().RendersRefused; n != 1 {
		t.Errorf("RendersRefused %d, want 1", n)
	}

	slow := newFixture(t, Options{RenderProgram: fakeRender(t, t.TempDir(), "sleep 60"), RenderTimeout: 200 * time.Millisecond})
	id = slow.start()
	slow.question(id)
	start := time.Now()
	if code, _, body := slow.get("/v1/runs/" + id + "/graph"); code != http.StatusGatewayTimeout || !strings.Contains(body, "did not finish") {
		t.Errorf("a drawing past its timeout: %d %s, want 504", code, body)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the killed drawing answered after %s", d)
	}

	t.Setenv(renderproc.EnvVar, filepath.Join(t.TempDir(), "none"))
	none := newFixture(t, Options{})
	id = none.start()
	none.question(id)
	if code, _, body := none.get("/v1/runs/" + id + "/graph"); code != http.StatusServiceUnavailable || !strings.Contains(body, "format=dot") {
		t.Errorf("no morph-render: %d %s, want 503 naming format=dot", code, body)
	}
}

// GET .../context is the running run's context as it is now (source
// live: the gate it waits at is current_node, which no checkpoint has
// yet), and the checkpoint's once the run is over.
func TestServeLiveContext(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start()
	q := f.question(id)
	var got struct {
		Context map[string]any
		Source  string
	}
	if code := f.do("GET", "/v1/runs/"+id+"/context", nil, &got); code != http.StatusOK || got.Source != "live" || got.Context[pipeline.KeyCurrentNode] != "ask" {
		t.Fatalf("context while at the gate: %d %+v; want live, current_node ask", code, got)
	}
	cp, err := pipeline.LoadCheckpoint(filepath.Join(f.root, id))
	if err != nil {
		t.Fatal(err)
	}
	if cp.Context[pipeline.KeyCurrentNode] == "ask" {
		t.Fatalf("the checkpoint already has current_node ask: the test cannot tell live from checkpoint")
	}
	if code := f.do("POST", "/v1/runs/"+id+"/questions/"+q.QID+"/answer", map[string]string{"choice": "Y"}, nil); code != http.StatusOK {
		t.Fatalf("answer: %d", code)
	}
	poll(t, "the run's end", func() bool { return f.status(id).State == pipeline.RunSuccess })
	if code := f.do("GET", "/v1/runs/"+id+"/context", nil, &got); code != http.StatusOK || got.Source != "checkpoint" || got.Context[pipeline.KeyCurrentNode] != "done" {
		t.Errorf("context after the run: %d %+v; want the checkpoint's", code, got)
	}
}

package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm/scripted"
	"github.com/morphhost/morph/pipeline"
)

// gateDOT asks a human whether to ship, then runs the branch chosen.
const gateDOT = `digraph release {
  start [shape=Mdiamond]
  ask   [shape=hexagon, label="Ship it?"]
  ship  [prompt="Ship it"]
  hold  [prompt="Hold it"]
  done  [shape=Msquare]
  start -> ask
  ask -> ship [label="[Y] Yes"]
  ask -> hold [label="[N] No"]
  ship -> done
  hold -> done
}`

// final is a scripted model reply that ends its agent run with output.
func final(output string) string {
	b, _ := json.Marshal(map[string]any{"type": "final", "final": map[string]any{"thought": "t", "output": output}})
	return string(b)
}

// newRunner is a runner on a scripted model that answers each agent stage.
func newRunner() (*pipeline.Runner, error) {
	model := scripted.New(scripted.Texts(final("done"), final("done")))
	return &pipeline.Runner{Backend: &pipeline.EngineBackend{Engine: engine.New(model, engine.NewRegistry())}}, nil
}

// fixture is a server on 127.0.0.1 serving gateDOT as "release".
type fixture struct {
	t    *testing.T
	srv  *Server
	http *httptest.Server
	root string
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	return newFixtureDOT(t, opts, gateDOT)
}

// newFixtureDOT is a server serving dot as "release".
func newFixtureDOT(t *testing.T, opts Options, dot string) *fixture {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "release.dot")
	if err := os.WriteFile(file, []byte(dot), 0o644); err != nil {
		t.Fatal(err)
	}
	if opts.RunsRoot == "" {
		opts.RunsRoot = filepath.Join(dir, "runs")
	}
	opts.Pipelines = map[string]string{"release": file}
	opts.NewRunner = newRunner
	opts.Loopback = true
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	f := &fixture{t: t, srv: srv, http: hs, root: opts.RunsRoot}
	t.Cleanup(func() {
		hs.CloseClientConnections()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		hs.Close()
	})
	return f
}

// do sends a request with a JSON body (nil: none) and decodes a JSON
// answer into out (nil: not decoded); it returns the status.
func (f *fixture) do(method, path string, body, out any, header ...string) int {
	f.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, f.http.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			f.t.Fatalf("%s %s: %v in %s", method, path, err, data)
		}
	}
	return resp.StatusCode
}

// start starts "release" and returns its id.
func (f *fixture) start() string {
	f.t.Helper()
	var info RunInfo
	if code := f.do("POST", "/v1/runs", map[string]string{"name": "release"}, &info); code != http.StatusCreated {
		f.t.Fatalf("start: %d", code)
	}
	return info.ID
}

// poll calls cond until it holds, for at most a minute.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// question waits for the run's pending question.
func (f *fixture) question(id string) PendingQuestion {
	f.t.Helper()
	var qs struct{ Questions []PendingQuestion }
	poll(f.t, "a pending question", func() bool {
		f.do("GET", "/v1/runs/"+id+"/questions", nil, &qs)
		return len(qs.Questions) > 0
	})
	return qs.Questions[0]
}

// status returns the run's status.
func (f *fixture) status(id string) Status {
	f.t.Helper()
	var st Status
	if code := f.do("GET", "/v1/runs/"+id, nil, &st); code != http.StatusOK {
		f.t.Fatalf("status: %d", code)
	}
	return st
}

// ended waits until the run is no longer running and returns its status.
func (f *fixture) ended(id string) Status {
	f.t.Helper()
	var st Status
	poll(f.t, "the run's end", func() bool { st = f.status(id); return !st.Active })
	return st
}

// sse is an event of a stream.
type sse struct {
	id, event, data string
}

// sseStream reads a stream's events (a Server-Sent Events parser: id:,
// event:, data: lines, a blank line ends an event, ':' lines are comments).
type sseStream struct {
	resp   *http.Response
	events chan sse
}

// events opens the run's stream, resuming after lastID when set.
func (f *fixture) events(id, lastID string) *sseStream {
	f.t.Helper()
	req, _ := http.NewRequest("GET", f.http.URL+"/v1/runs/"+id+"/events", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		f.t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sseStream{resp: resp, events: make(chan sse, 64)}
	go readSSE(resp.Body, s.events)
	f.t.Cleanup(func() { resp.Body.Close() })
	return s
}

// readSSE parses events from r into out, closing it at the stream's end.
func readSSE(r io.Reader, out chan<- sse) {
	defer close(out)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var ev sse
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.event != "" || ev.data != "" {
				out <- ev
			}
			ev = sse{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data += line[6:]
		}
	}
}

// until reads events up to and including one of kind, failing at the
// stream's end or after a minute.
func (s *sseStream) until(t *testing.T, kind string) []sse {
	t.Helper()
	var got []sse
	timeout := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("the stream ended before %s; got %v", kind, got)
			}
			got = append(got, ev)
			if ev.event == kind {
				return got
			}
		case <-timeout:
			t.Fatalf("no %s event within a minute; got %v", kind, got)
		}
	}
}

// rest reads events to the stream's end.
func (s *sseStream) rest(t *testing.T) []sse {
	t.Helper()
	var got []sse
	timeout := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return got
			}
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("the stream did not end within a minute; got %v", got)
		}
	}
}

func kinds(evs []sse) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.event)
	}
	return out
}

// A run of a served pipeline with a human gate: the stream shows the
// question, the question is listed, the answer routes the run to the
// branch chosen, the stream ends with the completion and the run's end,
// and the checkpoint has the path.
func TestServeGateRun(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start()
	stream := f.events(id, "")
	stream.until(t, string(pipeline.EventInterviewStarted))
	q := f.question(id)
	if q.NodeID != "ask" || q.Text != "Ship it?" || len(q.Choices) != 2 {
		t.Fatalf("question %+v", q)
	}
	if code := f.do("POST", "/v1/runs/"+id+"/questions/"+q.QID+"/answer", map[string]string{"choice": "N"}, nil); code != http.StatusOK {
		t.Fatalf("answer: %d", code)
	}
	if code := f.do("POST", "/v1/runs/"+id+"/questions/"+q.QID+"/answer", map[string]string{"choice": "N"}, nil); code != http.StatusConflict {
		t.Errorf("a second answer: %d, want 409", code)
	}
	rest := stream.rest(t)
	ks := kinds(rest)
	if len(ks) < 2 || ks[len(ks)-2] != string(pipeline.EventPipelineCompleted) || ks[len(ks)-1] != KindRunEnded {
		t.Fatalf("the stream ended with %v, want pipeline.completed then run.ended", ks)
	}
	var end Event
	if err := json.Unmarshal([]byte(rest[len(rest)-1].data), &end); err != nil || end.State != pipeline.RunSuccess {
		t.Fatalf("run.ended %s (%v)", rest[len(rest)-1].data, err)
	}
	var cp struct {
		Completed []string `json:"completed_nodes"`
	}
	if code := f.do("GET", "/v1/runs/"+id+"/checkpoint", nil, &cp); code != http.StatusOK {
		t.Fatalf("checkpoint: %d", code)
	}
	if !slices.Contains(cp.Completed, "hold") || slices.Contains(cp.Completed, "ship") {
		t.Errorf("completed_nodes %v, want the hold branch only", cp.Completed)
	}
	if st := f.status(id); st.State != pipeline.RunSuccess || st.PendingQuestions != 0 {
		t.Errorf("status %+v", st)
	}
	// The spec's paths are the same handlers.
	var st Status
	if code := f.do("GET", "/pipelines/"+id, nil, &st); code != http.StatusOK || st.ID != id || st.Links["events"] != "/pipelines/"+id+"/events" {
		t.Errorf("/pipelines/%s: %d %+v", id, code, st)
	}
}

// An answer that names no choice is refused (422), and one to no such
// question is 409; the gate still waits.
func TestServeBadAnswer(t *testing.T) {
	yesNo := strings.Replace(gateDOT, `label="Ship it?"`, `label="Ship it?", human.type="yes_no"`, 1)
	for _, c := range []struct {
		name, dot string
		bodies    map[string]int
	}{
		{"multiple choice", gateDOT, map[string]int{`{"choice":"maybe"}`: 422, `{}`: 422, `{"choice":"Y","extra":1}`: 400, `not json`: 400,
			`{"text":"hello"}`: 422, `{"value":"timeout"}`: 422, `{"value":"maybe"}`: 422}},
		// What the gate would fail on is refused before it is taken: a
		// client's typo does not end the run, nor can a client time it out.
		{"yes_no", yesNo, map[string]int{`{"value":"maybe"}`: 422, `{"text":"perhaps"}`: 422, `{"value":"timeout"}`: 422, `{"choice":"Q"}`: 422}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixtureDOT(t, Options{}, c.dot)
			id := f.start()
			q := f.question(id)
			for body, want := range c.bodies {
				req, _ := http.NewRequest("POST", f.http.URL+"/v1/runs/"+id+"/questions/"+q.QID+"/answer", strings.NewReader(body))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("answer %s: %d, want %d", body, resp.StatusCode, want)
				}
			}
			if code := f.do("POST", "/v1/runs/"+id+"/questions/nope-9/answer", map[string]string{"choice": "Y"}, nil); code != http.StatusConflict {
				t.Errorf("an answer to no question: %d, want 409", code)
			}
			if got := f.question(id); got.QID != q.QID {
				t.Errorf("pending %q, want %q still", got.QID, q.QID)
			}
			if code := f.do("POST", "/v1/runs/"+id+"/questions/"+q.QID+"/answer", map[string]string{"value": "yes"}, nil); code != http.StatusOK {
				t.Fatalf("a good answer after the refusals: %d", code)
			}
			if st := f.ended(id); st.State != "success" {
				t.Errorf("the run ended %q (%s), want success", st.State, st.FailureReason)
			}
		})
	}
}

// A stream resumed with Last-Event-ID continues after that event: nothing
// repeated, nothing lost.
func TestServeLastEventID(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start()
	first := f.events(id, "")
	head := first.until(t, string(pipeline.EventInterviewStarted))
	first.resp.Body.Close()
	q := f.question(id)
	f.do("POST", "/v1/runs/"+id+"/questions/"+q.QID+"/answer", map[string]string{"choice": "Y"}, nil)
	f.ended(id)
	all := f.events(id, "").rest(t)
	last := head[len(head)-1].id
	tail := f.events(id, last).rest(t)
	joined := append(slices.Clone(head), tail...)
	if len(joined) != len(all) {
		t.Fatalf("head %v + tail %v, want %v", kinds(head), kinds(tail), kinds(all))
	}
	for i := range all {
		if joined[i].id != all[i].id || joined[i].data != all[i].data {
			t.Fatalf("event %d: %+v, want %+v", i, joined[i], all[i])
		}
	}
	for i, e := range all {
		if e.id != strconv.Itoa(i+1) {
			t.Fatalf("event %d has id %q: ids are 1, 2, ...", i, e.id)
		}
	}
	if code := f.do("GET", "/v1/runs/"+id+"/events", nil, nil, "Last-Event-ID", "x"); code != http.StatusBadRequest {
		t.Errorf("Last-Event-ID x: %d, want 400", code)
	}
}

// A stream resumed from an event the ring no longer holds gets a gap
// event naming the first it holds, then those.
func TestServeGap(t *testing.T) {
	f := newFixture(t, Options{RingEvents: 3})
	id := f.start()
	f.question(id)
	r, _ := f.srv.get(id)
	for i := range 10 {
		r.events.add(Event{Kind: "note", RunID: id, Message: strconv.Itoa(i)})
	}
	s := f.events(id, "1")
	got := s.until(t, "note")
	if got[0].event != KindGap || !strings.Contains(got[0].data, `"missed_after":1`) || got[0].id != "" {
		t.Fatalf("first event %+v, want a gap without an id", got[0])
	}
	if n, _ := r.events.size(); n != 3 {
		t.Errorf("ring holds %d events, want 3", n)
	}
	// An id the run never gave (another server's numbering): a gap, then
	// the events held, not a stream waiting for ever.
	got = f.events(id, "999999").until(t, "note")
	if got[0].event != KindGap || len(got) != 2 || got[1].id == "" {
		t.Fatalf("after an unknown id: %+v", got)
	}
}

// Canceling a run at its gate checkpoints it canceled; a resume asks
// again, and the answer finishes it. A new server on the same directory
// knows the run and resumes it too.
func TestServeCancelResume(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start()
	asked := f.question(id)
	if code := f.do("POST", "/v1/runs/"+id+"/cancel", nil, nil); code != http.StatusAccepted {
		t.Fatalf("cancel: %d", code)
	}
	if st := f.ended(id); st.State != pipeline.RunCanceled || st.NextNode != "ask" || st.PendingQuestions != 0 {
		t.Fatalf("after cancel: %+v", st)
	}
	if code := f.do("POST", "/v1/runs/"+id+"/questions/"+asked.QID+"/answer", map[string]string{"choice": "Y"}, nil); code != http.StatusConflict {
		t.Errorf("an answer to the canceled run's question: %d, want 409", code)
	}
	if code := f.do("POST", "/v1/runs/"+id+"/cancel", nil, nil); code != http.StatusConflict {
		t.Errorf("cancel of a stopped run: %d, want 409", code)
	}
	// The stream of the first part ends with run.ended canceled.
	if evs := f.events(id, "").rest(t); evs[len(evs)-1].event != KindRunEnded || !strings.Contains(evs[len(evs)-1].data, `"state":"canceled"`) {
		t.Fatalf("stream after cancel: %v", kinds(evs))
	}

	// Restart: a new server on the same runs directory.
	g := newFixture(t, Options{RunsRoot: f.root})
	var list struct {
		Runs []RunInfo
	}
	g.do("GET", "/v1/runs", nil, &list)
	if len(list.Runs) != 1 || list.Runs[0].ID != id || list.Runs[0].State != pipeline.RunCanceled || list.Runs[0].Name != "release" {
		t.Fatalf("runs after restart: %+v", list.Runs)
	}
	if code := g.do("POST", "/v1/runs/"+id+"/resume", nil, nil); code != http.StatusAccepted {
		t.Fatalf("resume: %d", code)
	}
	stream := g.events(id, "")
	q := g.question(id)
	if q.NodeID != "ask" {
		t.Fatalf("asked %+v after resume", q)
	}
	g.do("POST", "/v1/runs/"+id+"/questions/"+q.QID+"/answer", map[string]string{"choice": "Yes"}, nil)
	if ks := kinds(stream.rest(t)); ks[0] != KindRunResumed || ks[len(ks)-1] != KindRunEnded {
		t.Errorf("resumed stream %v", ks)
	}
	if st := g.ended(id); st.State != pipeline.RunSuccess || !slices.Contains(st.Path, "ship") {
		t.Errorf("after resume: %+v", st)
	}
	if code := g.do("POST", "/v1/runs/"+id+"/resume", nil, nil); code != http.StatusConflict {
		t.Errorf("resume of a finished run: %d, want 409", code)
	}
}

// Shutdown cancels the running runs: they checkpoint canceled, resumable.
func TestServeShutdownCheckpoints(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start()
	f.question(id)
	stream := f.events(id, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	stream.rest(t) // ends
	cp, err := pipeline.LoadCheckpoint(filepath.Join(f.root, id))
	if err != nil || cp.State != pipeline.RunCanceled {
		t.Fatalf("checkpoint after shutdown: %+v, %v", cp, err)
	}
	if code := f.do("POST", "/v1/runs", map[string]string{"name": "release"}, nil); code != http.StatusServiceUnavailable {
		t.Errorf("start after shutdown: %d, want 503", code)
	}
}

// Beyond loopback a token is required; with one, a request without it or
// with another is 401, and /healthz needs none.
func TestServeAuth(t *testing.T) {
	_, err := New(Options{RunsRoot: t.TempDir(), NewRunner: newRunner})
	if !errors.Is(err, ErrNoToken) {
		t.Fatalf("New beyond loopback without a token: %v, want ErrNoToken", err)
	}
	f := newFixture(t, Options{Token: "s3cret"})
	for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "s3cret"}} {
		if code := f.do("GET", "/v1/runs", nil, nil, h...); code != http.StatusUnauthorized {
			t.Errorf("GET /v1/runs with %v: %d, want 401", h, code)
		}
	}
	if code := f.do("GET", "/v1/runs", nil, nil, "Authorization", "Bearer s3cret"); code != http.StatusOK {
		t.Errorf("with the token: %d", code)
	}
	if code := f.do("GET", "/healthz", nil, nil); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
}

// A browser's request from another origin is refused; a loopback one is
// not.
func TestServeOrigin(t *testing.T) {
	f := newFixture(t, Options{})
	if code := f.do("GET", "/v1/runs", nil, nil, "Origin", "https://evil.example"); code != http.StatusForbidden {
		t.Errorf("cross-origin: %d, want 403", code)
	}
	if code := f.do("GET", "/v1/runs", nil, nil, "Origin", "http://127.0.0.1:5173"); code != http.StatusOK {
		t.Errorf("loopback origin: %d, want 200", code)
	}
	// DNS rebinding: a same-origin GET carries no Origin, but its Host is
	// the attacker's name.
	req, _ := http.NewRequest("GET", f.http.URL+"/v1/runs", nil)
	req.Host = "rebound.example:7140"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a Host that is not loopback: %d, want 403", resp.StatusCode)
	}
}

// Bodies past the cap are refused (413, counted); inline DOT only with
// AllowDOT; DOT that does not validate is 422 with its diagnostics.
func TestServeRequests(t *testing.T) {
	f := newFixture(t, Options{MaxBodyBytes: 1024})
	big := map[string]string{"name": "release", "goal": strings.Repeat("x", 2048)}
	if code := f.do("POST", "/v1/runs", big, nil); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the cap: %d, want 413", code)
	}
	if n := f.srv.Counters().BodiesRefused; n != 1 {
		t.Errorf("BodiesRefused %d, want 1", n)
	}
	if code := f.do("POST", "/v1/runs", map[string]string{"dot": gateDOT}, nil); code != http.StatusForbidden {
		t.Errorf("inline DOT without AllowDOT: %d, want 403", code)
	}
	for body, want := range map[string]int{
		`{"name":"nope"}`: 404, `{"name":"release","dot":"digraph{}"}`: 400, `{}`: 400,
		`{"name":"release","run_id":"../x"}`: 400, `{"name":"release","unknown":1}`: 400,
	} {
		req, _ := http.NewRequest("POST", f.http.URL+"/v1/runs", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("POST %s: %d, want %d", body, resp.StatusCode, want)
		}
	}
	if code := f.do("GET", "/v1/runs/nope", nil, nil); code != http.StatusNotFound {
		t.Errorf("GET an unknown run: %d, want 404", code)
	}

	d := newFixture(t, Options{AllowDOT: true})
	var bad apiError
	req, _ := http.NewRequest("POST", d.http.URL+"/v1/runs", strings.NewReader(`{"dot":"digraph p { a -> b }"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&bad)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity || len(bad.Diagnostics) == 0 {
		t.Errorf("DOT without a start node: %d %+v, want 422 with diagnostics", resp.StatusCode, bad)
	}
	var info RunInfo
	if code := d.do("POST", "/v1/runs", map[string]string{"dot": gateDOT, "run_id": "inline-1"}, &info); code != http.StatusCreated || info.ID != "inline-1" {
		t.Fatalf("inline DOT with AllowDOT: %d %+v", code, info)
	}
	if code := d.do("POST", "/v1/runs", map[string]string{"dot": gateDOT, "run_id": "inline-1"}, nil); code != http.StatusConflict {
		t.Errorf("a second run of the same id: %d, want 409", code)
	}
	// The attractor spec's bodies: {"source"} starts, {"answer"} answers.
	if code := d.do("POST", "/pipelines", map[string]string{"source": gateDOT, "run_id": "spec-1"}, &info); code != http.StatusCreated {
		t.Fatalf("POST /pipelines {source}: %d", code)
	}
	q := d.question("spec-1")
	if code := d.do("POST", "/pipelines/spec-1/questions/"+q.QID+"/answer", map[string]string{"answer": "Y", "choice": "Y"}, nil); code != http.StatusBadRequest {
		t.Errorf("both answer and choice: %d, want 400", code)
	}
	if code := d.do("POST", "/pipelines/spec-1/questions/"+q.QID+"/answer", map[string]string{"answer": "No"}, nil); code != http.StatusOK {
		t.Fatalf("answer {answer}: %d", code)
	}
	if st := d.ended("spec-1"); st.State != pipeline.RunSuccess || !slices.Contains(st.Path, "hold") {
		t.Errorf("spec run: %+v", st)
	}
}

// Files of a run are served; paths out of the run directory are not
// (.., absolute, a symbolic link out).
func TestServeArtifacts(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start()
	f.question(id)
	dir := filepath.Join(f.root, id)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	var list struct{ Artifacts []Artifact }
	f.do("GET", "/v1/runs/"+id+"/artifacts", nil, &list)
	if !slices.ContainsFunc(list.Artifacts, func(a Artifact) bool { return a.Path == pipeline.SourceFile }) ||
		slices.ContainsFunc(list.Artifacts, func(a Artifact) bool { return a.Path == "link" }) {
		t.Errorf("artifacts %+v: want pipeline.dot, not the link", list.Artifacts)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(f.http.URL + "/v1/runs/" + id + "/artifacts/" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(pipeline.SourceFile); code != http.StatusOK || body != gateDOT {
		t.Errorf("pipeline.dot: %d %q", code, body)
	}
	for path, want := range map[string]int{
		"..%2F..%2Fsecret": 400, "%2Fetc%2Fpasswd": 400, "link": 404, "nope": 404, "..%5Cx": 400, ".lock": 404,
	} {
		if code, body := get(path); code != want || strings.Contains(body, "SECRET") {
			t.Errorf("artifact %s: %d %q, want %d", path, code, body, want)
		}
	}
	// Unescaped, the client's path is cleaned before it is sent or the
	// server redirects: never the file.
	if code, body := get("../../../../../../etc/passwd"); code == http.StatusOK && strings.Contains(body, "root:") {
		t.Errorf("../ reached /etc/passwd")
	}
}

// At MaxRuns running, another start is refused with 429 and counted.
func TestServeMaxRuns(t *testing.T) {
	f := newFixture(t, Options{MaxRuns: 1})
	id := f.start()
	f.question(id)
	if code := f.do("POST", "/v1/runs", map[string]string{"name": "release"}, nil); code != http.StatusTooManyRequests {
		t.Fatalf("a second run: %d, want 429", code)
	}
	if n := f.srv.Counters().RunsRefused; n != 1 {
		t.Errorf("RunsRefused %d, want 1", n)
	}
	f.do("POST", "/v1/runs/"+id+"/cancel", nil, nil)
	f.ended(id)
	f.start() // room again
}

// A stream that never reads does not hold the run: events keep being
// added, the ring stays within its bounds, and the stream is dropped
// (counted) once its writes time out; past MaxSubscribers a stream is
// refused.
func TestServeSlowSubscriber(t *testing.T) {
	f := newFixture(t, Options{RingEvents: 64, RingBytes: 64 << 10, WriteTimeout: 200 * time.Millisecond, MaxSubscribers: 2})
	id := f.start()
	f.question(id)
	r, _ := f.srv.get(id)
	// A client that sends its request and never reads.
	conn, err := (&net.Dialer{}).Dial("tcp", f.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/runs/%s/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", id)
	poll(t, "the stream's subscription", func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.subs == 1 })
	msg := strings.Repeat("m", 4000)
	for i := range 5000 { // 20 MB: more than any socket buffers
		r.events.add(Event{Kind: "note", RunID: id, Message: msg + strconv.Itoa(i)})
	}
	if n, b := r.events.size(); n > 64 || b > 64<<10 {
		t.Errorf("ring %d events, %d bytes: over its bounds", n, b)
	}
	poll(t, "the slow stream's drop", func() bool { return f.srv.Counters().StreamsDropped >= 1 })
	poll(t, "the slow stream's end", func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.subs == 0 })

	a, b := f.events(id, ""), f.events(id, "")
	if code := f.do("GET", "/v1/runs/"+id+"/events", nil, nil); code != http.StatusTooManyRequests {
		t.Errorf("a third stream: %d, want 429", code)
	}
	a.resp.Body.Close()
	b.resp.Body.Close()
}

// A thousand streams of one run all see it to its end.
func TestServeManyStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("a thousand connections")
	}
	f := newFixture(t, Options{})
	id := f.start()
	f.question(id)
	const n = 1000
	tr := &http.Transport{MaxIdleConnsPerHost: -1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	ends := make(chan string, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get(f.http.URL + "/v1/runs/" + id + "/events")
			if err != nil {
				ends <- err.Error()
				return
			}
			defer resp.Body.Close()
			evs := make(chan sse, 16)
			go readSSE(resp.Body, evs)
			last := ""
			for ev := range evs {
				last = ev.event
			}
			ends <- last
		}()
	}
	r, _ := f.srv.get(id)
	poll(t, "a thousand streams", func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.subs == n })
	q := f.question(id)
	f.do("POST", "/v1/runs/"+id+"/questions/"+q.QID+"/answer", map[string]string{"choice": "Y"}, nil)
	wg.Wait()
	close(ends)
	for last := range ends {
		if last != KindRunEnded {
			t.Fatalf("a stream ended with %q, want run.ended", last)
		}
	}
}

// An idle stream gets a ping comment now and then, and outlives the
// requests' read deadline; an event whose kind would break the framing
// goes out under a plain name.
func TestServePingAndFraming(t *testing.T) {
	// The write timeout is long enough for a loaded machine: a stream is
	// not dropped between re-arming its deadline and writing.
	f := newFixture(t, Options{PingInterval: 20 * time.Millisecond, WriteTimeout: time.Second})
	id := f.start()
	f.question(id)
	r, _ := f.srv.get(id)
	r.events.add(Event{Kind: "x\ndata: forged", RunID: id})
	resp, err := http.Get(f.http.URL + "/v1/runs/" + id + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	pings := 0
	for pings < 75 { // 1.5 s at least: past the read deadline
		if !sc.Scan() {
			t.Fatalf("the stream ended after %d pings: %v", pings, sc.Err())
		}
		lines = append(lines, sc.Text())
		if sc.Text() == ": ping" {
			pings++
		}
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "data: forged") || strings.HasPrefix(l, "event: x") {
			t.Errorf("a kind broke the framing: %q", l)
		}
	}
	if !slices.Contains(lines, "event: event") {
		t.Errorf("no event under the plain name in %q", lines)
	}
}

// A body that never arrives in full does not hold its handler, nor its
// connection after a refusal that did not read it: the request ends once
// the read deadline passes.
func TestServeSlowBody(t *testing.T) {
	f := newFixture(t, Options{WriteTimeout: 200 * time.Millisecond, Token: "s3cret"})
	for _, tc := range []struct{ auth, want string }{{"Bearer s3cret", " 400 "}, {"Bearer wrong", " 401 "}} {
		conn, err := (&net.Dialer{}).Dial("tcp", f.http.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: %s\r\nContent-Length: 100\r\n\r\n{\"name\":", tc.auth)
		conn.SetReadDeadline(time.Now().Add(time.Minute))
		status, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.Contains(status, tc.want) {
			t.Fatalf("%s, a body that stops: %q, %v; want%s", tc.auth, status, err, tc.want)
		}
	}
}

// A client that stops reading a file is dropped within WriteTimeout
// (counted), not waited on: the handler and its open file are let go.
func TestServeSlowReader(t *testing.T) {
	f := newFixture(t, Options{WriteTimeout: 200 * time.Millisecond})
	id := f.start()
	f.question(id)
	big, err := os.Create(filepath.Join(f.root, id, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: far past what the socket buffers hold, no disk used.
	if err := big.Truncate(256 << 20); err != nil {
		t.Fatal(err)
	}
	big.Close()
	conn, err := net.Dial("tcp", f.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	if _, err := fmt.Fprintf(conn, "GET /v1/runs/%s/artifacts/big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", id); err != nil {
		t.Fatal(err)
	}
	poll(t, "the slow reader's drop", func() bool { return f.srv.Counters().ResponsesDropped >= 1 })
	if got := f.srv.Counters().StreamsDropped; got != 0 {
		t.Errorf("StreamsDropped %d: a response is not a stream", got)
	}
}

// Past MaxKeptRuns a start is refused (429, counted), and the runs kept
// are untouched.
func TestServeMaxKeptRuns(t *testing.T) {
	f := newFixture(t, Options{MaxKeptRuns: 1})
	id := f.start()
	if code := f.do("POST", "/v1/runs", map[string]string{"name": "release"}, nil); code != http.StatusTooManyRequests {
		t.Fatalf("a start past --max-kept-runs: %d, want 429", code)
	}
	if c := f.srv.Counters(); c.KeptRefused != 1 || c.RunsRefused != 0 {
		t.Errorf("counters %+v, want one kept_refused", c)
	}
	if st := f.status(id); st.State != "running" {
		t.Errorf("the kept run is %q", st.State)
	}
}

// A run's error is cut once, where it is kept: the stream of a forgotten
// run and RunInfo show it cut.
func TestServeErrorTextCut(t *testing.T) {
	f := newFixture(t, Options{})
	r := &run{id: "long", dir: filepath.Join(f.root, "long"), iv: NewPendingInterviewer(), events: newEventLog(16, 1<<20), active: true}
	f.srv.mu.Lock()
	f.srv.runs[r.id], f.srv.running = r, f.srv.running+1
	f.srv.mu.Unlock()
	f.srv.finish(r, nil, errors.New(strings.Repeat("x", 1<<20)))
	if info := f.srv.info(r, "/v1/runs"); len(info.Error) > maxMessage+64 {
		t.Errorf("RunInfo.Error is %d bytes, want at most %d and a note", len(info.Error), maxMessage)
	}
	r.mu.Lock()
	r.lastSeen, r.events = r.events.last, nil // forgotten
	r.mu.Unlock()
	got := f.events(r.id, "").rest(t)
	if len(got) != 1 {
		t.Fatalf("the forgotten run's stream: %d events, want its end", len(got))
	}
	if n := len(got[0].data); n > maxMessage+512 {
		t.Errorf("the forgotten run's end event is %d bytes, want the message cut to %d", n, maxMessage)
	}
}

// size is the log's events and bytes (the tests' view of its bounds).
func (l *eventLog) size() (events, bytes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries), l.bytes
}

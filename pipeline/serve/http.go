package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/morphhost/morph/internal/httpguard"
	"github.com/morphhost/morph/pipeline"
)

// Handler serves the API under /v1, the attractor spec's paths under
// /pipelines (the same handlers), and GET /healthz. Every path but
// /healthz needs the bearer token when Options.Token is set; a browser's
// request from an origin not allowed is refused (403), and so is, on a
// loopback listener, a request for a Host that is not loopback.
func (s *Server) Handler() http.Handler {
	api := http.NewServeMux()
	for _, p := range []string{"/v1/runs", "/pipelines"} {
		api.HandleFunc("GET "+p, s.list)
		api.HandleFunc("POST "+p, s.create)
		api.HandleFunc("GET "+p+"/{id}", s.withRun(s.status))
		api.HandleFunc("GET "+p+"/{id}/events", s.withRun(s.stream))
		api.HandleFunc("GET "+p+"/{id}/questions", s.withRun(s.questions))
		api.HandleFunc("POST "+p+"/{id}/questions/{qid}/answer", s.withRun(s.answer))
		api.HandleFunc("GET "+p+"/{id}/checkpoint", s.withRun(s.checkpoint))
		api.HandleFunc("GET "+p+"/{id}/context", s.withRun(s.context))
		api.HandleFunc("GET "+p+"/{id}/graph", s.withRun(s.graph))
		api.HandleFunc("GET "+p+"/{id}/artifacts", s.withRun(s.artifacts))
		api.HandleFunc("GET "+p+"/{id}/artifacts/{path...}", s.withRun(s.artifact))
		api.HandleFunc("POST "+p+"/{id}/cancel", s.withRun(s.cancelHandler))
		api.HandleFunc("POST "+p+"/{id}/resume", s.withRun(s.resumeHandler))
	}
	api.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Counters()) })
	var authed http.Handler = api
	if s.opts.Token != "" {
		authed = httpguard.Bearer(s.opts.Token, api)
	}
	root := http.NewServeMux()
	root.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	root.Handle("/", authed)
	h := httpguard.Origins{Allowed: s.opts.AllowedOrigins, Loopback: s.opts.Loopback, Flag: "morph pipeline serve --allow-origin"}.Check(root)
	if s.opts.Loopback {
		h = httpguard.LoopbackHost(h)
	}
	return s.deadlines(h)
}

// deadlines gives each request WriteTimeout to arrive and its response
// WriteTimeout, from its start, to be taken: a body trickled in byte by
// byte must not hold a handler, nor, after a refusal that did not read it,
// the connection (the server reads what is left of a body before it
// answers); nor must a client that stops reading a file or a JSON body (a
// response it did not take in time is counted, ResponsesDropped). A stream
// clears the read deadline and re-arms the write deadline per write (and
// counts its own drops).
func (s *Server) deadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		readBy := time.Now().Add(s.opts.WriteTimeout)
		_ = http.NewResponseController(w).SetReadDeadline(readBy)
		tw := &timedWriter{ResponseWriter: w, timeout: s.opts.WriteTimeout, readBy: readBy}
		next.ServeHTTP(tw, r)
		if tw.timedOut && !tw.stream {
			s.responsesDropped.Add(1)
		}
	})
}

// timedWriter arms the write deadline when the response starts, and notes
// a write that timed out.
type timedWriter struct {
	http.ResponseWriter
	timeout  time.Duration
	readBy   time.Time // the read deadline: the server may read the rest of a body until then before it sends
	started  bool
	timedOut bool
	stream   bool // a stream, which counts its own drops
}

func (tw *timedWriter) start() {
	if !tw.started {
		tw.started = true
		from := time.Now()
		if from.Before(tw.readBy) {
			from = tw.readBy
		}
		_ = http.NewResponseController(tw.ResponseWriter).SetWriteDeadline(from.Add(tw.timeout))
	}
}

func (tw *timedWriter) WriteHeader(code int) {
	tw.start()
	tw.ResponseWriter.WriteHeader(code)
}

func (tw *timedWriter) Write(p []byte) (int, error) {
	tw.start()
	n, err := tw.ResponseWriter.Write(p)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		tw.timedOut = true
	}
	return n, err
}

// Unwrap lets an http.ResponseController reach the connection.
func (tw *timedWriter) Unwrap() http.ResponseWriter { return tw.ResponseWriter }

// apiError is an error's JSON body.
type apiError struct {
	Error string `json:"error"`
	// Diagnostics are a pipeline's validation findings (422).
	Diagnostics []pipeline.Diagnostic `json:"diagnostics,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, apiError{Error: err.Error()})
}

// statusOf maps the server's errors to HTTP statuses.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errUnknown):
		return http.StatusNotFound
	case errors.Is(err, errBusy), errors.Is(err, errFull):
		return http.StatusTooManyRequests
	case errors.Is(err, errClosed):
		return http.StatusServiceUnavailable
	case errors.Is(err, errExists), errors.Is(err, errOver), errors.Is(err, errActive), errors.Is(err, ErrNotPending):
		return http.StatusConflict
	case errors.Is(err, ErrBadAnswer):
		return http.StatusUnprocessableEntity
	}
	var ve *pipeline.ValidationError
	if errors.As(err, &ve) {
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

// decode reads a JSON body into v: at most MaxBodyBytes (413 past it,
// counted), no unknown fields, one value.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		s.bodiesRefused.Add(1)
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("the request body is over %d bytes (--max-request-kb)", tooBig.Limit))
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, fmt.Errorf("the request body: %w", err))
		return false
	}
	return true
}

// withRun finds the run the path's {id} names (404 when none).
func (s *Server) withRun(h func(http.ResponseWriter, *http.Request, *run)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if !runID.MatchString(id) {
			writeError(w, http.StatusBadRequest, errors.New("a run id is letters, digits, '_', '.' and '-'"))
			return
		}
		run, err := s.get(id)
		if err != nil {
			writeError(w, statusOf(err), err)
			return
		}
		h(w, r, run)
	}
}

// StartRequest is the body of POST /v1/runs: a served pipeline's name, or
// (with AllowDOT) DOT source.
type StartRequest struct {
	Name string `json:"name,omitempty"`
	DOT  string `json:"dot,omitempty"`
	// Source is the attractor spec's name of DOT.
	Source   string `json:"source,omitempty"`
	FileName string `json:"file_name,omitempty"` // the DOT's name in messages
	Goal     string `json:"goal,omitempty"`
	RunID    string `json:"run_id,omitempty"`
}

// RunInfo is a run's summary: the list's items, a start's answer, and the
// heart of a status.
type RunInfo struct {
	ID string `json:"id"`
	// Name is the pipeline's (its digraph's) name.
	Name    string    `json:"name,omitempty"`
	State   string    `json:"state"`
	Active  bool      `json:"active"`
	Started time.Time `json:"started,omitzero"`
	// CurrentNode is the stage running now (active runs).
	CurrentNode string `json:"current_node,omitempty"`
	// Error is why the run did not run (state "error").
	Error string            `json:"error,omitempty"`
	Links map[string]string `json:"links"`
}

func (s *Server) info(r *run, prefix string) RunInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	base := prefix + "/" + r.id
	return RunInfo{ID: r.id, Name: r.name, State: r.state, Active: r.active, Started: r.started, CurrentNode: r.current,
		Error: r.errText, Links: map[string]string{"self": base, "events": base + "/events", "questions": base + "/questions",
			"checkpoint": base + "/checkpoint", "artifacts": base + "/artifacts", "cancel": base + "/cancel", "resume": base + "/resume"}}
}

// prefix is the API prefix the request came by (/v1/runs or /pipelines),
// for the links.
func prefix(r *http.Request) string {
	if strings.HasPrefix(r.URL.Path, "/pipelines") {
		return "/pipelines"
	}
	return "/v1/runs"
}

// maxList bounds a list's page.
const maxList = 1000

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > maxList {
			writeError(w, http.StatusBadRequest, fmt.Errorf("limit must be from 1 to %d", maxList))
			return
		}
		limit = n
	}
	s.mu.Lock()
	runs := make([]*run, 0, len(s.runs))
	for _, x := range s.runs {
		runs = append(runs, x)
	}
	s.mu.Unlock()
	slices.SortFunc(runs, func(a, b *run) int {
		if c := b.started.Compare(a.started); c != 0 {
			return c
		}
		return strings.Compare(b.id, a.id)
	})
	out := make([]RunInfo, 0, min(limit, len(runs)))
	for _, x := range runs[:min(limit, len(runs))] {
		out = append(out, s.info(x, prefix(r)))
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": out, "total": len(runs)})
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req StartRequest
	if !s.decode(w, r, &req) {
		return
	}
	var (
		src  []byte
		g    *pipeline.Graph
		file string
		err  error
	)
	if req.Source != "" && req.DOT == "" {
		req.DOT, req.Source = req.Source, ""
	}
	switch {
	case (req.Name == "") == (req.DOT == "") || req.Source != "":
		writeError(w, http.StatusBadRequest, errors.New(`give "name" (a served pipeline) or "dot" (DOT source), not both`))
		return
	case req.Name != "":
		file = s.opts.Pipelines[req.Name]
		if file == "" {
			writeError(w, http.StatusNotFound, fmt.Errorf("no pipeline named %q is served (served: %s)", req.Name, strings.Join(s.names(), ", ")))
			return
		}
		if src, g, err = pipeline.ReadDOTFile(file); err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return
		}
	default:
		if !s.opts.AllowDOT {
			writeError(w, http.StatusForbidden, errors.New("inline DOT is not allowed on this server (morph pipeline serve --allow-dot); start a served pipeline by name"))
			return
		}
		name := req.FileName
		if name == "" {
			name = "request.dot"
		}
		src = []byte(req.DOT)
		if g, err = pipeline.ParseDOTNamed(path.Base(name), src); err != nil {
			writeError(w, http.StatusUnprocessableEntity, err)
			return
		}
	}
	id := req.RunID
	if id == "" {
		id = newRunID()
	} else if !runID.MatchString(id) {
		writeError(w, http.StatusBadRequest, errors.New(`"run_id" is letters, digits, '_', '.' and '-' (at most 128), not starting with '.' or '-'`))
		return
	}
	// Validated here, to answer 422 with the findings rather than start a
	// run that cannot run.
	rn, err := s.opts.NewRunner()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	check := g.Clone()
	if req.Goal != "" {
		check.Attrs["goal"] = req.Goal
	}
	if diags, err := rn.Prepare(check); err != nil {
		writeJSON(w, statusOf(err), apiError{Error: err.Error(), Diagnostics: diags})
		return
	}
	run, err := s.start(rn, id, g.Name, req.Goal, file, src, g)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusCreated, s.info(run, prefix(r)))
}

func (s *Server) names() []string {
	var out []string
	for n := range s.opts.Pipelines {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Status is GET /v1/runs/{id}: the run's summary and its checkpoint's.
type Status struct {
	RunInfo
	NextNode         string         `json:"next_node,omitempty"`
	Path             []string       `json:"completed_nodes"`
	PendingQuestions int            `json:"pending_questions"`
	Usage            pipeline.Usage `json:"usage"`
	FailedNode       string         `json:"failed_node,omitempty"`
	FailureReason    string         `json:"failure_reason,omitempty"`
}

func (s *Server) status(w http.ResponseWriter, r *http.Request, run *run) {
	st := Status{RunInfo: s.info(run, prefix(r)), Path: []string{}}
	if cp, err := pipeline.LoadCheckpoint(run.dir); err == nil {
		st.NextNode, st.Usage, st.FailedNode, st.FailureReason = cp.NextNode, cp.Usage, cp.FailedNode, cp.FailureReason
		if cp.Completed != nil {
			st.Path = cp.Completed
		}
	}
	st.PendingQuestions = run.iv.Len()
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) questions(w http.ResponseWriter, _ *http.Request, run *run) {
	writeJSON(w, http.StatusOK, map[string]any{"questions": run.iv.Pending()})
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, run *run) {
	// pipeline.Answer as it is, so that its fields reach the gate; the
	// attractor spec's {"answer": "..."} is a choice.
	var body struct {
		pipeline.Answer
		SpecAnswer string `json:"answer,omitempty"`
	}
	if !s.decode(w, r, &body) {
		return
	}
	if body.SpecAnswer != "" {
		if body.Choice != "" {
			writeError(w, http.StatusBadRequest, errors.New(`give "choice" or "answer", not both`))
			return
		}
		body.Choice = body.SpecAnswer
	}
	if err := run.iv.Answer(r.PathValue("qid"), body.Answer); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"qid": r.PathValue("qid"), "status": "answered"})
}

func (s *Server) checkpoint(w http.ResponseWriter, _ *http.Request, run *run) {
	cp, err := pipeline.LoadCheckpoint(run.dir)
	if err != nil {
		writeError(w, http.StatusNotFound, errors.New("the run has no checkpoint yet"))
		return
	}
	writeJSON(w, http.StatusOK, cp)
}

// context is the run's context: as it is now while the run runs (source
// "live"), else its last checkpoint's (source "checkpoint").
func (s *Server) context(w http.ResponseWriter, _ *http.Request, run *run) {
	if live := run.liveContext(); live != nil {
		writeJSON(w, http.StatusOK, map[string]any{"context": live, "source": "live"})
		return
	}
	cp, err := pipeline.LoadCheckpoint(run.dir)
	if err != nil {
		writeError(w, http.StatusNotFound, errors.New("the run has no checkpoint yet"))
		return
	}
	ctx := cp.Context
	if ctx == nil {
		ctx = map[string]any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"context": ctx, "source": "checkpoint"})
}

func (s *Server) cancelHandler(w http.ResponseWriter, r *http.Request, run *run) {
	if err := run.cancelRun(); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusAccepted, s.info(run, prefix(r)))
}

func (s *Server) resumeHandler(w http.ResponseWriter, r *http.Request, run *run) {
	if err := s.resume(run); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusAccepted, s.info(run, prefix(r)))
}

// maxArtifacts bounds the files an artifact list names.
const maxArtifacts = 10000

// Artifact is a file of a run directory.
type Artifact struct {
	Path string `json:"path"` // slash-separated, relative to the run directory
	Size int64  `json:"size"`
}

// artifacts lists the run directory's regular files (the stage files,
// artifacts/, the state files), walking no symbolic link.
func (s *Server) artifacts(w http.ResponseWriter, _ *http.Request, run *run) {
	out := []Artifact{}
	truncated := false
	err := filepath.WalkDir(run.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || d.Name() == pipeline.LockFile {
			return nil
		}
		if len(out) == maxArtifacts {
			truncated = true
			return filepath.SkipAll
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		rel, _ := filepath.Rel(run.dir, p)
		out = append(out, Artifact{Path: filepath.ToSlash(rel), Size: info.Size()})
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"artifacts": out, "truncated": truncated})
}

func (s *Server) artifact(w http.ResponseWriter, r *http.Request, run *run) {
	s.serveFile(w, r, run, r.PathValue("path"), "")
}

// serveFile serves name, a path inside the run directory: a local path
// (no "..", not absolute), opened through an os.Root so that no symbolic
// link leads out of the directory (400 for a bad path, 404 for one that
// is not a regular file there). Range requests are honoured.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, run *run, name, contentType string) {
	if !filepath.IsLocal(filepath.FromSlash(name)) || strings.Contains(name, "\\") {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%q is not a path inside the run directory", name))
		return
	}
	root, err := os.OpenRoot(run.dir)
	if err != nil {
		writeError(w, http.StatusNotFound, errors.New("the run has no directory"))
		return
	}
	defer root.Close()
	f, err := root.Open(filepath.FromSlash(name))
	if err != nil {
		writeError(w, http.StatusNotFound, fmt.Errorf("%q: no such file in the run directory", name))
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() || path.Base(name) == pipeline.LockFile {
		writeError(w, http.StatusNotFound, fmt.Errorf("%q is not a file of the run", name))
		return
	}
	if contentType == "" {
		contentType = "application/octet-stream" // never a page a browser renders
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", "attachment")
	http.ServeContent(w, r, "", info.ModTime(), f)
}

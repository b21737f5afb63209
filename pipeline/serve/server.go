// Package serve is `morph pipeline serve`: pipeline runs over HTTP. A
// client starts a run (a pipeline the operator named, or inline DOT when
// allowed), follows its events (Server-Sent Events, resumable from a
// bounded ring with Last-Event-ID), answers its human gates, reads its
// status, checkpoint, context and files, cancels and resumes it.
//
// The package runs no WebAssembly itself: it takes a function that makes
// Runners (the command wires config.OpenPipeline's), and gives each run
// its own interviewer (PendingInterviewer) and event stream.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/pipeline"
)

// Defaults of Options.
const (
	DefaultMaxBodyBytes   = 1 << 20
	DefaultMaxRuns        = 8
	DefaultRingEvents     = 4096
	DefaultRingBytes      = 4 << 20
	DefaultMaxSubscribers = 1024
	DefaultKeepEvents     = 64
	DefaultMaxKeptRuns    = 1000
	DefaultPingInterval   = 15 * time.Second
	DefaultWriteTimeout   = 30 * time.Second
	DefaultRenderTimeout  = 30 * time.Second
	DefaultMaxRenders     = 2
)

// ErrNoToken is the refusal to serve beyond loopback without a bearer
// token: anyone who could reach the address could run the pipelines.
var ErrNoToken = errors.New("pipeline serve: serving beyond loopback needs a bearer token")

// Options configure a Server. Zero limits take the defaults.
type Options struct {
	// RunsRoot is the directory runs get their directories in
	// (RunsRoot/<run id>). Required.
	RunsRoot string
	// Pipelines are the pipelines a client may start by name: name to DOT
	// file.
	Pipelines map[string]string
	// NewRunner makes the Runner of one run (a new one each call: the
	// server sets its Interviewer and OnEvent). Required.
	NewRunner func() (*pipeline.Runner, error)
	// AllowDOT lets a client start a run of DOT it sends. Off by default:
	// a token holder then runs only what the operator named.
	AllowDOT bool
	// MaxBodyBytes bounds a request's body (413 past it).
	MaxBodyBytes int64
	// MaxRuns bounds the runs running at once: one more is refused with
	// 429 and counted (Counters.RunsRefused).
	MaxRuns int
	// RingEvents and RingBytes bound the events a run keeps for streams to
	// resume from.
	RingEvents, RingBytes int
	// MaxSubscribers bounds a run's streams open at once (429 past it,
	// counted).
	MaxSubscribers int
	// KeepEvents is how many ended runs keep their events in memory; an
	// older one's stream is its end state only.
	KeepEvents int
	// MaxKeptRuns bounds the runs the server keeps (in memory and each a
	// directory under RunsRoot, those found there at start included): a
	// start past it is refused with 429 and counted (Counters.KeptRefused)
	// until an operator removes old run directories and restarts the
	// server. Nothing is deleted for a client.
	MaxKeptRuns int
	// PingInterval is how often an idle stream gets a comment, so that
	// proxies and clients see it alive.
	PingInterval time.Duration
	// WriteTimeout bounds the reading of a request's body, the writing of
	// a response (a file, a JSON body), and each write to a stream: a
	// client that stops reading is dropped past it (counted), not waited
	// for.
	WriteTimeout time.Duration
	// Loopback says the listener is loopback; beyond it Token is
	// required (New refuses without).
	Loopback bool
	// Token, when set, is the bearer token every request but /healthz
	// must carry.
	Token string
	// AllowedOrigins are the browser origins allowed besides the loopback
	// ones (see httpguard.Origins).
	AllowedOrigins []string
	// RenderProgram is the morph-render that draws a run's graph (GET
	// .../graph); "": renderproc.Find's, looked up at each drawing.
	RenderProgram string
	// RenderTimeout bounds each drawing: morph-render is killed past it
	// (504).
	RenderTimeout time.Duration
	// MaxRenders bounds the drawings at once, each a process: one more is
	// refused with 429 and counted (Counters.RendersRefused).
	MaxRenders int
	Logger     *slog.Logger
}

// Counters are the server's refusals, for an operator's status.
type Counters struct {
	// RunsRefused counts starts and resumes refused at MaxRuns.
	RunsRefused int64 `json:"runs_refused"`
	// StreamsRefused counts streams refused at MaxSubscribers.
	StreamsRefused int64 `json:"streams_refused"`
	// StreamsDropped counts streams dropped for not keeping up.
	StreamsDropped int64 `json:"streams_dropped"`
	// BodiesRefused counts request bodies over MaxBodyBytes.
	BodiesRefused int64 `json:"bodies_refused"`
	// RendersRefused counts drawings refused at MaxRenders.
	RendersRefused int64 `json:"renders_refused"`
	// ResponsesDropped counts responses (not streams) whose client did
	// not take them within WriteTimeout.
	ResponsesDropped int64 `json:"responses_dropped"`
	// KeptRefused counts starts refused at MaxKeptRuns.
	KeptRefused int64 `json:"kept_refused"`
}

// runID is what a run id may be: a directory name, a URL path segment.
var runID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// Server serves pipeline runs. Make one with New, serve Handler, end with
// Shutdown.
type Server struct {
	opts Options
	log  *slog.Logger

	base    context.Context // the runs' parent: Shutdown cancels it
	stop    context.CancelFunc
	closing chan struct{} // closed by Shutdown: streams end
	wg      sync.WaitGroup

	mu      sync.Mutex
	runs    map[string]*run
	running int
	ended   []*run // ended runs that keep events, oldest first
	closed  bool

	renders chan struct{} // a token per drawing running (MaxRenders)

	runsRefused, streamsRefused, streamsDropped, bodiesRefused atomic.Int64
	rendersRefused, responsesDropped, keptRefused              atomic.Int64
}

// run is a run the server knows: one it started, or one it found in
// RunsRoot.
type run struct {
	id, dir, name string
	started       time.Time

	iv *PendingInterviewer // its gates' questions, over its resumes

	mu       sync.Mutex
	state    string // a pipeline.Run* state, or "error"
	errText  string // why a run that did not run (state "error")
	active   bool   // its goroutine runs
	cancel   context.CancelFunc
	current  string            // the node running
	events   *eventLog         // nil when forgotten or never had
	live     *pipeline.Context // the running run's context (RunConfig.OnContext); nil when not running
	subs     int
	lastSeen int64 // the last event seq (for a stream of a forgotten log)
}

// stateError is a run whose runner returned an error (it did not run, or
// could not record).
const stateError = "error"

// New returns a Server, with the runs RunsRoot holds already: their state
// is their checkpoint's, and the stopped ones can be resumed.
func New(opts Options) (*Server, error) {
	if opts.NewRunner == nil {
		return nil, errors.New("pipeline serve: Options.NewRunner is required")
	}
	if opts.RunsRoot == "" {
		return nil, errors.New("pipeline serve: Options.RunsRoot is required")
	}
	if !opts.Loopback && opts.Token == "" {
		return nil, ErrNoToken
	}
	for name, file := range opts.Pipelines {
		if !runID.MatchString(name) {
			return nil, fmt.Errorf("pipeline serve: pipeline name %q: use letters, digits, '_', '.' and '-'", name)
		}
		if fi, err := os.Stat(file); err != nil || !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("pipeline serve: pipeline %s: %s is not a readable file", name, file)
		}
	}
	opts.MaxBodyBytes = orDefault(opts.MaxBodyBytes, DefaultMaxBodyBytes)
	opts.MaxRuns = orDefault(opts.MaxRuns, DefaultMaxRuns)
	opts.RingEvents = orDefault(opts.RingEvents, DefaultRingEvents)
	opts.RingBytes = orDefault(opts.RingBytes, DefaultRingBytes)
	opts.MaxSubscribers = orDefault(opts.MaxSubscribers, DefaultMaxSubscribers)
	opts.KeepEvents = orDefault(opts.KeepEvents, DefaultKeepEvents)
	opts.MaxKeptRuns = orDefault(opts.MaxKeptRuns, DefaultMaxKeptRuns)
	opts.PingInterval = orDefault(opts.PingInterval, DefaultPingInterval)
	opts.WriteTimeout = orDefault(opts.WriteTimeout, DefaultWriteTimeout)
	opts.RenderTimeout = orDefault(opts.RenderTimeout, DefaultRenderTimeout)
	opts.MaxRenders = orDefault(opts.MaxRenders, DefaultMaxRenders)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := os.MkdirAll(opts.RunsRoot, 0o755); err != nil {
		return nil, fmt.Errorf("pipeline serve: runs directory: %w", err)
	}
	base, stop := context.WithCancel(context.Background())
	s := &Server{opts: opts, log: opts.Logger, base: base, stop: stop, closing: make(chan struct{}), runs: map[string]*run{},
		renders: make(chan struct{}, opts.MaxRenders)}
	if err := s.load(); err != nil {
		stop()
		return nil, err
	}
	return s, nil
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// load adds the runs RunsRoot holds: a directory with a checkpoint.
func (s *Server) load() error {
	entries, err := os.ReadDir(s.opts.RunsRoot)
	if err != nil {
		return fmt.Errorf("pipeline serve: runs directory: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || !runID.MatchString(e.Name()) {
			continue
		}
		dir := filepath.Join(s.opts.RunsRoot, e.Name())
		cp, err := pipeline.LoadCheckpoint(dir)
		if err != nil {
			continue // not a run (or not one this morph reads): not served
		}
		r := &run{id: e.Name(), dir: dir, state: cp.State, iv: NewPendingInterviewer()}
		if m, err := pipeline.LoadManifest(dir); err == nil {
			r.name, r.started = m.Name, m.StartedAt
		}
		s.runs[r.id] = r
	}
	return nil
}

// Counters returns the refusals so far.
func (s *Server) Counters() Counters {
	return Counters{RunsRefused: s.runsRefused.Load(), StreamsRefused: s.streamsRefused.Load(),
		StreamsDropped: s.streamsDropped.Load(), BodiesRefused: s.bodiesRefused.Load(), RendersRefused: s.rendersRefused.Load(),
		ResponsesDropped: s.responsesDropped.Load(), KeptRefused: s.keptRefused.Load()}
}

// Shutdown cancels the runs (each checkpoints, state canceled, and can be
// resumed by the next server), ends the streams and waits for the runs to
// stop, or ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closing)
	}
	s.mu.Unlock()
	s.stop()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pipeline serve: runs still stopping: %w", ctx.Err())
	}
}

// Errors of starting a run, which the handlers map to statuses.
var (
	errBusy    = errors.New("too many runs running")
	errFull    = errors.New("too many runs kept")
	errClosed  = errors.New("the server is shutting down")
	errExists  = errors.New("a run of that id exists")
	errOver    = errors.New("the run is over")
	errActive  = errors.New("the run is running")
	errUnknown = errors.New("no such run")
)

// launch runs fn (the runner's Run or Resume) with rn, for r on a
// goroutine, at most MaxRuns at once. r must be in s.runs or new (then
// added).
func (s *Server) launch(rn *pipeline.Runner, r *run, resumed bool, fn func(ctx context.Context, rn *pipeline.Runner) (*pipeline.Result, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errClosed
	case s.running >= s.opts.MaxRuns:
		s.runsRefused.Add(1)
		return fmt.Errorf("%w: %d at once (--max-runs)", errBusy, s.opts.MaxRuns)
	}
	if old := s.runs[r.id]; old != nil && old != r {
		return fmt.Errorf("%w: %s", errExists, r.id)
	}
	if s.runs[r.id] == nil && len(s.runs) >= s.opts.MaxKeptRuns {
		s.keptRefused.Add(1)
		return fmt.Errorf("%w: %d (--max-kept-runs); remove old run directories from %s and restart the server", errFull, s.opts.MaxKeptRuns, s.opts.RunsRoot)
	}
	r.mu.Lock()
	if r.active {
		r.mu.Unlock()
		return fmt.Errorf("%w: %s", errActive, r.id)
	}
	ctx, cancel := context.WithCancel(s.base)
	r.active, r.cancel, r.state, r.errText, r.current, r.live = true, cancel, pipeline.RunRunning, "", "", nil
	if r.events == nil {
		r.events = newEventLog(s.opts.RingEvents, s.opts.RingBytes)
		r.events.last = r.lastSeen
	}
	events := r.events
	r.mu.Unlock()
	s.runs[r.id] = r
	s.ended = deleteRun(s.ended, r)
	s.running++
	if resumed {
		events.add(Event{Kind: KindRunResumed, RunID: r.id, Time: time.Now().UTC()})
	}
	rn.Interviewer = r.iv
	rn.OnEvent = func(ev pipeline.Event) {
		switch ev.Kind {
		case pipeline.EventStageStarted:
			r.setCurrent(ev.NodeID)
		case pipeline.EventStageCompleted, pipeline.EventStageFailed:
			r.setCurrent("")
		}
		events.add(wireEvent(ev))
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		res, err := fn(ctx, rn)
		s.finish(r, res, err)
	}()
	return nil
}

func (r *run) setCurrent(node string) {
	r.mu.Lock()
	r.current = node
	r.mu.Unlock()
}

// finish records how r's goroutine ended and keeps its events, or an
// older ended run's, within KeepEvents.
func (s *Server) finish(r *run, res *pipeline.Result, err error) {
	state, msg := stateError, ""
	switch {
	case err != nil:
		msg = err.Error()
		s.log.Warn("pipeline run did not run", "run", r.id, "error", safetext.Line(msg, 500))
		// A resume that could not start leaves the run as it was.
		if cp, lerr := pipeline.LoadCheckpoint(r.dir); lerr == nil {
			state = cp.State
		}
	case res != nil:
		state, msg = res.State, res.FailureReason
	}
	// Cut once, here: the end event, a forgotten run's stream and RunInfo
	// all show it.
	msg = safetext.Truncate(msg, maxMessage)
	ev := Event{Kind: KindRunEnded, RunID: r.id, State: state, Message: msg, Time: time.Now().UTC()}
	r.mu.Lock()
	r.events.add(ev)
	r.state, r.errText, r.active, r.current, r.live = state, msg, false, "", nil
	r.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	s.ended = append(s.ended, r)
	for len(s.ended) > s.opts.KeepEvents {
		old := s.ended[0]
		s.ended = s.ended[1:]
		old.mu.Lock()
		if !old.active && old.events != nil {
			old.lastSeen = old.events.last
			old.events = nil
		}
		old.mu.Unlock()
	}
}

func deleteRun(rs []*run, r *run) []*run {
	for i, x := range rs {
		if x == r {
			return append(rs[:i], rs[i+1:]...)
		}
	}
	return rs
}

// get returns the run id names.
func (s *Server) get(id string) (*run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.runs[id]; r != nil {
		return r, nil
	}
	return nil, fmt.Errorf("%w: %q", errUnknown, id)
}

// start starts a new run of g (its source src, from file) in RunsRoot/id
// with rn, the runner that validated it.
func (s *Server) start(rn *pipeline.Runner, id, name, goal, file string, src []byte, g *pipeline.Graph) (*run, error) {
	r := &run{id: id, dir: filepath.Join(s.opts.RunsRoot, id), name: name, started: time.Now().UTC(), iv: NewPendingInterviewer()}
	s.mu.Lock()
	exists := s.runs[id] != nil
	s.mu.Unlock()
	if _, err := os.Lstat(r.dir); exists || err == nil {
		return nil, fmt.Errorf("%w: %s", errExists, id)
	}
	cfg := pipeline.RunConfig{RunDir: r.dir, Goal: goal, Source: src, DotFile: file, RunID: id, OnContext: r.setLive}
	err := s.launch(rn, r, false, func(ctx context.Context, rn *pipeline.Runner) (*pipeline.Result, error) {
		return rn.Run(ctx, g, cfg)
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// resume resumes r in its directory, from the source it ran.
func (s *Server) resume(r *run) error {
	r.mu.Lock()
	state := r.state
	r.mu.Unlock()
	if state == pipeline.RunSuccess || state == pipeline.RunFail {
		return fmt.Errorf("%w: %s ended %s", errOver, r.id, state)
	}
	src, g, err := pipeline.ReadDOTFile(filepath.Join(r.dir, pipeline.SourceFile))
	if err != nil {
		return err
	}
	rn, err := s.opts.NewRunner()
	if err != nil {
		return err
	}
	return s.launch(rn, r, true, func(ctx context.Context, rn *pipeline.Runner) (*pipeline.Result, error) {
		return rn.Resume(ctx, g, pipeline.RunConfig{RunDir: r.dir, Source: src, OnContext: r.setLive})
	})
}

// setLive keeps the context of r's run while it runs.
func (r *run) setLive(c *pipeline.Context) {
	r.mu.Lock()
	r.live = c
	r.mu.Unlock()
}

// liveContext is a copy of r's context while it runs, else nil.
func (r *run) liveContext() map[string]any {
	r.mu.Lock()
	c, active := r.live, r.active
	r.mu.Unlock()
	if c == nil || !active {
		return nil
	}
	return c.Snapshot()
}

// cancel cancels r's goroutine; the run checkpoints as canceled.
func (r *run) cancelRun() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.active {
		return fmt.Errorf("%w: %s is %s", errOver, r.id, r.state)
	}
	r.cancel()
	return nil
}

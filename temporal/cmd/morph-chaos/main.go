// Command morph-chaos tests durable turns under faults, as an operator
// would (make chaos): a Temporal dev server keeping its state in a database
// file, two `morph worker` processes, a stateless model server on
// 127.0.0.1 that logs every call, and the ledger tool
// (guests/testdata/ledger), which appends a line to a granted file. It runs
// N concurrent `morph run --temporal --session` turns undisturbed, then N
// more while it kills a worker with SIGKILL every ~kill-every (the worker
// is started again) and the dev server at random points (started again on
// its database), and reports: the turns that ended with a final, the model
// calls answered more than once and the ledger lines appended more than
// once (each call has a key, a hash of its conversation so far, so a
// repeat has its first making's), turn times against the undisturbed run,
// and recovery times.
//
// Everything it starts listens on, or talks to, 127.0.0.1 only; each phase
// is bounded by -duration, and everything it started is stopped when it
// ends (or is interrupted). The report goes to standard output and to
// report.md in the work directory, beside the logs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// maxSessions bounds -sessions: each turn is two processes.
const maxSessions = 1000

// serverQuiet is the start of the chaos phase in which the server is not
// killed: each turn's client dials it as it starts, and one that finds it
// down fails at once, before its workflow exists (the harness tries the
// turns' durability, not the clients' first dial).
const serverQuiet = 5 * time.Second

type options struct {
	sessions, workers, steps, serverKills int
	duration, killEvery, serverWindow     time.Duration
	latency                               time.Duration
	morph, temporalCLI, ledgerWasm, work  string
	seed                                  uint64
	calm                                  bool
}

func main() {
	var o options
	flag.IntVar(&o.sessions, "sessions", 50, fmt.Sprintf("concurrent sessions, one turn each, per phase (at most %d)", maxSessions))
	flag.IntVar(&o.workers, "workers", 2, "morph worker processes")
	flag.IntVar(&o.steps, "steps", 2, "ledger tool calls per turn (then the final)")
	flag.DurationVar(&o.duration, "duration", 10*time.Minute, "bound of each phase: turns still running then are killed and counted unfinished")
	flag.DurationVar(&o.killEvery, "kill-every", 6*time.Second, "mean interval between worker kills (SIGKILL) in the chaos phase; 0 for none")
	flag.IntVar(&o.serverKills, "server-kills", 2, "dev server kills (SIGKILL) in the chaos phase, at random points of its first -server-window")
	flag.DurationVar(&o.serverWindow, "server-window", 20*time.Second, "the server kills fall in this much of the chaos phase's start, after its first 5 s (a kill due after the phase's turns ended is not made)")
	flag.DurationVar(&o.latency, "latency", time.Second, "how long the model server takes to answer each call")
	flag.StringVar(&o.morph, "morph", "bin/morph", "the morph binary (morph-temporal beside it)")
	flag.StringVar(&o.temporalCLI, "temporal-cli", os.Getenv("MORPH_TEMPORAL"), "the Temporal CLI (scripts/temporal.sh --print-path)")
	flag.StringVar(&o.ledgerWasm, "ledger", "guests/testdata/ledger.wasm", "the ledger tool plugin")
	flag.StringVar(&o.work, "work", "", "the directory of the logs, the database and the report (default: a new one under $TMPDIR)")
	flag.Uint64Var(&o.seed, "seed", 0, "the seed of the kills' randomness (default: from the time)")
	flag.BoolVar(&o.calm, "undisturbed", true, "run the undisturbed phase first, for the turn times to compare with")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "morph-chaos:", err)
		os.Exit(1)
	}
}

func (o *options) check() error {
	switch {
	case o.sessions < 1 || o.sessions > maxSessions:
		return fmt.Errorf("-sessions %d: want 1 to %d", o.sessions, maxSessions)
	case o.workers < 1 || o.workers > 16:
		return fmt.Errorf("-workers %d: want 1 to 16", o.workers)
	case o.steps < 0 || o.steps > 50:
		return fmt.Errorf("-steps %d: want 0 to 50", o.steps)
	case o.duration <= 0 || o.killEvery < 0 || o.serverKills < 0 || o.serverWindow <= serverQuiet || o.latency < 0:
		return fmt.Errorf("-duration must be positive, -server-window more than %s; -kill-every, -server-kills and -latency not negative", serverQuiet)
	case o.temporalCLI == "":
		return errors.New("no Temporal CLI: give -temporal-cli or $MORPH_TEMPORAL (scripts/temporal.sh --print-path)")
	}
	for _, f := range []string{o.morph, o.temporalCLI, o.ledgerWasm} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%w (make chaos builds bin/morph and the ledger plugin)", err)
		}
	}
	return nil
}

// harness is what the phases share.
type harness struct {
	o      options
	rnd    *rand.Rand
	cfg    string
	ledger string
	model  *modelServer
	server *devServer
	slots  []*workerSlot
}

func run(ctx context.Context, o options) error {
	if err := o.check(); err != nil {
		return err
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	var err error
	if o.work == "" {
		if o.work, err = os.MkdirTemp("", "morph-chaos-"); err != nil {
			return err
		}
	}
	for _, p := range []*string{&o.morph, &o.ledgerWasm, &o.work} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	h := &harness{o: o, rnd: rand.New(rand.NewPCG(o.seed, 0)), ledger: filepath.Join(o.work, "ledger", "ledger.txt")}
	for _, d := range []string{"ledger", "turns"} {
		if err := os.MkdirAll(filepath.Join(o.work, d), 0o755); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "morph-chaos: work directory %s, seed %d\n", o.work, o.seed)

	calls, err := os.Create(filepath.Join(o.work, "model-calls.jsonl"))
	if err != nil {
		return err
	}
	defer calls.Close()
	h.model = &modelServer{steps: o.steps, latency: o.latency, now: time.Now, log: calls}
	if err := h.model.start(); err != nil {
		return err
	}
	defer h.model.close()

	if h.server, err = newDevServer(o.temporalCLI, o.work); err != nil {
		return err
	}
	if err := h.server.start(ctx); err != nil {
		return err
	}
	defer func() { h.server.p.stop(10 * time.Second) }()

	h.cfg = filepath.Join(o.work, "morph.toml")
	if err := os.WriteFile(h.cfg, []byte(h.config()), 0o644); err != nil {
		return err
	}
	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopWorkers(); wg.Wait() }()
	for i := range o.workers {
		s := &workerSlot{morph: o.morph, cfg: h.cfg, logPath: filepath.Join(o.work, fmt.Sprintf("worker-%d.log", i+1))}
		h.slots = append(h.slots, s)
		wg.Add(1)
		go func() { defer wg.Done(); s.run(wctx) }()
	}

	var phases []*phaseReport
	if o.calm {
		fmt.Fprintf(os.Stderr, "morph-chaos: undisturbed: %d turns\n", o.sessions)
		phases = append(phases, h.phase(ctx, "calm", false))
	}
	if ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "morph-chaos: chaos: %d turns, a worker killed every ~%s, %d server kills\n", o.sessions, o.killEvery, o.serverKills)
		phases = append(phases, h.phase(ctx, "chaos", true))
	}
	report := h.report(phases)
	fmt.Print(report)
	if err := os.WriteFile(filepath.Join(o.work, "report.md"), []byte(report), 0o644); err != nil {
		return err
	}
	return ctx.Err()
}

// config is the workers' and turns' morph.toml: the model server, the
// ledger plugin granted its directory, the dev server.
func (h *harness) config() string {
	return fmt.Sprintf(`[llm]
provider = "openai"
model = "chaos"
base_url = %q
api_key_env = ""
max_retries = 0

[discovery]
project = false
user = false

[[plugins]]
name = "ledger"
path = %q
allowed_paths = ["ledger:/ledger:rw"]

[temporal]
host_port = %q
task_queue = "chaos"
`, h.model.url, h.o.ledgerWasm, h.server.hostPort())
}

// turnResult is how one `morph run --temporal --session` ended.
type turnResult struct {
	id    string
	took  time.Duration
	final bool // it exited 0, printing the final
	ended bool // it exited before the phase's bound
}

// phase runs the phase's turns, all at once; with chaos, it kills workers
// and the server while they run.
func (h *harness) phase(ctx context.Context, name string, chaos bool) *phaseReport {
	ctx, cancel := context.WithTimeout(ctx, h.o.duration)
	defer cancel()
	start := time.Now()
	results := make([]turnResult, h.o.sessions)
	var turns sync.WaitGroup
	for i := range results {
		id := fmt.Sprintf("%s-%03d", name, i)
		turns.Add(1)
		go func() {
			defer turns.Done()
			results[i] = h.turn(ctx, id)
		}()
	}
	rep := &phaseReport{name: name, chaos: chaos, start: start}
	if chaos {
		kctx, stopKills := context.WithCancel(ctx)
		var kills sync.WaitGroup
		kills.Add(2)
		go func() { defer kills.Done(); rep.workerKills = h.killWorkers(kctx) }()
		go func() { defer kills.Done(); rep.serverKills = h.killServer(kctx) }()
		turns.Wait()
		stopKills()
		kills.Wait()
	} else {
		turns.Wait()
	}
	rep.wall = time.Since(start)
	rep.turns = results
	return rep
}

// turn runs one turn in a session of its own.
func (h *harness) turn(ctx context.Context, id string) turnResult {
	start := time.Now()
	p, err := startProc(filepath.Join(h.o.work, "turns", id+".log"), h.o.morph,
		"run", "--temporal", "--session", "s-"+id, "--config", h.cfg, turnTask(id))
	if err != nil {
		return turnResult{id: id}
	}
	select {
	case <-p.done:
		return turnResult{id: id, took: time.Since(start), final: p.err == nil, ended: true}
	case <-ctx.Done():
		p.kill()
		return turnResult{id: id, took: time.Since(start)}
	}
}

// killWorkers kills a worker at random with SIGKILL every ~killEvery
// (uniformly 0.5 to 1.5 times it) until ctx ends; it returns the kills.
func (h *harness) killWorkers(ctx context.Context) []time.Time {
	var kills []time.Time
	if h.o.killEvery == 0 {
		return nil
	}
	for {
		wait := time.Duration((0.5 + h.rnd.Float64()) * float64(h.o.killEvery))
		select {
		case <-ctx.Done():
			return kills
		case <-time.After(wait):
		}
		slot := h.rnd.IntN(len(h.slots))
		if h.slots[slot].kill() == nil {
			kills = append(kills, time.Now())
			// When and which: a call made again is judged against its
			// worker's kill (worker-N.log).
			fmt.Fprintf(os.Stderr, "morph-chaos: %s killed worker-%d\n", kills[len(kills)-1].Format(time.RFC3339Nano), slot+1)
		}
	}
}

// serverKill is a kill of the dev server: when, and when it answered
// again.
type serverKill struct {
	killed, up time.Time
	err        error
}

// killServer kills the dev server with SIGKILL serverKills times, at
// random points of the phase's first serverWindow after serverQuiet, and
// starts it again on its database after 1 to 3 s.
func (h *harness) killServer(ctx context.Context) []serverKill {
	var kills []serverKill
	start := time.Now()
	at := make([]time.Duration, h.o.serverKills)
	for i := range at {
		at[i] = serverQuiet + time.Duration(h.rnd.Float64()*float64(h.o.serverWindow-serverQuiet))
	}
	sortDurations(at)
	for _, d := range at {
		select {
		case <-ctx.Done():
			return kills
		case <-time.After(time.Until(start.Add(d))):
		}
		k := serverKill{killed: time.Now()}
		h.server.p.kill()
		time.Sleep(time.Second + time.Duration(h.rnd.Float64()*float64(2*time.Second)))
		// Started again even when the phase is over: the next phase and the
		// end need it.
		k.err = h.server.start(context.WithoutCancel(ctx))
		k.up = time.Now()
		kills = append(kills, k)
		if k.err != nil {
			fmt.Fprintln(os.Stderr, "morph-chaos:", k.err)
			return kills
		}
	}
	return kills
}

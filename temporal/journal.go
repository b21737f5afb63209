package temporal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/safetext"
)

// Journal is the result journal of a task queue's workers. Temporal
// records an activity's result when its worker reports it: a worker that
// dies after the call returned and before that report leaves the activity
// to be run again, the call with it. So each worker records the result of
// every call (a model call, a tool call, a hook call: every activity but
// Setup and a session end's, Workers and EndSession, which answer the
// workers' state, not a call's) in the journal before it reports it, and an attempt of a call
// whose result (or own failure) is recorded answers the record without
// calling. A call still runs twice when Temporal gave up on an attempt
// (its worker died, its heartbeat was late past heartbeat_timeout on a
// live but starved worker, its timeout passed, its worker was stopping)
// while the call ran and before its result was recorded; the attempt given
// up on may still be running beside the next. Its tool gets the call's ID
// (engine.CallID, the same on every attempt) to do its effects once,
// atomically (an O_EXCL file, a unique key).
//
// A call is an activity of a workflow's run (Call): its ID is the same on
// each attempt, and no other activity of the run has it. A workflow
// continues as new only between calls, so no call spans two runs; a
// workflow reset to before a call makes it again, in a run of its own.
//
// The records are in Store, under the SHA-256 of the call's identity,
// each the call and its result as JSON, at most Max bytes. The workers of
// the queue must share it; DirStore is a directory, written by a
// temporary file, fsync and rename. A record is needed only until
// Temporal has recorded its call: Prune, where the store can, removes
// records older than the retention.
type Journal struct {
	Store PayloadStore
	Max   int64
}

// ErrJournal marks a call the journal could not record, or a record it
// could not read (corrupt, larger than journal_max_kb, of another call):
// the call fails rather than run again.
var ErrJournal = errors.New("result journal")

// Call is the identity of one call: an activity of a workflow's run.
type Call struct {
	Namespace string
	Workflow  string // the workflow's ID
	Run       string // the run's ID
	Activity  string // the activity's ID, the same on each of its attempts
	Type      string // the activity's type (Chat, CallTool, ...)
}

// ID is the call's ID as the tools see it (engine.CallID).
func (c Call) ID() string { return c.Workflow + "/" + c.Run + "/" + c.Activity }

// key is the call's key in the store: the SHA-256 of its identity as JSON,
// which no two calls share whatever their IDs hold.
func (c Call) key() string {
	b, _ := json.Marshal([]string{c.Namespace, c.Workflow, c.Run, c.Activity})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// record is a call's record in the store: its result, or its own failure
// (Failure), which a call answers as surely as a result.
type record struct {
	Call    Call
	Result  json.RawMessage
	Failure *Failure `json:",omitempty"`
}

// Failure is a call's own failure as the journal records it: the
// non-retryable temporal.ApplicationError's message and type, which an
// attempt that finds it answers again (err).
type Failure struct {
	Message string
	Type    string
}

// err is f as the activity's failure: non-retryable, as it was.
func (f *Failure) err() error {
	return temporal.NewNonRetryableApplicationError(f.Message, f.Type, nil)
}

// errRecordMismatch is in Lookup's failure for a record that is not c's.
var errRecordMismatch = errors.New("corrupt or another call's")

// Lookup returns the record of c, if one is.
func (j *Journal) Lookup(c Call) (record, bool, error) {
	data, err := j.Store.Get(c.key(), j.Max)
	if errors.Is(err, fs.ErrNotExist) {
		return record{}, false, nil
	}
	if err != nil {
		hint := ""
		if errors.Is(err, errBlobTooLarge) {
			hint = " ([temporal] journal_max_kb bounds a record)"
		}
		return record{}, false, fmt.Errorf("%w: call %s (%s): %w%s", ErrJournal, c.ID(), c.Type, err, hint)
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil || r.Call != c {
		// Whether the call was made is unknown: removing the record would
		// make it (again, perhaps), so that is the operator's call.
		return record{}, false, fmt.Errorf("%w %s: the record %s of call %s (%s) is %w, so whether the call was made is unknown; "+
			"the call fails rather than risk making it twice",
			ErrJournal, j.Store, c.key(), c.ID(), c.Type, errRecordMismatch)
	}
	return r, true, nil
}

// Record records result as c's, unless the record would be larger than
// j.Max.
func (j *Journal) Record(c Call, result json.RawMessage) error {
	return j.put(record{Call: c, Result: result})
}

// RecordFailure records f as c's own failure.
func (j *Journal) RecordFailure(c Call, f Failure) error {
	return j.put(record{Call: c, Failure: &f})
}

// put stores r, unless it would be larger than j.Max.
func (j *Journal) put(r record) error {
	c := r.Call
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: call %s (%s): %w", ErrJournal, c.ID(), c.Type, err)
	}
	if int64(len(data)) > j.Max {
		return fmt.Errorf("%w: the result of call %s (%s) is %d bytes, more than %d ([temporal] journal_max_kb)",
			ErrJournal, c.ID(), c.Type, len(data), j.Max)
	}
	if err := j.Store.Put(c.key(), data); err != nil {
		return fmt.Errorf("%w: call %s (%s): %w", ErrJournal, c.ID(), c.Type, err)
	}
	return nil
}

// Pruner is a store that can remove what it was given before a time: the
// journal's DirStore.
type Pruner interface {
	Prune(before time.Time) (removed int, err error)
}

// pruneEvery is how often a worker removes the journal's old records.
const pruneEvery = time.Hour

// prune removes, where the store can, the records older than retention,
// now and then every pruneEvery, until ctx ends.
func (j *Journal) prune(ctx context.Context, retention time.Duration, log *slog.Logger) {
	p, ok := j.Store.(Pruner)
	if !ok {
		return
	}
	tick := time.NewTicker(pruneEvery)
	defer tick.Stop()
	for {
		n, err := p.Prune(time.Now().Add(-retention))
		if err != nil {
			log.ErrorContext(ctx, "result journal: removing old records", "store", j.Store.String(), "err", err)
		} else if n > 0 {
			log.InfoContext(ctx, "result journal: old records removed", "store", j.Store.String(), "removed", n, "retention", retention)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// openJournal opens cfg's journal, a DirStore in journalDir, creating
// the directory now (0700: the records are the calls' results, for the
// workers' user alone) so that a worker that cannot write there does not
// start, and logs where it is: the workers of a queue must share it.
func openJournal(cfg *config.Config, log *slog.Logger) (*Journal, error) {
	dir := journalDir(cfg)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %w ([temporal] journal_dir: a directory every worker of the queue shares)", ErrJournal, err)
	}
	log.Info("result journal: every worker of the task queue must share its directory ([temporal] journal_dir)", "dir", dir)
	return &Journal{Store: DirStore{Dir: dir, Private: true}, Max: int64(cfg.Temporal.WithDefaults().JournalMaxKB) << 10}, nil
}

// journalDir is cfg's [temporal] journal_dir, or its default: "journal"
// in payload_dir, else ".morph/journal" beside the config file.
func journalDir(cfg *config.Config) string {
	switch t := cfg.Temporal; {
	case t.JournalDir != "":
		return t.JournalDir
	case t.PayloadDir != "":
		return filepath.Join(t.PayloadDir, "journal")
	}
	return filepath.Join(filepath.Dir(cfg.File), ".morph", "journal")
}

// journaled are the activities whose results the journal records, by
// name, each with the type of its result (nil: it answers only an error):
// every method of Activities but Setup, which describes the worker that
// answers it, and Close, which is no activity.
var journaled = func() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	t := reflect.TypeFor[*Activities]()
	for i := range t.NumMethod() {
		m := t.Method(i)
		if m.Name == "Setup" || m.Name == "Close" || m.Name == "Workers" || m.Name == "EndSession" {
			continue
		}
		out[m.Name] = nil
		if m.Type.NumOut() == 2 {
			out[m.Name] = m.Type.Out(0)
		}
	}
	return out
}()

// journalPoint, when set (by the tests' worker), is called at each point
// of a journaled call: "before" it, once it is "called" and before its
// result is recorded, and once it is "recorded" and before Temporal is
// told. The kill tests kill their worker there.
var journalPoint func(ctx context.Context, point string)

// at calls journalPoint, if set.
func at(ctx context.Context, point string) {
	if journalPoint != nil {
		journalPoint(ctx, point)
	}
}

// journalInterceptor has a worker's activities go through its journal.
type journalInterceptor struct {
	interceptor.WorkerInterceptorBase
	j   *Journal
	log *slog.Logger
}

func (w *journalInterceptor) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &journalActivity{j: w.j, log: w.log}
	i.Next = next
	return i
}

// journalActivity runs one activity through the journal.
type journalActivity struct {
	interceptor.ActivityInboundInterceptorBase
	j   *Journal
	log *slog.Logger
}

// journalFailure is the type (temporal.ApplicationError's Type) of the
// failure of a call the journal failed (ErrJournal): the call may have
// been made, and its result is not recorded, so it is neither retried nor
// an answer (the workflow ends the turn with a *CallError).
const journalFailure = "ResultJournal"

// journalFailed says whether err is a failure the journal made.
func journalFailed(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == journalFailure
}

// ExecuteActivity answers the activity's record, if it has one; else it
// runs the activity, with its call's ID for the tools, and records its
// result, or its own failure (a non-retryable one, a panic included),
// before answering it. A failure of an attempt whose context has ended is
// no answer (lostAttempt), and is not recorded. A journal that fails
// fails the call, not retried: running it again might repeat what it did.
func (i *journalActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	info := activity.GetInfo(ctx)
	typ, ok := journaled[info.ActivityType.Name]
	if !ok {
		return i.Next.ExecuteActivity(ctx, in)
	}
	c := Call{Namespace: info.Namespace, Workflow: info.WorkflowExecution.ID, Run: info.WorkflowExecution.RunID,
		Activity: info.ActivityID, Type: info.ActivityType.Name}
	at(ctx, "before")
	rec, found, err := i.j.Lookup(c)
	if err != nil && !errors.Is(err, errBlobTooLarge) && !errors.Is(err, errNotRegular) && !errors.Is(err, errRecordMismatch) {
		// the journal could not be read (an I/O error of a shared volume):
		// no call was made, so the attempt is retried, as a lost one; if
		// every attempt fails so, the call has no answer (CallError)
		i.log.WarnContext(ctx, "result journal: not read; the attempt is retried", "call", c.ID(), "activity", c.Type, "attempt", info.Attempt, "err", err)
		return nil, temporal.NewApplicationErrorWithCause(safetext.Truncate(err.Error(), failureMessage), journalFailure, nil)
	}
	if err != nil {
		return nil, i.failed(ctx, c, err)
	}
	if found {
		i.log.InfoContext(ctx, "result journal: answered the recorded result, not calling again", "call", c.ID(), "activity", c.Type, "attempt", info.Attempt)
		if rec.Failure != nil {
			return nil, rec.Failure.err()
		}
		if typ == nil {
			return nil, nil
		}
		v := reflect.New(typ)
		if err := json.Unmarshal(rec.Result, v.Interface()); err != nil {
			return nil, i.failed(ctx, c, fmt.Errorf("%w: the record of call %s (%s) is not its result: %w", ErrJournal, c.ID(), c.Type, err))
		}
		return v.Elem().Interface(), nil
	}
	res, callErr := recovered(ctx, i.log, func() (any, error) { return i.Next.ExecuteActivity(engine.WithCallID(ctx, c.ID()), in) })
	var appErr *temporal.ApplicationError
	switch {
	case callErr == nil:
		at(ctx, "called")
		raw, err := json.Marshal(res)
		if err == nil {
			err = i.j.Record(c, raw)
		}
		if err != nil {
			return nil, i.failed(ctx, c, err)
		}
	case ctx.Err() == nil && errors.As(callErr, &appErr) && appErr.NonRetryable():
		at(ctx, "called")
		if err := i.j.RecordFailure(c, Failure{Message: appErr.Message(), Type: appErr.Type()}); err != nil {
			return nil, i.failed(ctx, c, err)
		}
	default:
		return res, callErr // a lost attempt's (lostAttempt): no answer to record
	}
	at(ctx, "recorded")
	return res, callErr
}

// failed logs err, the journal's failure of call c, and returns it as the
// activity's failure (journalFailure).
func (i *journalActivity) failed(ctx context.Context, c Call, err error) error {
	i.log.ErrorContext(ctx, "result journal: the call fails, neither made again nor answered", "call", c.ID(), "activity", c.Type, "err", err)
	return temporal.NewNonRetryableApplicationError(safetext.Truncate(err.Error(), failureMessage), journalFailure, nil)
}

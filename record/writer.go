package record

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Recorder. A cap <= 0 takes its default.
type Options struct {
	MaxBytes     int64    // the file's size; reaching it stops the recording (ErrRecordFull)
	MaxCallBytes int64    // each input and output; a larger one keeps only its size and sha256
	MaxCalls     int      // calls written; more stop the recording (ErrRecordFull)
	Secrets      []Secret // scrubbed from every payload and fault message
	Morph        string   // the morph version, for the header
	Logger       *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxCallBytes <= 0 {
		o.MaxCallBytes = DefaultMaxCallBytes
	}
	if o.MaxCalls <= 0 {
		o.MaxCalls = DefaultMaxCalls
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Recorder writes a record file. Its methods are safe for concurrent use;
// a nil *Recorder records nothing.
type Recorder struct {
	o     Options
	scrub *scrubber
	path  string

	mu      sync.Mutex
	w       io.Writer
	c       io.Closer // nil: the caller's writer, not closed
	sum     Summary
	seq     int64
	stopped bool
	closed  bool
	werr    error // the write error that stopped the recording
	// halted is stopped || closed, read without the lock: a call after the
	// stop is counted and nothing more (no scrubbing or encoding).
	halted atomic.Bool
}

// Create creates the file at path (0600: it holds prompts and tool
// traffic), writes its header, and returns its Recorder. It refuses a
// secret too short to scrub (ErrSecretTooShort), before creating anything.
func Create(path string, o Options) (*Recorder, error) {
	if o.MaxCallBytes > MaxCallBytesLimit {
		return nil, fmt.Errorf("record: MaxCallBytes %d is over MaxCallBytesLimit (%d)", o.MaxCallBytes, MaxCallBytesLimit)
	}
	s, err := newScrubber(o.Secrets)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	r, err := newRecorder(f, path, s, o)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.c = f
	return r, nil
}

// New is a Recorder writing to w, which it does not close.
func New(w io.Writer, o Options) (*Recorder, error) {
	s, err := newScrubber(o.Secrets)
	if err != nil {
		return nil, err
	}
	return newRecorder(w, "", s, o)
}

func newRecorder(w io.Writer, path string, s *scrubber, o Options) (*Recorder, error) {
	o = o.withDefaults()
	r := &Recorder{o: o, scrub: s, w: w, path: path}
	h := Header{Version: Version, Created: time.Now().UTC().Truncate(time.Second), Morph: o.Morph,
		Limits: Limits{MaxBytes: o.MaxBytes, MaxCallBytes: o.MaxCallBytes, MaxCalls: o.MaxCalls}}
	if err := r.write(h); err != nil {
		return nil, err
	}
	return r, nil
}

// Path is the file's path ("" for New's).
func (r *Recorder) Path() string {
	if r == nil {
		return ""
	}
	return r.path
}

// Plugin records that the run loaded p. It is not counted against
// MaxCalls; it is written even once the calls stopped, size permitting.
func (r *Recorder) Plugin(p PluginInfo) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.w == nil {
		return nil
	}
	return r.writeLocked(line{Load: &p})
}

// Call records c (its Seq is set here). It returns ErrRecordFull or
// ErrWrite on the call that stopped the recording, and nil after: the
// caller warns once. A call after the recording stopped is counted as
// dropped.
func (r *Recorder) Call(c Call) error {
	if r == nil {
		return nil
	}
	if r.halted.Load() {
		r.mu.Lock()
		r.sum.Dropped++
		r.mu.Unlock()
		return nil
	}
	var names []string
	in, names := r.scrub.scrub(c.Input, names)
	out, names := r.scrub.scrub(c.Output, names)
	l := line{Plugin: c.Plugin, Export: c.Export, Hook: c.Hook, Tool: c.Tool, Session: c.Session, Turn: c.Turn,
		Input: encode(in, r.o.MaxCallBytes), Output: encode(out, r.o.MaxCallBytes), DurationNS: c.Duration.Nanoseconds()}
	if c.Fault != nil {
		msg, n := r.scrub.scrub([]byte(c.Fault.Message), names)
		names = n
		l.Fault = &Fault{Kind: c.Fault.Kind, Message: FaultMessage(string(msg))}
	}
	slices.Sort(names)
	l.Redacted = names
	b, err := json.Marshal(l)
	if err != nil { // a RawMessage json.Valid passed always marshals
		return fmt.Errorf("record: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.stopped || r.closed:
		r.sum.Dropped++
		return nil
	case r.sum.Calls >= int64(r.o.MaxCalls):
		return r.stopLocked("max_calls", fmt.Errorf("%w: record.max_calls (%d) reached", ErrRecordFull, r.o.MaxCalls))
	}
	r.seq++
	// seq goes first, as the line's first field: splice it in rather
	// than marshal again under the lock.
	b = append(fmt.Appendf(nil, `{"seq":%d,`, r.seq), b[1:]...) // b is never "{}": a call names its plugin
	if r.sum.Bytes+int64(len(b))+1 > r.o.MaxBytes {
		r.seq--
		return r.stopLocked("max_bytes", fmt.Errorf("%w: record.max_bytes (%d bytes) reached after %d calls", ErrRecordFull, r.o.MaxBytes, r.sum.Calls))
	}
	if err := r.lineLocked(b); err != nil {
		r.sum.Dropped++
		return err
	}
	r.sum.Calls++
	return nil
}

// stopLocked stops the recording for reason, counting the call that
// stopped it as dropped, and returns err.
func (r *Recorder) stopLocked(reason string, err error) error {
	r.stopped = true
	r.halted.Store(true)
	r.sum.Stopped = reason
	r.sum.Dropped++
	return err
}

// Summary is what the recording wrote so far.
func (r *Recorder) Summary() Summary {
	if r == nil {
		return Summary{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sum
}

// Close writes the end line and closes the file; later calls are dropped.
// Its error is the end line's or the file's; a recording that stopped on
// a write error reports that error again.
func (r *Recorder) Close() (Summary, error) {
	if r == nil {
		return Summary{}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return r.sum, nil
	}
	r.closed = true
	r.halted.Store(true)
	sum := r.sum
	var err error
	if r.w != nil {
		err = r.writeLocked(line{End: true, Summary: &sum})
	} else {
		err = r.werr
	}
	if r.c != nil {
		if cerr := r.c.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("%w: %w", ErrWrite, cerr)
		}
	}
	return r.sum, err
}

func (r *Recorder) write(v any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writeLocked(v)
}

func (r *Recorder) writeLocked(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	return r.lineLocked(b)
}

// lineLocked writes b and a newline in one write, so that a crash leaves
// at most the line in flight cut. A write error stops the recording: no
// later line is written (the writer is dropped).
func (r *Recorder) lineLocked(b []byte) error {
	b = append(b, '\n')
	n, err := r.w.Write(b)
	r.sum.Bytes += int64(n)
	if err != nil {
		r.w = nil
		r.stopped = true
		r.halted.Store(true)
		r.sum.Stopped = "write: " + err.Error()
		r.werr = fmt.Errorf("%w: %s: %w", ErrWrite, cmp.Or(r.path, "(writer)"), err)
		r.o.Logger.Warn("recording stopped", "err", r.werr)
		return r.werr
	}
	return nil
}

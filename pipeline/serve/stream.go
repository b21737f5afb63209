package serve

import (
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// newRunID names a new run: its start time and random bytes (the
// runner's form, so that a server's and a CLI's runs sort together).
func newRunID() string {
	var b [6]byte
	_, _ = crand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// errSlow ends a stream that did not keep up.
var errSlow = errors.New("the client did not keep up with the run's events")

// subscribe counts a stream of r, within MaxSubscribers.
func (s *Server) subscribe(r *run) (*eventLog, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.subs >= s.opts.MaxSubscribers {
		s.streamsRefused.Add(1)
		return nil, nil, fmt.Errorf("%w: %d streams of run %s are open", errBusy, r.subs, r.id)
	}
	r.subs++
	return r.events, func() { r.mu.Lock(); r.subs--; r.mu.Unlock() }, nil
}

// stream is GET .../events: the run's events as Server-Sent Events, each
// with its seq as id. A Last-Event-ID header resumes after that event; when
// the ring no longer holds the next one, a "gap" event says which is the
// first it holds. A stream ends after the run's run.ended event (unless the
// run was resumed), at the server's shutdown, or, with an "overflow" event,
// when it falls behind the ring.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, run *run) {
	var after int64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, errors.New("Last-Event-ID is the id of an event of this stream: a number"))
			return
		}
		after = n
	}
	events, unsubscribe, err := s.subscribe(run)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	defer unsubscribe()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sw := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: s.opts.WriteTimeout}
	// A stream lasts: no read deadline (a GET has no body; the server's
	// read past it only watches for the client going away).
	_ = sw.rc.SetReadDeadline(time.Time{})
	if tw, ok := w.(*timedWriter); ok {
		tw.stream = true
	}
	if events == nil {
		// A run whose events are forgotten (or were never this server's):
		// its state is all there is.
		run.mu.Lock()
		ev := Event{Seq: run.lastSeen, Kind: KindRunEnded, RunID: run.id, State: run.state, Message: run.errText, Time: time.Now().UTC()}
		run.mu.Unlock()
		if after < ev.Seq || ev.Seq == 0 {
			s.drop(sw.event(ev.Seq, ev.Kind, ev))
		}
		return
	}
	if err := s.follow(r, sw, events, after); err != nil {
		s.drop(err)
	}
}

// drop counts a stream ended for not keeping up.
func (s *Server) drop(err error) {
	if err != nil && (errors.Is(err, errSlow) || errors.Is(err, errWrite)) {
		s.streamsDropped.Add(1)
	}
}

// follow writes events after seq after until the run's end, the client's
// or the server's.
func (s *Server) follow(r *http.Request, sw *sseWriter, events *eventLog, after int64) error {
	ping := time.NewTicker(s.opts.PingInterval)
	defer ping.Stop()
	first := true
	for {
		batch, oldest, last, wake := events.since(after)
		if first && after > last {
			// An id this log never gave (a server's before a restart, whose
			// numbering began again): from the oldest event held.
			if err := sw.event(0, KindGap, map[string]any{"missed_after": after, "first_seq": oldest}); err != nil {
				return err
			}
			after = 0
			batch, _, _, wake = events.since(after)
		} else if after+1 < oldest {
			if !first {
				// Evicted while this stream wrote: it is too slow.
				if err := sw.event(0, KindOverflow, map[string]any{"missed_after": after, "first_seq": oldest}); err != nil {
					return err
				}
				return errSlow
			}
			if err := sw.event(0, KindGap, map[string]any{"missed_after": after, "first_seq": oldest}); err != nil {
				return err
			}
		}
		first = false
		for i, e := range batch {
			if err := sw.raw(e.seq, e.kind, e.data); err != nil {
				return err
			}
			after = e.seq
			if e.final && i == len(batch)-1 && !s.resumedSince(events, e.seq) {
				return sw.flush()
			}
		}
		if err := sw.flush(); err != nil {
			return err
		}
		select {
		case <-wake:
		case <-ping.C:
			if err := sw.comment("ping"); err != nil {
				return err
			}
		case <-r.Context().Done():
			return nil
		case <-s.closing:
			return nil
		}
	}
}

// resumedSince reports whether events after seq exist (a resume's).
func (s *Server) resumedSince(events *eventLog, seq int64) bool {
	_, _, last, _ := events.since(seq)
	return last > seq
}

// eventName is what an SSE event's name may be here: the runner's kinds.
var eventName = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)

// errWrite is a write to a stream that failed or timed out.
var errWrite = errors.New("writing to the stream")

// sseWriter writes Server-Sent Events, each write within its deadline.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (sw *sseWriter) write(s string, data []byte) error {
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout))
	if _, err := sw.w.Write([]byte(s)); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	if data != nil {
		if _, err := sw.w.Write(data); err != nil {
			return fmt.Errorf("%w: %w", errWrite, err)
		}
		if _, err := sw.w.Write([]byte("\n\n")); err != nil {
			return fmt.Errorf("%w: %w", errWrite, err)
		}
	}
	return nil
}

// raw writes an event whose data is JSON already (one line: JSON has no
// raw newline).
func (sw *sseWriter) raw(seq int64, kind string, data []byte) error {
	if !eventName.MatchString(kind) {
		kind = "event" // a name that would break the stream's framing; the data has the kind
	}
	head := "event: " + kind + "\ndata: "
	if seq > 0 {
		head = "id: " + strconv.FormatInt(seq, 10) + "\n" + head
	}
	return sw.write(head, data)
}

// event writes v as an event's JSON data; seq 0 writes no id (the
// server's own notices, which a resume does not count).
func (sw *sseWriter) event(seq int64, kind string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := sw.raw(seq, kind, data); err != nil {
		return err
	}
	return sw.flush()
}

func (sw *sseWriter) comment(text string) error {
	if err := sw.write(": "+text+"\n\n", nil); err != nil {
		return err
	}
	return sw.flush()
}

func (sw *sseWriter) flush() error {
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout))
	if err := sw.rc.Flush(); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	return nil
}

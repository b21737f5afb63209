package guest

import (
	"bytes"
	"context"
	"log/slog"

	"github.com/morphhost/morph/internal/safetext"
)

// LogWriter is one instance's output to the log: its stdout and stderr
// (as an io.Writer), its log calls, and the warnings the host gives about
// them, under the plugin's name, escaped (safetext: a guest's bytes may hold
// terminal escapes), and within Limits.MaxLogBytes of escaped text per call
// (and per instantiation): a chatty or hostile guest cannot flood the
// host's log, and once over the budget its output is dropped with one
// warning. A warning about the guest is given once per call. Like its
// instance, it is used by one goroutine at a time.
type LogWriter struct {
	log    func() *slog.Logger // the plugin's (Env.Log)
	state  *CallState          // its instance's: a write past the call's deadline ends the call
	buf    bytes.Buffer        // a partial line of stdout or stderr
	max    int                 // the budget of a call
	budget int
	capped bool
	warned map[string]bool // the warnings given in this call
}

// refill gives a new call its budget, after logging the partial line the
// last call left: kept across calls, a line that never ends would grow by a
// budget per call, for ever in a pooled instance.
func (w *LogWriter) refill() {
	if w.buf.Len() > 0 {
		w.log().Info(w.buf.String(), "stream", "guest")
		w.buf.Reset()
	}
	w.budget, w.capped = w.max, false
	clear(w.warned)
}

// take escapes what the guest wrote and spends the budget on it, returning
// what fits, all of it or a cut; ok is false when the budget was spent
// already. An empty write costs a byte: no free flood of empty lines.
func (w *LogWriter) take(b []byte) (text string, ok bool) {
	if w.budget == 0 {
		if !w.capped {
			w.capped = true
			w.log().Warn("guest output over the log limit; dropping the rest of this call's", "limit_bytes", w.max)
		}
		return "", false
	}
	text = safetext.Escape(string(b[:min(len(b), w.budget)])) // escaping only lengthens: no need to escape more
	text = text[:min(len(text), w.budget)]
	w.budget -= max(len(text), 1)
	return text, true
}

// Message logs one log call's message.
func (w *LogWriter) Message(ctx context.Context, level slog.Level, msg []byte) {
	if text, ok := w.take(msg); ok {
		w.log().Log(ctx, level, text)
	}
}

// Warn logs a warning about the guest once per call: a guest can make the
// host warn as often as it calls it.
func (w *LogWriter) Warn(ctx context.Context, msg string, args ...any) {
	if w.warned[msg] {
		return
	}
	if w.warned == nil {
		w.warned = map[string]bool{}
	}
	w.warned[msg] = true
	w.log().WarnContext(ctx, msg+" (once per call)", args...)
}

// Write is the guest's stdout and stderr. WASI's fd_write calls it once per
// buffer the guest lists, millions of them if it likes, so each checks the
// call's deadline.
func (w *LogWriter) Write(b []byte) (int, error) {
	if err := w.state.Expired(); err != nil {
		panic(err) // wazero ends the guest's call with it
	}
	text, _ := w.take(b)
	w.buf.WriteString(text)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil { // no newline yet: keep the partial line
			w.buf.Reset()
			w.buf.WriteString(line)
			break
		}
		w.log().Info(line[:len(line)-1], "stream", "guest")
	}
	return len(b), nil
}

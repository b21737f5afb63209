package telemetry

import (
	"fmt"
	"io"
	"sync"

	"go.opentelemetry.io/otel"

	"github.com/morphhost/morph/internal/safetext"
)

// MaxErrorKinds caps the distinct errors an ErrorHandler prints: an
// unreachable collector fails every export the same way, and a process
// that runs for days should not print a line per export.
const MaxErrorKinds = 16

// maxErrorLine caps one printed error: the SDK's errors quote the
// collector's reply, which can be any length.
const maxErrorLine = 500

// ErrorHandler returns the handler of the OpenTelemetry SDK's own errors
// (a failed export, a dropped span; otel.SetErrorHandler) that prints each
// distinct one once on w as "morph: warning: telemetry: ...", escaped (the
// collector writes part of the text), up to MaxErrorKinds of them and then
// one line saying the rest are not shown. Without it the SDK prints them
// through Go's log package, unescaped and unprefixed.
func ErrorHandler(w io.Writer) otel.ErrorHandler {
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	return otel.ErrorHandlerFunc(func(err error) {
		if err == nil {
			return
		}
		msg := safetext.Line(err.Error(), maxErrorLine)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case seen[msg]:
			return
		case len(seen) == MaxErrorKinds:
			seen[msg] = true // counted past the cap: the note prints once
			fmt.Fprintf(w, "morph: warning: telemetry: more than %d distinct errors; the rest are not shown\n", MaxErrorKinds)
			return
		case len(seen) > MaxErrorKinds:
			return
		}
		seen[msg] = true
		fmt.Fprintf(w, "morph: warning: telemetry: %s\n", msg)
	})
}

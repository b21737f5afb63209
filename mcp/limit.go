package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrRequestTooLarge marks a session ended because its client sent a
// request line longer than Options.MaxRequestBytes (errors.Is); the error
// is a *RequestTooLargeError.
var ErrRequestTooLarge = errors.New("mcp: request too large")

// RequestTooLargeError is the end of a stdio session whose client sent a
// line longer than Limit bytes. A line-delimited stream cannot be read
// past a line it did not buffer, so the session ends: what a client that
// needs larger requests must have raised is the limit.
type RequestTooLargeError struct{ Limit int }

// Error says what was refused and the limit.
func (e *RequestTooLargeError) Error() string {
	return fmt.Sprintf("mcp: a request line over %d bytes (the request limit): the session ended", e.Limit)
}

// Unwrap makes the error ErrRequestTooLarge.
func (e *RequestTooLargeError) Unwrap() error { return ErrRequestTooLarge }

// lineLimit is r, failing with a *RequestTooLargeError once a line runs
// past limit bytes: the SDK's decoder never buffers more of one request.
// (The SDK has a cap of its own, IOTransport.MaxLineLength, but its error
// is unexported and untyped.)
type lineLimit struct {
	io.ReadCloser
	limit int
	line  int // bytes of the current line read so far
}

// Read reads at most what keeps the current line within the limit.
func (l *lineLimit) Read(p []byte) (int, error) {
	if l.line >= l.limit {
		return 0, &RequestTooLargeError{Limit: l.limit}
	}
	if len(p) > l.limit-l.line {
		p = p[:l.limit-l.line]
	}
	n, err := l.ReadCloser.Read(p)
	if i := bytes.LastIndexByte(p[:n], '\n'); i >= 0 {
		l.line = n - i - 1
	} else {
		l.line += n
	}
	return n, err
}

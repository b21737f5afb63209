package openai

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/morphhost/morph/internal/safetext"
)

const (
	// captureBytes is how much of a reply's body an attempt keeps, to
	// quote in an error and to read an error body's cause from (a model
	// the server does not have).
	captureBytes = 512
	// excerptBytes is how much of the captured body an error quotes.
	excerptBytes = 200
)

// capture wraps a reply's body as go-openai reads it, so that Chat can tell
// what the server sent when go-openai's error does not say: the first
// captureBytes bytes, how many bytes were read, and whether the body ended
// as the server meant it to (EOF) or was cut by a read error (a dropped
// connection, a timeout). go-openai hides all three behind a bare decoding
// error, which cannot tell "the server answered with something else" from
// "the connection broke".
type capture struct {
	body  io.ReadCloser
	limit int64 // the most it reads; past it, Read fails with ErrReplyTooLarge
	head  []byte
	n     int64
	ended bool   // the body reached EOF
	err   error  // the first read error other than EOF
	key   string // the API key, scrubbed from the excerpt
}

func (c *capture) Read(p []byte) (int, error) {
	if c.n >= c.limit {
		if c.err == nil {
			c.err = ErrReplyTooLarge
		}
		return 0, ErrReplyTooLarge
	}
	p = p[:min(int64(len(p)), c.limit-c.n)]
	n, err := c.body.Read(p)
	if keep := min(n, captureBytes-len(c.head)); keep > 0 {
		c.head = append(c.head, p[:keep]...)
	}
	c.n += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		c.ended = true
	case err != nil && c.err == nil:
		c.err = err
	}
	return n, err
}

func (c *capture) Close() error { return c.body.Close() }

// cut says the body was cut short by a read error rather than ended by the
// server (or not read to its end, as a decoder stops at the first bad
// byte).
func (c *capture) cut() bool { return c != nil && c.err != nil }

// excerpt is the start of the body, without the API key, escaped and
// quoted for an error message: what a server wrote may hold control
// characters, and may echo the request's headers. It is cut at
// excerptBytes with "..." and no count: the error says the body's size.
func (c *capture) excerpt() string {
	if c == nil {
		return `""`
	}
	head := c.head
	if len(head) <= excerptBytes {
		return strconv.Quote(scrub(string(head), c.key))
	}
	cut := excerptBytes
	for cut > 0 && !utf8.RuneStart(head[cut]) {
		cut--
	}
	return strconv.Quote(scrub(string(head[:cut]), c.key)) + "..."
}

// scrubbedKey replaces the API key in what a server sent back.
const scrubbedKey = "[api key]"

// minScrubbedPrefix is the shortest start of the API key that scrub drops
// at the end of a text cut short (a shorter one is too likely to be
// ordinary text).
const minScrubbedPrefix = 4

// scrub returns s without the API key: a server may echo the request's
// Authorization header back (a debug endpoint as base_url, a proxy's
// error page), and s goes into errors, logs and run directories. A key
// cut at s's end (a capture or an excerpt stopped inside it) goes too. An
// empty key scrubs nothing.
func scrub(s, key string) string {
	if key == "" {
		return s
	}
	s = strings.ReplaceAll(s, key, scrubbedKey)
	for n := len(key) - 1; n >= minScrubbedPrefix; n-- {
		if strings.HasSuffix(s, key[:n]) {
			return s[:len(s)-n] + scrubbedKey
		}
	}
	return s
}

// serverError is an attempt's error as Chat reports it: its text, which
// quotes what the server sent (go-openai puts an error body's message in
// it), escaped and without the API key; the error itself stays reachable
// (errors.As to *goopenai.APIError, errors.Is to ErrReplyTooLarge).
type serverError struct {
	err  error
	text string
}

func (e *serverError) Error() string { return e.text }
func (e *serverError) Unwrap() error { return e.err }

// maxServerErrorBytes caps a serverError's text: go-openai's
// *RequestError quotes the whole error body.
const maxServerErrorBytes = 2 << 10

// serverText wraps an attempt's error as serverError.
func (info *attemptInfo) serverText(err error) error {
	return &serverError{err: err, text: safetext.Line(scrub(err.Error(), info.key), maxServerErrorBytes)}
}

// notCompletion is the error of a 2xx reply that go-openai could not
// decode as a chat completion, when its body was not cut short: the
// server answered, with something else, and a retry will not change
// that, so it says what came back and is not retried.
func (info *attemptInfo) notCompletion(err error) error {
	size := fmt.Sprintf("%s read", plural(int(info.body.n), "byte"))
	if info.body.ended {
		size = plural(int(info.body.n), "byte")
	}
	if hint := info.where(info.status); hint != "" { // an HTML page: the URL is likely wrong
		return fmt.Errorf("openai: chat failed (not retryable)%s; the body (%s) starts %s: %w", hint, size, info.body.excerpt(), err)
	}
	return fmt.Errorf("openai: POST %s answered HTTP %d with a body that is not a chat completion (%s), starting %s: %w",
		info.url, info.status, size, info.body.excerpt(), err)
}

// answeredBadly says the attempt got a 2xx reply whose body go-openai
// could not decode, and which was not cut short: see notCompletion.
func (info *attemptInfo) answeredBadly(err error) bool {
	return info.body != nil && info.status >= http.StatusOK && info.status < http.StatusMultipleChoices &&
		statusOf(err) == 0 && !info.body.cut()
}

// tooLarge is the error of a reply whose body passed the limit: not
// retried, as the same server will likely send the same again.
func (info *attemptInfo) tooLarge(err error) error {
	return fmt.Errorf("openai: POST %s answered HTTP %d with a body over the limit of %s, starting %s: %w",
		info.url, info.status, plural(int(info.maxReply), "byte"), info.body.excerpt(), err)
}

// cutReason is the retry log's reason for an attempt whose reply was cut
// off mid-body, or "" when that is not what happened.
func (info *attemptInfo) cutReason() string {
	if info.status == 0 || !info.body.cut() {
		return ""
	}
	return fmt.Sprintf("reply cut off after %s (HTTP %d); backing off", plural(int(info.body.n), "byte"), info.status)
}

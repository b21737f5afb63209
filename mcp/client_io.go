package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/internal/safetext"
)

// startProcess starts a stdio server in a process group of its own, with
// the entry's environment only, and returns the transport over its pipes
// (stdioClient: its output read a bounded line at a time).
func (c *conn) startProcess() (sdk.Transport, error) {
	cfg := c.srv.cfg
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = cfg.Dir
	cmd.Env = environ(cfg.Env)
	c.stderr = &stderrTail{lines: c.srv.lines}
	cmd.Stderr = c.stderr
	cmd.WaitDelay = cfg.StopGrace // a grandchild holding standard error open does not hold Wait
	inGroup(cmd)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	inR.Close() // the child's ends: its copies stay open in it
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("cannot start %s: %w", safetext.Quote(cfg.Command, 200), err)
	}
	c.cmd, c.exited = cmd, make(chan struct{})
	go func() {
		c.exit = cmd.Wait()
		close(c.exited)
	}()
	c.stdin, c.stdout = inW, outR
	return guard{&stdioClient{c: c, r: outR, w: inW}, c.srv}, nil
}

// stdioClient is morph's side of a stdio server's connection, in place of
// the SDK's IOTransport: the server's output is read with readLine, as
// morph's own stdio server reads its clients, strict NDJSON (one message a
// line, as the specification requires) and at most the connection's limit
// of one line kept. A line over the limit is read to its end without being
// kept and costs one call, not the connection (see oversized); a line that
// is not one JSON-RPC message (a message spread over lines, a batch) ends
// the connection with ErrBadMessage as its cause. Lines are decoded by
// decodeMessage, as morph's server decodes its clients'. (The SDK decodes a JSON
// stream, and its own cap fails with an untyped error, ending the
// connection.)
type stdioClient struct {
	c *conn
	r io.ReadCloser // the server's standard output
	w io.WriteCloser
}

// Connect starts the reader.
func (t *stdioClient) Connect(context.Context) (sdk.Connection, error) {
	sc := &stdioClientConn{t: t, in: make(chan jsonrpc.Message), readErr: make(chan error, 1), wmu: make(chan struct{}, 1), closed: make(chan struct{})}
	go sc.read()
	return sc, nil
}

// stdioClientConn is a stdioClient's connection.
type stdioClientConn struct {
	t       *stdioClient
	in      chan jsonrpc.Message
	readErr chan error    // the reader's end (io.EOF when the server closed its output)
	wmu     chan struct{} // one slot: held by the write under way
	once    sync.Once
	closed  chan struct{}
}

// SessionID is empty: stdio has no session id.
func (*stdioClientConn) SessionID() string { return "" }

// Read returns the next message of the server's.
func (sc *stdioClientConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-sc.in:
		return m, nil
	case err := <-sc.readErr:
		return nil, err
	case <-sc.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write writes msg as one line, within ctx: a server that does not read
// its input holds a write only until the call's context ends (its
// timeout, its caller's cancel), and the writes queued behind it no
// longer than theirs. A write cut short leaves part of a line on the
// server's input, which nothing can follow: the connection is then marked
// broken and closed, so that the calls on it fail and the next one
// restarts the server. (The SDK's IOTransport blocks until the
// connection is closed.)
func (sc *stdioClientConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("mcp: encoding a message: %w", err)
	}
	select {
	case sc.wmu <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-sc.closed:
		return io.ErrClosedPipe
	}
	defer func() { <-sc.wmu }()
	if ctx.Err() != nil { // ended while it waited: nothing written
		return ctx.Err()
	}
	line := append(b, '\n')
	f, pollable := sc.t.w.(*os.File)
	if !pollable {
		_, err = sc.t.w.Write(line)
		return err
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		f.SetWriteDeadline(time.Now()) // ends the write under way
		close(fired)
	})
	n, err := f.Write(line)
	if !stop() {
		<-fired
		if err == nil || n == 0 { // the line was written whole, or not at all: the connection goes on
			f.SetWriteDeadline(time.Time{})
		}
	}
	if err != nil && ctx.Err() != nil {
		if n > 0 {
			sc.t.c.broke(fmt.Errorf("%w: the server did not read its input: a message cut after %d of its %d bytes when its call ended (%w)",
				ErrServerDown, n, len(line), context.Cause(ctx)))
			sc.Close()
		}
		return ctx.Err()
	}
	return err
}

// Close closes both pipes, which ends the reader.
func (sc *stdioClientConn) Close() error {
	sc.once.Do(func() {
		close(sc.closed)
		sc.t.r.Close()
		sc.t.w.Close()
	})
	return nil
}

// read hands Read each message of the server's until its output ends or a
// line is not JSON-RPC.
func (sc *stdioClientConn) read() {
	c := sc.t.c
	br := bufio.NewReaderSize(sc.t.r, 64<<10)
	for {
		line, tail, err := readLine(br, c.limit)
		var m jsonrpc.Message
		switch {
		case tail != nil:
			m = c.oversized(line, tail)
		case len(line) > 0:
			var derr error
			if m, derr = decodeMessage(line); derr != nil { // the server side's decoder (wire.go): one reader, one decoder
				err = fmt.Errorf("%w: a line that is not one JSON-RPC message (%s): %w", ErrBadMessage, safetext.Quote(string(line[:min(len(line), 80)]), 100), derr)
				c.broke(err)
			}
		}
		if m != nil {
			select {
			case sc.in <- m:
			case <-sc.closed:
				return
			}
		}
		if err != nil {
			sc.readErr <- err
			return
		}
	}
}

// oversized is what a line of the server's over the connection's limit,
// read without being kept, becomes: an error answer to the call whose id
// is at the line's first or last bytes (lineID), so that this call fails
// with ErrOutputTooLarge and the connection goes on; nil (the line
// skipped) when no id is found or the line is a request or notification
// of the server's. Each is counted (ServerStats.MessagesTooLarge); the
// first of a server's is logged.
func (c *conn) oversized(line, tail []byte) jsonrpc.Message {
	err := c.overLimit("an answer")
	if c.srv.tooLarge.Add(1) == 1 {
		c.srv.log.Warn("mcp server sent a message over the limit: skipped, its call failed; the next are counted (Stats), not logged", "error", err)
	}
	id := lineID(line, tail)
	if !id.IsValid() {
		return nil
	}
	switch request, response := messageKind(line); {
	case request:
		return nil
	case !response: // no telling key among the kept bytes: as before, a "method" anywhere kept makes it a request
		method := []byte(`"method"`)
		if bytes.Contains(line, method) || bytes.Contains(tail, method) {
			return nil
		}
	}
	return &jsonrpc.Response{ID: id, Error: err}
}

// messageKind tells a message's kind from the first of its object's
// top-level keys that tells it, among b, the message's first bytes:
// "method" or "params" make it a request (or notification), "result" or
// "error" a response; keys nested deeper, and strings (a tool's text that
// mentions "method"), do not count. Neither is set when b's top-level keys
// do not tell.
func messageKind(b []byte) (request, response bool) {
	depth, inString, escaped, key, start := 0, false, false, false, 0
	for i, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
				if depth == 1 && key {
					switch string(b[start:i]) {
					case "method", "params":
						return true, false
					case "result", "error":
						return false, true
					}
					key = false
				}
			}
			continue
		}
		switch c {
		case '"':
			inString, start = true, i+1
		case '{', '[':
			depth++
			key = depth == 1 && c == '{'
		case '}', ']':
			depth--
		case ',':
			key = depth == 1
		}
	}
	return false, false
}

// requestsPerSecond is how many requests of a server's (ping, roots/list,
// ...) a stdio connection passes to the SDK in a second; the others are
// dropped, unanswered, and counted.
const requestsPerSecond = 100

// guard is a stdio server's transport with what the server sends unasked
// handled before the SDK's connection sees it. The SDK queues incoming
// notifications and requests for its handlers in a slice it does not
// bound; here notifications are handled on the reading goroutine (counted,
// logged through the rate limit, a list change signalled) and never
// queued, and requests past requestsPerSecond are dropped. (Over HTTP the
// SDK's connection cannot be wrapped: it relies on an unexported method of
// its own type. There its handlers, which do the same cheap work, run.)
type guard struct {
	sdk.Transport
	srv *server
}

// Connect connects and guards the connection.
func (g guard) Connect(ctx context.Context) (sdk.Connection, error) {
	conn, err := g.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &guardConn{Connection: conn, srv: g.srv}, nil
}

// guardConn is a guarded connection.
type guardConn struct {
	sdk.Connection
	srv    *server
	window time.Time // only Read, which the SDK calls from one goroutine, uses these
	n      int
}

// Read returns the next response, or request within the rate; it handles
// notifications itself.
func (c *guardConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return nil, err
		}
		req, ok := msg.(*jsonrpc.Request)
		switch {
		case !ok:
			return msg, nil
		case req.IsCall():
			if now := time.Now(); now.Sub(c.window) >= time.Second {
				c.window, c.n = now, 0
			}
			if c.n++; c.n <= requestsPerSecond {
				return msg, nil
			}
			c.srv.requestsDropped.Add(1)
		case req.Method == "notifications/tools/list_changed":
			c.srv.listChanged(ctx, nil)
		case req.Method == "notifications/message":
			var p sdk.LoggingMessageParams
			_ = json.Unmarshal(req.Params, &p) // a message that does not decode is logged empty
			c.srv.logMessage(ctx, &sdk.LoggingMessageRequest{Params: &p})
		case req.Method == "notifications/progress":
			var p sdk.ProgressNotificationParams
			_ = json.Unmarshal(req.Params, &p) // one that does not decode is counted, not forwarded
			c.srv.progress(ctx, &p)
		default:
			c.srv.notifications.Add(1)
		}
	}
}

// closePipes closes morph's ends of a stdio server's pipes, for a session
// that never began (the SDK's transport closes them otherwise).
func (c *conn) closePipes() {
	c.stdin.Close()
	c.stdout.Close()
}

// baseEnv are the variables of morph's environment a stdio server gets
// when its entry does not set them: PATH, to find what it runs (`npx`
// runs npm, which runs node, found through PATH); HOME, where npm and
// most tools keep their caches and settings. Nothing else, so neither the
// model's API key nor any other secret of morph's reaches a server not
// given it by name.
var baseEnv = []string{"PATH", "HOME"}

// environ is a stdio server's environment: env, and baseEnv from morph's.
func environ(env map[string]string) []string {
	out := []string{}
	for _, k := range baseEnv {
		if _, set := env[k]; !set {
			if v, ok := os.LookupEnv(k); ok {
				out = append(out, k+"="+v)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// tooLarge is the error of a message of the server's longer than the
// connection's limit, recorded as the connection's end's cause.
func (c *conn) tooLarge(what string) error {
	err := c.overLimit(what)
	c.broke(err)
	return err
}

// overLimit is the error of a message of the server's longer than the
// connection's limit.
func (c *conn) overLimit(what string) error {
	return fmt.Errorf("%w: %s over %d bytes (the larger of max_output_kb = %d and %d KiB, and %d KiB for the message around it)",
		ErrOutputTooLarge, what, c.limit, c.srv.cfg.MaxOutputBytes>>10, minWireBytes>>10, wireMargin>>10)
}

// httpLimit is an HTTP server's transport: it adds the entry's headers to
// every request and caps every response body that is not an event stream
// at the connection's limit. (The SDK reads a JSON response, and an error
// response, with io.ReadAll: a server could answer gigabytes. Events are
// capped by StreamableClientTransport.MaxEventSize.)
type httpLimit struct {
	base    http.RoundTripper
	headers map[string]string
	c       *conn
}

// RoundTrip sends req with the headers and caps the response's body.
func (t *httpLimit) RoundTrip(req *http.Request) (*http.Response, error) {
	// The request ends when the connection closes, too: the SDK sends a
	// call's request under a context of its own, which a call's timeout
	// does not end, so a server that never answers would hold it open.
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(t.c.closing, cancel)
	release := func() { stop(); cancel() }
	req = req.Clone(ctx)
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		release()
		return nil, err
	}
	body := &released{ReadCloser: resp.Body, release: release}
	resp.Body = body
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		resp.Body = &bodyLimit{ReadCloser: body, left: t.c.limit, c: t.c}
	}
	return resp, nil
}

// released is a response body that releases its request's context when
// closed.
type released struct {
	io.ReadCloser
	release func()
}

// Close closes the body and releases the context.
func (r *released) Close() error {
	err := r.ReadCloser.Close()
	r.release()
	return err
}

// bodyLimit fails a body read past left bytes.
type bodyLimit struct {
	io.ReadCloser
	left int
	c    *conn
}

// Read reads, and fails once the body runs past the limit.
func (b *bodyLimit) Read(p []byte) (int, error) {
	if len(p) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if b.left -= n; b.left < 0 {
		return 0, b.c.tooLarge("a response body")
	}
	return n, err
}

// stderrTailBytes is how much of a stdio server's standard error is kept
// for the error that tells of its end.
const stderrTailBytes = 2048

// maxLineBytes caps a line of a server's that is logged (standard error, a
// log message).
const maxLineBytes = 1024

// stderrTail is a stdio server's standard error: each line logged (through
// the server's rateLog), the last stderrTailBytes kept. Neither grows with
// what the server writes.
type stderrTail struct {
	lines *rateLog
	mu    sync.Mutex
	line  []byte // the line being written, at most maxLineBytes
	long  bool   // the line ran past maxLineBytes
	tail  []byte
}

// Write logs each complete line and keeps the tail.
func (w *stderrTail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tail = append(w.tail, p[max(0, len(p)-stderrTailBytes):]...)
	w.tail = w.tail[max(0, len(w.tail)-stderrTailBytes):]
	for rest := p; len(rest) > 0; {
		i := slices.Index(rest, '\n')
		chunk := rest
		if i >= 0 {
			chunk = rest[:i]
		}
		if room := maxLineBytes - len(w.line); len(chunk) > room {
			chunk, w.long = chunk[:room], true
		}
		w.line = append(w.line, chunk...)
		if i < 0 {
			break
		}
		text := string(w.line)
		if w.long {
			text += " (line cut)"
		}
		w.lines.line("mcp server stderr", text)
		w.line, w.long, rest = w.line[:0], false, rest[i+1:]
	}
	return len(p), nil
}

// String is the tail, escaped as one line.
func (w *stderrTail) String() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return safetext.Line(string(w.tail), 0)
}

// linesPerSecond is how many lines of a server's (standard error, log
// messages) are logged in a second; the others are counted.
const linesPerSecond = 20

// rateLog logs a server's lines, escaped and cut, at most linesPerSecond.
type rateLog struct {
	log     *slog.Logger
	mu      sync.Mutex
	window  time.Time
	n       int
	dropped atomic.Int64
	unsaid  int64 // dropped since the last line logged
}

// line logs text (a server's) at Info under msg, with attrs, unless the
// rate is spent.
func (r *rateLog) line(msg, text string, attrs ...any) {
	r.mu.Lock()
	now := time.Now()
	if now.Sub(r.window) >= time.Second {
		r.window, r.n = now, 0
	}
	if r.n >= linesPerSecond {
		r.dropped.Add(1)
		r.unsaid++
		r.mu.Unlock()
		return
	}
	r.n++
	if r.unsaid > 0 {
		attrs = append(attrs, "lines_not_logged", r.unsaid)
		r.unsaid = 0
	}
	r.mu.Unlock()
	r.log.Info(msg, append([]any{"text", safetext.Line(text, maxLineBytes)}, attrs...)...)
}

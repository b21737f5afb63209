package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrRequestTooLarge marks a request refused because it was longer than
// Options.MaxRequestBytes (errors.Is); the error is a *RequestTooLargeError.
var ErrRequestTooLarge = errors.New("mcp: request too large")

// RequestTooLargeError is a stdio request line longer than Limit bytes.
// It is answered with a JSON-RPC error (to the request's id when it can be
// read from the line's first or last bytes, else null), counted
// (Server.Refusals) and logged; the line is skipped without being
// buffered, and the session goes on.
type RequestTooLargeError struct{ Limit int }

// Error says what was refused and the limit.
func (e *RequestTooLargeError) Error() string {
	return fmt.Sprintf("mcp: a request line over %d bytes (max_request_kb) was refused", e.Limit)
}

// Unwrap makes the error ErrRequestTooLarge.
func (e *RequestTooLargeError) Unwrap() error { return ErrRequestTooLarge }

// ErrClientStalled is the end of a stdio session whose client stopped
// reading: an answer could not be written when Serve's context ended.
var ErrClientStalled = errors.New("mcp: the client stopped reading its answers")

// stdioTransport is MCP's stdio transport (newline-delimited JSON-RPC, one
// message per line, as the specification requires), in place of the
// SDK's IOTransport, for three things a hostile or broken client must not
// do to the server:
//   - a message spread over many lines (the SDK decodes a JSON stream, not
//     lines) or one long line cannot make it buffer more than the limit;
//   - a line that is too long, not JSON, or a batch is answered with a
//     JSON-RPC error and skipped, where the SDK would end the session (for
//     stdio, the whole server), losing the answers already due;
//   - a client that stops reading cannot stop the server: a write waits
//     for the client only until stop is closed (Serve's context ended).
type stdioTransport struct {
	r      io.ReadCloser
	w      io.WriteCloser
	limit  int
	stop   <-chan struct{}
	refuse func(error)   // told of every refused line
	wrote  chan struct{} // closed when the writer is done
	// pending bounds the requests read and not yet answered: the reader
	// waits for an answer before it reads past them, so a client that
	// floods (or stops reading) meets backpressure, not a growing queue.
	pending int
}

// Connect starts the transport's reader and writer.
func (t *stdioTransport) Connect(context.Context) (sdk.Connection, error) {
	c := &stdioConn{t: t, in: make(chan jsonrpc.Message), out: make(chan []byte), closed: make(chan struct{}),
		dead: make(chan struct{}), readErr: make(chan error, 1), slots: make(chan struct{}, t.pending), ids: map[any]bool{}}
	go c.read()
	go c.write()
	return c, nil
}

type stdioConn struct {
	t       *stdioTransport
	in      chan jsonrpc.Message
	out     chan []byte
	readErr chan error    // the reader's end (io.EOF when the client closed)
	slots   chan struct{} // a request read and not answered holds one

	mu  sync.Mutex
	ids map[any]bool // the ids of the requests read and not yet answered

	once   sync.Once
	closed chan struct{} // Close was called: reading stops
	dead   chan struct{} // writing failed: the client is gone
}

// SessionID is empty: stdio has no session id.
func (*stdioConn) SessionID() string { return "" }

// Read returns the next message; a refused line never reaches the SDK.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.in:
		return m, nil
	case err := <-c.readErr:
		return nil, err
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write hands msg to the writer. It waits while the client is slow, but
// not past stop, so that a client that never reads cannot hold Serve.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("mcp: encoding a message: %w", err)
	}
	if err := c.send(ctx, b); err != nil {
		return err
	}
	if r, ok := msg.(*jsonrpc.Response); ok && r.ID.IsValid() {
		c.mu.Lock()
		read := c.ids[r.ID.Raw()]
		delete(c.ids, r.ID.Raw())
		c.mu.Unlock()
		if read {
			<-c.slots
		}
	}
	return nil
}

func (c *stdioConn) send(ctx context.Context, b []byte) error {
	b = append(b, '\n')
	select { // a writer that is free takes it, stop or not
	case c.out <- b:
		return nil
	default:
	}
	select {
	case c.out <- b:
		return nil
	case <-c.dead:
		return io.ErrClosedPipe
	case <-c.t.stop:
		return ErrClientStalled
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops reading. Writing goes on until stop: the SDK closes the
// connection when the client closes its end, then writes the answers of
// the calls still running (a client may send its requests and close).
func (c *stdioConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.t.r.Close()
	})
	return nil
}

// write writes what Write hands it, until stop. A write the client is not
// taking goes on until the process ends: a pipe write cannot be
// interrupted.
func (c *stdioConn) write() {
	defer close(c.t.wrote)
	defer c.t.w.Close()
	for {
		select {
		case b := <-c.out:
			if _, err := c.t.w.Write(b); err != nil {
				close(c.dead)
				c.Close()
				return
			}
		case <-c.t.stop:
			return
		}
	}
}

func (c *stdioConn) read() {
	br := bufio.NewReaderSize(c.t.r, 64<<10)
	for {
		line, tail, err := readLine(br, c.t.limit)
		if len(line) > 0 || tail != nil {
			if m := c.decode(line, tail); m != nil && !c.deliver(m) {
				return
			}
		}
		if err != nil {
			c.readErr <- err
			return
		}
	}
}

// deliver hands m to Read, first taking a slot for a request to be
// answered; false once the connection is closed.
func (c *stdioConn) deliver(m jsonrpc.Message) bool {
	if r, ok := m.(*jsonrpc.Request); ok && r.ID.IsValid() {
		select {
		case c.slots <- struct{}{}:
		case <-c.closed:
			return false
		}
	}
	select {
	case c.in <- m:
		return true
	case <-c.closed:
		return false
	}
}

// decode is line's message, or nil after answering a line refused.
func (c *stdioConn) decode(line, tail []byte) jsonrpc.Message {
	var refusal error
	code := int64(jsonrpc.CodeInvalidRequest)
	switch {
	case tail != nil:
		refusal = &RequestTooLargeError{Limit: c.t.limit}
	case line[0] == '[':
		refusal = errors.New("mcp: a JSON-RPC batch was refused: send one message per line")
	default:
		m, err := decodeMessage(line)
		if err != nil {
			refusal, code = fmt.Errorf("mcp: a line that is not a JSON-RPC message was refused: %w", err), jsonrpc.CodeParseError
			break
		}
		r, ok := m.(*jsonrpc.Request)
		if !ok || !r.ID.IsValid() {
			return m
		}
		// The SDK drops a request whose id a running one has, unanswered:
		// its slot would never be freed.
		c.mu.Lock()
		inUse := c.ids[r.ID.Raw()]
		c.ids[r.ID.Raw()] = true
		c.mu.Unlock()
		if !inUse {
			return m
		}
		refusal = fmt.Errorf("mcp: a request whose id %v a request not yet answered has was refused", r.ID.Raw())
	}
	c.t.refuse(refusal)
	// By hand: the SDK's encoding leaves out a null id, which JSON-RPC
	// requires here.
	b, _ := json.Marshal(struct {
		Version string        `json:"jsonrpc"`
		ID      any           `json:"id"`
		Error   jsonrpc.Error `json:"error"`
	}{"2.0", lineID(line, tail).Raw(), jsonrpc.Error{Code: code, Message: refusal.Error()}})
	if err := c.send(context.Background(), b); err != nil {
		c.Close()
	}
	return nil
}

// readLine reads one line without its end, spaces trimmed. A line over
// limit bytes is read to its end without being kept: line is then its
// first bytes and tail its last (non-nil), for lineID.
func readLine(br *bufio.Reader, limit int) (line, tail []byte, err error) {
	const keep = 256
	for {
		chunk, rerr := br.ReadSlice('\n')
		switch {
		case tail != nil: // the window slides in place: a long line costs no allocation a chunk
			tail = append(tail, chunk[max(0, len(chunk)-keep):]...)
			tail = tail[:copy(tail, tail[max(0, len(tail)-keep):])]
		case len(line)+len(trimEnd(chunk)) > limit:
			line = append(line, chunk...)[:min(keep, len(line)+len(chunk))]
			tail = append([]byte{}, chunk[max(0, len(chunk)-keep):]...)
		default:
			line = append(line, chunk...)
		}
		if rerr != bufio.ErrBufferFull {
			if tail != nil {
				tail = trimSpace(tail)
			}
			return trimSpace(line), tail, rerr
		}
	}
}

// trimEnd is b without its line end (the limit counts the message alone).
func trimEnd(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// Where a request's id is found in a line that cannot be decoded: first
// (or after "jsonrpc", as Go's and Python's SDKs write it) or last (as
// the TypeScript SDK writes it).
var (
	idFirst = regexp.MustCompile(`^\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")`)
	idLast  = regexp.MustCompile(`"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")\s*\}$`)
)

// lineID is the id of the request on a refused line, when it can be read;
// else the null id JSON-RPC prescribes.
func lineID(line, tail []byte) jsonrpc.ID {
	if tail == nil {
		tail = line
	}
	for _, m := range [][][]byte{idFirst.FindSubmatch(line), idLast.FindSubmatch(tail)} {
		if m == nil {
			continue
		}
		var v any
		if json.Unmarshal(m[1], &v) == nil {
			if id, err := jsonrpc.MakeID(v); err == nil {
				return id
			}
		}
	}
	return jsonrpc.ID{}
}

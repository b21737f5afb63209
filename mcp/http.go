package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/internal/httpguard"
)

// DefaultSessionIdle is how long an HTTP session may go without a request
// before it is ended (and its instances released) when
// HTTPOptions.SessionIdle is zero: a client that went away without a
// DELETE must not hold instances for ever.
const DefaultSessionIdle = 30 * time.Minute

// ErrNoToken is the refusal to serve HTTP on an address other than
// loopback without a bearer token: anyone who can reach the address could
// run the tools.
var ErrNoToken = errors.New("mcp: serving HTTP beyond loopback needs a bearer token")

// HTTPOptions configure Handler.
type HTTPOptions struct {
	// Loopback is whether the listener's address is loopback. Beyond
	// loopback, Token is required.
	Loopback bool
	// Token, when set, is the bearer token every request must carry
	// (401 without it).
	Token string
	// AllowedOrigins are the origins (scheme://host[:port], exactly) a
	// browser's request may come from besides the loopback ones
	// (http or https on localhost, 127.0.0.1 or [::1], any port), which are
	// allowed when Loopback is set. A request with any other Origin header
	// is refused with 403 (DNS-rebinding protection); one without an Origin
	// header (not from a browser) is not concerned.
	AllowedOrigins []string
	// SessionIdle ends a session with no request for this long; zero is
	// DefaultSessionIdle.
	SessionIdle time.Duration
	// WriteTimeout bounds each write of an answer or a notification to a
	// client: one that stops reading fails its write past it, which ends
	// the request (and lets its session end), rather than holding a
	// handler, a session's instances and shutdown for ever. Zero is
	// DefaultWriteTimeout.
	WriteTimeout time.Duration
	// MaxBytesInFlight bounds the request bodies of the POSTs being served
	// at once (each weighs its Content-Length, at least 4 KiB, and
	// Options.MaxRequestBytes when unknown): the SDK reads and decodes a
	// body before any per-session cap sees it, and a call holds its
	// arguments while it runs. One more is refused with 503 and a JSON-RPC
	// error naming the limit, and counted (Refusals.Requests). Zero is
	// DefaultMaxBytesInFlight.
	MaxBytesInFlight int
	// MaxSessions bounds the HTTP sessions open at once: a request that
	// would start another is refused with 503 and a JSON-RPC error, and
	// counted (Server.Refusals). Zero is DefaultMaxSessions.
	MaxSessions int
	// EventStoreBytes bounds the events (answers and notifications) kept
	// for clients to resume an SSE stream that dropped (Last-Event-ID),
	// over every session together; past it the oldest are forgotten. Zero
	// is DefaultEventStoreBytes; negative keeps none (a dropped stream's
	// answers are lost).
	EventStoreBytes int
	// SSEPollAfter, when positive and events are kept, closes the SSE
	// stream of a tool call still running after this long, and again each
	// time the client has resumed it (SEP-1699 polling): the client
	// reconnects with Last-Event-ID, so that no HTTP response is held past
	// what a proxy allows. Only a request of protocol 2025-11-25, whose
	// stream starts with an event id to resume from, is closed. Zero: never.
	SSEPollAfter time.Duration
}

// DefaultMaxBytesInFlight is HTTPOptions.MaxBytesInFlight when zero.
const DefaultMaxBytesInFlight = 256 << 20

// DefaultWriteTimeout is HTTPOptions.WriteTimeout when zero.
const DefaultWriteTimeout = 30 * time.Second

// DefaultMaxSessions is HTTPOptions.MaxSessions when zero.
const DefaultMaxSessions = 256

// DefaultEventStoreBytes is HTTPOptions.EventStoreBytes when zero: 64 KiB
// for each of DefaultMaxSessions, of events not yet forgotten.
const DefaultEventStoreBytes = 16 << 20

// Handler serves the Streamable HTTP transport: each MCP session is an
// engine session, ended (its session-isolated instances released) when
// the client deletes it or it is idle for SessionIdle. Beside the SDK's
// own checks (a loopback listener refuses a Host that is not loopback),
// it refuses a request from an Origin not allowed, and one without the
// bearer token when Token is set.
func (s *Server) Handler(o HTTPOptions) (http.Handler, error) {
	if !o.Loopback && o.Token == "" {
		return nil, ErrNoToken
	}
	if o.SessionIdle <= 0 {
		o.SessionIdle = DefaultSessionIdle
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.MaxBytesInFlight <= 0 {
		o.MaxBytesInFlight = DefaultMaxBytesInFlight
	}
	if o.EventStoreBytes == 0 {
		o.EventStoreBytes = DefaultEventStoreBytes
	}
	var events sdk.EventStore // nil: none kept
	if o.EventStoreBytes > 0 {
		store := sdk.NewMemoryEventStore(nil)
		store.SetMaxBytes(o.EventStoreBytes)
		events = store
		s.pollAfter.Store(int64(o.SSEPollAfter))
	}
	var h http.Handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.sdk }, &sdk.StreamableHTTPOptions{
		Logger:              s.log,
		SessionTimeout:      o.SessionIdle,
		MaxRequestBodyBytes: int64(s.opts.MaxRequestBytes),
		EventStore:          events,
	})
	h = s.admit(int64(o.MaxBytesInFlight), h) // behind the token: a stranger weighs nothing
	if o.Token != "" {
		h = auth.RequireBearerToken(tokenVerifier(o.Token), &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	}
	h = s.sessionCap(o.MaxSessions, h)
	// The SDK writes answers with no deadline, and closing a session
	// waits for its writes.
	write := h
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		write.ServeHTTP(&responseWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: o.WriteTimeout}, r)
	})
	return httpguard.Origins{Allowed: o.AllowedOrigins, Loopback: o.Loopback, Flag: "morph mcp serve --allow-origin"}.Check(h), nil
}

// responseWriter is an http.ResponseWriter with a deadline on each write
// (timeout, when set) and a function called before the first.
type responseWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	first   func()
	once    sync.Once
}

// before runs first once, and sets the write's deadline.
func (w *responseWriter) before() {
	if w.first != nil {
		w.once.Do(w.first)
	}
	if w.timeout > 0 {
		w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	}
}

// after clears the deadline: an idle event stream between writes is not
// a stalled client.
func (w *responseWriter) after() {
	if w.timeout > 0 {
		w.rc.SetWriteDeadline(time.Time{})
	}
}

// WriteHeader writes the status.
func (w *responseWriter) WriteHeader(code int) {
	w.before()
	defer w.after()
	w.ResponseWriter.WriteHeader(code)
}

// Write writes b within the deadline.
func (w *responseWriter) Write(b []byte) (int, error) {
	w.before()
	defer w.after()
	return w.ResponseWriter.Write(b)
}

// Flush flushes within the deadline (the SDK flushes each event).
func (w *responseWriter) Flush() {
	w.before()
	defer w.after()
	w.rc.Flush()
}

// Unwrap is the ResponseWriter wrapped, for http.ResponseController.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// admit serves a POST while the bodies of those being served weigh no
// more than limit bytes with it, and refuses it with 503 otherwise.
func (s *Server) admit(limit int64, next http.Handler) http.Handler {
	var mu sync.Mutex
	var inFlight int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		weight := r.ContentLength
		if weight < 0 || weight > int64(s.opts.MaxRequestBytes) {
			weight = int64(s.opts.MaxRequestBytes)
		}
		weight = max(weight, 4<<10)
		mu.Lock()
		full := inFlight+weight > limit
		if !full {
			inFlight += weight
		}
		mu.Unlock()
		if full {
			s.mu.Lock()
			s.refused.Requests++
			first := s.refused.Requests == 1
			s.mu.Unlock()
			level := slog.LevelDebug
			if first {
				level = slog.LevelWarn
			}
			s.log.Log(r.Context(), level, "mcp: an HTTP request refused: the requests being served are at max_in_flight_kb", "max_in_flight_kb", limit>>10, "remote", r.RemoteAddr)
			refuse(w, fmt.Sprintf("morph: the requests being served hold %d KiB, the most it serves at once (max_in_flight_kb); retry", limit>>10))
			return
		}
		defer func() {
			mu.Lock()
			inFlight -= weight
			mu.Unlock()
		}()
		next.ServeHTTP(w, r)
	})
}

// refuse answers 503 with a JSON-RPC error of message.
func refuse(w http.ResponseWriter, message string) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32000, "message": message}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write(append(b, '\n'))
}

// sessionCap refuses, with 503, a request that would start a session
// (one without a session id) while limit HTTP sessions are open or being
// initialized: an initialize counts from its start until its answer is
// written, by when its session is open (counted from its track), so
// initializes at once cannot pass the cap together. (Between the two, an
// initialize counts twice: one at once with it may be refused early;
// a client that waits for its answer never is.)
func (s *Server) sessionCap(limit int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			s.mu.Lock()
			full := s.httpOpen+s.httpStarting >= limit
			if full {
				s.refused.Sessions++
			} else {
				s.httpStarting++
				started := &responseWriter{ResponseWriter: w, rc: http.NewResponseController(w), first: func() {
					s.mu.Lock()
					s.httpStarting--
					s.mu.Unlock()
				}}
				defer started.once.Do(started.first) // no answer written
				w = started
			}
			s.mu.Unlock()
			if full {
				s.log.Warn("mcp: a new HTTP session refused: the sessions open are at max_sessions", "max_sessions", limit, "remote", r.RemoteAddr)
				refuse(w, fmt.Sprintf("morph: %d MCP sessions are open, the most it serves (max_sessions); end one, or raise the limit", limit))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// tokenVerifier accepts token only. The user id makes the SDK refuse a
// session's requests that carry another identity.
func tokenVerifier(token string) auth.TokenVerifier {
	return func(_ context.Context, got string, _ *http.Request) (*auth.TokenInfo, error) {
		if !httpguard.TokenMatches(got, token) {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: "token"}, nil
	}
}

// track makes ss, an HTTP session just initialized, a morph session, and
// ends that when the SDK ends ss (a DELETE, the idle timeout, Close): the
// SDK has no hook for a session's end, but ss.Wait returns once its
// connection is closed and no request is in flight (see end).
func (s *Server) track(ss *sdk.ServerSession) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		go ss.Close() // not here: Close waits for this handler
		return
	}
	s.ending.Add(1) // under mu: never after CloseSessions' Wait began
	s.mu.Unlock()
	if _, made := s.sessionNew(ss, false); !made {
		s.ending.Done()
		return
	}
	s.mu.Lock()
	s.httpOpen++
	s.mu.Unlock()
	go func() {
		defer s.ending.Done()
		ss.Wait()
		defer func() {
			s.mu.Lock()
			s.httpOpen--
			s.mu.Unlock()
		}()
		if err := s.end(context.Background(), ss); err != nil {
			s.log.Warn("mcp: releasing an ended session", "session", ss.ID(), "error", err)
		}
	}()
}

// trackHTTP is the receiving middleware that tracks each HTTP session at
// its initialize (a stdio session, which has no id, is Serve's).
func (s *Server) trackHTTP(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if ss, ok := req.GetSession().(*sdk.ServerSession); ok && method == "initialize" && err == nil && ss.ID() != "" {
			s.track(ss)
		}
		return res, err
	}
}

// CloseSessions ends every session (canceling its calls in flight) and
// waits until the HTTP sessions' engine sessions are ended, or ctx ends
// (an error wrapping ctx's): for a server shutting down, before its engine
// closes. A session initialized after it is ended at once. A client that
// stopped reading holds its session's end for at most
// HTTPOptions.WriteTimeout.
func (s *Server) CloseSessions(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for _, ses := range s.sessions {
		ses.cancel()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		for ss := range s.sdk.Sessions() {
			ss.Close()
		}
		s.ending.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("mcp: the HTTP sessions did not end: %w", ctx.Err())
	}
}

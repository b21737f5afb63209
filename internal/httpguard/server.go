package httpguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// The defaults of Server's limits.
const (
	// DefaultIdleTimeout closes a keep-alive connection left idle: without
	// it net/http waits for the next request forever (ReadHeaderTimeout
	// starts only once its first bytes arrive), so any client, before any
	// token is checked, could hold connections and goroutines at will.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultReadHeaderTimeout bounds the arrival of a request's header.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultMaxHeaderBytes bounds a request's header (net/http's default
	// is 1 MiB; morph's APIs send a few hundred bytes).
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultShutdownTimeout bounds a shutdown.
	DefaultShutdownTimeout = 10 * time.Second
)

// Server is how morph serves HTTP (mcp serve --http, pipeline serve): one
// place for the connection limits and the listen, serve, shut down
// lifecycle.
type Server struct {
	Handler http.Handler
	// IdleTimeout closes a keep-alive connection idle this long (0:
	// DefaultIdleTimeout).
	IdleTimeout time.Duration
	// ReadHeaderTimeout bounds the arrival of a request's header (0:
	// DefaultReadHeaderTimeout).
	ReadHeaderTimeout time.Duration
	// MaxHeaderBytes bounds a request's header; past it the request is
	// refused with 431 (0: DefaultMaxHeaderBytes).
	MaxHeaderBytes int
	// ShutdownTimeout bounds the shutdown once ctx ends: Drain, then the
	// connections' requests; past it the connections are cut (0:
	// DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// Ready, if set, is called with the listener's address once it
	// listens (the address of a ":0" port).
	Ready func(net.Addr)
	// Drain, if set, is called first on shutdown, with the shutdown's
	// context: the server ends what its handlers wait on (streams,
	// sessions, runs), which would otherwise hold the shutdown.
	Drain func(context.Context)
}

// Serve listens on addr and serves until ctx ends, then shuts down within
// ShutdownTimeout. It returns an error when it cannot listen (wrapping
// the listener's error) or when serving fails before ctx ends; a shutdown
// returns nil.
func (s Server) Serve(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	hs := &http.Server{
		Handler:           s.Handler,
		IdleTimeout:       orDefault(s.IdleTimeout, DefaultIdleTimeout),
		ReadHeaderTimeout: orDefault(s.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		MaxHeaderBytes:    orDefault(s.MaxHeaderBytes, DefaultMaxHeaderBytes),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	if s.Ready != nil {
		s.Ready(ln.Addr())
	}
	select {
	case err := <-served:
		return fmt.Errorf("serving HTTP: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), orDefault(s.ShutdownTimeout, DefaultShutdownTimeout))
	defer cancel()
	if s.Drain != nil {
		s.Drain(sctx)
	}
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving HTTP: %w", err)
	}
	return nil
}

func orDefault[T int | time.Duration](v, d T) T {
	if v > 0 {
		return v
	}
	return d
}

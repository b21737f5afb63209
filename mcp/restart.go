package mcp

import (
	"context"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
)

// revive is the connection a call is to use when it found old ended:
// under RestartOnFailure, a new one, started (and its tools listed again,
// given to the engine) within StartupTimeout, unless MaxRestarts within
// restartWindow are spent or the backoff since the last restart has not
// passed; the error says why not, with what ended old. One restart runs at
// a time: calls that find the same end wait for it and share its outcome.
func (srv *server) revive(ctx context.Context, old *conn) (*conn, error) {
	select {
	case srv.restarting <- struct{}{}:
	case <-ctx.Done(): // the caller gave up waiting for another call's restart
		return nil, fmt.Errorf("%w: waiting for its restart: %w", ErrServerDown, context.Cause(ctx))
	}
	defer func() { <-srv.restarting }()
	cur := srv.current()
	switch {
	case cur == nil:
		return nil, fmt.Errorf("%w: it is stopped", ErrServerDown)
	case cur != old && !cur.isDown(): // restarted while this call waited
		return cur, nil
	case cur != old:
		old = cur
	}
	ended := fmt.Errorf("%w: %w", ErrServerDown, old.explain(sdk.ErrConnectionClosed))
	if srv.cfg.Restart == RestartNever {
		return nil, fmt.Errorf("%w; restart = %q: it stays down until morph starts again", ended, RestartNever)
	}
	now := time.Now()
	for len(srv.restarts) > 0 && now.Sub(srv.restarts[0]) > restartWindow {
		srv.restarts = srv.restarts[1:]
	}
	if n := len(srv.restarts); n >= srv.cfg.MaxRestarts {
		return nil, fmt.Errorf("%w; restarted %d times within %s (max_restarts), it stays down until %s%s",
			ended, n, restartWindow, srv.restarts[0].Add(restartWindow).Format(time.TimeOnly), srv.lastRestartErr())
	} else if n > 0 {
		if wait := srv.restarts[n-1].Add(restartWait(n)).Sub(now); wait > 0 {
			return nil, fmt.Errorf("%w; the next restart in %s%s", ended, wait.Round(time.Millisecond), srv.lastRestartErr())
		}
	}
	srv.restarts = append(srv.restarts, now)
	go old.close(context.Background()) // a process still running has its StopGrace; the new one need not wait
	c, tools, warnings, err := srv.restart(ctx)
	srv.restartErr = err
	if err != nil {
		srv.log.Warn("mcp server's connection ended; it did not restart", "ended", ended, "error", err)
		return nil, fmt.Errorf("%w; it did not restart: %w", ended, err)
	}
	srv.mu.Lock()
	if srv.closed {
		srv.mu.Unlock()
		go c.close(context.Background())
		return nil, fmt.Errorf("%w: it is stopped", ErrServerDown)
	}
	srv.conn = c
	update := srv.update
	srv.mu.Unlock()
	for _, w := range warnings {
		srv.log.Warn("mcp server's tool list after a restart: " + w)
	}
	srv.log.Warn("mcp server's connection ended; it was restarted", "ended", ended, "tools", len(tools),
		"restarts", len(srv.restarts), "max_restarts", srv.cfg.MaxRestarts)
	if update != nil {
		_ = update(context.WithoutCancel(ctx), tools) // the engine logs a refusal, naming the server
	}
	return c, nil
}

// restartWait is how long after the last of n restarts within
// restartWindow the next may run: restartBackoff doubled at each, up to
// maxRestartBackoff (the shift capped: past 34 it would overflow).
func restartWait(n int) time.Duration {
	return min(restartBackoff<<min(max(n-1, 0), 16), maxRestartBackoff)
}

// lastRestartErr is the last failed restart's error, as a clause.
func (srv *server) lastRestartErr() string {
	if srv.restartErr == nil {
		return ""
	}
	return fmt.Sprintf(" (the last restart failed: %v)", srv.restartErr)
}

// restart starts the server again and lists its tools, within its
// StartupTimeout; the start goes on when the call that asked for it ends
// (other calls may wait for it), not past close.
func (srv *server) restart(ctx context.Context) (*conn, []engine.Tool, []string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), srv.cfg.StartupTimeout)
	defer cancel()
	go func() {
		select {
		case <-srv.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	c, listed, err := srv.open(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", ErrStartup, err)
	}
	tools, warnings := srv.tools(listed)
	return c, tools, warnings, nil
}

package mcp

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A call waiting for another call's restart gives up when its context
// ends, with ErrServerDown and the context's cause (review s35 M4).
func TestReviveWaitHonoursContext(t *testing.T) {
	srv := &server{cfg: ServerConfig{Name: "fx"}, restarting: make(chan struct{}, 1)}
	srv.restarting <- struct{}{} // a restart under way
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := srv.revive(ctx, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrServerDown) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err %v, want ErrServerDown and the context's deadline", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("revive waited for a restart under way past its context's end")
	}
}

// The wait between restarts doubles up to maxRestartBackoff and never
// overflows into a zero or negative wait, whatever max_restarts allows
// (review s35 L1).
func TestRestartWait(t *testing.T) {
	for n, want := range map[int]time.Duration{1: restartBackoff, 2: 2 * restartBackoff, 35: maxRestartBackoff, 36: maxRestartBackoff, 64: maxRestartBackoff, 1000: maxRestartBackoff} {
		if got := restartWait(n); got != want {
			t.Errorf("restartWait(%d) = %s, want %s", n, got, want)
		}
	}
}

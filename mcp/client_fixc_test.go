package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/mcp"
)

// A stdio server that stops reading its input: a call whose request does
// not fit the pipe still ends within its timeout (the write is cut, the
// connection broken), and closing the servers returns: the process group
// is killed after StopGrace whatever the SDK's session close does.
func TestClientDeafServerCallTimeout(t *testing.T) {
	t.Parallel()
	cfg := fixtureServer("fx", "deaf")
	cfg.Timeout = 2 * time.Second
	cfg.StopGrace = time.Second
	eng, servers, _, err := clientEngine(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sleep, _ := eng.Registry().Get("fx.sleep")
	echo, _ := eng.Registry().Get("fx.echo")
	if sleep == nil || echo == nil {
		t.Fatalf("tools: %v", eng.Registry().Names())
	}
	go sleep.Execute(context.Background(), nil) // the server stops reading
	time.Sleep(500 * time.Millisecond)
	done := make(chan error, 1)
	go func() {
		_, err := echo.Execute(context.Background(), map[string]any{"message": strings.Repeat("x", 1<<20)})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, mcp.ErrCallTimeout) && !errors.Is(err, mcp.ErrServerDown) {
			t.Errorf("err %v, want ErrCallTimeout or ErrServerDown", err)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("a call with a 2s timeout still blocked after 45s: the request's write ignores its context")
	}
	closed := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		servers.Close(ctx)
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(45 * time.Second):
		t.Fatal("Servers.Close with a 10s deadline did not return within 45s")
	}
}

// Closing the servers returns within its deadline and StopGrace while a
// call's write is held by a server that does not read its input (the
// call's own timeout far away): the process group is killed, the pipes
// closed, whatever the SDK's session close waits for.
func TestClientDeafServerClose(t *testing.T) {
	t.Parallel()
	cfg := fixtureServer("fx", "deaf")
	cfg.Timeout = 10 * time.Minute
	cfg.StopGrace = time.Second
	eng, servers, _, err := clientEngine(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sleep, _ := eng.Registry().Get("fx.sleep")
	echo, _ := eng.Registry().Get("fx.echo")
	if sleep == nil || echo == nil {
		t.Fatalf("tools: %v", eng.Registry().Names())
	}
	go sleep.Execute(context.Background(), nil) // the server stops reading
	time.Sleep(500 * time.Millisecond)
	done := make(chan error, 1)
	go func() {
		_, err := echo.Execute(context.Background(), map[string]any{"message": strings.Repeat("x", 1<<20)})
		done <- err
	}()
	time.Sleep(500 * time.Millisecond)
	closed := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		servers.Close(ctx)
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(45 * time.Second):
		t.Fatal("Servers.Close with a 3s deadline did not return within 45s: a write held by a server that does not read holds the close")
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("the call whose write was held succeeded")
		}
	case <-time.After(45 * time.Second):
		t.Fatal("the call whose write was held did not end within 45s of the close")
	}
}

// By default (forward_logs off) a server's log messages reach no caller,
// not even the one call in flight's: a log message names no call, and may
// be about another caller's; progress, which names its call, still does.
func TestClientLogsNotForwardedByDefault(t *testing.T) {
	t.Parallel()
	eng, _, _, err := clientEngine(t, fixtureServer("fx", "ok"))
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := eng.Registry().Get("fx.progress")
	notes := &callNotes{token: "caller's"}
	ctx, cancel := context.WithTimeout(engine.WithCallNotifier(context.Background(), notes), 2*time.Minute)
	defer cancel()
	if out, _, err := tool.(engine.ImageTool).ExecuteImages(ctx, nil); err != nil || out != "token sent: true" {
		t.Fatalf("progress: %q, %v", out, err)
	}
	notes.mu.Lock()
	defer notes.mu.Unlock()
	if len(notes.progress) != 3 || len(notes.logs) != 0 {
		t.Errorf("progress %q, logs %q; want 3 progress, no log message", notes.progress, notes.logs)
	}
}

// blockedNotes is a CallNotifier whose Progress blocks until released: a
// caller that does not read.
type blockedNotes struct {
	entered, release chan struct{}
	once             sync.Once
}

func (n *blockedNotes) Progress(float64, float64, string) {
	n.once.Do(func() { close(n.entered) })
	<-n.release
}
func (n *blockedNotes) Log(string, string, json.RawMessage) {}
func (n *blockedNotes) ProgressToken() any                  { return "slow" }

// A caller that does not take its call's progress does not stall the
// goroutine reading the server's messages: another caller's call is
// answered meanwhile.
func TestClientSlowCallerDoesNotStallReader(t *testing.T) {
	t.Parallel()
	cfg := fixtureServer("fx", "ok")
	cfg.Timeout = 20 * time.Second
	eng, _, _, err := clientEngine(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	progress, _ := eng.Registry().Get("fx.progress")
	echo, _ := eng.Registry().Get("fx.echo")
	slow := &blockedNotes{entered: make(chan struct{}), release: make(chan struct{})}
	defer close(slow.release)
	ctx, cancel := context.WithTimeout(engine.WithCallNotifier(context.Background(), slow), 2*time.Minute)
	defer cancel()
	go progress.Execute(ctx, nil)
	select {
	case <-slow.entered:
	case <-time.After(time.Minute):
		t.Fatal("no progress reached the slow caller within a minute")
	}
	if out, err := echo.Execute(context.Background(), map[string]any{"message": "hi"}); err != nil || !strings.Contains(out, "hi") {
		t.Fatalf("another caller's call while the slow caller holds its progress: %q, %v", out, err)
	}
}

// An answer over the line limit whose kept bytes have a "method" key
// (structured content of an HTTP tool's, say) is still known as an answer
// by its top-level keys: its call fails at once with ErrOutputTooLarge,
// not at its timeout.
func TestClientHugeAnswerMentioningMethod(t *testing.T) {
	t.Parallel()
	cfg := fixtureServer("fx", "ok")
	cfg.Timeout = 40 * time.Second
	eng, _, _, err := clientEngine(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = callRemote(t, eng, "fx.huge", map[string]any{"members": `"structuredContent":{"method":"GET","url":"/"}`})
	if !errors.Is(err, mcp.ErrOutputTooLarge) {
		t.Fatalf("huge answer mentioning method: %v, want ErrOutputTooLarge", err)
	}
}

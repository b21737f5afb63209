package mcp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/internal/testenv"
)

// reloadFixture is the path of a guests/testdata module built by `make
// fixtures`.
func reloadFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(testenv.Built(t, filepath.Join("..", "guests", "testdata", name+".wasm"), "fixtures"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replaceFile replaces the file at path by content, as a build does:
// written aside, then renamed over it.
func replaceFile(t testing.TB, path string, content []byte) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// reloadServer serves the plugin "reload" (the fixture reload_a.wasm,
// copied to a file of its own, whose path it returns) with isolation,
// watched by a Watcher.
func reloadServer(t testing.TB, isolation string) (srv *Server, w *Watcher, p *host.Plugin, path string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "reload.wasm")
	replaceFile(t, path, reloadFixture(t, "reload_a"))
	loader, err := host.NewLoader(host.LoaderOptions{CacheDir: testenv.CompileCache()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := host.Config{Name: "reload", Path: path, Isolation: isolation, Limits: host.Limits{MemoryMiB: 1}}
	eng := engine.New(nil, engine.NewRegistry(), engine.WithExtenders(loader.Extender(cfg, engine.MiddlewareConfig{})))
	t.Cleanup(func() {
		eng.Close(context.Background())
		loader.Close(context.Background())
	})
	if srv, err = NewServer(context.Background(), eng, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, ps := range eng.Status().Plugins {
		if d, ok := ps.Details.(*host.Details); ok && ps.Name == "reload" {
			p = d.Plugin()
		}
	}
	if p == nil {
		t.Fatal("no plugin reload in the engine's status")
	}
	if w, err = NewWatcher(srv, loader, []WatchTarget{{Plugin: p, Config: cfg}}, WatchOptions{}); err != nil {
		t.Fatal(err)
	}
	return srv, w, p, path
}

// settle looks at the files until the watcher has made the reloads and
// refusals it is expected to, as Run would at every interval: the change
// is seen at one look and reloaded at the next.
func settle(t testing.TB, w *Watcher, reloaded, refused int) {
	t.Helper()
	for range 2 {
		w.poll(context.Background())
	}
	if r, f := w.Counts(); r != reloaded || f != refused {
		t.Fatalf("the watcher counts %d reloads and %d refusals, want %d and %d", r, f, reloaded, refused)
	}
}

// The watcher reloads a changed file, the server's tool list follows, and
// clients are told; a bad file keeps the old module serving.
func TestWatcherReloads(t *testing.T) {
	srv, w, _, path := reloadServer(t, host.IsolationPooled)
	changed := make(chan struct{}, 10)
	cs := connectClient(t, srv, func() { changed <- struct{}{} })
	if got := srv.Tools(); !slices.Equal(got, []string{"version"}) {
		t.Fatalf("served %v, want [version]", got)
	}
	w.poll(context.Background()) // nothing changed: nothing reloaded
	settle(t, w, 0, 0)

	replaceFile(t, path, reloadFixture(t, "reload_b"))
	settle(t, w, 1, 0)
	if got, want := srv.Tools(), []string{"added", "version"}; !slices.Equal(sorted(got), want) {
		t.Fatalf("served %v after the reload, want %v", got, want)
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("the client was not sent notifications/tools/list_changed")
	}
	if got := callVersion(cs, "added"); got != "b" {
		t.Fatalf("the new tool answered %q, want b", got)
	}

	replaceFile(t, path, []byte("not a module"))
	settle(t, w, 1, 1)
	if got := callVersion(cs, "version"); got != "b" {
		t.Fatalf("after a refused file the tool answered %q, want b (the loaded module)", got)
	}
	settle(t, w, 1, 1) // the same bad bytes are not tried again
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// connectClient connects an SDK client to a session of srv over the
// in-memory transport; listChanged, when not nil, is called on each
// notifications/tools/list_changed. The session ends at the test's end.
func connectClient(t testing.TB, srv *Server, listChanged func()) *sdk.ClientSession {
	t.Helper()
	st, ct := sdk.NewInMemoryTransports()
	ended := make(chan struct{})
	go func() { srv.Serve(context.Background(), st); close(ended) }()
	var opts *sdk.ClientOptions
	if listChanged != nil {
		opts = &sdk.ClientOptions{ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { listChanged() }}
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		<-ended
	})
	return cs
}

// callVersion calls tool, which answers the version of the module that
// ran it, and returns the answer, or the failure as "error: ...".
func callVersion(cs *sdk.ClientSession, tool string) string {
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: map[string]any{}})
	switch {
	case err != nil:
		return "error: protocol: " + err.Error()
	case res.IsError:
		return fmt.Sprintf("error: result: %v", res.Content)
	case len(res.Content) != 1:
		return fmt.Sprintf("error: %d contents", len(res.Content))
	}
	tc, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		return fmt.Sprintf("error: content %T", res.Content[0])
	}
	return tc.Text
}

// Hot reload under load (issue 26): 100 clients call the plugin's tool
// without pause while its file is replaced 20 times, alternating valid and
// invalid builds. No call fails, every call runs on a version that was
// loaded, the old versions close (none is left open, none leaks its
// instances), and the server serves the last valid version's tools.
func TestReloadUnderLoad(t *testing.T) {
	for _, isolation := range []string{host.IsolationPooled, host.IsolationSession} {
		t.Run(isolation, func(t *testing.T) { reloadUnderLoad(t, isolation) })
	}
}

func reloadUnderLoad(t *testing.T, isolation string) {
	const clients, swaps = 100, 20
	srv, w, p, path := reloadServer(t, isolation)
	builds := []struct {
		content []byte
		valid   bool
		version string
	}{
		{reloadFixture(t, "reload_b"), true, "b"},
		{[]byte("\x00asm truncated"), false, ""},
		{reloadFixture(t, "reload_a"), true, "a"},
		{reloadFixture(t, "wrongversion"), false, ""},
	}
	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		calls   atomic.Int64
		mu      sync.Mutex
		failed  []string
		seen    = map[string]int{}
		changed atomic.Int64
	)
	sessions := make([]*sdk.ClientSession, clients)
	for i := range sessions {
		sessions[i] = connectClient(t, srv, func() { changed.Add(1) })
	}
	for _, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				got := callVersion(cs, "version")
				calls.Add(1)
				mu.Lock()
				seen[got]++
				if got != "a" && got != "b" {
					failed = append(failed, got)
				}
				mu.Unlock()
			}
		}()
	}
	waitCalls := func(n int64) { // the clients are calling: the swap happens under load
		for deadline := time.Now().Add(time.Minute); calls.Load() < n && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	waitCalls(clients)
	reloaded, refused := 0, 0
	for i := range swaps {
		b := builds[i%len(builds)]
		replaceFile(t, path, b.content)
		if b.valid {
			reloaded++
		} else {
			refused++
		}
		settle(t, w, reloaded, refused)
		waitCalls(calls.Load() + clients/10) // some calls between swaps, on each version
	}
	stop.Store(true)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Fatalf("%d of %d calls failed across the swaps; the first: %s", len(failed), calls.Load(), failed[0])
	}
	t.Logf("%d calls by %d clients across %d swaps (%d reloads, %d refused); answers by version: %v; list_changed received: %d",
		calls.Load(), clients, swaps, reloaded, refused, seen, changed.Load())
	if isolation == host.IsolationPooled && (seen["a"] == 0 || seen["b"] == 0) {
		t.Errorf("the calls ran on versions %v, want both a and b", seen)
	}
	if changed.Load() < clients {
		t.Errorf("the clients were sent %d notifications/tools/list_changed, want at least one each (%d)", changed.Load(), clients)
	}
	last := builds[(swaps-1)%len(builds)]
	for i := swaps - 1; !last.valid; i-- {
		last = builds[i%len(builds)]
	}
	want := map[string][]string{"a": {"version"}, "b": {"added", "version"}}[last.version]
	if got := sorted(srv.Tools()); !slices.Equal(got, want) {
		t.Errorf("served %v after the swaps, want version %s's %v", got, last.version, want)
	}
	if got := p.Manifest().Version; got != last.version {
		t.Errorf("the plugin's version is %s after the swaps, want %s", got, last.version)
	}

	// Sessions end: every replaced version closes, with its instances.
	for _, cs := range sessions {
		cs.Close()
	}
	for deadline := time.Now().Add(time.Minute); p.Versions() > 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d versions of the plugin open after every session ended, want 1", p.Versions())
		}
	}
	if m := p.Memory(); m.Instances > host.DefaultMaxInstances && isolation == host.IsolationPooled {
		t.Errorf("the current version keeps %d idle instances, over its max_instances %d", m.Instances, host.DefaultMaxInstances)
	}
}

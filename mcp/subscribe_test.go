package mcp_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/mcp"
)

// newsPlugin is an itemsPlugin with a tool, touch, that says the resource
// at its uri argument was updated, or, without one, that its lists changed
// (engine.CallItemNotifier), as a plugin's notify_* host calls do.
type newsPlugin struct{ *itemsPlugin }

func (p newsPlugin) Open(context.Context) (*engine.Extension, error) {
	return &engine.Extension{MCP: p.itemsPlugin, Tools: []engine.Tool{touchTool{schemaTool{name: "touch", schema: `{"type":"object"}`}}}}, nil
}

type touchTool struct{ schemaTool }

func (touchTool) Execute(ctx context.Context, args map[string]any) (string, error) {
	n, ok := engine.CallNotifierOf(ctx).(engine.CallItemNotifier)
	if !ok {
		return "no item notifier", nil
	}
	if uri, ok := args["uri"].(string); ok {
		n.ResourceUpdated(uri)
	} else {
		n.ItemsChanged()
	}
	return "touched", nil
}

// watcher is a client session that keeps the resources/updated URIs and
// list_changed notifications it gets.
type watcher struct {
	cs      *sdk.ClientSession
	mu      sync.Mutex
	updated []string
	changed int
}

func watch(t *testing.T, srv *mcp.Server) *watcher {
	t.Helper()
	w := &watcher{}
	st, ct := sdk.NewInMemoryTransports()
	go srv.Serve(context.Background(), st)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.updated = append(w.updated, req.Params.URI)
		},
		ResourceListChangedHandler: func(context.Context, *sdk.ResourceListChangedRequest) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.changed++
		},
	}).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	w.cs = cs
	return w
}

// until waits (a minute at most) for cond on what w got, and reports
// whether it came.
func (w *watcher) until(cond func(updated []string, changed int) bool) bool {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		w.mu.Lock()
		ok := cond(slices.Clone(w.updated), w.changed)
		w.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

func (w *watcher) got() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.updated)
}

// A plugin's notify_resource_updated reaches the sessions subscribed to
// the URI, and only them: not a session subscribed to another, not one
// that unsubscribed, not one with no subscription. A session subscribes
// to at most MaxSubscriptions resources: one more is refused, naming the
// limit, and counted. Another plugin's resource is not the plugin's to
// announce.
func TestResourceSubscriptions(t *testing.T) {
	p := newsPlugin{&itemsPlugin{name: "news", answers: map[string]string{
		engine.MethodListResources: `{"resources":[{"uri":"test://a","name":"a"},{"uri":"test://b","name":"b"},{"uri":"test://c","name":"c"}]}`,
	}}}
	other := &itemsPlugin{name: "other", answers: map[string]string{
		engine.MethodListResources: `{"resources":[{"uri":"test://theirs","name":"theirs"}]}`,
	}}
	srv := newServer(t, engine.New(nil, engine.NewRegistry(), engine.WithExtenders(p, other)), mcp.Options{MaxSubscriptions: 2})
	a, b, c := watch(t, srv), watch(t, srv), watch(t, srv)
	if caps := a.cs.InitializeResult().Capabilities; caps.Resources == nil || !caps.Resources.Subscribe {
		t.Fatalf("resources capability %+v, want subscribe", caps.Resources)
	}
	ctx := context.Background()
	sub := func(w *watcher, uri string) error {
		return w.cs.Subscribe(ctx, &sdk.SubscribeParams{URI: uri})
	}
	for _, s := range []struct {
		w   *watcher
		uri string
	}{{a, "test://a"}, {a, "test://theirs"}, {b, "test://b"}} {
		if err := sub(s.w, s.uri); err != nil {
			t.Fatalf("subscribing to %s: %v", s.uri, err)
		}
	}
	if err := sub(a, "test://a"); err != nil {
		t.Errorf("subscribing again to a URI subscribed to: %v, want nil (no new subscription)", err)
	}
	if err := sub(a, "test://c"); err == nil || !strings.Contains(err.Error(), "max_subscriptions") {
		t.Errorf("a third subscription: %v, want an error naming max_subscriptions", err)
	}
	if n := srv.Refusals().Subscriptions; n != 1 {
		t.Errorf("Refusals().Subscriptions %d, want 1", n)
	}
	touch := func(uri string) {
		t.Helper()
		if got := text(call(t, c.cs, "touch", map[string]any{"uri": uri})); got != "touched" {
			t.Fatalf("touch %s: %q", uri, got)
		}
	}
	touch("test://theirs") // another plugin's: dropped
	touch("test://a")
	if !a.until(func(u []string, _ int) bool { return len(u) > 0 }) || !slices.Equal(a.got(), []string{"test://a"}) {
		t.Errorf("the session subscribed to test://a got %q, want only test://a", a.got())
	}
	// Unsubscribed, a gets no more of test://a; it still gets test://c, sent
	// after on the same session.
	if err := a.cs.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: "test://a"}); err != nil {
		t.Fatal(err)
	}
	if err := sub(a, "test://c"); err != nil {
		t.Fatalf("subscribing within the cap after an unsubscribe: %v", err)
	}
	touch("test://a")
	touch("test://c")
	touch("test://b")
	if !a.until(func(u []string, _ int) bool { return len(u) > 1 }) || !slices.Equal(a.got(), []string{"test://a", "test://c"}) {
		t.Errorf("after unsubscribing from test://a, the session got %q, want test://a (before) and test://c", a.got())
	}
	if !b.until(func(u []string, _ int) bool { return len(u) > 0 }) || !slices.Equal(b.got(), []string{"test://b"}) {
		t.Errorf("the session subscribed to test://b got %q, want only test://b", b.got())
	}
	if got := c.got(); len(got) != 0 {
		t.Errorf("the session with no subscription got %q, want nothing", got)
	}
}

// A plugin's notify_resource_list_changed (or prompt list) lists its
// resources again: the clients are told the list changed, and the list
// served is the new one.
func TestItemsChanged(t *testing.T) {
	p := newsPlugin{&itemsPlugin{name: "news", answers: map[string]string{
		engine.MethodListResources: `{"resources":[{"uri":"test://a","name":"a"}]}`,
	}}}
	srv := newServer(t, engine.New(nil, engine.NewRegistry(), engine.WithExtenders(p)), mcp.Options{})
	w := watch(t, srv)
	p.mu.Lock()
	p.answers[engine.MethodListResources] = `{"resources":[{"uri":"test://b","name":"b"}]}`
	p.mu.Unlock()
	if got := text(call(t, w.cs, "touch", nil)); got != "touched" {
		t.Fatalf("touch: %q", got)
	}
	if !w.until(func(_ []string, changed int) bool { return changed > 0 }) {
		t.Fatal("no notifications/resources/list_changed within a minute")
	}
	res, err := w.cs.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range res.Resources {
		uris = append(uris, r.URI)
	}
	if !slices.Equal(uris, []string{"test://b"}) || !slices.Equal(srv.Resources(), []string{"test://b"}) {
		t.Errorf("resources listed %q, served %q; want test://b", uris, srv.Resources())
	}
}

// A reload of a plugin (Server.Reloaded) lists its resources again and
// tells the sessions subscribed to a URI it serves, before or after the
// reload, a resource or a URI of its templates; a session subscribed to
// another plugin's resource is told nothing until that plugin reloads.
func TestReloadedTellsSubscribers(t *testing.T) {
	p := &itemsPlugin{name: "news", answers: map[string]string{
		engine.MethodListResources:         `{"resources":[{"uri":"test://a","name":"a"}]}`,
		engine.MethodListResourceTemplates: `{"resourceTemplates":[{"uriTemplate":"test://t/{id}","name":"t"}]}`,
	}}
	other := &itemsPlugin{name: "other", answers: map[string]string{
		engine.MethodListResources: `{"resources":[{"uri":"test://o","name":"o"}]}`,
	}}
	srv := newServer(t, engine.New(nil, engine.NewRegistry(), engine.WithExtenders(p, other)), mcp.Options{})
	a, b, c := watch(t, srv), watch(t, srv), watch(t, srv)
	ctx := context.Background()
	for _, s := range []struct {
		w   *watcher
		uri string
	}{{a, "test://a"}, {b, "test://t/7"}, {c, "test://o"}} {
		if err := s.w.cs.Subscribe(ctx, &sdk.SubscribeParams{URI: s.uri}); err != nil {
			t.Fatalf("subscribing to %s: %v", s.uri, err)
		}
	}
	p.mu.Lock()
	p.answers[engine.MethodListResources] = `{"resources":[{"uri":"test://a2","name":"a2"}]}` // test://a is gone
	p.mu.Unlock()
	srv.Reloaded(ctx, "news")
	srv.Reloaded(ctx, "other")
	for _, s := range []struct {
		w    *watcher
		want string
	}{{a, "test://a"}, {b, "test://t/7"}, {c, "test://o"}} {
		if !s.w.until(func(u []string, _ int) bool { return len(u) > 0 }) || !slices.Equal(s.w.got(), []string{s.want}) {
			t.Errorf("after the reloads, the session subscribed to %s got %q, want only it", s.want, s.w.got())
		}
	}
	if got := srv.Resources(); !slices.Equal(got, []string{"test://a2", "test://o", "test://t/{id}"}) {
		t.Errorf("Resources() after the reload: %q, want the new list", got)
	}
}

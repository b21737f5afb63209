package mcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/safetext"
)

// DefaultMaxSubscriptions bounds the resources one session subscribes to
// when Options.MaxSubscriptions is zero: more than a client shows its
// user, few enough that a client cannot grow the server's memory by
// subscribing to URIs without end.
const DefaultMaxSubscriptions = 256

// ErrMaxSubscriptions marks a resources/subscribe refused because its
// session subscribes to Options.MaxSubscriptions resources already; the
// client is answered a JSON-RPC error naming the limit.
var ErrMaxSubscriptions = errors.New("mcp: max_subscriptions reached")

// codeLimit is the JSON-RPC error code of a request refused for a limit
// (a server error, as HTTP's refusals).
const codeLimit = -32000

// MaxSubscribeURIBytes is the longest URI a client subscribes to
// (resources/subscribe): a session's subscriptions are bounded in bytes by
// it times Options.MaxSubscriptions. Longer is refused with a JSON-RPC
// error naming it, and counted in Refusals.Subscriptions.
const MaxSubscribeURIBytes = 8 << 10

// ErrNotServed marks a resources/subscribe refused because no plugin
// serves its URI now (none lists it, no template matches it): the client
// is answered a JSON-RPC error (resource not found), counted in
// Refusals.Subscriptions.
var ErrNotServed = errors.New("mcp: resource not served")

// maxPendingUpdates bounds the distinct URIs whose
// notifications/resources/updated wait to be sent (updateQueue): one more
// is dropped with a warning and counted in Refusals.Updates.
const maxPendingUpdates = 1024

// subscribe is resources/subscribe: the SDK keeps who subscribed to what
// and sends notifications/resources/updated to them (resourceUpdated);
// morph bounds each session's subscriptions in number and each URI in
// length, and takes only URIs a plugin serves.
func (s *Server) subscribe(ctx context.Context, req *sdk.SubscribeRequest) error {
	uri := req.Params.URI
	refuse := func(why string, err *jsonrpc.Error) error {
		s.mu.Lock()
		s.refused.Subscriptions++
		s.mu.Unlock()
		s.log.WarnContext(ctx, "mcp: a resource subscription refused ("+why+")", "uri", safetext.Line(uri, 200), "uri_bytes", len(uri))
		return err
	}
	if len(uri) > MaxSubscribeURIBytes {
		return refuse("uri too long", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"mcp: a resource URI of %d bytes: MaxSubscribeURIBytes is %d", len(uri), MaxSubscribeURIBytes)})
	}
	if !s.serves(func(string) bool { return true })(uri) {
		return refuse("not served", &jsonrpc.Error{Code: sdk.CodeResourceNotFound, Message: fmt.Sprintf(
			"%v: no resource listed or template matching %s", ErrNotServed, safetext.Line(uri, 200))})
	}
	ses := s.session(req.Session, false)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ses.subs[uri] {
		return nil
	}
	if len(ses.subs) >= s.opts.MaxSubscriptions {
		s.refused.Subscriptions++
		s.log.WarnContext(ctx, "mcp: a resource subscription refused (max_subscriptions)", "uri", safetext.Line(uri, 200),
			"max_subscriptions", s.opts.MaxSubscriptions)
		return &jsonrpc.Error{Code: codeLimit, Message: fmt.Sprintf("%v: a session subscribes to at most %d resources; unsubscribe from one first",
			ErrMaxSubscriptions, s.opts.MaxSubscriptions)}
	}
	if ses.subs == nil {
		ses.subs = map[string]bool{}
	}
	ses.subs[uri] = true
	return nil
}

// unsubscribe is resources/unsubscribe.
func (s *Server) unsubscribe(_ context.Context, req *sdk.UnsubscribeRequest) error {
	ses := s.session(req.Session, false)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(ses.subs, req.Params.URI)
	return nil
}

// subscribed are the URIs some session subscribes to, of those keep
// reports true for. Only the copy is made under s.mu, which every request
// takes; keep runs after.
func (s *Server) subscribed(keep func(uri string) bool) []string {
	all := map[string]struct{}{}
	s.mu.Lock()
	for _, ses := range s.sessions {
		for uri := range ses.subs {
			all[uri] = struct{}{}
		}
	}
	s.mu.Unlock()
	var uris []string
	for uri := range all {
		if keep(uri) {
			uris = append(uris, uri)
		}
	}
	slices.Sort(uris)
	return uris
}

// updateQueue are the URIs whose notifications/resources/updated wait to
// be sent, each once however often announced meanwhile, by one goroutine
// that runs while some wait: the SDK sends to each subscribed session in
// turn, within 10 seconds a URI, and a client that does not read must not
// hold a plugin's call or the Watcher.
type updateQueue struct {
	mu      sync.Mutex
	pending map[string]struct{}
	order   []string // pending, in the order announced
	sending bool     // the goroutine runs
	closed  bool     // Server.Close: send no more
}

// resourceUpdated queues notifications/resources/updated for uri to the
// sessions subscribed to it, and returns: a URI already queued is sent
// once, a URI past maxPendingUpdates is dropped (logged, counted).
func (s *Server) resourceUpdated(ctx context.Context, uri string) {
	q := &s.updates
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.pending[uri]; ok || q.closed {
		return
	}
	if len(q.pending) >= maxPendingUpdates {
		s.mu.Lock()
		s.refused.Updates++
		s.mu.Unlock()
		s.log.WarnContext(ctx, "mcp: notifications/resources/updated dropped: too many pending", "uri", safetext.Line(uri, 200),
			"max_pending", maxPendingUpdates)
		return
	}
	if q.pending == nil {
		q.pending = map[string]struct{}{}
	}
	q.pending[uri] = struct{}{}
	q.order = append(q.order, uri)
	if !q.sending {
		q.sending = true
		go s.sendUpdates()
	}
}

// sendUpdates sends the queued notifications/resources/updated, until
// none is left or the server is closed.
func (s *Server) sendUpdates() {
	q := &s.updates
	for {
		q.mu.Lock()
		if len(q.order) == 0 || q.closed {
			q.sending = false
			q.mu.Unlock()
			return
		}
		uri := q.order[0]
		q.order = q.order[1:]
		delete(q.pending, uri) // announced again from now on, sent again
		q.mu.Unlock()
		if err := s.sdk.ResourceUpdated(context.Background(), &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			s.log.Warn("mcp: notifications/resources/updated not sent", "uri", safetext.Line(uri, 200), "error", err)
		}
	}
}

// closeUpdates drops the queued notifications/resources/updated, and
// sends no more (Close).
func (s *Server) closeUpdates() {
	q := &s.updates
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.pending, q.order = nil, nil
}

// Reloaded makes what the server serves follow a reload of plugin (the
// Watcher calls it; an embedder that reloads a plugin itself,
// host.Loader.Reload, calls it after a reload that succeeded): the tools
// (SyncTools) and the prompts and resources are those of the new version,
// and the sessions subscribed to a resource the plugin serves (one it
// listed before or lists now, or a URI one of its templates matches) are
// told it was updated (queued, resourceUpdated): the new version may read
// it otherwise.
func (s *Server) Reloaded(ctx context.Context, plugin string) {
	s.SyncTools(ctx)
	before := s.servedBy(plugin)
	s.syncItems(ctx)
	after := s.servedBy(plugin)
	for _, uri := range s.subscribed(func(uri string) bool { return before(uri) || after(uri) }) {
		s.resourceUpdated(ctx, uri)
	}
}

// servedBy reports whether a URI is one plugin serves now: a resource it
// listed, or one of its templates matches it.
func (s *Server) servedBy(plugin string) func(uri string) bool {
	return s.serves(func(owner string) bool { return owner == plugin })
}

// serves reports whether a URI is served now by a plugin that owned
// reports true for: a resource it listed, or one of its templates matches
// it.
func (s *Server) serves(owned func(plugin string) bool) func(uri string) bool {
	s.items.mu.Lock()
	defer s.items.mu.Unlock()
	uris := map[string]struct{}{}
	for uri, owner := range s.items.resources {
		if owned(owner) {
			uris[uri] = struct{}{}
		}
	}
	var templates []*uritemplate.Template
	for t, owner := range s.items.templates {
		if owned(owner) {
			if tmpl, err := uritemplate.New(t); err == nil {
				templates = append(templates, tmpl)
			}
		}
	}
	return func(uri string) bool {
		if _, ok := uris[uri]; ok {
			return true
		}
		return slices.ContainsFunc(templates, func(t *uritemplate.Template) bool { return t.Regexp().MatchString(uri) })
	}
}

// plugin is the name of the plugin whose tool the call is, or "".
func (n *notifier) plugin() string {
	source, _ := n.s.eng.Registry().Source(n.tool)
	name, ok := strings.CutPrefix(source, engine.PluginSource(""))
	if !ok {
		return ""
	}
	return name
}

// ResourceUpdated tells the sessions subscribed to uri it changed
// (notifications/resources/updated), counted against the call's
// notifications; a URI another plugin serves is not the calling plugin's
// to announce, and is dropped with a warning.
func (n *notifier) ResourceUpdated(uri string) {
	if !n.take() {
		return
	}
	plugin := n.plugin()
	n.s.items.mu.Lock()
	owner, listed := n.s.items.resources[uri]
	n.s.items.mu.Unlock()
	if listed && owner != plugin {
		n.s.log.WarnContext(n.ctx, "mcp: a plugin's notify_resource_updated dropped: the resource is another plugin's",
			"plugin", plugin, "uri", safetext.Line(uri, 200), "served_by", owner)
		return
	}
	n.s.resourceUpdated(n.ctx, uri)
}

// ItemsChanged lists the plugins' prompts and resources again, in the
// background (relistItems); the SDK tells every session the lists
// changed. It counts against the call's notifications.
func (n *notifier) ItemsChanged() {
	if n.take() {
		n.s.relistItems()
	}
}

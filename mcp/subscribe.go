package mcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

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

// subscribe is resources/subscribe: the SDK keeps who subscribed to what
// and sends notifications/resources/updated to them (resourceUpdated);
// morph bounds each session's subscriptions.
func (s *Server) subscribe(ctx context.Context, req *sdk.SubscribeRequest) error {
	ses := s.session(req.Session, false)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ses.subs[req.Params.URI] {
		return nil
	}
	if len(ses.subs) >= s.opts.MaxSubscriptions {
		s.refused.Subscriptions++
		s.log.WarnContext(ctx, "mcp: a resource subscription refused (max_subscriptions)", "uri", safetext.Line(req.Params.URI, 200),
			"max_subscriptions", s.opts.MaxSubscriptions)
		return &jsonrpc.Error{Code: codeLimit, Message: fmt.Sprintf("%v: a session subscribes to at most %d resources; unsubscribe from one first",
			ErrMaxSubscriptions, s.opts.MaxSubscriptions)}
	}
	if ses.subs == nil {
		ses.subs = map[string]bool{}
	}
	ses.subs[req.Params.URI] = true
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
// reports true for.
func (s *Server) subscribed(keep func(uri string) bool) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var uris []string
	for _, ses := range s.sessions {
		for uri := range ses.subs {
			if !slices.Contains(uris, uri) && keep(uri) {
				uris = append(uris, uri)
			}
		}
	}
	slices.Sort(uris)
	return uris
}

// resourceUpdated sends notifications/resources/updated for uri to the
// sessions subscribed to it (the SDK sends to each in turn, within 10
// seconds a session).
func (s *Server) resourceUpdated(ctx context.Context, uri string) {
	if err := s.sdk.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
		s.log.WarnContext(ctx, "mcp: notifications/resources/updated not sent", "uri", safetext.Line(uri, 200), "error", err)
	}
}

// Reloaded makes what the server serves follow a reload of plugin (the
// Watcher calls it; an embedder that reloads a plugin itself,
// host.Loader.Reload, calls it after a reload that succeeded): the tools
// (SyncTools) and the prompts and resources are those of the new version,
// and the sessions subscribed to a resource the plugin serves (one it
// listed before or lists now, or a URI one of its templates matches) are
// told it was updated: the new version may read it otherwise.
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
	s.items.mu.Lock()
	defer s.items.mu.Unlock()
	var uris []string
	for uri, owner := range s.items.resources {
		if owner == plugin {
			uris = append(uris, uri)
		}
	}
	var templates []*uritemplate.Template
	for t, owner := range s.items.templates {
		if owner == plugin {
			if tmpl, err := uritemplate.New(t); err == nil {
				templates = append(templates, tmpl)
			}
		}
	}
	return func(uri string) bool {
		return slices.Contains(uris, uri) || slices.ContainsFunc(templates, func(t *uritemplate.Template) bool { return t.Regexp().MatchString(uri) })
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

package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/internal/safetext"
)

// DefaultMaxItems bounds the prompts, the resources and the resource
// templates each plugin has served, when Options.MaxItems is zero: more
// than a client shows, few enough that a plugin listing a million costs
// nothing past its (output-capped) answer.
const DefaultMaxItems = 1000

// ErrPluginAnswer marks what a plugin answered for its prompts or
// resources that MCP cannot carry: a list that does not decode, a prompt
// without a name, a resource whose URI is not absolute, content that is
// not MCP's (a blob that is not base64). A listed item is not served, with
// a warning; a get or read is a JSON-RPC error naming the plugin.
var ErrPluginAnswer = errors.New("mcp: plugin answer not servable")

// served are the names of the prompts, the URIs of the resources and the
// URI templates of the resource templates served, for Prompts and
// Resources, and to give a name two plugins list to the first.
type served struct {
	sync sync.Mutex // one syncItems at a time

	mu                            sync.Mutex        // the maps, which syncItems replaces
	prompts, resources, templates map[string]string // name/URI -> plugin
	// completers are the plugins that serve completion, by name.
	completers map[string]engine.PluginMCP

	relist    bool           // a relistItems is pending
	closed    bool           // Close was called: relistItems starts no more
	relisting sync.WaitGroup // relistItems' goroutine (Close waits)
}

// maxCompletionValues is the most values a completion has (MCP's limit);
// a plugin's answer with more is cut to them, with hasMore.
const maxCompletionValues = 100

// syncItems serves the plugins' prompts and resources (engine.MCPProvider)
// as they list them now: a plugin that fails to list is logged and serves
// none of that kind. Called by NewServer, and again when a plugin reloads
// (Reloaded) or says its lists changed (relistItems): an item listed is
// served with its plugin's handler, one no longer listed is removed, and
// the SDK tells every session its lists changed.
func (s *Server) syncItems(ctx context.Context) {
	s.items.sync.Lock()
	defer s.items.sync.Unlock()
	prompts, resources, templates := map[string]string{}, map[string]string{}, map[string]string{}
	for _, pm := range s.eng.MCPProviders() {
		methods := pm.MCPMethods()
		if slices.Contains(methods, engine.MethodListPrompts) && slices.Contains(methods, engine.MethodGetPrompt) {
			var list struct {
				Prompts []*sdk.Prompt `json:"prompts"`
			}
			if s.list(ctx, pm, engine.MethodListPrompts, &list) {
				for _, p := range capped(ctx, s, pm, "prompts", list.Prompts) {
					if s.claim(ctx, pm, "prompt", prompts, p.Name, p.Name != "") {
						s.sdk.AddPrompt(p, s.getPrompt(pm))
					}
				}
			}
		}
		if !slices.Contains(methods, engine.MethodReadResource) {
			continue
		}
		if slices.Contains(methods, engine.MethodListResources) {
			var list struct {
				Resources []*sdk.Resource `json:"resources"`
			}
			if s.list(ctx, pm, engine.MethodListResources, &list) {
				for _, r := range capped(ctx, s, pm, "resources", list.Resources) {
					if s.claim(ctx, pm, "resource", resources, r.URI, absolute(r.URI)) {
						s.sdk.AddResource(r, s.readResource(pm))
					}
				}
			}
		}
		if slices.Contains(methods, engine.MethodListResourceTemplates) {
			var list struct {
				Templates []*sdk.ResourceTemplate `json:"resourceTemplates"`
			}
			if s.list(ctx, pm, engine.MethodListResourceTemplates, &list) {
				for _, t := range capped(ctx, s, pm, "resource templates", list.Templates) {
					if !s.claim(ctx, pm, "resource template", templates, t.URITemplate, absolute(t.URITemplate)) {
						continue
					}
					if err := s.addTemplate(t, s.readResource(pm)); err != nil {
						delete(templates, t.URITemplate)
						s.log.WarnContext(ctx, "mcp: a plugin's resource template not served", "plugin", pm.Plugin, "error", err)
					}
				}
			}
		}
	}
	s.items.mu.Lock()
	oldPrompts, oldResources, oldTemplates := s.items.prompts, s.items.resources, s.items.templates
	s.items.prompts, s.items.resources, s.items.templates = prompts, resources, templates
	s.items.mu.Unlock()
	if gone := goneKeys(oldPrompts, prompts); len(gone) > 0 {
		s.sdk.RemovePrompts(gone...)
	}
	if gone := goneKeys(oldResources, resources); len(gone) > 0 {
		s.sdk.RemoveResources(gone...)
	}
	if gone := goneKeys(oldTemplates, templates); len(gone) > 0 {
		s.sdk.RemoveResourceTemplates(gone...)
	}
}

// goneKeys are the keys of was not in now.
func goneKeys(was, now map[string]string) []string {
	var gone []string
	for k := range was {
		if _, ok := now[k]; !ok {
			gone = append(gone, k)
		}
	}
	return gone
}

// relistItems lists the plugins' prompts and resources again (syncItems)
// in the background, for a plugin that said they changed while its call
// runs (which may hold the instance that answers the lists). Requests
// that come while one is pending make no other.
func (s *Server) relistItems() {
	s.items.mu.Lock()
	defer s.items.mu.Unlock()
	if s.items.relist || s.items.closed {
		return
	}
	s.items.relist = true
	s.items.relisting.Add(1)
	go func() {
		defer s.items.relisting.Done()
		s.items.mu.Lock()
		s.items.relist = false // a change from now on lists again
		s.items.mu.Unlock()
		s.syncItems(context.Background())
	}()
}

// closeItems makes relistItems start no more, and waits for the one
// running (Close): a WaitGroup's Add must not race its Wait.
func (s *Server) closeItems() {
	s.items.mu.Lock()
	s.items.closed = true
	s.items.mu.Unlock()
	s.items.relisting.Wait()
}

// absolute reports whether uri is an absolute URI (or URI template), as
// the SDK requires of a resource's.
func absolute(uri string) bool {
	u, err := url.Parse(uri)
	return err == nil && u.Scheme != ""
}

// list asks pm for one of its lists into v, and reports whether it came:
// a failure, or an answer that does not decode, is logged.
func (s *Server) list(ctx context.Context, pm engine.PluginMCP, method string, v any) bool {
	raw, err := pm.MCPRequest(ctx, method, nil)
	if err == nil {
		if err = json.Unmarshal(raw, v); err != nil {
			err = fmt.Errorf("%w: %s: %w", ErrPluginAnswer, method, err)
		}
	}
	if err != nil {
		s.log.WarnContext(ctx, "mcp: a plugin's list not served", "plugin", pm.Plugin, "method", method, "error", err)
	}
	return err == nil
}

// capped is items without null ones, or their first Options.MaxItems,
// each time with a warning; those past the cap are counted
// (Refusals.Items).
func capped[T any](ctx context.Context, s *Server, pm engine.PluginMCP, what string, items []*T) []*T {
	n := len(items)
	if items = slices.DeleteFunc(items, func(it *T) bool { return it == nil }); len(items) < n {
		s.log.WarnContext(ctx, "mcp: a plugin lists null "+what+", not served", "plugin", pm.Plugin, "null", n-len(items))
	}
	if len(items) <= s.opts.MaxItems {
		return items
	}
	s.log.WarnContext(ctx, "mcp: a plugin lists too many "+what+"; the first are served (max_items)",
		"plugin", pm.Plugin, "listed", len(items), "served", s.opts.MaxItems)
	s.mu.Lock()
	s.refused.Items += len(items) - s.opts.MaxItems
	s.mu.Unlock()
	return items[:s.opts.MaxItems]
}

// claim records key (a prompt's name, a resource's URI) as pm's and reports
// whether pm's item is served: not when it is not valid, nor when another
// plugin (or pm itself) listed key before, each with a warning.
func (s *Server) claim(ctx context.Context, pm engine.PluginMCP, what string, taken map[string]string, key string, valid bool) bool {
	if !valid {
		s.log.WarnContext(ctx, "mcp: a plugin's "+what+" not served: "+ErrPluginAnswer.Error()+" (no name, or a URI that is not absolute)",
			"plugin", pm.Plugin, "key", safetext.Line(key, 200))
		return false
	}
	if owner, ok := taken[key]; ok {
		s.log.WarnContext(ctx, "mcp: a plugin's "+what+" not served: another plugin's of that name is",
			"plugin", pm.Plugin, "key", safetext.Line(key, 200), "served", owner)
		return false
	}
	taken[key] = pm.Plugin
	return true
}

// addTemplate adds t, turning the SDK's panic on a template it cannot
// parse into an error.
func (s *Server) addTemplate(t *sdk.ResourceTemplate, h sdk.ResourceHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: the MCP SDK refused it: %v", ErrPluginAnswer, r)
		}
	}()
	s.sdk.AddResourceTemplate(t, h)
	return nil
}

// Prompts are the names of the prompts served, sorted.
func (s *Server) Prompts() []string {
	s.items.mu.Lock()
	defer s.items.mu.Unlock()
	return sortedKeys(s.items.prompts)
}

// Resources are the URIs of the resources and the URI templates of the
// resource templates served, sorted.
func (s *Server) Resources() []string {
	s.items.mu.Lock()
	defer s.items.mu.Unlock()
	return slices.Sorted(slices.Values(append(sortedKeys(s.items.resources), sortedKeys(s.items.templates)...)))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// request forwards a get or read to pm in the client's engine session (a
// plugin in session isolation answers on the session's instance), under
// the session's call limit, and decodes the answer into v.
func (s *Server) request(ctx context.Context, ss *sdk.ServerSession, pm engine.PluginMCP, method string, params any, v any) error {
	ses, ctx, done, err := s.begin(ctx, ss, method)
	if err != nil {
		return err
	}
	defer done()
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	if raw, err = pm.MCPRequest(engine.WithSession(ctx, ses.id, 0), method, raw); err != nil {
		return fmt.Errorf("plugin %q: %s: %w", pm.Plugin, method, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%w: plugin %q: %s: %w", ErrPluginAnswer, pm.Plugin, method, err)
	}
	return nil
}

// getPrompt forwards prompts/get to pm. A message's content without a
// "type" is given the one its fields say (hyper-mcp's Go template writes
// text and image content without it).
func (s *Server) getPrompt(pm engine.PluginMCP) sdk.PromptHandler {
	return func(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		var res struct {
			Description string `json:"description"`
			Messages    []struct {
				Role    sdk.Role        `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		params := map[string]any{"name": req.Params.Name, "arguments": req.Params.Arguments}
		if err := s.request(ctx, req.Session, pm, engine.MethodGetPrompt, params, &res); err != nil {
			return nil, err
		}
		out := &sdk.GetPromptResult{Description: res.Description, Messages: []*sdk.PromptMessage{}}
		for i, m := range res.Messages {
			msg := &sdk.PromptMessage{}
			raw, _ := json.Marshal(map[string]any{"role": m.Role, "content": typed(m.Content)})
			if err := json.Unmarshal(raw, msg); err != nil || msg.Content == nil {
				return nil, fmt.Errorf("%w: plugin %q: prompt %q: message %d: %v", ErrPluginAnswer, pm.Plugin, req.Params.Name, i+1, err)
			}
			out.Messages = append(out.Messages, msg)
		}
		return out, nil
	}
}

// typed is content with the "type" its fields say when it has none: text,
// an image, an embedded resource.
func typed(content json.RawMessage) any {
	var c map[string]any
	if json.Unmarshal(content, &c) != nil || c == nil {
		return content
	}
	if _, ok := c["type"]; !ok {
		switch {
		case c["text"] != nil:
			c["type"] = "text"
		case c["data"] != nil:
			c["type"] = "image"
		case c["resource"] != nil:
			c["type"] = "resource"
		}
	}
	return c
}

// readResource forwards resources/read to pm. A content item with both
// text and a blob, or neither, is refused: MCP's has one.
func (s *Server) readResource(pm engine.PluginMCP) sdk.ResourceHandler {
	return func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		var res struct {
			Contents []struct {
				URI      string          `json:"uri"`
				MIMEType string          `json:"mimeType"`
				Text     *string         `json:"text"`
				Blob     json.RawMessage `json:"blob"`
			} `json:"contents"`
		}
		if err := s.request(ctx, req.Session, pm, engine.MethodReadResource, map[string]any{"uri": req.Params.URI}, &res); err != nil {
			return nil, err
		}
		out := &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{}}
		for i, c := range res.Contents {
			rc := &sdk.ResourceContents{URI: c.URI, MIMEType: c.MIMEType}
			var err error
			switch blob := bytes.TrimSpace(c.Blob); {
			case c.Text != nil && len(blob) == 0:
				rc.Text = *c.Text
			case c.Text == nil && len(blob) > 0:
				err = json.Unmarshal(blob, &rc.Blob) // base64
			default:
				err = errors.New("want one of text and blob")
			}
			if err != nil {
				return nil, fmt.Errorf("%w: plugin %q: resource %s: contents %d: %w", ErrPluginAnswer, pm.Plugin, safetext.Line(req.Params.URI, 200), i+1, err)
			}
			out.Contents = append(out.Contents, rc)
		}
		return out, nil
	}
}

// findCompleters records the plugins that serve completion, and reports
// whether there is one.
func (s *Server) findCompleters() bool {
	s.items.completers = map[string]engine.PluginMCP{}
	for _, pm := range s.eng.MCPProviders() {
		if slices.Contains(pm.MCPMethods(), engine.MethodComplete) {
			s.items.completers[pm.Plugin] = pm
		}
	}
	return len(s.items.completers) > 0
}

// complete forwards completion/complete to the plugin whose prompt or
// resource template the reference names, when it serves completion; any
// other reference has no values. At most maxCompletionValues are sent.
func (s *Server) complete(ctx context.Context, req *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
	out := &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: []string{}}}
	var owner string
	s.items.mu.Lock()
	if ref := req.Params.Ref; ref != nil && ref.Type == "ref/prompt" {
		owner = s.items.prompts[ref.Name]
	} else if ref != nil && ref.Type == "ref/resource" {
		owner = s.items.templates[ref.URI]
	}
	s.items.mu.Unlock()
	pm, ok := s.items.completers[owner]
	if !ok {
		return out, nil
	}
	var res struct {
		Completion sdk.CompletionResultDetails `json:"completion"`
	}
	if err := s.request(ctx, req.Session, pm, engine.MethodComplete, req.Params, &res); err != nil {
		return nil, err
	}
	out.Completion = res.Completion
	if out.Completion.Values == nil {
		out.Completion.Values = []string{}
	}
	if len(out.Completion.Values) > maxCompletionValues {
		out.Completion.Values, out.Completion.HasMore = out.Completion.Values[:maxCompletionValues], true
	}
	return out, nil
}

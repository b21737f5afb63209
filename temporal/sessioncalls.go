package temporal

import (
	"context"
	"maps"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
)

// CallSession is the session a call of a workflow's engine is made for (a
// middleware hook, a tool): the worker serves the call as that session's
// (engine.WithSession), so that a plugin in session isolation runs it on
// the session's instance, as a local engine would, not on one every
// session of the worker shares.
type CallSession struct {
	ID   string // engine.Context.SessionID
	Turn int    // engine.Context.Turn
	// Calls are the calls of plugins the session made before this one, by
	// plugin name, as the workflow numbers them (sessionCalls): a worker whose
	// plugin has no instance of the session though the session made calls
	// of it tells the plugin so (host.WithSessionCalls, abi.ReplacedMoved).
	Calls map[string]int `json:",omitempty"`
}

// context is ctx as a worker serves a call of s: that session's, unless
// the call was made outside any session.
func (s CallSession) context(ctx context.Context) context.Context {
	if s.ID == "" {
		return ctx
	}
	return host.WithSessionCalls(engine.WithSession(ctx, s.ID, s.Turn), s.Calls)
}

// sessionCalls number, in workflow code, the calls of plugins by a
// workflow's engine, by session and plugin (a middleware's ID is its
// plugin's name; a tool's and an engine hook's plugin is Setup's
// ToolPlugins and HookPlugins): the same on every replay, and carried
// across a session's continues-as-new (SessionState).
type sessionCalls map[string]map[string]int

// of is the session of a call on gctx, a hook's or tool's context in the
// workflow's engine; it counts the call, a call of plugin ("" for none of
// a plugin's: the host's tool or hook), in the session's numbers (after
// the session as the call carries it).
func (s sessionCalls) of(gctx context.Context, plugin string) CallSession {
	rc := engine.RunContext(gctx)
	if rc == nil || rc.SessionID == "" || aborted(gctx) != nil { // no call is made after an abort: none counted
		return CallSession{}
	}
	cs := CallSession{ID: rc.SessionID, Turn: rc.Turn, Calls: maps.Clone(s[rc.SessionID])}
	if plugin != "" {
		if s[rc.SessionID] == nil {
			s[rc.SessionID] = map[string]int{}
		}
		s[rc.SessionID][plugin]++
	}
	return cs
}

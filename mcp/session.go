package mcp

import (
	"context"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is the morph side of an MCP session: the engine session it is,
// and a context its calls run under, so that Serve's end stops them. (The
// SDK runs a stdio session's handlers under a context its Connect's does
// not cancel, and its Close waits for them.)
type session struct {
	id          string
	called      bool // a call ran: the engine session may hold instances
	ctx         context.Context
	cancel      context.CancelFunc
	running     atomic.Int32     // calls in flight
	refusedCall bool             // a call was refused (logged once); Server.mu
	level       sdk.LoggingLevel // the client's logging/setLevel, "" before; Server.mu
	subs        map[string]bool  // the resources subscribed to; Server.mu
}

// enter counts a call in, unless limit are running.
func (ses *session) enter(limit int) bool {
	if ses.running.Add(1) > int32(limit) {
		ses.running.Add(-1)
		return false
	}
	return true
}

// leave counts a call out.
func (ses *session) leave() { ses.running.Add(-1) }

// session is ss's session, made when first asked for; a call marks it
// called.
func (s *Server) session(ss *sdk.ServerSession, call bool) *session {
	ses, _ := s.sessionNew(ss, call)
	return ses
}

// sessionNew is session, and whether it was made now.
func (s *Server) sessionNew(ss *sdk.ServerSession, call bool) (*session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ses, ok := s.sessions[ss]
	if !ok {
		ses = s.newSession(ss)
	}
	ses.called = ses.called || call
	return ses, !ok
}

// newSession records a new session of ss; Server.mu is held.
func (s *Server) newSession(ss *sdk.ServerSession) *session {
	ctx, cancel := context.WithCancel(context.Background())
	ses := &session{id: s.eng.NewSession("").ID(), ctx: ctx, cancel: cancel}
	s.sessions[ss] = ses
	return ses
}

// cancelCalls cancels ss's calls in flight, and those it has yet to start:
// a session that never called is recorded canceled, so that a first call
// that comes before the connection closes runs canceled too, rather than
// holding the end until its deadline.
func (s *Server) cancelCalls(ss *sdk.ServerSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ses, ok := s.sessions[ss]
	if !ok {
		ses = s.newSession(ss)
	}
	ses.cancel()
}

// end ends ss's engine session, if a call ran in it, within
// Options.SessionEndTimeout: the session_end middleware runs (a plugin in
// session isolation releases the session's instance). Serve calls it once
// ss.Wait has returned, and the SDK's connection is done only when no
// request is in flight and none will be handled: no call of the session
// runs past its end, so none makes an instance after the release.
func (s *Server) end(ctx context.Context, ss *sdk.ServerSession) error {
	s.mu.Lock()
	ses, ok := s.sessions[ss]
	delete(s.sessions, ss)
	s.mu.Unlock()
	if !ok {
		return nil
	}
	ses.cancel()
	if !ses.called {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.SessionEndTimeout)
	defer cancel()
	return s.eng.ResumeSession(ses.id, nil).Close(ctx)
}

package mcp

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionID is the engine session ss is, made at its first call: a session
// that never calls has nothing to release.
func (s *Server) sessionID(ss *sdk.ServerSession) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.sessions[ss]
	if !ok {
		id = s.eng.NewSession("").ID()
		s.sessions[ss] = id
	}
	return id
}

// end ends ss's engine session, if a call made one, within
// Options.SessionEndTimeout: the session_end middleware runs (a plugin in
// session isolation releases the session's instance). Serve calls it once
// ss.Wait has returned, and the SDK's connection is done only when no
// request is in flight and none will be handled: no call of the session
// runs past its end, so none makes an instance after the release.
func (s *Server) end(ctx context.Context, ss *sdk.ServerSession) error {
	s.mu.Lock()
	id, ok := s.sessions[ss]
	delete(s.sessions, ss)
	s.mu.Unlock()
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.SessionEndTimeout)
	defer cancel()
	return s.eng.ResumeSession(id, nil).Close(ctx)
}

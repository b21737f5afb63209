package engine

import (
	"context"
	"sync"
)

// toolWatchers are the functions told when a plugin's tools change while
// the engine runs (OnToolsChanged).
type toolWatchers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(context.Context)
}

// OnToolsChanged registers f, called after a plugin's tool list changed
// while the engine runs (Extension.WatchTools: an MCP plugin's
// notify_tool_list_changed, an MCP server's list change, a reload), once
// the registry holds the new list. A host serving the engine's tools (an
// MCP server) follows the changes with it. remove unregisters f.
func (e *Engine) OnToolsChanged(f func(ctx context.Context)) (remove func()) {
	w := &e.toolWatch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = map[int]func(context.Context){}
	}
	id := w.next
	w.next++
	w.fns[id] = f
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.fns, id)
	}
}

// toolsChanged calls the OnToolsChanged functions.
func (e *Engine) toolsChanged(ctx context.Context) {
	w := &e.toolWatch
	w.mu.Lock()
	fns := make([]func(context.Context), 0, len(w.fns))
	for _, f := range w.fns {
		fns = append(fns, f)
	}
	w.mu.Unlock()
	for _, f := range fns {
		f(ctx)
	}
}

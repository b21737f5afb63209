package pipeline

import (
	"context"
	"sort"
	"sync"
)

// Handler runs one kind of stage. Execute is given the node, the run's
// context and artifact store; it returns the stage's outcome. An error is
// a FAIL outcome with the error as its reason, and a panic is one too: a
// handler never ends the run by itself. Handlers that need the graph or the
// runner (parallel, fan-in, the manager loop) find them with ExecutionFrom.
type Handler interface {
	Type() string
	Execute(ctx context.Context, node *Node, pctx *Context, store *ArtifactStore) (*Outcome, error)
}

// NewHandler returns a Handler of type typ whose Execute calls execute.
// (A Handler has a type name besides its function, so there is no func
// type to convert a function to, as net/http's HandlerFunc.)
func NewHandler(typ string, execute func(ctx context.Context, node *Node, pctx *Context, store *ArtifactStore) (*Outcome, error)) Handler {
	return funcHandler{typ, execute}
}

// funcHandler is NewHandler's Handler.
type funcHandler struct {
	typ     string
	execute func(ctx context.Context, node *Node, pctx *Context, store *ArtifactStore) (*Outcome, error)
}

func (h funcHandler) Type() string { return h.typ }

func (h funcHandler) Execute(ctx context.Context, node *Node, pctx *Context, store *ArtifactStore) (*Outcome, error) {
	return h.execute(ctx, node, pctx, store)
}

// HandlerRegistry maps handler types to handlers. It is safe for
// concurrent use.
type HandlerRegistry struct {
	mu       sync.RWMutex
	handlers map[string]Handler
}

// NewHandlerRegistry returns an empty registry.
func NewHandlerRegistry() *HandlerRegistry {
	return &HandlerRegistry{handlers: map[string]Handler{}}
}

// Register adds h under h.Type(), replacing any handler of that type.
func (r *HandlerRegistry) Register(h Handler) {
	r.mu.Lock()
	r.handlers[h.Type()] = h
	r.mu.Unlock()
}

// Get returns the handler of a type, or nil.
func (r *HandlerRegistry) Get(typ string) Handler {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.handlers[typ]
}

// Types returns the registered types, sorted.
func (r *HandlerRegistry) Types() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.handlers))
	for t := range r.handlers {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

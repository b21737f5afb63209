package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/morphhost/morph/abi"
)

// This file is the engine's table of middleware hooks: for each hook of
// abi.Hooks of kind abi.Middleware, its native interface, its Funcs field
// and its descriptor, in this order. Everything else (Funcs' JSON hooks, funcsOf, Status's
// hook names, package host's binding of a plugin's exports, package
// temporal's activities) loops over middlewareHooks. A new middleware hook
// is its payload types and row in package abi, its schema, an entry here,
// and its call site.

// TurnStartHook is called after a turn's input is recorded.
type TurnStartHook interface {
	OnTurnStart(ctx context.Context, ev abi.TurnStart) error
}

// ActionHook is called when a tool call is parsed, before the tool runs.
type ActionHook interface {
	OnAction(ctx context.Context, ev abi.Action) error
}

// ObservationHook is called after a tool's observation is written back.
type ObservationHook interface {
	OnObservation(ctx context.Context, ev abi.Observation) error
}

// FinalHook is called exactly once per turn, on every path that ends it.
type FinalHook interface {
	OnFinal(ctx context.Context, ev abi.TurnEnd) error
}

// BeforeRunHook may replace a turn's system prompt and narrow its tools.
// Several compose in order, each seeing the previous one's result.
type BeforeRunHook interface {
	BeforeRun(ctx context.Context, in abi.BeforeRunInput) (abi.BeforeRunOutput, error)
}

// AfterRunHook is told how a turn ended, after FinalHook.
type AfterRunHook interface {
	AfterRun(ctx context.Context, in abi.AfterRunInput) error
}

// BeforeToolCallHook may rewrite a tool call's input or deny the call.
// Several compose in order, each seeing the input as rewritten so far; the
// first denial ends the chain and its reason becomes the observation.
type BeforeToolCallHook interface {
	BeforeToolCall(ctx context.Context, in abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error)
}

// AfterToolCallHook may rewrite a tool's output. Several compose in order,
// each seeing the output as rewritten so far.
type AfterToolCallHook interface {
	AfterToolCall(ctx context.Context, in abi.AfterToolCallInput) (abi.AfterToolCallOutput, error)
}

// Funcs is a Middleware made of functions, for middleware whose hook set is
// known only at run time (a WebAssembly plugin implements the hooks its
// manifest lists). A nil field is a hook it does not implement. A hook may
// also be given at the level of its JSON payloads (SetJSON), as a plugin's
// host and a Temporal workflow's engine give theirs.
type Funcs struct {
	ID      string // the middleware's name
	History bool   // WantsHistory
	// Bounded says the hooks return by their call's deadline on their own
	// (a WebAssembly plugin's host enforces it), so the engine calls them on
	// the run's goroutine instead of a watchdog goroutine of their own, and
	// arms no timer: the deadline is BoundedCallOf(ctx).Deadline(), not the
	// context's, which ends with the run.
	Bounded        bool
	TurnStart      func(ctx context.Context, ev abi.TurnStart) error
	Action         func(ctx context.Context, ev abi.Action) error
	Observation    func(ctx context.Context, ev abi.Observation) error
	Final          func(ctx context.Context, ev abi.TurnEnd) error
	BeforeRun      func(ctx context.Context, in abi.BeforeRunInput) (abi.BeforeRunOutput, error)
	AfterRun       func(ctx context.Context, in abi.AfterRunInput) error
	BeforeToolCall func(ctx context.Context, in abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error)
	AfterToolCall  func(ctx context.Context, in abi.AfterToolCallInput) (abi.AfterToolCallOutput, error)
	// SessionEnd is SessionEndHook's: not a hook of the ABI, and not in
	// Status's hooks, but what its host does when a session ends.
	SessionEnd func(ctx context.Context, sessionID string) error

	json []JSONHook // by middlewareHooks' slot; nil when none is set
}

// Name returns f.ID.
func (f *Funcs) Name() string { return f.ID }

// funcsOf is the one representation the engine dispatches on: a *Funcs as
// it is, any other Middleware through the hook interfaces it implements.
func funcsOf(m Middleware) *Funcs {
	if f, ok := m.(*Funcs); ok {
		return f
	}
	f := &Funcs{ID: m.Name()}
	if h, ok := m.(HistoryWanter); ok {
		f.History = h.WantsHistory()
	}
	for _, h := range middlewareHooks {
		h.adopt(f, m)
	}
	if h, ok := m.(SessionEndHook); ok {
		f.SessionEnd = h.OnSessionEnd
	}
	return f
}

// The descriptors, one per middleware hook: its abi name, its Funcs field
// and its interface's method.
var (
	turnStartHook = observing(abi.HookOnTurnStart,
		func(f *Funcs) *func(context.Context, abi.TurnStart) error { return &f.TurnStart }, TurnStartHook.OnTurnStart)
	beforeRunHook = mutating(abi.HookBeforeRun,
		func(f *Funcs) *func(context.Context, abi.BeforeRunInput) (abi.BeforeRunOutput, error) {
			return &f.BeforeRun
		},
		BeforeRunHook.BeforeRun)
	actionHook = observing(abi.HookOnAction,
		func(f *Funcs) *func(context.Context, abi.Action) error { return &f.Action }, ActionHook.OnAction)
	beforeToolCallHook = mutating(abi.HookBeforeToolCall,
		func(f *Funcs) *func(context.Context, abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
			return &f.BeforeToolCall
		}, BeforeToolCallHook.BeforeToolCall)
	afterToolCallHook = mutating(abi.HookAfterToolCall,
		func(f *Funcs) *func(context.Context, abi.AfterToolCallInput) (abi.AfterToolCallOutput, error) {
			return &f.AfterToolCall
		}, AfterToolCallHook.AfterToolCall)
	observationHook = observing(abi.HookOnObservation,
		func(f *Funcs) *func(context.Context, abi.Observation) error { return &f.Observation }, ObservationHook.OnObservation)
	finalHook = observing(abi.HookOnFinal,
		func(f *Funcs) *func(context.Context, abi.TurnEnd) error { return &f.Final }, FinalHook.OnFinal)
	afterRunHook = observing(abi.HookAfterRun,
		func(f *Funcs) *func(context.Context, abi.AfterRunInput) error { return &f.AfterRun }, AfterRunHook.AfterRun)
)

// middlewareHooks are the middleware hooks in the order a turn calls them
// (Status lists a middleware's hooks in it). A hook's slot is its index.
var middlewareHooks = []mwHook{turnStartHook, beforeRunHook, actionHook, beforeToolCallHook,
	afterToolCallHook, observationHook, finalHook, afterRunHook}

func init() {
	for i, h := range middlewareHooks {
		h.setSlot(i)
	}
}

// JSONHook is a middleware hook implemented at the level of its ABI
// payloads, as a WebAssembly plugin's host and a Temporal workflow's engine
// implement theirs (Funcs.SetJSON).
//
// payload is the hook's input, encoding/json's encoding of its abi payload,
// made once for every middleware the event goes to: the hook must neither
// change it nor keep it past its return. answer is, for a hook that answers
// (before_run, before_tool_call, after_tool_call), a pointer to its output
// payload (*abi.BeforeRunOutput, ...) for the hook to decode its answer
// into, left zero for an empty answer, which changes nothing; it is nil for
// an observing hook, whose answer is ignored.
type JSONHook func(ctx context.Context, payload []byte, answer any) error

// SetJSON makes fn f's implementation of the middleware hook named hook
// (its abi name, as abi.HookOnAction), in place of its field's. It returns
// an error for a name that is no middleware hook.
func (f *Funcs) SetJSON(hook string, fn JSONHook) error {
	h, err := middlewareHook(hook)
	if err != nil {
		return err
	}
	if f.json == nil {
		f.json = make([]JSONHook, len(middlewareHooks))
	}
	f.json[h.slot()] = fn
	return nil
}

// Hooks lists the middleware hooks f implements, by abi name, in the order
// a turn calls them.
func (f *Funcs) Hooks() []string {
	var names []string
	for _, h := range middlewareHooks {
		if h.has(f) {
			names = append(names, h.name())
		}
	}
	return names
}

// CallJSON calls f's hook named hook with input, its payload as JSON, and
// returns its answer as JSON (nil for an observing hook): for a host that
// serves a middleware on another engine's behalf (package temporal's
// workers, for a workflow's engine, which isolates the call). It is the
// bare call, with none of the engine's isolation.
func (f *Funcs) CallJSON(ctx context.Context, hook string, input []byte) (json.RawMessage, error) {
	h, err := middlewareHook(hook)
	if err != nil {
		return nil, err
	}
	if !h.has(f) {
		return nil, fmt.Errorf("middleware %q has no hook %s", f.ID, hook)
	}
	return h.callJSON(ctx, f, input)
}

// Typed returns a copy of f whose every hook is a field: each JSON hook
// (SetJSON) wrapped as its field's function, which encodes the payload
// and decodes the answer. It is for calling a plugin's hooks directly as
// Go functions (a test, a host that composes them); the engine itself
// calls a JSON hook with the event's one encoding of its payload.
func (f *Funcs) Typed() *Funcs {
	g := *f
	g.json = nil
	for _, h := range middlewareHooks {
		if j := f.jsonOf(h.slot()); j != nil {
			h.typeJSON(&g, j)
		}
	}
	return &g
}

// jsonOf is f's JSON implementation of the hook in slot, or nil.
func (f *Funcs) jsonOf(slot int) JSONHook {
	if f.json == nil {
		return nil
	}
	return f.json[slot]
}

// middlewareHook is the descriptor of the middleware hook named name.
func middlewareHook(name string) (mwHook, error) {
	for _, h := range middlewareHooks {
		if h.name() == name {
			return h, nil
		}
	}
	return nil, fmt.Errorf("no middleware hook %q (middleware hooks: %s)", name, strings.Join(abi.HookNames(abi.Middleware), ", "))
}

// mwHook is a middleware hook's descriptor, whatever its payload types.
type mwHook interface {
	name() string
	slot() int
	setSlot(int)
	has(f *Funcs) bool
	// adopt sets f's field from m's method, when m implements the hook.
	adopt(f *Funcs, m Middleware)
	// callJSON is CallJSON of a hook f has.
	callJSON(ctx context.Context, f *Funcs, input []byte) (json.RawMessage, error)
	// typeJSON sets f's field to j, typed (Typed).
	typeJSON(f *Funcs, j JSONHook)
}

// desc is what a descriptor of either kind holds.
type desc[F any] struct {
	hook   string
	index  int
	field  func(*Funcs) *F    // f's field of the hook
	native func(Middleware) F // m's method of the hook's interface, or nil
}

// nativeOf is a descriptor's native: m's method of the hook's interface H,
// bound by bind, or nil when m does not implement H.
func nativeOf[H, F any](bind func(H) F) func(Middleware) F {
	return func(m Middleware) F {
		h, ok := m.(H)
		if !ok {
			var none F
			return none
		}
		return bind(h)
	}
}

func (d *desc[F]) name() string     { return d.hook }
func (d *desc[F]) slot() int        { return d.index }
func (d *desc[F]) setSlot(i int)    { d.index = i }
func (d *desc[F]) typed(f *Funcs) F { return *d.field(f) }

func (d *desc[F]) adopt(f *Funcs, m Middleware) { *d.field(f) = d.native(m) }

// observingHook describes an observing hook, of input payload I.
type observingHook[I any] struct {
	desc[func(context.Context, I) error]
}

func observing[I, H any](name string, field func(*Funcs) *func(context.Context, I) error,
	method func(H, context.Context, I) error) *observingHook[I] {
	native := nativeOf(func(h H) func(context.Context, I) error {
		return func(ctx context.Context, in I) error { return method(h, ctx, in) }
	})
	return &observingHook[I]{desc[func(context.Context, I) error]{hook: name, field: field, native: native}}
}

func (h *observingHook[I]) has(f *Funcs) bool { return f.jsonOf(h.index) != nil || h.typed(f) != nil }

func (h *observingHook[I]) callJSON(ctx context.Context, f *Funcs, input []byte) (json.RawMessage, error) {
	if j := f.jsonOf(h.index); j != nil {
		return nil, j(ctx, input, nil)
	}
	var in I
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, fmt.Errorf("%s payload: %w", h.hook, err)
	}
	return nil, h.typed(f)(ctx, in)
}

func (h *observingHook[I]) typeJSON(f *Funcs, j JSONHook) {
	*h.field(f) = func(ctx context.Context, in I) error {
		payload, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode payload: %w", err)
		}
		return j(ctx, payload, nil)
	}
}

// mutatingHook describes a hook that answers, of payloads I and O.
type mutatingHook[I, O any] struct {
	desc[func(context.Context, I) (O, error)]
}

func mutating[I, O, H any](name string, field func(*Funcs) *func(context.Context, I) (O, error),
	method func(H, context.Context, I) (O, error)) *mutatingHook[I, O] {
	native := nativeOf(func(h H) func(context.Context, I) (O, error) {
		return func(ctx context.Context, in I) (O, error) { return method(h, ctx, in) }
	})
	return &mutatingHook[I, O]{desc[func(context.Context, I) (O, error)]{hook: name, field: field, native: native}}
}

func (h *mutatingHook[I, O]) has(f *Funcs) bool { return f.jsonOf(h.index) != nil || h.typed(f) != nil }

func (h *mutatingHook[I, O]) callJSON(ctx context.Context, f *Funcs, input []byte) (json.RawMessage, error) {
	var out O
	if j := f.jsonOf(h.index); j != nil {
		if err := j(ctx, input, &out); err != nil {
			return nil, err
		}
	} else {
		var in I
		if err := json.Unmarshal(input, &in); err != nil {
			return nil, fmt.Errorf("%s payload: %w", h.hook, err)
		}
		var err error
		if out, err = h.typed(f)(ctx, in); err != nil {
			return nil, err
		}
	}
	return json.Marshal(out)
}

func (h *mutatingHook[I, O]) typeJSON(f *Funcs, j JSONHook) {
	*h.field(f) = func(ctx context.Context, in I) (O, error) {
		var out O
		payload, err := json.Marshal(in)
		if err != nil {
			return out, fmt.Errorf("encode payload: %w", err)
		}
		err = j(ctx, payload, &out)
		return out, err
	}
}

// jsonCall is one call of a JSONHook, as callMiddleware's argument: a
// struct, not a closure, so that a call allocates nothing for it.
type jsonCall struct {
	fn      JSONHook
	payload []byte
	err     error // the payload's encoding's, which fails the call
	answer  any
}

// callJSONHook makes c's call.
func callJSONHook(ctx context.Context, c jsonCall) error {
	if c.err != nil {
		return fmt.Errorf("encode payload: %w", c.err)
	}
	return c.fn(ctx, c.payload, c.answer)
}

// encodeOnce is enc, encoding v into it unless an earlier middleware of
// the event did.
func encodeOnce[I any](enc *encoded, v I) *encoded {
	if !enc.done {
		enc.raw, enc.err = json.Marshal(v)
		enc.done = true
	}
	return enc
}

// notify calls observing hook h on every middleware that implements it.
// step is the step the payload names; payload builds the event for one
// middleware, with the history only when it asks for it and the event has
// one (histories: otherwise every middleware shares one encoding).
// Failures are isolated by call; observing hooks cannot fail a turn.
func notify[I any](e *Engine, ctx context.Context, r *run, h *observingHook[I], step int, histories bool, payload func(history bool) I) {
	enc := r.event()
	for _, m := range e.chain() {
		shared := &enc[0]
		if histories && m.f.History {
			shared = &enc[1]
		}
		if j := m.f.jsonOf(h.index); j != nil {
			if !shared.done {
				encodeOnce(shared, payload(m.f.History))
			}
			callMiddleware(e, ctx, r, m, h.hook, step, callJSONHook, jsonCall{fn: j, payload: shared.raw, err: shared.err})
		} else if fn := h.typed(m.f); fn != nil {
			callMiddleware(e, ctx, r, m, h.hook, step, fn, payload(m.f.History))
		}
	}
}

// call runs h of m with in, in isolation (callMiddleware). enc is the
// event's shared encoding of in, for a JSON hook. ran is false when the
// hook was skipped for quarantine.
func (h *mutatingHook[I, O]) call(e *Engine, r *run, m *mw, step int, enc *encoded, in I) (out O, ran bool, err error) {
	if j := m.f.jsonOf(h.index); j != nil {
		encodeOnce(enc, in)
		answer := new(O)
		ran, err = callMiddleware(e, r.ctx, r, m, h.hook, step, callJSONHook, jsonCall{fn: j, payload: enc.raw, err: enc.err, answer: answer})
		return *answer, ran, err
	}
	fn := h.typed(m.f)
	ran, err = callMiddleware(e, r.ctx, r, m, h.hook, step, func(ctx context.Context, in I) (err error) {
		out, err = fn(ctx, in)
		return err
	}, in)
	return out, ran, err
}

package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/internal/safetext"
)

// instantiateHostModule provides morph:host/v1 in the plugin's runtime. The
// functions close over the plugin, which is how they know whose log, config
// and grants they serve. Out-of-bounds pointers are the guest's error: log
// drops the message, config_get answers -1, http_request an error result;
// none traps. http_request is there for every plugin: one without the grant
// gets an error result it can handle (ErrNotGranted's message), not a
// module that fails to load.
func (p *Plugin) instantiateHostModule(ctx context.Context, r wazero.Runtime) error {
	_, err := r.NewHostModuleBuilder(abi.HostModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(p.hostLog),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, nil).Export(abi.ImportLog).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(p.hostConfigGet),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}).Export(abi.ImportConfigGet).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(p.hostHTTPRequest),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}).Export(abi.ImportHTTPRequest).
		Instantiate(ctx)
	return err
}

// hostLog is log(level, ptr, len) of morph:host/v1: the message goes to the
// log under the plugin's name, escaped, within the call's log budget (see
// logWriter); a level outside slog's Debug to Error is clamped.
func (p *Plugin) hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	level, ptr, n := int32(stack[0]), uint32(stack[1]), uint32(stack[2])
	s := stateOf(ctx)
	if s == nil {
		return
	}
	msg, ok := mod.Memory().Read(ptr, n) // a view: message copies what the budget allows
	if !ok {
		s.log.warn(ctx, "guest log call with an out-of-bounds message", "ptr", ptr, "len", n)
		return
	}
	s.log.message(ctx, slog.Level(min(max(level, int32(slog.LevelDebug)), int32(slog.LevelError))), msg)
}

func (p *Plugin) hostConfigGet(_ context.Context, mod api.Module, stack []uint64) {
	kptr, klen, optr, ocap := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	stack[0] = api.EncodeI32(-1)
	key, ok := mod.Memory().Read(kptr, klen)
	if !ok {
		return
	}
	val, ok := p.values[string(key)]
	if !ok {
		return
	}
	if uint32(len(val)) <= ocap && !mod.Memory().WriteString(optr, val) {
		return
	}
	stack[0] = api.EncodeI32(int32(len(val)))
}

// logWriter is one instance's output to the log: its stdout and stderr
// (as an io.Writer), its log calls, and the warnings the host gives about
// them, under the plugin's name, escaped (safetext: a guest's bytes may hold
// terminal escapes), and within Limits.MaxLogBytes of escaped text per call
// (and per instantiation): a chatty or hostile guest cannot flood the
// host's log, and once over the budget its output is dropped with one
// warning. A warning about the guest is given once per call. Like its
// instance, it is used by one goroutine at a time.
type logWriter struct {
	p      *Plugin
	state  *callState   // its instance's: a write past the call's deadline ends the call
	buf    bytes.Buffer // a partial line of stdout or stderr
	budget int
	capped bool
	warned map[string]bool // the warnings given in this call
}

func newLogWriter(p *Plugin, state *callState) *logWriter {
	return &logWriter{p: p, state: state, budget: p.limits.MaxLogBytes}
}

// refill gives a new call its budget, after logging the partial line the
// last call left: kept across calls, a line that never ends would grow by a
// budget per call, for ever in a pooled instance.
func (w *logWriter) refill() {
	if w.buf.Len() > 0 {
		w.p.log.Info(w.buf.String(), "stream", "guest")
		w.buf.Reset()
	}
	w.budget, w.capped = w.p.limits.MaxLogBytes, false
	clear(w.warned)
}

// take escapes what the guest wrote and spends the budget on it, returning
// what fits, all of it or a cut; ok is false when the budget was spent
// already. An empty write costs a byte: no free flood of empty lines.
func (w *logWriter) take(b []byte) (text string, ok bool) {
	if w.budget == 0 {
		if !w.capped {
			w.capped = true
			w.p.log.Warn("guest output over the log limit; dropping the rest of this call's", "limit_bytes", w.p.limits.MaxLogBytes)
		}
		return "", false
	}
	text = safetext.Escape(string(b[:min(len(b), w.budget)])) // escaping only lengthens: no need to escape more
	text = text[:min(len(text), w.budget)]
	w.budget -= max(len(text), 1)
	return text, true
}

// message logs one log call's message.
func (w *logWriter) message(ctx context.Context, level slog.Level, msg []byte) {
	if text, ok := w.take(msg); ok {
		w.p.log.Log(ctx, level, text)
	}
}

// warn logs a warning about the guest once per call: a guest can make the
// host warn as often as it calls it.
func (w *logWriter) warn(ctx context.Context, msg string, args ...any) {
	if w.warned[msg] {
		return
	}
	if w.warned == nil {
		w.warned = map[string]bool{}
	}
	w.warned[msg] = true
	w.p.log.WarnContext(ctx, msg+" (once per call)", args...)
}

// Write is the guest's stdout and stderr. WASI's fd_write calls it once per
// buffer the guest lists, millions of them if it likes, so each checks the
// call's deadline.
func (w *logWriter) Write(b []byte) (int, error) {
	if err := w.state.expired(); err != nil {
		panic(err) // wazero ends the guest's call with it
	}
	text, _ := w.take(b)
	w.buf.WriteString(text)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil { // no newline yet: keep the partial line
			w.buf.Reset()
			w.buf.WriteString(line)
			break
		}
		w.p.log.Info(line[:len(line)-1], "stream", "guest")
	}
	return len(b), nil
}

// hostHTTPRequest is http_request(req_ptr, req_len) -> i64 of morph:host/v1.
// Whatever goes wrong is the guest's error result, never a trap: a request
// outside guest memory, bad JSON, a denial, a failure.
func (p *Plugin) hostHTTPRequest(ctx context.Context, mod api.Module, stack []uint64) {
	if ctx.Value(inAlloc{}) != nil {
		// Called from the morph_alloc that toGuest runs: answering would call
		// morph_alloc again, a recursion through the host that no checkpoint
		// of the guest's would see (package interrupt counts guest calls only).
		stack[0] = abi.Pack(0, 0, true)
		return
	}
	ptr, n := uint32(stack[0]), uint32(stack[1])
	var req abi.HTTPRequest
	raw, ok := mod.Memory().Read(ptr, n)
	var out []byte
	var err error
	switch {
	case !ok:
		err = fmt.Errorf("http_request: the request [%d, +%d) is outside guest memory", ptr, n)
	case decodeJSON(raw, p.limits.MaxJSONDepth, &req) != nil:
		err = fmt.Errorf("http_request: the request is not an HTTPRequest JSON object")
	default:
		var resp abi.HTTPResponse
		reqCtx, cancel := callContext(ctx)
		resp, err = p.sandbox.HTTP(reqCtx, req)
		cancel()
		if err == nil {
			out, err = json.Marshal(resp)
		}
	}
	if err != nil {
		out = []byte(err.Error())
	}
	stack[0] = toGuest(ctx, mod, out, err != nil)
}

// inAlloc marks the context of the morph_alloc call toGuest makes.
type inAlloc struct{}

// toGuest copies out into a buffer the guest allocates with its own
// morph_alloc (wazero lets a host function call back into the module that
// called it) and packs its place as an export result, with abi.ErrorFlag
// when isErr. When the guest cannot allocate, the answer is an error
// without a message (Pack(0, 0, true)). A trap in morph_alloc, or the call's
// deadline passing in it, ends the whole call as that failure.
func toGuest(ctx context.Context, mod api.Module, out []byte, isErr bool) uint64 {
	if len(out) == 0 {
		return abi.Pack(0, 0, isErr)
	}
	if len(out) > abi.MaxPayload {
		out, isErr = []byte("the host's answer is over the ABI's size limit"), true
	}
	alloc := mod.ExportedFunction(abi.ExportAlloc)
	if alloc == nil {
		return abi.Pack(0, 0, true)
	}
	res, err := alloc.Call(context.WithValue(ctx, inAlloc{}, true), uint64(len(out)))
	if err != nil {
		panic(err) // wazero ends the guest's call with this error
	}
	ptr := uint32(res[0])
	if ptr == 0 || !mod.Memory().Write(ptr, out) {
		return abi.Pack(0, 0, true)
	}
	return abi.Pack(ptr, uint32(len(out)), isErr)
}

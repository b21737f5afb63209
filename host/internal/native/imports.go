package native

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/host/internal/guest"
)

// instantiateHostModule provides morph:host/v1 in the plugin's runtime. The
// functions close over the module, which is how they know whose log, config
// and grants they serve. Out-of-bounds pointers are the guest's error: log
// drops the message, config_get answers -1, http_request an error result;
// none traps. http_request is there for every plugin: one without the grant
// gets an error result it can handle (ErrNotGranted's message), not a
// module that fails to load.
func (m *Module) instantiateHostModule(ctx context.Context, r wazero.Runtime) error {
	_, err := r.NewHostModuleBuilder(abi.HostModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(m.hostLog),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, nil).Export(abi.ImportLog).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(m.hostConfigGet),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}).Export(abi.ImportConfigGet).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(m.hostHTTPRequest),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}).Export(abi.ImportHTTPRequest).
		Instantiate(ctx)
	return err
}

// hostLog is log(level, ptr, len) of morph:host/v1: the message goes to the
// log under the plugin's name, escaped, within the call's log budget (see
// guest.LogWriter); a level outside slog's Debug to Error is clamped.
func (m *Module) hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	level, ptr, n := int32(stack[0]), uint32(stack[1]), uint32(stack[2])
	s := guest.StateOf(ctx)
	if s == nil {
		return
	}
	msg, ok := mod.Memory().Read(ptr, n) // a view: message copies what the budget allows
	if !ok {
		s.Log().Warn(ctx, "guest log call with an out-of-bounds message", "ptr", ptr, "len", n)
		return
	}
	s.Log().Message(ctx, slog.Level(min(max(level, int32(slog.LevelDebug)), int32(slog.LevelError))), msg)
}

func (m *Module) hostConfigGet(_ context.Context, mod api.Module, stack []uint64) {
	kptr, klen, optr, ocap := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	stack[0] = api.EncodeI32(-1)
	key, ok := mod.Memory().Read(kptr, klen)
	if !ok {
		return
	}
	val, ok := m.env.Values[string(key)]
	if !ok {
		return
	}
	if uint32(len(val)) <= ocap && !mod.Memory().WriteString(optr, val) {
		return
	}
	stack[0] = api.EncodeI32(int32(len(val)))
}

// hostHTTPRequest is http_request(req_ptr, req_len) -> i64 of morph:host/v1.
// Whatever goes wrong is the guest's error result, never a trap: a request
// outside guest memory, bad JSON, a denial, a failure.
func (m *Module) hostHTTPRequest(ctx context.Context, mod api.Module, stack []uint64) {
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
	case guest.DecodeJSON(raw, m.env.Limits.MaxJSONDepth, &req) != nil:
		err = fmt.Errorf("http_request: the request is not an HTTPRequest JSON object")
	default:
		var resp abi.HTTPResponse
		reqCtx, cancel := guest.CallContext(ctx)
		resp, err = m.env.Sandbox.HTTP(reqCtx, req)
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

// toGuest copies out, http_request's answer, into a buffer the guest
// allocates with its own morph_alloc (wazero lets a host function call back
// into the module that called it) and packs its place as an export result,
// with abi.ErrorFlag when isErr. When the guest cannot allocate it (its
// memory is full: memory_mb), the answer is a short error saying so, and a
// warning in the plugin's log; only when the guest cannot allocate that
// either is it an error without a message (Pack(0, 0, true)). A trap in
// morph_alloc, or the call's deadline passing in it, ends the whole call as
// that failure.
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
	if packed, ok := allocWrite(ctx, mod, alloc, out, isErr); ok {
		return packed
	}
	if s := guest.StateOf(ctx); s != nil {
		s.Log().Warn(ctx, "http_request: the guest could not allocate the host's answer", "bytes", len(out), "error", isErr)
	}
	msg := fmt.Sprintf("http_request: the host's answer (%d bytes) could not be allocated in the guest's memory (morph_alloc failed): "+
		"raise memory_mb, or lower http_max_response_kb", len(out))
	if packed, ok := allocWrite(ctx, mod, alloc, []byte(msg), true); ok {
		return packed
	}
	return abi.Pack(0, 0, true)
}

// allocWrite copies out into a buffer of the guest's morph_alloc (alloc)
// and packs its place, with abi.ErrorFlag when isErr; ok is false when the
// guest could not allocate it.
func allocWrite(ctx context.Context, mod api.Module, alloc api.Function, out []byte, isErr bool) (packed uint64, ok bool) {
	res, err := alloc.Call(context.WithValue(ctx, inAlloc{}, true), uint64(len(out)))
	if err != nil {
		panic(err) // wazero ends the guest's call with this error
	}
	ptr := uint32(res[0])
	if ptr == 0 || !mod.Memory().Write(ptr, out) {
		return 0, false
	}
	return abi.Pack(ptr, uint32(len(out)), isErr), true
}

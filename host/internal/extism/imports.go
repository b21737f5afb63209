package extism

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strings"

	sdk "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/wasmbin"
)

// go-sdk's extism:host/env cannot be changed function by function (a host
// module of the same name fails to instantiate beside it), so morph renames
// the guest's imports of the functions it overrides to its own namespace
// (extismMorphEnv) before go-sdk compiles the module, and provides them
// there:
//
//   - http_request, http_status_code, http_headers: go-sdk's http_request
//     sends through http.DefaultClient, which follows redirects, and checks
//     its allow-list on the first URL only; morph's goes through the
//     plugin's HTTP grant (sandbox.Sandbox.HTTP), which checks every hop.
//   - output_set: go-sdk reads the output range the guest set without
//     checking it, and a range outside the kernel's memory comes back as an
//     empty output; morph's records the range, and the host checks it
//     against the limit and the memory after the call (instance.invoke).
//   - log_*, get_log_level: go-sdk's log through its own logger under a
//     process-wide level that is off by default; morph's log under the
//     plugin's name, as morph:host/v1's log does.
//
// The other functions of extism:host/env stay go-sdk's: they work on the
// kernel's memory, and a guest that passes them an offset outside it traps
// (go-sdk panics), which the host reports as guest.ErrTrap.

// extismOverrideTypes are the signatures of the functions morph overrides
// (the same as go-sdk's).
var extismOverrideTypes = map[string]wasmbin.Signature{
	"http_request":     {Params: i64s(2), Results: i64s(1)},
	"http_status_code": {Results: []api.ValueType{api.ValueTypeI32}},
	"http_headers":     {Results: i64s(1)},
	"output_set":       {Params: i64s(2)},
	"get_log_level":    {Results: []api.ValueType{api.ValueTypeI32}},
	"log_trace":        {Params: i64s(1)},
	"log_debug":        {Params: i64s(1)},
	"log_info":         {Params: i64s(1)},
	"log_warn":         {Params: i64s(1)},
	"log_error":        {Params: i64s(1)},
}

// extismOverridden are the names of extismOverrideTypes, as renameImports takes them.
var extismOverridden = func() map[string]bool {
	m := map[string]bool{}
	for name := range extismOverrideTypes {
		m[name] = true
	}
	return m
}()

func i64s(n int) []api.ValueType {
	ts := make([]api.ValueType, n)
	for i := range ts {
		ts[i] = api.ValueTypeI64
	}
	return ts
}

// Extism's log levels (the PDKs' LogLevel, go-sdk's ExtismCompat values),
// with the slog level each is logged at.
var extismLogLevels = []struct {
	name  string
	level slog.Level
}{
	{"log_trace", slog.LevelDebug}, // 0
	{"log_debug", slog.LevelDebug}, // 1
	{"log_info", slog.LevelInfo},   // 2
	{"log_warn", slog.LevelWarn},   // 3
	{"log_error", slog.LevelError}, // 4
}

// hostFunctions are morph's functions of extismMorphEnv.
func (m *Module) hostFunctions() []sdk.HostFunction {
	fn := func(name string, cb sdk.HostFunctionStackCallback) sdk.HostFunction {
		t := extismOverrideTypes[name]
		f := sdk.NewHostFunctionWithStack(name, cb, t.Params, t.Results)
		f.SetNamespace(extismMorphEnv)
		return f
	}
	fns := []sdk.HostFunction{
		fn("output_set", func(ctx context.Context, _ *sdk.CurrentPlugin, stack []uint64) {
			g := guestOf(ctx)
			g.out.offset, g.out.length = stack[0], stack[1]
		}),
		fn("http_request", m.httpRequest),
		fn("http_status_code", func(ctx context.Context, _ *sdk.CurrentPlugin, stack []uint64) {
			stack[0] = api.EncodeI32(guestOf(ctx).httpStatus)
		}),
		fn("http_headers", func(ctx context.Context, cp *sdk.CurrentPlugin, stack []uint64) {
			stack[0] = 0
			if h := guestOf(ctx).httpHeaders; h != nil {
				b, _ := json.Marshal(h) // a map of strings always encodes
				stack[0] = writeBlock(ctx, cp, "http_headers", b)
			}
		}),
		fn("get_log_level", func(ctx context.Context, _ *sdk.CurrentPlugin, stack []uint64) {
			stack[0] = api.EncodeI32(math.MaxInt32) // off
			for i, l := range extismLogLevels {
				if m.env.Log().Enabled(ctx, l.level) {
					stack[0] = api.EncodeI32(int32(i))
					break
				}
			}
		}),
	}
	for _, l := range extismLogLevels {
		fns = append(fns, fn(l.name, func(ctx context.Context, cp *sdk.CurrentPlugin, stack []uint64) {
			m.log(ctx, cp, l.level, stack[0])
		}))
	}
	return fns
}

// log logs the kernel block at offset under the plugin's name, within the
// call's log budget (guest.LogWriter), and frees it (as go-sdk's log functions
// do). An offset that is not a block is dropped with a warning, not a trap,
// as morph:host/v1's log does.
func (m *Module) log(ctx context.Context, cp *sdk.CurrentPlugin, level slog.Level, offset uint64) {
	w := guestOf(ctx).state.Log()
	n, err := cp.Length(offset)
	if err != nil || n == 0 || offset > math.MaxUint32 {
		w.Warn(ctx, "guest log call with an offset that is not an Extism memory block", "offset", offset)
		return
	}
	if msg, ok := cp.Memory().Read(uint32(offset), uint32(min(n, math.MaxUint32))); ok {
		w.Message(ctx, level, msg)
	}
	cp.Free(offset)
}

// writeBlock writes b in a new kernel block (allocBlock) and returns its
// offset; it traps, naming the function, when b does not fit.
func writeBlock(ctx context.Context, cp *sdk.CurrentPlugin, fn string, b []byte) uint64 {
	off, err := allocBlock(ctx, cp, b)
	if err != nil {
		panic(fmt.Errorf("%s: %w", fn, err))
	}
	return off
}

// allocBlock allocates a kernel block for b and writes it there. go-sdk's
// WriteBytes writes at offset 0 (over the kernel's own state) when the
// allocation fails; this fails instead.
func allocBlock(ctx context.Context, cp *sdk.CurrentPlugin, b []byte) (uint64, error) {
	off, err := cp.AllocWithContext(ctx, uint64(len(b)))
	if err == nil && (off == 0 || off > math.MaxUint32 || !cp.Memory().Write(uint32(off), b)) {
		err = fmt.Errorf("%d bytes do not fit in the Extism memory", len(b))
	}
	return off, err
}

// extismHTTPRequest is the request go-sdk's PDKs send to http_request.
type extismHTTPRequest struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
}

// httpRequest is Extism's http_request(request, body) -> response body,
// sent by the plugin's HTTP grant (sandbox.Sandbox.HTTP: allowed hosts checked on
// the URL and on every redirect hop, the grant's timeout and size limit).
// As in go-sdk, a request that cannot be read, is refused or fails traps
// the call, since the Extism PDKs have no way to receive an error from
// http_request; the host reports a refusal as ErrNotGranted and any other
// failure as guest.ErrTrap (ErrTimeout past the deadline), with the reason. The
// response body is a kernel block (0 when empty); its status and headers
// are kept for http_status_code and http_headers.
func (m *Module) httpRequest(ctx context.Context, cp *sdk.CurrentPlugin, stack []uint64) {
	g := guestOf(ctx)
	g.httpStatus, g.httpHeaders = 0, nil
	fail := func(format string, args ...any) {
		panic(fmt.Errorf("http_request: "+format, args...))
	}
	raw, err := cp.ReadBytes(stack[0])
	if err != nil {
		fail("the request at offset %d is not an Extism memory block", stack[0])
	}
	cp.Free(stack[0])
	var req extismHTTPRequest
	if err := guest.DecodeJSON(raw, m.env.Limits.MaxJSONDepth, &req); err != nil {
		fail("the request is not JSON: %w", err)
	}
	var body []byte
	if stack[1] != 0 {
		if body, err = cp.ReadBytes(stack[1]); err != nil {
			fail("the body at offset %d is not an Extism memory block", stack[1])
		}
		cp.Free(stack[1])
	}
	res, err := m.env.Sandbox.HTTP(ctx, abi.HTTPRequest{Method: strings.ToUpper(req.Method), URL: req.URL,
		Headers: req.Headers, Body: string(body)})
	if err != nil {
		fail("%w", err)
	}
	g.httpStatus, g.httpHeaders = int32(res.Status), make(map[string]string, len(res.Headers))
	for k, v := range res.Headers {
		g.httpHeaders[strings.ToLower(k)] = v
	}
	stack[0] = 0
	if len(res.Body) > 0 {
		stack[0] = writeBlock(ctx, cp, "http_request", []byte(res.Body))
	}
}

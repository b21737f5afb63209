package extism

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/wasmbin"
)

// kernelOf is the Kernel of the instance whose call ctx runs.
func kernelOf(ctx context.Context) *Kernel { return guestOf(ctx).kernel }

// envFunction is a function of extism:host/env: its name, signature and
// body.
type envFunction struct {
	name            string
	params, results []api.ValueType
	fn              api.GoModuleFunc
}

var (
	i64     = api.ValueTypeI64
	i32     = api.ValueTypeI32
	none    = []api.ValueType{}
	oneI64  = []api.ValueType{i64}
	twoI64  = []api.ValueType{i64, i64}
	oneI32  = []api.ValueType{i32}
	i64AndI = []api.ValueType{i64, i32}
)

// kernelFunc is a host function over the calling instance's Kernel.
func kernelFunc(f func(k *Kernel, stack []uint64)) api.GoModuleFunc {
	return func(ctx context.Context, _ api.Module, stack []uint64) { f(kernelOf(ctx), stack) }
}

// kernelFunctions are the functions of extism:host/env that the Kernel
// serves alone (go-sdk v1.7.1's signatures, host.go). The others (http,
// log, get_log_level) need the plugin's grants and logger: see
// Module.envFunctions.
var kernelFunctions = []envFunction{
	{"alloc", oneI64, oneI64, kernelFunc(func(k *Kernel, s []uint64) { s[0] = k.Alloc(s[0]) })},
	{"free", oneI64, none, kernelFunc(func(k *Kernel, s []uint64) { k.Free(s[0]) })},
	{"length", oneI64, oneI64, kernelFunc(func(k *Kernel, s []uint64) { s[0] = k.Length(s[0]) })},
	{"length_unsafe", oneI64, oneI64, kernelFunc(func(k *Kernel, s []uint64) { s[0] = k.Length(s[0]) })},
	{"load_u8", oneI64, oneI32, kernelFunc(func(k *Kernel, s []uint64) { s[0] = uint64(k.at("load_u8", s[0], 1)[0]) })},
	{"load_u64", oneI64, oneI64, kernelFunc(func(k *Kernel, s []uint64) {
		s[0] = binary.LittleEndian.Uint64(k.at("load_u64", s[0], 8))
	})},
	{"store_u8", i64AndI, none, kernelFunc(func(k *Kernel, s []uint64) { k.at("store_u8", s[0], 1)[0] = byte(s[1]) })},
	{"store_u64", twoI64, none, kernelFunc(func(k *Kernel, s []uint64) {
		binary.LittleEndian.PutUint64(k.at("store_u64", s[0], 8), s[1])
	})},
	// The input's bytes are read past its length, as go-sdk (and the
	// kernel, without its bounds-checking feature) does, but never past
	// the memory.
	{"input_load_u8", oneI64, oneI32, kernelFunc(func(k *Kernel, s []uint64) {
		s[0] = uint64(k.at("input_load_u8", k.inputAt("input_load_u8", s[0]), 1)[0])
	})},
	{"input_load_u64", oneI64, oneI64, kernelFunc(func(k *Kernel, s []uint64) {
		s[0] = binary.LittleEndian.Uint64(k.at("input_load_u64", k.inputAt("input_load_u64", s[0]), 8))
	})},
	{"input_length", none, oneI64, kernelFunc(func(k *Kernel, s []uint64) { s[0] = k.inputLen })},
	{"input_offset", none, oneI64, kernelFunc(func(k *Kernel, s []uint64) { s[0] = k.input })},
	{"input_set", twoI64, none, kernelFunc(func(k *Kernel, s []uint64) { k.input, k.inputLen = s[0], s[1] })},
	// The output's range is recorded as set, and checked when the host
	// reads it (Kernel.Output).
	{"output_set", twoI64, none, kernelFunc(func(k *Kernel, s []uint64) { k.output, k.outputLen = s[0], s[1] })},
	{"output_length", none, oneI64, kernelFunc(func(k *Kernel, s []uint64) { s[0] = k.outputLen })},
	{"output_offset", none, oneI64, kernelFunc(func(k *Kernel, s []uint64) { s[0] = k.output })},
	{"error_set", oneI64, none, kernelFunc(func(k *Kernel, s []uint64) { k.errBlock = s[0] })},
	{"error_get", none, oneI64, kernelFunc(func(k *Kernel, s []uint64) { s[0] = k.errBlock })},
	{"memory_bytes", none, oneI64, kernelFunc(func(k *Kernel, s []uint64) { s[0] = uint64(len(k.buf)) })},
	{"reset", none, none, kernelFunc(func(k *Kernel, _ []uint64) { k.Reset() })},
	{"config_get", oneI64, oneI64, kernelFunc(func(k *Kernel, s []uint64) { s[0] = k.configGet(s[0]) })},
	{"var_get", oneI64, oneI64, kernelFunc(func(k *Kernel, s []uint64) { s[0] = k.varGet(s[0]) })},
	{"var_set", twoI64, none, kernelFunc(func(k *Kernel, s []uint64) { k.varSet(s[0], s[1]) })},
}

// inputAt is the offset of the input's byte i, trapping as fn when it
// overflows.
func (k *Kernel) inputAt(fn string, i uint64) uint64 {
	if i > ^uint64(0)-k.input {
		k.trap(fn, "offset %d past the input at %d overflows", i, k.input)
	}
	return k.input + i
}

// instantiateEnv instantiates extism:host/env in r with fns: the host
// functions of every Extism instance of the runtime, which find the
// calling instance, and its Kernel, in the call's context (guestOf).
func instantiateEnv(ctx context.Context, r wazero.Runtime, fns []envFunction) error {
	b := r.NewHostModuleBuilder(extismEnv)
	for _, f := range fns {
		b.NewFunctionBuilder().WithGoModuleFunction(f.fn, f.params, f.results).WithName(f.name).Export(f.name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

// envFunctions are all the functions of extism:host/env (go-sdk v1.7.1's
// names and signatures): the kernel's, and those that need the plugin's
// grants and logger, morph's own rather than go-sdk's:
//
//   - http_request, http_status_code, http_headers: go-sdk's http_request
//     sends through http.DefaultClient, which follows redirects, and checks
//     its allow-list on the first URL only; morph's goes through the
//     plugin's HTTP grant (sandbox.Sandbox.HTTP), which checks every hop.
//   - log_*, get_log_level: go-sdk's log through its own logger under a
//     process-wide level that is off by default; morph's log under the
//     plugin's name, as morph:host/v1's log does.
func (m *Module) envFunctions() []envFunction {
	fns := append([]envFunction(nil), kernelFunctions...)
	fns = append(fns,
		envFunction{"http_request", twoI64, oneI64, m.httpRequest},
		envFunction{"http_status_code", none, oneI32, func(ctx context.Context, _ api.Module, stack []uint64) {
			stack[0] = api.EncodeI32(guestOf(ctx).httpStatus)
		}},
		envFunction{"http_headers", none, oneI64, func(ctx context.Context, _ api.Module, stack []uint64) {
			stack[0] = 0
			if g := guestOf(ctx); g.httpHeaders != nil {
				b, _ := json.Marshal(g.httpHeaders) // a map of strings always encodes
				stack[0] = g.kernel.write("http_headers", b)
			}
		}},
		envFunction{"get_log_level", none, oneI32, func(ctx context.Context, _ api.Module, stack []uint64) {
			stack[0] = api.EncodeI32(math.MaxInt32) // off
			for i, l := range extismLogLevels {
				if m.env.Log().Enabled(ctx, l.level) {
					stack[0] = api.EncodeI32(int32(i))
					break
				}
			}
		}},
	)
	for _, l := range extismLogLevels {
		fns = append(fns, envFunction{l.name, oneI64, none, func(ctx context.Context, _ api.Module, stack []uint64) {
			logBlock(ctx, l.level, stack[0])
		}})
	}
	return fns
}

// envSignatures are the signatures of extism:host/env's functions by name,
// which checkExtismImports checks the guest's imports against.
var envSignatures = func() map[string]wasmbin.Signature {
	sigs := map[string]wasmbin.Signature{}
	for _, f := range (&Module{}).envFunctions() {
		sigs[f.name] = wasmbin.Signature{Params: f.params, Results: f.results}
	}
	return sigs
}()

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

// logBlock logs the kernel block at offset under the plugin's name, within
// the call's log budget (guest.LogWriter), and frees it (as go-sdk's log
// functions do), an empty one too. An offset that is not a block is
// dropped with a warning, not a trap, as morph:host/v1's log does.
func logBlock(ctx context.Context, level slog.Level, offset uint64) {
	g := guestOf(ctx)
	w := g.state.Log()
	msg, ok := g.kernel.Read(offset)
	if !ok {
		w.Warn(ctx, "guest log call with an offset that is not an Extism memory block", "offset", offset)
		return
	}
	w.Message(ctx, level, msg)
	g.kernel.Free(offset)
}

// extismHTTPRequest is the request go-sdk's PDKs send to http_request.
type extismHTTPRequest struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
}

// httpRequest is Extism's http_request(request, body) -> response body,
// sent by the plugin's HTTP grant (sandbox.Sandbox.HTTP: allowed hosts checked on
// the URL and on every redirect hop, the grant's timeout and size limit),
// under the call's deadline (guest.CallContext).
// As in go-sdk, a request that cannot be read, is refused or fails traps
// the call, since the Extism PDKs have no way to receive an error from
// http_request; the host reports a refusal as ErrNotGranted and any other
// failure as guest.ErrTrap (ErrTimeout past the deadline), with the reason. The
// response body is a kernel block (0 when empty); its status and headers
// are kept for http_status_code and http_headers.
func (m *Module) httpRequest(ctx context.Context, _ api.Module, stack []uint64) {
	g := guestOf(ctx)
	k := g.kernel
	g.httpStatus, g.httpHeaders = 0, nil
	if g.mod == nil { // the instance is initializing
		g.state.RefuseImage("its initialization called http_request: each instance makes its own requests")
	}
	fail := func(format string, args ...any) {
		panic(fmt.Errorf("http_request: "+format, args...))
	}
	raw, ok := k.Read(stack[0])
	if !ok {
		fail("the request at offset %d is not an Extism memory block", stack[0])
	}
	var req extismHTTPRequest
	if err := guest.DecodeJSON(raw, m.env.Limits.MaxJSONDepth, &req); err != nil {
		fail("the request is not JSON: %w", err)
	}
	k.Free(stack[0])
	var body []byte
	if stack[1] != 0 {
		b, ok := k.Read(stack[1])
		if !ok {
			fail("the body at offset %d is not an Extism memory block", stack[1])
		}
		body = append([]byte(nil), b...)
		k.Free(stack[1])
	}
	cctx, cancel := guest.CallContext(ctx)
	defer cancel()
	res, err := m.env.Sandbox.HTTP(cctx, abi.HTTPRequest{Method: strings.ToUpper(req.Method), URL: req.URL,
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
		stack[0] = k.write("http_request", []byte(res.Body))
	}
}

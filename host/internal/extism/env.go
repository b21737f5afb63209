package extism

import (
	"context"
	"encoding/binary"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// kernelKey is the context key under which a call's context answers the
// instance's Kernel: the extism:host/env functions find it there.
type kernelKey struct{}

// kernelOf is the Kernel of the call ctx runs.
func kernelOf(ctx context.Context) *Kernel { return ctx.Value(kernelKey{}).(*Kernel) }

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
// log, get_log_level) need the plugin's grants and logger.
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
// calling instance's Kernel in the call's context (kernelKey).
func instantiateEnv(ctx context.Context, r wazero.Runtime, fns []envFunction) error {
	b := r.NewHostModuleBuilder(extismEnv)
	for _, f := range fns {
		b.NewFunctionBuilder().WithGoModuleFunction(f.fn, f.params, f.results).WithName(f.name).Export(f.name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

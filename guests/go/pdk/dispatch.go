package pdk

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/morphhost/morph/abi"
)

// handle runs one export on its JSON input and returns its output, or the
// message of a guest-reported error when isErr. Built by standard Go it never
// panics: a panic in an author's function becomes a guest-reported error.
// Built by TinyGo, which does not implement recover on WebAssembly, a panic
// traps at once, without running the deferred recover: the host reports the
// trap and discards the instance.
func handle(export string, input []byte) (out []byte, isErr bool) {
	defer func() {
		if r := recover(); r != nil {
			out, isErr = []byte(fmt.Sprintf("%s: panic: %v", export, r)), true
		}
	}()
	out, err := dispatch(export, input)
	if err != nil {
		msg := err.Error()
		if msg == "" {
			msg = export + ": error"
		}
		return []byte(msg), true
	}
	return out, false
}

// errNotRegistered answers a hook export the plugin did not register.
var errNotRegistered = errors.New("hook not registered by this plugin")

// handler runs one registered hook on its JSON input.
type handler func(input []byte) ([]byte, error)

// hookOf is the hook name of each hook export (abi.Hooks).
var hookOf = func() map[string]string {
	m := make(map[string]string, len(abi.Hooks))
	for _, h := range abi.Hooks {
		m[h.Export] = h.Name
	}
	return m
}()

func dispatch(export string, input []byte) ([]byte, error) {
	if name, ok := hookOf[export]; ok {
		h := reg.handlers[name]
		if h == nil {
			return nil, fmt.Errorf("%s: %w (plugin %q)", name, errNotRegistered, reg.name)
		}
		return h(input)
	}
	switch export {
	case abi.ExportDescribe:
		m, err := reg.manifest()
		if err != nil {
			return nil, err
		}
		return json.Marshal(m)
	case abi.ExportCallTool:
		return callTool(input)
	case abi.ExportDestroy:
		if reg.onDestroy != nil {
			reg.onDestroy()
		}
		return nil, nil // empty output, registered or not: the host closes either way
	case abi.ExportInstanceReplaced:
		var in abi.InstanceReplaced
		if err := json.Unmarshal(input, &in); err != nil {
			return nil, fmt.Errorf("%s: %w", export, err)
		}
		if reg.onReplaced != nil {
			reg.onReplaced(in)
		}
		return nil, nil
	}
	return nil, fmt.Errorf("%s: not an export of ABI v1 this plugin serves", export)
}

// none is the output of an observing hook: it answers empty output.
type none struct{}

// hook decodes the input, runs fn and encodes its output (none: empty).
func hook[In, Out any](name string, fn func(In) (Out, error), input []byte) ([]byte, error) {
	var in In
	if err := decode(input, &in); err != nil {
		return nil, fmt.Errorf("%s: invalid input: %w", name, err)
	}
	out, err := fn(in)
	if err != nil {
		return nil, err
	}
	if _, empty := any(out).(none); empty {
		return nil, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("%s: encode output: %w", name, err)
	}
	return b, nil
}

// decode reads a JSON payload; empty input is the zero payload, and unknown
// fields are ignored (ABI v1 only ever adds fields).
func decode(input []byte, v any) error {
	if len(input) == 0 {
		return nil
	}
	return json.Unmarshal(input, v)
}

func callTool(input []byte) ([]byte, error) {
	var in abi.ToolCallInput
	if err := decode(input, &in); err != nil {
		return nil, fmt.Errorf("call_tool: invalid input: %w", err)
	}
	fn := reg.toolFns[in.Tool]
	if fn == nil {
		return nil, fmt.Errorf("unknown tool %q", in.Tool)
	}
	if in.Params == nil {
		in.Params = map[string]any{}
	}
	callID = in.CallID
	defer func() { callID = "" }()
	out, err := fn(in.Params)
	if err != nil {
		return nil, err
	}
	return json.Marshal(abi.ToolCallOutput{Output: out})
}

// exchange is the memory protocol of SPEC section 2, apart from how a
// buffer's address is taken (addr), so that it runs natively in tests.
//
// Go's garbage collector does not move objects but does free unreferenced
// ones, so every buffer whose address the host holds is referenced from
// here: an input buffer from alloc until the export that consumes it is
// called, and an output until the next export call.
type exchange struct {
	addr    func([]byte) uint32
	pending map[uint32][]byte // allocated input buffers the host has not passed back yet
	last    []byte            // the last output, valid until the next export call
}

func newExchange(addr func([]byte) uint32) *exchange {
	return &exchange{addr: addr, pending: map[uint32][]byte{}}
}

// maxAlloc bounds one input buffer; larger requests answer 0, which the host
// reports as a guest error instead of the guest dying of an impossible
// allocation.
const maxAlloc = 1 << 30

// alloc is morph_alloc: size writable bytes, or 0.
func (x *exchange) alloc(size uint32) uint32 {
	if size > maxAlloc {
		return 0
	}
	n := size
	if n == 0 {
		n = 1 // a real address even for an empty request
	}
	buf := make([]byte, n)
	p := x.addr(buf)
	x.pending[p] = buf
	return p
}

// call runs one (ptr, len) -> i64 export and packs its result.
func (x *exchange) call(export string, ptr, size uint32) uint64 {
	x.last = nil // the previous output is no longer needed
	input, err := x.take(ptr, size)
	var out []byte
	isErr := false
	if err != nil {
		out, isErr = []byte(export+": "+err.Error()), true
	} else {
		out, isErr = handle(export, input)
	}
	return x.pack(out, isErr)
}

// take returns the input the host wrote at ptr, and forgets every pending
// buffer: from now on they belong to this call (or to no one).
func (x *exchange) take(ptr, size uint32) ([]byte, error) {
	buf, ok := x.pending[ptr]
	for p := range x.pending {
		delete(x.pending, p)
	}
	if size == 0 {
		return nil, nil
	}
	if !ok || int(size) > len(buf) {
		return nil, fmt.Errorf("input [%d, +%d) is not a buffer from %s", ptr, size, abi.ExportAlloc)
	}
	return buf[:size], nil
}

// claim unpacks the result of a host function that answers like an export
// (http_request): the host put the answer in a buffer it got from alloc,
// called back during the import, which from now on belongs to the caller
// and leaves the pending list. An empty result is (nil, isErr).
func (x *exchange) claim(result uint64) (out []byte, isErr bool, err error) {
	ptr, n, isErr := abi.Unpack(result)
	buf, ok := x.pending[ptr]
	delete(x.pending, ptr)
	switch {
	case n == 0:
		return nil, isErr, nil
	case !ok || int(n) > len(buf):
		return nil, false, fmt.Errorf("the host answered [%d, +%d), which is not a buffer from %s", ptr, n, abi.ExportAlloc)
	}
	return buf[:n], isErr, nil
}

// pack keeps out alive and returns the packed result; empty success is 0.
func (x *exchange) pack(out []byte, isErr bool) uint64 {
	if len(out) > abi.MaxPayload {
		out, isErr = []byte(fmt.Sprintf("output of %d bytes is over the ABI's limit", len(out))), true
	}
	if len(out) == 0 {
		if !isErr {
			return 0
		}
		out = []byte("error")
	}
	x.last = out
	return abi.Pack(x.addr(out), uint32(len(out)), isErr)
}

package extism

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/tetratelabs/wazero/experimental"

	"github.com/morphhost/morph/host/internal/guest"
)

// Kernel is Extism's kernel (extism/extism kernel/src/lib.rs, v1.7.0, the
// one go-sdk v1.7.1 embeds) written in Go: the memory an Extism guest
// sees only through i64 offsets, its allocator, the call's input, output
// and error, and the plugin's config and vars. The guest reaches it
// through extism:host/env (env.go).
//
// It keeps the kernel's semantics where PDKs depend on them (alloc(0) is 0,
// 0 is null, length of anything but an active block is 0, freeing the
// input empties it, reset zeroes what was used) but not its allocator:
// the kernel walks every block on alloc, free and length, through headers
// the guest can overwrite (store_u64 anywhere), so a forged size loops it.
// Here every operation is O(1) in block headers: blocks are found by the
// header just before their data, free blocks sit on one list per size
// class, and a header that does not check out is ignored (a guest that
// wrote over its own headers loses block reuse, never the host's time).
//
// Its memory comes from the instance's arena (mapped outside Go's heap,
// grown without copying; see package memory), so it counts against the
// plugin's memory like the guest's own. A Kernel is used by one call at a
// time, as its instance.
type Kernel struct {
	mem experimental.LinearMemory
	buf []byte // mem's current bytes
	max uint64 // the most bytes buf may grow to

	top  uint64                // the end of the last block: where the next one's header goes
	free [kernelClasses]uint32 // per size class, the data offset of the first free block (0: none)

	input, inputLen   uint64
	output, outputLen uint64
	errBlock          uint64

	config      map[string]string
	vars        map[string][]byte
	varBytes    int // what vars count against maxVarBytes (varCost)
	maxVarBytes int

	// headers counts the block headers looked at since the kernel
	// was made: TestKernel and FuzzKernel check that each operation
	// touches O(1) of them.
	headers uint64
}

// The block layout: a 16-byte header before each block's 8-aligned data,
// four little-endian u32 (size, the data's capacity; used, what length
// answers; state, kernelActive or kernelFree; next, the free list's
// link). The first header is at 16, the first data at 32: offsets below
// are never blocks, and 0 is null.
const (
	kernelHeader  = 16
	kernelBase    = 16
	kernelActive  = 0x4b58_4101 // "\x01AXK": a magic, so that zeros or guest data rarely pass for a header
	kernelFree    = 0x4b58_4102
	kernelClasses = 33 // size classes: floor(log2 size), sizes up to 2^32
	kernelGrow    = 64 << 10
	// kernelMaxBytes bounds the kernel's memory so that every offset and
	// size fits a header's u32.
	kernelMaxBytes = math.MaxUint32 &^ (kernelGrow - 1)
)

// KernelOptions are what a Kernel holds beside its memory.
type KernelOptions struct {
	// Config answers config_get (the plugin's configured values).
	Config map[string]string
	// Vars are the vars it starts with (copied): those set while a
	// snapshot's instance initialized.
	Vars map[string][]byte
	// MaxVarBytes bounds the vars, counted as go-sdk does (varCost); 0
	// disables var_set.
	MaxVarBytes int
}

// NewKernel makes a kernel whose memory alloc allocates (an instance's
// memory.Arena), up to maxBytes (at most 4 GiB less 64 KiB). Its memory
// grows as blocks need, 64 KiB at a time; a block that does not fit is
// an alloc of 0, as in Extism's kernel.
func NewKernel(alloc experimental.MemoryAllocator, maxBytes uint64, opts KernelOptions) *Kernel {
	maxBytes = min(maxBytes, kernelMaxBytes)
	k := &Kernel{
		mem:         alloc.Allocate(0, maxBytes),
		max:         maxBytes,
		top:         kernelBase,
		config:      opts.Config,
		vars:        make(map[string][]byte, len(opts.Vars)),
		maxVarBytes: opts.MaxVarBytes,
	}
	// The arena lets a memory's first Reallocate (wazero's, to the declared
	// minimum) past its limit; taking it here at 0 holds every growth of
	// the kernel, the guest's first alloc included, to memory_mb.
	k.buf = k.mem.Reallocate(0)
	for name, v := range opts.Vars {
		k.vars[name] = append([]byte(nil), v...)
		k.varBytes += varCost(name, v)
	}
	return k
}

// Close gives the kernel's memory back (its arena unmaps it at Release):
// call it when the instance closes. The kernel must not be used after.
func (k *Kernel) Close() {
	k.mem.Free()
	k.buf, k.top = nil, kernelBase
}

// Trap is the error a kernel function panics with when the guest passes
// it something it cannot serve (an offset outside the kernel's memory,
// var_set with vars disabled or full, a value that does not fit): the
// call traps, and the host reports guest.ErrTrap with it as the cause.
type Trap struct {
	// Func is the extism:host/env function.
	Func string
	// Msg says what was wrong.
	Msg string
}

func (t *Trap) Error() string { return extismEnv + "." + t.Func + ": " + t.Msg }

func (k *Kernel) trap(fn, format string, args ...any) {
	panic(&Trap{Func: fn, Msg: fmt.Sprintf(format, args...)})
}

// at answers buf[p:p+n], trapping as fn when that is not all in buf.
func (k *Kernel) at(fn string, p, n uint64) []byte {
	if p > uint64(len(k.buf)) || n > uint64(len(k.buf))-p {
		k.trap(fn, "offset %d is outside the Extism memory (%d bytes)", p, len(k.buf))
	}
	return k.buf[p : p+n]
}

func (k *Kernel) u32(at uint64) uint32 { return binary.LittleEndian.Uint32(k.buf[at:]) }

func (k *Kernel) put32(at uint64, v uint32) { binary.LittleEndian.PutUint32(k.buf[at:], v) }

// block answers the header offset of the block whose data is at p, if
// its header says it is in state state and its data lies within the
// blocks allocated: p need not be one alloc answered, the guest can write
// anything anywhere, but whatever it is, the block is inside buf.
func (k *Kernel) block(p uint64, state uint32) (h uint64, ok bool) {
	if p < kernelBase+kernelHeader || p > k.top || p%8 != 0 {
		return 0, false
	}
	h = p - kernelHeader
	k.headers++
	size, used := uint64(k.u32(h)), uint64(k.u32(h+4))
	return h, k.u32(h+8) == state && used <= size && size != 0 && size <= k.top-p
}

// Alloc is alloc: the data offset of a new active block of n bytes, or 0
// when n is 0 or the block does not fit.
func (k *Kernel) Alloc(n uint64) uint64 {
	if n == 0 || n > k.max {
		return 0
	}
	// Any block on a list at or above class ceil(log2 n) holds n bytes.
	for c := bits.Len64(n - 1); c < kernelClasses; c++ {
		p := uint64(k.free[c])
		if p == 0 {
			continue
		}
		h, ok := k.block(p, kernelFree)
		if !ok || uint64(k.u32(h)) < n {
			k.free[c] = 0 // the guest wrote over this list: drop it
			continue
		}
		k.free[c] = k.u32(h + 12)
		k.put32(h+4, uint32(n))
		k.put32(h+8, kernelActive)
		k.put32(h+12, 0)
		return p
	}
	size := (n + 7) &^ 7
	p := k.top + kernelHeader
	if size > k.max || p > k.max-size {
		return 0
	}
	if end := p + size; end > uint64(len(k.buf)) {
		grown := min((end+kernelGrow-1)&^(kernelGrow-1), k.max)
		b := k.mem.Reallocate(grown)
		if b == nil {
			return 0
		}
		k.buf = b
	}
	h := k.top
	k.headers++
	k.put32(h, uint32(size))
	k.put32(h+4, uint32(n))
	k.put32(h+8, kernelActive)
	k.put32(h+12, 0)
	k.top = p + size
	return p
}

// Free is free: p's block, when p is an active block, becomes free for a
// later alloc; freeing the input empties it (the kernel's rule: its bytes
// may be reused).
func (k *Kernel) Free(p uint64) {
	h, ok := k.block(p, kernelActive)
	if !ok {
		return
	}
	c := bits.Len64(uint64(k.u32(h))) - 1 // floor(log2 size): block answers no size 0
	k.put32(h+8, kernelFree)
	k.put32(h+12, k.free[c])
	k.free[c] = uint32(p)
	if p == k.input {
		k.inputLen = 0
	}
}

// Length is length (and length_unsafe): the bytes of p's block when p is
// an active block, else 0.
func (k *Kernel) Length(p uint64) uint64 {
	h, ok := k.block(p, kernelActive)
	if !ok {
		return 0
	}
	return uint64(k.u32(h + 4))
}

// Read answers the bytes of p's block, a view of the kernel's memory
// valid until the next alloc; ok is false when p is not an active block.
func (k *Kernel) Read(p uint64) (b []byte, ok bool) {
	h, ok := k.block(p, kernelActive)
	if !ok {
		return nil, false
	}
	return k.buf[p : p+uint64(k.u32(h+4))], true
}

// Write allocates a block holding b and answers its offset, or 0 when b
// is empty or does not fit.
func (k *Kernel) Write(b []byte) uint64 {
	p := k.Alloc(uint64(len(b)))
	if p != 0 {
		copy(k.buf[p:], b)
	}
	return p
}

// write is Write for a host function fn, which traps when b does not fit.
func (k *Kernel) write(fn string, b []byte) uint64 {
	p := k.Write(b)
	if p == 0 && len(b) > 0 {
		k.trap(fn, "%d bytes do not fit in the Extism memory (%d of at most %d bytes in use)", len(b), k.top, k.max)
	}
	return p
}

// Reset is reset, and what the host does before each call (as go-sdk's
// SetInput): the blocks are gone and their bytes zeroed, and so are the
// input, the output and the error; the vars stay.
func (k *Kernel) Reset() {
	if k.top > kernelBase {
		clear(k.buf[kernelBase:k.top])
	}
	k.top = kernelBase
	k.free = [kernelClasses]uint32{}
	k.input, k.inputLen, k.output, k.outputLen, k.errBlock = 0, 0, 0, 0, 0
}

// SetInput allocates a block holding the call's input and makes it the
// input, as go-sdk's SetInput after a reset does. An input that does not
// fit is guest.ErrInputTooLarge (go-sdk's kernel would leave the guest an
// empty input).
func (k *Kernel) SetInput(in []byte) error {
	p := k.Write(in)
	if p == 0 && len(in) > 0 {
		return guest.Fail(guest.ErrInputTooLarge, fmt.Sprintf("the input of %d bytes does not fit in the Extism memory beside the %d bytes in use (at most %d bytes); raise memory_mb", len(in), k.top, k.max), nil)
	}
	k.input, k.inputLen = p, uint64(len(in))
	return nil
}

// Output answers the output the guest set (output_set), a view of the
// kernel's memory, checked against maxOut bytes and the memory.
func (k *Kernel) Output(maxOut int) ([]byte, error) {
	off, n := k.output, k.outputLen
	if n > uint64(maxOut) {
		return nil, guest.Fail(guest.ErrOutputTooLarge, fmt.Sprintf("%d bytes, limit %d", n, maxOut), nil)
	}
	if off > uint64(len(k.buf)) || n > uint64(len(k.buf))-off {
		return nil, guest.Fail(guest.ErrBadOutput, fmt.Sprintf("output [%d, +%d) is outside the Extism memory", off, n), nil)
	}
	return k.buf[off : off+n], nil
}

// Error answers the error message the guest set (error_set), a view of
// the kernel's memory; none (empty) when it set none, set 0, or set an
// offset that is not an active block or an empty one: go-sdk reads the
// error as length bytes at the offset, and an empty one as no error.
func (k *Kernel) Error() []byte {
	msg, _ := k.Read(k.errBlock)
	return msg
}

// Vars answers a copy of the vars (what a snapshot carries to new
// instances).
func (k *Kernel) Vars() map[string][]byte {
	vars := make(map[string][]byte, len(k.vars))
	for name, v := range k.vars {
		vars[name] = append([]byte(nil), v...)
	}
	return vars
}

// varCost is what a var counts against MaxVarBytes: go-sdk's accounting
// (the name, the value, and the size of a slice and a string header).
func varCost(name string, v []byte) int { return 24 + 16 + len(name) + len(v) }

// configGet is config_get: a new block holding the value of the config
// key in p's block, 0 when there is none.
func (k *Kernel) configGet(p uint64) uint64 {
	key, _ := k.Read(p)
	v, ok := k.config[string(key)]
	if !ok {
		return 0
	}
	return k.write("config_get", []byte(v))
}

// varGet is var_get: it frees the name's block (go-sdk does) and answers a
// new block holding the var's value, 0 when there is none.
func (k *Kernel) varGet(p uint64) uint64 {
	name, _ := k.Read(p)
	k.Free(p)
	v, ok := k.vars[string(name)]
	if !ok {
		return 0
	}
	return k.write("var_get", v)
}

// varSet is var_set: it frees both blocks (go-sdk does) and sets the var,
// or deletes it when value is 0. The vars' total is kept as it changes
// (go-sdk sums every var on each set, and counts a replaced one twice).
func (k *Kernel) varSet(nameAt, valueAt uint64) {
	if k.maxVarBytes == 0 {
		k.trap("var_set", "vars are disabled by this host")
	}
	b, _ := k.Read(nameAt)
	name := string(b)
	k.Free(nameAt)
	old, had := k.vars[name]
	if valueAt == 0 {
		if had {
			k.varBytes -= varCost(name, old)
			delete(k.vars, name)
		}
		return
	}
	v, _ := k.Read(valueAt)
	k.Free(valueAt)
	total := k.varBytes + varCost(name, v)
	if had {
		total -= varCost(name, old)
	}
	if total >= k.maxVarBytes {
		k.trap("var_set", "the variable store is full: %d bytes, limit %d (max_output_kb)", total, k.maxVarBytes)
	}
	k.vars[name] = append(old[:0:0], v...)
	k.varBytes = total
}

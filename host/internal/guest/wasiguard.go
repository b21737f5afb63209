package guest

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// WASI's functions are wazero's, and some do work in proportion to what the
// guest passes them: poll_oneoff walks its subscriptions (a million took
// 200 ms and allocated as many events), fd_write and fd_read their buffers.
// A guest calling them in a loop would run far past its deadline between two
// of its checks. wasiGuard wraps them (a wazero function listener, called
// before the function): each checks the call's deadline first, and refuses a
// count of buffers or subscriptions over what any real program passes, so
// that one call's work is bounded. A read or a write also moves at most as
// many bytes as the guest's memory holds: only buffers that overlap can
// list more (1,024 buffers over the same 64 MiB would write 64 GiB to a
// granted file in one call). A refusal ends the call as a trap naming the
// function and the count.

// Limits of the counts the guest passes to WASI (exported for the tests
// of the host's hostile guests, which go up to them and past).
const (
	// MaxIOVecs is POSIX's IOV_MAX on Linux: readv and writev refuse more.
	MaxIOVecs = 1024
	// MaxSubscriptions bounds poll_oneoff: Go's runtime subscribes once per
	// timer and per file it waits on, Rust and TinyGo once to sleep.
	MaxSubscriptions = 1024
)

// wasiCounts are the guarded WASI functions, each with the index of the
// parameter that is a count, and its limit; -1: the deadline only.
// limit; iovecs: the count is of buffers (an array of (pointer, length)
// pairs at the parameter before it), whose lengths are summed too.
// files: the function changes the instance's table of open files, which
// CallState.FilesChanged records.
var wasiCounts = map[string]wasiCall{
	"poll_oneoff": {2, MaxSubscriptions, "subscriptions", false, false},
	"fd_write":    {2, MaxIOVecs, "buffers", true, false},
	"fd_read":     {2, MaxIOVecs, "buffers", true, false},
	"fd_pwrite":   {2, MaxIOVecs, "buffers", true, false},
	"fd_pread":    {2, MaxIOVecs, "buffers", true, false},
	"fd_readdir":  {-1, 0, "", false, false},
	"random_get":  {-1, 0, "", false, false},
	"path_open":   {-1, 0, "", false, true},
	"fd_close":    {-1, 0, "", false, true},
	"fd_renumber": {-1, 0, "", false, true},
	"sock_accept": {-1, 0, "", false, true},
}

// wasiGuard is the listener factory of WASI's functions.
type wasiGuard struct{}

// WithWASIGuard is ctx making the WASI module instantiated with it
// guarded: every loader instantiates WASI with it.
func WithWASIGuard(ctx context.Context) context.Context {
	return experimental.WithFunctionListenerFactory(ctx, wasiGuard{})
}

// NewFunctionListener guards the functions of wasiCounts, and no other
// (a nil listener costs nothing: wazero compiles no call to it).
func (wasiGuard) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	if def.ModuleName() != wasi_snapshot_preview1.ModuleName {
		return nil
	}
	c, ok := wasiCounts[def.Name()]
	if !ok {
		return nil
	}
	return c
}

// wasiCall is the guard of one function.
type wasiCall struct {
	param  int
	max    uint32
	what   string
	iovecs bool
	files  bool
}

// Before ends the call, as a panic that wazero returns from it, at the
// call's deadline, or when the guest passes more than the limit.
func (w wasiCall) Before(ctx context.Context, mod api.Module, def api.FunctionDefinition, params []uint64, _ experimental.StackIterator) {
	if s := StateOf(ctx); s != nil {
		if err := s.Expired(); err != nil {
			panic(err)
		}
		if w.files && s.filesChanged == "" {
			s.filesChanged = def.Name()
		}
	}
	if w.param < 0 || w.param >= len(params) {
		return
	}
	n := uint32(params[w.param])
	if n > w.max {
		panic(fmt.Errorf("%s.%s with %d %s: this host allows at most %d", def.ModuleName(), def.Name(), n, w.what, w.max))
	}
	if mem := MemoryOf(mod); w.iovecs && mem != nil {
		if total := iovecBytes(mem, uint32(params[w.param-1]), n); total > uint64(mem.Size()) {
			panic(fmt.Errorf("%s.%s of %d bytes: more than the guest's memory holds (%d bytes)", def.ModuleName(), def.Name(), total, mem.Size()))
		}
	}
}

// iovecBytes is the total length of the n buffers listed at iovs; buffers
// outside memory count nothing (WASI then fails the call itself).
func iovecBytes(mem api.Memory, iovs, n uint32) uint64 {
	var total uint64
	for i := range n {
		if l, ok := mem.ReadUint32Le(iovs + 8*i + 4); ok {
			total += uint64(l)
		}
	}
	return total
}

func (wasiCall) After(context.Context, api.Module, api.FunctionDefinition, []uint64) {}

func (wasiCall) Abort(context.Context, api.Module, api.FunctionDefinition, error) {}

package host

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
// that one call's work is bounded. A refusal ends the call as a trap naming
// the function and the count.

// Limits of the counts the guest passes to WASI.
const (
	// maxIOVecs is POSIX's IOV_MAX on Linux: readv and writev refuse more.
	maxIOVecs = 1024
	// maxSubscriptions bounds poll_oneoff: Go's runtime subscribes once per
	// timer and per file it waits on, Rust and TinyGo once to sleep.
	maxSubscriptions = 1024
)

// wasiCounts are the guarded WASI functions, each with the index of the
// parameter that is a count, and its limit; -1: the deadline only.
var wasiCounts = map[string]struct {
	param int
	max   uint32
	what  string
}{
	"poll_oneoff": {2, maxSubscriptions, "subscriptions"},
	"fd_write":    {2, maxIOVecs, "buffers"},
	"fd_read":     {2, maxIOVecs, "buffers"},
	"fd_pwrite":   {2, maxIOVecs, "buffers"},
	"fd_pread":    {2, maxIOVecs, "buffers"},
	"fd_readdir":  {-1, 0, ""},
	"random_get":  {-1, 0, ""},
	"path_open":   {-1, 0, ""},
}

// wasiGuard is the listener factory of WASI's functions.
type wasiGuard struct{}

// withWASIGuard is ctx making the WASI module instantiated with it guarded.
func withWASIGuard(ctx context.Context) context.Context {
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
	return wasiCall{param: c.param, max: c.max, what: c.what}
}

// wasiCall is the guard of one function.
type wasiCall struct {
	param int
	max   uint32
	what  string
}

// Before ends the call, as a panic that wazero returns from it, at the
// call's deadline, or when the guest passes more than the limit.
func (w wasiCall) Before(ctx context.Context, _ api.Module, def api.FunctionDefinition, params []uint64, _ experimental.StackIterator) {
	if s := stateOf(ctx); s != nil {
		if err := s.expired(); err != nil {
			panic(err)
		}
	}
	if w.param >= 0 && w.param < len(params) && uint32(params[w.param]) > w.max {
		panic(fmt.Errorf("%s.%s with %d %s: this host allows at most %d", def.ModuleName(), def.Name(), uint32(params[w.param]), w.what, w.max))
	}
}

func (wasiCall) After(context.Context, api.Module, api.FunctionDefinition, []uint64) {}

func (wasiCall) Abort(context.Context, api.Module, api.FunctionDefinition, error) {}

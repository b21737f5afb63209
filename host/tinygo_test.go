package host

import (
	"context"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
)

// The example plugin examples/go-hooks built by TinyGo 0.34 (`make
// tinygo-examples`: -target wasip1 -buildmode=c-shared -scheduler=none) runs
// every go-hooks test of gohooks_test.go and middleware_test.go, which go
// over both builds (goHooksBuilds). Here is only what the TinyGo build alone
// shows; MORPH_SKIP_TINYGO=1 skips it.
//
// Where the two builds differ, and none of the shared assertions relies on
// it: a panic in a hook traps in a TinyGo guest (TinyGo cannot recover on
// wasm), so the host discards the instance, where the standard Go build
// answers a guest-reported error and keeps it; and a TinyGo guest's linear
// memory is far smaller (256 KiB against 4.5 MiB for the standard Go build
// after 200 build_prompt calls). A shared test that comes to assert one of
// these branches on goHooksBuild.tinyGo.

// With -scheduler=none a TinyGo guest's memory stays flat over many calls on
// one instance: 2,000 build_prompt calls with 1 KB inputs run on one
// instance, without a fault, in a linear memory that stays small (256 KiB
// measured) and does not grow after the first 100 calls. The default
// asyncify scheduler gives every call a goroutine with a heap-allocated
// stack: measured on this host, 16 MiB after 100 calls and 70 times slower,
// the guest's GC running on a full heap (and, in toolchains.md, 2 GiB after
// 20,000 calls on a host without a memory cap).
func TestTinyGoHooksFlatMemory(t *testing.T) {
	wasm := goHooksTinyGo.wasm(t)
	l, _ := goHooksTinyGo.loader(t)
	ctx := context.Background()
	p := load(t, l, Config{Name: "go-hooks-memory", Path: wasm, Values: map[string]string{"style": "Be brief."}})
	in := jsonPayload(1 << 10)
	const calls, warm = 2000, 100
	memSize := func() uint32 {
		inst, _, err := p.get(ctx, p.shards.local())
		if err != nil {
			t.Fatal(err)
		}
		defer p.put(inst)
		return inst.g.MemoryBytes()
	}
	var afterWarm uint32
	for i := range calls {
		out, err := p.Call(ctx, abi.ExportBuildPrompt, in)
		if err != nil || !strings.Contains(string(out), "- Be brief.") {
			t.Fatalf("call %d: %.100s, %v (stats %+v)", i+1, out, err, p.Stats())
		}
		if i+1 == warm {
			afterWarm = memSize()
		}
	}
	final := memSize()
	checkOneInstance(t, p, 0)
	if st := p.Stats(); st.Calls < calls {
		t.Errorf("Calls = %d, want at least the %d made", st.Calls, calls)
	}
	const maxMem = 4 << 20
	if final > afterWarm || final > maxMem {
		t.Fatalf("linear memory %d KiB after %d calls, %d KiB after %d, want at most %d KiB and no growth: "+
			"built without -scheduler=none?", afterWarm>>10, warm, final>>10, calls, maxMem>>10)
	}
	t.Logf("linear memory %d KiB after %d calls, %d KiB after %d", afterWarm>>10, warm, final>>10, calls)
}

package wasmrt

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/memory"
	"github.com/morphhost/morph/host/internal/wasmbin"
)

// Pre-initialized snapshots (the idea of Wizer, done in the host). A guest's
// runtime initializes itself at every instantiation (the loader's Init:
// ABI v1's _initialize): 60 us of the TinyGo example's 140, and the standard Go example's 2.6 ms, most of it
// writing its data segments (BENCHMARKS.md, A new instance). So the first
// instance of a plugin is initialized once, by hand, and an image of its
// memory and mutable globals taken before anything else runs on it; every
// later instance starts from the image, its memory mapped copy-on-write
// over it (package memory), and runs nothing. What the image holds is the
// same in every instance: whatever the guest's initialization computed,
// random seeds included (SECURITY.md, Snapshots).
//
// The module is rewritten for it (wasmbin.PrepareSnapshot: no data written
// at instantiation, no start function, the mutable globals exported), and a
// plugin whose state lives elsewhere too does not snapshot: one whose code
// changes a table or drops a segment (wasmbin.Shape.StateOp), or whose
// initialization opened or closed a file (guest.CallState.FilesChanged) or
// did what its loader says every instance must do itself
// (guest.CallState.RefuseImage).

// snapshot is a module's image and what the first instance did by hand.
type snapshot struct {
	plan  *wasmbin.Snapshot // its Data are in data
	taken atomic.Bool       // an image was taken, or refused: never tried again
	image atomic.Pointer[imaged]
	// data are the module's data segments, which initialize writes; nil
	// once an image is taken (set before), so that the module's bytes
	// they are slices of are not kept for the plugin's life.
	data atomic.Pointer[[]wasmbin.DataSegment]
}

// imaged is the image of an initialized instance: its memory and the values
// of its mutable globals, in the order of plan.Globals.
type imaged struct {
	mem     *memory.Image
	pages   uint32
	globals []uint64
}

// prepareSnapshot rewrites wasm for snapshots when env allows and the
// module's state is memory and globals only; otherwise it answers wasm and
// why not, which Compile logs.
func prepareSnapshot(env guest.Env, shape *wasmbin.Shape, wasm []byte) ([]byte, *snapshot, error) {
	if !env.Snapshot {
		return wasm, nil, nil
	}
	if shape.StateOp != "" {
		return wasm, nil, fmt.Errorf("its code changes a table or a segment (%s), which an image does not hold", shape.StateOp)
	}
	out, plan, err := wasmbin.PrepareSnapshot(wasm)
	if err != nil {
		return wasm, nil, err
	}
	s := &snapshot{plan: plan}
	data := plan.Data
	s.data.Store(&data)
	plan.Data = nil
	return out, s, nil
}

// instantiate makes an instance of m, whose module was rewritten for
// snapshots, with cfg, which runs no start function. The first instance is
// initialized by hand and its image taken; every later one starts from the
// image: its memory grown to the image's size (the arena mapped or copied
// the image over it) and its globals set.
func (s *snapshot) instantiate(ctx context.Context, m *Module, cfg wazero.ModuleConfig, arena *memory.Arena, state *guest.CallState, init Init) (api.Module, error) {
	img, data := s.image.Load(), s.data.Load()
	if img == nil && data == nil { // taken since the first look
		img = s.image.Load()
	}
	if img != nil {
		arena.Image = img.mem
	}
	mod, err := m.runtime.InstantiateModule(ctx, m.compiled, cfg)
	if err != nil {
		return nil, err
	}
	if img == nil {
		if err := s.initialize(ctx, mod, *data, init); err != nil {
			mod.Close(ctx)
			return nil, err
		}
		s.take(m, mod, state)
		return mod, nil
	}
	if mem := guest.MemoryOf(mod); mem != nil {
		if have := mem.Size() / wasmPage; img.pages > have {
			if _, ok := mem.Grow(img.pages - have); !ok {
				mod.Close(ctx)
				return nil, fmt.Errorf("snapshot: memory cannot grow to the image's %d pages", img.pages)
			}
		}
	}
	for i, name := range s.plan.Globals {
		mod.ExportedGlobal(name).(api.MutableGlobal).Set(img.globals[i])
	}
	return mod, nil
}

// wasmPage is WebAssembly's page size.
const wasmPage = 64 << 10

// initialize does by hand what instantiating the module before its
// rewrite did: writes its data segments (data) and calls its start function;
// then it runs init, the loader's initialization.
func (s *snapshot) initialize(ctx context.Context, mod api.Module, data []wasmbin.DataSegment, init Init) error {
	mem := guest.MemoryOf(mod)
	for i, seg := range data {
		if len(seg.Bytes) > 0 && (mem == nil || !mem.Write(seg.Offset, seg.Bytes)) {
			return fmt.Errorf("data segment %d ([%d, +%d)) is outside the memory", i, seg.Offset, len(seg.Bytes))
		}
	}
	return append(Init{{Export: s.plan.Start}}, init...).Run(ctx, mod)
}

// take takes the image of mod, the first instance, just initialized, unless
// an image was taken or refused already. A refusal is logged, and the
// plugin's instances then all initialize by hand.
func (s *snapshot) take(m *Module, mod api.Module, state *guest.CallState) {
	if !s.taken.CompareAndSwap(false, true) {
		return
	}
	img, err := image(mod, s.plan, state)
	if err != nil {
		m.refuseSnapshot(err)
		return
	}
	s.image.Store(img)
	s.data.Store(nil)
	m.env.Log().Debug("plugin: new instances start from a snapshot", "memory_bytes", img.mem.Size(), "data_bytes", img.mem.DataBytes(), "globals", len(img.globals))
}

// image is the image of mod, or why there cannot be one.
func image(mod api.Module, plan *wasmbin.Snapshot, state *guest.CallState) (*imaged, error) {
	if fn := state.FilesChanged(); fn != "" {
		return nil, fmt.Errorf("its initialization called %s: the files it opens or closes are not in an image", fn)
	}
	if why := state.ImageRefused(); why != "" {
		return nil, errors.New(why)
	}
	img := &imaged{globals: make([]uint64, len(plan.Globals))}
	for i, name := range plan.Globals {
		g := mod.ExportedGlobal(name)
		if g == nil {
			return nil, errors.New("a global of the rewrite is missing") // cannot be: PrepareSnapshot exported it
		}
		img.globals[i] = g.Get()
	}
	var buf []byte
	if mem := guest.MemoryOf(mod); mem != nil {
		if img.pages, _ = mem.Grow(0); img.pages >= 1<<16 { // Size would say 0: it counts bytes in a uint32
			return nil, errors.New("its memory is 4 GiB, more than an image holds")
		}
		buf, _ = mem.Read(0, mem.Size())
	}
	var err error
	if img.mem, err = memory.NewImage(buf); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return img, nil
}

// Snapshot is what the module's snapshot holds (memory.Image.Bytes), or
// why its instances initialize themselves (why is "" while neither is
// known: before the first instance).
func (m *Module) Snapshot() (imageBytes uint64, why string) {
	if m.snap != nil {
		if img := m.snap.image.Load(); img != nil {
			return img.mem.Bytes(), ""
		}
	}
	why, _ = m.noSnapshot.Load().(string)
	return 0, why
}

// refuseSnapshot records and logs why the module's instances initialize
// themselves.
func (m *Module) refuseSnapshot(why error) {
	m.noSnapshot.Store(why.Error())
	LogNoSnapshot(m.env, why)
}

// LogNoSnapshot says, once per plugin, why its instances initialize
// themselves: for a loader that turns snapshots off for a reason of its own
// (the Extism loader's linked modules) as for wasmrt's.
func LogNoSnapshot(env guest.Env, why error) {
	env.Log().Info("plugin: each new instance runs its initialization (no snapshot)", "reason", why)
}

// close releases the image.
func (s *snapshot) close() {
	if img := s.image.Load(); img != nil {
		img.mem.Close()
	}
}

package interrupt

import "github.com/morphhost/morph/host/internal/wasmbin"

// The call graph decides which function entries need a check. A guest can
// run without bound only through a loop (every loop header is checked) or
// through a cycle of calls, so it is enough that every cycle of calls holds
// one check: at the entry of the head of each back edge of a depth-first
// search (see entries). A JSON parser's many small functions then cost
// nothing: on the Rust example's hook, entry checks on every function that
// calls were three quarters of the instrumentation's cost, and checking every
// function on a cycle still half.
//
// Indirect calls (call_indirect, call_ref and their tail forms) are edges to
// a single node standing for "any function whose reference is taken" (in an
// element segment or by ref.func), which has an edge to each of those. The
// host calls back into a guest only from http_request, to morph_alloc, and
// refuses to do so re-entrantly (host/http.go), so imports are not edges.
// (They are for saving a cached counter: see caching.)

// callGraph is what the analysis pass records, by defined function (the
// function index less the imported functions).
type callGraph struct {
	funcImports uint32
	callees     [][]uint32 // direct calls, defined callees only
	indirect    []bool     // makes an indirect call
	taken       []bool     // its reference is taken: a possible indirect callee
	imports     []bool     // calls an imported function
	loops       []bool     // has a loop
	eh          bool       // the module throws or catches exceptions
}

// loop records that the defined function cur has a loop.
func (g *callGraph) loop(cur uint32) {
	if int64(cur) < int64(len(g.loops)) {
		g.loops[cur] = true
	}
}

// note records, for the defined function cur, the instruction op with the
// function index idx (ignored for an indirect call).
func (g *callGraph) note(op byte, cur, idx uint32) {
	if op == opRefFunc || op == opCall || op == opReturnCall {
		if idx < g.funcImports && op != opRefFunc && int64(cur) < int64(len(g.imports)) {
			g.imports[cur] = true
		}
		if idx < g.funcImports || int(idx-g.funcImports) >= len(g.taken) {
			return // an import, or out of range (the rewrite reports it)
		}
		idx -= g.funcImports
	}
	switch {
	case op == opRefFunc:
		g.taken[idx] = true
	case int(cur) >= len(g.callees):
		// a body beyond the declared functions: the rewrite reports it
	case op == opCall || op == opReturnCall:
		g.callees[cur] = append(g.callees[cur], idx)
	default:
		g.indirect[cur] = true
	}
}

// analyse walks the sections that hold function references and code,
// recording the call graph instead of keeping the output, and sets w.entry
// and w.checkIndirect (see entries). A malformed module is reported by the
// rewrite that follows, so here it only stops the analysis: w.entry stays
// nil and the rewrite checks every function that calls.
func (w *rewriter) analyse(m *module) {
	n := int(min(m.funcs, uint32(len(m.buf)))) // a body takes at least a byte: the count cannot exceed that
	g := &callGraph{funcImports: m.funcImports, callees: make([][]uint32, n), indirect: make([]bool, n),
		taken: make([]bool, n), imports: make([]bool, n), loops: make([]bool, n)}
	w.graph = g
	defer func() { w.graph, w.body = nil, w.body[:0] }()
	for _, s := range m.sections {
		switch s.ID {
		case wasmbin.IDGlobal, wasmbin.IDTable, wasmbin.IDElement, wasmbin.IDCode:
			if _, err := w.section(nil, s); err != nil {
				return
			}
		}
	}
	w.entry, w.checkIndirect = g.entries()
	if !g.eh { // a caught exception would skip the save of a cached counter: such modules use the global
		w.cache, w.reach, w.params = g.caching(w.entry, w.checkIndirect, m)
		w.typeParams = m.params
	}
}

// caching chooses the functions that cache the counter in a local: every
// one with a checkpoint (a loop, an entry check, an indirect call checked)
// whose type is known. It also tells which functions may run a checkpoint
// (reach): those, the ones that call an import or make an indirect call,
// and their callers, transitively. A function that caches saves the counter
// before a call to one of them, and reloads it after; calls to the others
// (small leaf helpers, mostly) cost nothing more. params is each function's
// parameter count.
func (g *callGraph) caching(entry []bool, checkIndirect bool, m *module) (cache, reach []bool, params []uint32) {
	n := len(g.callees)
	cache, reach, params = make([]bool, n), make([]bool, n), make([]uint32, n)
	callers := make([][]uint32, n)
	var work []uint32
	for f := range n {
		for _, c := range g.callees[f] {
			callers[c] = append(callers[c], uint32(f))
		}
		checkpoint := g.loops[f] || entry[f] || checkIndirect && g.indirect[f]
		if f < len(m.funcTypes) && int64(m.funcTypes[f]) < int64(len(m.params)) {
			cache[f], params[f] = checkpoint, m.params[m.funcTypes[f]]
		}
		if checkpoint || g.indirect[f] || g.imports[f] {
			reach[f] = true
			work = append(work, uint32(f))
		}
	}
	for len(work) > 0 {
		f := work[len(work)-1]
		work = work[:len(work)-1]
		for _, c := range callers[f] {
			if !reach[c] {
				reach[c] = true
				work = append(work, c)
			}
		}
	}
	return cache, reach, params
}

// succ calls each with the successors of node v; node len(g.callees) is the
// indirect-call node.
func (g *callGraph) succ(v int, each func(int)) {
	if v == len(g.callees) {
		for f, t := range g.taken {
			if t {
				each(f)
			}
		}
		return
	}
	for _, c := range g.callees[v] {
		each(int(c))
	}
	if g.indirect[v] {
		each(len(g.callees))
	}
}

// entries chooses the functions that get an entry check: enough that every
// cycle of calls holds one, fewer than every function on a cycle. Every
// cycle of a directed graph holds a back edge of any depth-first search, so
// the targets of the back edges (the "loop headers" of the call graph) do.
// When the indirect-call node is one, indirect reports it: then every
// indirect call site gets the check instead, as every cycle through that
// node makes an indirect call. (Checking the taken functions' entries
// instead would also check their direct calls, most of their calls.)
func (g *callGraph) entries() (entry []bool, indirect bool) {
	n := len(g.callees)
	head := make([]bool, n+1)
	state := make([]byte, n+1) // 0 unvisited, 1 on the current path, 2 done
	type frame struct {
		v     int
		succs []int
		i     int
	}
	var frames []frame
	push := func(v int) {
		state[v] = 1
		var ss []int
		g.succ(v, func(s int) { ss = append(ss, s) })
		frames = append(frames, frame{v: v, succs: ss})
	}
	for root := 0; root <= n; root++ {
		if state[root] != 0 {
			continue
		}
		push(root)
		for len(frames) > 0 {
			f := &frames[len(frames)-1]
			if f.i == len(f.succs) {
				state[f.v] = 2
				frames = frames[:len(frames)-1]
				continue
			}
			s := f.succs[f.i]
			f.i++
			switch state[s] {
			case 0:
				push(s)
			case 1:
				head[s] = true // a back edge: s is on the path to here
			}
		}
	}
	return head[:n], head[n]
}

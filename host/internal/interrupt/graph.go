package interrupt

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
// refuses to do so re-entrantly (host/internal/native/imports.go), so
// imports are not edges.
// (A call to one may still run a checkpoint, for the plan: see analysis.call.)

// callGraph is what the analysis pass records, by defined function (the
// function index less the imported functions).
type callGraph struct {
	funcImports uint32
	callees     [][]uint32 // direct calls, defined callees only
	indirect    []bool     // makes an indirect call
	taken       []bool     // its reference is taken: a possible indirect callee
	roots       []bool     // exported, or the start function: the host calls it
	eh          bool       // the module throws or catches exceptions
	tail        bool       // the module makes tail calls
	wide        bool       // the module has v128 values outside function bodies: in types or globals
}

// noteRoot records that the host may call the function index idx.
func (g *callGraph) noteRoot(idx uint32) {
	if idx >= g.funcImports && int64(idx-g.funcImports) < int64(len(g.roots)) {
		g.roots[idx-g.funcImports] = true
	}
}

// note records, for the defined function cur, the instruction op with the
// function index idx (ignored for an indirect call).
func (g *callGraph) note(op byte, cur, idx uint32) {
	if op == opRefFunc || op == opCall || op == opReturnCall {
		if idx < g.funcImports || int(idx-g.funcImports) >= len(g.taken) {
			return // an import, or out of range (reported by the code's analysis)
		}
		idx -= g.funcImports
	}
	switch {
	case op == opRefFunc:
		g.taken[idx] = true
	case int(cur) >= len(g.callees):
		// a body beyond the declared functions: wazero refuses the module
	case op == opCall || op == opReturnCall:
		g.callees[cur] = append(g.callees[cur], idx)
	default:
		g.indirect[cur] = true
	}
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
//
// order lists the nodes as the search finished them, callees first: an edge
// that is not a back edge (into a head) goes to a node finished earlier, so
// the graph without the edges into heads is acyclic and order sorts it.
func (g *callGraph) entries() (entry []bool, indirect bool, order []int) {
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
				order = append(order, f.v)
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
	return head[:n], head[n], order
}

package interrupt

// For the tests: the bound on the work between two checks (see plan.go).
const (
	MaxWeight  = maxWeight
	MaxSegment = maxSegment
)

// Plan returns what Instrument plans for wasm: the weight of every checkpoint, by defined function, and
// each defined function's unpaid work.
func Plan(wasm []byte) (weights [][]int, unpaid []int, err error) {
	m, err := split(wasm)
	if err != nil {
		return nil, nil, err
	}
	w := newRewriter(m.funcImports, uint64(m.funcImports)+uint64(m.funcs), 0, 0, 1, 0)
	if err := w.analyse(m); err != nil {
		return nil, nil, err
	}
	weights = make([][]int, len(w.plan.plans))
	for f := range weights {
		for _, p := range w.plan.pointsOf(uint32(f)) {
			weights[f] = append(weights[f], p.weight)
		}
	}
	return weights, w.plan.unpaid, nil
}

// Stack returns what Instrument charges the stack budget for wasm, by defined function (0: nothing) and
// at indirect calls, and each defined function's frame estimate, F.
func Stack(wasm []byte) (charges []int32, indirect int32, frames []int64, err error) {
	m, err := split(wasm)
	if err != nil {
		return nil, 0, nil, err
	}
	w := newRewriter(m.funcImports, uint64(m.funcImports)+uint64(m.funcs), 0, 0, 1, MaxStack)
	if err := w.analyse(m); err != nil {
		return nil, 0, nil, err
	}
	return w.charges, w.chargeInd, w.plan.own, nil
}

package schemacost

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaCost bounds, for a value at each depth of the parameters (0: the
// parameters object), the work of validating it: eval counts subschema
// checks (each reading the value's members), regex the instructions of the
// patterns matched against its bytes, compile the "format": "regex" checks
// (each compiling a string), deep the keywords that compare or hash the
// whole value (enum, const, uniqueItems). Beyond the last depth no
// subschema applies.
type schemaCost struct {
	eval, regex, compile, deep []int64
	maxPattern                 int64 // Limits.MaxPatternBytes: a longer string is refused unparsed
}

// saturate caps the cost arithmetic: anything above it is over every limit.
const saturate = int64(1) << 50

func add(a, b int64) int64 { return min(a+b, saturate) }

func mul(a, b int64) int64 {
	if a != 0 && b > saturate/a {
		return saturate
	}
	return a * b
}

// edge leads to a subschema. Schemas that only refer on ($ref, a single
// allOf, ...) are skipped, counted in hops: otherwise two names referring
// to one definition ({"left": {"$ref": "#"}, "right": {"$ref": "#"}}) would
// look like two subschemas on every member.
type edge struct {
	to   int
	hops int64 // referring schemas skipped, each one evaluation
}

// costNode is one subschema and where it sends the validation next.
type costNode struct {
	inPlace []edge          // subschemas applied to the same value ($ref, allOf, not, if, ...)
	props   map[string]edge // the subschema of each member name
	members []edge          // subschemas that may apply to any member or member name
	prefix  []edge          // the subschema of each leading item
	items   []edge          // subschemas that may apply to any item
	eval    int64           // checks per evaluation: 1, plus one per patternProperties (tried on every member)
	regex   int64           // pattern instructions
	compile int64           // 1 for "format": "regex"
	deep    int64           // enum values, const and uniqueItems
}

// referOnly reports whether n does nothing but apply one subschema to the same value.
func (n *costNode) referOnly() bool {
	return len(n.inPlace) == 1 && len(n.props)+len(n.members)+len(n.prefix)+len(n.items) == 0 &&
		n.eval == 1 && n.regex == 0 && n.compile == 0 && n.deep == 0
}

// costGraph lists every subschema reachable from root, root first, with
// edges that skip referring schemas. It refuses what the cost analysis
// cannot follow, and in-place cycles.
func costGraph(root *jsonschema.Schema) ([]*costNode, []int, error) {
	index := map[*jsonschema.Schema]int{}
	var schemas []*jsonschema.Schema
	id := func(s *jsonschema.Schema) edge {
		i, ok := index[s]
		if !ok {
			i = len(schemas)
			index[s] = i
			schemas = append(schemas, s)
		}
		return edge{to: i}
	}
	ids := func(ss ...*jsonschema.Schema) []edge {
		var out []edge
		for _, s := range ss {
			if s != nil {
				out = append(out, id(s))
			}
		}
		return out
	}
	id(root)
	var nodes []*costNode
	for k := 0; k < len(schemas); k++ {
		s := schemas[k]
		if s.DynamicRef != nil || s.RecursiveRef != nil {
			return nil, nil, fmt.Errorf("%s uses $dynamicRef or $recursiveRef, which tool schemas may not (use $ref)", quote(s.Location))
		}
		n := &costNode{props: map[string]edge{}, eval: 1 + int64(len(s.PatternProperties))}
		n.inPlace = ids(s.Ref, s.Not, s.If, s.Then, s.Else)
		n.inPlace = append(n.inPlace, ids(s.AllOf...)...)
		n.inPlace = append(n.inPlace, ids(s.AnyOf...)...)
		n.inPlace = append(n.inPlace, ids(s.OneOf...)...)
		for _, d := range s.DependentSchemas {
			n.inPlace = append(n.inPlace, id(d))
		}
		for _, d := range s.Dependencies {
			if d, ok := d.(*jsonschema.Schema); ok {
				n.inPlace = append(n.inPlace, id(d))
			}
		}
		for name, p := range s.Properties {
			n.props[name] = id(p)
		}
		for re, p := range s.PatternProperties {
			n.members = append(n.members, id(p))
			n.regex += re.(*pattern).insts
		}
		if p, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
			n.members = append(n.members, id(p))
		}
		n.members = append(n.members, ids(s.PropertyNames, s.UnevaluatedProperties)...)
		switch items := s.Items.(type) {
		case []*jsonschema.Schema:
			n.prefix = ids(items...)
		case *jsonschema.Schema:
			n.items = append(n.items, id(items))
		}
		if p, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
			n.items = append(n.items, id(p))
		}
		n.prefix = append(n.prefix, ids(s.PrefixItems...)...)
		n.items = append(n.items, ids(s.Items2020, s.Contains, s.UnevaluatedItems)...)
		if s.Pattern != nil {
			n.regex += s.Pattern.(*pattern).insts
		}
		if s.Format != nil && s.Format.Name == "regex" {
			n.compile = 1
		}
		if s.Enum != nil {
			n.deep += int64(len(s.Enum.Values))
		}
		if s.Const != nil {
			n.deep++
		}
		if s.UniqueItems {
			n.deep++
		}
		nodes = append(nodes, n)
	}
	order, err := inPlaceOrder(nodes)
	if err != nil {
		return nil, nil, err
	}
	// Skip referring schemas, last in order first, so that each edge's
	// target is already final.
	final := make([]edge, len(nodes))
	for k := len(order) - 1; k >= 0; k-- {
		i := order[k]
		final[i] = edge{to: i}
		if n := nodes[i]; n.referOnly() {
			next := final[n.inPlace[0].to]
			final[i] = edge{to: next.to, hops: next.hops + 1}
		}
	}
	skip := func(es []edge) {
		for j, e := range es {
			es[j] = final[e.to]
		}
	}
	for _, n := range nodes {
		skip(n.inPlace)
		skip(n.members)
		skip(n.prefix)
		skip(n.items)
		for name, e := range n.props {
			n.props[name] = final[e.to]
		}
	}
	return nodes, order, nil
}

// inPlaceOrder sorts the nodes so that each comes before the subschemas it
// applies to the same value. A cycle there is an error: the library stops
// it at run time, failing every value that reaches it.
func inPlaceOrder(nodes []*costNode) ([]int, error) {
	indegree := make([]int, len(nodes))
	for _, n := range nodes {
		for _, e := range n.inPlace {
			indegree[e.to]++
		}
	}
	var order []int
	for i, d := range indegree {
		if d == 0 {
			order = append(order, i)
		}
	}
	for k := 0; k < len(order); k++ {
		for _, e := range nodes[order[k]].inPlace {
			if indegree[e.to]--; indegree[e.to] == 0 {
				order = append(order, e.to)
			}
		}
	}
	if len(order) < len(nodes) {
		return nil, errors.New("its $ref, allOf, anyOf, oneOf, not or if loop back to a subschema for the same value")
	}
	return order, nil
}

// analyze computes the cost of validating against root, depth by depth
// down to maxDepth, the deepest parameters may nest: w
// bounds how many times each subschema may be evaluated on any one value
// at that depth, and skipped the evaluations of the referring schemas
// skipped on the way. A node's member subschemas take the largest count
// any one member name (or item index) can get, so a recursive schema whose
// branches name distinct members (a tree's left and right) stays linear.
func analyze(root *jsonschema.Schema, limit int64, maxDepth int) (schemaCost, error) {
	var cost schemaCost
	nodes, order, err := costGraph(root)
	if err != nil {
		return cost, err
	}
	w := make([]int64, len(nodes))
	w[0] = 1
	skipped := int64(0)
	for depth := 0; depth <= maxDepth; depth++ {
		eval, regex, compile, deep := skipped, int64(0), int64(0), int64(0)
		live := false
		for _, i := range order {
			if w[i] == 0 {
				continue
			}
			n := nodes[i]
			for _, e := range n.inPlace {
				w[e.to] = add(w[e.to], w[i])
				eval = add(eval, mul(w[i], e.hops))
			}
			eval, regex, deep = add(eval, mul(w[i], n.eval)), add(regex, mul(w[i], n.regex)), add(deep, mul(w[i], n.deep))
			compile = add(compile, mul(w[i], n.compile))
			live = true
		}
		if !live {
			break
		}
		if eval > limit {
			return cost, fmt.Errorf("a value at depth %d may be checked against %s subschemas, more than the limit of %d steps (tools.max_schema_steps in morph.toml): its allOf, anyOf, oneOf and $ref multiply", depth, formatCount(eval), limit)
		}
		cost.eval, cost.regex, cost.deep = append(cost.eval, eval), append(cost.regex, regex), append(cost.deep, deep)
		cost.compile = append(cost.compile, compile)
		w, skipped = nextDepth(nodes, w)
	}
	return cost, nil
}

func formatCount(n int64) string {
	if n >= saturate {
		return "more than 10^15"
	}
	return strconv.FormatInt(n, 10)
}

// nextDepth bounds how many times each subschema may be evaluated on one
// member or item of a value the counts w apply to, and how many referring
// schemas skipped.
func nextDepth(nodes []*costNode, w []int64) ([]int64, int64) {
	var anyMember, anyItem, byName, byIndex tally
	for i, n := range nodes {
		if w[i] == 0 {
			continue
		}
		for _, e := range n.members {
			anyMember.add("", e, w[i])
		}
		for _, e := range n.items {
			anyItem.add("", e, w[i])
		}
		for name, e := range n.props {
			byName.add(name, e, w[i])
		}
		for j, e := range n.prefix {
			byIndex.add(strconv.Itoa(j), e, w[i])
		}
	}
	member, memberHops := byName.largest(len(nodes))
	item, itemHops := byIndex.largest(len(nodes))
	anyM, anyMHops := anyMember.largest(len(nodes))
	anyI, anyIHops := anyItem.largest(len(nodes))
	next := make([]int64, len(nodes))
	for c := range next {
		next[c] = max(add(anyM[c], member[c]), add(anyI[c], item[c]))
	}
	return next, max(add(anyMHops, memberHops), add(anyIHops, itemHops))
}

// tally counts evaluations by key (a member name, an item index): of each
// subschema, and of the referring schemas skipped.
type tally struct {
	counts map[string]map[int]int64
	hops   map[string]int64
}

func (t *tally) add(key string, e edge, n int64) {
	if t.counts == nil {
		t.counts, t.hops = map[string]map[int]int64{}, map[string]int64{}
	}
	if t.counts[key] == nil {
		t.counts[key] = map[int]int64{}
	}
	t.counts[key][e.to] = add(t.counts[key][e.to], n)
	t.hops[key] = add(t.hops[key], mul(n, e.hops))
}

// largest is, for each subschema, its largest count over the keys, and
// the largest count of skipped schemas.
func (t *tally) largest(n int) ([]int64, int64) {
	out, hops := make([]int64, n), int64(0)
	for key, counts := range t.counts {
		for c, v := range counts {
			out[c] = max(out[c], v)
		}
		hops = max(hops, t.hops[key])
	}
	return out, hops
}

// bytesPerStep is how many bytes of a string count as one step.
const bytesPerStep = 32

// steps bounds the work of validating inst, a decoded JSON value nested at
// most Limits.MaxParamsDepth deep.
func (c schemaCost) steps(inst any) int64 {
	total := int64(0)
	// charge adds the cost of a value at depth, given its own size (itself,
	// its members, its bytes over bytesPerStep), its bytes, and the size of
	// its whole subtree; str is the length of a string (or member name),
	// which "format": "regex" compiles, and -1 for other values.
	charge := func(depth int, own, bytes, subtree, str int64) {
		if depth < len(c.eval) {
			total = add(total, add(mul(c.eval[depth], own), add(mul(c.regex[depth], bytes/bytesPerStep+1), mul(c.deep[depth], subtree))))
			if str >= 0 {
				total = add(total, mul(c.compile[depth], mul(regexpStepsPerByte, min(str, c.maxPattern)+1)))
			}
		}
	}
	var walk func(v any, depth int) int64
	walk = func(v any, depth int) int64 {
		own, bytes, subtree, str := int64(1), int64(0), int64(0), int64(-1)
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				name := 1 + int64(len(k))/bytesPerStep
				charge(depth+1, name, int64(len(k)), name, int64(len(k))) // propertyNames checks the name as a value
				bytes += int64(len(k))
				subtree = add(subtree, walk(x, depth+1))
			}
			own += int64(len(v))
		case []any:
			for _, x := range v {
				subtree = add(subtree, walk(x, depth+1))
			}
			own += int64(len(v))
		case string:
			bytes, str = int64(len(v)), int64(len(v))
		}
		own += bytes / bytesPerStep
		subtree = add(subtree, own)
		charge(depth, own, bytes, subtree, str)
		return subtree
	}
	walk(inst, 0)
	return total
}

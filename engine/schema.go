package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/internal/schemaerr"
)

// Defaults of SchemaLimits.
const (
	DefaultMaxSchemaBytes      = 64 << 10
	DefaultMaxSchemaDepth      = abi.MaxDepth
	DefaultMaxSchemaSteps      = 500_000
	DefaultMaxDescriptionBytes = 16 << 10
	DefaultMaxPatternBytes     = 4 << 10
	DefaultMaxPatternInsts     = 10_000
)

// SchemaLimits bound what a tool's parameter schema, which a plugin writes,
// may cost the host. Zero fields take the defaults.
//
// MaxSteps bounds validation: one step is one subschema checked against one
// value or one of its members, or 32 bytes of a string or member name read
// by a keyword, or 32 bytes times one instruction of a regular expression,
// or, for "format": "regex" (which schemas of drafts before 2019-09
// assert), regexpStepsPerByte steps for each byte of a string parsed as a
// pattern. A schema that may check a single value against more subschemas than
// MaxSteps (allOf, anyOf, oneOf and $ref multiply: a chain of a few KB
// makes millions) is refused when it is compiled; a call whose parameters
// would take more steps is refused before validation, with an error the
// model sees. 500,000 steps take about a third of a second.
type SchemaLimits struct {
	MaxBytes int // the schema's JSON text (default 64 KiB)
	MaxDepth int // how deeply the schema nests arrays and objects (default abi.MaxDepth)
	MaxSteps int // the validation work of one call (default 500,000)
	// MaxDescriptionBytes caps a tool's description (default 16 KiB), which
	// the default prompt sends to the model with every request.
	MaxDescriptionBytes int
	// MaxPatternBytes caps each regular expression compiled: a schema's
	// pattern and patternProperties, and each string that "format": "regex"
	// checks (default 4 KiB). Parsing one costs up to 20 µs a byte.
	MaxPatternBytes int
	// MaxPatternInsts caps the program of each regular expression, counted
	// before it is built (default 10,000): about one instruction per
	// character, times each repetition count ("a{1000}" is 1,000).
	MaxPatternInsts int
	// MaxParamsDepth caps how deeply a call's parameters may nest (default
	// abi.MaxDepth); deeper ones are refused unchecked. Validation cost is
	// analysed down to it, so a larger one costs more when schemas compile.
	MaxParamsDepth int
}

func (l SchemaLimits) withDefaults() SchemaLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxSchemaBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxSchemaDepth
	}
	if l.MaxSteps <= 0 {
		l.MaxSteps = DefaultMaxSchemaSteps
	}
	if l.MaxDescriptionBytes <= 0 {
		l.MaxDescriptionBytes = DefaultMaxDescriptionBytes
	}
	if l.MaxPatternBytes <= 0 {
		l.MaxPatternBytes = DefaultMaxPatternBytes
	}
	if l.MaxPatternInsts <= 0 {
		l.MaxPatternInsts = DefaultMaxPatternInsts
	}
	if l.MaxParamsDepth <= 0 {
		l.MaxParamsDepth = abi.MaxDepth
	}
	return l
}

// toolSchema is a compiled tool schema and what validating against it may cost.
type toolSchema struct {
	schema *jsonschema.Schema
	cost   schemaCost
	limit  int64 // SchemaLimits.MaxSteps
}

// schemaURL names every tool schema inside its own compiler; tool names
// (which plugins choose) stay out of URLs.
const schemaURL = "morph:tool-schema.json"

// maxNumberLen caps a number's text in a schema: the library turns numbers
// into exact rationals, and a long or huge one ("1e-1000000") costs
// megabytes and milliseconds at every comparison.
const maxNumberLen = 32

// errExternalRef is the refusing loader's answer: a tool schema is one
// document, and nothing outside it is opened or fetched.
var errExternalRef = errors.New("tool schemas may refer only within themselves")

type refuseLoader struct{}

func (refuseLoader) Load(string) (any, error) { return nil, errExternalRef }

// compileSchema compiles the schema text of the tool called name under l.
// The error wraps ErrInvalidSchema and names the tool.
func compileSchema(name, text string, l SchemaLimits) (*toolSchema, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w of tool %s: %s", ErrInvalidSchema, quoteName(name), fmt.Sprintf(format, args...))
	}
	if len(text) > l.MaxBytes {
		return nil, fail("%d bytes, more than the limit of %d (tools.max_schema_kb in morph.toml)", len(text), l.MaxBytes)
	}
	if err := abi.CheckDepth([]byte(text), l.MaxDepth); err != nil {
		return nil, fail("%v (tools.max_schema_depth in morph.toml)", err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fail("not JSON: %s", safetext.Line(err.Error(), 200))
	}
	if err := checkNumbers(doc, "", false); err != nil {
		return nil, fail("%v", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	// The same engine compiles the schema's patterns and, at validation,
	// the values that "format": "regex" checks.
	c.UseRegexpEngine(func(src string) (jsonschema.Regexp, error) { return compileRegexp(src, l) })
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fail("%s", safetext.Line(err.Error(), 500))
	}
	sch, err := c.Compile(schemaURL)
	var lerr *jsonschema.LoadURLError
	var rerr *jsonschema.InvalidRegexError
	var merr *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	switch {
	case errors.As(err, &lerr):
		return nil, fail("it refers to %s, outside itself; %v (\"$ref\": \"#/$defs/name\")", quoteName(lerr.URL), errExternalRef)
	case errors.As(err, &rerr): // its text quotes the whole pattern, before the reason
		return nil, fail("the pattern %s at %s: %s", quoteName(rerr.Regex), quoteName(strings.TrimPrefix(rerr.URL, schemaURL)),
			safetext.Line(rerr.Err.Error(), 300))
	case errors.As(err, &merr) && errors.As(merr.Err, &verr):
		return nil, fail("it breaks the rules of JSON Schema: %s", safetext.Line(schemaerr.Describe(verr, ""), 1000))
	case err != nil:
		return nil, fail("%s", safetext.Line(err.Error(), 500))
	}
	cost, err := analyze(sch, int64(l.MaxSteps), l.MaxParamsDepth)
	if err != nil {
		return nil, fail("%v", err)
	}
	cost.maxPattern = int64(l.MaxPatternBytes)
	return &toolSchema{schema: sch, cost: cost, limit: int64(l.MaxSteps)}, nil
}

// countKeywords are the keywords whose value is a count; the library reads
// them as an int, and "maxLength": 1e308 became a limit no string met.
var countKeywords = map[string]bool{"minLength": true, "maxLength": true, "minItems": true, "maxItems": true,
	"minProperties": true, "maxProperties": true, "minContains": true, "maxContains": true}

// dataKeywords hold values, not schemas: a "maxLength" inside is data.
var dataKeywords = map[string]bool{"enum": true, "const": true, "default": true, "examples": true}

// schemaMaps map names (chosen by the schema's author: "enum" may name a
// property) to schemas.
var schemaMaps = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true,
	"dependentSchemas": true, "dependencies": true}

// checkNumbers refuses a number that is long or beyond a float64 (no
// parameter needs one, and each costs big-number arithmetic), and, where v
// is a schema rather than data, a count keyword that is not a whole number
// an int32 holds (5.0 and 1e2 are whole, as JSON Schema and the library
// read them). at is v's JSON pointer.
func checkNumbers(v any, at string, data bool) error {
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		mantissa, _, _ := strings.Cut(strings.ToLower(string(v)), "e")
		if err != nil || len(v) > maxNumberLen || (f == 0 && strings.Trim(mantissa, "-0.") != "") { // ParseFloat rounds an underflow to 0
			return fmt.Errorf("the number at %s is longer than %d characters or beyond a float64", quoteName(at), maxNumberLen)
		}
	case map[string]any:
		for k, x := range v {
			if names, ok := x.(map[string]any); ok && !data && schemaMaps[k] {
				for name, sub := range names {
					if err := checkNumbers(sub, at+"/"+k+"/"+name, false); err != nil {
						return err
					}
				}
				continue
			}
			if err := checkNumbers(x, at+"/"+k, data || dataKeywords[k]); err != nil {
				return err
			}
			if n, ok := x.(json.Number); ok && !data && countKeywords[k] && !isCount(n) {
				return fmt.Errorf("%s at %s is %s: want a whole number from 0 to %d", k, quoteName(at), n, math.MaxInt32)
			}
		}
	case []any:
		for i, x := range v {
			if err := checkNumbers(x, at+"/"+strconv.Itoa(i), data); err != nil {
				return err
			}
		}
	}
	return nil
}

// isCount reports whether n, a number within a float64, is exactly a whole
// number from 0 to math.MaxInt32.
func isCount(n json.Number) bool {
	r, ok := new(big.Rat).SetString(string(n))
	return ok && r.IsInt() && r.Sign() >= 0 && r.Num().Cmp(big.NewInt(math.MaxInt32)) <= 0
}

// pattern is a regular expression, parsed and sized when the library asks
// for it, and built when it is first matched: the library also asks for
// each string that "format": "regex" checks, to know whether it parses,
// and building the program (repetitions expanded) costs up to 70 µs a
// byte of pattern where parsing costs 10.
type pattern struct {
	src   string
	insts int64 // bounds the work of matching one byte
	built func() *regexp.Regexp
}

func (p *pattern) MatchString(s string) bool { return p.built().MatchString(s) }
func (p *pattern) String() string            { return p.src }

// compileRegexp parses a pattern within l: a schema's pattern or
// patternProperties name, or a string that "format": "regex" checks, which
// a model writes. A pattern longer than l.MaxPatternBytes is refused before
// it is parsed; one whose program would exceed l.MaxPatternInsts is
// refused before the program is built: repetitions expand (4 KiB of
// ".{0,1000}" is 900,000 instructions, and Go accepts 3 million).
func compileRegexp(src string, l SchemaLimits) (jsonschema.Regexp, error) {
	if len(src) > l.MaxPatternBytes {
		return nil, fmt.Errorf("the pattern is %d bytes, more than the limit of %d (tools.max_pattern_kb in morph.toml)", len(src), l.MaxPatternBytes)
	}
	parsed, err := syntax.Parse(src, syntax.Perl) // as regexp.Compile parses it: it cannot fail after this
	if err != nil {
		return nil, err
	}
	insts := progSize(parsed)
	if insts > int64(l.MaxPatternInsts) {
		return nil, fmt.Errorf("the pattern compiles to about %s instructions, more than the limit of %d (tools.max_pattern_insts in morph.toml): its repetition counts multiply its size",
			formatCount(insts), l.MaxPatternInsts)
	}
	return &pattern{src: src, insts: insts, built: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(src) })}, nil
}

// progSize bounds the instructions of the program Go's regexp builds from
// re, as regexp/syntax does for its own much larger limit: repetitions are
// expanded, x{2,5} to xx(x(x(x)?)?)?. A tree is at most 1,000 high.
func progSize(re *syntax.Regexp) int64 {
	var size int64
	switch re.Op {
	case syntax.OpLiteral:
		size = int64(len(re.Rune))
	case syntax.OpCapture, syntax.OpStar:
		size = 2 + progSize(re.Sub[0])
	case syntax.OpPlus, syntax.OpQuest:
		size = 1 + progSize(re.Sub[0])
	case syntax.OpConcat, syntax.OpAlternate:
		for _, sub := range re.Sub {
			size = add(size, progSize(sub))
		}
		if re.Op == syntax.OpAlternate {
			size = add(size, int64(len(re.Sub)-1))
		}
	case syntax.OpRepeat:
		sub := progSize(re.Sub[0])
		switch {
		case re.Max == -1 && re.Min == 0:
			size = 2 + sub
		case re.Max == -1:
			size = add(1, mul(int64(re.Min), sub))
		default:
			size = add(mul(int64(re.Max), sub), int64(re.Max-re.Min))
		}
	}
	return max(1, size)
}

// regexpStepsPerByte is what checking a string for "format": "regex"
// costs, in steps per byte: parsing a pattern of Unicode classes takes up
// to 10 µs a byte ("(?i)[^\pL\pN]", "[\pL\PL]"), 15 steps.
const regexpStepsPerByte = 32

// schemaCost bounds, for a value at each depth of the parameters (0: the
// parameters object), the work of validating it: eval counts subschema
// checks (each reading the value's members), regex the instructions of the
// patterns matched against its bytes, compile the "format": "regex" checks
// (each compiling a string), deep the keywords that compare or hash the
// whole value (enum, const, uniqueItems). Beyond the last depth no
// subschema applies.
type schemaCost struct {
	eval, regex, compile, deep []int64
	maxPattern                 int64 // SchemaLimits.MaxPatternBytes: a longer string is refused unparsed
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
			return nil, nil, fmt.Errorf("%s uses $dynamicRef or $recursiveRef, which tool schemas may not (use $ref)", quoteName(s.Location))
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
// most SchemaLimits.MaxParamsDepth deep.
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

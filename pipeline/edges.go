package pipeline

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// SelectEdge picks the edge the run takes after node ended with outcome,
// or nil when there is none. In order:
//
//  1. the edges whose condition holds: highest weight, then the lexically
//     smallest target;
//  2. else, when the outcome has a preferred label, the first unconditional
//     edge whose label matches it once both are normalised (NormalizeLabel);
//  3. else, for each of the outcome's suggested next ids in turn, the first
//     unconditional edge to it;
//  4. else the unconditional edges: highest weight, then lexical target.
//
// A FAIL outcome takes only step 1: a failure never falls through to an
// unconditional edge, which would route it as if it had succeeded; with no
// matching fail edge the runner goes to the retry targets, else fails the
// run. A condition that does not parse counts as false (validation
// reports it as condition_syntax). Ties between edges to the same target
// go to the first in source order.
func SelectEdge(node *Node, outcome *Outcome, pctx *Context, g *Graph) *Edge {
	if node == nil || g == nil {
		return nil
	}
	var matched, unconditional []*Edge
	for _, e := range g.Outgoing(node.ID) {
		cond := e.Condition()
		if cond == "" {
			unconditional = append(unconditional, e)
			continue
		}
		if ok, err := EvalCondition(cond, outcome, pctx); err == nil && ok {
			matched = append(matched, e)
		}
	}
	if len(matched) > 0 {
		return heaviest(matched)
	}
	if outcome != nil {
		// Spec 3.7, not 3.2's select_edge (doc.go: "Where the spec
		// disagrees with itself"): a FAIL never takes an unconditional,
		// labelled or suggested edge.
		if statusText(string(outcome.Status)) == string(StatusFail) {
			return nil
		}
		if e := byPreferredLabel(unconditional, outcome.PreferredLabel); e != nil {
			return e
		}
		if e := bySuggestedID(unconditional, outcome.SuggestedNextIDs); e != nil {
			return e
		}
	}
	return heaviest(unconditional)
}

// heaviest is the edge of highest weight, then lexically smallest target,
// then first in source order; nil for none.
func heaviest(edges []*Edge) *Edge {
	var best *Edge
	bestWeight := 0
	for _, e := range edges {
		w := e.Weight()
		if best == nil || w > bestWeight || (w == bestWeight && e.To < best.To) {
			best, bestWeight = e, w
		}
	}
	return best
}

func byPreferredLabel(edges []*Edge, preferred string) *Edge {
	want := NormalizeLabel(preferred)
	if want == "" {
		return nil
	}
	for _, e := range edges {
		if NormalizeLabel(e.Label()) == want {
			return e
		}
	}
	return nil
}

// bySuggestedID indexes the edges by target first: the ids come from a
// model and may be many.
func bySuggestedID(edges []*Edge, ids []string) *Edge {
	if len(ids) == 0 || len(edges) == 0 {
		return nil
	}
	first := make(map[string]*Edge, len(edges))
	for _, e := range edges {
		if _, ok := first[e.To]; !ok {
			first[e.To] = e
		}
	}
	for _, id := range ids {
		if e := first[strings.TrimSpace(id)]; e != nil {
			return e
		}
	}
	return nil
}

// NormalizeLabel is a label as edge selection compares it: without its
// accelerator prefix ("[Y] ", "Y) ", "Y - "), trimmed and lowercased, so
// that a model answering "yes" picks the edge labelled "[Y] Yes".
func NormalizeLabel(label string) string {
	_, rest := Accelerator(label)
	return strings.ToLower(strings.TrimSpace(rest))
}

// Accelerator splits a human-gate choice's label into its key and the
// rest: "[Y] Yes", "Y) Yes" and "Y - Yes" give "Y" and "Yes"; a label
// without such a prefix gives its first character, uppercased, and the
// whole (trimmed) label. The key of a prefix is one letter or digit, so
// "OK - go" or "A-B test" have no prefix. An empty label gives "", "".
func Accelerator(label string) (key string, rest string) {
	s := strings.TrimSpace(label)
	if s == "" {
		return "", ""
	}
	if k, r, ok := acceleratorPrefix(s); ok {
		return strings.ToUpper(k), r
	}
	r, _ := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)), s
}

// acceleratorPrefix recognises "[K] rest", "K) rest" and "K - rest" in a
// trimmed label.
func acceleratorPrefix(s string) (key, rest string, ok bool) {
	if after, found := strings.CutPrefix(s, "["); found {
		k, n := keyRune(after)
		if n > 0 && strings.HasPrefix(after[n:], "]") {
			return k, strings.TrimSpace(after[n+1:]), true
		}
		return "", "", false
	}
	k, n := keyRune(s)
	if n == 0 {
		return "", "", false
	}
	after := s[n:]
	if r, found := strings.CutPrefix(after, ")"); found && (r == "" || startsWithSpace(r)) {
		return k, strings.TrimSpace(r), true
	}
	if spaced := strings.TrimLeft(after, " \t"); len(spaced) < len(after) {
		if r, found := strings.CutPrefix(spaced, "-"); found && (r == "" || startsWithSpace(r)) {
			return k, strings.TrimSpace(r), true
		}
	}
	return "", "", false
}

// keyRune is s's first rune when it is a letter or digit, and its size (0
// when it is not).
func keyRune(s string) (string, int) {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError || !(unicode.IsLetter(r) || unicode.IsDigit(r)) {
		return "", 0
	}
	return s[:n], n
}

func startsWithSpace(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsSpace(r)
}

// Package suggest finds the known names nearest to a mistyped one, so that
// an error about an unknown name (a model parameter, an engine config key)
// can say what was probably meant instead of only that it is wrong.
package suggest

import (
	"cmp"
	"slices"
)

// Distance is the Levenshtein distance between a and b, counted in bytes:
// the names it compares are ASCII identifiers.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// MaxTypo is the edit distance within which a name is plausibly a typo of
// another: beyond it a suggestion misleads more than it helps.
const MaxTypo = 2

// Closest returns at most n of known within maxDist edits of name, nearest
// first and, at equal distance, in alphabetical order, so that the
// suggestion is the same every time.
func Closest(name string, known []string, n, maxDist int) []string {
	type cand struct {
		name string
		dist int
	}
	cands := make([]cand, len(known))
	for i, k := range known {
		cands[i] = cand{k, Distance(name, k)}
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Or(cmp.Compare(a.dist, b.dist), cmp.Compare(a.name, b.name)) })
	out := make([]string, 0, min(n, len(cands)))
	for _, c := range cands[:min(n, len(cands))] {
		if c.dist > maxDist {
			break
		}
		out = append(out, c.name)
	}
	return out
}

package suggest

import (
	"slices"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"mode", "mode", 0}, {"mdoe", "mode", 2}, {"mod", "mode", 1}, {"", "abc", 3}, {"kitten", "sitting", 3},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// The nearest names come first, ties alphabetically, at most n of them,
// none farther than maxDist: a name nothing like any known one gets none.
func TestClosest(t *testing.T) {
	known := []string{"timeout", "mode", "model", "max_steps"}
	if got := Closest("mdoe", known, 2, 3); !slices.Equal(got, []string{"mode", "model"}) {
		t.Fatalf("Closest = %q", got)
	}
	if got := Closest("mdoe", known, 10, MaxTypo); !slices.Equal(got, []string{"mode"}) {
		t.Fatalf("Closest within %d edits = %q", MaxTypo, got)
	}
	if got := Closest("x", known, 10, 100); len(got) != 4 {
		t.Fatalf("Closest with n over the known names = %q", got)
	}
	if got := Closest("foo", known, 3, MaxTypo); len(got) != 0 {
		t.Fatalf("Closest of a name like none = %q", got)
	}
	if got := Closest("x", nil, 3, 100); len(got) != 0 {
		t.Fatalf("Closest of no names = %q", got)
	}
}

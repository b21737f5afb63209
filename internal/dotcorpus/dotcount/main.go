// Command dotcount is scripts/dot-corpus.sh --dir: it classifies the
// distinct .dot files under its arguments (dotcorpus.Classify) and prints
// one line each, then the counts: the issue's "how many published
// pipelines does morph take" figure, rerun after each change.
package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/morphhost/morph/internal/dotcorpus"
	"github.com/morphhost/morph/internal/safetext"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dotcount DIR...")
		os.Exit(2)
	}
	if err := count(os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "dotcount:", safetext.Line(err.Error(), 4<<10))
		os.Exit(1)
	}
}

func count(w io.Writer, roots []string) error {
	files, err := dotcorpus.Walk(roots...)
	if err != nil {
		return err
	}
	kinds, rules := map[string]int{}, map[string]int{}
	found := 0
	for _, f := range files {
		v := dotcorpus.Classify(f)
		kinds[v.Kind]++
		found += 1 + len(f.Copies)
		line := fmt.Sprintf("%-40s %s", v, f.Name)
		if len(f.Copies) > 0 {
			line += " (= " + strings.Join(f.Copies, ", ") + ")"
		}
		if v.Kind == dotcorpus.Refused {
			rules[v.Rule]++
		}
		// File names and errors are the files' own text.
		fmt.Fprintln(w, safetext.Line(line, 4<<10))
		if v.Err != nil {
			first, _, _ := strings.Cut(v.Err.Error(), "\n")
			fmt.Fprintln(w, "    "+safetext.Line(first, 400))
		}
	}
	var byRule []string
	for _, r := range slices.Sorted(maps.Keys(rules)) {
		byRule = append(byRule, fmt.Sprintf("%s %d", r, rules[r]))
	}
	_, err = fmt.Fprintf(w, "%d distinct of %d files: %d validate, %d more with allow_shell, %d refused (%s), %d parse errors\n",
		len(files), found, kinds[dotcorpus.Runs], kinds[dotcorpus.RunsShell], kinds[dotcorpus.Refused],
		strings.Join(byRule, ", "), kinds[dotcorpus.ParseErr])
	return err
}

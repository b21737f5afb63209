// Package dotcorpus finds the distinct DOT files under directories and
// classifies each as morph's validation does: the published pipelines'
// test (pipeline/published_test.go) and scripts/dot-corpus.sh --dir, the
// manual count over any checkout, share it.
package dotcorpus

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/morphhost/morph/pipeline"
)

// File is one distinct DOT file: the first of its copies by name.
type File struct {
	// Name is project/path: the root's base name, less a module
	// version ("mammoth@v0.9.0") or an owner ("2389-research+mammoth"),
	// then the path under the root, with slashes.
	Name string
	// Path is where it was read.
	Path string
	// Sum is its SHA-256, in hex.
	Sum string
	Src []byte
	// Copies are the names of the other files with the same content.
	Copies []string
}

// Walk returns the distinct .dot files under roots, by name. A file over
// pipeline.DefaultMaxDOTBytes is an error: no published pipeline is near
// it, and the parser would refuse it.
func Walk(roots ...string) ([]File, error) {
	bySum := map[string]*File{}
	for _, root := range roots {
		project := projectName(root)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.Type().IsRegular() || !strings.HasSuffix(path, ".dot") {
				return nil
			}
			src, err := pipeline.ReadDOTSource(path)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			name := project + "/" + filepath.ToSlash(rel)
			h := sha256.Sum256(src)
			sum := hex.EncodeToString(h[:])
			if f, ok := bySum[sum]; ok {
				f.Copies = append(f.Copies, name)
				return nil
			}
			bySum[sum] = &File{Name: name, Path: path, Sum: sum, Src: src}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("dotcorpus: walking %s: %w", root, err)
		}
	}
	files := make([]File, 0, len(bySum))
	for _, f := range bySum {
		// The first name in order names the content, whatever the walk's order.
		names := append([]string{f.Name}, f.Copies...)
		slices.Sort(names)
		f.Name, f.Copies = names[0], names[1:]
		files = append(files, *f)
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return files, nil
}

// projectName is root's base name without a module version or an owner.
func projectName(root string) string {
	name := filepath.Base(filepath.Clean(root))
	name, _, _ = strings.Cut(name, "@")
	if _, after, ok := strings.Cut(name, "+"); ok {
		name = after
	}
	return name
}

// Verdicts of Classify.
const (
	Runs      = "runs"            // validates as it is
	RunsShell = "runs-with-shell" // validates with allow_shell (tool_command)
	Refused   = "refused"         // refused with allow_shell too: refused:<rule>:<node>
	ParseErr  = "parse-error"     // not DOT that morph reads
)

// Verdict is what morph makes of a file.
type Verdict struct {
	Kind string
	// Rule and Node are the first error's (Refused).
	Rule, Node string
	// Err is the parse or validation error (ParseErr, Refused).
	Err error
}

// String is the verdict as the expectations table writes it: Kind, or
// refused:<rule>:<node> ("-" for no node).
func (v Verdict) String() string {
	if v.Kind != Refused {
		return v.Kind
	}
	node := v.Node
	if node == "" {
		node = "-"
	}
	return Refused + ":" + v.Rule + ":" + node
}

// Classify parses f and validates it as a runner with the default
// handlers does, without then with allow_shell.
func Classify(f File) Verdict {
	g, err := pipeline.ParseDOTNamed(f.Name, f.Src)
	if err != nil {
		return Verdict{Kind: ParseErr, Err: err}
	}
	if _, err := (&pipeline.Runner{}).Prepare(g.Clone()); err == nil {
		return Verdict{Kind: Runs}
	}
	_, err = (&pipeline.Runner{AllowShell: true}).Prepare(g)
	if err == nil {
		return Verdict{Kind: RunsShell}
	}
	v := Verdict{Kind: Refused, Err: err}
	var ve *pipeline.ValidationError
	if errors.As(err, &ve) {
		for _, d := range ve.Diagnostics {
			if d.Severity == pipeline.SeverityError {
				v.Rule, v.Node = d.Rule, d.NodeID
				break
			}
		}
	}
	if v.Rule == "" {
		v.Rule = "transform" // Prepare's transforms failed before validation
	}
	return v
}

package dotcorpus

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/morphhost/morph/pipeline"
)

func write(t *testing.T, path, src string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	plain  = `digraph a { start [shape=Mdiamond]; exit [shape=Msquare]; w [prompt="x"]; start -> w -> exit }`
	shell  = `digraph b { start [shape=Mdiamond]; exit [shape=Msquare]; t [shape=parallelogram, tool_command="true"]; start -> t -> exit }`
	noExit = `digraph c { start [shape=Mdiamond]; w [prompt="x"]; start -> w }`
)

// Walk: one File per content, named by the first of its names, projects
// named without module versions or owners; links and other files are
// not followed or read.
func TestWalk(t *testing.T) {
	root := t.TempDir()
	mod, mirror := filepath.Join(root, "proj@v1.2.3"), filepath.Join(root, "owner+other")
	write(t, filepath.Join(mod, "b", "x.dot"), plain)
	write(t, filepath.Join(mod, "a.dot"), shell)
	write(t, filepath.Join(mirror, "copy.dot"), plain)
	write(t, filepath.Join(mirror, "notes.txt"), plain)
	secret := filepath.Join(root, "secret.dot")
	write(t, secret, noExit)
	if err := os.Symlink(secret, filepath.Join(mirror, "link.dot")); err != nil {
		t.Fatal(err)
	}
	files, err := Walk(mod, mirror)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Name+" "+strings.Join(f.Copies, ","))
	}
	if want := []string{"other/copy.dot proj/b/x.dot", "proj/a.dot "}; !slices.Equal(got, want) {
		t.Errorf("files %q, want %q", got, want)
	}
}

func TestWalkRefusesAnOversizeFile(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "big.dot"), strings.Repeat("x", pipeline.DefaultMaxDOTBytes+1))
	if _, err := Walk(root); err == nil || !strings.Contains(err.Error(), "big.dot: source is 4194305 bytes, over the limit of 4194304") {
		t.Errorf("err %v, want big.dot named as too large", err)
	}
}

func TestClassify(t *testing.T) {
	for src, want := range map[string]string{
		plain:           Runs,
		shell:           RunsShell,
		noExit:          "refused:terminal_node:-",
		"-- not DOT --": ParseErr,
	} {
		if got := Classify(File{Name: "p/f.dot", Src: []byte(src)}); got.String() != want {
			t.Errorf("%s: %s (%v), want %s", src, got, got.Err, want)
		}
	}
}

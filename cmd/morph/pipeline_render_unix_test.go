//go:build unix

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/morphhost/morph/internal/renderproc"
)

// fakeRender makes render run a shell script in place of morph-render.
func fakeRender(t *testing.T, script string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-render")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(renderproc.EnvVar, p)
}

// renderDOTFile writes renderDOT to a file and returns its path.
func renderDOTFile(t *testing.T) string {
	t.Helper()
	dot := filepath.Join(t.TempDir(), "review.dot")
	if err := os.WriteFile(dot, []byte(renderDOT), 0o644); err != nil {
		t.Fatal(err)
	}
	return dot
}

// TestPipelineRenderKilledAtTimeout: a render that outlasts --timeout is
// killed then, not left to run.
func TestPipelineRenderKilledAtTimeout(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	fakeRender(t, "echo $$ >"+pidFile+"; exec sleep 30")
	dot := renderDOTFile(t)
	start := time.Now()
	code, stdout, stderr := morph(t, "", "pipeline", "render", "--timeout", "500ms", "-o", "-", dot)
	took := time.Since(start)
	if code != exitRunFailed || stdout != "" || !strings.HasPrefix(stderr, "morph: "+dot+": render: graphviz did not finish in ") ||
		!strings.HasSuffix(stderr, ": context deadline exceeded (--timeout 500ms)\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if took > 15*time.Second { // well before the render's 30 s: it did not wait for it
		t.Errorf("render returned after %s, with --timeout 500ms", took)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the renderer, pid %d, is still there (%v)", pid, err)
	}
}

// TestPipelineRenderRenderer: what render makes of what its renderer does.
func TestPipelineRenderRenderer(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("MORPH_TEST_SECRET", "s3cret")
	private := filepath.Join(cache, "morph", "graphviz")
	dot := renderDOTFile(t)
	for _, tt := range []struct {
		name, script string
		code         int
		want         string // stdout when exitOK, else the end of stderr's one line
	}{
		{
			"environment",
			`cat >/dev/null; echo "<?xml TMPDIR=$TMPDIR HOME=$HOME PATH=${PATH:+set} secret=${MORPH_TEST_SECRET:-none}"`,
			exitOK, "<?xml TMPDIR=" + private + " HOME=" + os.Getenv("HOME") + " PATH=set secret=none\n",
		},
		{"its error", `echo "render: no good" >&2; exit 1`, exitRunFailed, dot + ": render: no good"},
		{"its error escaped", `printf 'render: \033[31mred\n' >&2; exit 1`, exitRunFailed, dot + `: render: \x1b[31mred`},
		{"a panic's first line", `printf 'panic: boom\n\ngoroutine 1 [running]:\n' >&2; exit 2`, exitRunFailed, dot + ": panic: boom"},
		{"silent failure", `exit 3`, exitRunFailed, "fake-render: exit status 3"},
		{"not SVG", `echo hello`, exitRunFailed, "wrote no SVG (6 bytes): is it morph-render?"},
		{"too much SVG", `printf '<?xml'; head -c 67108864 /dev/zero`, exitRunFailed, "wrote more than 67108864 bytes of SVG"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fakeRender(t, tt.script)
			code, stdout, stderr := morph(t, "", "pipeline", "render", "-o", "-", dot)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tt.code, stderr)
			}
			if tt.code == exitOK {
				if stdout != tt.want {
					t.Errorf("stdout %q, want %q", stdout, tt.want)
				}
				return
			}
			assertFailure(t, stdout, stderr, tt.want)
			if n := strings.Count(stderr, "\n"); n != 1 {
				t.Errorf("stderr %q has %d lines, want one", stderr, n)
			}
		})
	}
	fi, err := os.Stat(private)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the private TMPDIR %s: %v, %v; want a directory with mode 0700", private, fi, err)
	}
}

// TestPipelineRenderPrivateTmp: morph-render gets its own TMPDIR, where
// Graphviz keeps its compilation cache; one that others can write is
// refused.
func TestPipelineRenderPrivateTmp(t *testing.T) {
	useMorphRender(t)
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	private := filepath.Join(cache, "morph", "graphviz")
	dot := renderDOTFile(t)
	if code, _, stderr := morph(t, "", "pipeline", "render", "-o", "-", dot); code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(private, "go-graphviz")); err != nil {
		t.Errorf("Graphviz's cache is not in the private TMPDIR: %v", err)
	}
	if err := os.Chmod(private, 0o777); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := morph(t, "", "pipeline", "render", "-o", "-", dot)
	if want := "Graphviz's cache directory " + private + ": other users can write it (-rwxrwxrwx): chmod 700 it"; code != exitRunFailed || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want %q", code, stderr, want)
	}
}

// TestPipelineRenderRefusesFIFO: a FIFO named as the DOT file is refused,
// not opened (which would wait for a writer for ever).
func TestPipelineRenderRefusesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "p.dot")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	code, _, stderr := morph(t, "", "pipeline", "render", "-o", "-", fifo)
	if want := fifo + ": not a regular file"; code != exitUsage || !strings.Contains(stderr, want) {
		t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr, want)
	}
}

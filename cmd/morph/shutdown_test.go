package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/morphhost/morph/engine"
)

// morphBinary builds the morph binary once for the tests that run it as a
// process; morphRenderBinary builds morph-render, which render runs.
var (
	morphBinary       = goBinary(".", "morph")
	morphRenderBinary = goBinary("../morph-render", "morph-render")
)

// goBinary returns a function that builds the command in dir (relative to
// cmd/morph) as name, once, and returns its path or fails t.
func goBinary(dir, name string) func(t testing.TB) string {
	build := sync.OnceValues(func() (string, error) {
		tmp, err := os.MkdirTemp(os.Getenv("HOME"), "morph-bin") // testenv.Main removes HOME at the end
		if err != nil {
			return "", err
		}
		bin := filepath.Join(tmp, name)
		if out, err := exec.Command("go", "build", "-o", bin, dir).CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", dir, err, out)
		}
		return bin, nil
	})
	return func(t testing.TB) string {
		t.Helper()
		bin, err := build()
		if err != nil {
			t.Fatal(err)
		}
		return bin
	}
}

// proc is a morph process a test signals.
type proc struct {
	cmd   *exec.Cmd
	lines chan string // its output, line by line: "out: ..." and "err: ..."
	done  chan error  // its exit
	mu    sync.Mutex
	all   []string // the lines so far
}

func startMorph(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), lines: make(chan string, 100), done: make(chan error, 1)}
	stdout, _ := p.cmd.StdoutPipe()
	stderr, _ := p.cmd.StderrPipe()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for prefix, r := range map[string]io.Reader{"out: ": stdout, "err: ": stderr} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sc := bufio.NewScanner(r); sc.Scan(); {
				p.mu.Lock()
				p.all = append(p.all, prefix+sc.Text())
				p.mu.Unlock()
				select {
				case p.lines <- prefix + sc.Text():
				default: // nobody waits for lines any more
				}
			}
		}()
	}
	go func() { wg.Wait(); p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.cmd.Process.Kill() })
	return p
}

// waitLine waits for a line that starts with prefix.
func (p *proc) waitLine(t *testing.T, prefix string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l := <-p.lines:
			if strings.HasPrefix(l, prefix) {
				return
			}
		case err := <-p.done:
			t.Fatalf("morph exited (%v) before printing %q:\n%s", err, prefix, p.output())
		case <-deadline:
			t.Fatalf("no line %q in 20s:\n%s", prefix, p.output())
		}
	}
}

// wait waits for the exit, 20s at most (the plugin's destroy spins for
// 60s), and returns all the output and its error.
func (p *proc) wait(t *testing.T) (string, error) {
	t.Helper()
	select {
	case err := <-p.done: // after the readers' last line
		return p.output(), err
	case <-time.After(20 * time.Second):
		t.Fatalf("morph still running 20s later:\n%s", p.output())
		return "", nil
	}
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.all, "\n")
}

// The shutdown after a run, where plugins' morph_destroy hooks run (here
// one that spins, with a 60s timeout), is bounded by --shutdown-timeout,
// and a signal cuts it short; after a signal that ended the run, a second
// one exits at once.
func TestShutdown(t *testing.T) {
	bin := morphBinary(t)
	plugin := "\n[wasm]\ncache_dir = \"off\"\n[discovery]\nproject = false\nuser = false\n\n[[plugins]]\nname = \"spin\"\npath = \"" +
		fixture(t, "spin_destroy") + "\"\ntimeout = \"60s\"\n"
	done := setup(t, []string{finalReply}, plugin) // the run ends; the shutdown spins
	// The run spins too, in loop's build_prompt.
	stuck := setup(t, []string{finalReply}, plugin+"\n[[plugins]]\nname = \"loop\"\npath = \""+fixture(t, "loop")+"\"\ntimeout = \"60s\"\n")

	t.Run("signal during shutdown", func(t *testing.T) {
		p := startMorph(t, bin, "run", "--config", done, "--shutdown-timeout", "5m", "task")
		p.waitLine(t, "out: }") // the result is out: the shutdown is under way
		p.cmd.Process.Signal(syscall.SIGINT)
		out, err := p.wait(t)
		if err != nil || !strings.Contains(out, "err: morph: warning: shutdown interrupted") {
			t.Fatalf("exit %v, want 0 with a warning:\n%s", err, out)
		}
	})

	t.Run("limit", func(t *testing.T) {
		p := startMorph(t, bin, "run", "--config", done, "--shutdown-timeout", "1s", "task")
		out, err := p.wait(t)
		if err != nil {
			t.Fatalf("exit %v, want 0:\n%s", err, out)
		}
		assertHas(t, "output", out, "err: morph: warning: shutdown took longer than 1s", `out:   "stop_reason": "final"`)
	})

	t.Run("second signal", func(t *testing.T) {
		p := startMorph(t, bin, "run", "--config", stuck, "--shutdown-timeout", "5m", "task")
		p.waitLine(t, "err: morph: 2 plugins (spin 1, loop 1)")
		p.cmd.Process.Signal(syscall.SIGINT) // ends the run; the shutdown spins
		p.waitLine(t, "err: morph: interrupted: closing the plugins")
		select { // the shutdown waits for the plugins: its limit is 5m, destroy's timeout 60s
		case err := <-p.done:
			t.Fatalf("morph exited (%v) without waiting for the plugins:\n%s", err, p.output())
		case <-time.After(500 * time.Millisecond):
		}
		p.cmd.Process.Signal(syscall.SIGINT)
		out, err := p.wait(t)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
			t.Fatalf("exit %v, want killed by SIGINT:\n%s", err, out)
		}
	})
}

// closeFunc is a runtime to close.
type closeFunc func(context.Context) error

func (f closeFunc) Close(ctx context.Context) error { return f(ctx) }

// noPlugins is a runtime to close that tells it has no plugins.
type noPlugins struct{ closeFunc }

func (noPlugins) Plugins() []engine.PluginStatus { return nil }

// A runtime without plugins that is cut short does not blame the plugins'
// morph_destroy hooks: its own errors (the telemetry flush) say what took
// the time.
func TestCloseRuntimeNoPlugins(t *testing.T) {
	var out strings.Builder
	closeRuntime(context.Background(), noPlugins{func(ctx context.Context) error { <-ctx.Done(); return errors.New("telemetry: flushing traces") }},
		50*time.Millisecond, false, &out)
	want := "morph: warning: shutdown took longer than 50ms (--shutdown-timeout): closing (no plugins: the MCP servers, the telemetry flush) was cut short\n" +
		"morph: warning: closing: telemetry: flushing traces\n"
	if out.String() != want {
		t.Fatalf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
}

// A close that does not heed its context is waited for shutdownGrace past
// the limit and reported in one warning; before the fix, in two. A close
// that returns in time is reported in none.
func TestCloseRuntimeWarnings(t *testing.T) {
	stuck := make(chan struct{})
	defer close(stuck)
	cases := []struct {
		name  string
		close closeFunc
		want  []string // the lines printed
	}{
		{"stuck", func(context.Context) error { <-stuck; return nil },
			[]string{"morph: warning: shutdown took longer than 50ms (--shutdown-timeout): the plugins' morph_destroy hooks were cut short, and did not return 1s later; exiting anyway"}},
		{"heeds its context", func(ctx context.Context) error { <-ctx.Done(); return errors.New("destroy cut short") },
			[]string{"morph: warning: shutdown took longer than 50ms (--shutdown-timeout): the plugins' morph_destroy hooks were cut short",
				"morph: warning: closing: destroy cut short"}},
		{"in time", func(context.Context) error { return nil }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			closeRuntime(context.Background(), c.close, 50*time.Millisecond, false, &out)
			var got []string
			if out.Len() > 0 {
				got = strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("printed:\n%s\nwant:\n%s", out.String(), strings.Join(c.want, "\n"))
			}
		})
	}
}

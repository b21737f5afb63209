package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/morphhost/morph/internal/testenv"
)

// fakeBin writes an executable shell script named name into a new
// directory and returns the directory.
func fakeBin(t *testing.T, name, script string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// withoutOnSystemPath skips the test when name is in /usr/bin or /bin,
// the directories these tests keep on PATH for sh, make and env.
func withoutOnSystemPath(t *testing.T, name string) {
	t.Helper()
	for _, d := range []string{"/usr/bin", "/bin"} {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			t.Skipf("%s/%s exists: this test needs it absent", d, name)
		}
	}
}

// The TinyGo scaffold's next step is a command that works: with no
// tinygo on PATH and none built, a make whose TINYGO builds one with the
// checkout's scripts/tinygo.sh (named by its absolute path), with a note
// saying so; the Makefile's comment is that command as a shell takes it
// (no Make-escaped $$). With a tinygo on PATH, plain make, which reaches it.
func TestPluginNewTinyGoCommand(t *testing.T) {
	withoutOnSystemPath(t, "tinygo")
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TINYGO_CACHE", t.TempDir()) // nothing built there
	t.Setenv("PATH", t.TempDir()+":/usr/bin:/bin")
	dir := filepath.Join(t.TempDir(), "x")
	code, stdout, stderr := pluginNew(t, "tinygo", "x", "--dir", dir, "--pdk", repo)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	want := `make TINYGO="$(` + filepath.Join(repo, "scripts", "tinygo.sh") + `)"`
	assertHas(t, "plugin new tinygo without tinygo", stdout, "\n  "+want+"        # builds x.wasm\n",
		"note: tinygo is not on PATH", "builds TinyGo 0.34 from source first")
	mk, err := os.ReadFile(filepath.Join(dir, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	assertHas(t, "Makefile", string(mk), "#   "+want+"\n")
	if strings.Contains(string(mk), "$$(") {
		t.Errorf("the Makefile has $$( (Make escaping), which a shell reads as its PID:\n%s", mk)
	}

	makeBin := testenv.Tool(t, "make", "build")
	bin := fakeBin(t, "tinygo", `while [ $# -gt 0 ]; do if [ "$1" = -o ]; then echo fake > "$2"; fi; shift; done`+"\n")
	t.Setenv("PATH", bin+":/usr/bin:/bin")
	dir = filepath.Join(t.TempDir(), "x")
	if code, stdout, stderr = pluginNew(t, "tinygo", "x", "--dir", dir, "--pdk", repo); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	assertHas(t, "plugin new tinygo with tinygo on PATH", stdout, "\n  make        # builds x.wasm\n")
	if strings.Contains(stdout, "note:") {
		t.Errorf("tinygo on PATH: a note:\n%s", stdout)
	}
	cmd := exec.Command(makeBin)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "x.wasm")); err != nil || string(b) != "fake\n" {
		t.Errorf("make did not run the tinygo on PATH: %q %v", b, err)
	}
}

// The Rust scaffold says when the cargo on PATH is not Debian's, which
// fails with "unknown print request `split-debuginfo`" (rustup's, driving
// Debian's rustc 1.63), and what to run instead; with Debian's first on
// PATH it says nothing.
func TestPluginNewCargoNote(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Tool(t, debianCargo, "tools-rust")
	bin := fakeBin(t, "cargo", "echo 'error: unknown print request `split-debuginfo`' >&2; exit 1\n")
	t.Setenv("PATH", bin+":/usr/bin:/bin")
	code, stdout, stderr := pluginNew(t, "rust", "x", "--dir", filepath.Join(t.TempDir(), "x"), "--pdk", repo)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	assertHas(t, "plugin new rust, rustup's cargo first", stdout, `note: "cargo" on your PATH is `+filepath.Join(bin, "cargo"),
		"split-debuginfo", debianCargo+" build --release", "\n  make        # builds ")

	t.Setenv("PATH", "/usr/bin:/bin")
	if code, stdout, stderr = pluginNew(t, "rust", "x", "--dir", filepath.Join(t.TempDir(), "x"), "--pdk", repo); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "note:") {
		t.Errorf("Debian's cargo first on PATH: a note:\n%s", stdout)
	}
}

// `plugin check` and `plugin test` of a Rust scaffold's module before it is
// built say to run make in the crate, and, with rustup's cargo first on
// PATH, not to use it; a missing file elsewhere gets the plain error.
func TestPluginNotBuiltHint(t *testing.T) {
	testenv.Tool(t, debianCargo, "tools-rust")
	crate := t.TempDir()
	if err := os.WriteFile(filepath.Join(crate, "Cargo.toml"), []byte("[package]\nname = \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	module := filepath.Join(crate, "target", "wasm32-unknown-unknown", "release", "x.wasm")
	t.Setenv("PATH", fakeBin(t, "cargo", "exit 1\n")+":/usr/bin:/bin")
	for _, sub := range []string{"check", "test", "inspect"} {
		code, _, stderr := morph(t, "", "plugin", sub, module)
		if code != exitUsage {
			t.Errorf("plugin %s: exit %d, want %d", sub, code, exitUsage)
		}
		assertHas(t, "plugin "+sub, stderr, "not built yet: run make in "+crate, "split-debuginfo")
	}
	if _, _, stderr := morph(t, "", "plugin", "test", filepath.Join(crate, "x.wasm")); strings.Contains(stderr, "not built yet") {
		t.Errorf("a module outside target/: %s", stderr)
	}
}

package main

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/internal/testenv"
)

// pluginNew runs `morph plugin new args...` and returns its exit code,
// stdout and stderr.
func pluginNew(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return morph(t, "", append([]string{"plugin", "new"}, args...)...)
}

// End to end, per language, from an empty folder outside the repository:
// generate the scaffold, build it and run its test with its own Makefile,
// then `morph run --config <dir>/morph.toml` replays its scripted replies:
// the word_count call and the final.
//
// The languages run in parallel, beside the package's other parallel tests:
// each is mostly a toolchain in a process of its own (go, TinyGo's LLVM,
// cargo, or cargo waiting for rust-test's lock on the shared target
// directory under make test) and a module compiled in this one, in
// directories of their own.
func TestPluginNew(t *testing.T) {
	t.Parallel()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// make test's one cargo target directory (see the Makefile), else the
	// Makefile's default (a plain go test after `make guests`): the Rust
	// scaffold's build finds serde and the PDK compiled there instead of
	// compiling them cold, for minutes, in its own target/. Given to make,
	// not set here: a parallel test cannot set the environment.
	shared := os.Getenv("CARGO_TARGET_DIR")
	if shared == "" {
		shared = filepath.Join(repo, "target")
	}
	for _, lang := range scaffoldLangs {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			makeBin := testenv.Tool(t, "make", "build")
			var makeArgs, buildArgs, testArgs []string
			switch lang {
			case "go":
				testenv.Tool(t, "go", "build")
			case "tinygo":
				testenv.TinyGo(t, "the tinygo scaffold of morph plugin new")
				testenv.Tool(t, "go", "build")
				// TinyGo's cache is the user's, where `make tinygo-examples`
				// compiled its runtime and compiler-rt, as go's caches are
				// (testenv.Main): in the test's new home it built them again.
				makeArgs = append(makeArgs, "TINYGO="+tinyGo(t, repo), "XDG_CACHE_HOME="+testenv.UserCacheDir())
			case "rust":
				testenv.Tool(t, "/usr/bin/cargo", "tools-rust")
				testenv.Tool(t, "/usr/bin/rustc", "tools-rust")
			}
			name := "count-" + lang
			dir := filepath.Join(t.TempDir(), name)
			start := time.Now()
			if code, stdout, stderr := pluginNew(t, lang, name, "--dir", dir, "--pdk", repo); code != 0 {
				t.Fatalf("plugin new: exit %d\n%s%s", code, stdout, stderr)
			}
			generated := time.Since(start)
			if lang == "rust" {
				// The shared target directory, where the scaffold's build finds
				// serde and the PDK compiled: linked as the scaffold's target/,
				// where its morph.toml reads the module.
				if err := os.Symlink(shared, filepath.Join(dir, "target")); err != nil {
					t.Fatal(err)
				}
				buildArgs = append(buildArgs, "CARGO_TARGET_DIR="+shared)
				// Its tests on the host's target in the Makefile's directory
				// for those (rust-test's), where the PDK's own tests compile
				// serde and its derive macros for the host.
				testArgs = append(testArgs, "CARGO_TARGET_DIR="+filepath.Join(shared, "host-tests"))
			}

			mk := func(target ...string) time.Duration {
				t.Helper()
				begin := time.Now()
				cmd := exec.Command(makeBin, append(append([]string{}, makeArgs...), target...)...)
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("make %s: %v\n%s", strings.Join(target, " "), err, out)
				}
				return time.Since(begin)
			}
			built := mk(buildArgs...)
			tested := mk(append(testArgs, "test")...)

			begin := time.Now()
			code, stdout, stderr := morph(t, "", "run", "--show-prompt", "--config", filepath.Join(dir, "morph.toml"),
				"Count the words of: the quick brown fox jumps over the lazy dog")
			ran := time.Since(begin)
			if code != 0 {
				t.Fatalf("morph run: exit %d\n%s", code, stderr)
			}
			out := decode(t, stdout)
			if !strings.Contains(stderr, "1 plugin ("+name+" 0.1.0)") || !strings.Contains(stderr, "hooks: build_prompt") ||
				!strings.Contains(stderr, "tool word_count") {
				t.Errorf("stderr:\n%s", stderr)
			}
			if !strings.Contains(out.SystemPrompt, "## From the "+name+" plugin\n") || !strings.Contains(out.SystemPrompt, "- word_count: Counts the words") {
				t.Errorf("system prompt:\n%s", out.SystemPrompt)
			}
			if out.StopReason != "final" {
				t.Errorf("stop_reason %q, want final", out.StopReason)
			}
			if out.Metrics.ToolCalls != 1 {
				t.Errorf("tool_calls %d, want 1", out.Metrics.ToolCalls)
			}
			if want := "The text has 9 words (counted by word_count)."; out.Output != want {
				t.Errorf("output %v, want %q", out.Output, want)
			}
			t.Logf("%s: generate %v, build %v, test %v, run %v; total %v",
				lang, generated.Round(time.Millisecond), built.Round(time.Millisecond), tested.Round(time.Millisecond),
				ran.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		})
	}
}

// tinyGo is the TinyGo that scripts/tinygo.sh built, or $TINYGO. testenv.Main
// moved HOME, so the script looks in the account's own home (from the
// password database), where `make tinygo-examples` built it.
func tinyGo(t *testing.T, repo string) string {
	t.Helper()
	if p := os.Getenv("TINYGO"); p != "" {
		return p
	}
	cmd := exec.Command(filepath.Join(repo, "scripts", "tinygo.sh"), "--print-path")
	if u, err := user.Current(); err == nil && u.HomeDir != "" {
		cmd.Env = append(os.Environ(), "HOME="+u.HomeDir, "XDG_CACHE_HOME="+filepath.Join(u.HomeDir, ".cache"))
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("TinyGo is not built: run `make tinygo-examples` in the repository root, or set TINYGO (%v)", err)
	}
	return strings.TrimSpace(string(out))
}

func TestPluginNewRefuses(t *testing.T) {
	repo := filepath.Join("..", "..")
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"go", "Bad", "--dir", filepath.Join(t.TempDir(), "a")}, `plugin name "Bad": want [a-z][a-z0-9_-]*`},
		{[]string{"go", "1x", "--dir", filepath.Join(t.TempDir(), "a")}, `plugin name "1x"`},
		{[]string{"go", "a/b", "--dir", filepath.Join(t.TempDir(), "a")}, `plugin name "a/b"`},
		{[]string{"zig", "ok", "--dir", filepath.Join(t.TempDir(), "a")}, `unknown language "zig": want one of go, tinygo, rust`},
		{[]string{"go", "ok", "--dir", full}, "is not empty"},
		{[]string{"go", "ok", "--dir", filepath.Join(t.TempDir(), "a"), "--pdk", t.TempDir()}, "--pdk: "},
	} {
		args := append(tc.args, "--pdk", repo)
		if tc.want == "--pdk: " {
			args = tc.args
		}
		code, _, stderr := pluginNew(t, args...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("plugin new %v: exit %d, %q; want an error with %q", args, code, stderr, tc.want)
		}
	}
	// An existing empty directory is fine; the files are the scaffold's.
	empty := t.TempDir()
	code, stdout, stderr := pluginNew(t, "rust", "my_plugin", "--dir", empty, "--pdk", repo)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, f := range []string{"Cargo.toml", ".cargo/config.toml", "src/lib.rs", "Makefile", "morph.toml", "replies.json", "README.md"} {
		if _, err := os.Stat(filepath.Join(empty, f)); err != nil {
			t.Errorf("%v\n%s", err, stdout)
		}
	}
	b, _ := os.ReadFile(filepath.Join(empty, "morph.toml"))
	if !strings.Contains(string(b), `path = "target/wasm32-unknown-unknown/release/my_plugin.wasm"`) {
		t.Errorf("morph.toml:\n%s", b)
	}
}

// The checkout for the PDK: --pdk, else $MORPH_SRC, else the source tree
// this binary was built from (the test binary's is this repository).
func TestPluginNewFindsCheckout(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(MorphSrcEnv, "")
	checkMorphSrc(t, "default", "", repo, "the source tree morph was built from")
	t.Setenv(MorphSrcEnv, filepath.Join("..", ".."))
	checkMorphSrc(t, "$"+MorphSrcEnv, "", repo, "$"+MorphSrcEnv)
	t.Setenv(MorphSrcEnv, t.TempDir())
	if _, _, err := findMorphSrc(""); err == nil || !strings.Contains(err.Error(), "is not a morph checkout") {
		t.Errorf("$%s not a checkout: %v", MorphSrcEnv, err)
	}
	checkMorphSrc(t, "--pdk", repo, repo, "--pdk")
}

// checkMorphSrc checks that findMorphSrc(pdk) finds root, in the way how;
// what names the case.
func checkMorphSrc(t *testing.T, what, pdk, root, how string) {
	t.Helper()
	gotRoot, gotHow, err := findMorphSrc(pdk)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if gotRoot != root {
		t.Errorf("%s: root %q, want %q", what, gotRoot, root)
	}
	if gotHow != how {
		t.Errorf("%s: found as %q, want %q", what, gotHow, how)
	}
}

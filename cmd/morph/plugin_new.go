package main

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"text/template"

	"github.com/spf13/cobra"
)

// `morph plugin new LANG NAME` writes a plugin scaffold: one hook
// (build_prompt), one tool (word_count), a Makefile with the exact build
// command, a morph.toml on the offline scripted model with its replies
// (a word_count call, then a final), a test and a README.
//
// The templates are templates/plugin/<lang>/ plus templates/plugin/common/,
// each file's name without its ".tmpl" (which keeps go build and go vet out
// of the Go templates and lets go.mod be embedded).

//go:embed all:templates/plugin
var pluginTemplates embed.FS

// pluginNameRE is what NAME may be: a Go module path and a Cargo package name.
var pluginNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// MorphSrcEnv names the morph checkout whose guests/ the scaffold uses,
// when --pdk is not given.
const MorphSrcEnv = "MORPH_SRC"

// scaffoldLangs are the languages `plugin new` offers, each tested end to
// end by TestPluginNew.
var scaffoldLangs = []string{"go", "tinygo", "rust"}

// scaffold is what the templates are filled with.
type scaffold struct {
	Name, Lang, LangTitle string
	TinyGo                bool
	PDK                   string // the morph checkout's root, absolute, with forward slashes
	PDKFile               string // how PDK was found
	Wasm                  string // the module's path as built, relative to the scaffold
	BuildCmd, TestCmd     string
	// Make is the command that builds it, as the user types it: make, or
	// for TinyGo off PATH, make with TINYGO naming one (see tinyGoMake).
	Make string
	// Notes are what the user should know before building: a toolchain
	// missing, or another one first on PATH.
	Notes []string
}

// debianCargo is the cargo the Rust scaffold builds with: Debian's, which
// drives Debian's rustc 1.63 and its wasm32 standard library.
const debianCargo = "/usr/bin/cargo"

// tinyGoMake is the command that builds the TinyGo scaffold and a note
// when TinyGo has to be built first: make with tinygo on PATH, else make
// with TINYGO naming the one root's scripts/tinygo.sh built, else a make
// whose TINYGO builds one (the script prints the path on its last line
// and only that on stdout). The script's --print-path fails until then.
func tinyGoMake(root string) (string, string) {
	if _, err := exec.LookPath("tinygo"); err == nil {
		return "make", ""
	}
	script := filepath.Join(root, "scripts", "tinygo.sh")
	if out, err := exec.Command(script, "--print-path").Output(); err == nil {
		if p := strings.TrimSpace(string(out)); p != "" && !strings.ContainsAny(p, " \t\n'\"$`\\") {
			return "make TINYGO=" + p, ""
		}
	}
	return `make TINYGO="$(` + script + `)"`, "tinygo is not on PATH and " + script + " has not built one yet: " +
		"the make below builds TinyGo 0.34 from source first (once, 1.5-3 minutes; see guests/README.md, \"TinyGo\")"
}

// cargoNote warns when the cargo a user would type is not Debian's: rustup's
// cargo, often first on PATH, cannot drive Debian's rustc 1.63 (the build
// fails with "unknown print request `split-debuginfo`"). The Makefile
// names Debian's; this says why not to type cargo.
func cargoNote() string {
	debian, err := filepath.EvalSymlinks(debianCargo)
	if err != nil {
		return debianCargo + " is missing: install Debian's Rust toolchain with `make tools-rust` in the morph checkout " +
			"(scripts/rust-toolchain.sh), then build with make"
	}
	found, err := exec.LookPath("cargo")
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(found); err == nil && real == debian {
		return ""
	}
	return fmt.Sprintf("\"cargo\" on your PATH is %s (rustup's?), which cannot drive Debian's rustc 1.63 that this plugin builds with "+
		"(\"unknown print request `split-debuginfo`\"): build with make, or %s build --release, never plain cargo", found, debianCargo)
}

// notBuilt adds to err, a module file's absence, how to build it when it
// is a Rust build's output (under target/ beside a Cargo.toml): make in
// the crate, with the note on the cargo on PATH.
func notBuilt(err error, path string) error {
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	abs, aerr := filepath.Abs(path)
	if aerr != nil {
		return err
	}
	for dir := filepath.Dir(abs); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if filepath.Base(dir) != "target" {
			continue
		}
		crate := filepath.Dir(dir)
		if _, serr := os.Stat(filepath.Join(crate, "Cargo.toml")); serr != nil {
			return err
		}
		hint := "not built yet: run make in " + crate
		if note := cargoNote(); note != "" {
			hint += " (" + note + ")"
		}
		return fmt.Errorf("%w: %s", err, hint)
	}
	return err
}

func newScaffold(lang, name, pdk, how string) (*scaffold, error) {
	s := &scaffold{Name: name, Lang: lang, PDK: filepath.ToSlash(pdk), PDKFile: how}
	switch lang {
	case "go":
		s.LangTitle, s.Wasm, s.Make = "Go", name+".wasm", "make"
		s.BuildCmd = "GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags='-s -w' -o " + s.Wasm + " ."
		s.TestCmd = "go test ./..."
	case "tinygo":
		s.LangTitle, s.TinyGo, s.Wasm = "Go, built with TinyGo", true, name+".wasm"
		s.BuildCmd = "tinygo build -target wasip1 -buildmode=c-shared -no-debug -scheduler=none -o " + s.Wasm + " ."
		var note string
		if s.Make, note = tinyGoMake(pdk); note != "" {
			s.Notes = append(s.Notes, note)
		}
		s.TestCmd = "go test ./..."
	case "rust":
		s.LangTitle, s.Make = "Rust", "make"
		if note := cargoNote(); note != "" {
			s.Notes = append(s.Notes, note)
		}
		s.Wasm = "target/wasm32-unknown-unknown/release/" + strings.ReplaceAll(name, "-", "_") + ".wasm"
		s.BuildCmd = "RUSTC=/usr/bin/rustc /usr/bin/cargo build --release"
		s.TestCmd = "RUSTC=/usr/bin/rustc /usr/bin/cargo test --target $(/usr/bin/rustc -vV | sed -n 's/^host: //p')"
	default:
		return nil, fmt.Errorf("unknown language %q: want one of %s", lang, strings.Join(scaffoldLangs, ", "))
	}
	return s, nil
}

func newPluginNewCmd(stdout, stderr io.Writer) *cobra.Command {
	var dir, pdk string
	cmd := &cobra.Command{
		Use:   "new go|tinygo|rust NAME",
		Short: "Write a plugin scaffold: a hook, a tool, a Makefile, a test and an offline morph.toml",
		Long: `Write a plugin scaffold into DIR (default ./NAME, which must be missing or empty):
one hook (build_prompt), one tool (word_count), a Makefile whose default target
builds the module, a test (make test), a morph.toml on the offline scripted model
with a replies file that calls the tool then answers, and a README.

NAME is the module or crate name: [a-z][a-z0-9_-]*.

morph's PDKs (guests/go/pdk with abi, guests/rust) are not published, so the
scaffold points at a morph checkout: Go with replace lines, Rust with a path
dependency. The checkout is, first found: --pdk DIR; $MORPH_SRC; the source
tree this morph binary was built from (when it still exists and the build was
not -trimpath); the directory above the binary's own (bin/morph in a checkout).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			lang, name := args[0], args[1]
			if !pluginNameRE.MatchString(name) {
				return &exitError{exitUsage, fmt.Errorf("plugin name %q: want [a-z][a-z0-9_-]*", name)}
			}
			root, how, err := findMorphSrc(pdk)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			s, err := newScaffold(lang, name, root, how)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			if dir == "" {
				dir = name
			}
			files, err := writeScaffold(dir, s)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			fmt.Fprintf(stdout, "wrote %s plugin %s in %s (PDK: %s, %s):\n", lang, name, dir, s.PDK, how)
			for _, f := range files {
				fmt.Fprintf(stdout, "  %s\n", f)
			}
			for _, n := range s.Notes {
				fmt.Fprintf(stdout, "note: %s\n", n)
			}
			fmt.Fprintf(stdout, "next:\n  cd %s\n  %s        # builds %s\n  make test\n  morph run --config morph.toml \"Count the words of: the quick brown fox\"\n", dir, s.Make, s.Wasm)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "write the scaffold here (default ./NAME; must be missing or empty)")
	cmd.Flags().StringVar(&pdk, "pdk", "", "the morph checkout whose guests/go/pdk, abi and guests/rust the scaffold uses (default $"+MorphSrcEnv+", else the one this binary was built from)")
	return cmd
}

// isMorphSrc reports whether dir is a morph checkout with the guest PDKs.
func isMorphSrc(dir string) bool {
	for _, f := range []string{"guests/go/pdk/go.mod", "abi/go.mod", "guests/rust/Cargo.toml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "guests", "go", "pdk", "go.mod"))
	return err == nil && bytes.Contains(b, []byte("module github.com/morphhost/morph/guests/go/pdk"))
}

// findMorphSrc returns the morph checkout's absolute root and how it was found.
func findMorphSrc(flag string) (string, string, error) {
	check := func(dir, how string) (string, string, error) {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", "", err
		}
		if !isMorphSrc(abs) {
			return "", "", fmt.Errorf("%s: %s is not a morph checkout (no guests/go/pdk, abi and guests/rust)", how, abs)
		}
		return abs, how, nil
	}
	if flag != "" {
		return check(flag, "--pdk")
	}
	if v := os.Getenv(MorphSrcEnv); v != "" {
		return check(v, "$"+MorphSrcEnv)
	}
	// This file's path at build time: <root>/cmd/morph/plugin_new.go, unless
	// built with -trimpath (then a module path, not absolute).
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
		if isMorphSrc(root) {
			return root, "the source tree morph was built from", nil
		}
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			if root := filepath.Dir(filepath.Dir(exe)); isMorphSrc(root) {
				return root, "the checkout above the morph binary", nil
			}
		}
	}
	return "", "", errors.New("no morph checkout found for the PDK: pass --pdk DIR or set " + MorphSrcEnv + " to a clone of morph's repository")
}

// writeScaffold fills the templates into dir, which must be missing or
// empty, and returns the files written, relative to dir.
func writeScaffold(dir string, s *scaffold) ([]string, error) {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%s is not empty", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	langDir := s.Lang
	if s.TinyGo {
		langDir = "go"
	}
	type file struct{ src, dst string }
	var files []file
	for _, sub := range []string{langDir, "common"} {
		base := path.Join("templates/plugin", sub)
		err := fs.WalkDir(pluginTemplates, base, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			files = append(files, file{p, strings.TrimSuffix(strings.TrimPrefix(p, base+"/"), ".tmpl")})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var written []string
	for _, f := range files {
		b, err := pluginTemplates.ReadFile(f.src)
		if err != nil {
			return nil, err
		}
		tmpl, err := template.New(f.src).Option("missingkey=error").Parse(string(b))
		if err != nil {
			return nil, err
		}
		var out bytes.Buffer
		if err := tmpl.Execute(&out, s); err != nil {
			return nil, err
		}
		dst := filepath.Join(dir, filepath.FromSlash(f.dst))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(dst, out.Bytes(), 0o644); err != nil {
			return nil, err
		}
		written = append(written, f.dst)
	}
	return written, nil
}

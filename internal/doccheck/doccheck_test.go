package doccheck_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"

	"github.com/morphhost/morph/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	mainModule = "github.com/morphhost/morph"
	abiModule  = mainModule + "/abi"
	pdkModule  = mainModule + "/guests/go/pdk"
)

// root is the repository's root directory.
var root = func() string {
	abs, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return abs
}()

// docs are the files whose Go blocks a reader copies.
var docs = []string{"README.md", "guests/README.md", "guests/go/pdk/README.md"}

// block is a fenced Go block of a Markdown file.
type block struct {
	file string
	line int // of the opening fence
	src  string
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// goBlocks returns the ```go blocks of a Markdown file, in order.
func goBlocks(t *testing.T, file string) []block {
	t.Helper()
	f, err := os.Open(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []block
	var cur *block
	var body strings.Builder
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &block{file: file, line: n}
			body.Reset()
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.src = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s: the Go block is never closed", cur)
	}
	return out
}

// goEnv is the environment of a go command run for a module outside the
// repository: no workspace, no toolchain switch, and, beside what a test
// adds, no network (GOPROXY=off: the module cache answers).
func goEnv(extra ...string) []string {
	env := append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off")
	return append(env, extra...)
}

// run runs a command in dir and fails the test with its output when it fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// TestReadmeGoBlocksCompile: every Go block of the READMEs is a whole file
// (package clause, imports, declarations) that compiles as shown, in a
// module of its own that requires morph as a reader's would; a plugin's (one
// that imports the Go PDK) for GOOS=wasip1, as it is built.
func TestReadmeGoBlocksCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds every README program")
	}
	dir := t.TempDir()
	gomod := fmt.Sprintf("module example.com/doccheck\n\ngo 1.26\n\nrequire (\n\t%s v0.0.0\n\t%s v0.0.0\n\t%s v0.0.0\n)\n\nreplace (\n\t%s => %s\n\t%s => %s\n\t%s => %s\n)\n",
		mainModule, abiModule, pdkModule,
		mainModule, root, abiModule, filepath.Join(root, "abi"), pdkModule, filepath.Join(root, "guests", "go", "pdk"))
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o600); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o600); err != nil {
		t.Fatal(err)
	}
	var hostPkgs, guestPkgs []string
	where := map[string]block{}
	for _, file := range docs {
		for _, b := range goBlocks(t, file) {
			if _, err := parser.ParseFile(token.NewFileSet(), b.String(), b.src, parser.PackageClauseOnly); err != nil {
				t.Errorf("%s: a Go block is a whole file, package clause first, so that it compiles as shown: %v", b, err)
				continue
			}
			pkg := fmt.Sprintf("./b%d", len(where))
			where[pkg] = b
			if err := os.MkdirAll(filepath.Join(dir, pkg), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, pkg, "main.go"), []byte(b.src), 0o600); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(b.src, `"`+pdkModule+`"`) {
				guestPkgs = append(guestPkgs, pkg)
			} else {
				hostPkgs = append(hostPkgs, pkg)
			}
		}
	}
	if len(where) < 6 {
		t.Fatalf("found %d Go blocks in %v: the parser lost some", len(where), docs)
	}
	vet := func(env []string, pkgs []string) {
		if len(pkgs) == 0 {
			return
		}
		cmd := exec.Command("go", append([]string{"vet"}, pkgs...)...)
		cmd.Dir = dir
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			// Name the README line of each block the output mentions.
			msg := string(out)
			for pkg, b := range where {
				msg = strings.ReplaceAll(msg, strings.TrimPrefix(pkg, "./")+"/main.go", b.String()+" (block)")
			}
			t.Errorf("go vet %v: %v\n%s", pkgs, err, msg)
		}
	}
	vet(goEnv(), hostPkgs)
	vet(goEnv("GOOS=wasip1", "GOARCH=wasm"), guestPkgs)
}

// goLine is the major.minor of a go.mod's go line.
func goLine(t *testing.T, path string) string {
	t.Helper()
	f := parseMod(t, path)
	if f.Go == nil {
		t.Fatalf("%s has no go line", path)
	}
	parts := strings.SplitN(f.Go.Version, ".", 3)
	return parts[0] + "." + parts[1]
}

func parseMod(t *testing.T, path string) *modfile.File {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestGoMinimumAgrees: one Go minimum, go.mod's go line, stated the same in
// the temporal module and the READMEs (the Makefile's go-version target reads
// go.mod itself).
func TestGoMinimumAgrees(t *testing.T) {
	want := goLine(t, "go.mod")
	if got := goLine(t, "temporal/go.mod"); got != want {
		t.Errorf("temporal/go.mod's go line is %s, go.mod's %s: one minimum for both", got, want)
	}
	check := func(file string, re *regexp.Regexp, min int) {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		ms := re.FindAllStringSubmatch(string(data), -1)
		if len(ms) < min {
			t.Errorf("%s states no Go minimum matching %s", file, re)
		}
		for _, m := range ms {
			if m[1] != want {
				t.Errorf("%s says %q; go.mod's go line says %s", file, m[0], want)
			}
		}
	}
	check("README.md", regexp.MustCompile(`Go (\d+\.\d+)\+`), 2)
	check("guests/README.md", regexp.MustCompile(`morph itself needs Go (\d+\.\d+)\+`), 1)
}

// pinned is the commit that every module's requirement on abi names.
func pinned(t *testing.T) (version, rev string) {
	t.Helper()
	out := run(t, root, os.Environ(), "git", "ls-files", "*go.mod")
	for _, path := range strings.Fields(out) {
		for _, r := range parseMod(t, path).Require {
			if r.Mod.Path != abiModule {
				continue
			}
			if version == "" {
				version = r.Mod.Version
			} else if r.Mod.Version != version {
				t.Errorf("%s requires abi %s, go.mod %s: run make abi-pin", path, r.Mod.Version, version)
			}
		}
	}
	if !module.IsPseudoVersion(version) {
		t.Fatalf("go.mod requires abi %q, not a pseudo-version of a commit: `go get` cannot resolve it; run make abi-pin", version)
	}
	rev, err := module.PseudoVersionRev(version)
	if err != nil {
		t.Fatal(err)
	}
	return version, rev
}

// pseudoVersion is the pseudo-version of commit rev, as the go command
// computes it: its committer time in UTC and 12 digits of its hash.
func pseudoVersion(t *testing.T, rev string) (string, time.Time) {
	t.Helper()
	out := strings.Fields(run(t, root, os.Environ(), "git", "log", "-1", "--format=%H %ct", rev, "--"))
	if len(out) != 2 {
		t.Fatalf("git log %s: %q", rev, out)
	}
	sec, err := strconv.ParseInt(out[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	when := time.Unix(sec, 0).UTC()
	return module.PseudoVersion("v0", "", when, out[0][:12]), when
}

// needGit skips without git or outside a clone, unless under CI.
func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil || exec.Command("git", "-C", root, "rev-parse", "HEAD").Run() != nil {
		if testenv.CI() {
			t.Fatal("doccheck needs git and the repository's history under CI")
		}
		t.Skip("no git, or not a clone")
	}
}

// TestABIPinned: the pin names a commit of this history whose abi/ is
// today's, with the pseudo-version the go command would compute for it (a
// wrong time in it is refused by the proxy).
func TestABIPinned(t *testing.T) {
	needGit(t)
	version, rev := pinned(t)
	if exec.Command("git", "-C", root, "cat-file", "-e", rev+"^{commit}").Run() != nil {
		t.Fatalf("go.mod pins abi to %s, whose commit %s is not in this repository: run make abi-pin", version, rev)
	}
	if want, _ := pseudoVersion(t, rev); want != version {
		t.Errorf("go.mod pins abi %s; commit %s's pseudo-version is %s: run make abi-pin", version, rev, want)
	}
	if err := exec.Command("git", "-C", root, "diff", "--quiet", rev, "HEAD", "--", "abi").Run(); err != nil {
		t.Errorf("abi/ changed since the pinned commit %s: commit it, then run make abi-pin (%v)", rev, err)
	}
}

// TestGoGetFromOutside: a module outside the repository runs the README's
// `go get github.com/morphhost/morph@...` against a module proxy made from
// this repository (main module at HEAD, abi at its pin) and the module cache
// (every other dependency), with no replace and no workspace, then builds and
// runs the README's first program.
func TestGoGetFromOutside(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds morph as a dependency")
	}
	needGit(t)
	proxy := t.TempDir()
	head, headTime := pseudoVersion(t, "HEAD")
	abiVersion, abiRev := pinned(t)
	_, abiTime := pseudoVersion(t, abiRev)
	publish(t, proxy, mainModule, head, headTime, "HEAD", "")
	publish(t, proxy, abiModule, abiVersion, abiTime, abiRev, "abi")

	dir := t.TempDir()
	modcache := strings.TrimSpace(run(t, root, os.Environ(), "go", "env", "GOMODCACHE"))
	// A module cache of its own (writable, so TempDir can remove it): the
	// shared one would keep a new pseudo-version of morph from every run.
	env := goEnv("GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(modcache, "cache", "download")),
		"GOMODCACHE="+t.TempDir(), "GOFLAGS=-mod=mod -modcacherw")
	run(t, dir, env, "go", "mod", "init", "example.com/embed")
	first := goBlocks(t, "README.md")[0]
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(first.src), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, dir, env, "go", "get", mainModule+"@"+head)
	run(t, dir, env, "go", "mod", "tidy")
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(mod, []byte("replace")) || !bytes.Contains(mod, []byte(abiModule+" "+abiVersion)) {
		t.Fatalf("the consumer's go.mod should require abi %s through morph, with no replace:\n%s", abiVersion, mod)
	}
	run(t, dir, env, "go", "build", "-o", "embed", ".")
	out := run(t, dir, os.Environ(), filepath.Join(dir, "embed"))
	if !strings.Contains(out, "the answer is 42 in 2 model calls") {
		t.Fatalf("%s, built outside the repository, printed %q", first, out)
	}
}

// publish writes module path@version, made from revision rev's subdir of the
// repository, into a GOPROXY directory: its .info, .mod and .zip.
func publish(t *testing.T, proxy, path, version string, when time.Time, rev, subdir string) {
	t.Helper()
	esc, err := module.EscapePath(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(proxy, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]any{"Version": version, "Time": when})
	if err := os.WriteFile(filepath.Join(dir, version+".info"), info, 0o600); err != nil {
		t.Fatal(err)
	}
	gomod := run(t, root, os.Environ(), "git", "show", rev+":"+strings.TrimPrefix(subdir+"/go.mod", "/"))
	if err := os.WriteFile(filepath.Join(dir, version+".mod"), []byte(gomod), 0o600); err != nil {
		t.Fatal(err)
	}
	// The tree as committed (git archive, not the work tree); CreateFromDir
	// leaves out nested modules as the proxy does. (modzip.CreateFromVCS
	// does both in one, but refuses a linked work tree, whose .git is a file.)
	tree := t.TempDir()
	tarball := filepath.Join(t.TempDir(), "tree.tar")
	treeish := rev
	if subdir != "" {
		treeish += ":" + subdir
	}
	run(t, root, os.Environ(), "git", "archive", "--format=tar", "-o", tarball, treeish)
	run(t, tree, os.Environ(), "tar", "-xf", tarball)
	var zip bytes.Buffer
	if err := modzip.CreateFromDir(&zip, module.Version{Path: path, Version: version}, tree); err != nil {
		t.Fatalf("zip of %s@%s: %v", path, version, err)
	}
	if err := os.WriteFile(filepath.Join(dir, version+".zip"), zip.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

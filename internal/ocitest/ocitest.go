// Package ocitest is the OCI tests' harness: a real registry on 127.0.0.1
// (`crane registry serve`, its blobs in a directory the test can see) and
// the ecosystem's own tools (oras, crane, cosign) to push, sign and
// inspect what morph then pulls and verifies.
//
// The tools come from `make tools-oci` (scripts/oci-tools.sh), named by
// MORPH_OCI_TOOLS (internal/testenv.OCITools): without them a plain go test
// skips, naming the target, and `make test` or CI=true fails.
//
// Nothing here reaches past 127.0.0.1: the registry listens there, oras
// and crane are told plain HTTP, cosign signs with a key and neither
// uploads to a transparency log nor fetches a signing configuration, and
// every tool runs with HTTP_PROXY and HTTPS_PROXY pointing at a closed
// local port, so that a request for anywhere else fails at once instead
// of leaving the machine (Go's proxy rules never proxy loopback addresses).
package ocitest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/morphhost/morph/internal/testenv"
)

// Password is the password of the keys KeyPair makes; Run gives it to
// cosign as COSIGN_PASSWORD.
const Password = "ocitest"

// toolTimeout bounds one tool's run: the commands take well under a
// second on localhost, so this only names a hung tool under any load.
const toolTimeout = 2 * time.Minute

// startTimeout bounds the registry's start (0.3 s measured, unloaded).
const startTimeout = time.Minute

// noProxy is the proxy the tools are given: the discard port on
// 127.0.0.1, closed, so that a request to a host other than a loopback one
// is refused on the spot.
const noProxy = "http://127.0.0.1:9"

// Tools is the directory holding crane, oras and cosign
// ($MORPH_OCI_TOOLS/bin), or skips t (fails it under make test or
// CI=true) naming `make tools-oci`.
func Tools(t testing.TB) string {
	t.Helper()
	return filepath.Join(testenv.OCITools(t), "bin")
}

// Registry is a running `crane registry serve`: manifests in its memory,
// blobs in Disk.
type Registry struct {
	// Addr is "127.0.0.1:PORT", the host part of the references pushed to it.
	Addr string
	// Disk is the directory of its blobs, sha256/HEX each (see Blob).
	Disk string

	cmd  *exec.Cmd
	log  *testenv.Buffer
	done chan struct{} // closed when the process has exited and its output is read
	once sync.Once
}

var servingOn = regexp.MustCompile(`serving on port (\d+)`)

// StartRegistry starts a registry on a free port of 127.0.0.1 with its
// blobs in a new temporary directory, and stops it when t ends.
func StartRegistry(t testing.TB) *Registry {
	t.Helper()
	crane := filepath.Join(Tools(t), "crane")
	r := &Registry{Disk: t.TempDir(), log: new(testenv.Buffer), done: make(chan struct{})}
	r.cmd = exec.Command(crane, "registry", "serve", "--address", "127.0.0.1:0", "--disk", r.Disk)
	out, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.cmd.Stdout = r.log
	if err := start(r.cmd); err != nil {
		t.Fatalf("crane registry serve: %v", err)
	}
	port := make(chan string, 1)
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(r.log, line)
			if m := servingOn.FindStringSubmatch(line); m != nil {
				select {
				case port <- m[1]:
				default:
				}
			}
		}
		r.cmd.Wait()
	}()
	t.Cleanup(r.Stop)
	select {
	case p := <-port:
		r.Addr = "127.0.0.1:" + p
	case <-r.done:
		t.Fatalf("crane registry serve exited before serving:\n%s", r.log)
	case <-time.After(startTimeout):
		t.Fatalf("crane registry serve did not say %q within %v:\n%s", "serving on port N", startTimeout, r.log)
	}
	return r
}

// Stop stops the registry (for the tests of a registry that went down);
// again, or at the test's end, it does nothing.
func (r *Registry) Stop() {
	r.once.Do(func() {
		r.cmd.Process.Kill()
		<-r.done
	})
}

// Log is what the registry printed so far (one line per request).
func (r *Registry) Log() string { return r.log.String() }

// Ref is the reference of name ("REPO:TAG" or "REPO@sha256:HEX") on this
// registry, as the tools take it: "127.0.0.1:PORT/name".
func (r *Registry) Ref(name string) string { return r.Addr + "/" + name }

// Blob is the path of the file holding the blob with the given digest
// ("sha256:HEX"). crane hashes the file again before it serves it, so an
// overwritten blob is answered 404, as a blob the registry lost: serving
// other bytes under a digest takes a proxy in front of the registry.
func (r *Registry) Blob(digest string) string {
	alg, hex, ok := strings.Cut(digest, ":")
	if !ok {
		panic(fmt.Sprintf("ocitest: Blob(%q): want sha256:HEX", digest))
	}
	return filepath.Join(r.Disk, alg, hex)
}

// Run runs tool (oras, crane or cosign) with args and returns its standard
// output; it fails t with the tool's output when the tool fails. The
// caller gives the flags that keep it on 127.0.0.1 (oras --plain-http,
// crane --insecure; cosign's in Sign); Run adds the environment (see the
// package comment).
func Run(t testing.TB, tool string, args ...string) string {
	t.Helper()
	return RunIn(t, "", tool, args...)
}

// RunIn is Run in directory dir: for oras push, which takes the files to
// push by relative paths (their titles in the manifest).
func RunIn(t testing.TB, dir, tool string, args ...string) string {
	t.Helper()
	out, err := run(t, dir, tool, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Output is Run for a command that is expected to fail: its standard
// output, and an error holding its exit status and standard error.
func Output(t testing.TB, tool string, args ...string) (string, error) {
	t.Helper()
	return run(t, "", tool, args...)
}

// run runs tool in dir ("" for the test's working directory).
func run(t testing.TB, dir, tool string, args ...string) (string, error) {
	t.Helper()
	path := filepath.Join(Tools(t), tool)
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"COSIGN_PASSWORD="+Password,
		"HTTP_PROXY="+noProxy, "HTTPS_PROXY="+noProxy, "http_proxy="+noProxy, "https_proxy="+noProxy,
		"NO_PROXY=", "no_proxy=",
		// cosign's TUF cache (the public root, never fetched here) and
		// anything else it keeps: the test's, not the user's.
		"TUF_ROOT="+t.TempDir(),
	)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (timed out after %v)", err, toolTimeout)
		}
		return stdout.String(), fmt.Errorf("%s %s: %w\nstdout:\n%s\nstderr:\n%s", tool, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// KeyPair makes a cosign key pair in dir, PREFIX.key (encrypted with
// Password) and PREFIX.pub, and returns their paths.
func KeyPair(t testing.TB, dir, prefix string) (key, pub string) {
	t.Helper()
	if _, err := run(t, dir, "cosign", "generate-key-pair", "--output-key-prefix", prefix); err != nil {
		t.Fatal(err)
	}
	key, pub = filepath.Join(dir, prefix+".key"), filepath.Join(dir, prefix+".pub")
	for _, f := range []string{key, pub} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("cosign generate-key-pair: %v", err)
		}
	}
	return key, pub
}

// Digest is the digest of the manifest ref names on a registry of this
// package (crane digest).
func Digest(t testing.TB, ref string) string {
	t.Helper()
	return strings.TrimSpace(Run(t, "crane", "digest", "--insecure", ref))
}

// cosignLocal are the flags that keep cosign on 127.0.0.1: plain HTTP to
// the registry, no signing configuration fetched, no transparency log.
var cosignLocal = []string{"--allow-insecure-registry", "--allow-http-registry"}

// Sign signs the manifest ref names (REGISTRY/REPO@sha256:HEX, as cosign
// wants it) with key, offline. legacy false makes cosign v3's default, a
// Sigstore bundle attached as a referrer (tag sha256-HEX on a registry
// without the referrers API); legacy true, the sha256-HEX.sig tag of
// cosign v2 and hyper-mcp's published plugins.
func Sign(t testing.TB, key, ref string, legacy bool) {
	t.Helper()
	args := []string{"sign", "--key", key, "--use-signing-config=false", "--tlog-upload=false", "-y"}
	if legacy {
		args = append(args, "--new-bundle-format=false")
	}
	args = append(append(args, cosignLocal...), ref)
	Run(t, "cosign", args...)
}

// Verify is cosign's own verdict on ref's signatures with pub (key-based,
// no transparency log): nil when one verifies, else cosign's error. legacy
// checks the sha256-HEX.sig signatures instead of the bundles (see Sign).
func Verify(t testing.TB, pub, ref string, legacy bool) error {
	t.Helper()
	args := append([]string{"verify", "--key", pub, "--insecure-ignore-tlog"}, cosignLocal...)
	if legacy {
		args = append(args, "--new-bundle-format=false")
	}
	_, err := Output(t, "cosign", append(args, ref)...)
	return err
}

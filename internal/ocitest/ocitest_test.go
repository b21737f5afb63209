package ocitest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/morphhost/morph/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// module is the smallest WebAssembly module: the magic and version 1.
var module = []byte("\x00asm\x01\x00\x00\x00")

// The harness end to end: oras pushes a module to the registry, crane
// fetches the manifest that names it, the blob lies on disk where Blob
// says, and cosign signs the manifest in both formats and verifies it with
// the right key only.
func TestHarness(t *testing.T) {
	r := StartRegistry(t)
	if !strings.HasPrefix(r.Addr, "127.0.0.1:") {
		t.Fatalf("Addr = %q, want 127.0.0.1:PORT", r.Addr)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "plugin.wasm"), module, 0o644); err != nil {
		t.Fatal(err)
	}
	ref := r.Ref("plugins/spin:v1")
	RunIn(t, dir, "oras", "push", "--plain-http", ref, "plugin.wasm:application/wasm")

	var m struct {
		Layers []struct {
			MediaType, Digest string
			Size              int64
			Annotations       map[string]string
		}
	}
	raw := Run(t, "crane", "manifest", "--insecure", ref)
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("crane manifest: %v\n%s", err, raw)
	}
	sum := sha256.Sum256(module)
	want := "sha256:" + hex.EncodeToString(sum[:])
	if len(m.Layers) != 1 || m.Layers[0].Digest != want || m.Layers[0].Size != int64(len(module)) ||
		m.Layers[0].MediaType != "application/wasm" || m.Layers[0].Annotations["org.opencontainers.image.title"] != "plugin.wasm" {
		t.Fatalf("manifest layers = %+v, want one application/wasm layer plugin.wasm %s of %d bytes", m.Layers, want, len(module))
	}
	if b, err := os.ReadFile(r.Blob(want)); err != nil || !bytes.Equal(b, module) {
		t.Fatalf("Blob(%s): %q, %v; want the module's bytes", want, b, err)
	}

	digest := Digest(t, ref)
	mh := sha256.Sum256([]byte(raw))
	if digest != "sha256:"+hex.EncodeToString(mh[:]) {
		t.Fatalf("Digest = %s, want the sha256 of the manifest crane fetched", digest)
	}
	keys := t.TempDir()
	k1, pub1 := KeyPair(t, keys, "k1")
	_, pub2 := KeyPair(t, keys, "k2")
	byDigest := r.Ref("plugins/spin@" + digest)
	for _, legacy := range []bool{false, true} {
		Sign(t, k1, byDigest, legacy)
	}
	// cosign's tag schema: the bundle's index under sha256-HEX, the legacy
	// signature under sha256-HEX.sig.
	tags := strings.Fields(Run(t, "crane", "ls", "--insecure", r.Ref("plugins/spin")))
	sigTag := strings.Replace(digest, ":", "-", 1)
	for _, tag := range []string{sigTag, sigTag + ".sig"} {
		if !contains(tags, tag) {
			t.Errorf("tags %v: no %s", tags, tag)
		}
	}
	// Each format verified on its own, with the right key and with another.
	for _, c := range []struct {
		legacy   bool
		wrongKey string // cosign's complaint about another key's signature
	}{
		{false, "accepted signatures do not match threshold"},
		{true, "invalid signature when validating ASN.1 encoded signature"},
	} {
		if err := Verify(t, pub1, byDigest, c.legacy); err != nil {
			t.Errorf("legacy %v: cosign verify with the signing key's public key: %v", c.legacy, err)
		}
		if err := Verify(t, pub2, byDigest, c.legacy); err == nil || !strings.Contains(err.Error(), c.wrongKey) {
			t.Errorf("legacy %v: cosign verify with another key: %v, want %q", c.legacy, err, c.wrongKey)
		}
	}
}

// Stop takes the registry down: its port refuses connections.
func TestStop(t *testing.T) {
	r := StartRegistry(t)
	c, err := net.Dial("tcp", r.Addr)
	if err != nil {
		t.Fatalf("registry at %s before Stop: %v", r.Addr, err)
	}
	c.Close()
	r.Stop()
	r.Stop() // again: nothing
	if c, err := net.Dial("tcp", r.Addr); err == nil {
		c.Close()
		t.Fatalf("registry at %s still accepts connections after Stop", r.Addr)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

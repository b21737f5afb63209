package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/morphhost/morph/oci/internal/ocitest"
)

// TestVerifyBlob: a local module signed with `cosign sign-blob --bundle`
// (a key, no transparency log) verifies with the key; another key, another
// module or a file that is no bundle is refused, naming the module's
// digest.
func TestVerifyBlob(t *testing.T) {
	ocitest.Tools(t)
	dir := t.TempDir()
	key, pub := ocitest.KeyPair(t, dir, "good")
	_, other := ocitest.KeyPair(t, dir, "other")
	module := append([]byte("\x00asm\x01\x00\x00\x00"), []byte("a module")...)
	if err := os.WriteFile(filepath.Join(dir, "plugin.wasm"), module, 0o644); err != nil {
		t.Fatal(err)
	}
	ocitest.RunIn(t, dir, "cosign", "sign-blob", "--key", key, "--bundle", "plugin.sigstore.json",
		"--use-signing-config=false", "--tlog-upload=false", "-y", "plugin.wasm")
	b, err := os.ReadFile(filepath.Join(dir, "plugin.sigstore.json"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := VerifyBlob(ctx, "plugin.wasm", module, b, Policy{Key: pub})
	if err != nil || s.Format != FormatBundle || !strings.HasPrefix(s.KeyFingerprint, "SHA256:") {
		t.Fatalf("VerifyBlob: %+v, %v; want the key's fingerprint", s, err)
	}
	for name, c := range map[string]struct {
		module, bundle []byte
		p              Policy
	}{
		"other key":    {module, b, Policy{Key: other}},
		"other module": {append(module, 0), b, Policy{Key: pub}},
		"not a bundle": {module, []byte(`{"mediaType":"x"}`), Policy{Key: pub}},
	} {
		_, err := VerifyBlob(ctx, "plugin.wasm", c.module, c.bundle, c.p)
		sum := sha256.Sum256(c.module)
		digest := "sha256:" + hex.EncodeToString(sum[:])
		var e *Error
		if !errors.Is(err, ErrBadSignature) || !errors.As(err, &e) || e.Ref != "plugin.wasm" || e.Digest != digest ||
			!strings.Contains(err.Error(), "plugin.wasm@"+digest) {
			t.Errorf("%s: %v, want ErrBadSignature naming plugin.wasm@%s", name, err, digest)
		}
	}
	if _, err := VerifyBlob(ctx, "plugin.wasm", module, b, Policy{}); !errors.Is(err, ErrPolicy) {
		t.Errorf("no policy: %v, want ErrPolicy", err)
	}
}

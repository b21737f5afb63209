package oci

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/tuf"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// TestKeylessTUFCache: the trusted root by TUF, as the public-good one
// comes, from a TUF repository made here (its own root.json in place of
// the embedded public one, served from memory: no network): refreshed once
// into a cache, then read from the cache alone, which verifies a keyless
// bundle; before the refresh the cache-only read fails.
func TestKeylessTUFCache(t *testing.T) {
	vs := newVirtualSigstore(t)
	trustedJSON, err := os.ReadFile(trustedRootFile(t, vs, false))
	if err != nil {
		t.Fatal(err)
	}
	const base = "https://tuf.invalid"
	repo := newTUFRepo(t, base, "trusted_root.json", trustedJSON)
	opts := tuf.Options{Root: repo.root, CachePath: t.TempDir(), RepositoryBaseURL: base, Fetcher: repo}

	if _, err := cachedTrustedRoot(opts); err == nil || !strings.Contains(err.Error(), "offline") {
		t.Fatalf("cache-only read of an empty cache: %v, want a refusal to fetch", err)
	}
	if n := repo.served(); n != 0 {
		t.Fatalf("the cache-only read fetched %d files", n)
	}
	if err := refreshTrustedRoot(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if n := repo.served(); n == 0 {
		t.Fatal("the refresh fetched nothing")
	}
	before := repo.served()
	tr, err := cachedTrustedRoot(opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := repo.served() - before; n != 0 {
		t.Fatalf("the cache-only read fetched %d files", n)
	}
	digest := testDigest("manifest")
	a := &Artifact{Ref: Ref{Registry: "127.0.0.1:5000", Repository: "plugins/spin", Digest: digest}, Digest: digest,
		Signatures: []SignatureArtifact{{Format: FormatBundle, Digest: testDigest("sig"), Payload: keylessBundle(t, vs, testIdentity, digest, cosignSignPredicate)}}}
	got, err := VerifyArtifact(context.Background(), a, Policy{Identity: testIdentity, Issuer: testIssuer, Trusted: tr})
	if err != nil {
		t.Fatal(err)
	}
	if got.Identity != testIdentity {
		t.Fatalf("signer %+v", got)
	}
}

// tufRepo is a one-key TUF repository in memory (consistent snapshots,
// hash-prefixed targets, as Sigstore's), and the fetcher that serves it.
type tufRepo struct {
	root  []byte // 1.root.json, the client's trust anchor
	files map[string][]byte
	mu    sync.Mutex
	count int
}

func newTUFRepo(t *testing.T, base, name string, target []byte) *tufRepo {
	t.Helper()
	expires := time.Now().Add(24 * time.Hour)
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.LoadSigner(key, crypto.Hash(0))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := metadata.KeyFromPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	root := metadata.Root(expires)
	for _, role := range []string{metadata.ROOT, metadata.TARGETS, metadata.SNAPSHOT, metadata.TIMESTAMP} {
		if err := root.Signed.AddKey(pub, role); err != nil {
			t.Fatal(err)
		}
	}
	targets := metadata.Targets(expires)
	tf, err := metadata.TargetFile().FromBytes(name, target, "sha256")
	if err != nil {
		t.Fatal(err)
	}
	targets.Signed.Targets[name] = tf
	snapshot := metadata.Snapshot(expires)
	timestamp := metadata.Timestamp(expires)
	sign := func(m interface {
		Sign(signature.Signer) (*metadata.Signature, error)
		ToBytes(bool) ([]byte, error)
	}) []byte {
		if _, err := m.Sign(signer); err != nil {
			t.Fatal(err)
		}
		b, err := m.ToBytes(false)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sum := sha256.Sum256(target)
	r := &tufRepo{files: map[string][]byte{}}
	r.root = sign(root)
	r.files[base+"/1.root.json"] = r.root
	r.files[base+"/1.targets.json"] = sign(targets)
	r.files[base+"/1.snapshot.json"] = sign(snapshot)
	r.files[base+"/timestamp.json"] = sign(timestamp)
	r.files[base+"/targets/"+hex.EncodeToString(sum[:])+"."+name] = target
	return r
}

// DownloadFile serves the repository's files; anything else is a 404,
// which ends TUF's search for a newer root.
func (r *tufRepo) DownloadFile(url string, maxLength int64, _ time.Duration) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.files[url]
	if !ok {
		return nil, &metadata.ErrDownloadHTTP{StatusCode: 404, URL: url}
	}
	if int64(len(b)) > maxLength {
		return nil, fmt.Errorf("%s: %d bytes over %d", url, len(b), maxLength)
	}
	r.count++
	return b, nil
}

func (r *tufRepo) served() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

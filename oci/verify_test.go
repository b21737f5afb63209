package oci

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/morphhost/morph/oci/internal/ocitest"
)

// TestVerifyKey: real cosign signatures (v3's bundle and the legacy .sig
// tag) made with a test key on a real local registry, brought in by Fetch,
// verified by VerifyArtifact (cosign itself agrees); another key, or a
// signature presented for another manifest, is refused.
func TestVerifyKey(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	key1, pub1 := ocitest.KeyPair(t, dir, "k1")
	_, pub2 := ocitest.KeyPair(t, dir, "k2")
	e.push("plugins/spin:v1", map[string][]byte{"plugin.wasm": wasm("signed")}, "plugin.wasm")
	e.push("plugins/spin:v2", map[string][]byte{"plugin.wasm": wasm("other")}, "plugin.wasm")
	signedRef := e.reg.Ref("plugins/spin@" + ocitest.Digest(t, e.reg.Ref("plugins/spin:v1")))
	ocitest.Sign(t, key1, signedRef, false)
	ocitest.Sign(t, key1, signedRef, true)
	signed, err := e.fetch(e.client(nil), "plugins/spin:v1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.fetch(e.client(nil), "plugins/spin:v2")
	if err != nil {
		t.Fatal(err)
	}
	byFormat := map[string]SignatureArtifact{}
	for _, s := range signed.Signatures {
		byFormat[s.Format] = s
	}
	if len(signed.Signatures) != 2 || len(byFormat) != 2 || len(other.Signatures) != 0 {
		t.Fatalf("want one bundle and one .sig signature on v1 and none on v2, Fetch found %+v and %+v", signed.Signatures, other.Signatures)
	}
	fp := keyFingerprint(t, pub1)
	// with is a (copied) with signatures sigs only.
	with := func(a *Artifact, sigs ...SignatureArtifact) *Artifact {
		c := *a
		c.Signatures = sigs
		return &c
	}
	for _, format := range []string{FormatBundle, FormatSigTag} {
		s := byFormat[format]
		t.Run(format, func(t *testing.T) {
			if err := ocitest.Verify(t, pub1, signedRef, format == FormatSigTag); err != nil {
				t.Fatalf("cosign itself does not verify the signature: %v", err)
			}
			got, err := VerifyArtifact(context.Background(), with(signed, s), Policy{Key: pub1})
			if err != nil {
				t.Fatal(err)
			}
			want := Signer{Format: format, KeyFingerprint: fp, SignatureDigest: s.Digest}
			if *got != want {
				t.Fatalf("signer %+v, want %+v", *got, want)
			}
		})
		t.Run("wrong-key/"+format, func(t *testing.T) {
			_, err := VerifyArtifact(context.Background(), with(signed, s), Policy{Key: pub2})
			wantRefusal(t, err, ErrBadSignature, signed.Digest, s.Digest)
		})
		t.Run("other-digest/"+format, func(t *testing.T) {
			_, err := VerifyArtifact(context.Background(), with(other, s), Policy{Key: pub1})
			wantRefusal(t, err, ErrBadSignature, other.Digest, s.Digest)
		})
	}
	t.Run("first-that-verifies", func(t *testing.T) {
		// A signature that fails does not hide one that verifies.
		bad := byFormat[FormatBundle]
		bad.Payload = []byte("{}")
		got, err := VerifyArtifact(context.Background(), with(signed, bad, byFormat[FormatSigTag]), Policy{Key: pub1})
		if err != nil || got.Format != FormatSigTag {
			t.Fatalf("got %+v, %v; want the .sig signature", got, err)
		}
	})
}

// TestVerifyUnsigned: a manifest with no signature is ErrNotSigned.
func TestVerifyUnsigned(t *testing.T) {
	e := newEnv(t)
	_, pub := ocitest.KeyPair(t, t.TempDir(), "k1")
	e.push("plugins/spin:v1", map[string][]byte{"plugin.wasm": wasm("unsigned")}, "plugin.wasm")
	a, err := e.fetch(e.client(nil), "plugins/spin:v1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = VerifyArtifact(context.Background(), a, Policy{Key: pub})
	wantRefusal(t, err, ErrNotSigned, a.Digest, "[verify] unsigned")
}

// TestPolicyValidate: key XOR identity, identity with issuer, one of
// exact/regexp each; the errors name the keys to set.
func TestPolicyValidate(t *testing.T) {
	const id, iss = "https://github.com/acme/plug/.github/workflows/release.yml@refs/tags/v1.0.0", "https://token.actions.githubusercontent.com"
	for _, c := range []struct {
		name  string
		p     Policy
		want  string // "" valid, else a substring of the error
		field string // the *PolicyError's
	}{
		{"key", Policy{Key: "cosign.pub"}, "", ""},
		{"identity", Policy{Identity: id, Issuer: iss}, "", ""},
		{"regexps", Policy{IdentityRegexp: `^https://github\.com/acme/`, IssuerRegexp: `^https://token\.`}, "", ""},
		{"empty", Policy{}, `key = "cosign.pub"`, ""},
		{"both", Policy{Key: "cosign.pub", Identity: id, Issuer: iss}, "key and a keyless identity/issuer exclude each other", "key"},
		{"no-issuer", Policy{Identity: id}, "needs issuer (or issuer_regexp)", ""},
		{"no-identity", Policy{Issuer: iss}, "needs identity (or identity_regexp)", ""},
		{"two-identities", Policy{Identity: id, IdentityRegexp: ".*", Issuer: iss}, "identity and identity_regexp exclude each other", "identity"},
		{"two-issuers", Policy{Identity: id, Issuer: iss, IssuerRegexp: ".*"}, "issuer and issuer_regexp exclude each other", "issuer"},
		{"bad-regexp", Policy{IdentityRegexp: "(", Issuer: iss}, `identity_regexp "(": error parsing regexp: missing closing )`, "identity_regexp"},
		// Anchored as ^(?:RE)$, "a)|(b" would compile and match any string
		// starting with a: it is refused, not being a regexp on its own.
		{"group-escape", Policy{IdentityRegexp: "a)|(b", Issuer: iss}, "unexpected )", "identity_regexp"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Validate()
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("Validate: %v; want %q", err, c.want)
			}
			var pe *PolicyError
			if err != nil && (!errors.As(err, &pe) || pe.Field != c.field) {
				t.Fatalf("Validate: %#v; want a *PolicyError at %q", err, c.field)
			}
		})
	}
	_, err := VerifyArtifact(context.Background(), &Artifact{Digest: "sha256:" + strings.Repeat("0", 64)}, Policy{})
	if !errors.Is(err, ErrPolicy) {
		t.Fatalf("VerifyArtifact with an empty policy: %v, want ErrPolicy", err)
	}
	_, err = VerifyArtifact(context.Background(), &Artifact{Digest: "sha256:" + strings.Repeat("0", 64), Signatures: []SignatureArtifact{{Format: FormatBundle}}}, Policy{Key: filepath.Join(t.TempDir(), "missing.pub")})
	if !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), "missing.pub") {
		t.Fatalf("VerifyArtifact with a missing key: %v, want ErrPolicy naming the key", err)
	}
}

const (
	testIdentity = "https://github.com/acme/plug/.github/workflows/release.yml@refs/tags/v1.0.0"
	testIssuer   = "https://token.actions.githubusercontent.com"
)

// TestKeyless: a keyless cosign-style bundle (a DSSE in-toto statement
// naming the manifest digest, a Fulcio certificate, a Rekor entry with
// inclusion proof and SET, an RFC 3161 timestamp) from sigstore-go's
// VirtualSigstore, checked against its trust material written as a
// trusted_root JSON file.
func TestKeyless(t *testing.T) {
	vs := newVirtualSigstore(t)
	trusted := trustedRootFile(t, vs, false)
	digest := testDigest("manifest")
	sig := SignatureArtifact{Format: FormatBundle, Digest: testDigest("signature manifest"), Payload: keylessBundle(t, vs, testIdentity, digest, cosignSignPredicate)}
	artifact := func(d string, s SignatureArtifact) *Artifact {
		return &Artifact{Ref: Ref{Registry: "127.0.0.1:5000", Repository: "plugins/spin", Tag: "v1"}, Digest: d, Signatures: []SignatureArtifact{s}}
	}
	policy := Policy{Identity: testIdentity, Issuer: testIssuer, TrustedRoot: trusted}

	t.Run("identity", func(t *testing.T) {
		got, err := VerifyArtifact(context.Background(), artifact(digest, sig), policy)
		if err != nil {
			t.Fatal(err)
		}
		want := Signer{Format: FormatBundle, Identity: testIdentity, Issuer: testIssuer, SignatureDigest: sig.Digest}
		if *got != want {
			t.Fatalf("signer %+v, want %+v", *got, want)
		}
	})
	t.Run("identity-regexp", func(t *testing.T) {
		// Anchored by morph: a regexp matches the whole identity or issuer.
		p := Policy{IdentityRegexp: `https://github\.com/acme/plug/.*`, IssuerRegexp: `https://token\.actions\..*`, TrustedRoot: trusted}
		if _, err := VerifyArtifact(context.Background(), artifact(digest, sig), p); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("wrong-identity", func(t *testing.T) {
		p := Policy{IdentityRegexp: `^https://github\.com/other/`, Issuer: testIssuer, TrustedRoot: trusted}
		_, err := VerifyArtifact(context.Background(), artifact(digest, sig), p)
		wantRefusal(t, err, ErrIdentity, digest, "github.com/acme/plug")
	})
	t.Run("wrong-issuer", func(t *testing.T) {
		p := Policy{Identity: testIdentity, Issuer: "https://accounts.google.com", TrustedRoot: trusted}
		_, err := VerifyArtifact(context.Background(), artifact(digest, sig), p)
		wantRefusal(t, err, ErrIdentity, digest)
	})
	t.Run("other-root", func(t *testing.T) {
		p := policy
		p.TrustedRoot = trustedRootFile(t, newVirtualSigstore(t), false)
		_, err := VerifyArtifact(context.Background(), artifact(digest, sig), p)
		wantRefusal(t, err, ErrBadSignature, digest)
	})
	t.Run("trusted-material", func(t *testing.T) {
		// Trusted overrides TrustedRoot (here a file of another root).
		p := policy
		p.TrustedRoot = trustedRootFile(t, newVirtualSigstore(t), false)
		tr, err := root.NewTrustedRootFromPath(trusted)
		if err != nil {
			t.Fatal(err)
		}
		p.Trusted = tr
		if _, err := VerifyArtifact(context.Background(), artifact(digest, sig), p); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("other-digest", func(t *testing.T) {
		other := testDigest("another manifest")
		_, err := VerifyArtifact(context.Background(), artifact(other, sig), policy)
		wantRefusal(t, err, ErrBadSignature, other)
	})
	t.Run("attestation", func(t *testing.T) {
		// Signed by the right identity for the right digest, but an
		// attestation (SLSA provenance), not a signature.
		att := sig
		att.Payload = keylessBundle(t, vs, testIdentity, digest, "https://slsa.dev/provenance/v1")
		_, err := VerifyArtifact(context.Background(), artifact(digest, att), policy)
		wantRefusal(t, err, ErrBadSignature, "attestation")
	})
	t.Run("sct-required", func(t *testing.T) {
		// A root that lists CT logs makes SCTs required; VirtualSigstore's
		// certificates carry none.
		p := policy
		p.TrustedRoot = trustedRootFile(t, vs, true)
		_, err := VerifyArtifact(context.Background(), artifact(digest, sig), p)
		wantRefusal(t, err, ErrBadSignature, "certificate timestamp")
	})
	t.Run("key-policy", func(t *testing.T) {
		// A certificate-signed bundle does not satisfy a key policy.
		dir := t.TempDir()
		pub := filepath.Join(dir, "cosign.pub")
		writePublicKey(t, pub)
		_, err := VerifyArtifact(context.Background(), artifact(digest, sig), Policy{Key: pub})
		wantRefusal(t, err, ErrBadSignature, digest)
	})
	t.Run("no-trusted-root", func(t *testing.T) {
		p := Policy{Identity: testIdentity, Issuer: testIssuer}
		_, err := VerifyArtifact(context.Background(), artifact(digest, sig), p)
		wantRefusal(t, err, ErrPolicy, "trusted_root")
	})
	t.Run("most-specific", func(t *testing.T) {
		// One signature that is no bundle at all, one by another identity:
		// the refusal is the identity's, naming both.
		junk := SignatureArtifact{Format: FormatBundle, Digest: testDigest("junk"), Payload: []byte("{}")}
		a := artifact(digest, junk)
		a.Signatures = append(a.Signatures, sig)
		p := Policy{Identity: "https://github.com/acme/plug/.github/workflows/other.yml@refs/tags/v1.0.0", Issuer: testIssuer, TrustedRoot: trusted}
		_, err := VerifyArtifact(context.Background(), a, p)
		wantRefusal(t, err, ErrIdentity, junk.Digest, sig.Digest, "not a Sigstore bundle")
	})
	t.Run("escaped", func(t *testing.T) {
		// The signer's identity is the registry's text: a terminal escape
		// in it reaches the error escaped.
		evil := "https://github.com/acme/plug\x1b[2J"
		s := sig
		s.Payload = keylessBundle(t, vs, evil, digest, cosignSignPredicate)
		_, err := VerifyArtifact(context.Background(), artifact(digest, s), policy)
		wantRefusal(t, err, ErrIdentity)
		if strings.Contains(err.Error(), "\x1b") {
			t.Fatalf("error carries a raw escape: %q", err)
		}
	})
	t.Run("client", func(t *testing.T) {
		// Client.Verify keeps the public root's TUF cache beside the blobs;
		// an offline client does not refresh it.
		dir := t.TempDir()
		c, err := NewClient(Options{CacheDir: dir, Offline: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Verify(context.Background(), artifact(digest, sig), policy); err != nil {
			t.Fatal(err)
		}
		_, err = c.Verify(context.Background(), artifact(digest, sig), Policy{Identity: testIdentity, Issuer: testIssuer})
		wantRefusal(t, err, ErrPolicy, filepath.Join(dir, "tuf"), "trusted_root")
		if err := c.RefreshPublicRoot(context.Background()); !errors.Is(err, ErrNotCached) {
			t.Fatalf("RefreshPublicRoot offline: %v, want ErrNotCached", err)
		}
	})
	t.Run("public-root-not-cached", func(t *testing.T) {
		// The public root comes from the TUF cache only: an empty cache is
		// refused at once, by the fetcher that never touches the network.
		p := Policy{Identity: testIdentity, Issuer: testIssuer, TUFCacheDir: t.TempDir()}
		_, err := VerifyArtifact(context.Background(), artifact(digest, sig), p)
		wantRefusal(t, err, ErrPolicy, "trusted_root", "offline: not fetching")
	})
}

// TestKeylessPublicGood: a real public-good Sigstore bundle (sigstore-go's
// examples/bundle-provenance.json, an npm provenance attestation of
// sigstore-js made on GitHub Actions) against the public-good trusted root
// of the same directory, offline: Fulcio chain, SCT, Rekor SET and
// inclusion proof, integrated time, identity. It is an attestation of an
// npm package, not a signature of a manifest, so it goes through the
// verifier VerifyArtifact builds rather than through VerifyArtifact.
func TestKeylessPublicGood(t *testing.T) {
	dir := sigstoreGoExamples(t)
	const id = "https://github.com/sigstore/sigstore-js/.github/workflows/release.yml@refs/heads/main"
	b, err := bundle.LoadJSONFromPath(filepath.Join(dir, "bundle-provenance.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The npm package's digest, as the (separately published) statement names it.
	var stmt struct {
		Subject []struct{ Digest map[string]string }
	}
	raw, err := os.ReadFile(filepath.Join(dir, "statement-provenance-sigstorejs1.3.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &stmt); err != nil || len(stmt.Subject) != 1 {
		t.Fatalf("statement: %v (%d subjects)", err, len(stmt.Subject))
	}
	pkg, err := hex.DecodeString(stmt.Subject[0].Digest["sha512"])
	if err != nil || len(pkg) != 64 {
		t.Fatalf("statement's sha512 subject: %v", err)
	}
	verifier := func(p Policy) *sigVerifier {
		t.Helper()
		p.TrustedRoot = filepath.Join(dir, "trusted-root-public-good.json")
		v, err := newSigVerifier(p)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := verifier(Policy{Identity: id, Issuer: testIssuer})
	res, err := v.verifyEntity(b, verify.WithArtifactDigest("sha512", pkg))
	if err != nil {
		t.Fatal(err)
	}
	if got := v.signer(res); got.Identity != id || got.Issuer != testIssuer {
		t.Fatalf("signer %+v", got)
	}
	if len(res.VerifiedTimestamps) == 0 || res.VerifiedTimestamps[0].Timestamp.Year() != 2023 {
		t.Fatalf("verified timestamps %+v, want the Rekor entry's (2023)", res.VerifiedTimestamps)
	}
	other := append([]byte(nil), pkg...)
	other[0] ^= 1
	if _, err := v.verifyEntity(b, verify.WithArtifactDigest("sha512", other)); err == nil {
		t.Fatal("another digest verified")
	}
	_, err = verifier(Policy{Identity: id, IssuerRegexp: `^https://accounts\.google\.com$`}).verifyEntity(b, verify.WithArtifactDigest("sha512", pkg))
	if !(sigFailures{{err: err}}).identity() {
		t.Fatalf("another issuer: %v, want an identity mismatch", err)
	}
}

// wantRefusal checks that err is an *Error of kind and that its text names each of names.
func wantRefusal(t *testing.T, err error, kind error, names ...string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, kind) {
		t.Fatalf("error %v, want an *Error of kind %q", err, kind)
	}
	t.Logf("refused: %v", err)
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not name %q", err, n)
		}
	}
}

// testDigest is "sha256:" and the hex SHA-256 of s.
func testDigest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// keyFingerprint is the fingerprint of a cosign.pub, computed here with
// ssh-keygen's convention independently of the code under test.
func keyFingerprint(t *testing.T, pub string) string {
	t.Helper()
	raw, err := os.ReadFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		t.Fatalf("%s: no PEM block", pub)
	}
	sum := sha256.Sum256(block.Bytes)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// writePublicKey writes a fresh VirtualSigstore leaf's public key as a
// cosign.pub (PEM).
func writePublicKey(t *testing.T, path string) {
	t.Helper()
	cert, _, err := newVirtualSigstore(t).GenerateLeafCert(testIdentity, testIssuer)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(cert.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
}

func newVirtualSigstore(t testing.TB) *ca.VirtualSigstore {
	t.Helper()
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// trustedRootFile writes vs's trust material as a trusted_root JSON file,
// as an operator would configure it; withCT lists its CT log too.
func trustedRootFile(t testing.TB, vs *ca.VirtualSigstore, withCT bool) string {
	t.Helper()
	// VirtualSigstore's logs carry ID = []byte(hex of the key id); a real
	// trusted root carries the raw key id, which the JSON round trip
	// assumes: decode it, or the file names no usable log.
	fix := func(m map[string]*root.TransparencyLog) map[string]*root.TransparencyLog {
		for k, l := range m {
			raw, err := hex.DecodeString(k)
			if err != nil {
				t.Fatal(err)
			}
			l.ID = raw
		}
		return m
	}
	ct := map[string]*root.TransparencyLog{}
	if withCT {
		ct = fix(vs.CTLogs())
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, vs.FulcioCertificateAuthorities(), ct, vs.TimestampingAuthorities(), fix(vs.RekorLogs()))
	if err != nil {
		t.Fatal(err)
	}
	js, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "trusted_root.json")
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// keylessBundle is what cosign v3 attaches when signing keyless: a v0.3
// bundle whose DSSE envelope holds an in-toto statement naming digest,
// here signed by vs for identity.
func keylessBundle(t testing.TB, vs *ca.VirtualSigstore, identity, digest, predicate string) []byte {
	t.Helper()
	stmt := fmt.Sprintf(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"127.0.0.1:5000/plugins/spin","digest":{"sha256":%q}}],"predicateType":%q,"predicate":{}}`,
		strings.TrimPrefix(digest, "sha256:"), predicate)
	ent, err := vs.AttestAtTime(identity, testIssuer, []byte(stmt), time.Now().Add(5*time.Minute), true)
	if err != nil {
		t.Fatal(err)
	}
	vc, err := ent.VerificationContent()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ent.SignatureContent()
	if err != nil {
		t.Fatal(err)
	}
	env := sc.EnvelopeContent().RawEnvelope()
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	tle := rekorEntry(t, vs, ent, "dsse")
	ts, err := ent.Timestamps()
	if err != nil {
		t.Fatal(err)
	}
	pb := &protobundle.Bundle{
		MediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content:                   &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: vc.Certificate().Raw}},
			TlogEntries:               []*protorekor.TransparencyLogEntry{tle},
			TimestampVerificationData: &protobundle.TimestampVerificationData{Rfc3161Timestamps: []*protocommon.RFC3161SignedTimestamp{{SignedTimestamp: ts[0]}}},
		},
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{
			Payload:     payload,
			PayloadType: env.PayloadType,
			Signatures:  []*protodsse.Signature{{Sig: sc.Signature()}},
		}},
	}
	b, err := bundle.NewBundle(pb)
	if err != nil {
		t.Fatal(err)
	}
	js, err := b.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// rekorEntry is ent's Rekor v1 entry (of kind, version 0.0.1) as a bundle
// or cosign's annotation carries it, with its SET, which VirtualSigstore
// makes but does not expose: signed again here by its log key.
func rekorEntry(t testing.TB, vs *ca.VirtualSigstore, ent *ca.TestEntity, kind string) *protorekor.TransparencyLogEntry {
	t.Helper()
	entries, err := ent.TlogEntries()
	if err != nil || len(entries) != 1 {
		t.Fatalf("tlog entries: %v (%d)", err, len(entries))
	}
	tle := entries[0].TransparencyLogEntry()
	set, err := vs.RekorSignPayload(tlog.RekorPayload{
		Body:           base64.StdEncoding.EncodeToString(tle.CanonicalizedBody),
		IntegratedTime: tle.IntegratedTime,
		LogIndex:       tle.LogIndex,
		LogID:          hex.EncodeToString(tle.LogId.KeyId),
	})
	if err != nil {
		t.Fatal(err)
	}
	tle.KindVersion = &protorekor.KindVersion{Kind: kind, Version: "0.0.1"}
	tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: set}
	return tle
}

// sigstoreGoExamples is sigstore-go's examples directory in the module
// cache (the module is a dependency, so it is there).
func sigstoreGoExamples(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-json", "github.com/sigstore/sigstore-go").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/sigstore/sigstore-go: %v", err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go list -m -json: %v, dir %q", err, m.Dir)
	}
	return filepath.Join(m.Dir, "examples")
}

// BenchmarkVerifyKeyless is the cost of one keyless bundle verification
// from a trusted_root file (what every run pays per plugin): the root
// parsed, the chain, log entry, timestamp and identity checked.
func BenchmarkVerifyKeyless(b *testing.B) {
	vs := newVirtualSigstore(b)
	digest := testDigest("manifest")
	a := &Artifact{Ref: Ref{Registry: "127.0.0.1:5000", Repository: "plugins/spin", Digest: digest}, Digest: digest,
		Signatures: []SignatureArtifact{{Format: FormatBundle, Digest: testDigest("sig"), Payload: keylessBundle(b, vs, testIdentity, digest, cosignSignPredicate)}}}
	p := Policy{Identity: testIdentity, Issuer: testIssuer, TrustedRoot: trustedRootFile(b, vs, false)}
	for b.Loop() {
		if _, err := VerifyArtifact(context.Background(), a, p); err != nil {
			b.Fatal(err)
		}
	}
}

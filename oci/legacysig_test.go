package oci

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// TestLegacyKeyless: a keyless legacy .sig layer (what cosign v2 pushes
// from GitHub Actions, hyper-mcp's published plugins) composed from a
// VirtualSigstore signature: the simple-signing payload signed by a Fulcio
// leaf, the certificate and chain annotations, and the Rekor bundle
// annotation (hashedrekord entry and SET) in cosign's field names. It
// proves the adapter to sigstore-go, not cosign v2's exact bytes (none can
// be made offline).
func TestLegacyKeyless(t *testing.T) {
	vs := newVirtualSigstore(t)
	trusted := trustedRootFile(t, vs, false)
	digest := testDigest("manifest")
	sig := legacyKeylessSig(t, vs, testIdentity, digest)
	policy := Policy{Identity: testIdentity, Issuer: testIssuer, TrustedRoot: trusted}
	artifact := func(d string, s SignatureArtifact) *Artifact {
		return &Artifact{Ref: Ref{Registry: "127.0.0.1:5000", Repository: "plugins/spin", Tag: "v1"}, Digest: d, Signatures: []SignatureArtifact{s}}
	}
	edited := func(key, value string) SignatureArtifact {
		s := sig
		s.Annotations = map[string]string{}
		for k, v := range sig.Annotations {
			s.Annotations[k] = v
		}
		if value == "" {
			delete(s.Annotations, key)
		} else {
			s.Annotations[key] = value
		}
		return s
	}

	t.Run("identity", func(t *testing.T) {
		got, err := VerifyArtifact(context.Background(), artifact(digest, sig), policy)
		if err != nil {
			t.Fatal(err)
		}
		want := Signer{Format: FormatSigTag, Identity: testIdentity, Issuer: testIssuer, SignatureDigest: sig.Digest}
		if *got != want {
			t.Fatalf("signer %+v, want %+v", *got, want)
		}
	})
	t.Run("wrong-identity", func(t *testing.T) {
		p := policy
		p.Identity = "https://github.com/acme/plug/.github/workflows/release.yml@refs/tags/v2.0.0"
		_, err := VerifyArtifact(context.Background(), artifact(digest, sig), p)
		wantRefusal(t, err, ErrIdentity, "v1.0.0")
	})
	t.Run("other-root", func(t *testing.T) {
		p := policy
		p.TrustedRoot = trustedRootFile(t, newVirtualSigstore(t), false)
		_, err := VerifyArtifact(context.Background(), artifact(digest, sig), p)
		wantRefusal(t, err, ErrBadSignature, digest)
	})
	t.Run("other-digest", func(t *testing.T) {
		other := testDigest("another manifest")
		_, err := VerifyArtifact(context.Background(), artifact(other, sig), policy)
		wantRefusal(t, err, ErrBadSignature, "signature is for manifest")
	})
	t.Run("payload-edited", func(t *testing.T) {
		s := sig
		s.Payload = []byte(strings.Replace(string(sig.Payload), digest, testDigest("another manifest"), 1))
		_, err := VerifyArtifact(context.Background(), artifact(testDigest("another manifest"), s), policy)
		wantRefusal(t, err, ErrBadSignature)
	})
	t.Run("other-certificate", func(t *testing.T) {
		// A leaf of the same CA and identity, but not the key that signed.
		leaf, _, err := vs.GenerateLeafCert(testIdentity, testIssuer)
		if err != nil {
			t.Fatal(err)
		}
		_, err = VerifyArtifact(context.Background(), artifact(digest, edited(annCertificate, certPEM(t, leaf))), policy)
		wantRefusal(t, err, ErrBadSignature)
	})
	t.Run("no-rekor-bundle", func(t *testing.T) {
		_, err := VerifyArtifact(context.Background(), artifact(digest, edited(annBundle, "")), policy)
		wantRefusal(t, err, ErrBadSignature, annBundle)
	})
	t.Run("no-certificate", func(t *testing.T) {
		_, err := VerifyArtifact(context.Background(), artifact(digest, edited(annCertificate, "")), policy)
		wantRefusal(t, err, ErrBadSignature, annCertificate)
	})
	t.Run("key-policy", func(t *testing.T) {
		pub := filepath.Join(t.TempDir(), "cosign.pub")
		writePublicKey(t, pub)
		_, err := VerifyArtifact(context.Background(), artifact(digest, sig), Policy{Key: pub})
		wantRefusal(t, err, ErrBadSignature, digest)
	})
}

// legacyKeylessSig is a .sig signature artifact for digest as cosign v2
// makes it keyless, signed by vs for identity.
func legacyKeylessSig(t *testing.T, vs *ca.VirtualSigstore, identity, digest string) SignatureArtifact {
	t.Helper()
	payload := fmt.Sprintf(`{"critical":{"identity":{"docker-reference":"127.0.0.1:5000/plugins/spin"},"image":{"docker-manifest-digest":%q},"type":"cosign container image signature"},"optional":null}`, digest)
	ent, err := vs.Sign(identity, testIssuer, []byte(payload))
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
	tle := rekorEntry(t, vs, ent, "hashedrekord")
	// cosign's RekorBundle: SignedEntryTimestamp ([]byte, so base64) and
	// Payload {body, integratedTime, logIndex, logID}.
	rekorBundle, err := json.Marshal(map[string]any{
		"SignedEntryTimestamp": tle.InclusionPromise.SignedEntryTimestamp,
		"Payload": map[string]any{
			"body":           base64.StdEncoding.EncodeToString(tle.CanonicalizedBody),
			"integratedTime": tle.IntegratedTime,
			"logIndex":       tle.LogIndex,
			"logID":          hex.EncodeToString(tle.LogId.KeyId),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	fulcio := vs.FulcioCertificateAuthorities()[0].(*root.FulcioCertificateAuthority)
	chain := ""
	for _, c := range append(fulcio.Intermediates, fulcio.Root) {
		chain += certPEM(t, c)
	}
	return SignatureArtifact{
		Format:  FormatSigTag,
		Digest:  testDigest("sig manifest"),
		Payload: []byte(payload),
		Annotations: map[string]string{
			annSignature:                base64.StdEncoding.EncodeToString(sc.Signature()),
			annCertificate:              certPEM(t, vc.Certificate()),
			"dev.sigstore.cosign/chain": chain,
			annBundle:                   string(rekorBundle),
		},
	}
}

func certPEM(t *testing.T, c *x509.Certificate) string {
	t.Helper()
	b, err := cryptoutils.MarshalCertificateToPEM(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

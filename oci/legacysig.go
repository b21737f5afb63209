package oci

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/morphhost/morph/internal/safetext"
)

// The annotations of a legacy .sig layer, as cosign writes them
// (cosign's pkg/oci/static).
const (
	annSignature   = "dev.cosignproject.cosign/signature"
	annCertificate = "dev.sigstore.cosign/certificate"
	annBundle      = "dev.sigstore.cosign/bundle"
)

// verifySigTag checks a legacy sha256-HEX.sig signature (cosign v2, and v3
// with --new-bundle-format=false). Its layer is a simple-signing payload
// whose signature is the layer's dev.cosignproject.cosign/signature
// annotation (base64).
//
//   - key policy: the signature over the payload bytes with the key
//     (sigstore/sigstore's signature.LoadVerifier); any certificate or Rekor
//     bundle annotation is ignored, the key is the trust (cosign verify
//     --key --insecure-ignore-tlog checks the same).
//   - keyless policy: the layer is adapted to a sigstore-go SignedEntity
//     (legacyEntity) and sigstore-go verifies it as it does a bundle: the
//     leaf certificate (dev.sigstore.cosign/certificate) chains to a Fulcio
//     CA of the trusted root at the Rekor entry's integrated time, the Rekor
//     SignedEntryTimestamp (dev.sigstore.cosign/bundle) verifies with a log
//     key of the root, the log entry's signature, certificate and payload
//     hash match the layer's, SCTs when the root lists CT logs, the
//     signature verifies over the payload, and the certificate's identity
//     and issuer match the policy. The chain annotation
//     (dev.sigstore.cosign/chain) is not used: the intermediates come from
//     the trusted root, as for bundles.
//
// Then, both ways, the signed payload must be a cosign container image
// signature whose docker-manifest-digest is the manifest's digest. The
// payload's docker-reference (where it was pushed) is not compared:
// mirrors and re-tags keep the digest, which is what the signature binds.
func (v *sigVerifier) verifySigTag(s SignatureArtifact, manifestDigest string) (*Signer, error) {
	sig, err := base64.StdEncoding.DecodeString(s.Annotations[annSignature])
	if err != nil || len(sig) == 0 {
		return nil, fmt.Errorf("the signature layer has no base64 %s annotation", annSignature)
	}
	var signer *Signer
	if v.identity == nil {
		if err := v.key.VerifySignature(bytes.NewReader(sig), bytes.NewReader(s.Payload)); err != nil {
			return nil, err
		}
		signer = &Signer{KeyFingerprint: v.fingerprint}
	} else {
		e, err := newLegacyEntity(s, sig)
		if err != nil {
			return nil, err
		}
		res, err := v.verifyEntity(e, verify.WithArtifact(bytes.NewReader(s.Payload)))
		if err != nil {
			return nil, err
		}
		signer = v.signer(res)
	}
	var p payload.SimpleContainerImage
	if err := json.Unmarshal(s.Payload, &p); err != nil {
		return nil, fmt.Errorf("signed payload is not simple-signing JSON: %w", err)
	}
	if p.Critical.Type != payload.CosignSignatureType {
		return nil, fmt.Errorf("signed payload's type is %s, not %q", safetext.Quote(p.Critical.Type, 80), payload.CosignSignatureType)
	}
	if got := p.Critical.Image.DockerManifestDigest; got != manifestDigest {
		return nil, fmt.Errorf("signature is for manifest %s, not %s", safetext.Quote(got, 80), manifestDigest)
	}
	return signer, nil
}

// legacyEntity presents a keyless legacy .sig layer to sigstore-go as a
// SignedEntity: a message signature over the payload, the leaf certificate,
// and the Rekor entry rebuilt from the bundle annotation (with its
// SignedEntryTimestamp: an inclusion promise, no inclusion proof).
type legacyEntity struct {
	verify.BaseSignedEntity
	cert  *x509.Certificate
	sig   *bundle.MessageSignature
	entry *tlog.Entry
}

// rekorBundle is cosign's dev.sigstore.cosign/bundle annotation (its
// pkg/cosign/bundle.RekorBundle): the SET and what it signs.
type rekorBundle struct {
	SignedEntryTimestamp []byte
	Payload              tlog.RekorPayload
}

func newLegacyEntity(s SignatureArtifact, sig []byte) (*legacyEntity, error) {
	certPEM := s.Annotations[annCertificate]
	if certPEM == "" {
		return nil, fmt.Errorf("no %s annotation: the signature was made with a key, and the policy names a keyless identity", annCertificate)
	}
	certs, err := cryptoutils.UnmarshalCertificatesFromPEM([]byte(certPEM))
	if err != nil || len(certs) == 0 {
		return nil, fmt.Errorf("%s annotation is not a PEM certificate: %v", annCertificate, err)
	}
	raw := s.Annotations[annBundle]
	if raw == "" {
		return nil, fmt.Errorf("no %s annotation: a keyless signature needs its Rekor entry", annBundle)
	}
	var rb rekorBundle
	if err := json.Unmarshal([]byte(raw), &rb); err != nil {
		return nil, fmt.Errorf("%s annotation: %w", annBundle, err)
	}
	bodyB64, ok := rb.Payload.Body.(string)
	if !ok {
		return nil, fmt.Errorf("%s annotation: the entry body is not a string", annBundle)
	}
	body, err := base64.StdEncoding.DecodeString(bodyB64)
	if err != nil {
		return nil, fmt.Errorf("%s annotation: entry body: %w", annBundle, err)
	}
	logID, err := hex.DecodeString(rb.Payload.LogID)
	if err != nil {
		return nil, fmt.Errorf("%s annotation: logID: %w", annBundle, err)
	}
	// NewEntry (deprecated for NewTlogEntry's protobuf) builds exactly a
	// Rekor v1 entry with a SET from its parts, which is what cosign stored.
	//lint:ignore SA1019 NewEntry builds the Rekor v1 entry cosign stored
	entry, err := tlog.NewEntry(body, rb.Payload.IntegratedTime, rb.Payload.LogIndex, logID, rb.SignedEntryTimestamp, nil)
	if err != nil {
		return nil, fmt.Errorf("%s annotation: Rekor entry: %w", annBundle, err)
	}
	sum := sha256.Sum256(s.Payload)
	return &legacyEntity{
		cert:  certs[0],
		sig:   bundle.NewMessageSignature(sum[:], "SHA2_256", sig),
		entry: entry,
	}, nil
}

func (e *legacyEntity) HasInclusionPromise() bool { return e.entry.HasInclusionPromise() }

func (e *legacyEntity) VerificationContent() (verify.VerificationContent, error) {
	return bundle.NewCertificate(e.cert), nil
}

func (e *legacyEntity) SignatureContent() (verify.SignatureContent, error) { return e.sig, nil }

func (e *legacyEntity) TlogEntries() ([]*tlog.Entry, error) { return []*tlog.Entry{e.entry}, nil }

// Timestamps: cosign's legacy format may carry an RFC 3161 timestamp
// annotation; morph relies on the Rekor integrated time instead.
func (e *legacyEntity) Timestamps() ([][]byte, error) { return nil, nil }

// Version: a legacy signature is what bundle v0.1 carried (a Rekor entry
// with its SET, no inclusion proof).
func (e *legacyEntity) Version() (string, error) { return "v0.1", nil }

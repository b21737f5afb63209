package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/verify"
)

// VerifyBlob checks a Sigstore bundle made for a local module file
// (`cosign sign-blob --bundle FILE.sigstore.json`) against p and the
// module's bytes, offline, with the same verifier as VerifyArtifact: the
// bundle's message signature (or in-toto statement) must sign the module's
// sha256, with the policy's key, or keyless by its identity and issuer
// under its trusted root. name is how errors name the module (its path).
// A failure is an *Error of kind ErrBadSignature, ErrIdentity or ErrPolicy
// naming the module's digest (sha256:HEX of its bytes).
func VerifyBlob(ctx context.Context, name string, module, bundleJSON []byte, p Policy) (*Signer, error) {
	sum := sha256.Sum256(module)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	fail := func(kind error, err error) error { return &Error{Ref: name, Digest: digest, Kind: kind, Err: err} }
	if err := p.Validate(); err != nil {
		return nil, fail(ErrPolicy, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	v, err := newSigVerifier(p)
	if err != nil {
		return nil, fail(ErrPolicy, err)
	}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(bundleJSON); err != nil {
		return nil, fail(ErrBadSignature, fmt.Errorf("not a Sigstore bundle (cosign sign-blob --bundle): %w", err))
	}
	res, err := v.verifyEntity(&b, verify.WithArtifactDigest("sha256", sum[:]))
	if err != nil {
		kind := ErrBadSignature
		var id *verify.ErrNoMatchingCertificateIdentity
		if errors.As(err, &id) {
			kind = ErrIdentity
		}
		return nil, fail(kind, fmt.Errorf("the bundle does not verify for this module: %w; check [plugins.verify] key or identity, and that the bundle was made for this file", err))
	}
	s := v.signer(res)
	s.Format = FormatBundle
	return s, nil
}

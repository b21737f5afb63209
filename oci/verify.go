package oci

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tuf"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/morphhost/morph/internal/safetext"
)

// cosignSignPredicate is the in-toto predicate type of `cosign sign` (v3,
// bundle format). Attestations (SLSA provenance, SBOMs, scans) are also
// referrers of the manifest and also name its digest; they are not
// signatures of it, so a bundle with another predicate does not count.
const cosignSignPredicate = "https://sigstore.dev/cosign/sign/v1"

// Policy says who must have signed a plugin: a public key, or (keyless) a
// certificate identity and issuer vouched for by a Sigstore trusted root.
// It is [plugins.verify] of morph.toml.
type Policy struct {
	// Key is the path of a cosign public key (cosign.pub, PEM). Exclusive
	// with the identity fields.
	Key string
	// Identity is the exact certificate identity (SAN) of a keyless signer,
	// e.g. https://github.com/acme/plug/.github/workflows/release.yml@refs/tags/v1.0.0;
	// IdentityRegexp matches it instead. One of the two for keyless.
	//
	// The regexps are Go's (RE2), as cosign's --certificate-identity-regexp
	// and --certificate-oidc-issuer-regexp, but they match the WHOLE
	// identity or issuer: morph anchors them as ^(?:RE)$. Cosign (v3.1.3,
	// pkg/cosign/verify.go) and sigstore-go (verify/certificate_identity.go)
	// call regexp.MatchString, which finds RE anywhere, so that
	// `github\.com/acme/plug` also accepts a workflow of any other owner
	// whose branch is named github.com/acme/plug. A regexp written for
	// cosign with ^ and $ means the same here; one written without them is
	// stricter here.
	Identity, IdentityRegexp string
	// Issuer is the exact OIDC issuer of a keyless signer, e.g.
	// https://token.actions.githubusercontent.com; IssuerRegexp matches it
	// instead (anchored, as IdentityRegexp). One of the two for keyless.
	Issuer, IssuerRegexp string
	// TrustedRoot is the path of a Sigstore trusted_root JSON (the CAs,
	// transparency logs and timestamp authorities keyless signatures are
	// checked against). Keyless only.
	TrustedRoot string
	// Trusted is trust material given directly (embedders, tests); it
	// overrides TrustedRoot.
	Trusted root.TrustedMaterial
	// TUFCacheDir is where the public-good Sigstore root's TUF metadata is
	// cached (Client.Verify: the oci cache dir's tuf/). Keyless with neither
	// TrustedRoot nor Trusted uses that root, read from this cache only:
	// verification never goes to the network. Client.RefreshPublicRoot
	// fills the cache.
	TUFCacheDir string
}

// keyless reports whether the policy names a signer identity rather than a key.
func (p Policy) keyless() bool {
	return p.Identity != "" || p.IdentityRegexp != "" || p.Issuer != "" || p.IssuerRegexp != ""
}

// Validate checks the policy's shape without reading any file: a key, or an
// identity (exact or regexp) with an issuer (exact or regexp); never both.
// Its refusal is a *PolicyError naming the field at fault, in the words of
// [plugins.verify], which config reports at that key.
func (p Policy) Validate() error {
	bad := func(field, format string, a ...any) error {
		return &PolicyError{Field: field, Err: fmt.Errorf(format, a...)}
	}
	switch {
	case p.Key == "" && !p.keyless():
		return bad("", `names no signer: set key = "cosign.pub", or identity (or identity_regexp) and issuer (or issuer_regexp)`)
	case p.Key != "" && p.keyless():
		return bad("key", "key and a keyless identity/issuer exclude each other: keep key for a key-signed plugin, identity and issuer for a keyless one")
	case p.Key != "":
		return nil
	case p.Identity != "" && p.IdentityRegexp != "":
		return bad("identity", "identity and identity_regexp exclude each other: keep one")
	case p.Issuer != "" && p.IssuerRegexp != "":
		return bad("issuer", "issuer and issuer_regexp exclude each other: keep one")
	case p.Identity == "" && p.IdentityRegexp == "":
		return bad("", "a keyless signature needs identity (or identity_regexp), the signer the certificate must name")
	case p.Issuer == "" && p.IssuerRegexp == "":
		return bad("", "a keyless signature needs issuer (or issuer_regexp), the OIDC issuer, such as https://token.actions.githubusercontent.com")
	}
	// Compiled alone: wrapped in ^(?:…)$ only once it is a whole regexp,
	// so that "a)|(b" cannot undo the anchors.
	for _, f := range []struct{ name, re string }{{"identity_regexp", p.IdentityRegexp}, {"issuer_regexp", p.IssuerRegexp}} {
		if _, err := regexp.Compile(f.re); err != nil {
			return bad(f.name, "%s %s: %w", f.name, safetext.Quote(f.re, 200), err)
		}
	}
	return nil
}

// PolicyError is Validate's refusal.
type PolicyError struct {
	// Field is the [plugins.verify] key at fault (key, identity, issuer,
	// identity_regexp, issuer_regexp), "" for the table as a whole.
	Field string
	Err   error
}

func (e *PolicyError) Error() string { return e.Err.Error() }

// Unwrap gives the detail (a *syntax.Error for a bad regexp).
func (e *PolicyError) Unwrap() error { return e.Err }

// Signer is who signed a verified manifest, as recorded in morph.lock.
type Signer struct {
	Format          string // FormatBundle or FormatSigTag
	KeyFingerprint  string // key-signed: "SHA256:" and the unpadded base64 SHA-256 of the key's PKIX DER
	Identity        string // keyless: the certificate's identity (SAN)
	Issuer          string // keyless: the certificate's OIDC issuer
	SignatureDigest string // the signature manifest that verified
}

// VerifyArtifact checks a's signatures against p and the manifest digest
// a.Digest, offline, with sigstore's libraries; the first signature that
// verifies is returned. No signature is ErrNotSigned; when none verifies,
// the error is ErrIdentity if one of them verified but was made by another
// identity or issuer, else ErrBadSignature, and it names what failed for
// each. A policy that cannot be applied is ErrPolicy.
//
// What is checked, per format and policy:
//   - bundle, key: the DSSE (or message) signature with the key, and that
//     the signed in-toto statement's subject is a.Digest with cosign's sign
//     predicate; no transparency log or timestamp is required (cosign
//     --tlog-upload=false makes none), the key is the trust.
//   - bundle, keyless: the certificate chains to a Fulcio CA of the trusted
//     root at the time of a verified transparency-log entry or signed
//     timestamp (one required), the log entry matches the signature, SCTs
//     when the root lists CT logs, then the statement as above and the
//     certificate's identity and issuer against the policy.
//   - sig-tag: the simple-signing payload's signature with the key, or
//     keyless the same checks as a bundle's (the Rekor entry from the
//     layer's annotations), and its docker-manifest-digest must be
//     a.Digest (legacysig.go says exactly what).
func VerifyArtifact(ctx context.Context, a *Artifact, p Policy) (*Signer, error) {
	fail := func(kind error, err error) error {
		return &Error{Ref: a.Ref.String(), Digest: a.Digest, Kind: kind, Err: err}
	}
	if err := p.Validate(); err != nil {
		return nil, fail(ErrPolicy, fmt.Errorf("verify policy: %w", err))
	}
	if len(a.Signatures) == 0 && len(a.unusable) == 0 {
		return nil, fail(ErrNotSigned, errors.New("no cosign signature (a Sigstore bundle referrer or a sha256-HEX.sig tag) was found for the manifest; sign it with cosign, or exempt the plugin in [verify] unsigned"))
	}
	digest, err := digestBytes(a.Digest)
	if err != nil {
		return nil, fail(ErrBadSignature, err)
	}
	v, err := newSigVerifier(p)
	if err != nil {
		return nil, fail(ErrPolicy, err)
	}
	failures := slices.Clone(sigFailures(a.unusable))
	for _, s := range a.Signatures {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var signer *Signer
		switch s.Format {
		case FormatBundle:
			signer, err = v.verifyBundle(s, digest)
		case FormatSigTag:
			signer, err = v.verifySigTag(s, a.Digest)
		default:
			err = fmt.Errorf("unknown signature format %s", safetext.Quote(s.Format, 40))
		}
		if err == nil {
			signer.Format, signer.SignatureDigest = s.Format, s.Digest
			return signer, nil
		}
		failures = append(failures, sigFailure{digest: s.Digest, format: s.Format, err: err})
	}
	if failures.identity() {
		return nil, fail(ErrIdentity, fmt.Errorf("%w; if this signer is intended, change identity/issuer in [plugins.verify]", failures))
	}
	return nil, fail(ErrBadSignature, fmt.Errorf("%w; check that [plugins.verify] names the signer's key or trusted root, and that this digest is the manifest that was signed", failures))
}

// sigVerifier is a Policy made ready: the key loaded, or the trusted root
// and identity built, once for all of an artifact's signatures.
type sigVerifier struct {
	key         signature.Verifier // key policy
	fingerprint string
	bundleV     *verify.Verifier            // key: no log; keyless: log, timestamps, SCTs
	identity    *verify.CertificateIdentity // keyless policy
}

func newSigVerifier(p Policy) (*sigVerifier, error) {
	if p.Key != "" {
		return newKeyVerifier(p.Key)
	}
	tm, err := trustedMaterial(p)
	if err != nil {
		return nil, err
	}
	id, err := verify.NewShortCertificateIdentity(p.Issuer, anchored(p.IssuerRegexp), p.Identity, anchored(p.IdentityRegexp))
	if err != nil {
		return nil, fmt.Errorf("verify policy identity: %w", err)
	}
	opts := []verify.VerifierOption{verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1)}
	// SCTs are checked whenever the root lists the CT logs to check them
	// against (the public-good root does); a private Fulcio that embeds none
	// ships a root without CT logs.
	if len(tm.CTLogs()) > 0 {
		opts = append(opts, verify.WithSignedCertificateTimestamps(1))
	}
	bv, err := verify.NewVerifier(tm, opts...)
	if err != nil {
		return nil, fmt.Errorf("trusted root: %w", err)
	}
	return &sigVerifier{bundleV: bv, identity: &id}, nil
}

// anchored makes re match a whole string (see Policy.IdentityRegexp); ""
// stays "" (no regexp).
func anchored(re string) string {
	if re == "" {
		return ""
	}
	return "^(?:" + re + ")$"
}

func newKeyVerifier(path string) (*sigVerifier, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("verify policy key: %w", err)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pem)
	if err != nil {
		return nil, fmt.Errorf("verify policy key %q: not a PEM public key (cosign.pub from cosign generate-key-pair): %w", path, err)
	}
	kv, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("verify policy key %q: %w", path, err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("verify policy key %q: %w", path, err)
	}
	sum := sha256.Sum256(der)
	// The bundle names its key only by a hint; the policy's key is the one
	// key trusted, whatever the hint, and at any time.
	tm := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
		return root.NewExpiringKey(kv, time.Time{}, time.Time{}), nil
	})
	bv, err := verify.NewVerifier(tm, verify.WithNoObserverTimestamps())
	if err != nil {
		return nil, fmt.Errorf("verify policy key %q: %w", path, err)
	}
	return &sigVerifier{key: kv, fingerprint: "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:]), bundleV: bv}, nil
}

// trustedMaterial is the keyless trust: Trusted, else the trusted_root file,
// else the public-good root from the TUF cache.
func trustedMaterial(p Policy) (root.TrustedMaterial, error) {
	switch {
	case p.Trusted != nil:
		return p.Trusted, nil
	case p.TrustedRoot != "":
		tr, err := root.NewTrustedRootFromPath(p.TrustedRoot)
		if err != nil {
			return nil, fmt.Errorf("trusted_root %q: %w", p.TrustedRoot, err)
		}
		return tr, nil
	case p.TUFCacheDir != "":
		tr, err := cachedPublicRoot(p.TUFCacheDir)
		if err != nil {
			return nil, fmt.Errorf("keyless verification uses the public Sigstore root, and it is not cached (or its TUF metadata expired) under %s: run `morph plugin lock` online to refresh it, or set trusted_root = \"trusted_root.json\": %w", p.TUFCacheDir, err)
		}
		return tr, nil
	}
	return nil, errors.New("keyless verification needs a trusted root: set trusted_root = \"trusted_root.json\" (a Sigstore trusted root), or let the oci cache hold the public one")
}

// publicRootOptions are the TUF client options of the public-good
// Sigstore root (tuf-repo-cdn.sigstore.dev, anchored in the root.json
// embedded in sigstore-go) with its cache in dir.
func publicRootOptions(dir string) tuf.Options {
	return *tuf.DefaultOptions().WithCachePath(dir)
}

// noNetwork is a TUF fetcher that refuses: verification reads the cache only.
type noNetwork struct{}

func (noNetwork) DownloadFile(url string, _ int64, _ time.Duration) ([]byte, error) {
	return nil, fmt.Errorf("offline: not fetching %s", url)
}

// cachedPublicRoot reads the public-good trusted root from the TUF cache in
// dir, without the network.
func cachedPublicRoot(dir string) (*root.TrustedRoot, error) {
	return cachedTrustedRoot(publicRootOptions(dir))
}

// cachedTrustedRoot reads the trusted_root.json target of the TUF
// repository o names from o's cache only: TUF's checks run on the cached
// metadata (signatures chained from o.Root, versions, expiry), and a cache
// that is missing or expired fails, since the fetcher refuses to refresh it.
func cachedTrustedRoot(o tuf.Options) (*root.TrustedRoot, error) {
	c, err := tuf.New(o.WithForceCache().WithFetcher(noNetwork{}))
	if err != nil {
		return nil, err
	}
	return root.GetTrustedRoot(c)
}

// Verify is VerifyArtifact with the public Sigstore root's TUF cache in
// the client's cache directory (CacheDir/tuf) unless p names another.
//
// Signatures are read from the cache once listed (Fetch), so one attached
// after the first Fetch would go unseen: when a has none (ErrNotSigned) and
// the client is online, Verify lists the manifest's signatures in a.Ref's
// repository again, records them, and verifies those, unless Fetch listed
// them just now. A registry that cannot be reached leaves ErrNotSigned
// standing. (Only then: a caller that verifies some of a's signatures on
// their own gets an answer about those. Options.RelistSignatures lists
// them again on every Fetch.)
func (c *Client) Verify(ctx context.Context, a *Artifact, p Policy) (*Signer, error) {
	if p.TUFCacheDir == "" {
		p.TUFCacheDir = c.tufDir()
	}
	s, err := VerifyArtifact(ctx, a, p)
	if !errors.Is(err, ErrNotSigned) || a.listed || c.opts.Offline {
		return s, err
	}
	f := &fetcher{c: c, ref: a.Ref, digest: a.Digest}
	var lerr error
	if f.repo, lerr = c.repository(a.Ref); lerr == nil {
		var sigs []SignatureArtifact
		var unusable []sigFailure
		if sigs, unusable, lerr = f.list(ctx); lerr == nil {
			again := *a
			again.Signatures, again.unusable, again.listed = sigs, unusable, true
			return VerifyArtifact(ctx, &again, p)
		}
	}
	if errors.Is(lerr, ErrNotCached) {
		return nil, err
	}
	return nil, lerr
}

// RefreshPublicRoot brings the public-good Sigstore trusted root into the
// client's TUF cache over the network (tuf-repo-cdn.sigstore.dev), verified
// by TUF from the root.json embedded in sigstore-go. Keyless verification
// without trusted_root then reads it offline until the TUF metadata
// expires (days); deployments that stay offline longer set trusted_root.
// An offline client refuses (ErrNotCached).
func (c *Client) RefreshPublicRoot(ctx context.Context) error {
	if c.opts.Offline {
		return &Error{Kind: ErrNotCached, Err: errors.New("the public Sigstore root cannot be refreshed offline")}
	}
	return refreshTrustedRoot(ctx, publicRootOptions(c.tufDir()))
}

// tufDir is the TUF cache of the public Sigstore root, beside the blobs.
func (c *Client) tufDir() string { return filepath.Join(c.opts.CacheDir, "tuf") }

// refreshTrustedRoot updates o's TUF cache from its repository and caches
// the trusted_root.json target.
func refreshTrustedRoot(ctx context.Context, o tuf.Options) error {
	c, err := tuf.New(o.WithContext(ctx))
	if err == nil {
		_, err = root.GetTrustedRoot(c)
	}
	if err != nil {
		//lint:ignore ST1005 Sigstore is a name
		return fmt.Errorf("Sigstore trusted root from TUF (%s, cache %s): %w", o.RepositoryBaseURL, o.CachePath, err)
	}
	return nil
}

// verifyBundle checks a Sigstore bundle against the manifest digest.
func (v *sigVerifier) verifyBundle(s SignatureArtifact, digest []byte) (*Signer, error) {
	var b bundle.Bundle
	if err := b.UnmarshalJSON(s.Payload); err != nil {
		return nil, fmt.Errorf("not a Sigstore bundle: %w", err)
	}
	res, err := v.verifyEntity(&b, verify.WithArtifactDigest("sha256", digest))
	if err != nil {
		return nil, err
	}
	// A message-signature bundle (no statement) signs the digest itself.
	if res.Statement != nil && res.Statement.GetPredicateType() != cosignSignPredicate {
		return nil, fmt.Errorf("the bundle is an attestation (predicate %s), not a cosign signature (%s)", safetext.Quote(res.Statement.GetPredicateType(), 100), cosignSignPredicate)
	}
	return v.signer(res), nil
}

// verifyEntity runs sigstore-go's verifier on a bundle or a legacy
// signature's adapter, with the policy's key or identity.
func (v *sigVerifier) verifyEntity(e verify.SignedEntity, artifact verify.ArtifactPolicyOption) (*verify.VerificationResult, error) {
	if v.identity != nil {
		return v.bundleV.Verify(e, verify.NewPolicy(artifact, verify.WithCertificateIdentity(*v.identity)))
	}
	return v.bundleV.Verify(e, verify.NewPolicy(artifact, verify.WithKey()))
}

// signer is who a verified result names: the policy's key, or the
// certificate's identity and issuer.
func (v *sigVerifier) signer(res *verify.VerificationResult) *Signer {
	if v.identity == nil {
		return &Signer{KeyFingerprint: v.fingerprint}
	}
	c := res.Signature.Certificate
	return &Signer{Identity: c.SubjectAlternativeName, Issuer: c.Issuer}
}

// digestBytes decodes "sha256:HEX".
func digestBytes(d string) ([]byte, error) {
	h, ok := strings.CutPrefix(d, "sha256:")
	b, err := hex.DecodeString(h)
	if !ok || err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("manifest digest %s is not sha256:HEX", safetext.Quote(d, 80))
	}
	return b, nil
}

// sigFailure is why one signature did not verify.
type sigFailure struct {
	digest, format string
	err            error
}

// sigFailures lists every signature's failure; errors.As reaches each
// library error.
type sigFailures []sigFailure

// maxFailuresListed bounds the signatures an error describes.
const maxFailuresListed = 5

func (f sigFailures) Error() string {
	var parts []string
	for _, x := range f[:min(len(f), maxFailuresListed)] {
		// Library messages quote registry-supplied text (certificate
		// identities, payload fields): escaped before a terminal sees them.
		parts = append(parts, fmt.Sprintf("signature %s (%s): %s", x.digest, x.format, safetext.Line(x.err.Error(), 400)))
	}
	if n := len(f) - maxFailuresListed; n > 0 {
		parts = append(parts, fmt.Sprintf("… and %d more", n))
	}
	return "no signature verifies: " + strings.Join(parts, "; ")
}

func (f sigFailures) Unwrap() []error {
	errs := make([]error, len(f))
	for i, x := range f {
		errs[i] = x.err
	}
	return errs
}

// identity reports whether a signature verified but names another signer
// than the policy: sigstore-go checks the identity last, after the chain,
// log and signature.
func (f sigFailures) identity() bool {
	var e *verify.ErrNoMatchingCertificateIdentity
	return errors.As(f, &e)
}

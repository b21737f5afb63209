package oci

// Ref is a parsed oci:// reference. At least one of Tag and Digest is set.
type Ref struct {
	Registry   string // host[:port]
	Repository string // path within the registry
	Tag        string // "" when only a digest is given
	Digest     string // "sha256:HEX", "" for a tag alone
}

// Layout is how a manifest carries its module.
type Layout string

const (
	// LayoutArtifact: a layer is the module itself (ORAS, the CNCF Wasm artifact).
	LayoutArtifact Layout = "artifact"
	// LayoutImage: a (gzip) tar layer holds plugin.wasm (hyper-mcp's images).
	LayoutImage Layout = "image"
)

// Signature formats of cosign that morph reads.
const (
	// FormatBundle is a Sigstore bundle attached to the manifest as a referrer
	// (cosign v3's default; the referrers API or its sha256-HEX tag schema).
	FormatBundle = "bundle"
	// FormatSigTag is cosign's legacy sha256-HEX.sig tag: a simple-signing
	// payload with the signature (and, keyless, the certificate) in annotations.
	FormatSigTag = "sig-tag"
)

// Artifact is a manifest brought into the cache with its module and the
// signatures found for it.
type Artifact struct {
	Ref          Ref
	Digest       string // the manifest's digest, "sha256:HEX"
	Layout       Layout
	ModulePath   string // a regular file in the cache, read as any .wasm
	ModuleSHA256 string // hex, the module's own hash
	Size         int64  // the module's size in bytes
	Signatures   []SignatureArtifact
	// listed: Fetch listed the signatures from the registry just now (so
	// Client.Verify does not list them again).
	listed bool
	// unusable: signature artifacts listed that could not be read, named
	// by Verify's refusal.
	unusable []sigFailure
}

// SignatureArtifact is one signature found for a manifest, its bytes read
// from the cache (verified against their digest when they entered it).
type SignatureArtifact struct {
	Format string // FormatBundle or FormatSigTag
	Digest string // the signature manifest's digest
	// Payload is the bundle's JSON (FormatBundle) or the simple-signing
	// payload that was signed (FormatSigTag).
	Payload []byte
	// Annotations are the signature layer's (FormatSigTag):
	// dev.cosignproject.cosign/signature, and keyless
	// dev.sigstore.cosign/certificate, /chain and /bundle.
	Annotations map[string]string
}

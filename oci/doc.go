// Package oci brings WebAssembly plugins from OCI registries into a local,
// content-addressed cache and checks who signed them.
//
// A reference is oci://REGISTRY/REPO:TAG or oci://REGISTRY/REPO@sha256:HEX.
// Both layouts people publish are read: an artifact whose layer is the
// module itself (ORAS, the CNCF Wasm artifact), and an image whose gzip tar
// layer holds plugin.wasm (hyper-mcp). The layer's bytes are verified
// against their digest before they enter the cache, and a signature covers
// the manifest digest, so the chain of trust runs signature → manifest →
// layer → module.
//
// Signatures are cosign's two formats, verified offline with sigstore's own
// libraries: a Sigstore bundle found as a referrer of the manifest, and the
// legacy sha256-HEX.sig tag. A tag is never trusted on its own: morph.lock
// (or a digest in the reference) says which manifest a deployment runs.
package oci

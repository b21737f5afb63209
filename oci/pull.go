package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/morphhost/morph/internal/safetext"
)

// Media types morph reads a module or a signature from.
const (
	mediaTypeWasm          = "application/wasm"
	mediaTypeWasmLayer     = "application/vnd.wasm.content.layer.v1+wasm"
	mediaTypeModuleLayer   = "application/vnd.module.wasm.content.layer.v1+wasm"
	mediaTypeDockerTarGzip = "application/vnd.docker.image.rootfs.diff.tar.gzip"
	mediaTypeDockerList    = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaTypeBundlePrefix  = "application/vnd.dev.sigstore.bundle"
	mediaTypeSimpleSigning = "application/vnd.dev.cosign.simplesigning.v1+json"
)

// manifest is the part of an OCI or Docker manifest, or an index, that
// Fetch reads; which it is shows in which list is set.
type manifest struct {
	MediaType string               `json:"mediaType"`
	Manifests []ocispec.Descriptor `json:"manifests"`
	Layers    []ocispec.Descriptor `json:"layers"`
}

func (m *manifest) isIndex() bool {
	return m.MediaType == ocispec.MediaTypeImageIndex || m.MediaType == mediaTypeDockerList ||
		m.MediaType == "" && m.Manifests != nil && m.Layers == nil
}

// Fetch brings manifest d of r's repository, its module and the signature
// artifacts found for it into the cache, and describes them. d "" means
// r.Digest; a tag alone is refused (Resolve it, or pin a digest: a tag is
// never trusted on its own). A manifest already in the cache is answered
// from it with no request; offline, one not in it is ErrNotCached.
//
// The module is taken as the design's rules say: manifest by digest within
// 4 MiB; an index's wasm platform entry; every layer's claimed size against
// MaxModuleBytes before any blob is requested (ErrTooLarge); each blob
// verified against its digest before it enters the cache (ErrTampered);
// the layer read by its content (a raw module, or a gzip or plain tar
// holding plugin.wasm), never trusted by its media type (ErrLayout).
// Signatures (cosign's bundle as a referrer, and the legacy sha256-HEX.sig
// tag) are fetched, not verified: Verify does that. They are the ones found
// when the manifest entered the cache: one attached later is looked for
// only with Options.RelistSignatures.
func (c *Client) Fetch(ctx context.Context, r Ref, d string) (*Artifact, error) {
	if d == "" {
		d = r.Digest
	}
	if d == "" {
		return nil, &Error{Ref: r.String(), Kind: ErrUnlockedTag, Err: errors.New("a tag alone names no manifest; resolve it and lock the digest, or write the reference @sha256:HEX")}
	}
	if err := checkDigest(d); err != nil {
		return nil, fmt.Errorf("%s: %w", r, err)
	}
	if r.Digest != "" && r.Digest != d {
		return nil, fmt.Errorf("%s: asked for manifest %s, which is not the reference's digest", r, d)
	}
	f := &fetcher{c: c, ref: r, digest: d}
	rec, ok, err := c.cache.readRecord(d)
	if err != nil {
		return nil, err
	}
	if ok {
		a, err := f.fromRecord(ctx, rec)
		if err != nil || !c.opts.RelistSignatures || c.opts.Offline {
			return a, err
		}
		return f.relist(ctx, rec, a)
	}
	if c.opts.Offline {
		return nil, f.fail(ErrNotCached, "offline, and the manifest is not in the cache %s; fetch it once online (morph plugin pull)", c.opts.CacheDir)
	}
	if f.repo, err = c.repository(r); err != nil {
		return nil, err
	}
	return f.pull(ctx)
}

// fetcher is one Fetch: its reference, manifest digest and, when online,
// the repository.
type fetcher struct {
	c      *Client
	ref    Ref
	digest string
	repo   *remote.Repository // nil: the cache alone
}

// fail is an *Error of kind about f's manifest.
func (f *fetcher) fail(kind error, format string, a ...any) error {
	return &Error{Ref: f.ref.String(), Digest: f.digest, Kind: kind, Err: fmt.Errorf(format, a...)}
}

// network wraps an error of the registry's (ErrNotCached when it cannot be
// reached).
func (f *fetcher) network(ctx context.Context, step string, err error) error {
	return f.c.networkError(ctx, f.ref, f.digest, step, err)
}

// pull fetches the manifest, its module and its signatures, then records
// them.
func (f *fetcher) pull(ctx context.Context) (*Artifact, error) {
	f.c.log.DebugContext(ctx, "oci: fetch", "ref", f.ref.String(), "digest", f.digest)
	_, _, m, err := f.manifest(ctx, f.digest)
	if err != nil {
		return nil, err
	}
	if m.isIndex() {
		entry, err := f.platform(m.Manifests)
		if err == nil {
			err = f.valid("index entry", entry)
		}
		if err != nil {
			return nil, err
		}
		if _, _, m, err = f.manifest(ctx, entry.Digest.String()); err != nil {
			return nil, err
		}
		if m.isIndex() {
			return nil, f.fail(ErrLayout, "index entry %s is another index; morph reads one level", entry.Digest)
		}
	}
	// Every claimed size first: a layer over the limit is refused before
	// any blob request, whichever layer turns out to hold the module.
	if err := f.valid("layer", m.Layers...); err != nil {
		return nil, err
	}
	for _, l := range m.Layers {
		if l.Size < 0 || l.Size > f.c.opts.MaxModuleBytes {
			return nil, f.fail(ErrTooLarge, "layer %s claims %d bytes, over [wasm.limits] module_mb = %s; nothing was downloaded (raise module_mb if a module this large is intended)", l.Digest, l.Size, moduleMB(f.c.opts.MaxModuleBytes))
		}
	}
	layers, err := f.candidates(m.Layers)
	if err != nil {
		return nil, err
	}
	rec, err := f.module(ctx, layers)
	if err != nil {
		return nil, err
	}
	sigs, recSigs, err := f.signatures(ctx)
	if err != nil {
		return nil, err
	}
	rec.Signatures = recSigs
	if err := f.c.cache.writeRecord(f.digest, rec); err != nil {
		return nil, err
	}
	return f.artifact(rec, sigs), nil
}

// relist looks for a cached manifest's signatures again (RelistSignatures)
// and records what it finds.
func (f *fetcher) relist(ctx context.Context, rec record, a *Artifact) (*Artifact, error) {
	var err error
	if f.repo, err = f.c.repository(f.ref); err != nil {
		return nil, err
	}
	sigs, recSigs, err := f.signatures(ctx)
	if err != nil {
		return nil, err
	}
	rec.Signatures = recSigs
	if err := f.c.cache.writeRecord(f.digest, rec); err != nil {
		return nil, err
	}
	a.Signatures = sigs
	return a, nil
}

// moduleMB writes the limit as module_mb does, or in bytes when it is not
// a whole number of MiB.
func moduleMB(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprint(n >> 20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// fromRecord answers from the cache alone: the record, the module file and
// the signature manifests and payloads it names.
func (f *fetcher) fromRecord(ctx context.Context, rec record) (*Artifact, error) {
	p := filepath.Join(f.c.opts.CacheDir, filepath.FromSlash(rec.Module))
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != rec.Size {
		return nil, fmt.Errorf("oci cache: %s: the module %s is missing or changed; remove %s and fetch again", f.ref, p, f.c.cache.recordPath(f.digest))
	}
	var sigs []SignatureArtifact
	for _, s := range rec.Signatures {
		desc := ocispec.Descriptor{Digest: digest.Digest(s.Digest), Size: s.Size}
		b, err := f.c.cache.read(desc)
		if err != nil {
			return nil, fmt.Errorf("%s: signature manifest %s: %w", f.ref, s.Digest, err)
		}
		found, err := f.signatureLayers(ctx, s.Format, desc, b)
		if err != nil {
			return nil, err
		}
		sigs = append(sigs, found...)
	}
	return f.artifact(rec, sigs), nil
}

func (f *fetcher) artifact(rec record, sigs []SignatureArtifact) *Artifact {
	return &Artifact{
		Ref: f.ref, Digest: f.digest, Layout: rec.Layout,
		ModulePath:   filepath.Join(f.c.opts.CacheDir, filepath.FromSlash(rec.Module)),
		ModuleSHA256: rec.ModuleSHA256, Size: rec.Size, Signatures: sigs,
	}
}

// manifest gives manifest (or index) ref, a digest already checked or a
// tag, from the cache when a digest is there, else from the registry,
// verified and then cached.
func (f *fetcher) manifest(ctx context.Context, ref string) (ocispec.Descriptor, []byte, *manifest, error) {
	var desc ocispec.Descriptor
	var b []byte
	var err error
	if strings.HasPrefix(ref, "sha256:") {
		desc = ocispec.Descriptor{Digest: digest.Digest(ref), Size: -1}
		b, err = f.c.cache.read(desc)
		desc.Size = int64(len(b))
	}
	if errors.Is(err, fs.ErrNotExist) || desc.Digest == "" {
		desc, b, err = f.download(ctx, ref)
	}
	if err != nil {
		return desc, nil, nil, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return desc, nil, nil, f.fail(ErrLayout, "manifest %s is not JSON: %v", desc.Digest, err)
	}
	if m.MediaType == "" {
		m.MediaType = desc.MediaType
	}
	return desc, b, &m, nil
}

// download GETs manifest ref, verifies it against its digest and caches it.
func (f *fetcher) download(ctx context.Context, ref string) (ocispec.Descriptor, []byte, error) {
	if f.repo == nil {
		return ocispec.Descriptor{}, nil, f.fail(ErrNotCached, "manifest %s is not in the cache %s", ref, f.c.opts.CacheDir)
	}
	desc, rc, err := f.repo.FetchReference(ctx, ref)
	if err != nil {
		return desc, nil, f.network(ctx, "manifest "+ref, err)
	}
	defer rc.Close()
	if desc.Size > maxManifestBytes {
		return desc, nil, f.fail(ErrTooLarge, "manifest %s is %d bytes, over the %d bytes morph reads", ref, desc.Size, maxManifestBytes)
	}
	b, err := content.ReadAll(rc, desc)
	if err != nil {
		return desc, nil, f.tampered("manifest "+ref, err)
	}
	if err := checkDigest(desc.Digest.String()); err != nil {
		return desc, nil, f.fail(ErrLayout, "manifest %s: %v", ref, err)
	}
	return desc, b, f.c.cache.put(f.c.cache.blob(desc.Digest.String()), b)
}

// valid refuses a descriptor whose digest is not sha256:HEX before the
// digest names a cache file or a URL, or is printed (it is the registry's
// text).
func (f *fetcher) valid(what string, descs ...ocispec.Descriptor) error {
	for _, d := range descs {
		if err := checkDigest(d.Digest.String()); err != nil {
			return f.fail(ErrLayout, "%s: %v", what, err)
		}
	}
	return nil
}

// tampered reports bytes that do not match their descriptor as
// ErrTampered, and a broken connection as the network error it is.
func (f *fetcher) tampered(what string, err error) error {
	if errors.Is(err, content.ErrMismatchedDigest) || errors.Is(err, content.ErrTrailingData) || errors.Is(err, io.ErrUnexpectedEOF) {
		return f.fail(ErrTampered, "%s: %w; the registry serves other bytes than the digest names", what, err)
	}
	return fmt.Errorf("%s: %s: %w", f.ref, what, err)
}

// platform picks an index's wasm entry (os wasip1 or wasi, or architecture
// wasm).
func (f *fetcher) platform(entries []ocispec.Descriptor) (ocispec.Descriptor, error) {
	var seen []string
	for _, e := range entries {
		if p := e.Platform; p != nil {
			if p.OS == "wasip1" || p.OS == "wasi" || p.Architecture == "wasm" {
				return e, nil
			}
			seen = append(seen, safetext.Escape(p.OS+"/"+p.Architecture))
		}
	}
	return ocispec.Descriptor{}, f.fail(ErrLayout, "index has no wasm platform entry (os wasip1 or wasi, or architecture wasm); it lists %d entries, platforms [%s]", len(entries), strings.Join(seen, " "))
}

// candidates orders the layers that may hold the module: a wasm media
// type, then a layer titled *.wasm, then tar layers from the top down.
func (f *fetcher) candidates(layers []ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	for _, l := range layers {
		if l.MediaType == mediaTypeWasm || l.MediaType == mediaTypeWasmLayer || l.MediaType == mediaTypeModuleLayer {
			return []ocispec.Descriptor{l}, nil
		}
	}
	for _, l := range layers {
		if path.Ext(l.Annotations[ocispec.AnnotationTitle]) == ".wasm" {
			return []ocispec.Descriptor{l}, nil
		}
	}
	var tars []ocispec.Descriptor
	for _, l := range slices.Backward(layers) {
		switch {
		case strings.Contains(l.MediaType, "zstd"):
			return nil, f.fail(ErrLayout, "layer %s is zstd-compressed (%s); morph reads gzip or plain tar layers: push it with gzip", l.Digest, safetext.Quote(l.MediaType, 200))
		case l.MediaType == ocispec.MediaTypeImageLayer, l.MediaType == ocispec.MediaTypeImageLayerGzip, l.MediaType == mediaTypeDockerTarGzip:
			tars = append(tars, l)
		}
	}
	if len(tars) == 0 {
		var types []string
		for _, l := range layers {
			types = append(types, safetext.Quote(l.MediaType, 200))
		}
		return nil, f.fail(ErrLayout, "no layer holds a module: none is application/wasm, titled *.wasm or a tar; media types [%s]", strings.Join(types, " "))
	}
	return tars, nil
}

// module fetches the candidate layers in order until one yields the module.
func (f *fetcher) module(ctx context.Context, layers []ocispec.Descriptor) (record, error) {
	var missed []string
	for _, l := range layers {
		p, err := f.blob(ctx, l)
		if err != nil {
			return record{}, err
		}
		rec, err := f.readLayer(l, p)
		if errors.Is(err, errNoModule) {
			missed = append(missed, l.Digest.String())
			continue
		}
		return rec, err
	}
	return record{}, f.fail(ErrLayout, "no plugin.wasm (or single *.wasm) regular file in the tar layers %s", strings.Join(missed, ", "))
}

// blob brings blob desc into the cache and gives its path: a cached one as
// it is, else a GET read through a reader that stops at desc.Size and
// hashes, into a temporary file renamed into place only once the digest
// matches. oras-go's own blob fetch is not used because it refuses a size
// mismatch with an untyped error, which must be ErrTampered here.
func (f *fetcher) blob(ctx context.Context, desc ocispec.Descriptor) (string, error) {
	dst := f.c.cache.blob(desc.Digest.String())
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	if f.repo == nil {
		return "", f.fail(ErrNotCached, "blob %s is not in the cache %s", desc.Digest, f.c.opts.CacheDir)
	}
	ref := reference(f.ref, desc.Digest.String())
	ctx = auth.AppendRepositoryScope(ctx, ref, auth.ActionPull)
	scheme := "https"
	if f.repo.PlainHTTP {
		scheme = "http"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s://%s/v2/%s/blobs/%s", scheme, ref.Host(), ref.Repository, desc.Digest), nil)
	if err != nil {
		return "", err
	}
	f.c.log.DebugContext(ctx, "oci: blob", "ref", f.ref.String(), "digest", desc.Digest.String(), "size", desc.Size)
	resp, err := f.c.auth.Do(req)
	if err != nil {
		return "", f.network(ctx, "blob "+desc.Digest.String(), err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return "", fmt.Errorf("%s: blob %s: %w", f.ref, desc.Digest, errdef.ErrNotFound)
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("%s: blob %s: the registry answered %s", f.ref, desc.Digest, resp.Status)
	case resp.ContentLength >= 0 && resp.ContentLength != desc.Size:
		return "", f.fail(ErrTampered, "blob %s: the registry serves %d bytes, the manifest says %d", desc.Digest, resp.ContentLength, desc.Size)
	}
	tmp, err := f.c.cache.create(dst)
	if err != nil {
		return "", err
	}
	// One byte past the size shows a longer body; the hash names what came.
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(resp.Body, desc.Size+1))
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	ok := err == nil && n == desc.Size && got == desc.Digest.String()
	if cerr := f.c.cache.commit(tmp, dst, ok); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return "", f.network(ctx, "blob "+desc.Digest.String(), err)
	case n != desc.Size:
		return "", f.fail(ErrTampered, "blob %s: the registry serves %s bytes, the manifest says %d", desc.Digest, sizeRead(n, desc.Size), desc.Size)
	case !ok:
		return "", f.fail(ErrTampered, "blob %s: the registry serves bytes hashing to %s; expected %s", desc.Digest, got, desc.Digest)
	}
	return dst, nil
}

// sizeRead words a body read through a limit of size+1: n bytes, or more
// than size.
func sizeRead(n, size int64) string {
	if n > size {
		return fmt.Sprintf("more than %d", size)
	}
	return fmt.Sprint(n)
}

// signatures finds, fetches and caches the signature artifacts of the
// manifest: cosign bundles among its referrers (the referrers API, or the
// sha256-HEX tag index where the registry has no API), and the legacy
// sha256-HEX.sig tag.
func (f *fetcher) signatures(ctx context.Context) ([]SignatureArtifact, []recordSig, error) {
	subject := ocispec.Descriptor{Digest: digest.Digest(f.digest)}
	var bundles []ocispec.Descriptor
	err := f.repo.Referrers(ctx, subject, "", func(refs []ocispec.Descriptor) error {
		for _, r := range refs {
			if strings.HasPrefix(r.ArtifactType, mediaTypeBundlePrefix) {
				bundles = append(bundles, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, f.network(ctx, "referrers", err)
	}
	type found struct {
		format string
		ref    string
	}
	var todo []found
	if err := f.valid("referrer", bundles...); err != nil {
		return nil, nil, err
	}
	for _, b := range bundles {
		todo = append(todo, found{FormatBundle, b.Digest.String()})
	}
	todo = append(todo, found{FormatSigTag, "sha256-" + hexOf(f.digest) + ".sig"})
	var sigs []SignatureArtifact
	var recs []recordSig
	for _, s := range todo {
		desc, b, _, err := f.manifest(ctx, s.ref)
		if s.format == FormatSigTag && errors.Is(err, errdef.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		got, err := f.signatureLayers(ctx, s.format, desc, b)
		if err != nil {
			return nil, nil, err
		}
		sigs = append(sigs, got...)
		recs = append(recs, recordSig{Format: s.format, Digest: desc.Digest.String(), Size: desc.Size})
	}
	return sigs, recs, nil
}

// signatureLayers reads a signature manifest's payload layers (fetching
// them when online): the bundle, or each simple-signing payload with its
// layer's annotations.
func (f *fetcher) signatureLayers(ctx context.Context, format string, desc ocispec.Descriptor, b []byte) ([]SignatureArtifact, error) {
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, f.fail(ErrLayout, "signature manifest %s is not JSON: %v", desc.Digest, err)
	}
	want := mediaTypeSimpleSigning
	if format == FormatBundle {
		want = mediaTypeBundlePrefix
	}
	if err := f.valid("signature layer", m.Layers...); err != nil {
		return nil, err
	}
	var sigs []SignatureArtifact
	for _, l := range m.Layers {
		if !strings.HasPrefix(l.MediaType, want) {
			continue
		}
		if l.Size < 0 || l.Size > maxManifestBytes {
			return nil, f.fail(ErrTooLarge, "signature layer %s claims %d bytes, over the %d bytes morph reads", l.Digest, l.Size, maxManifestBytes)
		}
		if _, err := f.blob(ctx, l); err != nil {
			return nil, err
		}
		payload, err := f.c.cache.read(l)
		if err != nil {
			return nil, err
		}
		sig := SignatureArtifact{Format: format, Digest: desc.Digest.String(), Payload: payload}
		if format == FormatSigTag {
			sig.Annotations = l.Annotations
		}
		sigs = append(sigs, sig)
	}
	return sigs, nil
}

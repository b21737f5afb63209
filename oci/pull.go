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
	mediaTypeWasm           = "application/wasm"
	mediaTypeWasmLayer      = "application/vnd.wasm.content.layer.v1+wasm"
	mediaTypeModuleLayer    = "application/vnd.module.wasm.content.layer.v1+wasm"
	mediaTypeDockerTarGzip  = "application/vnd.docker.image.rootfs.diff.tar.gzip"
	mediaTypeDockerList     = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaTypeDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
	mediaTypeBundlePrefix   = "application/vnd.dev.sigstore.bundle"
	mediaTypeSimpleSigning  = "application/vnd.dev.cosign.simplesigning.v1+json"
)

// Bounds on what Fetch reads for one reference, past which it refuses
// (ErrTooLarge) rather than grow: a registry chooses how many referrers,
// signatures and tar layers it lists.
const (
	// maxReferrerPages bounds the pages of the referrers API read
	// (oras-go's default is unbounded).
	maxReferrerPages = 4
	// maxSignatures bounds the signature referrers listed and the
	// signatures read for a manifest (cosign makes one per signing).
	maxSignatures = 16
	// maxSignatureBytes bounds one signature payload (a keyless bundle is
	// a few KiB).
	maxSignatureBytes = 1 << 20
	// maxSignatureTotal bounds the signature manifests and payloads read
	// for a manifest, together.
	maxSignatureTotal = 8 << 20
	// maxTarLayers bounds the tar layers that may hold the module
	// (hyper-mcp's images have one).
	maxTarLayers = 8
	// maxListed bounds the items a refusal lists (media types, platforms).
	maxListed = 10
)

// manifest is the part of an OCI or Docker manifest, or an index, that
// Fetch reads; classify says which it is, from its own bytes.
type manifest struct {
	MediaType string               `json:"mediaType"`
	Manifests []ocispec.Descriptor `json:"manifests"`
	Layers    []ocispec.Descriptor `json:"layers"`
	index     bool
}

// classify decides index or image from the verified bytes alone, never
// from the registry's unsigned Content-Type: exactly one of "manifests"
// and "layers", agreeing with "mediaType" when it is set.
func (m *manifest) classify() error {
	hasM, hasL := m.Manifests != nil, m.Layers != nil
	if hasM == hasL {
		return errors.New("lists both manifests and layers, or neither: it is neither one index nor one image manifest")
	}
	m.index = hasM
	switch m.MediaType {
	case "":
	case ocispec.MediaTypeImageIndex, mediaTypeDockerList:
		if !m.index {
			return fmt.Errorf("says it is an index (%s) but lists layers", m.MediaType)
		}
	case ocispec.MediaTypeImageManifest, mediaTypeDockerManifest:
		if m.index {
			return fmt.Errorf("says it is an image manifest (%s) but lists manifests", m.MediaType)
		}
	default:
		return fmt.Errorf("has media type %s, not an OCI or Docker manifest or index", safetext.Quote(m.MediaType, 200))
	}
	return nil
}

// Fetch brings manifest d of r's repository, its module and the signature
// artifacts found for it into the cache, and describes them. d "" means
// r.Digest; a tag alone is refused (Resolve it, or pin a digest: a tag is
// never trusted on its own). What the cache holds is used with no request;
// offline, a manifest or blob not in it is ErrNotCached.
//
// The module is taken as the design's rules say, and taken again from the
// cached manifest on every Fetch (a cache file changed since is refused,
// not run): manifest by digest within 4 MiB, index or image decided by its
// own bytes; an index's wasm platform entry; every layer's claimed size
// against MaxModuleBytes, and the candidate layers' total, before any blob
// is requested (ErrTooLarge); each blob verified against its digest and
// size (ErrTampered); the layer read by its content (a raw module, or a
// gzip or plain tar holding plugin.wasm), never trusted by its media type
// (ErrLayout).
//
// Signatures (cosign's bundle as a referrer, and the legacy sha256-HEX.sig
// tag; at most 16, 1 MiB each, 8 MiB together: ErrTooLarge past that) are
// fetched, not verified: Verify does that. They are listed once per
// repository and digest and then read from the cache; online, they are
// listed again with Options.RelistSignatures, and Client.Verify lists them
// again when there are none. They are those
// of the digest fetched: an index's signatures are not its platform
// manifest's, nor the other way round (cosign sign --recursive signs
// both; sign the digest the reference pins).
func (c *Client) Fetch(ctx context.Context, r Ref, d string) (*Artifact, error) {
	if d == "" {
		d = r.Digest
	}
	if d == "" {
		return nil, &Error{Ref: r.String(), Kind: ErrUnlockedTag, Err: errors.New("a tag alone names no manifest; resolve it and lock the digest, or write the reference @sha256:HEX")}
	}
	if err := checkDigest(d); err != nil {
		return nil, &Error{Ref: r.String(), Kind: ErrBadRef, Err: err}
	}
	if r.Digest != "" && r.Digest != d {
		return nil, &Error{Ref: r.String(), Kind: ErrLockMismatch, Err: fmt.Errorf("asked for manifest %s, which is not the reference's digest", d)}
	}
	f := &fetcher{c: c, ref: r, digest: d}
	if !c.opts.Offline {
		var err error
		if f.repo, err = c.repository(r); err != nil {
			return nil, err
		}
	}
	c.log.DebugContext(ctx, "oci: fetch", "ref", r.String(), "digest", d)
	mod, err := f.module(ctx)
	if err != nil {
		return nil, err
	}
	sigs, listed, err := f.signatures(ctx)
	if err != nil {
		return nil, err
	}
	return &Artifact{
		Ref: r, Digest: d, Layout: mod.Layout, ModulePath: mod.Path,
		ModuleSHA256: mod.ModuleSHA256, Size: mod.Size, Signatures: sigs, listed: listed, unusable: f.unusable,
	}, nil
}

// fetcher is one Fetch: its reference, manifest digest and, when online,
// the repository.
type fetcher struct {
	c      *Client
	ref    Ref
	digest string
	repo   *remote.Repository // nil: the cache alone
	// unusable are the signature artifacts listed that could not be read.
	unusable []sigFailure
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

// module finds the manifest's module: the manifest (an index's wasm
// entry), its layers' claims, then the candidate layers in order.
func (f *fetcher) module(ctx context.Context) (module, error) {
	_, _, m, err := f.manifest(ctx, f.digest)
	if err != nil {
		return module{}, err
	}
	if m.index {
		entry, err := f.platform(m.Manifests)
		if err == nil {
			err = f.valid("index entry", entry)
		}
		if err != nil {
			return module{}, err
		}
		if _, _, m, err = f.manifest(ctx, entry.Digest.String()); err != nil {
			return module{}, err
		}
		if m.index {
			return module{}, f.fail(ErrLayout, "index entry %s is another index; morph reads one level", entry.Digest)
		}
		if entry.MediaType != "" && entry.MediaType != m.MediaType {
			return module{}, f.fail(ErrLayout, "index entry %s says %s, the manifest it names says %s", entry.Digest, safetext.Quote(entry.MediaType, 200), safetext.Quote(m.MediaType, 200))
		}
	}
	// Every claimed size first: a layer over the limit is refused before
	// any blob request, whichever layer turns out to hold the module.
	if err := f.valid("layer", m.Layers...); err != nil {
		return module{}, err
	}
	for _, l := range m.Layers {
		if l.Size < 0 || l.Size > f.c.opts.MaxModuleBytes {
			return module{}, f.fail(ErrTooLarge, "layer %s claims %d bytes, over [wasm.limits] module_mb = %s; nothing was downloaded (raise module_mb if a module this large is intended)", l.Digest, l.Size, moduleMB(f.c.opts.MaxModuleBytes))
		}
	}
	layers, err := f.candidates(m.Layers)
	if err != nil {
		return module{}, err
	}
	// The candidates are read in turn until one holds the module: their
	// total is what one reference may cost, in requests and in cache.
	if len(layers) > maxTarLayers {
		return module{}, f.fail(ErrTooLarge, "the manifest lists %d tar layers that may hold the module, more than the %d morph reads; nothing was downloaded", len(layers), maxTarLayers)
	}
	var total int64
	for _, l := range layers {
		total += l.Size
	}
	if total > f.c.opts.MaxModuleBytes {
		return module{}, f.fail(ErrTooLarge, "the %d layers that may hold the module claim %d bytes together, over [wasm.limits] module_mb = %s; nothing was downloaded", len(layers), total, moduleMB(f.c.opts.MaxModuleBytes))
	}
	return f.layerModule(ctx, layers)
}

// moduleMB writes the limit as module_mb does, or in bytes when it is not
// a whole number of MiB.
func moduleMB(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprint(n >> 20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// listed joins items, at most maxListed of them, then how many more.
func listed(items []string) string {
	if len(items) <= maxListed {
		return strings.Join(items, " ")
	}
	return fmt.Sprintf("%s … and %d more", strings.Join(items[:maxListed], " "), len(items)-maxListed)
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
		b, err = f.c.cache.read(desc, maxManifestBytes)
		desc.Size = int64(len(b))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return desc, nil, nil, f.fail(ErrTampered, "manifest %s: %w", ref, err)
		}
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
	if err := m.classify(); err != nil {
		return desc, nil, nil, f.fail(ErrLayout, "manifest %s %v", desc.Digest, err)
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
		return desc, nil, f.tampered(ctx, "manifest "+ref, err)
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
func (f *fetcher) tampered(ctx context.Context, what string, err error) error {
	if errors.Is(err, content.ErrMismatchedDigest) || errors.Is(err, content.ErrTrailingData) || errors.Is(err, io.ErrUnexpectedEOF) {
		return f.fail(ErrTampered, "%s: %w; the registry serves other bytes than the digest names", what, err)
	}
	return f.network(ctx, what, err)
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
	return ocispec.Descriptor{}, f.fail(ErrLayout, "index has no wasm platform entry (os wasip1 or wasi, or architecture wasm); it lists %d entries, platforms [%s]", len(entries), listed(seen))
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
		return nil, f.fail(ErrLayout, "no layer holds a module: none is application/wasm, titled *.wasm or a tar; media types [%s]", listed(types))
	}
	return tars, nil
}

// layerModule fetches the candidate layers in order until one yields the
// module.
func (f *fetcher) layerModule(ctx context.Context, layers []ocispec.Descriptor) (module, error) {
	var missed []string
	for _, l := range layers {
		p, err := f.blob(ctx, l)
		if err != nil {
			return module{}, err
		}
		rec, err := f.readLayer(l, p)
		if errors.Is(err, errNoModule) {
			missed = append(missed, l.Digest.String())
			continue
		}
		return rec, err
	}
	return module{}, f.fail(ErrLayout, "no plugin.wasm (or single *.wasm) regular file in the tar layers %s", strings.Join(missed, ", "))
}

// blob brings blob desc into the cache and gives its path: a cached one
// once its size and hash are checked again (a manifest that lies about the
// size of a layer already cached is refused as one that lies about a layer
// it serves), else a GET read through a reader that stops at desc.Size and
// hashes, into a temporary file renamed into place only once the digest
// matches. oras-go's own blob fetch is not used because it refuses a size
// mismatch with an untyped error, which must be ErrTampered here.
func (f *fetcher) blob(ctx context.Context, desc ocispec.Descriptor) (string, error) {
	dst := f.c.cache.blob(desc.Digest.String())
	if fi, err := os.Lstat(dst); err == nil {
		if !fi.Mode().IsRegular() {
			return "", f.fail(ErrTampered, "blob %s: the cache's %s is not a regular file; remove it", desc.Digest, dst)
		}
		if fi.Size() != desc.Size {
			return "", f.fail(ErrTampered, "blob %s: the cache holds %d bytes, the manifest says %d; if the cache was changed, remove %s", desc.Digest, fi.Size(), desc.Size, dst)
		}
		if got, err := hashFile(dst); err != nil || got != desc.Digest.String() {
			return "", f.fail(ErrTampered, "blob %s: the cache's copy %s hashes to %s (%v); remove it and fetch again", desc.Digest, dst, got, err)
		}
		return dst, nil
	}
	if f.repo == nil {
		return "", f.fail(ErrNotCached, "blob %s is not in the cache %s", desc.Digest, f.c.opts.CacheDir)
	}
	ref := f.repo.Reference
	ref.Reference = desc.Digest.String()
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
		return "", f.fail(ErrRegistry, "blob %s: %w", desc.Digest, errdef.ErrNotFound)
	case resp.StatusCode != http.StatusOK:
		return "", f.fail(ErrRegistry, "blob %s: the registry answered %s", desc.Digest, safetext.Quote(resp.Status, 200))
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

// hashFile is the file's "sha256:HEX".
func hashFile(p string) (string, error) {
	file, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer file.Close()
	h := sha256.New()
	if _, err := io.Copy(h, file); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// sizeRead words a body read through a limit of size+1: n bytes, or more
// than size.
func sizeRead(n, size int64) string {
	if n > size {
		return fmt.Sprintf("more than %d", size)
	}
	return fmt.Sprint(n)
}

// signatures gives the manifest's signature artifacts: those recorded for
// its repository, else (online, or with RelistSignatures) those listed now,
// then recorded. listed reports the second.
func (f *fetcher) signatures(ctx context.Context) (sigs []SignatureArtifact, listed bool, err error) {
	rec, ok, err := f.c.cache.readRecord(f.digest, f.ref)
	if err != nil {
		return nil, false, f.fail(ErrTampered, "%w", err)
	}
	if ok && (f.repo == nil || !f.c.opts.RelistSignatures) {
		sigs, err := f.readSignatures(ctx, rec.Signatures)
		return sigs, false, err
	}
	if f.repo == nil {
		return nil, false, f.fail(ErrNotCached, "offline, and the signatures of the manifest were never listed from %s/%s (its module may have come from another repository); fetch it once online (morph plugin pull)", f.ref.Registry, f.ref.Repository)
	}
	sigs, f.unusable, err = f.list(ctx)
	return sigs, err == nil, err
}

// readSignatures reads recorded signature manifests and their payloads
// from the cache (the blobs re-hashed), within the same bounds as when
// they were listed.
func (f *fetcher) readSignatures(ctx context.Context, recs []recordSig) ([]SignatureArtifact, error) {
	b := newSigBudget()
	var sigs []SignatureArtifact
	for _, s := range recs {
		if err := checkDigest(s.Digest); err != nil {
			return nil, f.fail(ErrTampered, "the cache's signature record %s: %v; remove it and fetch again", f.c.cache.recordPath(f.digest, f.ref), err)
		}
		desc := ocispec.Descriptor{Digest: digest.Digest(s.Digest), Size: s.Size}
		raw, err := f.c.cache.read(desc, maxManifestBytes)
		if err != nil {
			return nil, f.fail(ErrTampered, "signature manifest %s: %w", s.Digest, err)
		}
		got, err := f.signatureLayers(ctx, s.Format, desc, raw, b)
		if err != nil {
			return nil, err
		}
		sigs = append(sigs, got...)
	}
	return sigs, nil
}

// errTooManySignatures stops a referrers listing past maxSignatures.
var errTooManySignatures = errors.New("too many signature referrers")

// list finds, fetches and caches the signature artifacts of the manifest
// in f's repository: cosign bundles among its referrers (the referrers
// API, or the sha256-HEX tag index where the registry has no API), and the
// legacy sha256-HEX.sig tag; then records them for the repository.
//
// A signature artifact that cannot be read is not recorded; it is returned
// in unusable, for Verify to name.
func (f *fetcher) list(ctx context.Context) (sigs []SignatureArtifact, unusable []sigFailure, err error) {
	subject := ocispec.Descriptor{Digest: digest.Digest(f.digest)}
	var bundles []ocispec.Descriptor
	seen := map[digest.Digest]bool{}
	err = f.repo.Referrers(ctx, subject, "", func(refs []ocispec.Descriptor) error {
		for _, r := range refs {
			if strings.HasPrefix(r.ArtifactType, mediaTypeBundlePrefix) && !seen[r.Digest] {
				seen[r.Digest] = true
				bundles = append(bundles, r)
				if len(bundles) > maxSignatures {
					return errTooManySignatures
				}
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errTooManySignatures):
		return nil, nil, f.fail(ErrTooLarge, "the registry lists more than %d signature referrers for the manifest, more than morph reads", maxSignatures)
	case errors.Is(err, errdef.ErrTooManyPages):
		return nil, nil, f.fail(ErrTooLarge, "the registry's referrers list runs past %d pages, more than morph reads", maxReferrerPages)
	case err != nil:
		return nil, nil, f.network(ctx, "referrers", err)
	}
	if err := f.valid("referrer", bundles...); err != nil {
		return nil, nil, err
	}
	type found struct {
		format string
		ref    string
	}
	var todo []found
	for _, b := range bundles {
		todo = append(todo, found{FormatBundle, b.Digest.String()})
	}
	todo = append(todo, found{FormatSigTag, "sha256-" + hexOf(f.digest) + ".sig"})
	budget := newSigBudget()
	var recs []recordSig
	for _, s := range todo {
		desc, b, _, err := f.manifest(ctx, s.ref)
		if s.format == FormatSigTag && errors.Is(err, errdef.ErrNotFound) {
			continue
		}
		var got []SignatureArtifact
		if err == nil {
			got, err = f.signatureLayers(ctx, s.format, desc, b, budget)
		}
		if unusableSignature(err) {
			// One signature artifact that cannot be read does not make the
			// manifest unusable (anyone who may push a referrer could
			// otherwise block an unsigned plugin): Verify names it.
			f.c.log.WarnContext(ctx, "oci: an unusable signature artifact", "ref", f.ref.String(), "digest", f.digest, "signature", s.ref, "err", err)
			var oe *Error
			if errors.As(err, &oe) {
				err = oe.Err // the reference and digest are the Artifact's
			}
			unusable = append(unusable, sigFailure{digest: s.ref, format: s.format, err: err})
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		sigs = append(sigs, got...)
		recs = append(recs, recordSig{Format: s.format, Digest: desc.Digest.String(), Size: desc.Size})
	}
	if err := f.c.cache.writeRecord(f.digest, f.ref, recs); err != nil {
		return nil, nil, err
	}
	return sigs, unusable, nil
}

// overBudget is ErrTooLarge for the signatures of a manifest together
// (count, total bytes), as opposed to one signature artifact's.
func (f *fetcher) overBudget(format string, a ...any) error {
	return &Error{Ref: f.ref.String(), Digest: f.digest, Kind: ErrTooLarge, Err: budgetError{fmt.Errorf(format, a...)}}
}

// budgetError marks overBudget's detail.
type budgetError struct{ error }

func (e budgetError) Unwrap() error { return e.error }

// unusableSignature reports a refusal about one signature artifact (not
// there, not JSON, too large, not matching its digest), as opposed to the
// registry being unreachable or listing too much.
func unusableSignature(err error) bool {
	if err == nil || errors.As(err, new(budgetError)) {
		return false
	}
	return errors.Is(err, ErrLayout) || errors.Is(err, ErrRegistry) || errors.Is(err, ErrTampered) || errors.Is(err, ErrTooLarge)
}

// sigBudget is what one manifest's signatures have used of their bounds;
// a signature seen twice (the same payload, and for sig-tag the same
// signature annotation) counts, and is returned, once.
type sigBudget struct {
	seen  map[string]bool
	count int
	bytes int64
}

func newSigBudget() *sigBudget { return &sigBudget{seen: map[string]bool{}} }

// signatureLayers reads a signature manifest's payload layers (fetching
// them when online): the bundle, or each simple-signing payload with its
// layer's annotations; within b's bounds.
func (f *fetcher) signatureLayers(ctx context.Context, format string, desc ocispec.Descriptor, raw []byte, b *sigBudget) ([]SignatureArtifact, error) {
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, f.fail(ErrLayout, "signature manifest %s is not JSON: %v", desc.Digest, err)
	}
	if b.bytes += int64(len(raw)); b.bytes > maxSignatureTotal {
		return nil, f.overBudget("the signatures of the manifest come to more than %d bytes, more than morph reads", maxSignatureTotal)
	}
	want := mediaTypeSimpleSigning
	if format == FormatBundle {
		want = mediaTypeBundlePrefix
	}
	var sigs []SignatureArtifact
	for _, l := range m.Layers {
		if !strings.HasPrefix(l.MediaType, want) {
			continue
		}
		if err := f.valid("signature layer", l); err != nil {
			return nil, err
		}
		key := l.Digest.String()
		if format == FormatSigTag {
			key += " " + l.Annotations[annSignature]
		}
		if b.seen[key] {
			continue
		}
		b.seen[key] = true
		switch b.count++; {
		case l.Size < 0 || l.Size > maxSignatureBytes:
			return nil, f.fail(ErrTooLarge, "signature layer %s claims %d bytes, over the %d bytes morph reads", l.Digest, l.Size, maxSignatureBytes)
		case b.count > maxSignatures:
			return nil, f.overBudget("the manifest has more than %d signatures, more than morph reads", maxSignatures)
		case b.bytes+l.Size > maxSignatureTotal:
			return nil, f.overBudget("the signatures of the manifest come to more than %d bytes, more than morph reads", maxSignatureTotal)
		}
		b.bytes += l.Size
		if _, err := f.blob(ctx, l); err != nil {
			return nil, err
		}
		payload, err := f.c.cache.read(l, maxSignatureBytes)
		if err != nil {
			return nil, f.fail(ErrTampered, "signature layer %s: %w", l.Digest, err)
		}
		sig := SignatureArtifact{Format: format, Digest: desc.Digest.String(), Payload: payload}
		if format == FormatSigTag {
			sig.Annotations = l.Annotations
		}
		sigs = append(sigs, sig)
	}
	return sigs, nil
}

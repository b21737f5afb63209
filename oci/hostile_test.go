package oci

// Regression tests for a hostile or failing registry, on an httptest
// registry of a few handlers (no tools, 127.0.0.1 only): the review of the
// package found each of these (/work/helpers/issue28/oci-review.md).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

const (
	typeManifest = "application/vnd.oci.image.manifest.v1+json"
	typeIndex    = "application/vnd.oci.image.index.v1+json"
	typeBundle   = "application/vnd.dev.sigstore.bundle.v0.3+json"
	typeTarGzip  = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// hostile is a tiny registry serving one repository, "plug": manifests by
// digest or tag, blobs by digest, and an optional handler tried first.
type hostile struct {
	manifests map[string][]byte // digest or tag
	types     map[string]string // Content-Type per manifest key
	blobs     map[string][]byte
	other     func(w http.ResponseWriter, r *http.Request) bool
	blobGets  atomic.Int64
	served    atomic.Int64 // bytes of manifests and blobs
}

func newHostile() *hostile {
	return &hostile{manifests: map[string][]byte{}, types: map[string]string{}, blobs: map[string][]byte{}}
}

func dg(b []byte) string { h := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(h[:]) }

func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.other != nil && h.other(w, r) {
		return
	}
	p := r.URL.Path
	switch {
	case p == "/v2/":
	case strings.HasPrefix(p, "/v2/plug/manifests/"):
		k := strings.TrimPrefix(p, "/v2/plug/manifests/")
		b, ok := h.manifests[k]
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"no"}]}`))
			return
		}
		w.Header().Set("Content-Type", h.types[k])
		w.Header().Set("Docker-Content-Digest", dg(b))
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		if r.Method != http.MethodHead {
			h.served.Add(int64(len(b)))
			w.Write(b)
		}
	case strings.HasPrefix(p, "/v2/plug/blobs/"):
		h.blobGets.Add(1)
		b, ok := h.blobs[strings.TrimPrefix(p, "/v2/plug/blobs/")]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		h.served.Add(int64(len(b)))
		w.Write(b)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// addManifest serves b by its digest and, when tag is set, by tag, with
// Content-Type typ; it gives the digest.
func (h *hostile) addManifest(tag, typ string, b []byte) string {
	d := dg(b)
	h.manifests[d], h.types[d] = b, typ
	if tag != "" {
		h.manifests[tag], h.types[tag] = b, typ
	}
	return d
}

// layer is a descriptor's JSON for a blob served with claimed size.
func (h *hostile) layer(typ string, b []byte, size int) string {
	h.blobs[dg(b)] = b
	return fmt.Sprintf(`{"mediaType":%q,"digest":%q,"size":%d}`, typ, dg(b), size)
}

// image is an image manifest (mediaType set) of the given layers.
func image(layers ...string) []byte {
	return []byte(`{"schemaVersion":2,"mediaType":"` + typeManifest + `","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[` + strings.Join(layers, ",") + `]}`)
}

// plugin serves a one-layer artifact of module m as tag v1, giving its digest.
func (h *hostile) plugin(m []byte) string {
	return h.addManifest("v1", typeManifest, image(h.layer("application/wasm", m, len(m))))
}

// start serves h; the client (on cache, or a new one when "") and the
// reference plug:v1 on it.
func (h *hostile) start(t *testing.T, cache string, set func(*Options)) (*Client, Ref) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return hostileClient(t, srv.Listener.Addr().String(), cache, set)
}

func hostileClient(t *testing.T, addr, cache string, set func(*Options)) (*Client, Ref) {
	t.Helper()
	if cache == "" {
		cache = t.TempDir()
	}
	o := Options{CacheDir: cache, PlainHTTP: []string{"127.0.0.1:*"}, Credentials: func(context.Context, string) (auth.Credential, error) { return auth.EmptyCredential, nil }}
	if set != nil {
		set(&o)
	}
	c, err := NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRef(Scheme + addr + "/plug:v1")
	if err != nil {
		t.Fatal(err)
	}
	return c, r
}

// bundleIndex serves the sha256-HEX tag-schema referrers index of d
// listing the signature manifests sms.
func (h *hostile) bundleIndex(d string, sms ...string) {
	var refs []string
	for _, sm := range sms {
		refs = append(refs, fmt.Sprintf(`{"mediaType":%q,"artifactType":%q,"digest":%q,"size":%d}`, typeManifest, typeBundle, sm, len(h.manifests[sm])))
	}
	h.addManifest("sha256-"+hexOf(d), typeIndex, []byte(`{"schemaVersion":2,"mediaType":"`+typeIndex+`","manifests":[`+strings.Join(refs, ",")+`]}`))
}

// TestReferrersBounded (H1): a referrers API whose every page names a
// next one, and one listing more bundles than morph reads, are refused
// (ErrTooLarge) after a bounded number of requests.
func TestReferrersBounded(t *testing.T) {
	t.Run("endless-pages", func(t *testing.T) {
		h := newHostile()
		d := h.plugin(wasm("r1"))
		var pages atomic.Int64
		h.other = func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasPrefix(r.URL.Path, "/v2/plug/referrers/") {
				return false
			}
			n := pages.Add(1)
			w.Header().Set("Content-Type", typeIndex)
			w.Header().Set("Link", fmt.Sprintf(`</v2/plug/referrers/%s?page=%d>; rel="next"`, d, n))
			fmt.Fprintf(w, `{"schemaVersion":2,"mediaType":%q,"manifests":[]}`, typeIndex)
			return true
		}
		c, r := h.start(t, "", nil)
		_, err := c.Fetch(context.Background(), r, d)
		wantRefusal(t, err, ErrTooLarge, "referrers list runs past 4 pages")
		if n := pages.Load(); n > maxReferrerPages {
			t.Errorf("%d referrer pages read, want at most %d", n, maxReferrerPages)
		}
	})
	t.Run("too-many-bundles", func(t *testing.T) {
		h := newHostile()
		d := h.plugin(wasm("r2"))
		var sms []string
		for i := range maxSignatures + 1 {
			sms = append(sms, h.addManifest("", typeManifest, image(h.layer(typeBundle, []byte(fmt.Sprint("bundle ", i)), 8))))
		}
		h.bundleIndex(d, sms...)
		c, r := h.start(t, "", nil)
		_, err := c.Fetch(context.Background(), r, d)
		wantRefusal(t, err, ErrTooLarge, "more than 16 signature referrers")
		if n := h.blobGets.Load(); n > 1 { // the module's
			t.Errorf("%d blob GETs, want none for the signatures", n)
		}
	})
}

// TestSignaturesBounded (H2): duplicates are one signature; past the count,
// a payload's size or the total, Fetch refuses (ErrTooLarge) before the
// blob is requested; a verification error lists a few failures.
func TestSignaturesBounded(t *testing.T) {
	t.Run("duplicates", func(t *testing.T) {
		// The review's amplification: one 16 KiB payload, one signature
		// manifest listing it 64 times, an index listing that 64 times:
		// 4096 payloads (64 MiB) were held, and read again from the cache.
		h := newHostile()
		d := h.plugin(wasm("s1"))
		payload := []byte(strings.Repeat("x", 16<<10))
		var layers []string
		for range 64 {
			layers = append(layers, h.layer(typeBundle, payload, len(payload)))
		}
		sm := h.addManifest("", typeManifest, image(layers...))
		h.bundleIndex(d, strings.Split(strings.Repeat(sm+" ", 64), " ")[:64]...)
		cache := t.TempDir()
		c, r := h.start(t, cache, nil)
		for _, from := range []string{"registry", "cache"} {
			a, err := c.Fetch(context.Background(), r, d)
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Signatures) != 1 || len(a.Signatures[0].Payload) != len(payload) {
				t.Fatalf("from the %s: %d signatures, want the one payload once", from, len(a.Signatures))
			}
		}
	})
	for _, tc := range []struct {
		name, says string
		sizes      []int // distinct payloads, one signature manifest
	}{
		{"count", "more than 16 signatures", slices.Repeat([]int{8}, maxSignatures+1)},
		{"total", "come to more than 8388608 bytes", []int{1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1<<20 - 4096, 8192}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostile()
			d := h.plugin(wasm("s2"))
			var layers []string
			for i, n := range tc.sizes {
				p := make([]byte, n) // distinct: i in the first bytes
				copy(p, fmt.Sprint(i, " "))
				layers = append(layers, h.layer(typeBundle, p, n))
			}
			sm := h.addManifest("", typeManifest, image(layers...))
			h.bundleIndex(d, sm)
			c, r := h.start(t, "", nil)
			_, err := c.Fetch(context.Background(), r, d)
			wantRefusal(t, err, ErrTooLarge, tc.says)
			if got := h.blobGets.Load() - 1; got >= int64(len(tc.sizes)) {
				t.Errorf("%d signature blobs fetched of %d, want the refusal before the last", got, len(tc.sizes))
			}
		})
	}
	t.Run("error-lists-five", func(t *testing.T) {
		a := &Artifact{Ref: Ref{Registry: "r", Repository: "p", Tag: "v1"}, Digest: testDigest("m")}
		for i := range maxSignatures {
			a.Signatures = append(a.Signatures, SignatureArtifact{Format: FormatBundle, Digest: testDigest(fmt.Sprint(i)), Payload: []byte("{}")})
		}
		key := filepath.Join(t.TempDir(), "k.pub")
		writePublicKey(t, key)
		_, err := VerifyArtifact(context.Background(), a, Policy{Key: key})
		wantRefusal(t, err, ErrBadSignature, "… and 11 more")
		if n := strings.Count(err.Error(), "signature sha256:"); n != maxFailuresListed {
			t.Errorf("the error describes %d signatures, want %d", n, maxFailuresListed)
		}
	})
}

// TestUnusableSignature (H2): a signature artifact that cannot be read (not
// served, too large, not a bundle) does not stop the Fetch; Verify names
// each, as a bad signature rather than none.
func TestUnusableSignature(t *testing.T) {
	h := newHostile()
	d := h.plugin(wasm("u1"))
	gone := dg([]byte("never served"))
	big := h.addManifest("", typeManifest, image(fmt.Sprintf(`{"mediaType":%q,"digest":%q,"size":%d}`, typeBundle, dg([]byte("big")), maxSignatureBytes+1)))
	junk := h.addManifest("", typeManifest, image(h.layer(typeBundle, []byte(`{"junk":1}`), 10)))
	h.manifests[gone] = []byte("{}") // listed with its size, then removed
	h.bundleIndex(d, gone, big, junk)
	delete(h.manifests, gone)
	key := filepath.Join(t.TempDir(), "k.pub")
	writePublicKey(t, key)
	cache := t.TempDir()
	c, r := h.start(t, cache, nil)
	a, err := c.Fetch(context.Background(), r, d)
	if err != nil || len(a.Signatures) != 1 || a.Signatures[0].Digest != junk {
		t.Fatalf("Fetch: %v, %+v; want the one readable signature", err, a)
	}
	_, err = c.Verify(context.Background(), a, Policy{Key: key})
	wantRefusal(t, err, ErrBadSignature, "signature "+gone+" (bundle)", "not found", "signature "+big+" (bundle)", "claims 1048577 bytes", "signature "+junk+" (bundle)")
}

// TestRegistryTextEscaped (LOW 1, 3): a registry's error text reaches the
// error escaped, the error is ErrRegistry, and errors.As still reaches
// oras-go's error.
func TestRegistryTextEscaped(t *testing.T) {
	h := newHostile()
	d := h.plugin(wasm("e1"))
	h.other = func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/v2/plug/manifests/sha256:") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"errors":[{"code":"DENIED","message":"\u001b]8;;http://evil\u0007click\u001b]8;;\u0007 \u001b[2J"}]}`))
			return true
		}
		return false
	}
	c, r := h.start(t, "", nil)
	_, err := c.Fetch(context.Background(), r, d)
	wantRefusal(t, err, ErrRegistry, `\x1b]8;;http://evil`, "log in to")
	if strings.ContainsAny(err.Error(), "\x1b\a") {
		t.Errorf("error %q holds the registry's control bytes", err)
	}
	var resp *errcode.ErrorResponse
	if !errors.As(err, &resp) || resp.StatusCode != http.StatusForbidden {
		t.Errorf("errors.As(*errcode.ErrorResponse) = %v, want the registry's 403", resp)
	}
}

// TestIdentityRegexpAnchored (M1): an identity or issuer regexp matches
// the whole string, not a part of it (cosign's and sigstore-go's
// regexp.MatchString would accept both signers below).
func TestIdentityRegexpAnchored(t *testing.T) {
	vs := newVirtualSigstore(t)
	trusted := trustedRootFile(t, vs, false)
	digest := testDigest("manifest")
	evil := "https://github.com/evil/x/.github/workflows/release.yml@refs/heads/github.com/acme/plug"
	signed := func(identity string) *Artifact {
		sig := SignatureArtifact{Format: FormatBundle, Digest: testDigest("sig"), Payload: keylessBundle(t, vs, identity, digest, cosignSignPredicate)}
		return &Artifact{Ref: Ref{Registry: "r", Repository: "p", Tag: "v1"}, Digest: digest, Signatures: []SignatureArtifact{sig}}
	}
	_, err := VerifyArtifact(context.Background(), signed(evil), Policy{IdentityRegexp: `github\.com/acme/plug`, Issuer: testIssuer, TrustedRoot: trusted})
	wantRefusal(t, err, ErrIdentity, `^(?:github\.com/acme/plug)$`)
	_, err = VerifyArtifact(context.Background(), signed(testIdentity), Policy{Identity: testIdentity, IssuerRegexp: `https://token\.actions`, TrustedRoot: trusted})
	wantRefusal(t, err, ErrIdentity)
	if _, err := VerifyArtifact(context.Background(), signed(testIdentity), Policy{IdentityRegexp: `https://github\.com/acme/plug/\.github/workflows/[^/]+@refs/tags/v.*`, Issuer: testIssuer, TrustedRoot: trusted}); err != nil {
		t.Fatalf("a regexp matching the whole identity: %v", err)
	}
}

// TestManifestKindFromBytes (M2): index or image is decided by the
// manifest's own bytes, never by the Content-Type the registry sends.
func TestManifestKindFromBytes(t *testing.T) {
	h := newHostile()
	a, b := wasm("kA"), wasm("kB")
	ma := image(h.layer("application/wasm", a, len(a)))
	da := h.addManifest("", typeManifest, ma)
	entry := fmt.Sprintf(`{"mediaType":%q,"digest":%q,"size":%d,"platform":{"os":"wasip1","architecture":"wasm"}}`, typeManifest, da, len(ma))
	both := h.addManifest("", typeIndex, []byte(`{"schemaVersion":2,"manifests":[`+entry+`],"layers":[`+h.layer("application/wasm", b, len(b))+`]}`))
	neither := h.addManifest("", typeIndex, []byte(`{"schemaVersion":2}`))
	bare := h.addManifest("", typeIndex, []byte(`{"schemaVersion":2,"layers":[`+h.layer("application/wasm", b, len(b))+`]}`))
	lying := h.addManifest("", typeIndex, []byte(`{"schemaVersion":2,"mediaType":"`+typeIndex+`","layers":[`+h.layer("application/wasm", b, len(b))+`]}`))
	wrongEntry := h.addManifest("", typeIndex, []byte(`{"schemaVersion":2,"mediaType":"`+typeIndex+`","manifests":[`+strings.Replace(entry, typeManifest, "application/vnd.docker.distribution.manifest.v2+json", 1)+`]}`))
	for _, ct := range []string{typeIndex, typeManifest} {
		for _, d := range []string{both, neither, bare, lying, wrongEntry} {
			h.types[d] = ct
		}
		t.Run(ct, func(t *testing.T) {
			c, r := h.start(t, "", nil)
			for _, tc := range []struct{ name, d, says string }{
				{"both", both, "lists both manifests and layers, or neither"},
				{"neither", neither, "lists both manifests and layers, or neither"},
				{"index-type-with-layers", lying, "says it is an index"},
				{"entry-type", wrongEntry, "the manifest it names says"},
			} {
				_, err := c.Fetch(context.Background(), r, tc.d)
				if !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("%s: %v, want ErrLayout saying %q", tc.name, err, tc.says)
				}
			}
			art, err := c.Fetch(context.Background(), r, bare)
			if err != nil || art.ModuleSHA256 != sha(b) {
				t.Errorf("a manifest with layers and no mediaType: %+v, %v; want module B whatever the Content-Type", art, err)
			}
		})
	}
}

// stallable serves h, or, once stall is set, answers nothing (headers or
// the rest of a body) until the client gives up.
type stallable struct {
	h     *hostile
	stall atomic.Int32 // 0 serve, 1 no headers, 2 half a blob then nothing
}

func (s *stallable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch s.stall.Load() {
	case 1:
		<-r.Context().Done()
		return
	case 2:
		if b, ok := s.h.blobs[strings.TrimPrefix(r.URL.Path, "/v2/plug/blobs/")]; ok {
			w.Header().Set("Content-Length", fmt.Sprint(len(b)))
			w.Write(b[:len(b)/2])
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
	}
	s.h.ServeHTTP(w, r)
}

// TestStalledRegistry (M3): a registry that accepts the connection and
// then says nothing ends the request at Options.Timeout as unreachable
// (ErrNotCached), so that the locked digest in the cache still runs; the
// caller's own deadline is far away.
func TestStalledRegistry(t *testing.T) {
	h := newHostile()
	cached := h.plugin(wasm("t1"))
	other := h.addManifest("", typeManifest, image(h.layer("application/wasm", wasm("t2"), len(wasm("t2")))))
	s := &stallable{h: h}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	cache := t.TempDir()
	c, r := hostileClient(t, srv.Listener.Addr().String(), cache, func(o *Options) { o.Timeout = 200 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Fetch(ctx, r, cached); err != nil {
		t.Fatal(err)
	}
	s.stall.Store(1)
	_, err := c.Resolve(ctx, r)
	wantRefusal(t, err, ErrNotCached, "cannot be reached", "[oci] timeout")
	if a, err := c.Fetch(ctx, r, cached); err != nil || a.Digest != cached {
		t.Fatalf("Fetch of the cached digest while the registry stalls: %v", err)
	}
	_, err = c.Fetch(ctx, r, other)
	wantRefusal(t, err, ErrNotCached)
	s.stall.Store(2)
	_, err = c.Fetch(ctx, r, other)
	wantRefusal(t, err, ErrNotCached, "blob sha256:")
	if ctx.Err() != nil {
		t.Fatal("the test's own deadline ended it")
	}
	t.Run("hung-listener", func(t *testing.T) {
		// The review's repro: a listener that accepts and never answers.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
			}
		}()
		c, r := hostileClient(t, ln.Addr().String(), "", func(o *Options) { o.Timeout = 200 * time.Millisecond })
		_, err = c.Resolve(ctx, r)
		wantRefusal(t, err, ErrNotCached)
	})
}

// TestTotalBytes (M4): the layers that may hold the module are bounded in
// number and in claimed bytes together, before any blob request.
func TestTotalBytes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int
		says  string
	}{
		{"many-tar-layers", []int{10, 10, 10, 10, 10, 10, 10, 10, 10}, "9 tar layers that may hold the module, more than the 8"},
		{"sum", []int{30 << 20, 30 << 20, 30 << 20}, "the 3 layers that may hold the module claim 94371840 bytes together, over [wasm.limits] module_mb = 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostile()
			var layers []string
			for i, n := range tc.sizes {
				layers = append(layers, h.layer(typeTarGzip, []byte(fmt.Sprint("tar", i)), n))
			}
			d := h.addManifest("v1", typeManifest, image(layers...))
			c, r := h.start(t, "", nil)
			_, err := c.Fetch(context.Background(), r, d)
			wantRefusal(t, err, ErrTooLarge, tc.says)
			if n := h.blobGets.Load(); n != 0 {
				t.Errorf("%d blob GETs, want none", n)
			}
		})
	}
}

// TestCacheRederived (M5, LOW 6): the module is derived again from the
// cached manifest on each Fetch; a manifest lying about the size of a
// cached layer, or a cache file changed, is refused (ErrTampered).
func TestCacheRederived(t *testing.T) {
	h := newHostile()
	m := wasm("c1")
	d := h.plugin(m)
	lie := h.addManifest("v2", typeManifest, image(fmt.Sprintf(`{"mediaType":"application/wasm","digest":%q,"size":1}`, dg(m))))
	cache := t.TempDir()
	c, r := h.start(t, cache, nil)
	if _, err := c.Fetch(context.Background(), r, d); err != nil {
		t.Fatal(err)
	}
	_, err := c.Fetch(context.Background(), r, lie)
	wantRefusal(t, err, ErrTampered, "the cache holds", "the manifest says 1")

	offline, _ := hostileClient(t, "127.0.0.1:1", cache, func(o *Options) { o.Offline = true })
	blob := filepath.Join(cache, "blobs", "sha256", hexOf(dg(m)))
	other := append([]byte("\x00asm\x01\x00\x00\x00"), make([]byte, len(m)-8)...)
	if err := os.WriteFile(blob, other, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = offline.Fetch(context.Background(), r, d)
	wantRefusal(t, err, ErrTampered, "hashes to "+dg(other))

	// A cached file that an index entry names by digest is read as a
	// manifest only within 4 MiB.
	big := make([]byte, maxManifestBytes+1)
	if err := os.WriteFile(filepath.Join(cache, "blobs", "sha256", hexOf(dg(big))), big, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = offline.Fetch(context.Background(), r, dg(big))
	wantRefusal(t, err, ErrTampered, "at most 4194304")

	// A signature record that is not JSON, or names no digest.
	records, _ := filepath.Glob(filepath.Join(cache, "artifacts", "sha256", hexOf(d)+"-*.json"))
	if len(records) != 1 {
		t.Fatalf("signature records %q, want one for the one repository", records)
	}
	for _, junk := range []string{"{", `{"signatures":[{"format":"bundle","digest":"sha256:../../x","size":1}]}`} {
		if err := os.WriteFile(records[0], []byte(junk), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(blob, m, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = offline.Fetch(context.Background(), r, d)
		wantRefusal(t, err, ErrTampered, records[0])
	}
}

// TestSignaturesPerRepository (M6): signatures are recorded per
// repository, so a mirror that lists none does not hide another's; and
// Client.Verify lists them again when none verifies.
func TestSignaturesPerRepository(t *testing.T) {
	m := wasm("m1")
	mirror, origin := newHostile(), newHostile()
	d := mirror.plugin(m)
	origin.plugin(m)
	sm := origin.addManifest("", typeManifest, image(origin.layer(typeBundle, []byte(`{"junk":1}`), 10)))
	origin.bundleIndex(d, sm)
	cache := t.TempDir()
	cm, rm := mirror.start(t, cache, nil)
	a, err := cm.Fetch(context.Background(), rm, d)
	if err != nil || len(a.Signatures) != 0 {
		t.Fatalf("mirror: %d signatures, %v; want none", len(a.Signatures), err)
	}
	co, ro := origin.start(t, cache, nil)
	if a, err = co.Fetch(context.Background(), ro, d); err != nil || len(a.Signatures) != 1 {
		t.Fatalf("origin after the mirror, one cache: %d signatures, %v; want the origin's one", len(a.Signatures), err)
	}
	// RelistSignatures: a Fetch of the cached manifest lists them again.
	sm2 := origin.addManifest("", typeManifest, image(origin.layer(typeBundle, []byte(`{"junk":3}`), 10)))
	origin.bundleIndex(d, sm, sm2)
	if a, err = co.Fetch(context.Background(), ro, d); err != nil || len(a.Signatures) != 1 {
		t.Fatalf("origin, cached: %d signatures, %v; want the recorded one", len(a.Signatures), err)
	}
	relist, _ := hostileClient(t, ro.Registry, cache, func(o *Options) { o.RelistSignatures = true })
	if a, err = relist.Fetch(context.Background(), ro, d); err != nil || len(a.Signatures) != 2 {
		t.Fatalf("origin with RelistSignatures: %d signatures, %v; want both", len(a.Signatures), err)
	}

	// A signature attached to the mirror after its first Fetch: the cached
	// answer still says none, Verify lists again and finds it.
	msm := mirror.addManifest("", typeManifest, image(mirror.layer(typeBundle, []byte(`{"junk":2}`), 10)))
	mirror.bundleIndex(d, msm)
	a, err = cm.Fetch(context.Background(), rm, d)
	if err != nil || len(a.Signatures) != 0 {
		t.Fatalf("mirror again: %d signatures, %v; want the cached none", len(a.Signatures), err)
	}
	key := filepath.Join(t.TempDir(), "k.pub")
	writePublicKey(t, key)
	_, err = cm.Verify(context.Background(), a, Policy{Key: key})
	wantRefusal(t, err, ErrBadSignature, "signature "+msm)
	if a, err = cm.Fetch(context.Background(), rm, d); err != nil || len(a.Signatures) != 1 {
		t.Fatalf("mirror after Verify listed again: %d signatures, %v; want the new one recorded", len(a.Signatures), err)
	}
}

// TestRefusalsTyped (LOW 3): every refusal is an *Error of a kind.
func TestRefusalsTyped(t *testing.T) {
	h := newHostile()
	m := wasm("y1")
	d := h.plugin(m)
	missing := h.addManifest("", typeManifest, image(fmt.Sprintf(`{"mediaType":"application/wasm","digest":%q,"size":3}`, dg([]byte("nop")))))
	c, r := h.start(t, "", nil)
	ctx := context.Background()
	_, err := c.Fetch(ctx, r, "sha256:ABC")
	wantRefusal(t, err, ErrBadRef)
	r2 := r
	r2.Digest = testDigest("other")
	_, err = c.Fetch(ctx, r2, d)
	wantRefusal(t, err, ErrLockMismatch)
	_, err = c.Fetch(ctx, r, missing)
	wantRefusal(t, err, ErrRegistry)
	if !errors.Is(err, errdef.ErrNotFound) {
		t.Errorf("a missing blob: %v, want errdef.ErrNotFound reachable", err)
	}
	off, _ := hostileClient(t, "127.0.0.1:1", "", func(o *Options) { o.Offline = true })
	wantRefusal(t, off.RefreshPublicRoot(ctx), ErrNotCached, "offline")
}

// TestListsBounded (LOW 2): a refusal lists at most 10 of the registry's
// media types, then how many more.
func TestListsBounded(t *testing.T) {
	h := newHostile()
	var layers []string
	for i := range 30 {
		layers = append(layers, h.layer(fmt.Sprintf("application/x-junk-%d", i), []byte(fmt.Sprint(i)), 2))
	}
	d := h.addManifest("v1", typeManifest, image(layers...))
	c, r := h.start(t, "", nil)
	_, err := c.Fetch(context.Background(), r, d)
	wantRefusal(t, err, ErrLayout, `"application/x-junk-9" … and 20 more`)
	if strings.Contains(err.Error(), "junk-10") {
		t.Errorf("error %q lists past 10", err)
	}
}

// TestPlainHTTPPattern (LOW 4): HOST is compared exactly; only the port
// may be "*".
func TestPlainHTTPPattern(t *testing.T) {
	for _, bad := range []string{"*", "*.lan", "[a-z]*", "[", "", "host:", "host:0", "host:70000", "host:8*", "::1", "a..b", "127.0.0.1:*:*", "http://127.0.0.1:5000", "127.0.0.1:http", "reg.lan/path"} {
		if p, err := ParsePlainHTTP(bad); err == nil {
			t.Errorf("ParsePlainHTTP(%q) = %v, want an error", bad, p)
		}
	}
	for _, tc := range []struct {
		pattern string
		match   []string
		miss    []string
	}{
		{"127.0.0.1:*", []string{"127.0.0.1:5000", "127.0.0.1:1"}, []string{"127.0.0.1", "127.0.0.10:5000", "localhost:5000"}},
		{"localhost:5000", []string{"localhost:5000", "LocalHost:5000"}, []string{"localhost:5001", "localhost", "evil.localhost:5000"}},
		{"registry.lan", []string{"registry.lan"}, []string{"registry.lan:5000", "x.registry.lan", "registry.lan.evil"}},
		{"[::1]:*", []string{"[::1]:5000"}, []string{"[::2]:5000", "[::1]"}},
		{"[::1]", []string{"[::1]"}, []string{"[::1]:5000"}},
	} {
		p, err := ParsePlainHTTP(tc.pattern)
		if err != nil {
			t.Fatalf("ParsePlainHTTP(%q): %v", tc.pattern, err)
		}
		if p.String() != strings.ToLower(tc.pattern) {
			t.Errorf("String() = %q, want %q", p, tc.pattern)
		}
		for _, h := range tc.match {
			if !p.Match(h) {
				t.Errorf("%q does not match %q", tc.pattern, h)
			}
		}
		for _, h := range tc.miss {
			if p.Match(h) {
				t.Errorf("%q matches %q", tc.pattern, h)
			}
		}
	}
	if _, err := NewClient(Options{CacheDir: t.TempDir(), PlainHTTP: []string{"*"}, Offline: true}); err == nil {
		t.Error(`NewClient with plain_http "*": no error`)
	}
}

// TestStaleTempSwept (LOW 7): NewClient removes the temporary files a
// killed Fetch left a day ago, not a Fetch's in progress.
func TestStaleTempSwept(t *testing.T) {
	cache := t.TempDir()
	var old, fresh []string
	for _, d := range cacheDirs {
		dir := filepath.Join(cache, filepath.FromSlash(d))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		o, f := filepath.Join(dir, ".tmp-old"), filepath.Join(dir, ".tmp-new")
		for _, p := range []string{o, f} {
			if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		day := time.Now().Add(-25 * time.Hour)
		if err := os.Chtimes(o, day, day); err != nil {
			t.Fatal(err)
		}
		old, fresh = append(old, o), append(fresh, f)
	}
	if _, err := NewClient(Options{CacheDir: cache, Offline: true}); err != nil {
		t.Fatal(err)
	}
	for _, p := range old {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s (a day old) was not removed", p)
		}
	}
	for _, p := range fresh {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s (new) was removed: %v", p, err)
		}
	}
}

// TestDockerHubName (LOW 9): docker.io is mapped as docker maps it.
func TestDockerHubName(t *testing.T) {
	for _, tc := range []struct{ ref, host, repo string }{
		{"oci://docker.io/alpine:3", "registry-1.docker.io", "library/alpine"},
		{"oci://docker.io/acme/plug:v1", "registry-1.docker.io", "acme/plug"},
		{"oci://index.docker.io/acme/plug:v1", "registry-1.docker.io", "acme/plug"},
		{"oci://ghcr.io/alpine:3", "ghcr.io", "alpine"},
	} {
		r, err := ParseRef(tc.ref)
		if err != nil {
			t.Fatal(err)
		}
		if host, repo := remoteName(r); host != tc.host || repo != tc.repo {
			t.Errorf("%s is served at %s/%s, want %s/%s", tc.ref, host, repo, tc.host, tc.repo)
		}
	}
}

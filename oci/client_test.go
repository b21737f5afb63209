package oci

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/morphhost/morph/oci/internal/ocitest"
)

func TestOfflineCache(t *testing.T) {
	e := newEnv(t)
	m := wasm("offline")
	e.push("plugins/offline:v1", map[string][]byte{"plugin.wasm": m}, "plugin.wasm")
	e.push("plugins/offline:v2", map[string][]byte{"plugin.wasm": wasm("offline-never-fetched")}, "plugin.wasm")
	cached, err := e.fetch(e.client(nil), "plugins/offline:v1")
	if err != nil {
		t.Fatal(err)
	}
	unknown := e.ref("plugins/offline:v2")
	unknownDigest := ocitest.Digest(t, e.reg.Ref("plugins/offline:v2"))
	e.reg.Stop()

	for _, offline := range []bool{false, true} {
		c := e.client(func(o *Options) { o.Offline = offline })
		ctx := context.Background()
		a, err := c.Fetch(ctx, cached.Ref, cached.Digest)
		if err != nil || a.ModuleSHA256 != sha(m) {
			t.Fatalf("offline=%v, registry down: Fetch of the cached digest: %+v, %v", offline, a, err)
		}
		_, err = c.Fetch(ctx, unknown, unknownDigest)
		if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), unknown.String()+"@"+unknownDigest) {
			t.Errorf("offline=%v, registry down: Fetch of a digest not cached: %v, want ErrNotCached naming the reference", offline, err)
		}
		_, err = c.Resolve(ctx, unknown)
		if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), unknown.String()) {
			t.Errorf("offline=%v, registry down: Resolve: %v, want ErrNotCached naming the reference", offline, err)
		}
	}
}

func TestDockerConfigAuth(t *testing.T) {
	e := newEnv(t)
	m := wasm("auth")
	e.push("plugins/auth:v1", map[string][]byte{"plugin.wasm": m}, "plugin.wasm")
	var authorized atomic.Int64
	addr := e.proxy(func(w http.ResponseWriter, r *http.Request) bool {
		if u, p, ok := r.BasicAuth(); ok && u == "morph" && p == "s3cret" {
			authorized.Add(1)
			return true
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="morph-test"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return false
	})
	ref := via(e.ref("plugins/auth:v1"), addr)
	config := func(t *testing.T, auths map[string]string) {
		dir := t.TempDir()
		entries := map[string]any{}
		for host, userpass := range auths {
			entries[host] = map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(userpass))}
		}
		b, _ := json.Marshal(map[string]any{"auths": entries})
		if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("DOCKER_CONFIG", dir)
	}

	t.Run("login", func(t *testing.T) {
		config(t, map[string]string{addr: "morph:s3cret", "other.example:443": "x:y"})
		e := e.with(t)
		e.cache = t.TempDir()
		a, err := fetchVia(e.client(nil), ref)
		if err != nil {
			t.Fatal(err)
		}
		if a.ModuleSHA256 != sha(m) || authorized.Load() == 0 {
			t.Fatalf("Fetch with the Docker config's credentials: module %s, %d authorized requests", a.ModuleSHA256, authorized.Load())
		}
	})
	for _, tc := range []struct {
		name  string
		auths map[string]string
	}{
		{"none", nil},
		{"wrong-password", map[string]string{addr: "morph:guess"}},
		{"other-registry", map[string]string{"127.0.0.1:1": "morph:s3cret"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config(t, tc.auths)
			e := e.with(t)
			e.cache = t.TempDir()
			before := authorized.Load()
			_, err := fetchVia(e.client(nil), ref)
			if err == nil || errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "log in to "+addr+" with docker login") {
				t.Fatalf("Fetch without the right credentials: %v, want a refusal saying to log in", err)
			}
			if n := authorized.Load() - before; n != 0 {
				t.Fatalf("%d requests were authorized", n)
			}
		})
	}
}

func TestSignaturesFound(t *testing.T) {
	e := newEnv(t)
	key, _ := ocitest.KeyPair(t, t.TempDir(), "k1")
	m := wasm("signed")
	e.push("plugins/signed:v1", map[string][]byte{"plugin.wasm": m}, "plugin.wasm")
	d := ocitest.Digest(t, e.reg.Ref("plugins/signed:v1"))
	ocitest.Sign(t, key, e.reg.Ref("plugins/signed@"+d), false)
	ocitest.Sign(t, key, e.reg.Ref("plugins/signed@"+d), true)

	a, err := e.fetch(e.client(nil), "plugins/signed:v1")
	if err != nil {
		t.Fatal(err)
	}
	check := func(a *Artifact) {
		t.Helper()
		var bundle, sig *SignatureArtifact
		for i, s := range a.Signatures {
			switch s.Format {
			case FormatBundle:
				bundle = &a.Signatures[i]
			case FormatSigTag:
				sig = &a.Signatures[i]
			}
		}
		if len(a.Signatures) != 2 || bundle == nil || sig == nil {
			t.Fatalf("Signatures = %+v, want one bundle and one sig-tag", a.Signatures)
		}
		var b struct {
			MediaType    string `json:"mediaType"`
			DSSEEnvelope struct {
				PayloadType string `json:"payloadType"`
			} `json:"dsseEnvelope"`
		}
		if err := json.Unmarshal(bundle.Payload, &b); err != nil || !strings.HasPrefix(b.MediaType, "application/vnd.dev.sigstore.bundle") || b.DSSEEnvelope.PayloadType != "application/vnd.in-toto+json" {
			t.Errorf("bundle payload %s (%v): want a Sigstore bundle with a DSSE in-toto envelope", bundle.Payload, err)
		}
		var p struct {
			Critical struct {
				Image struct {
					DockerManifestDigest string `json:"docker-manifest-digest"`
				} `json:"image"`
			} `json:"critical"`
		}
		if err := json.Unmarshal(sig.Payload, &p); err != nil || p.Critical.Image.DockerManifestDigest != d {
			t.Errorf("sig-tag payload %s (%v): want the simple-signing payload of %s", sig.Payload, err, d)
		}
		if sig.Annotations["dev.cosignproject.cosign/signature"] == "" {
			t.Errorf("sig-tag annotations %v: no dev.cosignproject.cosign/signature", sig.Annotations)
		}
		for _, s := range a.Signatures {
			if s.Digest == d || !strings.HasPrefix(s.Digest, "sha256:") {
				t.Errorf("signature artifact digest %q: want its own manifest's", s.Digest)
			}
		}
	}
	check(a)
	e.reg.Stop()
	again, err := e.client(func(o *Options) { o.Offline = true }).Fetch(context.Background(), a.Ref, a.Digest)
	if err != nil {
		t.Fatal(err)
	}
	check(again)
}

func TestResolve(t *testing.T) {
	e := newEnv(t)
	e.push("plugins/resolve:v1", map[string][]byte{"plugin.wasm": wasm("resolve-1")}, "plugin.wasm")
	e.push("plugins/resolve:v2", map[string][]byte{"plugin.wasm": wasm("resolve-2")}, "plugin.wasm")
	d1 := ocitest.Digest(t, e.reg.Ref("plugins/resolve:v1"))
	d2 := ocitest.Digest(t, e.reg.Ref("plugins/resolve:v2"))
	var requests []string
	var mu sync.Mutex
	addr := e.proxy(func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		requests = append(requests, r.Method+" "+r.URL.Path)
		mu.Unlock()
		return true
	})
	c := e.client(nil)
	for _, tc := range []struct {
		ref, want, request string
	}{
		{"plugins/resolve:v1", d1, "HEAD /v2/plugins/resolve/manifests/v1"},
		{"plugins/resolve@" + d2, d2, "HEAD /v2/plugins/resolve/manifests/" + d2},
		// Tag and digest: the tag's digest now, for a caller to compare.
		{"plugins/resolve:v2@" + d1, d2, "HEAD /v2/plugins/resolve/manifests/v2"},
	} {
		mu.Lock()
		requests = nil
		mu.Unlock()
		got, err := c.Resolve(context.Background(), via(e.ref(tc.ref), addr))
		mu.Lock()
		seen := slices.Clone(requests)
		mu.Unlock()
		if err != nil || got != tc.want || !slices.Equal(seen, []string{tc.request}) {
			t.Errorf("Resolve(%s) = %s, %v after requests %q; want %s after one %q", tc.ref, got, err, seen, tc.want, tc.request)
		}
	}
	_, err := e.client(func(o *Options) { o.PlainHTTP = nil }).Resolve(context.Background(), e.ref("plugins/resolve:v1"))
	if err == nil || !strings.Contains(err.Error(), `add "`+e.reg.Addr+`" to [oci] plain_http`) {
		t.Errorf("Resolve over HTTPS of a plain-HTTP registry: %v, want it to name plain_http", err)
	}
}

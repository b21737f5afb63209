package oci

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/morphhost/morph/oci/internal/ocitest"
)

// withLayerSize is the manifest name names with its first layer's size
// claimed as size.
func (e *env) withLayerSize(name string, size int64) []byte {
	e.t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(e.manifest(name)), &m); err != nil {
		e.t.Fatal(err)
	}
	m["layers"].([]any)[0].(map[string]any)["size"] = size
	b, err := json.Marshal(m)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// onlyManifests fails t unless the cache holds nothing but manifests
// (blobs/sha256/HEX of the given digests): no layer, no module, no record,
// no temporary file.
func onlyManifests(t *testing.T, dir string, digests ...string) {
	t.Helper()
	var want []string
	for _, d := range digests {
		want = append(want, "blobs/sha256/"+hexOf(d))
	}
	if got := cacheFiles(t, dir); !slices.Equal(got, want) {
		t.Errorf("cache holds %q, want only the manifest %q", got, want)
	}
}

// TestTampered: a registry serving other bytes under a layer's digest.
// Editing the blob in crane's --disk directory does not model it: crane
// v0.22.1 re-hashes a blob on every request and answers 404 for one that
// changed; so a proxy in front of the registry serves the edited bytes.
func TestTampered(t *testing.T) {
	e := newEnv(t)
	var target, bad atomic.Pointer[[]byte]
	var chunked atomic.Bool // no Content-Length: the body itself runs long
	addr := e.proxy(func(w http.ResponseWriter, r *http.Request) bool {
		m := target.Load()
		if m == nil || !strings.HasSuffix(r.URL.Path, "/blobs/sha256:"+sha(*m)) {
			return true
		}
		if chunked.Load() {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
		}
		w.Write(*bad.Load())
		return false
	})
	for _, tc := range []struct {
		name    string
		chunked bool
		tamper  func(m []byte) []byte
		says    func(m, bad []byte) string
	}{
		{"same-size", false, func(m []byte) []byte {
			bad := slices.Clone(m)
			bad[len(bad)-1] ^= 0xff
			return bad
		}, func(m, bad []byte) string { return "hashing to sha256:" + sha(bad) + "; expected sha256:" + sha(m) }},
		{"longer", false, func(m []byte) []byte { return append(slices.Clone(m), "more"...) }, func(m, bad []byte) string {
			return "serves " + strconv.Itoa(len(bad)) + " bytes, the manifest says " + strconv.Itoa(len(m))
		}},
		{"longer-chunked", true, func(m []byte) []byte { return append(slices.Clone(m), "more"...) }, func(m, bad []byte) string {
			return "serves more than " + strconv.Itoa(len(m)) + " bytes, the manifest says " + strconv.Itoa(len(m))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := e.with(t)
			e.cache = t.TempDir()
			m := wasm("tampered-" + tc.name)
			name := "plugins/tampered:" + tc.name
			e.push(name, map[string][]byte{"plugin.wasm": m}, "plugin.wasm")
			b := tc.tamper(m)
			target.Store(&m)
			chunked.Store(tc.chunked)
			bad.Store(&b)
			_, err := fetchVia(e.client(nil), via(e.ref(name), addr))
			if !errors.Is(err, ErrTampered) || !strings.Contains(err.Error(), tc.says(m, b)) {
				t.Fatalf("Fetch of a tampered layer: %v, want ErrTampered saying %q", err, tc.says(m, b))
			}
			onlyManifests(t, e.cache, ocitest.Digest(t, e.reg.Ref(name)))
		})
	}
}

func TestSizeMismatch(t *testing.T) {
	e := newEnv(t)
	m := wasm("size-mismatch")
	e.push("plugins/size:real", map[string][]byte{"plugin.wasm": m}, "plugin.wasm")
	for _, size := range []int64{100, int64(len(m)) + 100} {
		t.Run(strconv.FormatInt(size, 10), func(t *testing.T) {
			e := e.with(t)
			e.cache = t.TempDir()
			name := "plugins/size:claims-" + strconv.FormatInt(size, 10)
			e.pushManifest(name, e.withLayerSize("plugins/size:real", size))
			_, err := e.fetch(e.client(nil), name)
			if !errors.Is(err, ErrTampered) || !strings.Contains(err.Error(), "the manifest says "+strconv.FormatInt(size, 10)) {
				t.Fatalf("Fetch of a layer claiming %d bytes over %d: %v, want ErrTampered naming the claim", size, len(m), err)
			}
			onlyManifests(t, e.cache, ocitest.Digest(t, e.reg.Ref(name)))
		})
	}
}

func TestTooLarge(t *testing.T) {
	e := newEnv(t)
	m := wasm("too-large")
	e.push("plugins/big:small", map[string][]byte{"plugin.wasm": m}, "plugin.wasm")
	e.pushManifest("plugins/big:huge", e.withLayerSize("plugins/big:small", 10<<30))
	var blobGets atomic.Int64
	addr := e.proxy(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			blobGets.Add(1)
		}
		return true
	})
	c := e.client(nil)

	_, err := fetchVia(c, via(e.ref("plugins/big:huge"), addr))
	want := "layer sha256:" + sha(m) + " claims 10737418240 bytes, over [wasm.limits] module_mb = 64"
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Fetch of a 10 GiB layer: %v, want ErrTooLarge saying %q", err, want)
	}
	if n := blobGets.Load(); n != 0 {
		t.Errorf("%d blob GETs went through the proxy before the refusal, want none", n)
	}
	// The counter counts: the same layer at its true size is fetched through it.
	if _, err := fetchVia(c, via(e.ref("plugins/big:small"), addr)); err != nil {
		t.Fatal(err)
	}
	if n := blobGets.Load(); n == 0 {
		t.Error("the proxy counted no blob GET for a fetch that needed one")
	}
}

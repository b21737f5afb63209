package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"oras.land/oras-go/v2/errdef"

	"github.com/morphhost/morph/oci/internal/ocitest"
)

// checkModule asserts that a is the module m, laid out as want, in e's
// cache, and that an offline client answers the same from the cache alone.
func (e *env) checkModule(a *Artifact, name string, m []byte, want Layout) {
	t := e.t
	t.Helper()
	if d := ocitest.Digest(t, e.reg.Ref(name)); a.Digest != d {
		t.Errorf("Digest = %s, want the manifest's %s", a.Digest, d)
	}
	if a.Layout != want || a.ModuleSHA256 != sha(m) || a.Size != int64(len(m)) {
		t.Errorf("Layout, ModuleSHA256, Size = %s, %s, %d; want %s, %s, %d", a.Layout, a.ModuleSHA256, a.Size, want, sha(m), len(m))
	}
	if !strings.HasPrefix(a.ModulePath, e.cache+string(filepath.Separator)) {
		t.Errorf("ModulePath %s is not in the cache %s", a.ModulePath, e.cache)
	}
	if b, err := os.ReadFile(a.ModulePath); err != nil || !bytes.Equal(b, m) {
		t.Errorf("ModulePath %s holds %d bytes (%v), want the %d pushed", a.ModulePath, len(b), err, len(m))
	}
	again, err := e.client(func(o *Options) { o.Offline = true }).Fetch(context.Background(), a.Ref, a.Digest)
	if err != nil {
		t.Fatalf("offline Fetch of a cached manifest: %v", err)
	}
	// The same, except that the signatures now come from the cache.
	online := *a
	online.listed = false
	if !a.listed || !reflect.DeepEqual(*again, online) {
		t.Errorf("offline Fetch = %+v, want what the online one gave (listing the signatures), %+v", again, a)
	}
}

func TestFetchLayouts(t *testing.T) {
	e := newEnv(t)
	c := e.client(nil)
	layer := func(t *testing.T, m []byte) []byte {
		return tarball(t, true, tarFile{name: "plugin.wasm", body: m})
	}
	for _, tc := range []struct {
		name   string
		layout Layout
		push   func(e *env, name string, m []byte)
	}{
		{"oras-default", LayoutArtifact, func(e *env, name string, m []byte) {
			// The layer is typed ...layer.v1.tar, yet holds the module: read by content.
			e.push(name, map[string][]byte{"plugin.wasm": m}, "plugin.wasm")
		}},
		{"wasm-artifact", LayoutArtifact, func(e *env, name string, m []byte) {
			e.push(name, map[string][]byte{"plugin.wasm": m, "wasmconfig.json": []byte("{}")},
				"--artifact-type", "application/vnd.wasm.config.v0+json",
				"--config", "wasmconfig.json:application/vnd.wasm.config.v0+json", "plugin.wasm:application/wasm")
		}},
		{"crane-image", LayoutImage, func(e *env, name string, m []byte) {
			p := filepath.Join(e.t.TempDir(), "layer.tar.gz")
			os.WriteFile(p, layer(e.t, m), 0o644)
			ocitest.Run(e.t, "crane", "append", "--insecure", "-f", p, "-t", e.reg.Ref(name))
			if mt := e.manifest(name); !strings.Contains(mt, "application/vnd.docker.image.rootfs.diff.tar.gzip") {
				e.t.Fatalf("crane append made no Docker layer: %s", mt)
			}
		}},
		{"crane-image-oci", LayoutImage, func(e *env, name string, m []byte) {
			p := filepath.Join(e.t.TempDir(), "layer.tar.gz")
			os.WriteFile(p, layer(e.t, m), 0o644)
			ocitest.Run(e.t, "crane", "append", "--insecure", "--oci-empty-base", "-f", p, "-t", e.reg.Ref(name))
		}},
		{"oras-targz", LayoutImage, func(e *env, name string, m []byte) {
			e.push(name, map[string][]byte{"layer.tar.gz": layer(e.t, m)}, "layer.tar.gz:application/vnd.oci.image.layer.v1.tar+gzip")
		}},
		{"plain-tar", LayoutImage, func(e *env, name string, m []byte) {
			tb := tarball(e.t, false, tarFile{name: "./README", body: []byte("hi")}, tarFile{name: "./plugin.wasm", body: m})
			e.push(name, map[string][]byte{"layer.tar": tb}, "layer.tar:application/vnd.oci.image.layer.v1.tar")
		}},
		{"index", LayoutArtifact, func(e *env, name string, m []byte) {
			e.push(name+"-wasm", map[string][]byte{"plugin.wasm": m}, "plugin.wasm")
			e.pushManifest(name, e.index(name+"-wasm", "linux", "amd64", "wasip1", "wasm"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := e.with(t)
			m := wasm("layout-" + tc.name)
			name := "plugins/layouts:" + tc.name
			tc.push(e, name, m)
			a, err := e.fetch(c, name)
			if err != nil {
				t.Fatal(err)
			}
			e.checkModule(a, name, m, tc.layout)
			if len(a.Signatures) != 0 {
				t.Errorf("Signatures = %+v for an unsigned manifest", a.Signatures)
			}
		})
	}

	t.Run("index-without-wasm", func(t *testing.T) {
		e := e.with(t)
		e.push("plugins/layouts:noidx", map[string][]byte{"plugin.wasm": wasm("noidx")}, "plugin.wasm")
		e.pushManifest("plugins/layouts:idx-linux", e.index("plugins/layouts:noidx", "linux", "amd64", "linux", "arm64"))
		_, err := e.fetch(c, "plugins/layouts:idx-linux")
		if !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), "linux/amd64 linux/arm64") {
			t.Fatalf("Fetch of an index without a wasm entry: %v, want ErrLayout naming the platforms", err)
		}
	})

	t.Run("unknown-tag", func(t *testing.T) {
		_, err := e.fetch(c, "plugins/layouts:nope")
		if !errors.Is(err, ErrRegistry) || !errors.Is(err, errdef.ErrNotFound) || !strings.Contains(err.Error(), "plugins/layouts:nope") {
			t.Fatalf("Resolve of a missing tag: %v, want ErrRegistry (and errdef.ErrNotFound) naming the reference", err)
		}
	})

	t.Run("tag-alone", func(t *testing.T) {
		_, err := c.Fetch(context.Background(), e.ref("plugins/layouts:oras-default"), "")
		if !errors.Is(err, ErrUnlockedTag) {
			t.Fatalf("Fetch of a tag with no digest: %v, want ErrUnlockedTag", err)
		}
	})
}

// index is an OCI index of two entries, both the manifest name names, with
// the platforms os1/arch1 and os2/arch2.
func (e *env) index(name, os1, arch1, os2, arch2 string) []byte {
	e.t.Helper()
	d := ocitest.Digest(e.t, e.reg.Ref(name))
	size := len(e.manifest(name))
	entry := func(os, arch string) string {
		return fmt.Sprintf(`{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":%q,"size":%d,"platform":{"os":%q,"architecture":%q}}`, d, size, os, arch)
	}
	return fmt.Appendf(nil, `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s,%s]}`, entry(os1, arch1), entry(os2, arch2))
}

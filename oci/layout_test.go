package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLayerHostile(t *testing.T) {
	e := newEnv(t)
	m := wasm("hostile")
	other := wasm("hostile-other")
	many := make([]tarFile, maxTarEntries+1)
	for i := range many {
		many[i] = tarFile{name: fmt.Sprintf("f%d", i), body: []byte("x")}
	}
	for _, tc := range []struct {
		name      string
		moduleMB  int64
		files     []tarFile
		mediaType string // default tar+gzip
		layer     []byte // instead of files
		kind      error  // nil: the module is found and is want
		want      []byte
		says      string
	}{
		{name: "tar-bomb", moduleMB: 1, layer: bomb(t, 64, m), kind: ErrLayout, says: "decompresses past 2097152 bytes ([wasm.limits] module_mb = 1, plus 1 MiB)"},
		{name: "module-over-limit", moduleMB: 1, files: []tarFile{{name: "plugin.wasm", body: append(slices.Clone(m), make([]byte, 2<<20)...)}},
			kind: ErrTooLarge, says: fmt.Sprintf(`"plugin.wasm" is %d bytes, over [wasm.limits] module_mb = 1`, len(m)+2<<20)},
		{name: "symlink", files: []tarFile{{name: "plugin.wasm", typ: tar.TypeSymlink, link: "../../etc/passwd"}},
			kind: ErrLayout, says: `"plugin.wasm" is a symbolic link to "../../etc/passwd"; morph takes only a regular file`},
		{name: "hardlink", files: []tarFile{{name: "a.txt", body: m}, {name: "./plugin.wasm", typ: tar.TypeLink, link: "a.txt"}},
			kind: ErrLayout, says: `"plugin.wasm" is a hard link to "a.txt"`},
		{name: "dotdot", files: []tarFile{{name: "../plugin.wasm", body: m}, {name: "/abs.wasm", body: m}, {name: "a/../../b.wasm", body: m}},
			kind: ErrLayout, says: "no plugin.wasm (or single *.wasm) regular file in the tar layers sha256:"},
		{name: "two-modules", files: []tarFile{{name: "a.wasm", body: m}, {name: "lib/b.wasm", body: other}},
			kind: ErrLayout, says: `no plugin.wasm and more than one *.wasm: "a.wasm" and "lib/b.wasm"`},
		{name: "escaped-names", files: []tarFile{{name: "a.wasm", body: m}, {name: "\x1b]0;owned\x07.wasm", body: other}},
			kind: ErrLayout, says: `"a.wasm" and "\x1b]0;owned\a.wasm"`},
		{name: "too-many-entries", files: many, kind: ErrLayout, says: "has more than 1000 entries"},
		{name: "zstd", layer: []byte("(zstd)"), mediaType: "application/vnd.oci.image.layer.v1.tar+zstd",
			kind: ErrLayout, says: `is zstd-compressed ("application/vnd.oci.image.layer.v1.tar+zstd"); morph reads gzip or plain tar layers`},
		{name: "not-a-module", layer: []byte("#!/bin/sh\necho hi\n"), mediaType: "application/wasm",
			kind: ErrLayout, says: `is neither a wasm module (\0asm) nor a gzip or tar archive`},
		{name: "plugin-wasm-wins", files: []tarFile{{name: "a.wasm", body: other}, {name: "plugin.wasm", body: m}, {name: "z.wasm", body: other}}, want: m},
		{name: "single-wasm", files: []tarFile{{name: "README", body: []byte("hi")}, {name: "lib/only.wasm", body: m}}, want: m},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := e.with(t)
			e.cache = filepath.Join(t.TempDir(), "cache")
			layer, mt := tc.layer, tc.mediaType
			if layer == nil {
				layer = tarball(t, true, tc.files...)
			}
			if mt == "" {
				mt = "application/vnd.oci.image.layer.v1.tar+gzip"
			}
			name := "plugins/hostile:" + tc.name
			e.push(name, map[string][]byte{"layer": layer}, "layer:"+mt)
			a, err := e.fetch(e.client(func(o *Options) { o.MaxModuleBytes = mb(tc.moduleMB) }), name)
			if tc.kind == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := os.ReadFile(a.ModulePath); !bytes.Equal(got, tc.want) || a.Layout != LayoutImage {
					t.Fatalf("Fetch took %d bytes (layout %s), want the %d of the module", len(got), a.Layout, len(tc.want))
				}
				return
			}
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Fetch: %v\nwant %v saying %s", err, tc.kind, tc.says)
			}
			if strings.ContainsRune(err.Error(), 0x1b) {
				t.Errorf("the error carries a raw ESC: %q", err)
			}
			for _, f := range cacheFiles(t, filepath.Dir(e.cache)) {
				if strings.HasPrefix(f, "cache/modules/") || strings.HasPrefix(f, "cache/artifacts/") || strings.Contains(f, ".tmp-") || !strings.HasPrefix(f, "cache/blobs/") {
					t.Errorf("after the refusal the cache's directory holds %s", f)
				}
			}
		})
	}
}

// mb is module_mb in bytes, 64 when unset.
func mb(n int64) int64 {
	if n == 0 {
		n = 64
	}
	return n << 20
}

// bomb is a gzip tar layer of mib MiB of zeros (zeros.bin) then
// plugin.wasm m, about 1 KiB per MiB: concatenated gzip members (which
// gzip readers read as one stream), one MiB of zeros compressed once and
// repeated, so that making it costs nothing under -race.
func bomb(t *testing.T, mib int, m []byte) []byte {
	t.Helper()
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	var head, tail bytes.Buffer
	tw := tar.NewWriter(&head)
	if err := tw.WriteHeader(&tar.Header{Name: "zeros.bin", Mode: 0o644, Size: int64(mib) << 20, Format: tar.FormatUSTAR}); err != nil {
		t.Fatal(err)
	}
	tw.Flush()
	out := gz(head.Bytes())
	zeros := gz(make([]byte, 1<<20))
	for range mib {
		out = append(out, zeros...)
	}
	tw = tar.NewWriter(&tail)
	tw.WriteHeader(&tar.Header{Name: "plugin.wasm", Mode: 0o644, Size: int64(len(m)), Format: tar.FormatUSTAR})
	tw.Write(m)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return append(out, gz(tail.Bytes())...)
}

package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/oci/internal/ocitest"
)

// env is one test's registry and the cache its clients share.
type env struct {
	t     *testing.T
	reg   *ocitest.Registry
	cache string
}

// newEnv starts a registry and points the Docker credential store at an
// empty directory, so that the user's own ~/.docker never takes part.
func newEnv(t *testing.T) *env {
	t.Helper()
	ocitest.Tools(t)
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	return &env{t: t, reg: ocitest.StartRegistry(t), cache: t.TempDir()}
}

// client is a Client on e's cache, plain HTTP to 127.0.0.1, changed by set.
func (e *env) client(set func(*Options)) *Client {
	e.t.Helper()
	o := Options{CacheDir: e.cache, PlainHTTP: []string{"127.0.0.1:*"}}
	if set != nil {
		set(&o)
	}
	c, err := NewClient(o)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// wasm is a small module (the header and a custom section named name), so
// that each test pushes bytes of its own.
func wasm(name string) []byte {
	b := []byte("\x00asm\x01\x00\x00\x00")
	payload := bytes.Repeat([]byte(name), 32)
	b = append(b, 0, byte(1+len(name)+len(payload))) // section 0, its size (< 128)
	b = append(b, byte(len(name)))
	b = append(b, name...)
	return append(b, payload...)
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// push writes files (name -> bytes) in a temporary directory and runs
// `oras push` of them (each "NAME" or "NAME:MEDIATYPE" in args) to repo:tag.
func (e *env) push(name string, files map[string][]byte, args ...string) {
	e.t.Helper()
	dir := e.t.TempDir()
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	ocitest.RunIn(e.t, dir, "oras", append([]string{"push", "--plain-http", e.reg.Ref(name)}, args...)...)
}

// pushManifest pushes manifest JSON as repo:tag (oras manifest push).
func (e *env) pushManifest(name string, manifest []byte) {
	e.t.Helper()
	p := filepath.Join(e.t.TempDir(), "manifest.json")
	if err := os.WriteFile(p, manifest, 0o644); err != nil {
		e.t.Fatal(err)
	}
	ocitest.Run(e.t, "oras", "manifest", "push", "--plain-http", e.reg.Ref(name), p)
}

// manifest is the JSON of the manifest name names on the registry.
func (e *env) manifest(name string) string {
	e.t.Helper()
	return ocitest.Run(e.t, "oras", "manifest", "fetch", "--plain-http", e.reg.Ref(name))
}

// ref is name ("repo:tag" or "repo@sha256:...") on e's registry, parsed.
func (e *env) ref(name string) Ref {
	e.t.Helper()
	r, err := ParseRef(Scheme + e.reg.Ref(name))
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// fetch resolves name's tag with c and fetches the manifest it names.
func (e *env) fetch(c *Client, name string) (*Artifact, error) {
	e.t.Helper()
	return fetchVia(c, e.ref(name))
}

func fetchVia(c *Client, r Ref) (*Artifact, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := c.Resolve(ctx, r)
	if err != nil {
		return nil, err
	}
	return c.Fetch(ctx, r, d)
}

// tarFile is an entry of a test-made tar layer.
type tarFile struct {
	name string
	body []byte
	typ  byte   // tar.TypeReg when 0
	link string // a link's target
}

// tarball makes a tar layer, gzipped when gz.
func tarball(t *testing.T, gz bool, files ...tarFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	var tw *tar.Writer
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		tw = tar.NewWriter(zw)
	} else {
		tw = tar.NewWriter(&buf)
	}
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: f.typ, Linkname: f.link, Format: tar.FormatPAX}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		} else {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.body[:h.Size]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// cacheFiles lists the cache's files, relative to it.
func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// proxy puts a reverse proxy in front of the registry; wrap sees each
// request first and may answer it itself (returning false). It returns the
// proxy's host:port, on 127.0.0.1.
func (e *env) proxy(wrap func(w http.ResponseWriter, r *http.Request) bool) string {
	e.t.Helper()
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: e.reg.Addr})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wrap(w, r) {
			rp.ServeHTTP(w, r)
		}
	}))
	e.t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// via is r on another host:port (a proxy in front of its registry).
func via(r Ref, addr string) Ref {
	r.Registry = addr
	return r
}

// with is e for subtest t.
func (e *env) with(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

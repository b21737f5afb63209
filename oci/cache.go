package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
)

// cache is the content-addressed store under Options.CacheDir:
//
//	blobs/sha256/HEX            manifests, layers, signature manifests and payloads
//	modules/sha256/HEX          a module taken out of an image's tar layer
//	artifacts/sha256/HEX.json   per manifest: layout, module, signatures found
//
// Every file enters by a temporary file in the same directory renamed into
// place once its bytes are verified, so a reader sees whole, verified files
// or none; two writers of one name write the same bytes, so no lock is
// needed. There are no tags here: which digest a tag meant lives in
// morph.lock.
type cache struct{ dir string }

// record is artifacts/sha256/HEX.json: what Fetch found for a manifest, so
// that a later Fetch (offline too) answers from the cache alone.
type record struct {
	Layout       Layout      `json:"layout"`
	Module       string      `json:"module"` // relative to the cache directory
	ModuleSHA256 string      `json:"module_sha256"`
	Size         int64       `json:"size"`
	Signatures   []recordSig `json:"signatures,omitempty"`
}

// recordSig names a signature manifest found for the manifest.
type recordSig struct {
	Format string `json:"format"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// hexOf is d's hex part; d was checked by checkDigest or by oras-go.
func hexOf(d string) string { return strings.TrimPrefix(d, "sha256:") }

func (c cache) blob(d string) string { return filepath.Join(c.dir, "blobs", "sha256", hexOf(d)) }

func (c cache) module(hex string) string { return filepath.Join(c.dir, "modules", "sha256", hex) }

func (c cache) recordPath(d string) string {
	return filepath.Join(c.dir, "artifacts", "sha256", hexOf(d)+".json")
}

// create opens a temporary file beside dst, for put or for a writer that
// verifies before it renames.
func (c cache) create(dst string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, fmt.Errorf("oci cache: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(dst), ".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("oci cache: %w", err)
	}
	return f, nil
}

// commit closes f and renames it to dst, or removes it when ok is false or
// closing fails.
func (c cache) commit(f *os.File, dst string, ok bool) error {
	err := f.Close()
	if ok && err == nil {
		err = os.Rename(f.Name(), dst)
	}
	if !ok || err != nil {
		os.Remove(f.Name())
	}
	if err != nil {
		return fmt.Errorf("oci cache: %w", err)
	}
	return nil
}

// put writes b to dst by temp and rename.
func (c cache) put(dst string, b []byte) error {
	f, err := c.create(dst)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := c.commit(f, dst, err == nil); err == nil {
		err = cerr
	}
	return err
}

// read gives a small cached blob's bytes, re-hashed against desc (a cache
// file changed behind morph's back is refused, naming it), or fs.ErrNotExist.
func (c cache) read(desc ocispec.Descriptor) ([]byte, error) {
	p := c.blob(desc.Digest.String())
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if desc.Size < 0 {
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		desc.Size = fi.Size()
	}
	b, err := content.ReadAll(f, desc)
	if err != nil {
		return nil, fmt.Errorf("oci cache: %s does not match its digest (%w); remove it and fetch again", p, err)
	}
	return b, nil
}

// readRecord gives the manifest's record, ok false when it has none.
func (c cache) readRecord(d string) (record, bool, error) {
	var rec record
	b, err := os.ReadFile(c.recordPath(d))
	if errors.Is(err, fs.ErrNotExist) {
		return rec, false, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil {
		return rec, false, fmt.Errorf("oci cache: %s: %w; remove it and fetch again", c.recordPath(d), err)
	}
	return rec, true, nil
}

func (c cache) writeRecord(d string, rec record) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return c.put(c.recordPath(d), append(b, '\n'))
}

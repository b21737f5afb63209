package oci

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
)

// cache is the content-addressed store under Options.CacheDir:
//
//	blobs/sha256/HEX              manifests, layers, signature manifests and payloads
//	modules/sha256/HEX            a module taken out of an image's tar layer
//	artifacts/sha256/HEX-REPO.json  per manifest and repository: the signatures found
//
// Every file enters by a temporary file in the same directory renamed into
// place once its bytes are verified, so a reader sees whole, verified files
// or none; two writers of one name write the same bytes, so no lock is
// needed. Nothing here is taken on trust when it is read back: a blob is
// re-hashed against the digest that names it, and the module is derived
// again from the manifest each time (Fetch), so a cache file that was
// changed is refused, not run. There are no tags here: which digest a tag
// meant lives in morph.lock.
type cache struct{ dir string }

// sigRecord is artifacts/sha256/HEX-REPO.json: the signature manifests
// Fetch found for a manifest in one repository, so that a later Fetch
// (offline too) answers from the cache alone. It is kept per repository
// (REPO: the first 32 hex digits of the SHA-256 of "registry/repository"):
// what one registry or mirror lists for a digest never stands for another.
type sigRecord struct {
	Repository string      `json:"repository"` // registry/repository, for people reading the cache
	Signatures []recordSig `json:"signatures"`
}

// module is where Fetch found the module of a manifest.
type module struct {
	Layout       Layout
	Path         string // absolute
	ModuleSHA256 string // hex
	Size         int64
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

func (c cache) recordPath(d string, r Ref) string {
	host, name := remoteName(r)
	key := sha256.Sum256([]byte(host + "/" + name))
	return filepath.Join(c.dir, "artifacts", "sha256", hexOf(d)+"-"+hex.EncodeToString(key[:16])+".json")
}

// cacheDirs are the directories the cache writes into.
var cacheDirs = []string{"blobs/sha256", "modules/sha256", "artifacts/sha256"}

// tempFileAge is when a temporary file is taken for one a killed Fetch
// left behind: a Fetch in progress renames or removes its own in far less.
const tempFileAge = 24 * time.Hour

// sweep removes the temporary files left by a Fetch that was killed
// before it renamed or removed them.
func (c cache) sweep(log *slog.Logger) {
	for _, d := range cacheDirs {
		tmps, _ := filepath.Glob(filepath.Join(c.dir, filepath.FromSlash(d), ".tmp-*"))
		for _, p := range tmps {
			if fi, err := os.Lstat(p); err == nil && time.Since(fi.ModTime()) > tempFileAge {
				if err := os.Remove(p); err != nil {
					log.Warn("oci cache: removing a stale temporary file", "path", p, "err", err)
				}
			}
		}
	}
}

// create opens a temporary file beside dst, for put or for a writer that
// verifies before it renames.
func (c cache) create(dst string) (*os.File, error) {
	// 0700: the cache is the user's; what it holds decides what runs.
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
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

// read gives a small cached blob's bytes, at most max, re-hashed against
// desc (a cache file changed behind morph's back is refused, naming it), or
// fs.ErrNotExist. desc.Size -1 takes the file's size, within max.
func (c cache) read(desc ocispec.Descriptor, max int64) ([]byte, error) {
	p := c.blob(desc.Digest.String())
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if desc.Size < 0 {
		desc.Size = fi.Size()
	}
	if desc.Size > max || fi.Size() != desc.Size {
		return nil, fmt.Errorf("oci cache: %s is %d bytes, expected %d (at most %d); remove it and fetch again", p, fi.Size(), desc.Size, max)
	}
	b, err := content.ReadAll(f, desc)
	if err != nil {
		return nil, fmt.Errorf("oci cache: %s does not match its digest (%w); remove it and fetch again", p, err)
	}
	return b, nil
}

// readRecord gives the signatures recorded for manifest d in r's
// repository, ok false when there are none.
func (c cache) readRecord(d string, r Ref) (sigRecord, bool, error) {
	var rec sigRecord
	p := c.recordPath(d, r)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, false, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil {
		return rec, false, fmt.Errorf("oci cache: %s: %w; remove it and fetch again", p, err)
	}
	return rec, true, nil
}

func (c cache) writeRecord(d string, r Ref, sigs []recordSig) error {
	host, name := remoteName(r)
	b, err := json.MarshalIndent(sigRecord{Repository: host + "/" + name, Signatures: sigs}, "", "  ")
	if err != nil {
		return err
	}
	return c.put(c.recordPath(d, r), append(b, '\n'))
}

package oci

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/morphhost/morph/internal/safetext"
)

// Tar layer limits: a layer may decompress to MaxModuleBytes plus this much
// (the module and the files around it), in at most maxTarEntries entries.
const (
	tarSlackBytes = 1 << 20
	maxTarEntries = 1000
)

// errNoModule: a tar layer holds no candidate; the next layer down is tried.
var errNoModule = errors.New("no module in this layer")

// errDecompressed: the layer decompressed past its cap.
var errDecompressed = errors.New("decompressed past the cap")

// readLayer reads the verified layer at p by its content, not its media
// type (ORAS labels a raw module "...layer.v1.tar"): a module is the layer
// itself (LayoutArtifact); a gzip or plain tar holds it (LayoutImage).
func (f *fetcher) readLayer(desc ocispec.Descriptor, p string) (module, error) {
	file, err := os.Open(p)
	if err != nil {
		return module{}, fmt.Errorf("oci cache: %w", err)
	}
	defer file.Close()
	br := bufio.NewReaderSize(file, 512)
	head, _ := br.Peek(512)
	switch {
	case bytes.HasPrefix(head, []byte("\x00asm")):
		return module{Layout: LayoutArtifact, Path: p, ModuleSHA256: hexOf(desc.Digest.String()), Size: desc.Size}, nil
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		gz, err := gzip.NewReader(br)
		if err != nil {
			return module{}, f.fail(ErrLayout, "layer %s: gzip: %v", desc.Digest, err)
		}
		return f.untar(desc, gz)
	case len(head) >= 262 && string(head[257:262]) == "ustar":
		return f.untar(desc, br)
	}
	return module{}, f.fail(ErrLayout, "layer %s is neither a wasm module (\\0asm) nor a gzip or tar archive", desc.Digest)
}

// capReader fails a read past n bytes (errDecompressed) rather than ending
// short, so that a bomb is refused, not truncated into something else.
type capReader struct {
	r io.Reader
	n int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		var one [1]byte
		if k, err := c.r.Read(one[:]); k == 0 && err != nil {
			return 0, err
		}
		return 0, errDecompressed
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	k, err := c.r.Read(p)
	c.n -= int64(k)
	return k, err
}

// tarEntry is a candidate module extracted to a temporary file in modules/.
type tarEntry struct {
	name string // escaped for messages
	tmp  *os.File
	sum  string
	size int64
}

// untar finds the module in a tar stream: the regular entry plugin.wasm
// ("./" trimmed), else the only regular *.wasm. Entry names are only
// compared, never used as paths; "..", absolute names and links are not
// followed, and a link in a candidate's place is refused.
func (f *fetcher) untar(desc ocispec.Descriptor, r io.Reader) (module, error) {
	limit := f.c.opts.MaxModuleBytes + tarSlackBytes
	tr := tar.NewReader(&capReader{r: r, n: limit})
	var plugin *tarEntry
	var others []*tarEntry
	var extra []string // further *.wasm names, not extracted
	defer func() {
		for _, e := range append(others, plugin) {
			if e != nil && e.tmp != nil {
				f.c.cache.commit(e.tmp, "", false)
			}
		}
	}()
	fail := func(format string, a ...any) (module, error) {
		return module{}, f.fail(ErrLayout, "layer %s: "+format, append([]any{desc.Digest}, a...)...)
	}
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if errors.Is(err, tar.ErrInsecurePath) {
			err = nil // under GODEBUG=tarinsecurepath=0; such names are skipped below
		}
		if err == io.EOF {
			break
		}
		if errors.Is(err, errDecompressed) {
			return module{}, f.decompressed(desc, limit)
		}
		if err != nil {
			return fail("tar: %v", err)
		}
		if n >= maxTarEntries {
			return fail("has more than %d entries", maxTarEntries)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		if name == "" || path.IsAbs(name) || slices.Contains(strings.Split(name, "/"), "..") || path.Ext(name) != ".wasm" {
			continue
		}
		quoted := safetext.Quote(name, 200)
		switch hdr.Typeflag {
		case tar.TypeReg:
		case tar.TypeSymlink, tar.TypeLink:
			kind := "a symbolic link"
			if hdr.Typeflag == tar.TypeLink {
				kind = "a hard link"
			}
			return fail("%s is %s to %s; morph takes only a regular file", quoted, kind, safetext.Quote(hdr.Linkname, 200))
		default:
			continue
		}
		switch {
		case name == "plugin.wasm" && plugin != nil:
			return fail("holds plugin.wasm twice; a layer names its module once")
		case name != "plugin.wasm" && len(others) > 0:
			extra = append(extra, quoted)
			continue
		}
		e, err := f.extract(desc, tr, hdr, quoted, limit)
		if err != nil {
			return module{}, err
		}
		if name == "plugin.wasm" {
			plugin = e
		} else {
			others = append(others, e)
		}
	}
	chosen := plugin
	switch {
	case chosen != nil:
	case len(others) == 0:
		return module{}, errNoModule
	case len(extra) > 0:
		return fail("holds no plugin.wasm and more than one *.wasm: %s and %s; name the module plugin.wasm", others[0].name, extra[0])
	default:
		chosen = others[0]
	}
	dst := f.c.cache.module(chosen.sum)
	tmp := chosen.tmp
	chosen.tmp = nil
	if err := f.c.cache.commit(tmp, dst, true); err != nil {
		return module{}, err
	}
	return module{Layout: LayoutImage, Path: dst, ModuleSHA256: chosen.sum, Size: chosen.size}, nil
}

// extract copies a regular entry into a temporary file in modules/,
// hashing it; on failure the file is removed.
func (f *fetcher) extract(desc ocispec.Descriptor, tr *tar.Reader, hdr *tar.Header, quoted string, limit int64) (*tarEntry, error) {
	if hdr.Size > f.c.opts.MaxModuleBytes {
		return nil, f.fail(ErrTooLarge, "layer %s: %s is %d bytes, over [wasm.limits] module_mb = %s", desc.Digest, quoted, hdr.Size, moduleMB(f.c.opts.MaxModuleBytes))
	}
	tmp, err := f.c.cache.create(f.c.cache.module("x"))
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), tr); err != nil {
		f.c.cache.commit(tmp, "", false)
		if errors.Is(err, errDecompressed) {
			return nil, f.decompressed(desc, limit)
		}
		return nil, f.fail(ErrLayout, "layer %s: tar: %v", desc.Digest, err)
	}
	return &tarEntry{name: quoted, tmp: tmp, sum: hex.EncodeToString(h.Sum(nil)), size: hdr.Size}, nil
}

func (f *fetcher) decompressed(desc ocispec.Descriptor, limit int64) error {
	return f.fail(ErrLayout, "layer %s decompresses past %d bytes ([wasm.limits] module_mb = %s, plus 1 MiB)", desc.Digest, limit, moduleMB(f.c.opts.MaxModuleBytes))
}

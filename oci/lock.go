package oci

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// LockVersion is the morph.lock format this morph reads and writes.
const LockVersion = 1

// lockHeader is the comment a written morph.lock starts with.
const lockHeader = "# written by `morph plugin lock`; do not edit\n"

// Lock is morph.lock: for each oci:// plugin or linked module of a
// configuration, the manifest digest its reference resolved to when it was
// locked, what that manifest held and who signed it. A tag is trusted only
// through its entry here (see ErrUnlockedTag, ErrLockMismatch).
type Lock struct {
	Version int         `toml:"version"`
	Plugins []LockEntry `toml:"plugin"`
}

// LockEntry is one locked reference.
type LockEntry struct {
	// Name is the [[plugins]] name, or for a linked module ModuleName's
	// "PLUGIN/modules/NAME".
	Name         string `toml:"name"`
	Ref          string `toml:"ref"`    // the reference as written in morph.toml
	Digest       string `toml:"digest"` // the manifest's, "sha256:HEX"
	Layout       Layout `toml:"layout"`
	ModuleSHA256 string `toml:"module_sha256"` // hex
	Size         int64  `toml:"size"`          // the module's, in bytes
	// Signature is the signature that verified when the entry was locked;
	// nil when the plugin is not signed.
	Signature *LockSignature `toml:"signature,omitempty"`
}

// LockSignature records the signature that verified: its format and
// manifest, and the signer (a key's fingerprint, or a keyless identity and
// issuer).
type LockSignature struct {
	Format   string `toml:"format"`   // FormatBundle or FormatSigTag
	Artifact string `toml:"artifact"` // the signature manifest's digest
	Key      string `toml:"key,omitempty"`
	Identity string `toml:"identity,omitempty"`
	Issuer   string `toml:"issuer,omitempty"`
}

// ModuleName is the lock entry name of the linked module name of plugin
// ([plugins.modules] name = "oci://...").
func ModuleName(plugin, name string) string { return plugin + "/modules/" + name }

// Lookup is the entry named name.
func (l *Lock) Lookup(name string) (LockEntry, bool) {
	i := slices.IndexFunc(l.Plugins, func(e LockEntry) bool { return e.Name == name })
	if i < 0 {
		return LockEntry{}, false
	}
	return l.Plugins[i], true
}

// Set adds e, or replaces the entry of the same name.
func (l *Lock) Set(e LockEntry) {
	if i := slices.IndexFunc(l.Plugins, func(x LockEntry) bool { return x.Name == e.Name }); i >= 0 {
		l.Plugins[i] = e
		return
	}
	l.Plugins = append(l.Plugins, e)
}

// ReadLock reads and checks the morph.lock at path. A missing file is an
// error for which errors.Is(err, fs.ErrNotExist) holds: a configuration
// with no tag to lock needs none.
func ReadLock(path string) (*Lock, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var l Lock
	md, err := toml.NewDecoder(bytes.NewReader(b)).Decode(&l)
	if err != nil { // a syntax error names its line
		return nil, fmt.Errorf("%s: %w; rerun 'morph plugin lock' to write it again", path, err)
	}
	if keys := md.Undecoded(); len(keys) > 0 {
		return nil, fmt.Errorf("%s: unknown key %q (this morph reads morph.lock version %d)", path, keys[0].String(), LockVersion)
	}
	if l.Version != LockVersion {
		return nil, fmt.Errorf("%s: version %d, this morph reads version %d: use the morph that wrote it, or rerun 'morph plugin lock'", path, l.Version, LockVersion)
	}
	if err := l.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &l, nil
}

// WriteLock writes l to path as version LockVersion, entries sorted by
// name, atomically: a reader sees the old file or the new one, whole.
func WriteLock(path string, l *Lock) error {
	if err := l.check(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	out := Lock{Version: LockVersion, Plugins: slices.Clone(l.Plugins)}
	slices.SortFunc(out.Plugins, func(a, b LockEntry) int { return strings.Compare(a.Name, b.Name) })
	var buf bytes.Buffer
	buf.WriteString(lockHeader)
	if err := toml.NewEncoder(&buf).Encode(out); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename, nothing
	_, err = f.Write(buf.Bytes())
	if err == nil {
		err = f.Chmod(0o644) // committed beside morph.toml, read by all
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(f.Name(), path)
}

// check refuses an entry morph could not act on: no name, a name twice,
// a reference ParseRef refuses, a malformed digest or hash, an unknown
// layout or signature format.
func (l *Lock) check() error {
	seen := map[string]bool{}
	for i, e := range l.Plugins {
		what := fmt.Sprintf("plugin %q", e.Name)
		_, refErr := ParseRef(e.Ref)
		switch {
		case e.Name == "":
			return fmt.Errorf("[[plugin]] %d has no name", i+1)
		case seen[e.Name]:
			return fmt.Errorf("%s is locked twice", what)
		case refErr != nil:
			return fmt.Errorf("%s: %w", what, refErr)
		case checkDigest(e.Digest) != nil:
			return fmt.Errorf("%s: %w", what, checkDigest(e.Digest))
		case e.Layout != LayoutArtifact && e.Layout != LayoutImage:
			return fmt.Errorf("%s: layout %q is not %q or %q", what, e.Layout, LayoutArtifact, LayoutImage)
		case checkDigest("sha256:"+e.ModuleSHA256) != nil:
			return fmt.Errorf("%s: module_sha256 %q is not 64 lower-case hex digits", what, e.ModuleSHA256)
		case e.Size <= 0:
			return fmt.Errorf("%s: size %d is not a module's", what, e.Size)
		}
		seen[e.Name] = true
		if s := e.Signature; s != nil {
			switch {
			case s.Format != FormatBundle && s.Format != FormatSigTag:
				return fmt.Errorf("%s: signature format %q is not %q or %q", what, s.Format, FormatBundle, FormatSigTag)
			case checkDigest(s.Artifact) != nil:
				return fmt.Errorf("%s: signature artifact: %w", what, checkDigest(s.Artifact))
			case (s.Key == "") == (s.Identity == ""):
				return fmt.Errorf("%s: a signature names a key or an identity (and issuer), one of them", what)
			}
		}
	}
	return nil
}

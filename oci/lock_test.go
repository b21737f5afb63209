package oci

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func hex64(c string) string { return strings.Repeat(c, 64) }

// lockFixture has a keyless-signed plugin, a key-signed linked module of
// another and an unsigned plugin, out of order.
func lockFixture() *Lock {
	return &Lock{Plugins: []LockEntry{
		{Name: "time", Ref: "oci://ghcr.io/acme/time:v1", Digest: "sha256:" + hex64("a"), Layout: LayoutArtifact,
			ModuleSHA256: hex64("b"), Size: 342, Signature: &LockSignature{Format: FormatBundle, Artifact: "sha256:" + hex64("c"),
				Identity: "https://github.com/acme/time/.github/workflows/release.yml@refs/tags/v1", Issuer: "https://token.actions.githubusercontent.com"}},
		{Name: ModuleName("spin", "lib"), Ref: "oci://127.0.0.1:5000/lib@sha256:" + hex64("d"), Digest: "sha256:" + hex64("d"), Layout: LayoutImage,
			ModuleSHA256: hex64("e"), Size: 1 << 20, Signature: &LockSignature{Format: FormatSigTag, Artifact: "sha256:" + hex64("f"), Key: "SHA256:sUUoHHbba2Wy"}},
		{Name: "hooks", Ref: "oci://registry.example/hooks:latest", Digest: "sha256:" + hex64("1"), Layout: LayoutArtifact, ModuleSHA256: hex64("2"), Size: 8},
	}}
}

// What Write writes, Read reads back the same, sorted by name, under the
// header; Lookup finds an entry by name, a linked module's by ModuleName.
func TestLockRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "morph.lock")
	in := lockFixture()
	if err := WriteLock(path, in); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), lockHeader+"version = 1\n") {
		t.Errorf("morph.lock starts %q, want the header then version = 1", b[:min(len(b), 80)])
	}
	got, err := ReadLock(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range got.Plugins {
		names = append(names, e.Name)
	}
	if want := []string{"hooks", "spin/modules/lib", "time"}; !reflect.DeepEqual(names, want) {
		t.Errorf("entries %v, want sorted %v", names, want)
	}
	for _, want := range in.Plugins {
		e, ok := got.Lookup(want.Name)
		if !ok || !reflect.DeepEqual(e, want) {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v", want.Name, e, ok, want)
		}
	}
	if _, ok := got.Lookup("absent"); ok {
		t.Error("Lookup of a name never locked found an entry")
	}

	// Set replaces by name; a rewrite leaves no temporary file beside it.
	moved := in.Plugins[0]
	moved.Digest = "sha256:" + hex64("9")
	got.Set(moved)
	if err := WriteLock(path, got); err != nil {
		t.Fatal(err)
	}
	again, err := ReadLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := again.Lookup("time"); e.Digest != moved.Digest || len(again.Plugins) != 3 {
		t.Errorf("after Set: time's digest %s and %d entries, want %s and 3", e.Digest, len(again.Plugins), moved.Digest)
	}
	files, _ := os.ReadDir(filepath.Dir(path))
	if len(files) != 1 {
		t.Errorf("directory holds %d files after two writes, want morph.lock alone", len(files))
	}
}

// A lock this morph cannot read is refused, naming the file and what to
// do: another version, a syntax error (by line), an unknown key, an entry
// morph could not act on. A missing file is fs.ErrNotExist.
func TestLockRefused(t *testing.T) {
	valid := `name = "time"
ref = "oci://ghcr.io/acme/time:v1"
digest = "sha256:` + hex64("a") + `"
layout = "artifact"
module_sha256 = "` + hex64("b") + `"
size = 342
`
	for _, c := range []struct{ name, text, want string }{
		{"version", "version = 2\n", "version 2, this morph reads version 1"},
		{"no version", "[[plugin]]\n" + valid, "version 0, this morph reads version 1"},
		{"syntax", "version = 1\n[[plugin]]\nname = \"time\"\nref = oci://x\n", "line 4"},
		{"unknown key", "version = 1\n[[plugin]]\n" + valid + "platform = \"wasip1\"\n", `unknown key "plugin.platform"`},
		{"bad digest", "version = 1\n[[plugin]]\n" + strings.Replace(valid, "sha256:", "sha512:", 1), `plugin "time": digest "sha512:`},
		{"twice", "version = 1\n[[plugin]]\n" + valid + "[[plugin]]\n" + valid, `plugin "time" is locked twice`},
		// ParseRef's rules, not a prefix check: no tag and no digest.
		{"bad ref", "version = 1\n[[plugin]]\n" + strings.Replace(valid, "time:v1", "time", 1), `plugin "time": reference "oci://ghcr.io/acme/time": names no tag and no digest`},
		{"signer", "version = 1\n[[plugin]]\n" + valid + "[plugin.signature]\nformat = \"bundle\"\nartifact = \"sha256:" + hex64("c") + "\"\n", "a key or an identity"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "morph.lock")
			if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadLock(path)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("ReadLock: %v, want an error naming %s and %q", err, path, c.want)
			}
		})
	}
	if _, err := ReadLock(filepath.Join(t.TempDir(), "morph.lock")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadLock of a missing file: %v, want fs.ErrNotExist", err)
	}
	// Write refuses what Read would.
	bad := lockFixture()
	bad.Plugins[1].Layout = "tarball"
	path := filepath.Join(t.TempDir(), "morph.lock")
	if err := WriteLock(path, bad); err == nil || !strings.Contains(err.Error(), `layout "tarball"`) {
		t.Errorf("WriteLock of an unknown layout: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused WriteLock left %s: %v", path, err)
	}
}

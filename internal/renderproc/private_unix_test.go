//go:build unix

package renderproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTempDirRefuses: a TMPDIR that others could fill with code is refused,
// not used.
func TestTempDirRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		make func(dir string) error
		want string
	}{
		{"a link", func(dir string) error { return os.Symlink(t.TempDir(), dir) }, "graphviz: not a directory (L---------)"},
		{"a file", func(dir string) error { return os.WriteFile(dir, nil, 0o600) }, "not a directory"},
		{"writable by the group", func(dir string) error {
			if err := os.Mkdir(dir, 0o700); err != nil {
				return err
			}
			return os.Chmod(dir, 0o770)
		}, "other users can write it (-rwxrwx---): chmod 700 it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cache := t.TempDir()
			t.Setenv("XDG_CACHE_HOME", cache)
			t.Setenv("HOME", cache)
			dir := filepath.Join(cache, "morph", "graphviz")
			if err := os.Mkdir(filepath.Dir(dir), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tt.make(dir); err != nil {
				t.Fatal(err)
			}
			if got, err := TempDir(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("TempDir() = %q, %v; want an error with %q", got, err, tt.want)
			}
		})
	}
}

// TestTempDirCreates: a new TMPDIR is private; an existing one is kept.
func TestTempDirCreates(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", cache)
	for range 2 {
		dir, err := TempDir()
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(cache, "morph", "graphviz"); dir != want {
			t.Fatalf("TempDir() = %s, want %s", dir, want)
		}
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v, %v; want mode 0700", dir, fi, err)
		}
	}
}

// TestTempDirRefusesAnotherOwner: another user's directory is refused even
// when only they can write it.
func TestTempDirRefusesAnotherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can give a directory to another user")
	}
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", cache)
	dir := filepath.Join(cache, "morph", "graphviz")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if got, err := TempDir(); err == nil || !strings.Contains(err.Error(), "owned by user 65534, not by 0") {
		t.Errorf("TempDir() = %q, %v; want an error naming the owner", got, err)
	}
}

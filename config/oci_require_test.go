package config_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/morphhost/morph/config"
)

// TestRequireDiscovered: under [verify] require, a plugin in a discovery
// directory that [verify] unsigned does not name is refused, at Load, and
// at Open when it appeared after Load (the review's H3: it ran unverified).
func TestRequireDiscovered(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	dir := filepath.Join(".morph", "plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	drop := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name+".wasm"), []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(err error, name string) {
		t.Helper()
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Key != "verify.require" || !strings.Contains(ce.Msg, `"`+name+`"`) || !strings.Contains(ce.Msg, "[verify] unsigned") {
			t.Errorf("%v; want an *Error at verify.require naming %q and [verify] unsigned", err, name)
		}
	}
	drop("stray")
	_, _, err := loadIn(t, "[verify]\nrequire = true\n")
	refused(err, "stray")
	if _, _, err := loadIn(t, "[verify]\nrequire = true\nunsigned = [\"stray\"]\n"); err != nil {
		t.Errorf("Load with the discovered plugin exempt: %v", err)
	}
	if _, _, err := loadIn(t, ""); err != nil {
		t.Errorf("Load without require: %v", err)
	}

	cfg, _, err := loadIn(t, "[verify]\nrequire = true\nunsigned = [\"stray\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	drop("late")
	_, err = cfg.Open(context.Background(), nil)
	var ie *config.InitError
	if !errors.As(err, &ie) {
		t.Fatalf("Open with a plugin discovered after Load: %v, want an *InitError", err)
	}
	refused(err, "late")
}

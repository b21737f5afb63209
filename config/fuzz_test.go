package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/morphhost/morph/config"
)

// FuzzLoad parses arbitrary morph.toml text: a config or an error that
// matches config.ErrConfig, never a panic.
func FuzzLoad(f *testing.F) {
	if b, err := os.ReadFile("../morph.toml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("[llm]\nprovider = \"openai\"\nmodel = \"m\"\n[llm.parameters]\ntemperature = \"hot\"\n"))
	f.Add([]byte("[[plugins]]\nname = 1\n[agent]\nmax_steps = -1\n"))
	f.Add([]byte("[llm\n"))
	dir := f.TempDir()
	path := filepath.Join(dir, "morph.toml")
	f.Fuzz(func(t *testing.T, text []byte) {
		if err := os.WriteFile(path, text, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := config.Load(path); err != nil && !errors.Is(err, config.ErrConfig) {
			t.Fatalf("error %v does not match ErrConfig", err)
		}
	})
}

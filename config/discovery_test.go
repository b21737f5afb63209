package config_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/internal/testenv"
)

// Plugins in ./.morph/plugins load after [[plugins]]; a name already taken is skipped.
func TestDiscovery(t *testing.T) {
	fixture := func(name string) []byte {
		return testenv.File(t, filepath.Join("..", "guests", "testdata", name+".wasm"), "fixtures")
	}
	minimal, echo := fixture("minimal"), fixture("echo")
	dir := t.TempDir()
	t.Chdir(dir)
	os.MkdirAll(filepath.Join(".morph", "plugins"), 0o755)
	os.WriteFile(filepath.Join(".morph", "plugins", "echo.wasm"), echo, 0o644)
	os.WriteFile(filepath.Join(".morph", "plugins", "min.wasm"), minimal, 0o644)
	os.WriteFile("configured.wasm", minimal, 0o644)
	os.WriteFile("replies.json", []byte(`{"replies":[{"reply":"x"}]}`), 0o644)
	os.WriteFile("morph.toml", []byte(`
[llm]
provider = "scripted"
scripted_replies = "replies.json"
[wasm]
cache_dir = "off"
[discovery]
user = false
[[plugins]]
name = "min"
path = "configured.wasm"
`), 0o644)
	cfg, err := config.Load("morph.toml")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := cfg.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	st := rt.Engine.Status()
	if len(st.Plugins) != 2 {
		t.Fatalf("len(Plugins) = %d, want 2 (%+v)", len(st.Plugins), st.Plugins)
	}
	if st.Plugins[0].Name != "min" {
		t.Errorf("Plugins[0].Name = %q, want %q", st.Plugins[0].Name, "min")
	}
	if st.Plugins[0].Source != "configured.wasm" {
		t.Errorf("Plugins[0].Source = %q, want %q", st.Plugins[0].Source, "configured.wasm")
	}
	if st.Plugins[1].Name != "echo" {
		t.Errorf("Plugins[1].Name = %q, want %q", st.Plugins[1].Name, "echo")
	}
	if len(st.Skipped) != 1 || st.Skipped[0].Name != "min" {
		t.Fatalf("skipped %+v", st.Skipped)
	}
	// Disabled, the directory is not read.
	off := false
	cfg.Discovery.Project = &off
	rt2, err := cfg.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close(context.Background())
	if n := len(rt2.Engine.Status().Plugins); n != 1 {
		t.Fatalf("%d plugins with discovery off", n)
	}
}

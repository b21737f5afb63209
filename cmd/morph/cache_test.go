package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// cacheOff is `cache_dir = "off"`, and tomlTable a table's header.
var (
	cacheOff  = regexp.MustCompile(`^\s*cache_dir\s*=\s*"off"`)
	tomlTable = regexp.MustCompile(`^\s*\[+\s*([^\]]+?)\s*\]+`)
)

// wasmCacheOff reports whether the TOML text turns the compilation cache
// off: cache_dir = "off" in its [wasm] table.
func wasmCacheOff(text string) bool {
	table := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if m := tomlTable.FindStringSubmatch(line); m != nil {
			table = m[1]
		} else if table == "wasm" && cacheOff.MatchString(line) {
			return true
		}
	}
	return false
}

// tomlBlock is a ```toml fenced block of a Markdown file.
var tomlBlock = regexp.MustCompile("(?s)```toml\n(.*?)```")

// What a new user copies keeps the compilation cache on: each scaffold's
// morph.toml, every config the examples ship and every TOML block of the
// READMEs. With it off, every run of a standard-Go plugin compiles it
// again (seconds); tests that want no cache say so in their own configs.
func TestPluginShippedConfigsKeepCache(t *testing.T) {
	if !wasmCacheOff("[wasm]\ncache_dir = \"off\"\n") || wasmCacheOff("[oci]\ncache_dir = \"off\"\n") {
		t.Fatal("wasmCacheOff does not tell [wasm] from [oci]")
	}
	repo := filepath.Join("..", "..")
	texts := map[string]string{}
	for _, lang := range scaffoldLangs {
		s, err := newScaffold(lang, "x", repo, "--pdk")
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), lang)
		if _, err := writeScaffold(dir, s); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "morph.toml"))
		if err != nil {
			t.Fatal(err)
		}
		texts["plugin new "+lang+": morph.toml"] = string(b)
	}
	configs, err := filepath.Glob(filepath.Join(repo, "examples", "*", "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	pipelines, err := filepath.Glob(filepath.Join(repo, "examples", "pipelines", "*.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(configs) == 0 || len(pipelines) == 0 {
		t.Fatalf("no example configs: %q %q", configs, pipelines)
	}
	for _, f := range append(configs, pipelines...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = string(b)
	}
	for _, doc := range []string{"README.md", "guests/README.md"} {
		b, err := os.ReadFile(filepath.Join(repo, doc))
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range tomlBlock.FindAllStringSubmatch(string(b), -1) {
			texts[doc+": toml block "+strconv.Itoa(i+1)] = m[1]
		}
	}
	for name, text := range texts {
		if wasmCacheOff(text) {
			t.Errorf("%s sets [wasm] cache_dir = \"off\": every run would compile the module again", name)
		}
	}
}

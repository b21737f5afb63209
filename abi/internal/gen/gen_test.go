package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../../.."

// The committed generated files are what the generator writes now from
// abi's tables: a hook added, changed or removed without regenerating
// fails here.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	dir := t.TempDir()
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := write(dir); err != nil {
		t.Fatal(err)
	}
	for path := range files {
		want, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Errorf("%s: %v: run go generate ./... in abi (make generate)", path, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what abi/internal/gen writes from abi's tables: run go generate ./... in abi (make generate)", path)
		}
	}
}

// Every generated file says so, as Go's tools and reviewers look for, and
// only the generator writes files with that header.
func TestGeneratedFilesSaySo(t *testing.T) {
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	for path, b := range files {
		if strings.HasSuffix(path, ".md") {
			continue // included into the Rust crate's docs, where a header would show
		}
		if !bytes.HasPrefix(b, []byte(header)) {
			t.Errorf("%s does not start with the generated-code header", path)
		}
	}
}

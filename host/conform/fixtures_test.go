package conform

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReadFixtures(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"build_prompt.json":    `{"task":"t","tools":[],"default_prompt":"p"}`,
		"word_count-long.json": "\n{\"params\":{\"text\":\"a\"}}\n",
		"notes.txt":            "not a fixture",
		"sub.json/inner.json":  `{}`,
		"on_final-x.json.bak":  `{`,
	} {
		path := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadFixtures(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]json.RawMessage{
		"build_prompt":    raws(`{"task":"t","tools":[],"default_prompt":"p"}`),
		"word_count-long": raws(`{"params":{"text":"a"}}`),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fixtures %q, want %q", got, want)
	}
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"task":`), 0o644)
	if _, err := ReadFixtures(dir); err == nil || !strings.Contains(err.Error(), "bad.json is not JSON") {
		t.Fatalf("a bad fixture: %v", err)
	}
	if _, err := ReadFixtures(filepath.Join(dir, "absent")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing directory: %v", err)
	}
}

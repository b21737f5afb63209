package config_test

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/record"
)

// [record] caps reach the recording's options; a cap below 1 is refused
// at its key.
func TestRecordConfig(t *testing.T) {
	ce, _ := loadErr(t, "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[record]\nmax_calls = 0\n")
	if ce.Key != "record.max_calls" || !strings.Contains(ce.Msg, "must be positive") {
		t.Errorf("error %+v", ce)
	}
	ce, _ = loadErr(t, "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[record]\nmax_call_bytes = 1073741824\n")
	if ce.Key != "record.max_call_bytes" || !strings.Contains(ce.Msg, "over the limit") {
		t.Errorf("a max_call_bytes no reader could take: %+v", ce)
	}
	secret := "a-granted-value-of-32-bytes-long"
	t.Setenv("MORPH_TEST_SECRET", secret)
	t.Setenv("MORPH_TEST_KEY", "short") // the model's key, under MinSecretBytes: left out, not refused
	dir := write(t, map[string]string{"replies.json": replies, "morph.toml": `
[llm]
provider = "scripted"
scripted_replies = "replies.json"
api_key_env = "MORPH_TEST_KEY"
[record]
max_bytes = 4096
max_call_bytes = 512
[[plugins]]
name = "cap"
path = ` + strconv.Quote(capWasm(t)) + `
env = ["MORPH_TEST_SECRET", "MORPH_TEST_UNSET"]
`})
	c, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	o := c.RecordOptions("test")
	if o.MaxBytes != 4096 || o.MaxCallBytes != 512 || o.MaxCalls != 0 || o.Morph != "test" {
		t.Errorf("options %+v", o)
	}
	if len(o.Secrets) != 1 || o.Secrets[0] != (record.Secret{Name: "MORPH_TEST_SECRET", Value: secret, Source: "granted to plugin cap"}) {
		t.Fatalf("secrets %+v", o.Secrets)
	}
	t.Setenv("MORPH_TEST_SECRET", "abc")
	if _, err := record.Create(filepath.Join(t.TempDir(), "r"), c.RecordOptions("test")); !errors.Is(err, record.ErrSecretTooShort) ||
		!strings.Contains(err.Error(), "MORPH_TEST_SECRET granted to plugin cap") {
		t.Fatalf("a 3-byte granted value: %v", err)
	}
}

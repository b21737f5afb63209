package config_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/oci"
)

// loadIn writes morph.toml (with replies.json and files) to a new
// directory and loads it.
func loadIn(t *testing.T, toml string, files ...string) (*config.Config, string, error) {
	t.Helper()
	all := map[string]string{"morph.toml": scriptedLLM + toml, "replies.json": replies}
	for _, f := range files {
		all[f] = "x"
	}
	dir := write(t, all)
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	return cfg, dir, err
}

// An oci:// path or linked module is a reference, not a file: Load
// neither looks for it nor rewrites it, and resolves the files
// [plugins.verify], [verify] and [oci] name against the config file's
// directory, with the [oci] defaults set. Open refuses a tag morph.lock
// does not record, naming the plugin and what to do.
func TestOCIKeys(t *testing.T) {
	cfg, dir, err := loadIn(t, `
[[plugins]]
name = "time"
path = "oci://ghcr.io/acme/time-plugin:v1"
[plugins.verify]
key = "keys/cosign.pub"
[plugins.modules]
lib = "oci://ghcr.io/acme/lib@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

[[plugins]]
name = "spin"
path = "oci://127.0.0.1:5000/plugins/spin:v2"
[plugins.verify]
identity_regexp = "^https://github.com/acme/"
issuer = "https://token.actions.githubusercontent.com"

[verify]
require = true
trusted_root = "trusted_root.json"

[oci]
cache_dir = "cache"
plain_http = ["127.0.0.1:*", "localhost:5000", "registry.lan"]
timeout = "5s"
`, "keys/cosign.pub", "trusted_root.json")
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Plugins[0]; p.Path != "oci://ghcr.io/acme/time-plugin:v1" || !strings.HasPrefix(p.Modules["lib"].Path, "oci://") {
		t.Errorf("references rewritten: path %q, lib %q", p.Path, p.Modules["lib"].Path)
	}
	if cfg.OCI.Timeout != 5*time.Second {
		t.Errorf("oci.timeout = %v, want 5s", cfg.OCI.Timeout)
	}
	for got, want := range map[string]string{
		cfg.Plugins[0].Verify.Key:    filepath.Join(dir, "keys", "cosign.pub"),
		cfg.Verify.TrustedRoot:       filepath.Join(dir, "trusted_root.json"),
		cfg.OCI.CacheDir:             filepath.Join(dir, "cache"),
		cfg.OCI.Lock:                 filepath.Join(dir, config.DefaultLockFile),
		cfg.OCI.TagCheck:             config.TagCheckRefuse,
		cfg.Plugins[1].Verify.Bundle: "",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	cfg.OCI.Offline = true // the references name no registry of the test's
	_, err = cfg.Open(context.Background(), nil)
	var ce *config.Error
	var ie *config.InitError
	if !errors.As(err, &ie) || !errors.As(err, &ce) || ce.Key != "plugins.0.path" || !errors.Is(err, oci.ErrUnlockedTag) ||
		!strings.Contains(ce.Msg, `plugin "time"`) || !strings.Contains(ce.Msg, "morph plugin lock") {
		t.Errorf("Open: %v, want an *InitError with an *Error at plugins.0.path, ErrUnlockedTag naming the plugin and morph plugin lock", err)
	}
}

// Each mistake in the keys is refused at its key, saying what to write.
func TestOCIKeysRefused(t *testing.T) {
	const oci = "[[plugins]]\nname = \"time\"\npath = \"oci://ghcr.io/acme/time:v1\"\n"
	const local = "[[plugins]]\nname = \"local\"\npath = \"local.wasm\"\n"
	for _, c := range []struct {
		name, toml, key, want string
	}{
		{"empty reference", "[[plugins]]\nname = \"x\"\npath = \"oci://\"\n", "plugins.0.path", "has no repository"},
		{"empty module reference", local + "[plugins.modules]\nlib = \"oci://\"\n", "plugins.0.modules.lib", "has no repository"},
		{"lock name twice", "[[plugins]]\nname = \"local/modules/lib\"\npath = \"oci://ghcr.io/acme/x:v1\"\n" + local + "[plugins.modules]\nlib = \"oci://ghcr.io/acme/lib:v1\"\n",
			"plugins.1.modules.lib", `plugin "local": its morph.lock name "local/modules/lib" is also that of oci://ghcr.io/acme/x:v1`},
		{"no signer", oci + "[plugins.verify]\n", "plugins.0.verify", "names no signer"},
		{"key and identity", oci + "[plugins.verify]\nkey = \"k.pub\"\nidentity = \"me@example.com\"\nissuer = \"https://accounts.google.com\"\n",
			"plugins.0.verify.key", "exclude each other"},
		{"identity without issuer", oci + "[plugins.verify]\nidentity = \"me@example.com\"\n", "plugins.0.verify", "needs issuer (or issuer_regexp)"},
		{"issuer without identity", oci + "[plugins.verify]\nissuer = \"https://accounts.google.com\"\n", "plugins.0.verify", "needs identity (or identity_regexp)"},
		{"identity twice", oci + "[plugins.verify]\nidentity = \"a\"\nidentity_regexp = \"b\"\nissuer = \"i\"\n", "plugins.0.verify.identity", "identity and identity_regexp exclude each other"},
		{"bad regexp", oci + "[plugins.verify]\nidentity_regexp = \"(\"\nissuer = \"i\"\n", "plugins.0.verify.identity_regexp", "missing closing )"},
		{"missing key file", oci + "[plugins.verify]\nkey = \"absent.pub\"\n", "plugins.0.verify.key", "absent.pub not found"},
		{"missing trusted root", oci + "[plugins.verify]\nidentity = \"a\"\nissuer = \"i\"\ntrusted_root = \"absent.json\"\n", "plugins.0.verify.trusted_root", "absent.json not found"},
		{"trusted root with a key", oci + "[plugins.verify]\nkey = \"k.pub\"\ntrusted_root = \"k.pub\"\n", "plugins.0.verify.trusted_root", "for keyless signatures"},
		{"bundle on oci", oci + "[plugins.verify]\nkey = \"k.pub\"\nbundle = \"k.pub\"\n", "plugins.0.verify.bundle", "bundle is for a local main module"},
		{"local without bundle", local + "[plugins.verify]\nkey = \"k.pub\"\n", "plugins.0.verify", "add bundle ="},
		{"local keyless without a trusted root", local + "[plugins.verify]\nidentity = \"me@example.com\"\nissuer = \"https://accounts.google.com\"\nbundle = \"k.pub\"\n",
			"plugins.0.verify", `set trusted_root = "trusted_root.json" (a Sigstore trusted root) in [plugins.verify] or in [verify]`},
		{"unknown verify key", oci + "[plugins.verify]\nkey = \"k.pub\"\nfingerprint = \"x\"\n", "plugins.verify.fingerprint", "known keys in [plugins.verify]: bundle, identity, identity_regexp, issuer, issuer_regexp, key, trusted_root)"},
		{"[verify] trusted root missing", "[verify]\ntrusted_root = \"absent.json\"\n", "verify.trusted_root", "absent.json not found"},
		{"tag_check", "[oci]\ntag_check = \"ignore\"\n", "oci.tag_check", `unknown value "ignore" (known: refuse, warn, off)`},
		{"plain_http scheme", "[oci]\nplain_http = [\"http://127.0.0.1:5000\"]\n", "oci.plain_http", "without scheme or path"},
		{"plain_http port", "[oci]\nplain_http = [\"127.0.0.1:http\"]\n", "oci.plain_http", `port "http" is not a number`},
		// One parser with oci's client: the host is never a glob.
		{"plain_http glob", "[oci]\nplain_http = [\"*\"]\n", "oci.plain_http", "no wildcards"},
		{"plain_http bracket", "[oci]\nplain_http = [\"[\"]\n", "oci.plain_http", "no host"},
		{"timeout negative", "[oci]\ntimeout = \"-1s\"\n", "oci.timeout", "must be positive"},
		{"timeout a number", "[oci]\ntimeout = 30\n", "oci.timeout", "want a duration string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := loadIn(t, c.toml, "local.wasm", "k.pub")
			var ce *config.Error
			if !errors.As(err, &ce) || !errors.Is(err, config.ErrConfig) {
				t.Fatalf("Load: %v, want an *Error", err)
			}
			if ce.Key != c.key || !strings.Contains(ce.Msg, c.want) {
				t.Errorf("Load: %v\nwant key %s, a message with %q", err, c.key, c.want)
			}
			if ce.Line == 0 && c.key != "plugins.verify.fingerprint" {
				t.Errorf("Load: %v: no line", err)
			}
		})
	}
}

// [verify] require: an oci:// plugin (or linked module) without
// [plugins.verify] is refused naming the key to add, a local module
// without a bundle likewise; unsigned exempts by name, a [[plugins]] name
// or a discovered plugin's file name, and names nothing else.
func TestRequireUnsigned(t *testing.T) {
	const plugins = `
[[plugins]]
name = "time"
path = "oci://ghcr.io/acme/time:v1"
[[plugins]]
name = "local"
path = "local.wasm"
[[plugins]]
name = "linked"
path = "local.wasm"
[plugins.modules]
lib = "oci://ghcr.io/acme/lib:v1"
`
	_, _, err := loadIn(t, plugins+"[verify]\nrequire = true\n", "local.wasm")
	for _, want := range []string{
		`plugins.0.path: plugin "time": [verify] require = true and this oci:// plugin has no [plugins.verify]: add [plugins.verify] with key = "cosign.pub"`,
		`plugins.1.path: plugin "local": [verify] require = true and this local module has nothing to verify: add [plugins.verify] with bundle =`,
		`plugins.2.path: plugin "linked": [verify] require = true and this oci:// plugin has no [plugins.verify]`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load: %v\nwant %q", err, want)
		}
	}

	// Exempt by name, and a discovered plugin by its file name.
	t.Chdir(t.TempDir())
	if err := os.MkdirAll(filepath.Join(".morph", "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(".morph", "plugins", "dev-hooks.wasm"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadIn(t, plugins+"[verify]\nrequire = true\nunsigned = [\"time\", \"local\", \"linked\", \"dev-hooks\"]\n", "local.wasm"); err != nil {
		t.Errorf("Load with every plugin exempt: %v", err)
	}
	// Without require nothing is demanded.
	if _, _, err := loadIn(t, plugins, "local.wasm"); err != nil {
		t.Errorf("Load without require: %v", err)
	}
	// Under require every module of a signed plugin must be covered (the
	// discovered dev-hooks is still exempt by name: TestRequireDiscovered).
	// A signed oci:// lib does not cover a local main module: that needs
	// its bundle, and then both are checked.
	const exempt = "[verify]\nrequire = true\nunsigned = [\"time\", \"local\", \"dev-hooks\"]\n"
	_, _, err = loadIn(t, plugins+"[plugins.verify]\nkey = \"k.pub\"\n"+exempt, "local.wasm", "k.pub")
	if want := `plugins.2.verify: plugin "linked": its main module `; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "local.wasm is local") {
		t.Errorf("Load with a local main module and a signed oci:// lib: %v\nwant %q naming local.wasm", err, want)
	}
	if _, _, err := loadIn(t, plugins+"[plugins.verify]\nkey = \"k.pub\"\nbundle = \"local.sigstore.json\"\n"+exempt, "local.wasm", "k.pub", "local.sigstore.json"); err != nil {
		t.Errorf("Load with a bundle for the local main module and a signed oci:// lib: %v", err)
	}
	// A signed oci:// main module does not cover a local linked module.
	const ociMainLocalLib = "[[plugins]]\nname = \"reg\"\npath = \"oci://ghcr.io/acme/reg:v1\"\n[plugins.verify]\nkey = \"k.pub\"\n[plugins.modules]\nlib = \"local.wasm\"\n"
	_, _, err = loadIn(t, ociMainLocalLib+"[verify]\nrequire = true\nunsigned = [\"dev-hooks\"]\n", "local.wasm", "k.pub")
	if want := `plugins.0.modules.lib: plugin "reg": [verify] require = true and its local linked module "lib"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load with a signed oci:// main module and a local lib: %v\nwant %q", err, want)
	}
	if _, _, err := loadIn(t, ociMainLocalLib, "local.wasm", "k.pub"); err != nil {
		t.Errorf("Load of a signed oci:// main module and a local lib without require: %v", err)
	}

	for _, c := range []struct{ toml, want string }{
		{plugins + "[verify]\nunsigned = [\"tiem\"]\n", `verify.unsigned: "tiem" is neither a [[plugins]] name nor a discovered plugin's (plugins: linked, local, time, dev-hooks)`},
		{plugins + "[plugins.verify]\nkey = \"k.pub\"\n[verify]\nunsigned = [\"linked\"]\n", `verify.unsigned: plugin "linked" has a [plugins.verify] table and is named in unsigned`},
	} {
		if _, _, err := loadIn(t, c.toml, "local.wasm", "k.pub"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load: %v\nwant %q", err, c.want)
		}
	}
}

// A local module's [plugins.verify] bundle is checked at Open: one that
// does not verify (here, no bundle at all) refuses the plugin at its bundle
// key with the oci kind inside (cmd/morph's TestRequireUnsigned signs one).
func TestLocalBundleAtOpen(t *testing.T) {
	cfg, _, err := loadIn(t, "[[plugins]]\nname = \"local\"\npath = \"local.wasm\"\n[plugins.verify]\nkey = \"k.pub\"\nbundle = \"local.sigstore.json\"\n",
		"local.wasm", "k.pub", "local.sigstore.json")
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.Open(context.Background(), nil)
	var ie *config.InitError
	var ce *config.Error
	if !errors.As(err, &ie) || !errors.As(err, &ce) || ce.Key != "plugins.0.verify.bundle" || !errors.Is(err, oci.ErrPolicy) ||
		!strings.Contains(ce.Msg, `plugin "local"`) {
		t.Errorf("Open: %v, want an *InitError at plugins.0.verify.bundle with ErrPolicy (k.pub is no key) naming the plugin", err)
	}
}

// The README's example of the OCI keys loads as written, in a config with
// an [llm] table (with its cosign.pub beside it, and no discovered plugin
// around).
func TestReadmeOCIExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Plugins from OCI registries\n")
	_, block, ok2 := strings.Cut(section, "```toml\n")
	block, _, ok3 := strings.Cut(block, "```\n")
	if !ok || !ok2 || !ok3 || !strings.Contains(block, "oci://") {
		t.Fatalf("README.md has no toml block with oci:// under \"## Plugins from OCI registries\"")
	}
	t.Chdir(t.TempDir())
	t.Setenv("HOME", t.TempDir())
	if _, _, err := loadIn(t, block, "cosign.pub"); err != nil {
		t.Errorf("the README example does not load: %v\n%s", err, block)
	}
}

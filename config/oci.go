package config

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/morphhost/morph/oci"
)

// Plugins from OCI registries and their signatures (package oci):
//
//	[[plugins]]
//	name = "time"
//	path = "oci://ghcr.io/acme/time-plugin:v1"  # or ...@sha256:HEX; sha256 = "..." still pins the module
//	[plugins.verify]                            # key, or identity|identity_regexp with issuer|issuer_regexp
//	key = "cosign.pub"                          # relative to the config file
//	[plugins.modules]
//	lib = "oci://ghcr.io/acme/lib:v1"           # verified by the entry's [plugins.verify]
//
//	[verify]
//	require = true            # every plugin verifies, or is named in unsigned
//	unsigned = ["dev-hooks"]  # [[plugins]] names, or discovered plugins' file names; each must exist
//	trusted_root = "trusted_root.json"
//
//	[oci]
//	cache_dir = ""            # default: the user cache directory's morph/oci
//	lock = "morph.lock"
//	offline = false
//	tag_check = "refuse"      # refuse | warn | off
//	plain_http = ["127.0.0.1:*"]
//	timeout = "30s"           # how long a registry may stay silent
//
// Load checks these keys offline and touches no network: the references'
// form, the signer (a key, or a keyless identity and issuer), that the
// files named exist, and that under [verify] require every plugin has a
// way to verify or is exempt by name. A path that is an oci:// reference
// is never looked up as a file.

// OCIScheme starts a [[plugins]] path or a [plugins.modules] value that
// names a module in an OCI registry rather than a file.
const OCIScheme = oci.Scheme

// IsOCI reports whether path is an OCI reference (oci://...), not a file.
func IsOCI(path string) bool { return strings.HasPrefix(path, OCIScheme) }

// PluginVerify is a [plugins.verify] table: who must have signed the
// plugin. A key, or (keyless, Sigstore's Fulcio certificates) an identity
// and the OIDC issuer that vouched for it, each exact or a regular
// expression. Load resolves the files against the config file's directory.
type PluginVerify struct {
	// Key is a cosign public key file (PEM).
	Key string `toml:"key"`
	// Identity is the exact signer of a keyless signature (a certificate's
	// SAN: a workflow URL, an e-mail address).
	Identity string `toml:"identity"`
	// IdentityRegexp matches the signer instead (Go syntax). It must match
	// the whole identity: morph anchors it, as ^(?:RE)$, where cosign finds
	// it anywhere ("https://github\.com/acme/.*").
	IdentityRegexp string `toml:"identity_regexp"`
	// Issuer is the exact OIDC issuer of a keyless signature, such as
	// https://token.actions.githubusercontent.com.
	Issuer string `toml:"issuer"`
	// IssuerRegexp matches the issuer instead, anchored as IdentityRegexp.
	IssuerRegexp string `toml:"issuer_regexp"`
	// TrustedRoot is a Sigstore trusted_root.json for keyless signatures;
	// default [verify] trusted_root, else Sigstore's public root (TUF).
	TrustedRoot string `toml:"trusted_root"`
	// Bundle is the Sigstore bundle of a local main module (cosign
	// sign-blob --bundle); an oci:// module's signatures are found in its
	// registry. A plugin may have both: a local main module with a bundle
	// and oci:// linked modules, each checked.
	Bundle string `toml:"bundle"`
}

// Verification is the [verify] table: what every plugin must show.
type Verification struct {
	// Require makes every module of every plugin verify, main and linked
	// ([plugins.verify]: a bundle for a local main module, registry
	// signatures for an oci:// one), unless Unsigned names the plugin. A
	// local linked module cannot be verified, so its plugin must be exempt.
	Require bool `toml:"require"`
	// Unsigned names the plugins exempt from Require: [[plugins]] names, or
	// for a plugin found in a discovery directory its file name without
	// .wasm.
	Unsigned []string `toml:"unsigned"`
	// TrustedRoot is the default [plugins.verify] trusted_root.
	TrustedRoot string `toml:"trusted_root"`
}

// OCI is the [oci] table: where registry plugins are kept and how their
// references are trusted.
type OCI struct {
	// CacheDir holds the manifests, layers and modules fetched; empty
	// means morph/oci in the user cache directory. A relative path is
	// resolved against the config file's directory.
	CacheDir string `toml:"cache_dir"`
	// Lock is morph.lock, which records the digest each tag resolved to
	// (`morph plugin lock`); default "morph.lock" beside the config file,
	// and Load resolves it so.
	Lock string `toml:"lock"`
	// Offline reaches no registry: a digest not in the cache is an error
	// (as `morph run --offline`).
	Offline bool `toml:"offline"`
	// TagCheck is what a locked tag that now resolves to another digest
	// means: TagCheckRefuse (the default, which Load sets), TagCheckWarn
	// (a warning, and the locked digest runs) or TagCheckOff (no lookup).
	TagCheck string `toml:"tag_check"`
	// PlainHTTP are the registries reached over plain HTTP instead of
	// HTTPS: "HOST", "HOST:PORT" or "HOST:*" (any port).
	PlainHTTP []string `toml:"plain_http"`
	// Timeout is how long a registry may stay silent before morph gives
	// up on it (then a locked digest in the cache still runs); default
	// oci.DefaultTimeout.
	Timeout time.Duration `toml:"timeout"`
}

// The [oci] tag_check values.
const (
	TagCheckRefuse = "refuse"
	TagCheckWarn   = "warn"
	TagCheckOff    = "off"
)

// DefaultLockFile is [oci] lock's default, beside the config file.
const DefaultLockFile = "morph.lock"

// ociPath checks a [[plugins]] path or [plugins.modules] value that is an
// oci:// reference; key locates it.
func (v *validator) ociPath(key toml.Key, plugin, ref string) {
	if _, err := oci.ParseRef(ref); err != nil {
		v.fail(key, err, "plugin %q: %v", plugin, err)
	}
}

// configFile resolves a file a key names against the config file's
// directory, and fails key when it cannot be read.
func (v *validator) configFile(key toml.Key, what string, path *string) {
	if *path == "" {
		return
	}
	if !filepath.IsAbs(*path) {
		*path = filepath.Join(filepath.Dir(v.c.File), *path)
	}
	if _, err := os.Stat(*path); err != nil {
		v.fail(key, err, "%s %s not found (a relative path is resolved against the config file's directory)", what, *path)
	}
}

// policy is the verification policy the table states, with trustedRoot
// when it names none.
func (pv *PluginVerify) policy(trustedRoot string) oci.Policy {
	return oci.Policy{Key: pv.Key, Identity: pv.Identity, IdentityRegexp: pv.IdentityRegexp, Issuer: pv.Issuer,
		IssuerRegexp: pv.IssuerRegexp, TrustedRoot: cmp.Or(pv.TrustedRoot, trustedRoot)}
}

// fromRegistry reports whether the plugin's module or one of its linked
// modules is an oci:// reference.
func (p PluginEntry) fromRegistry() bool {
	for _, m := range p.Modules {
		if IsOCI(m.Path) {
			return true
		}
	}
	return IsOCI(p.Path)
}

// verification checks [verify], each [plugins.verify] and [oci]; it runs
// after plugins, which has resolved the local paths.
func (v *validator) verification() {
	vt := &v.c.Verify
	v.configFile(toml.Key{"verify", "trusted_root"}, "trusted root", &vt.TrustedRoot)
	names := map[string]bool{}
	for i := range v.c.Plugins {
		p := &v.c.Plugins[i]
		names[p.Name] = true
		key := func(field ...string) toml.Key { return append(toml.Key{"plugins", strconv.Itoa(i)}, field...) }
		exempt := slices.Contains(vt.Unsigned, p.Name)
		switch {
		case p.Verify != nil:
			v.pluginVerify(p, key, vt.Require)
			if exempt {
				v.fail(toml.Key{"verify", "unsigned"}, nil, "plugin %q has a [plugins.verify] table and is named in unsigned: remove one of them", p.Name)
			}
		case !vt.Require || exempt:
		case p.fromRegistry():
			v.fail(key("path"), nil, "plugin %q: [verify] require = true and this oci:// plugin has no [plugins.verify]: "+
				"add [plugins.verify] with key = \"cosign.pub\" (or identity and issuer for a keyless signature), or name it in [verify] unsigned", p.Name)
		default:
			v.fail(key("path"), nil, "plugin %q: [verify] require = true and this local module has nothing to verify: "+
				"add [plugins.verify] with bundle = \"FILE.sigstore.json\" (cosign sign-blob --bundle) and its key or identity and issuer, or name it in [verify] unsigned", p.Name)
		}
	}
	var discovered []string
	if len(vt.Unsigned) > 0 || vt.Require {
		discovered = pluginNames(discoveredFiles(v.c.Discovery.Directories()))
	}
	if err := v.c.unverifiedDiscovered(discovered); err != nil {
		v.fail(toml.Key{"verify", "require"}, nil, "%s", err.Error())
	}
	for _, name := range vt.Unsigned {
		if !names[name] && !slices.Contains(discovered, name) {
			known := append(slices.Sorted(maps.Keys(names)), discovered...)
			v.fail(toml.Key{"verify", "unsigned"}, nil, "%q is neither a [[plugins]] name nor a discovered plugin's (plugins: %s)", name, listOrNone(known))
		}
	}
	v.lockNames()
	v.oci()
}

// lockNames refuses two oci:// references with one morph.lock name (a
// [[plugins]] named "a/modules/lib" and plugin a's linked module lib): each
// lock would overwrite the other's entry, and every run refuse one of them.
func (v *validator) lockNames() {
	seen := map[string]OCIRef{}
	for _, r := range v.c.OCIRefs() {
		if first, ok := seen[r.Name]; ok {
			v.fail(r.key(), nil, "plugin %q: its morph.lock name %q is also that of %s (plugin %q): rename one of the plugins", r.Plugin, r.Name, first.Ref, first.Plugin)
			continue
		}
		seen[r.Name] = r
	}
}

// unverifiedDiscovered refuses, under [verify] require, the discovered
// plugins (names) that [verify] unsigned does not exempt: a plugin found in
// a discovery directory has no [plugins.verify], so nothing verifies it.
// Load checks the directories as they are; Open again, as they are then.
func (c *Config) unverifiedDiscovered(names []string) error {
	if !c.Verify.Require {
		return nil
	}
	var bad []string
	for _, n := range names {
		if !slices.Contains(c.Verify.Unsigned, n) {
			bad = append(bad, strconv.Quote(n))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("[verify] require = true and the discovery directories (%s) hold plugins that nothing verifies: %s; "+
		"name them in [verify] unsigned, configure them as [[plugins]] with [plugins.verify], or remove them",
		strings.Join(c.Discovery.Directories(), ", "), strings.Join(bad, ", "))
}

// pluginNames are the names of the discovered plugins files: their file
// names without .wasm, as the host names them.
func pluginNames(files []string) []string {
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".wasm"))
	}
	return names
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// pluginVerify checks one [plugins.verify] table: a key or a keyless
// identity and issuer, not both (oci.Policy.Validate); its files; a bundle
// only for a local main module. Under require every module of the plugin
// must be covered: an oci:// one by its registry signatures, a local main
// module by the bundle; a local linked module has no signature of its own,
// so require refuses it.
func (v *validator) pluginVerify(p *PluginEntry, key func(...string) toml.Key, require bool) {
	pv := p.Verify
	// The signer's shape is oci's rule (the one Verify applies); its
	// refusal names the field, which locates it here.
	var pe *oci.PolicyError
	if err := pv.policy("").Validate(); errors.As(err, &pe) {
		at := key("verify")
		if pe.Field != "" {
			at = key("verify", pe.Field)
		}
		v.fail(at, err, "plugin %q: [plugins.verify] %v", p.Name, err)
	}
	if pv.Key != "" && pv.TrustedRoot != "" {
		v.fail(key("verify", "trusted_root"), nil, "plugin %q: trusted_root is for keyless signatures; a key-signed plugin needs only key", p.Name)
	}
	localMain := !IsOCI(p.Path)
	switch {
	case pv.Bundle != "" && !localMain:
		v.fail(key("verify", "bundle"), nil, "plugin %q: bundle is for a local main module; an oci:// module's signatures are found in its registry", p.Name)
	case pv.Bundle == "" && localMain && (require || !p.fromRegistry()):
		v.fail(key("verify"), nil, "plugin %q: its main module %s is local and its signature is a file: add bundle = \"FILE.sigstore.json\" (cosign sign-blob --bundle)", p.Name, p.Path)
	}
	if localMain && pv.Bundle != "" && pv.Key == "" && pv.TrustedRoot == "" && v.c.Verify.TrustedRoot == "" {
		// A bundle is checked offline and nothing fetches Sigstore's public
		// root for a local module: the root must be a file.
		v.fail(key("verify"), nil, "plugin %q: a keyless bundle of a local module is checked against a trusted root file: "+
			"set trusted_root = \"trusted_root.json\" (a Sigstore trusted root) in [plugins.verify] or in [verify]", p.Name)
	}
	if require {
		for _, m := range slices.Sorted(maps.Keys(p.Modules)) {
			if !IsOCI(p.Modules[m].Path) {
				v.fail(key("modules", m), nil, "plugin %q: [verify] require = true and its local linked module %q (%s) is not covered by [plugins.verify] (a bundle covers the main module only): "+
					"make it an oci:// reference signed as the plugin, or name the plugin in [verify] unsigned", p.Name, m, p.Modules[m].Path)
			}
		}
	}
	v.configFile(key("verify", "key"), fmt.Sprintf("plugin %q: key", p.Name), &pv.Key)
	v.configFile(key("verify", "trusted_root"), fmt.Sprintf("plugin %q: trusted root", p.Name), &pv.TrustedRoot)
	v.configFile(key("verify", "bundle"), fmt.Sprintf("plugin %q: bundle", p.Name), &pv.Bundle)
}

// oci checks the [oci] table and resolves its paths.
func (v *validator) oci() {
	o := &v.c.OCI
	dir := filepath.Dir(v.c.File)
	if o.CacheDir != "" && !filepath.IsAbs(o.CacheDir) {
		o.CacheDir = filepath.Join(dir, o.CacheDir)
	}
	if o.Lock == "" {
		o.Lock = DefaultLockFile
	}
	if !filepath.IsAbs(o.Lock) {
		o.Lock = filepath.Join(dir, o.Lock)
	}
	v.duration("oci", "timeout", o.Timeout, 0)
	switch o.TagCheck {
	case "":
		o.TagCheck = TagCheckRefuse
	case TagCheckRefuse, TagCheckWarn, TagCheckOff:
	default:
		v.fail(toml.Key{"oci", "tag_check"}, nil, "unknown value %q (known: %s, %s, %s)", o.TagCheck, TagCheckRefuse, TagCheckWarn, TagCheckOff)
	}
	for _, h := range o.PlainHTTP {
		if _, err := oci.ParsePlainHTTP(h); err != nil {
			v.fail(toml.Key{"oci", "plain_http"}, err, "%v", err)
		}
	}
}

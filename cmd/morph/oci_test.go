package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/morphhost/morph/internal/ocitest"
	"github.com/morphhost/morph/oci"
)

// ociEnv is a registry of the test's on 127.0.0.1 (crane, see
// internal/ocitest), an OCI cache and the settings that reach them.
type ociEnv struct {
	t     *testing.T
	reg   *ocitest.Registry
	cache string
}

func newOCIEnv(t *testing.T) *ociEnv {
	ocitest.Tools(t)
	return &ociEnv{t: t, reg: ocitest.StartRegistry(t), cache: t.TempDir()}
}

// pushArtifact pushes fixture name as ORAS does by default (the layer is
// the module) under repo:tag, and returns the manifest's digest.
func (e *ociEnv) pushArtifact(fixtureName, repoTag string) string {
	dir := e.t.TempDir()
	b, err := os.ReadFile(fixture(e.t, fixtureName))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plugin.wasm"), b, 0o644); err != nil {
		e.t.Fatal(err)
	}
	ocitest.RunIn(e.t, dir, "oras", "push", "--plain-http", e.reg.Ref(repoTag), "plugin.wasm")
	return ocitest.Digest(e.t, e.reg.Ref(repoTag))
}

// pushImage appends a gzip tar layer holding fixture name as plugin.wasm
// to an empty image (crane append, Docker media types), as hyper-mcp's
// plugins are published, and returns the manifest's digest.
func (e *ociEnv) pushImage(fixtureName, repoTag string) string {
	b, err := os.ReadFile(fixture(e.t, fixtureName))
	if err != nil {
		e.t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: "plugin.wasm", Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		e.t.Fatal(err)
	}
	tw.Write(b)
	if err := tw.Close(); err != nil {
		e.t.Fatal(err)
	}
	zw.Close()
	layer := filepath.Join(e.t.TempDir(), "layer.tar.gz")
	if err := os.WriteFile(layer, buf.Bytes(), 0o644); err != nil {
		e.t.Fatal(err)
	}
	ocitest.Run(e.t, "crane", "append", "--insecure", "-f", layer, "-t", e.reg.Ref(repoTag))
	return ocitest.Digest(e.t, e.reg.Ref(repoTag))
}

// ref is the oci:// reference of repo:tag or repo@digest on the registry.
func (e *ociEnv) ref(name string) string { return oci.Scheme + e.reg.Ref(name) }

// config writes a config running replies, with the [oci] settings for the
// registry and the cache, no compilation cache and no discovery, then
// extra ([[plugins]] entries and more).
func (e *ociEnv) config(replies []string, extra string) string {
	return setup(e.t, replies, "\n[wasm]\ncache_dir = \"off\"\n[discovery]\nproject = false\nuser = false\n[oci]\ncache_dir = \""+
		e.cache+"\"\nplain_http = [\"127.0.0.1:*\"]\n"+extra)
}

func ociPlugin(name, ref string) string {
	return "\n[[plugins]]\nname = \"" + name + "\"\npath = \"" + ref + "\"\n"
}

// Plugins from a registry in both layouts run: an ORAS artifact named by
// digest, and a crane image named by tag, which needs morph.lock first.
// Status and inspect name them by reference and digest.
func TestRunOCI(t *testing.T) {
	e := newOCIEnv(t)
	shadow := e.pushArtifact("shadow_calc", "plugins/shadow:v1")
	minimal := e.pushImage("minimal", "plugins/min:v1")
	cfg := e.config([]string{calcReply, finalReply},
		ociPlugin("shadow", e.ref("plugins/shadow@"+shadow))+ociPlugin("min", e.ref("plugins/min:v1")))

	code, _, stderr := morph(t, "", "run", "--config", cfg, "task")
	assertHas(t, "the tag refused until locked", stderr, `plugin "min"`, e.ref("plugins/min:v1"), "morph plugin lock")
	if code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}

	code, stdout, stderr := morph(t, "", "plugin", "lock", "--config", cfg)
	if code != 0 {
		t.Fatalf("lock: exit %d\n%s", code, stderr)
	}
	assertHas(t, "lock's report", stdout, "locked min: "+e.ref("plugins/min:v1")+"@"+minimal+", unsigned", "locked shadow: ")
	lock, err := oci.ReadLock(filepath.Join(filepath.Dir(cfg), "morph.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := lock.Lookup("min"); !ok || m.Digest != minimal || m.Layout != oci.LayoutImage {
		t.Errorf("morph.lock min: %+v, want digest %s, layout image", m, minimal)
	}
	if s, ok := lock.Lookup("shadow"); !ok || s.Digest != shadow || s.Layout != oci.LayoutArtifact {
		t.Errorf("morph.lock shadow: %+v, want digest %s, layout artifact", s, shadow)
	}

	code, stdout, stderr = morph(t, "", "run", "--config", cfg, "task")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	if out := decode(t, stdout); out.Output != 451.5 {
		t.Errorf("output %v, want 451.5", out.Output)
	}
	assertHas(t, "both plugins loaded, the registry's calc used", stderr, "morph: 2 plugins (", "warning: ", `"calc"`, "shadow")

	code, stdout, stderr = morph(t, "", "plugin", "status", "--config", cfg)
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, stderr)
	}
	assertHas(t, "status names the references with their digests", stdout,
		e.ref("plugins/shadow@"+shadow), e.ref("plugins/min:v1")+"@"+minimal)

	code, stdout, stderr = morph(t, "", "plugin", "inspect", "--config", cfg, e.ref("plugins/min:v1"))
	if code != 0 {
		t.Fatalf("inspect: exit %d\n%s", code, stderr)
	}
	assertHas(t, "inspect's warning", stderr, "warning: "+e.ref("plugins/min:v1")+": no [plugins.verify]", "loaded and initialized unverified")
	assertHas(t, "inspect's registry lines, then the report", stdout, "reference: "+e.ref("plugins/min:v1"), "digest:    "+minimal,
		"layout:    image", "plugin:    min", "signature: none found", "exports:")

	// A local plugin's oci:// linked module is fetched for inspect --config,
	// not looked for as a file.
	local := fixture(t, "extism_nohooks")
	lib := e.pushArtifact("extism_nohooks", "plugins/lib:v1")
	cfg = e.config([]string{finalReply}, "\n[[plugins]]\nname = \"local\"\npath = \""+local+"\"\n[[plugins.tools]]\nexport = \"count_vowels\"\n[plugins.modules]\nlib = \""+e.ref("plugins/lib@"+lib)+"\"\n")
	code, stdout, stderr = morph(t, "", "plugin", "inspect", "--config", cfg, local)
	if code != 0 {
		t.Fatalf("inspect --config with an oci:// linked module: exit %d\n%s%s", code, stdout, stderr)
	}
	assertHas(t, "the module loads with its linked module", stdout, "file:     "+local, "plugin:   local", "count_vowels")
}

// A tag pushed again after locking is refused at run, naming both digests;
// lock --check lists it and exits 1; lock --update takes the new digest.
func TestLockTagMoved(t *testing.T) {
	e := newOCIEnv(t)
	first := e.pushArtifact("minimal", "plugins/min:v1")
	cfg := e.config([]string{finalReply, finalReply}, ociPlugin("min", e.ref("plugins/min:v1")))
	if code, _, stderr := morph(t, "", "plugin", "lock", "--config", cfg); code != 0 {
		t.Fatalf("lock: exit %d\n%s", code, stderr)
	}
	second := e.pushArtifact("shadow_calc", "plugins/min:v1")
	if first == second {
		t.Fatal("the second push made the same manifest")
	}

	code, _, stderr := morph(t, "", "run", "--config", cfg, "task")
	if code != exitUsage {
		t.Errorf("run after the tag moved: exit %d, want %d", code, exitUsage)
	}
	assertHas(t, "the refusal", stderr, `plugin "min"`, "resolves to "+second, "morph.lock has "+first, "morph plugin lock --update min")

	code, _, stderr = morph(t, "", "plugin", "lock", "--check", "--config", cfg)
	if code != exitRunFailed {
		t.Errorf("lock --check: exit %d, want 1", code)
	}
	assertHas(t, "lock --check's drift", stderr, "min: "+e.ref("plugins/min:v1")+" resolves to "+second, "morph.lock has "+first)

	// tag_check = "warn" runs the locked digest (minimal, with its
	// build_prompt hook, not the tag's shadow_calc, which has none), saying
	// so; "off" asks nothing.
	lockFile := filepath.Join(filepath.Dir(cfg), "morph.lock")
	for check, want := range map[string]string{"warn": "resolves to " + second, "off": ""} {
		c := e.config([]string{finalReply}, "tag_check = \""+check+"\"\nlock = \""+lockFile+"\"\n"+ociPlugin("min", e.ref("plugins/min:v1")))
		code, _, stderr := morph(t, "", "run", "--config", c, "task")
		if code != 0 || (want == "") != !strings.Contains(stderr, "morph.lock records") || !strings.Contains(stderr, want) || !strings.Contains(stderr, "hooks: build_prompt") {
			t.Errorf("tag_check = %q: exit %d, want 0, the locked module (hooks: build_prompt) and a warning with %q only for warn\n%s", check, code, want, stderr)
		}
		code, stdout, stderr := morph(t, "", "plugin", "status", "--config", c)
		if code != 0 || !strings.Contains(stdout, e.ref("plugins/min:v1")+"@"+first) {
			t.Errorf("tag_check = %q: status exit %d, want the locked digest %s\n%s%s", check, code, first, stdout, stderr)
		}
	}

	// morph.lock's entry is for the tag: the plugin now named by digest is
	// refused until it is locked again.
	c := e.config([]string{finalReply}, "lock = \""+lockFile+"\"\n"+ociPlugin("min", e.ref("plugins/min@"+first)))
	code, _, stderr = morph(t, "", "run", "--config", c, "task")
	if code != exitUsage {
		t.Errorf("a digest reference morph.lock records otherwise: exit %d, want %d", code, exitUsage)
	}
	assertHas(t, "the refusal", stderr, `plugin "min"`, "morph.lock records "+e.ref("plugins/min:v1"), "morph plugin lock --update min")

	if code, _, stderr = morph(t, "", "plugin", "lock", "--config", cfg); code != 0 || !strings.Contains(stderr, "kept; --update min") {
		t.Errorf("lock without --update: exit %d, want 0 and the moved tag kept, said:\n%s", code, stderr)
	}
	if code, stdout, stderr := morph(t, "", "plugin", "lock", "--update", "min", "--config", cfg); code != 0 || !strings.Contains(stdout, "@"+second) {
		t.Fatalf("lock --update min: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr = morph(t, "", "run", "--config", cfg, "task"); code != 0 {
		t.Fatalf("run after --update: exit %d\n%s", code, stderr)
	}
	assertHas(t, "the new module runs", stderr, `"calc"`, "min")
	if code, stdout, stderr := morph(t, "", "plugin", "lock", "--check", "--config", cfg); code != 0 || !strings.Contains(stdout, "up to date") {
		t.Errorf("lock --check after --update: exit %d\n%s%s", code, stdout, stderr)
	}

	// A tag the registry no longer has is refused naming the locked digest
	// and the setting that runs it anyway.
	ocitest.Run(t, "crane", "delete", "--insecure", e.reg.Ref("plugins/min:v1"))
	code, _, stderr = morph(t, "", "run", "--config", cfg, "task")
	if code != exitUsage {
		t.Errorf("run after the tag was deleted: exit %d, want %d", code, exitUsage)
	}
	assertHas(t, "the refusal", stderr, `plugin "min"`, "min:v1@"+second+": the digest morph.lock records", `tag_check = "warn"`)
}

// With the registry stopped, a locked tag runs from the cache with a
// warning, and without one under --offline; a digest never fetched fails
// naming its reference.
func TestOffline(t *testing.T) {
	e := newOCIEnv(t)
	e.pushArtifact("minimal", "plugins/min:v1")
	cfg := e.config([]string{finalReply, finalReply, finalReply}, ociPlugin("min", e.ref("plugins/min:v1")))
	if code, _, stderr := morph(t, "", "plugin", "lock", "--config", cfg); code != 0 {
		t.Fatalf("lock: exit %d\n%s", code, stderr)
	}
	e.reg.Stop()

	code, _, stderr := morph(t, "", "run", "--config", cfg, "task")
	if code != 0 {
		t.Fatalf("run, registry stopped: exit %d\n%s", code, stderr)
	}
	assertHas(t, "the warning", stderr, "running the digest morph.lock records", "cannot be reached", "morph: 1 plugin (")
	code, _, stderr = morph(t, "", "run", "--offline", "--config", cfg, "task")
	if code != 0 || strings.Contains(stderr, "morph.lock records") {
		t.Fatalf("run --offline: exit %d, want 0 and no warning\n%s", code, stderr)
	}

	unknown := e.ref("plugins/min@sha256:" + strings.Repeat("0", 64))
	cfg = e.config([]string{finalReply}, ociPlugin("gone", unknown))
	code, _, stderr = morph(t, "", "run", "--config", cfg, "task")
	if code == 0 {
		t.Fatal("a digest never fetched ran with the registry stopped")
	}
	assertHas(t, "the refusal", stderr, `plugin "gone"`, unknown, "cannot be reached")
}

// Under [verify] require, an oci:// plugin and a local one without
// [plugins.verify] are refused each naming what to add; [verify] unsigned
// exempts them by name; a local module signed with cosign sign-blob runs
// with its bundle and key, and not with another key.
func TestRequireUnsigned(t *testing.T) {
	e := newOCIEnv(t)
	d := e.pushArtifact("minimal", "plugins/min:v1")
	plugins := ociPlugin("min", e.ref("plugins/min@"+d)) + "\n[[plugins]]\nname = \"local\"\npath = \"" + fixture(t, "minimal") + "\"\n"
	cfg := e.config([]string{finalReply}, "[verify]\nrequire = true\n"+plugins)
	code, _, stderr := morph(t, "", "run", "--config", cfg, "task")
	if code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	assertHas(t, "both refusals", stderr, `plugin "min": [verify] require = true and this oci:// plugin has no [plugins.verify]`, `key = "cosign.pub"`,
		`plugin "local": [verify] require = true and this local module`, "[verify] unsigned")

	cfg = e.config([]string{finalReply}, "[verify]\nrequire = true\nunsigned = [\"min\", \"local\"]\n"+plugins)
	if code, _, stderr := morph(t, "", "run", "--config", cfg, "task"); code != 0 || !strings.Contains(stderr, "morph: 2 plugins (") {
		t.Fatalf("exempt: exit %d\n%s", code, stderr)
	}

	// A local module signed with cosign sign-blob verifies by its bundle;
	// with another key it is refused at its bundle key.
	dir := t.TempDir()
	key, pub := ocitest.KeyPair(t, dir, "good")
	_, other := ocitest.KeyPair(t, dir, "other")
	b, err := os.ReadFile(fixture(t, "minimal"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "local.wasm"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	ocitest.RunIn(t, dir, "cosign", "sign-blob", "--key", key, "--bundle", "local.sigstore.json", "--use-signing-config=false", "--tlog-upload=false", "-y", "local.wasm")
	local := func(pub string) string {
		return e.config([]string{finalReply}, "[verify]\nrequire = true\nunsigned = [\"min\"]\n"+ociPlugin("min", e.ref("plugins/min@"+d))+
			"\n[[plugins]]\nname = \"local\"\npath = \""+filepath.Join(dir, "local.wasm")+"\"\n[plugins.verify]\nkey = \""+pub+"\"\nbundle = \""+filepath.Join(dir, "local.sigstore.json")+"\"\n")
	}
	if code, _, stderr := morph(t, "", "run", "--config", local(pub), "task"); code != 0 || !strings.Contains(stderr, "morph: 2 plugins (") {
		t.Fatalf("a signed local module: exit %d\n%s", code, stderr)
	}
	code, _, stderr = morph(t, "", "run", "--config", local(other), "task")
	if code != exitUsage {
		t.Errorf("a local module and another key: exit %d, want %d", code, exitUsage)
	}
	assertHas(t, "the refusal", stderr, "plugins.1.verify.bundle", `plugin "local"`, "the bundle does not verify for this module")
}

// A plugin signed with cosign (bundle and legacy .sig) runs with its key
// in [plugins.verify]; morph.lock records the signer; another key is
// refused naming the plugin. A signature attached after the manifest was
// cached is found by plugin pull, which looks again.
func TestRunOCISigned(t *testing.T) {
	e := newOCIEnv(t)
	dir := t.TempDir()
	key, pub := ocitest.KeyPair(t, dir, "good")
	_, otherPub := ocitest.KeyPair(t, dir, "other")
	d := e.pushArtifact("shadow_calc", "plugins/shadow:v1")
	ref := e.ref("plugins/shadow@" + d)
	signed := func(pub string) string {
		return e.config([]string{finalReply}, "[verify]\nrequire = true\n"+ociPlugin("shadow", ref)+"[plugins.verify]\nkey = \""+pub+"\"\n")
	}
	cfg := signed(pub)

	code, stdout, stderr := morph(t, "", "plugin", "pull", "--config", cfg, ref)
	if code != exitRunFailed {
		t.Errorf("pull of an unsigned manifest with a policy: exit %d, want 1", code)
	}
	assertHas(t, "pull: none found, refused", stdout+stderr, "signature: none found", `plugin "shadow"`, "no cosign signature")

	ocitest.Sign(t, key, e.reg.Ref("plugins/shadow@"+d), false)
	ocitest.Sign(t, key, e.reg.Ref("plugins/shadow@"+d), true)
	code, stdout, stderr = morph(t, "", "plugin", "pull", "--config", cfg, ref)
	if code != 0 {
		t.Fatalf("pull after signing: exit %d\n%s%s", code, stdout, stderr)
	}
	assertHas(t, "both signatures found again and verified", stdout, "signature: bundle sha256:", "signature: sig-tag sha256:", "verified, signed by key SHA256:")
	code, stdout, stderr = morph(t, "", "plugin", "pull", "--json", "--config", cfg, ref)
	var got pulled
	if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil {
		t.Fatalf("pull --json: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	if len(got.Signatures) != 2 || got.Verified == nil || !strings.HasPrefix(got.Verified.KeyFingerprint, "SHA256:") || got.Digest != d || got.Plugin != "shadow" {
		t.Errorf("pull --json: %+v, want two signatures, one verified by the key, digest %s, plugin shadow", got, d)
	}

	if code, _, stderr := morph(t, "", "run", "--config", cfg, "task"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := morph(t, "", "plugin", "lock", "--config", cfg); code != 0 {
		t.Fatalf("lock: exit %d\n%s", code, stderr)
	}
	lock, err := oci.ReadLock(filepath.Join(filepath.Dir(cfg), "morph.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := lock.Lookup("shadow"); s.Signature == nil || !strings.HasPrefix(s.Signature.Key, "SHA256:") {
		t.Errorf("morph.lock shadow: %+v, want the key's fingerprint", s)
	}

	wrong := signed(otherPub)
	code, _, stderr = morph(t, "", "run", "--config", wrong, "task")
	if code != exitUsage {
		t.Errorf("another key: exit %d, want %d", code, exitUsage)
	}
	assertHas(t, "the refusal", stderr, `plugin "shadow"`, ref, "no signature verifies")
	code, _, stderr = morph(t, "", "plugin", "lock", "--config", wrong)
	if _, err := os.Stat(filepath.Join(filepath.Dir(wrong), "morph.lock")); code != exitRunFailed || !os.IsNotExist(err) {
		t.Errorf("lock with another key: exit %d, morph.lock %v; want 1 and no file\n%s", code, err, stderr)
	}
	assertHas(t, "lock's refusal", stderr, `plugin "shadow"`, "no signature verifies", "morph.lock was not written")
}

// Under [verify] require every module of a signed plugin is verified: a
// signed oci:// linked module does not cover a local main module (refused
// until it has a bundle, then both are checked), nor a signed oci:// main
// module a local linked one.
func TestRequireMixedModules(t *testing.T) {
	e := newOCIEnv(t)
	dir := t.TempDir()
	key, pub := ocitest.KeyPair(t, dir, "good")
	_, other := ocitest.KeyPair(t, dir, "other")
	lib := e.pushArtifact("extism_nohooks", "plugins/lib:v1")
	ocitest.Sign(t, key, e.reg.Ref("plugins/lib@"+lib), false)
	b, err := os.ReadFile(fixture(t, "extism_nohooks"))
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(dir, "local.wasm")
	if err := os.WriteFile(local, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ocitest.RunIn(t, dir, "cosign", "sign-blob", "--key", key, "--bundle", "local.sigstore.json", "--use-signing-config=false", "--tlog-upload=false", "-y", "local.wasm")
	localMain := func(verify string) string {
		return e.config([]string{finalReply}, "[verify]\nrequire = true\n\n[[plugins]]\nname = \"local\"\npath = \""+local+
			"\"\n[[plugins.tools]]\nexport = \"count_vowels\"\n[plugins.modules]\nlib = \""+e.ref("plugins/lib@"+lib)+"\"\n[plugins.verify]\n"+verify)
	}

	code, _, stderr := morph(t, "", "run", "--config", localMain("key = \""+pub+"\"\n"), "task")
	if code != exitUsage {
		t.Errorf("a local main module without a bundle beside a signed oci:// lib: exit %d, want %d\n%s", code, exitUsage, stderr)
	}
	assertHas(t, "the refusal", stderr, "plugins.0.verify", `plugin "local"`, "its main module "+local+" is local", "add bundle =")

	bundle := "bundle = \"" + filepath.Join(dir, "local.sigstore.json") + "\"\n"
	if code, _, stderr := morph(t, "", "run", "--config", localMain("key = \""+pub+"\"\n"+bundle), "task"); code != 0 || !strings.Contains(stderr, "morph: 1 plugin (") {
		t.Fatalf("a local main module with its bundle and a signed oci:// lib: exit %d\n%s", code, stderr)
	}
	// Another key: the bundle is checked (and refused) although the lib is
	// an oci:// reference.
	code, _, stderr = morph(t, "", "run", "--config", localMain("key = \""+other+"\"\n"+bundle), "task")
	if code != exitUsage {
		t.Errorf("another key: exit %d, want %d", code, exitUsage)
	}
	assertHas(t, "the refusal", stderr, "plugins.0.verify.bundle", `plugin "local"`, "the bundle does not verify for this module")
	// inspect --config checks it as a run does.
	code, _, stderr = morph(t, "", "plugin", "inspect", "--config", localMain("key = \""+other+"\"\n"+bundle), local)
	if code != exitRunFailed {
		t.Errorf("inspect --config, another key: exit %d, want %d", code, exitRunFailed)
	}
	assertHas(t, "inspect's refusal", stderr, "plugins.0.verify.bundle", "the bundle does not verify for this module")

	mainD := e.pushArtifact("extism_nohooks", "plugins/main:v1")
	ocitest.Sign(t, key, e.reg.Ref("plugins/main@"+mainD), false)
	cfg := e.config([]string{finalReply}, "[verify]\nrequire = true\n\n[[plugins]]\nname = \"reg\"\npath = \""+e.ref("plugins/main@"+mainD)+
		"\"\n[[plugins.tools]]\nexport = \"count_vowels\"\n[plugins.modules]\nlib = \""+local+"\"\n[plugins.verify]\nkey = \""+pub+"\"\n")
	code, _, stderr = morph(t, "", "run", "--config", cfg, "task")
	if code != exitUsage {
		t.Errorf("a signed oci:// main module and a local lib: exit %d, want %d\n%s", code, exitUsage, stderr)
	}
	assertHas(t, "the refusal", stderr, "plugins.0.modules.lib", `plugin "reg"`, `local linked module "lib"`, "[verify] unsigned")
}

// Open lists the discovery directories once: a plugin file that appears
// in one while Open asks a registry (here, as the registry answers the
// tag's HEAD) is neither loaded unverified nor half-checked; the next run
// refuses it under [verify] require.
func TestRequireDiscoveredListedOnce(t *testing.T) {
	e := newOCIEnv(t)
	e.pushArtifact("minimal", "plugins/min:v1")
	b, err := os.ReadFile(fixture(t, "shadow_calc"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // ./.morph/plugins is the project discovery directory
	sneak := filepath.Join(".morph", "plugins", "sneak.wasm")
	var armed atomic.Bool
	target, err := url.Parse("http://" + e.reg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if armed.CompareAndSwap(true, false) {
			if err := os.MkdirAll(filepath.Dir(sneak), 0o755); err != nil {
				t.Error(err)
			}
			if err := os.WriteFile(sneak, b, 0o644); err != nil {
				t.Error(err)
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ref := oci.Scheme + strings.TrimPrefix(srv.URL, "http://") + "/plugins/min:v1"
	cfg := setup(t, []string{finalReply, finalReply}, "\n[wasm]\ncache_dir = \"off\"\n[discovery]\nuser = false\n[oci]\ncache_dir = \""+e.cache+
		"\"\nplain_http = [\"127.0.0.1:*\"]\n[verify]\nrequire = true\nunsigned = [\"min\"]\n"+ociPlugin("min", ref))
	if code, _, stderr := morph(t, "", "plugin", "lock", "--config", cfg); code != 0 {
		t.Fatalf("lock: exit %d\n%s", code, stderr)
	}

	armed.Store(true)
	code, _, stderr := morph(t, "", "run", "--config", cfg, "task")
	if code != 0 || !strings.Contains(stderr, "morph: 1 plugin (") || strings.Contains(stderr, "sneak") {
		t.Errorf("run while sneak.wasm appears: exit %d, want 0 and min alone loaded\n%s", code, stderr)
	}
	if _, err := os.Stat(sneak); err != nil {
		t.Fatalf("the registry's HEAD did not drop the file: %v", err)
	}
	code, _, stderr = morph(t, "", "run", "--config", cfg, "task")
	if code != exitUsage {
		t.Errorf("run with sneak.wasm there: exit %d, want %d", code, exitUsage)
	}
	assertHas(t, "the refusal", stderr, "verify.require", `"sneak"`)
}

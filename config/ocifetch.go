package config

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/oci"
)

// OCIRef is one oci:// reference of the config: a [[plugins]] path or a
// [plugins.modules] value.
type OCIRef struct {
	Plugin string // the [[plugins]] name
	Module string // the [plugins.modules] name; "" for the plugin's own path
	Name   string // morph.lock's name: Plugin, or oci.ModuleName(Plugin, Module)
	Ref    string // as written
	index  int    // in Config.Plugins
}

// key locates the reference in the config file.
func (r OCIRef) key() toml.Key {
	if r.Module == "" {
		return toml.Key{"plugins", strconv.Itoa(r.index), "path"}
	}
	return toml.Key{"plugins", strconv.Itoa(r.index), "modules", r.Module}
}

// OCIRefs are the config's oci:// references, in [[plugins]] order, each
// plugin's path before its linked modules (sorted by name).
func (c *Config) OCIRefs() []OCIRef {
	var refs []OCIRef
	for i, p := range c.Plugins {
		if IsOCI(p.Path) {
			refs = append(refs, OCIRef{Plugin: p.Name, Name: p.Name, Ref: p.Path, index: i})
		}
		for _, m := range slices.Sorted(maps.Keys(p.Modules)) {
			if IsOCI(p.Modules[m].Path) {
				refs = append(refs, OCIRef{Plugin: p.Name, Module: m, Name: oci.ModuleName(p.Name, m), Ref: p.Modules[m].Path, index: i})
			}
		}
	}
	return refs
}

// OCIFetcher brings a config's oci:// modules into the cache and checks
// them as [oci], morph.lock, [plugins.verify] and [verify] say.
type OCIFetcher struct {
	// Client is the registry client with [oci]'s settings.
	Client *oci.Client
	// Lock is morph.lock as read; empty when the file does not exist.
	Lock *oci.Lock
	c    *Config
	log  *slog.Logger
	// refreshRoot (RelistSignatures: pull, lock) brings Sigstore's public
	// root into the TUF cache once, before a keyless policy without
	// trusted_root first needs it; runs read that cache alone.
	refreshRoot bool
	refreshed   bool
}

// OCIFetcherOptions adjust an OCIFetcher for a command.
type OCIFetcherOptions struct {
	// RelistSignatures looks for a cached manifest's signatures again when
	// online (morph plugin pull and lock), so that one attached later is
	// found, and refreshes Sigstore's public root for a keyless policy
	// without trusted_root; runs read the cache alone.
	RelistSignatures bool
}

// NewOCIFetcher opens the registry client with [oci]'s cache directory,
// plain_http and offline, and [wasm.limits] module_mb, and reads morph.lock.
func (c *Config) NewOCIFetcher(logger *slog.Logger, o OCIFetcherOptions) (*OCIFetcher, error) {
	if logger == nil {
		logger = slog.Default()
	}
	client, err := oci.NewClient(oci.Options{
		CacheDir:         c.OCI.CacheDir,
		MaxModuleBytes:   int64(c.Wasm.Limits.ModuleMB) << 20,
		PlainHTTP:        c.OCI.PlainHTTP,
		Offline:          c.OCI.Offline,
		Timeout:          c.OCI.Timeout,
		RelistSignatures: o.RelistSignatures,
		Logger:           logger,
	})
	if err != nil {
		return nil, c.errorAt(toml.Key{"oci"}, err, err.Error())
	}
	f := &OCIFetcher{Client: client, Lock: &oci.Lock{Version: 1}, c: c, log: logger, refreshRoot: o.RelistSignatures}
	if c.OCI.Lock != "" {
		l, err := oci.ReadLock(c.OCI.Lock)
		switch {
		case err == nil:
			f.Lock = l
		case !errors.Is(err, fs.ErrNotExist):
			return nil, c.errorAt(toml.Key{"oci", "lock"}, err, err.Error())
		}
	}
	return f, nil
}

// Policy is the verification policy of the plugin named, from its
// [plugins.verify] and [verify] trusted_root; false when it has none.
func (c *Config) Policy(plugin string) (oci.Policy, bool) {
	i := slices.IndexFunc(c.Plugins, func(p PluginEntry) bool { return p.Name == plugin })
	if i < 0 || c.Plugins[i].Verify == nil {
		return oci.Policy{}, false
	}
	return c.Plugins[i].Verify.policy(c.Verify.TrustedRoot), true
}

// verify checks a against p with the client, refreshing Sigstore's public
// root first (once) when p is keyless without a trusted root and the
// fetcher is a command's that looks at the registries.
func (f *OCIFetcher) verify(ctx context.Context, a *oci.Artifact, p oci.Policy) (*oci.Signer, error) {
	if f.refreshRoot && !f.refreshed && p.Key == "" && p.TrustedRoot == "" && !f.c.OCI.Offline {
		if err := f.Client.RefreshPublicRoot(ctx); err != nil {
			return nil, fmt.Errorf("refreshing Sigstore's public trusted root for a keyless [plugins.verify] (or set trusted_root): %w", err)
		}
		f.refreshed = true
	}
	return f.Client.Verify(ctx, a, p)
}

// named is err naming plugin: in the *oci.Error when err is one, else
// wrapped, so that what wraps an *oci.Error (a hint, a step) is kept.
func named(plugin string, err error) error {
	var oe *oci.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &oe) && oe.Plugin != "":
		return err
	case oe != nil && error(oe) == err:
		cp := *oe
		cp.Plugin = plugin
		return &cp
	}
	return fmt.Errorf("plugin %q: %w", plugin, err)
}

// refused is err about r, naming its plugin, located at r's key.
func (f *OCIFetcher) refused(r OCIRef, err error) error {
	err = named(r.Plugin, err)
	return f.c.errorAt(r.key(), err, err.Error())
}

// mismatch is an ErrLockMismatch about r.
func mismatch(r OCIRef, digest, format string, a ...any) error {
	return &oci.Error{Plugin: r.Plugin, Ref: r.Ref, Digest: digest, Kind: oci.ErrLockMismatch, Err: fmt.Errorf(format, a...)}
}

// Fetched is one reference as a run takes it: the artifact in the cache
// and, when the plugin has a policy, who signed it.
type Fetched struct {
	OCIRef
	Artifact *oci.Artifact
	Signer   *oci.Signer // nil without [plugins.verify]
}

// Source is the reference with the manifest's digest, as errors and
// Status name the module.
func (f *Fetched) Source() string {
	if strings.Contains(f.Ref, "@") {
		return f.Ref
	}
	return f.Ref + "@" + f.Artifact.Digest
}

// Fetch brings r's module into the cache (the cache first) and verifies it
// as a run does: a digest reference is fetched, and refused when morph.lock
// records another digest; a tag needs a morph.lock entry (ErrUnlockedTag),
// and unless offline or tag_check = "off" one HEAD checks that the tag
// still resolves to the locked digest (ErrLockMismatch naming both, or a
// warning with tag_check = "warn"); a registry that cannot be reached is a
// warning, and the locked digest comes from the cache. The plugin's policy
// is checked against the signatures in the cache, every time.
func (f *OCIFetcher) Fetch(ctx context.Context, r OCIRef) (*Fetched, error) {
	ref, err := oci.ParseRef(r.Ref)
	if err != nil {
		return nil, f.refused(r, err)
	}
	e, locked := f.Lock.Lookup(r.Name)
	if locked && e.Ref != r.Ref {
		return nil, f.refused(r, mismatch(r, "", "morph.lock records %s for it, not this reference; run 'morph plugin lock --update %s'", e.Ref, r.Plugin))
	}
	d := ref.Digest
	switch {
	case d != "" && locked && e.Digest != d:
		return nil, f.refused(r, mismatch(r, d, "morph.lock has %s; run 'morph plugin lock --update %s'", e.Digest, r.Plugin))
	case d != "":
	case !locked:
		return nil, f.refused(r, &oci.Error{Plugin: r.Plugin, Ref: r.Ref, Kind: oci.ErrUnlockedTag,
			Err: errors.New("a tag and morph.lock has no entry; run 'morph plugin lock', or write the reference @sha256:...")})
	default:
		d = e.Digest
		if err := f.checkTag(ctx, r, ref, d); err != nil {
			return nil, f.refused(r, err)
		}
	}
	a, err := f.Client.Fetch(ctx, ref, d)
	if err != nil {
		return nil, f.refused(r, err)
	}
	if locked && e.ModuleSHA256 != a.ModuleSHA256 {
		return nil, f.refused(r, mismatch(r, d, "the module's sha256 is %s, morph.lock has %s; run 'morph plugin lock --update %s'", a.ModuleSHA256, e.ModuleSHA256, r.Plugin))
	}
	got := &Fetched{OCIRef: r, Artifact: a}
	if p, ok := f.c.Policy(r.Plugin); ok {
		if got.Signer, err = f.verify(ctx, a, p); err != nil {
			return nil, f.refused(r, err)
		}
	}
	return got, nil
}

// OCILockedDigest is the message of the warnings logged when a run goes on
// with the digest morph.lock records although its tag could not be checked
// or moved (tag_check = "warn"); the reason attribute says which. A
// command that shows only errors lets this one through.
const OCILockedDigest = "oci: running the digest morph.lock records"

// checkTag resolves a locked tag (one HEAD) unless offline or tag_check =
// "off", and compares it with the locked digest d.
func (f *OCIFetcher) checkTag(ctx context.Context, r OCIRef, ref oci.Ref, d string) error {
	if f.c.OCI.Offline || f.c.OCI.TagCheck == TagCheckOff {
		return nil
	}
	warn := func(err error) error {
		f.log.WarnContext(ctx, OCILockedDigest, "plugin", r.Plugin, "ref", r.Ref, "digest", d, "reason", err.Error())
		return nil
	}
	now, err := f.Client.Resolve(ctx, ref)
	switch {
	case errors.Is(err, oci.ErrNotCached): // the registry cannot be reached
		return warn(err)
	case err != nil && f.c.OCI.TagCheck == TagCheckWarn:
		return warn(err)
	case err != nil:
		kind := oci.ErrRegistry
		var oe *oci.Error
		if errors.As(err, &oe) {
			kind = oe.Kind
		}
		return &oci.Error{Plugin: r.Plugin, Ref: r.Ref, Digest: d, Kind: kind,
			Err: fmt.Errorf("the digest morph.lock records; checking the tag failed (set [oci] tag_check = \"warn\" to run the locked digest anyway): %w", err)}
	case now == d:
		return nil
	}
	err = mismatch(r, "", "resolves to %s, morph.lock has %s; if %s is intended, run 'morph plugin lock --update %s'", now, d, now, r.Plugin)
	if f.c.OCI.TagCheck == TagCheckWarn {
		return warn(err)
	}
	return err
}

// HostConfig is p's host.Config as Open takes it: a local main module
// with a [plugins.verify] bundle checked against it (its sha256 the pin),
// then its oci:// modules fetched and checked (Fetch): the path of each in
// the cache, its sha256 as the pin unless p pins one, and the plugin's
// Source its reference with the digest.
func (f *OCIFetcher) HostConfig(ctx context.Context, p PluginEntry) (host.Config, error) {
	i := slices.IndexFunc(f.c.Plugins, func(q PluginEntry) bool { return q.Name == p.Name })
	return f.c.pluginHostConfig(ctx, i, p, func() (*OCIFetcher, error) { return f, nil })
}

// pluginHostConfig is HostConfig for p, the ith [[plugins]] entry (-1:
// none); fetcher gives the OCIFetcher when p has oci:// modules.
func (c *Config) pluginHostConfig(ctx context.Context, i int, p PluginEntry, fetcher func() (*OCIFetcher, error)) (host.Config, error) {
	hc := p.HostConfig()
	if p.Verify != nil && p.Verify.Bundle != "" {
		var err error
		if hc, err = c.verifiedLocal(ctx, i, p); err != nil {
			return hc, err
		}
	}
	hc.SchemaLimits = c.Tools.SchemaLimits() // what plugin check and test check the tools under, as the run does
	if !p.fromRegistry() {
		return hc, nil
	}
	f, err := fetcher()
	if err != nil {
		return hc, err
	}
	return f.fetchModules(ctx, p, hc)
}

// fetchModules fetches and checks p's oci:// modules (Fetch) into hc.
func (f *OCIFetcher) fetchModules(ctx context.Context, p PluginEntry, hc host.Config) (host.Config, error) {
	for _, r := range f.c.OCIRefs() {
		if r.Plugin != p.Name {
			continue
		}
		got, err := f.Fetch(ctx, r)
		if err != nil {
			return hc, err
		}
		a := got.Artifact
		if r.Module == "" {
			hc.Path, hc.Source, hc.SHA256 = a.ModulePath, got.Source(), cmp.Or(hc.SHA256, a.ModuleSHA256)
			continue
		}
		for i := range hc.Modules {
			if m := &hc.Modules[i]; m.Name == r.Module {
				m.Path, m.SHA256 = a.ModulePath, cmp.Or(m.SHA256, a.ModuleSHA256)
			}
		}
	}
	return hc, nil
}

// hostConfigs are the [[plugins]] as package host takes them (see
// HostConfig), with one OCIFetcher made when a plugin first needs it;
// every refusal is returned, joined.
func (c *Config) hostConfigs(ctx context.Context, logger *slog.Logger) ([]host.Config, error) {
	var f *OCIFetcher
	var fErr error
	fetcher := func() (*OCIFetcher, error) {
		if f == nil && fErr == nil {
			f, fErr = c.NewOCIFetcher(logger, OCIFetcherOptions{})
		}
		return f, fErr
	}
	var errs []error
	out := make([]host.Config, len(c.Plugins))
	for i, p := range c.Plugins {
		var err error
		out[i], err = c.pluginHostConfig(ctx, i, p, fetcher)
		if fErr != nil {
			return nil, fErr
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// verifiedLocal is a local plugin's host.Config once its module verifies
// against its [plugins.verify] bundle (oci.VerifyBlob); the module's sha256
// becomes its pin unless it has one, so that the host loads the bytes that
// verified.
func (c *Config) verifiedLocal(ctx context.Context, i int, p PluginEntry) (host.Config, error) {
	hc := p.HostConfig()
	key := toml.Key{"plugins", strconv.Itoa(i), "verify", "bundle"}
	fail := func(err error) (host.Config, error) {
		err = named(p.Name, err)
		return hc, c.errorAt(key, err, err.Error())
	}
	module, err := os.ReadFile(p.Path)
	if err != nil {
		return fail(err)
	}
	b, err := os.ReadFile(p.Verify.Bundle)
	if err != nil {
		return fail(err)
	}
	pol, _ := c.Policy(p.Name)
	if _, err := oci.VerifyBlob(ctx, p.Path, module, b, pol); err != nil {
		return fail(err)
	}
	sum := sha256.Sum256(module)
	hc.SHA256 = cmp.Or(hc.SHA256, hex.EncodeToString(sum[:]))
	return hc, nil
}

// LockDrift is a difference between morph.lock and morph.toml or the
// registries now.
type LockDrift struct {
	Name   string // morph.lock's name
	Detail string // what differs
	// Kept: the new lock keeps the old digest (a tag that moved, without
	// --update); otherwise the new lock resolves the difference.
	Kept bool
}

func (d LockDrift) String() string { return d.Name + ": " + d.Detail }

// LockAll resolves, fetches and verifies every oci:// reference of the
// config, and returns the morph.lock that records them with what differs
// from the one read. A reference already locked keeps its digest (its tag
// is resolved to report drift) unless update names its plugin; a tag not
// locked, or updated, is locked at what it resolves to now; entries of
// references no longer in the config are dropped. Any refusal is returned
// and no lock: the caller writes nothing.
func (f *OCIFetcher) LockAll(ctx context.Context, update []string) (*oci.Lock, []LockDrift, error) {
	refs := f.c.OCIRefs()
	for _, u := range update {
		if !slices.ContainsFunc(refs, func(r OCIRef) bool { return r.Plugin == u || r.Name == u }) {
			var names []string
			for _, r := range refs {
				names = append(names, r.Name)
			}
			return nil, nil, fmt.Errorf("--update %s: no oci:// plugin or module has that name (names: %s)", u, listOrNone(names))
		}
	}
	next := &oci.Lock{Version: 1}
	var drift []LockDrift
	for _, r := range refs {
		ref, err := oci.ParseRef(r.Ref)
		if err != nil {
			return nil, nil, f.refused(r, err)
		}
		e, locked := f.Lock.Lookup(r.Name)
		keep := locked && e.Ref == r.Ref && !slices.Contains(update, r.Plugin) && !slices.Contains(update, r.Name)
		now := ref.Digest
		if now == "" {
			if now, err = f.Client.Resolve(ctx, ref); err != nil {
				return nil, nil, f.refused(r, err)
			}
		}
		d := now
		switch {
		case !locked:
			drift = append(drift, LockDrift{Name: r.Name, Detail: r.Ref + " is not in morph.lock"})
		case e.Ref != r.Ref:
			drift = append(drift, LockDrift{Name: r.Name, Detail: fmt.Sprintf("morph.lock has %s, morph.toml %s", e.Ref, r.Ref)})
		case e.Digest != now && keep && ref.Digest == "":
			d = e.Digest
			drift = append(drift, LockDrift{Name: r.Name, Kept: true, Detail: fmt.Sprintf("%s resolves to %s, morph.lock has %s (kept; --update %s takes the new one)", r.Ref, now, e.Digest, r.Plugin)})
		case e.Digest != now:
			drift = append(drift, LockDrift{Name: r.Name, Detail: fmt.Sprintf("%s resolves to %s, morph.lock has %s", r.Ref, now, e.Digest)})
		}
		a, err := f.Client.Fetch(ctx, ref, d)
		if err != nil {
			return nil, nil, f.refused(r, err)
		}
		entry := oci.LockEntry{Name: r.Name, Ref: r.Ref, Digest: d, Layout: a.Layout, ModuleSHA256: a.ModuleSHA256, Size: a.Size}
		if p, ok := f.c.Policy(r.Plugin); ok {
			s, err := f.verify(ctx, a, p)
			if err != nil {
				return nil, nil, f.refused(r, err)
			}
			entry.Signature = &oci.LockSignature{Format: s.Format, Artifact: s.SignatureDigest, Key: s.KeyFingerprint, Identity: s.Identity, Issuer: s.Issuer}
		}
		next.Set(entry)
	}
	for _, e := range f.Lock.Plugins {
		if _, ok := next.Lookup(e.Name); !ok {
			drift = append(drift, LockDrift{Name: e.Name, Detail: e.Ref + " is in morph.lock and no longer in morph.toml"})
		}
	}
	return next, drift, nil
}

// Pulled is a reference as `morph plugin pull` and `inspect` fetch it.
type Pulled struct {
	Artifact *oci.Artifact
	// Plugin is the [[plugins]] entry whose path or linked module is this
	// reference, as written; "" when none is.
	Plugin string
	// Policy is that plugin's [plugins.verify]; HasPolicy false when none.
	Policy    oci.Policy
	HasPolicy bool
}

// Pull fetches the module a reference names (its tag resolved by one HEAD
// when it has no digest), ignoring morph.lock: what a tag names now.
func (f *OCIFetcher) Pull(ctx context.Context, s string) (*Pulled, error) {
	ref, err := oci.ParseRef(s)
	if err != nil {
		return nil, err
	}
	d := ref.Digest
	if d == "" {
		if d, err = f.Client.Resolve(ctx, ref); err != nil {
			return nil, err
		}
	}
	a, err := f.Client.Fetch(ctx, ref, d)
	if err != nil {
		return nil, err
	}
	got := &Pulled{Artifact: a}
	for _, r := range f.c.OCIRefs() {
		if r.Ref == s {
			got.Plugin = r.Plugin
			got.Policy, got.HasPolicy = f.c.Policy(r.Plugin)
			break
		}
	}
	return got, nil
}

// Verify checks p against its plugin's policy (HasPolicy), as a run does:
// the signer, or the *oci.Error naming the plugin.
func (f *OCIFetcher) Verify(ctx context.Context, p *Pulled) (*oci.Signer, error) {
	s, err := f.verify(ctx, p.Artifact, p.Policy)
	return s, named(p.Plugin, err)
}

// SignatureCheck is one signature artifact found for a manifest and what
// the plugin's policy says of it.
type SignatureCheck struct {
	Format string      // oci.FormatBundle or oci.FormatSigTag
	Digest string      // the signature manifest's
	Signer *oci.Signer // who signed it, when it verifies
	Err    error       // why it does not verify, or that there is no policy
}

// CheckSignatures verifies each signature of p's artifact on its own
// against p's policy: who signed it, or why it does not verify (with no
// policy: that there is none to verify it with).
func (f *OCIFetcher) CheckSignatures(ctx context.Context, p *Pulled) []SignatureCheck {
	var out []SignatureCheck
	for _, s := range p.Artifact.Signatures {
		c := SignatureCheck{Format: s.Format, Digest: s.Digest}
		if p.HasPolicy {
			one := *p.Artifact
			one.Signatures = []oci.SignatureArtifact{s}
			c.Signer, c.Err = f.verify(ctx, &one, p.Policy)
		} else {
			c.Err = errors.New("not verified: no [plugins.verify] of the config (--config) covers this reference")
		}
		out = append(out, c)
	}
	return out
}

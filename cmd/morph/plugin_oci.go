package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/oci"
)

// ociFetcher loads the config at path ("": none, only [oci]'s defaults)
// with the flags' overrides, and opens its fetcher. Commands the user runs
// to look at a registry (pull, lock, inspect) look for signatures again on
// manifests already cached.
func ociFetcher(path, cacheDir string, plainHTTP []string, stderr io.Writer) (*config.Config, *config.OCIFetcher, error) {
	cfg := &config.Config{}
	if path != "" {
		var err error
		if cfg, err = config.Load(path); err != nil {
			return nil, nil, &exitError{exitUsage, err}
		}
	}
	if cacheDir != "" {
		cfg.OCI.CacheDir = cacheDir
	}
	cfg.OCI.PlainHTTP = append(cfg.OCI.PlainHTTP, plainHTTP...)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	f, err := cfg.NewOCIFetcher(logger, config.OCIFetcherOptions{RelistSignatures: true})
	if err != nil {
		return nil, nil, &exitError{exitUsage, err}
	}
	return cfg, f, nil
}

// pulled is what `morph plugin pull --json` prints, and inspect's
// registry part.
type pulled struct {
	Reference    string      `json:"reference"`
	Digest       string      `json:"digest"`
	Layout       oci.Layout  `json:"layout"`
	Module       string      `json:"module"`
	ModuleSHA256 string      `json:"module_sha256"`
	Size         int64       `json:"size"`
	Plugin       string      `json:"plugin,omitempty"`
	Signatures   []signature `json:"signatures"`
	// Verified is the first signature the plugin's policy accepts; nil
	// when none does or there is no policy.
	Verified *signature `json:"verified,omitempty"`
}

// signature is one signature artifact and who signed it, or why it does
// not verify.
type signature struct {
	Format         string `json:"format"`
	Digest         string `json:"digest"`
	Verified       bool   `json:"verified"`
	KeyFingerprint string `json:"key_fingerprint,omitempty"`
	Identity       string `json:"identity,omitempty"`
	Issuer         string `json:"issuer,omitempty"`
	Error          string `json:"error,omitempty"`
}

// pull fetches ref and checks each of its signatures.
func pull(ctx context.Context, f *config.OCIFetcher, ref string) (*pulled, *config.Pulled, error) {
	p, err := f.Pull(ctx, ref)
	if err != nil {
		return nil, nil, &exitError{exitRunFailed, err}
	}
	a := p.Artifact
	out := &pulled{Reference: ref, Digest: a.Digest, Layout: a.Layout, Module: a.ModulePath, ModuleSHA256: a.ModuleSHA256,
		Size: a.Size, Plugin: p.Plugin, Signatures: []signature{}}
	for _, c := range f.CheckSignatures(ctx, p) {
		s := signature{Format: c.Format, Digest: c.Digest}
		if c.Signer != nil {
			s.Verified, s.KeyFingerprint, s.Identity, s.Issuer = true, c.Signer.KeyFingerprint, c.Signer.Identity, c.Signer.Issuer
		} else {
			s.Error = c.Err.Error()
		}
		out.Signatures = append(out.Signatures, s)
		if s.Verified && out.Verified == nil {
			out.Verified = &out.Signatures[len(out.Signatures)-1]
		}
	}
	return out, p, nil
}

// printPulled prints what was pulled one field a line; the registry's
// strings are escaped.
func printPulled(w io.Writer, p *pulled) {
	fmt.Fprintf(w, "reference: %s\n", oneLine(p.Reference, 0))
	fmt.Fprintf(w, "digest:    %s\n", p.Digest)
	fmt.Fprintf(w, "layout:    %s\n", p.Layout)
	fmt.Fprintf(w, "module:    %s (%d bytes, sha256 %s)\n", oneLine(p.Module, 0), p.Size, p.ModuleSHA256)
	if p.Plugin != "" {
		fmt.Fprintf(w, "plugin:    %s\n", label(p.Plugin))
	}
	if len(p.Signatures) == 0 {
		fmt.Fprintf(w, "signature: none found\n")
	}
	for _, s := range p.Signatures {
		if s.Verified {
			fmt.Fprintf(w, "signature: %s %s: verified, signed by %s\n", s.Format, s.Digest, signer(s.KeyFingerprint, s.Identity, s.Issuer))
		} else {
			fmt.Fprintf(w, "signature: %s %s: %s\n", s.Format, s.Digest, oneLine(s.Error, 500))
		}
	}
}

// signer names who signed: a key's fingerprint, or a keyless identity and
// its issuer.
func signer(key, identity, issuer string) string {
	if key != "" {
		return "key " + key
	}
	return oneLine(identity, 200) + " (issuer " + oneLine(issuer, 200) + ")"
}

func newPluginPullCmd(stdout, stderr io.Writer) *cobra.Command {
	var configPath, cacheDir string
	var plainHTTP []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "pull oci://REGISTRY/REPO[:TAG][@sha256:HEX]",
		Short: "Fetch a plugin from an OCI registry into the cache and print its digest, module and signatures",
		Long: `Fetch a plugin from an OCI registry into the cache: the manifest (a tag is resolved with one
HEAD; morph.lock is neither read nor written), its module, and the cosign signatures attached
to it (looked for again when the manifest was cached already). With --config, a [[plugins]]
entry whose path or linked module is this reference has its [plugins.verify] checked.

Exit status: 0 when fetched (and verified, when there is a policy), 1 when refused, 2 for a
usage error.`,
		Example: `  morph plugin pull oci://ghcr.io/acme/time-plugin:v1
  morph plugin pull --config morph.toml --plain-http 127.0.0.1:5000 oci://127.0.0.1:5000/time@sha256:...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, f, err := ociFetcher(configPath, cacheDir, plainHTTP, stderr)
			if err != nil {
				return err
			}
			p, cp, err := pull(cmd.Context(), f, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				err = writeJSON(stdout, p)
			} else {
				printPulled(stdout, p)
			}
			if err == nil && cp.HasPolicy && p.Verified == nil {
				_, verr := f.Verify(cmd.Context(), cp)
				err = &exitError{exitRunFailed, verr}
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&configPath, "config", "", "a config whose [oci] settings and [plugins.verify] apply")
	fl.StringVar(&cacheDir, "cache-dir", "", "the OCI cache directory (default [oci] cache_dir, else the user cache dir's morph/oci)")
	fl.StringSliceVar(&plainHTTP, "plain-http", nil, "a registry spoken to over plain HTTP: HOST, HOST:PORT or HOST:* (repeatable)")
	fl.BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

func newPluginLockCmd(stdout, stderr io.Writer) *cobra.Command {
	var configPath string
	var update []string
	var check bool
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Resolve, fetch and verify the config's oci:// plugins and write morph.lock",
		Long: `Resolve every oci:// reference of the config (its [[plugins]] paths and [plugins.modules]),
fetch and verify each, and write morph.lock ([oci] lock) with the manifest digests, module
hashes and signers. A reference already locked keeps its digest unless --update names its
plugin; a tag that moved since is reported. Any refusal writes nothing.

--check writes nothing and exits 1 listing what differs between morph.lock, the config and
the registries (a tag that moved, a reference not locked, an entry no longer used).`,
		Example: `  morph plugin lock
  morph plugin lock --update time
  morph plugin lock --check`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if check && len(update) > 0 {
				return usageErrorf("--check writes nothing: give --update without it")
			}
			cfg, f, err := ociFetcher(configPath, "", nil, stderr)
			if err != nil {
				return err
			}
			next, drift, err := f.LockAll(cmd.Context(), update)
			if err != nil {
				return &exitError{exitRunFailed, fmt.Errorf("%w (morph.lock was not written)", err)}
			}
			if check {
				if len(drift) == 0 {
					fmt.Fprintf(stdout, "%s is up to date: %s\n", cfg.OCI.Lock, plural(len(next.Plugins), "entry"))
					return nil
				}
				lines := []string{fmt.Sprintf("%s differs from the config or the registries:", cfg.OCI.Lock)}
				for _, d := range drift {
					lines = append(lines, "  "+oneLine(d.String(), 0))
				}
				return &exitError{exitRunFailed, joinLines(lines...)}
			}
			if err := oci.WriteLock(cfg.OCI.Lock, next); err != nil {
				return &exitError{exitRunFailed, err}
			}
			for _, e := range next.Plugins {
				how := "unsigned"
				if s := e.Signature; s != nil {
					how = "signed (" + s.Format + ") by " + signer(s.Key, s.Identity, s.Issuer)
				}
				fmt.Fprintf(stdout, "locked %s: %s@%s, %s\n", label(e.Name), oneLine(e.Ref, 0), e.Digest, how)
			}
			for _, d := range drift {
				if d.Kept {
					fmt.Fprintf(stderr, "warning: %s\n", oneLine(d.String(), 0))
				}
			}
			fmt.Fprintf(stdout, "wrote %s\n", cfg.OCI.Lock)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&configPath, "config", "morph.toml", "the config file")
	fl.StringSliceVar(&update, "update", nil, "take what these plugins' (or linked modules') tags resolve to now (repeatable)")
	fl.BoolVar(&check, "check", false, "write nothing; exit 1 listing what differs")
	return cmd
}

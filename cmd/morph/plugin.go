package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/internal/safetext"
)

func newPluginCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Inspect and check WebAssembly plugins",
	}
	var cacheDir, inspectConfig string
	var asJSON bool
	// inspect reports on the module at path, or fetched from the oci://
	// reference (with what the registry holds); with inspectConfig, as the
	// [[plugins]] entry of that file or reference which names it, so with
	// its grants and its oci:// linked modules fetched.
	inspect := func(cmd *cobra.Command, path string) (*host.Report, *pulled, error) {
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		hc, opts := host.Config{Path: path}, host.LoaderOptions{CacheDir: cacheDir, Logger: logger}
		var reg *pulled
		if inspectConfig != "" || config.IsOCI(path) {
			cfg, f, err := ociFetcher(inspectConfig, "", nil, stderr)
			if err != nil {
				return nil, nil, err
			}
			if config.IsOCI(path) {
				var p *config.Pulled
				if reg, p, err = pull(cmd.Context(), f, path); err != nil {
					return nil, nil, err
				}
				hc = host.Config{Path: p.Artifact.ModulePath, Source: path}
				if !p.HasPolicy {
					// Loading runs the guest's initialization: say that
					// nothing checked who made it.
					fmt.Fprintf(stderr, "warning: %s: no [plugins.verify] (of --config) covers this reference: its module is loaded and initialized unverified\n", oneLine(path, 0))
				}
			}
			if inspectConfig != "" {
				p, err := cfg.PluginFor(path)
				if err != nil {
					return nil, nil, &exitError{exitUsage, err}
				}
				if hc, err = f.HostConfig(cmd.Context(), p); err != nil {
					return nil, nil, &exitError{exitRunFailed, err}
				}
				opts.SecretEnv = cfg.SecretEnv()
			}
		}
		l, err := host.NewLoader(opts)
		if err != nil {
			return nil, nil, &exitError{exitUsage, err}
		}
		defer l.Close(cmd.Context())
		rep, err := l.Inspect(cmd.Context(), hc)
		if err != nil {
			return nil, nil, &exitError{exitUsage, notBuilt(err, path)}
		}
		if inspectConfig == "" {
			rep.Capabilities = nil // no grants to compare with: the manifest's requests only
		}
		return rep, reg, nil
	}
	inspectCmd := &cobra.Command{
		Use:   "inspect FILE.wasm|oci://REF",
		Short: "Print a module's manifest, ABI version, exports, imports, hooks and tools",
		Long: `Print a module's manifest, ABI version, exports, imports, hooks, tools and capabilities
(an Extism module that imports extism:host/env http_request requests http).
An oci:// reference is fetched first (as morph plugin pull does), and its reference, digest,
layout and signature artifacts, with who signed each, come before the report; without a
[plugins.verify] of --config that covers it, a warning says that the module is loaded (and its
initialization run) unverified.

Exit status: 0 when the module loads, 1 when it does not (the report says why, one
"problem:" line each) or the registry's is refused, 2 for a usage error (no such file, a bad
flag or config).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, reg, err := inspect(cmd, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				err = writeJSON(stdout, struct {
					Registry *pulled `json:"registry,omitempty"`
					*host.Report
				}{reg, rep})
			} else {
				if reg != nil {
					printPulled(stdout, reg)
				}
				printReport(stdout, rep)
			}
			if err == nil && len(rep.Problems) > 0 {
				err = &exitError{exitRunFailed, fmt.Errorf("%s does not load: %s in the report", args[0], plural(len(rep.Problems), "problem"))}
			}
			return err
		},
	}
	inspectCmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	inspectCmd.Flags().StringVar(&inspectConfig, "config", "", "compare the capabilities with the grants of the config's [[plugins]] entry for FILE")
	checkCmd := &cobra.Command{
		Use:   "check FILE.wasm",
		Short: "Check a module against ABI v1; exit 1 with the reasons when it does not conform",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, _, err := inspect(cmd, args[0])
			if err != nil {
				return err
			}
			if len(rep.Problems) > 0 {
				return &exitError{exitRunFailed, joinLines(append([]string{args[0] + " does not conform to ABI v1:"}, rep.Problems...)...)}
			}
			m := rep.Manifest
			fmt.Fprintf(stdout, "ok: %s, hooks [%s], %d tools, loader %s\n", moduleTitle(m.Name, m.Version, m.ABIVersion, rep.Loader),
				labels(rep.Hooks), len(m.Tools), rep.Loader)
			return nil
		},
	}
	var configPath string
	var shutdownTimeout time.Duration
	statusCmd := &cobra.Command{
		Use:   "status",
		Short: "Load the config's plugins and print the engine status: plugins, tools with their sources, hooks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if shutdownTimeout <= 0 {
				return usageErrorf("--shutdown-timeout must be positive, not %s", shutdownTimeout)
			}
			cfg, err := loadConfig(configPath)
			if err != nil {
				return err
			}
			// The engine's warnings are the status's, printed below: it logs
			// only errors. The plugins' loader logs its warnings.
			logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			engineLogger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
			show := func(st engine.Status) error {
				if asJSON {
					return writeJSON(stdout, st)
				}
				printStatus(stdout, st)
				return nil
			}
			rt, err := cfg.Open(cmd.Context(), logger, engine.WithLogger(engineLogger))
			if err != nil {
				var ie *config.InitError
				if errors.As(err, &ie) { // the report says which plugins failed, and how long each took
					if serr := show(ie.Status); serr != nil {
						return serr
					}
				}
				return &exitError{exitUsage, err}
			}
			defer func() { closeRuntime(cmd.Context(), rt, shutdownTimeout, cmd.Context().Err() != nil, stderr) }()
			return show(rt.Engine.Status())
		},
	}
	statusCmd.Flags().StringVar(&configPath, "config", defaultConfigFile, "the config file")
	statusCmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	statusCmd.Flags().DurationVar(&shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "the bound of closing the plugins")
	cmd.PersistentFlags().StringVar(&cacheDir, "cache-dir", "", `compilation cache directory (default: the user cache dir; "off": none)`)
	cmd.AddCommand(inspectCmd, checkCmd, statusCmd, newPluginTestCmd(stdout, stderr, &cacheDir), newPluginReplayCmd(stdout, stderr, &cacheDir))
	cmd.AddCommand(newPluginNewCmd(stdout, stderr), newPluginPullCmd(stdout, stderr), newPluginLockCmd(stdout, stderr))
	return cmd
}

// printReport prints the report one field a line; what the module says of
// itself (names, the manifest, problems quoting it) is escaped, so that it
// cannot forge a line.
func printReport(w io.Writer, rep *host.Report) {
	fmt.Fprintf(w, "file:     %s (%d bytes, sha256 %s)\n", oneLine(rep.Path, 0), rep.Bytes, rep.SHA256)
	fmt.Fprintf(w, "loader:   %s\n", rep.Loader)
	fmt.Fprintf(w, "markers:  %s\n", labels(rep.Markers))
	if m := rep.Manifest; m != nil {
		fmt.Fprintf(w, "plugin:   %s\n", moduleTitle(m.Name, m.Version, m.ABIVersion, rep.Loader))
		fmt.Fprintf(w, "hooks:    %s\n", labels(rep.Hooks))
		if rep.Capabilities != nil {
			fmt.Fprintf(w, "capabilities: %s\n", capabilities(rep.Capabilities))
		} else if len(rep.Requests) > 0 {
			fmt.Fprintf(w, "capabilities: %s (requested; --config compares them with the plugin's grants)\n", labels(rep.Requests))
		} else {
			fmt.Fprintf(w, "capabilities: (none requested)\n")
		}
		fmt.Fprintf(w, "tools:\n")
		for _, t := range m.Tools {
			fmt.Fprintf(w, "  %s: %s\n    parameters: %s\n", label(t.Name), oneLine(t.Description, 0), oneLine(string(t.Parameters), 0))
		}
	}
	fmt.Fprintf(w, "exports:\n")
	for _, e := range rep.Exports {
		fmt.Fprintf(w, "  %s %s\n", label(e.Name), e.Type)
	}
	fmt.Fprintf(w, "imports:\n")
	for _, i := range rep.Imports {
		fmt.Fprintf(w, "  %s.%s %s\n", label(i.Module), label(i.Name), i.Type)
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "problem:  %s\n", oneLine(p, 0))
	}
	if len(rep.Suggested) > 0 {
		fmt.Fprintf(w, "morph.toml lines that would serve its exports (see README, \"Plugins from the Extism ecosystem\"):\n")
		for _, l := range rep.Suggested {
			fmt.Fprintf(w, "  %s\n", oneLine(l, 0))
		}
	}
}

// printStatus prints the status, the plugins' names and what they declare
// escaped.
func printStatus(w io.Writer, st engine.Status) {
	fmt.Fprintf(w, "engine: %s, mode %s\n", st.State, label(string(st.Mode)))
	for _, p := range st.Plugins {
		d, wasm := p.Details.(*host.Details) // nil for a native plugin
		how := fmt.Sprintf("%s, ABI v%d", label(p.Source), p.ABIVersion)
		if wasm {
			how = fmt.Sprintf("%s, %s, loader %s", label(p.Source), moduleKind(p.ABIVersion, d.Loader), label(d.Loader))
		}
		fmt.Fprintf(w, "plugin %s (%s): %s, loaded in %s\n", moduleName(p.Name, p.Version), how, label(p.State), p.LoadTime.Round(time.Microsecond))
		fmt.Fprintf(w, "  hooks: %s\n  tools: %s\n", labels(p.Hooks), labels(p.Tools))
		if len(p.Services) > 0 {
			fmt.Fprintf(w, "  services: %s\n", labels(p.Services))
		}
		if len(p.ConfigKeys) > 0 {
			fmt.Fprintf(w, "  config keys: %s\n", labels(p.ConfigKeys))
		}
		if len(p.Requires) > 0 {
			fmt.Fprintf(w, "  requires: %s\n", labels(p.Requires))
		}
		if wasm && len(d.Capabilities) > 0 {
			fmt.Fprintf(w, "  capabilities: %s\n", capabilities(d.Capabilities))
		}
		if wasm && d.Memory != nil {
			fmt.Fprintf(w, "  memory: %s\n", memoryStatus(*d.Memory))
		}
		if wasm && d.Sessions != nil {
			forgotten := ""
			if n := d.Sessions.Forgotten; n > 0 {
				forgotten = fmt.Sprintf(", %d forgotten (expired, and past max_sessions expired since: would come back untold)", n)
			}
			fmt.Fprintf(w, "  sessions: %d open of %d (max_sessions), %d replaced, %d refused%s\n",
				d.Sessions.Open, d.Sessions.Max, d.Sessions.Replaced, d.Sessions.Refused, forgotten)
		}
		fmt.Fprintf(w, "  calls %d, faults %d, quarantines %d, p50 %s, p99 %s\n", p.Calls, p.Faults, p.Quarantines, p.P50, p.P99)
	}
	for _, s := range st.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", label(s.Name), oneLine(s.Reason, 0))
	}
	for _, f := range st.Failed {
		fmt.Fprintf(w, "failed %s (in %s): %s\n", label(f.Name), f.LoadTime.Round(time.Microsecond), oneLine(strings.Join(f.Reasons, "; "), 0))
	}
	for _, warning := range st.Warnings {
		fmt.Fprintf(w, "warning: %s\n", oneLine(warning, 0))
	}
	fmt.Fprintf(w, "tools:\n")
	for _, t := range st.Tools {
		fmt.Fprintf(w, "  %s (%s)\n", label(t.Name), label(t.Source))
	}
	hooks := make([]string, 0, len(st.Hooks))
	for h, n := range st.Hooks {
		hooks = append(hooks, fmt.Sprintf("%s x%d", h, n))
	}
	sort.Strings(hooks)
	fmt.Fprintf(w, "hooks: %s\n", labels(hooks))
}

// memoryStatus is what a plugin's idle instances hold, in a line:
// "12 idle instances, 840 KiB resident of 768 MiB reserved, 56 KiB
// snapshot image shared".
func memoryStatus(m host.MemoryStatus) string {
	line := fmt.Sprintf("%s, %s resident of %s reserved", plural(m.Instances, "idle instance"), byteSize(m.Resident), byteSize(m.Reserved))
	if m.Image > 0 {
		line += ", " + byteSize(m.Image) + " snapshot image shared"
	}
	if m.NoSnapshot != "" { // a refusal may quote the module (an export's name)
		line += ", no snapshot: " + safetext.Line(m.NoSnapshot, 200)
	}
	return line
}

// byteSize is a size in KiB below a MiB, in MiB below a GiB, else in GiB.
func byteSize(b uint64) string {
	switch {
	case b < 1<<20:
		return fmt.Sprintf("%d KiB", b>>10)
	case b < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}

// capabilities is the one-line comparison of requests and grants:
// "http (requested, granted: api.example.com), fs (requested, NOT granted)".
func capabilities(caps []host.CapabilityStatus) string {
	if len(caps) == 0 {
		return "(none requested or granted)"
	}
	parts := make([]string, len(caps))
	for i, c := range caps {
		parts[i] = oneLine(c.String(), 0) // the name is the manifest's
	}
	return strings.Join(parts, ", ")
}

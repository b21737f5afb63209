package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/host/conform"
)

// newPluginTestCmd is "morph plugin test": the conformance runner of
// conform.Run, for plugin authors who have no host of their own.
// cacheDir is the plugin command's --cache-dir.
func newPluginTestCmd(stdout, stderr io.Writer, cacheDir *string) *cobra.Command {
	var (
		fixturesDir string
		configPath  string
		asJSON      bool
		values      []string
		timeout     time.Duration
		verbose     bool
	)
	cmd := &cobra.Command{
		Use:   "test FILE.wasm",
		Short: "Call every hook and tool a plugin declares with sample inputs and check each answer against ABI v1",
		Long: `Load FILE.wasm and call every hook and tool its manifest declares, one call at a time:
each hook with a built-in sample input (the examples of abi/SPEC.md), each tool with params
built from its parameters schema, then each fixture of --fixtures, and morph_destroy last when
the module exports it. Each answer is checked against the payload schemas of abi/schema/.

A trap, a timeout, output that is not the payload (or too large) and a guest-reported error
from a hook fail. A tool may reject its input with a guest-reported error: that conforms, with
a note. A tool whose schema-built sample does not satisfy its own schema is skipped: give it a
fixture. So is a tool whose schema asks for more than the sample builder gives (16 levels,
64 KiB of JSON, 500ms): a minLength of 1e18, $refs that fan out to millions of values.

--config FILE: load the module as the config's [[plugins]] entry whose path is FILE.wasm
loads it: with its name, grants (allowed_hosts, paths, env, ungranted), limits, hooks and
[plugins.config] values, as morph run would; --config-value adds or overrides values, and
--timeout, when given, overrides the entry's.

--fixtures DIR: every DIR/<name>*.json is one input payload for the hook or tool <name> (the
longest name that matches): a hook's input (a PromptInput for build_prompt, ...), or a tool's
ToolCallInput {"tool": "...", "params": {...}}, "tool" optional.

Exit status: 0 when every call conforms, 1 when one does not (or the module does not load),
2 for a usage error (no such file, not WebAssembly, a bad flag, a fixture that is not JSON).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			if info, err := os.Stat(path); err != nil {
				return &exitError{exitUsage, notBuilt(err, path)}
			} else if info.IsDir() {
				return usageErrorf("%s is a directory, not a .wasm file", path)
			}
			if timeout <= 0 {
				return usageErrorf("--timeout must be positive, not %s", timeout)
			}
			hc := host.Config{Path: path, Values: map[string]string{}, Limits: host.Limits{Timeout: timeout}}
			opts := host.LoaderOptions{CacheDir: *cacheDir}
			if configPath != "" {
				var err error
				if hc, opts.SecretEnv, err = pluginEntryConfig(cmd.Context(), configPath, path); err != nil {
					return &exitError{exitUsage, err}
				}
				if cmd.Flags().Changed("timeout") || hc.Limits.Timeout == 0 {
					hc.Limits.Timeout = timeout
				}
			}
			for _, kv := range values {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usageErrorf("--config-value %q: want key=value", kv)
				}
				hc.Values[k] = v
			}
			var fixtures map[string][]json.RawMessage
			if fixturesDir != "" {
				var err error
				if fixtures, err = conform.ReadFixtures(fixturesDir); err != nil {
					return &exitError{exitUsage, fmt.Errorf("--fixtures: %w", err)}
				}
			}
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelDebug
			}
			opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
			l, err := host.NewLoader(opts)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			defer l.Close(cmd.Context())
			rep, err := conform.Run(cmd.Context(), l, hc, fixtures)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			if asJSON {
				if err := writeJSON(stdout, rep); err != nil {
					return err
				}
			} else {
				printConform(stdout, rep)
			}
			switch {
			case rep.LoadError != "":
				return &exitError{exitRunFailed, fmt.Errorf("%s does not load: %s", path, rep.LoadError)}
			case !rep.Conforms:
				return &exitError{exitRunFailed, fmt.Errorf("%s does not conform to ABI v1: %d of %s failed", path, rep.Failed, plural(len(rep.Calls), "entry"))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&fixturesDir, "fixtures", "", "a directory of fixtures: <hook-or-tool-name>*.json, one input payload each")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&configPath, "config", "", "load FILE.wasm with the grants, limits and config values of the config's [[plugins]] entry for it")
	f.StringArrayVar(&values, "config-value", nil, "a plugin config value key=value, as in [plugins.config] (repeatable)")
	f.DurationVar(&timeout, "timeout", host.DefaultTimeout, "the deadline of each call")
	f.BoolVarP(&verbose, "verbose", "v", false, "show the plugin's log (debug level and up) on stderr")
	return cmd
}

// pluginEntryConfig is the load settings of the [[plugins]] entry of the
// config file configPath whose module is the file at path (config.Config's
// PluginFor), with the loader's secret environment: how `morph run` would
// load it, its oci:// linked modules fetched. Its Path is path as given
// and its Values a copy, for --config-value to add to.
func pluginEntryConfig(ctx context.Context, configPath, path string) (host.Config, []string, error) {
	cfg, err := config.Load(configPath)
	if err != nil {
		return host.Config{}, nil, err
	}
	entry, err := cfg.PluginFor(path)
	if err != nil {
		return host.Config{}, nil, err
	}
	f, err := cfg.NewOCIFetcher(nil, config.OCIFetcherOptions{})
	if err != nil {
		return host.Config{}, nil, err
	}
	hc, err := f.HostConfig(ctx, entry)
	if err != nil {
		return host.Config{}, nil, err
	}
	hc.Path, hc.Values = path, maps.Clone(hc.Values)
	if hc.Values == nil {
		hc.Values = map[string]string{}
	}
	return hc, cfg.SecretEnv(), nil
}

// printConform prints the report as a table, the notes and failures in
// full below it, and a summary line. What the plugin wrote (its names, its
// errors) is escaped, one line each, so that it cannot forge a row.
func printConform(w io.Writer, rep *conform.Report) {
	path := oneLine(rep.Path, 0)
	if rep.LoadError != "" {
		fmt.Fprintf(w, "%s: does not load (in %s)\n  %s\n", path, rep.LoadTime.Round(time.Microsecond), oneLine(rep.LoadError, 0))
		fmt.Fprintf(w, "FAIL: the module does not load; no hook or tool was called\n")
		return
	}
	m := rep.Manifest
	name := label(m.Name)
	fmt.Fprintf(w, "plugin %s (%s), %s: loaded in %s, memory %s\n", moduleName(m.Name, m.Version), path, moduleKind(m.ABIVersion, rep.Loader),
		rep.LoadTime.Round(time.Microsecond), memory(rep.MemoryBytes))
	if len(rep.Calls) == 0 {
		fmt.Fprintf(w, "ok: nothing to call: the plugin declares no hooks and no tools\n")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tINPUT\tRESULT\tTIME\tMEMORY")
	var notes, failures []string
	for _, c := range rep.Calls {
		result, tm, mem := c.Status, "-", "-"
		row, input := label(c.Name), label(c.Input)
		switch c.Status {
		case conform.Fail:
			result = "FAIL " + c.ErrorKind
			failures = append(failures, fmt.Sprintf("%s (%s, %s): %s", row, c.Kind, input, oneLine(c.Error, 0)))
		case conform.Note, conform.Skip:
			notes = append(notes, fmt.Sprintf("%s (%s, %s): %s", row, c.Kind, input, oneLine(c.Note, 0)))
		}
		if c.Status != conform.Skip && c.ErrorKind != "invalid_fixture" {
			tm = c.Duration.Round(time.Microsecond).String()
			if c.MemoryBytes > 0 {
				mem = memory(c.MemoryBytes)
			} else {
				mem = "discarded"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", row, c.Kind, input, result, tm, mem)
	}
	tw.Flush()
	for _, title := range []struct {
		name  string
		lines []string
	}{{"notes", notes}, {"failures", failures}} {
		if len(title.lines) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s:\n", title.name)
		for _, l := range title.lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	extra := ""
	if rep.Noted > 0 {
		extra += fmt.Sprintf(", %d with a note", rep.Noted)
	}
	if rep.Skipped > 0 {
		extra += fmt.Sprintf(", %d skipped", rep.Skipped)
	}
	if rep.Conforms {
		fmt.Fprintf(w, "ok: %s conforms: %s passed%s\n", name, plural(rep.Passed, "call"), extra)
		return
	}
	fmt.Fprintf(w, "FAIL: %s does not conform: %d failed, %d passed%s\n", name, rep.Failed, rep.Passed, extra)
}

// plural is "1 call", "2 calls", "1 entry", "2 entries".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// memory formats a linear memory size in 64 KiB pages and bytes.
func memory(b uint32) string {
	pages := b / 65536
	unit := "pages"
	if pages == 1 {
		unit = "page"
	}
	if b < 1<<20 {
		return fmt.Sprintf("%d %s (%d KiB)", pages, unit, b>>10)
	}
	return fmt.Sprintf("%d %s (%.1f MiB)", pages, unit, float64(b)/(1<<20))
}

package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/record"
)

// newPluginReplayCmd is `morph plugin replay`: a recording (morph run
// --record) run again against a new build of one of its plugins.
func newPluginReplayCmd(stdout, stderr io.Writer, cacheDir *string) *cobra.Command {
	var (
		plugin     string
		configPath string
		only       []string
		ignore     []string
		asJSON     bool
		timeout    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "replay FILE --plugin NAME=new.wasm",
		Short: "Run the calls a recording holds of one plugin against a new build of it; exit 1 on a difference",
		Long: `Read FILE (written by morph run --record) and call new.wasm with every input the recorded
plugin NAME was given, in the recorded order and sessions; compare each answer's fault and output
(as JSON) with the recording, and print the differences: the JSON pointers where the outputs
differ and both values, escaped. Durations are never compared.

Skipped, with the reason: calls whose input or output was over record.max_call_bytes, calls a
secret was scrubbed from, calls of hooks or tools new.wasm does not declare. Calls that use
capabilities with effects outside the sandbox (http, writable paths) run again for real:
--only restricts the replay to the named hooks and tools.

--config FILE: load new.wasm with the grants, limits and values of the [[plugins]] entry whose
path is the recorded plugin's; without it, no grants (a call needing one faults).

--json prints the report as one object: file, plugin, calls, same, different, skipped
[{seq, reason}], diffs [{seq, export, hook, tool, session, fault_was, fault_now, paths, was,
now}], manifest {hooks_added, hooks_removed, tools_added, tools_removed, tools_changed},
incomplete.

Exit status: 0 when every replayed call answers as recorded, 1 on a difference, 2 for a usage
error, a file that is not a record, or a module that does not load.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, wasm, ok := strings.Cut(plugin, "=")
			if !ok || name == "" || wasm == "" {
				return usageErrorf("--plugin %q: want NAME=new.wasm", plugin)
			}
			if timeout <= 0 {
				return usageErrorf("--timeout must be positive, not %s", timeout)
			}
			f, err := record.Open(args[0])
			if err != nil {
				return &exitError{exitUsage, err}
			}
			defer f.Close()
			hc := host.Config{Name: name, Path: wasm}
			opts := host.LoaderOptions{CacheDir: *cacheDir, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
			if configPath != "" {
				recorded := ""
				for _, p := range f.Plugins {
					if p.Name == name {
						recorded = p.Path
					}
				}
				if recorded == "" {
					return usageErrorf("%s records no plugin %s: nothing to take from --config", args[0], label(name))
				}
				if hc, opts.SecretEnv, err = pluginEntryConfig(cmd.Context(), configPath, recorded); err != nil {
					return &exitError{exitUsage, err}
				}
				hc.Name, hc.Path, hc.Source = name, wasm, ""
			}
			l, err := host.NewLoader(opts)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			defer l.Close(cmd.Context())
			rep, err := l.Replay(cmd.Context(), hc, f, host.ReplayOptions{Only: only, Ignore: ignore, Timeout: timeout})
			if err != nil {
				return &exitError{exitUsage, err}
			}
			if asJSON {
				if err := writeJSON(stdout, rep); err != nil {
					return err
				}
			} else {
				printReplay(stdout, rep)
			}
			if rep.Different > 0 {
				return &exitError{exitRunFailed, fmt.Errorf("%s: %d of %d calls answer differently", label(name), rep.Different, rep.Calls)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&plugin, "plugin", "", "NAME=new.wasm: the recorded plugin and its new build (required)")
	cmd.Flags().StringVar(&configPath, "config", "", "take grants and values from this morph.toml's entry for the plugin")
	cmd.Flags().StringArrayVar(&only, "only", nil, "replay only this hook or tool (repeatable)")
	cmd.Flags().StringArrayVar(&ignore, "ignore", nil, "leave this JSON pointer out of the output comparison (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().DurationVar(&timeout, "timeout", host.DefaultReplayTimeout, "bound each replayed call")
	_ = cmd.MarkFlagRequired("plugin")
	return cmd
}

// printReplay writes rep for a person; guest text goes through label and
// oneLine (the report's values are escaped already).
func printReplay(w io.Writer, rep *host.ReplayReport) {
	m := rep.Manifest
	for _, c := range []struct {
		what string
		list []string
	}{{"hooks added", m.HooksAdded}, {"hooks removed", m.HooksRemoved}, {"tools added", m.ToolsAdded},
		{"tools removed", m.ToolsRemoved}, {"tools changed", m.ToolsChanged}} {
		if len(c.list) > 0 {
			fmt.Fprintf(w, "manifest: %s: %s\n", c.what, labels(c.list))
		}
	}
	for _, d := range rep.Diffs {
		what := label(d.Export)
		if d.Tool != "" {
			what += " tool " + label(d.Tool)
		}
		fmt.Fprintf(w, "call %d (%s, session %s): differs", d.Seq, what, label(d.Session))
		if d.FaultWas != d.FaultNow {
			fmt.Fprintf(w, "; fault was %q, now %q", d.FaultWas, d.FaultNow)
		}
		if len(d.Paths) > 0 {
			fmt.Fprintf(w, " at %s", labels(d.Paths))
		}
		fmt.Fprintf(w, "\n  was: %s\n  now: %s\n", oneLine(d.Was, 0), oneLine(d.Now, 0))
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "call %d skipped: %s\n", s.Seq, oneLine(s.Reason, 0))
	}
	fmt.Fprintf(w, "%s: %d calls replayed: %d same, %d different, %d skipped\n", label(rep.Plugin), rep.Calls, rep.Same, rep.Different, len(rep.Skipped))
	if rep.Incomplete {
		fmt.Fprintln(w, "note: the recording has no end line (the recorded run stopped before closing it)")
	}
}

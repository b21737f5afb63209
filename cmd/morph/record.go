package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/record"
)

// recordFlagUsage is the --record flag's help, the same for morph run and
// morph pipeline run.
const recordFlagUsage = "record every hook and tool call of the plugins to this file, for morph plugin replay (caps in [record]; secrets scrubbed)"

// startRecording, for a --record path, creates the record file with cfg's
// [record] caps and secrets and has cfg's runtime record into it; stop,
// called once the runtime is closed, closes the file and prints what it
// holds. A secret too short to scrub is a usage error naming it. stop is
// never nil (a no-op without a recording).
func startRecording(cfg *config.Config, path string, stderr io.Writer) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	r, err := record.Create(path, cfg.RecordOptions(moduleVersion()))
	if err != nil {
		return func() {}, &exitError{exitUsage, fmt.Errorf("--record %s: %w", path, err)}
	}
	cfg.Record.Recorder = r
	return func() {
		sum, err := r.Close()
		fmt.Fprintln(stderr, oneLine(recordedLine(path, sum), 0))
		if err != nil {
			fmt.Fprintln(stderr, "morph: warning: "+oneLine(err.Error(), 500))
		}
	}, nil
}

// recordedLine is the line that ends a recorded run.
func recordedLine(path string, sum record.Summary) string {
	line := fmt.Sprintf("morph: recorded %s to %s", plural(int(sum.Calls), "call"), path)
	if sum.Dropped > 0 {
		why := sum.Stopped
		if !strings.HasPrefix(why, "write") {
			why = "record." + why
		}
		line += fmt.Sprintf(" (%d dropped: %s)", sum.Dropped, why)
	}
	return line
}

// recordOnTemporal is the error of --record with --temporal, where the
// workers, not this process, run the plugins.
func recordOnTemporal() error {
	return usageErrorf("--record is for a local run: on Temporal the workers run the plugins (record a local run)")
}

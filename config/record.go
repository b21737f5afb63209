package config

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/BurntSushi/toml"

	"github.com/morphhost/morph/record"
)

// Record is the [record] table: the caps of a recording (morph run
// --record FILE), each defaulting to package record's. A recording that
// reaches max_bytes or max_calls stops, with a warning, and the run goes
// on.
//
//	[record]
//	max_bytes = 67108864      # the file
//	max_call_bytes = 1048576  # each input and output; larger ones keep their size and sha256
//	max_calls = 100000
type Record struct {
	MaxBytes     int64 `toml:"max_bytes"`
	MaxCallBytes int64 `toml:"max_call_bytes"`
	MaxCalls     int   `toml:"max_calls"`
	// Recorder, when set (by a command or an embedder, not the file),
	// records the calls of every plugin Open loads.
	Recorder *record.Recorder `toml:"-"`
}

// record checks the [record] caps: each, when set, positive.
func (v *validator) record() {
	r := v.c.Record
	for _, c := range []struct {
		key string
		n   int64
	}{{"max_bytes", r.MaxBytes}, {"max_call_bytes", r.MaxCallBytes}, {"max_calls", int64(r.MaxCalls)}} {
		if v.md.IsDefined("record", c.key) && c.n < 1 {
			v.fail(toml.Key{"record", c.key}, nil, "must be positive, got %d (leave it out for the default)", c.n)
		}
	}
	if r.MaxCallBytes > record.MaxCallBytesLimit {
		v.fail(toml.Key{"record", "max_call_bytes"}, nil, "%d is over the limit of %d: a reader buffers about 12 times it", r.MaxCallBytes, record.MaxCallBytesLimit)
	}
}

// RecordOptions are the options of a recording of runs of c: its [record]
// caps and RecordSecrets, with the morph version for the file's header.
func (c *Config) RecordOptions(version string) record.Options {
	return record.Options{MaxBytes: c.Record.MaxBytes, MaxCallBytes: c.Record.MaxCallBytes, MaxCalls: c.Record.MaxCalls,
		Secrets: c.RecordSecrets(), Morph: version}
}

// RecordSecrets are the values a recording scrubs, read from the
// environment now: the model's API key and Temporal's secrets (SecretEnv),
// every environment variable a [[plugins]] entry grants (a guest may echo
// it; one under record.MinSecretBytes makes record.Create refuse), and every MCP server's header and OAuth client secret variables (a
// server may echo them). Unset variables are left out. Values of
// [plugins.config] are not: they are configuration, and replay needs them.
func (c *Config) RecordSecrets() []record.Secret {
	var out []record.Secret
	seen := map[string]bool{}
	add := func(name, source string) {
		if seen[name] {
			return
		}
		seen[name] = true
		if v := os.Getenv(name); v != "" {
			out = append(out, record.Secret{Name: name, Value: v, Source: source})
		}
	}
	// morph's own secrets reach no guest (a plugin granted one fails to
	// load): scrubbed when they can be, and a short one (a mock server's
	// dummy key) does not stop a recording.
	for _, name := range c.SecretEnv() {
		if v := os.Getenv(name); len(v) >= record.MinSecretBytes {
			add(name, "")
		}
	}
	for _, p := range c.Plugins {
		for _, name := range p.Env {
			add(name, fmt.Sprintf("granted to plugin %s", p.Name))
		}
	}
	for _, s := range c.MCPServers {
		for _, h := range slices.Sorted(maps.Keys(s.Headers)) {
			add(s.Headers[h], fmt.Sprintf("sent to MCP server %s", s.Name))
		}
		if s.OAuth != nil && s.OAuth.ClientSecretEnv != "" {
			add(s.OAuth.ClientSecretEnv, fmt.Sprintf("of MCP server %s", s.Name))
		}
	}
	return out
}

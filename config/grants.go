package config

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/morphhost/morph/host"
)

// grants checks a plugin's grant keys, and resolves its allowed_paths.
func (v *validator) grants(i int, p *PluginEntry, key func(string) toml.Key) {
	guests := map[string]string{}
	for j, s := range p.AllowedPaths {
		g, err := parsePathGrant(s, filepath.Dir(v.c.File))
		if err == nil {
			err = checkDir(g.Host)
		}
		if err != nil {
			v.fail(key("allowed_paths"), err, "plugin %q: %q: %v", p.Name, s, err)
			continue
		}
		if prev, dup := guests[g.Guest]; dup {
			v.fail(key("allowed_paths"), nil, "plugin %q: %q and %q both mount at %s; give one another guest directory (HOST_DIR:GUEST_DIR)", p.Name, prev, s, g.Guest)
			continue
		}
		guests[g.Guest] = s
		p.AllowedPaths[j] = g.Host + ":" + g.Guest
		if g.Writable {
			p.AllowedPaths[j] += ":rw"
		}
	}
	for _, h := range p.AllowedHosts {
		if err := host.CheckAllowedHost(h); err != nil {
			v.fail(key("allowed_hosts"), err, "plugin %q: %v", p.Name, err)
		}
	}
	for _, name := range p.Env {
		switch {
		case host.CheckEnvName(name) != nil:
			v.fail(key("env"), nil, "plugin %q: %v", p.Name, host.CheckEnvName(name))
		case name == v.c.LLM.APIKeyEnv:
			v.fail(key("env"), nil, "plugin %q: %s holds the model's API key (llm.api_key_env), which no plugin may see; remove it from env", p.Name, name)
		case strings.HasPrefix(name, temporalEnvPrefix):
			v.fail(key("env"), nil, "plugin %q: %s is one of Temporal's client settings (%s*), which hold its API key, TLS key and headers; no plugin may see them: remove it from env", p.Name, name, temporalEnvPrefix)
		}
	}
	if v.pluginDefined(i, "http_timeout") && p.HTTPTimeout <= 0 {
		v.fail(key("http_timeout"), nil, "plugin %q: must be positive", p.Name)
	}
	if p.HTTPMaxRedirects != nil && *p.HTTPMaxRedirects < 0 {
		v.fail(key("http_max_redirects"), nil, "plugin %q: must not be negative, got %d (0 means no redirects)", p.Name, *p.HTTPMaxRedirects)
	}
	if p.Ungranted != "" && !slices.Contains(host.UngrantedPolicies(), p.Ungranted) {
		v.fail(key("ungranted"), nil, "plugin %q: unknown policy %q (ungranted: %s)", p.Name, p.Ungranted, strings.Join(host.UngrantedPolicies(), ", "))
	}
}

// parsePathGrant reads an allowed_paths entry, "HOST_DIR[:GUEST_DIR][:ro|:rw]",
// resolving a relative HOST_DIR against base (the config file's directory).
func parsePathGrant(s, base string) (host.PathGrant, error) {
	parts := strings.Split(s, ":")
	var g host.PathGrant
	switch last := parts[len(parts)-1]; {
	case len(parts) > 1 && last == "rw":
		g.Writable, parts = true, parts[:len(parts)-1]
	case len(parts) > 1 && last == "ro":
		parts = parts[:len(parts)-1]
	}
	if len(parts) > 2 || parts[0] == "" {
		return g, errors.New(`want "HOST_DIR", "HOST_DIR:GUEST_DIR", and ":rw" at the end for a writable one`)
	}
	g.Host = parts[0]
	if !filepath.IsAbs(g.Host) {
		g.Host = filepath.Join(base, g.Host)
	}
	abs, err := filepath.Abs(g.Host)
	if err != nil {
		return g, err
	}
	g.Host, g.Guest = abs, filepath.ToSlash(abs)
	if len(parts) == 2 {
		g.Guest = parts[1]
	}
	if !strings.HasPrefix(g.Guest, "/") {
		return g, fmt.Errorf("the guest directory %q must be absolute (start with /)", g.Guest)
	}
	g.Guest = path.Clean(g.Guest)
	return g, nil
}

// checkDir reports whether dir is a directory.
func checkDir(dir string) error {
	info, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("%w (a relative directory is resolved against the config file's directory)", err)
	case !info.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// Grants are the plugin's grant keys for package host. An allowed_paths
// entry that does not parse (in a Plugin not checked by Load) is passed on
// without a guest directory, which fails the plugin's load, naming it.
func (p PluginEntry) Grants() host.Grants {
	var paths []host.PathGrant
	for _, s := range p.AllowedPaths {
		g, err := parsePathGrant(s, ".")
		if err != nil {
			g = host.PathGrant{Host: s}
		}
		paths = append(paths, g)
	}
	g := host.Grants{Paths: paths, Hosts: p.AllowedHosts, Env: p.Env, HTTPTimeout: p.HTTPTimeout,
		HTTPMaxResponseBytes: p.HTTPMaxResponseKB << 10, Ungranted: p.Ungranted}
	if p.HTTPMaxRedirects != nil {
		g.HTTPMaxRedirects = *p.HTTPMaxRedirects
		if g.HTTPMaxRedirects == 0 {
			g.HTTPMaxRedirects = -1 // host: negative is none, zero the default
		}
	}
	return g
}

// temporalEnvPrefix begins the names of Temporal's client settings, which a
// worker reads (`morph worker`): no plugin may be granted one.
const temporalEnvPrefix = "TEMPORAL_"

// temporalSecretEnv are the secrets among them.
var temporalSecretEnv = []string{"TEMPORAL_API_KEY", "TEMPORAL_TLS_CLIENT_KEY_DATA", "TEMPORAL_CODEC_AUTH"}

// SecretEnv names the environment variables no plugin may be granted, for
// host.LoaderOptions: the model API key's (llm.api_key_env) and Temporal's
// secrets (a config refuses every TEMPORAL_ variable already; this keeps a
// host that builds its own grants from the config's loader to the rule).
func (c *Config) SecretEnv() []string {
	out := slices.Clone(temporalSecretEnv)
	if c.LLM.APIKeyEnv != "" {
		out = append(out, c.LLM.APIKeyEnv)
	}
	return out
}

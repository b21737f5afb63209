package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental/sysfs"

	"github.com/morphhost/morph/abi"
)

// Grants are what a plugin may reach beyond its own memory and the two host
// functions every plugin has (log and config_get): deny by default. The zero
// Grants give no files, no environment and no network; each field opens one
// capability (abi.CapabilityFS, abi.CapabilityEnv, abi.CapabilityHTTP) and
// nothing else. host.Loader.Load fixes them for the plugin's lifetime (New
// opens the directories, reads the environment values and builds the HTTP
// client once), so what a guest can reach cannot change under it.
type Grants struct {
	// Paths are the directories the guest sees through WASI, each mounted
	// read-only unless Writable. Nothing else of the host's file system is
	// reachable: paths resolve inside the directory (a symbolic link leading
	// out of it is refused) and a guest cannot create symbolic links.
	Paths []PathGrant
	// Hosts are the hosts http_request may reach: exact names
	// ("api.example.com", an IP address) or wildcards ("*.example.com": any
	// name under example.com, not example.com itself), each optionally with
	// ":port" to allow that port only (without one, any port). Every
	// redirect hop is checked against them too. See CheckAllowedHost.
	Hosts []string
	// Env names the host environment variables the guest sees, with their
	// values at load; it sees no others. A name in
	// host.LoaderOptions.SecretEnv (the model API key's variable) fails the
	// load.
	Env []string
	// HTTPTimeout bounds one http_request, redirects and body included
	// (default DefaultHTTPTimeout); the plugin's call timeout bounds it too.
	HTTPTimeout time.Duration
	// HTTPMaxResponseBytes caps a response, its headers and body together;
	// a larger one is an error, never a truncated body (default
	// DefaultHTTPMaxResponseBytes).
	HTTPMaxResponseBytes int
	// HTTPMaxRedirects caps the redirects one request follows (0:
	// DefaultHTTPMaxRedirects; negative: none).
	HTTPMaxRedirects int
	// Ungranted is what a capability the manifest requests and these grants
	// do not give means at load: UngrantedWarn (or empty) logs a warning
	// and loads the plugin, whose calls that need it then fail;
	// UngrantedError fails the load with ErrNotGranted.
	Ungranted string
}

// PathGrant mounts the host directory Host at Guest, an absolute path in the
// guest, read-only unless Writable.
type PathGrant struct {
	Host     string
	Guest    string
	Writable bool
}

// String reads "/srv/notes -> /notes (ro)", as the capability report shows it.
func (g PathGrant) String() string {
	mode := "ro"
	if g.Writable {
		mode = "rw"
	}
	return g.Host + " -> " + g.Guest + " (" + mode + ")"
}

// Defaults of zero Grants limits.
const (
	DefaultHTTPTimeout          = 10 * time.Second
	DefaultHTTPMaxResponseBytes = 1 << 20
	DefaultHTTPMaxRedirects     = 5
)

// Policies of Grants.Ungranted.
const (
	UngrantedWarn  = "warn"
	UngrantedError = "error"
)

// UngrantedPolicies are the valid Grants.Ungranted values.
func UngrantedPolicies() []string { return []string{UngrantedWarn, UngrantedError} }

// grantSettings names the morph.toml key of [[plugins]] that grants each
// capability, for the messages that tell an operator what to set.
var grantSettings = map[string]string{
	abi.CapabilityHTTP: "allowed_hosts",
	abi.CapabilityFS:   "allowed_paths",
	abi.CapabilityEnv:  "env",
}

func (g Grants) withDefaults() Grants {
	if g.HTTPTimeout <= 0 {
		g.HTTPTimeout = DefaultHTTPTimeout
	}
	if g.HTTPMaxResponseBytes <= 0 {
		g.HTTPMaxResponseBytes = DefaultHTTPMaxResponseBytes
	}
	switch {
	case g.HTTPMaxRedirects == 0:
		g.HTTPMaxRedirects = DefaultHTTPMaxRedirects
	case g.HTTPMaxRedirects < 0:
		g.HTTPMaxRedirects = 0
	}
	if g.Ungranted == "" {
		g.Ungranted = UngrantedWarn
	}
	return g
}

// envNameRE is what an environment variable name looks like.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckEnvName reports whether name can name an environment variable.
func CheckEnvName(name string) error {
	if !envNameRE.MatchString(name) {
		return fmt.Errorf("%q is not an environment variable name (letters, digits and _, not starting with a digit)", name)
	}
	return nil
}

// hostPattern is one entry of Grants.Hosts, parsed.
type hostPattern struct {
	name     string // exact host name or IP, lower case; empty for a wildcard
	suffix   string // wildcard: ".example.com"
	port     string // "" for any port
	original string
}

// hostLabelRE is one label of a DNS name (letters, digits, hyphens; "_" is
// tolerated, as some services use it).
var hostLabelRE = regexp.MustCompile(`^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?$`)

// CheckAllowedHost reports whether pattern is a valid Grants.Hosts entry: a
// host name or IP address, or "*." and a domain of at least two labels, with
// an optional ":port". Not a URL, and not "*" alone: deny by default means
// the hosts are named.
func CheckAllowedHost(pattern string) error {
	_, err := parseHostPattern(pattern)
	return err
}

func parseHostPattern(s string) (hostPattern, error) {
	p := hostPattern{original: s}
	h := strings.ToLower(strings.TrimSpace(s))
	switch {
	case h == "":
		return p, errors.New("empty host")
	case strings.Contains(h, "://") || strings.ContainsAny(h, "/?#@"):
		return p, fmt.Errorf("%q: want a host name such as api.example.com, not a URL", s)
	case h == "*" || h == "*.*":
		return p, fmt.Errorf("%q: name the hosts (a wildcard is \"*.example.com\")", s)
	}
	if host, port, err := net.SplitHostPort(h); err == nil {
		n, perr := strconv.Atoi(port)
		if perr != nil || n < 1 || n > 65535 {
			return p, fmt.Errorf("%q: port %q is not a number from 1 to 65535", s, port)
		}
		h, p.port = host, port
	} else if strings.Count(h, ":") == 1 {
		return p, fmt.Errorf("%q: %v", s, err)
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	if ip := net.ParseIP(h); ip != nil {
		p.name = ip.String()
		return p, nil
	}
	labels := strings.Split(h, ".")
	if labels[0] == "*" {
		if len(labels) < 3 {
			return p, fmt.Errorf("%q: a wildcard needs a domain of at least two labels (\"*.example.com\")", s)
		}
		labels = labels[1:]
		p.suffix = "." + strings.Join(labels, ".")
	} else {
		p.name = h
	}
	for _, l := range labels {
		if !hostLabelRE.MatchString(l) {
			return p, fmt.Errorf("%q: %q is not a valid host name label (\"*\" is allowed only as the first label)", s, l)
		}
	}
	return p, nil
}

// match reports whether host (a URL's host name, without brackets) and port
// are allowed by p.
func (p hostPattern) match(host, port string) bool {
	if p.port != "" && p.port != port {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	if p.suffix != "" {
		return len(host) > len(p.suffix) && strings.HasSuffix(host, p.suffix)
	}
	return host == p.name
}

// Sandbox is a plugin's Grants made ready for its instances: directories
// opened, environment values read, the HTTP client built. Every instance
// of the plugin shares it, in either loader.
type Sandbox struct {
	grants Grants // with defaults
	fs     wazero.FSConfig
	roots  []*rootFS
	env    [][2]string // name, value; only granted variables set at load
	http   *httpGrant
}

// New checks g and prepares it. secretEnv names variables no plugin may
// see; log returns the plugin's logger at the time of the call.
func New(g Grants, secretEnv []string, log func() *slog.Logger) (_ *Sandbox, err error) {
	s := &Sandbox{grants: g.withDefaults()}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	var errs []error
	if g.Ungranted != "" && !slices.Contains(UngrantedPolicies(), g.Ungranted) {
		errs = append(errs, fmt.Errorf("ungranted %q: want one of %s", g.Ungranted, strings.Join(UngrantedPolicies(), ", ")))
	}
	for _, name := range g.Env {
		if err := CheckEnvName(name); err != nil {
			errs = append(errs, fmt.Errorf("env: %w", err))
		} else if slices.Contains(secretEnv, name) {
			errs = append(errs, fmt.Errorf("env: %s holds the model's API key, which no plugin may see; remove it from the plugin's env", name))
		} else if v, ok := os.LookupEnv(name); ok {
			s.env = append(s.env, [2]string{name, v})
		} else {
			log().Warn("a granted environment variable is not set; the guest will not see it", "env", name)
		}
	}
	var patterns []hostPattern
	for _, h := range g.Hosts {
		p, err := parseHostPattern(h)
		if err != nil {
			errs = append(errs, fmt.Errorf("allowed host: %w", err))
			continue
		}
		patterns = append(patterns, p)
	}
	s.http = newHTTPGrant(patterns, s.grants, log)
	guests := map[string]bool{}
	fsc := wazero.NewFSConfig().(sysfs.FSConfig)
	for _, pg := range g.Paths {
		guest := path.Clean(pg.Guest)
		switch {
		case pg.Host == "":
			errs = append(errs, fmt.Errorf("allowed path %s: no host directory", pg))
			continue
		case !path.IsAbs(pg.Guest):
			errs = append(errs, fmt.Errorf("allowed path %s: the guest path must be absolute (start with /)", pg))
			continue
		case guests[guest]:
			errs = append(errs, fmt.Errorf("allowed path %s: %s is mounted twice", pg, guest))
			continue
		}
		guests[guest] = true
		r, err := openRootFS(pg.Host, !pg.Writable, log)
		if err != nil {
			errs = append(errs, fmt.Errorf("allowed path %s: %w", pg, err))
			continue
		}
		s.roots = append(s.roots, r)
		s.fs = fsc.WithSysFSMount(r, guest)
		fsc = s.fs.(sysfs.FSConfig)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// Configure gives an instance's module config the granted directories and
// environment.
func (s *Sandbox) Configure(cfg wazero.ModuleConfig) wazero.ModuleConfig {
	if s.fs != nil {
		cfg = cfg.WithFSConfig(s.fs)
	}
	for _, kv := range s.env {
		cfg = cfg.WithEnv(kv[0], kv[1])
	}
	return cfg
}

// Close releases the directories and the HTTP client's idle connections.
func (s *Sandbox) Close() error {
	var errs []error
	for _, r := range s.roots {
		errs = append(errs, r.close())
	}
	s.roots = nil
	if s.http != nil {
		s.http.close()
	}
	return errors.Join(errs...)
}

// Capabilities compares the manifest's requests with the grants: one entry
// per capability requested or granted (log and config, granted to all, only
// when requested), in a fixed order, then unknown requests in the
// manifest's order.
func (s *Sandbox) Capabilities(requested []string) []CapabilityStatus {
	g := s.grants
	var fs []string
	for _, p := range g.Paths {
		abs, err := filepath.Abs(p.Host)
		if err == nil {
			p.Host = abs
		}
		fs = append(fs, p.String())
	}
	known := []struct {
		name      string
		universal bool
		grants    []string
	}{
		{abi.CapabilityLog, true, nil},
		{abi.CapabilityConfig, true, nil},
		{abi.CapabilityHTTP, false, g.Hosts},
		{abi.CapabilityFS, false, fs},
		{abi.CapabilityEnv, false, g.Env},
	}
	var out []CapabilityStatus
	for _, k := range known {
		req := slices.Contains(requested, k.name)
		granted := k.universal || len(k.grants) > 0
		if req || (granted && !k.universal) {
			out = append(out, CapabilityStatus{Name: k.name, Requested: req, Granted: granted, Grants: slices.Clone(k.grants)})
		}
	}
	for _, r := range requested {
		if !slices.ContainsFunc(out, func(c CapabilityStatus) bool { return c.Name == r }) {
			out = append(out, CapabilityStatus{Name: r, Requested: true})
		}
	}
	return out
}

// NotGranted are the requested capabilities of caps that are not granted.
func NotGranted(caps []CapabilityStatus) []string {
	var out []string
	for _, c := range caps {
		if c.Requested && !c.Granted {
			out = append(out, c.Name)
		}
	}
	return out
}

// Grants are the grants s was made from, with their defaults.
func (s *Sandbox) Grants() Grants { return s.grants }

// HTTP sends req for a guest through the plugin's HTTP grant: the whole
// HTTP capability, which every loader's http_request host function calls
// (see httpGrant.do for its errors). ctx is the plugin call's.
func (s *Sandbox) HTTP(ctx context.Context, req abi.HTTPRequest) (abi.HTTPResponse, error) {
	return s.http.do(ctx, req)
}

// Setting names the morph.toml key of [[plugins]] that grants capability,
// for the messages that tell an operator what to set; "" for a capability
// this host cannot grant.
func Setting(capability string) string { return grantSettings[capability] }

// CapabilityStatus is one capability of a plugin: whether its manifest
// requested it and whether the host granted it, with what (hosts, directories,
// variable names), so an operator can see a missing grant before a call
// fails for want of it, and a grant nobody asked for.
type CapabilityStatus struct {
	Name      string   `json:"name"` // abi.Capability*, or a name the host does not know
	Requested bool     `json:"requested"`
	Granted   bool     `json:"granted"`
	Grants    []string `json:"grants,omitempty"` // what is granted, when more than yes or no
}

// String reads "http (requested, granted: api.example.com)", "fs (requested,
// NOT granted)" or "env (granted: LANG, not requested)".
func (c CapabilityStatus) String() string {
	var parts []string
	if c.Requested {
		parts = append(parts, "requested")
	}
	switch {
	case !c.Granted:
		parts = append(parts, "NOT granted")
	case len(c.Grants) > 0:
		parts = append(parts, "granted: "+strings.Join(c.Grants, ", "))
	default:
		parts = append(parts, "granted")
	}
	if !c.Requested {
		parts = append(parts, "not requested")
	}
	return c.Name + " (" + strings.Join(parts, ", ") + ")"
}

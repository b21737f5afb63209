package host

import (
	"fmt"
	"strings"
	"time"

	"github.com/morphhost/morph/host/internal/sandbox"
)

// Grants are what a plugin may reach beyond its own memory and the two host
// functions every plugin has (log and config_get): deny by default. The zero
// Grants give no files, no environment and no network; each field opens one
// capability (abi.CapabilityFS, abi.CapabilityEnv, abi.CapabilityHTTP) and
// nothing else. Load fixes them for the plugin's lifetime: it opens the
// directories, reads the environment values and builds the HTTP client
// once, so what a guest can reach cannot change under it. A grant Load
// cannot honour (a missing directory, a malformed host, a secret variable)
// fails the load, naming it.
type Grants struct {
	// Paths are the directories the guest sees through WASI, each mounted
	// read-only unless its Writable is set. Nothing else of the host's file
	// system is reachable: paths resolve inside the directory (a symbolic
	// link leading out of it is refused) and a guest cannot create
	// symbolic links. Two grants may not mount the same guest path.
	Paths []PathGrant
	// Hosts are the hosts http_request may reach: exact names
	// ("api.example.com", an IP address) or wildcards ("*.example.com": any
	// name under example.com, not example.com itself), each optionally with
	// ":port" to allow that port only (without one, any port). Every
	// redirect hop is checked against them too, and so is the address the
	// dialer connects to. See CheckAllowedHost for what an entry may be.
	// None: the guest has no network.
	Hosts []string
	// Env names the host environment variables the guest sees, with their
	// values at load; it sees no others. A name in LoaderOptions.SecretEnv
	// (the model API key's variable) fails the load, so the key cannot
	// reach a guest by mistake; a name that is not set is logged and left
	// out. See CheckEnvName.
	Env []string
	// HTTPTimeout bounds one http_request, redirects and body included
	// (zero: DefaultHTTPTimeout, 10 s); the plugin's call timeout bounds it
	// too, so a guest cannot outwait its own call.
	HTTPTimeout time.Duration
	// HTTPMaxResponseBytes caps a response, its headers (each one's name
	// and value) and body together (zero: DefaultHTTPMaxResponseBytes,
	// 1 MiB); a larger one is an error (ErrResponseTooLarge), never a
	// truncated body the guest would take for the whole.
	HTTPMaxResponseBytes int
	// HTTPMaxRedirects caps the redirects one request follows (zero:
	// DefaultHTTPMaxRedirects, 5; negative: none), past which the request
	// fails with ErrTooManyRedirects.
	HTTPMaxRedirects int
	// Ungranted is what a capability the plugin's manifest requests and
	// these grants do not give means at load: UngrantedWarn (or empty)
	// logs a warning and loads the plugin, whose calls that need the
	// capability then fail; UngrantedError fails the load with
	// ErrNotGranted (wrapping a *CapabilityError). See UngrantedPolicies.
	Ungranted string
}

// sandbox is g as the package that enforces it takes it.
func (g Grants) sandbox() sandbox.Grants {
	var paths []sandbox.PathGrant
	for _, p := range g.Paths {
		paths = append(paths, sandbox.PathGrant(p))
	}
	return sandbox.Grants{Paths: paths, Hosts: g.Hosts, Env: g.Env, HTTPTimeout: g.HTTPTimeout,
		HTTPMaxResponseBytes: g.HTTPMaxResponseBytes, HTTPMaxRedirects: g.HTTPMaxRedirects, Ungranted: g.Ungranted}
}

// PathGrant mounts one host directory in the guest (see Grants.Paths).
type PathGrant struct {
	// Host is the host directory, which must exist at load; a relative
	// one is relative to the process's working directory.
	Host string
	// Guest is where the guest sees it: an absolute path ("/data").
	Guest string
	// Writable lets the guest create, change and remove files in it;
	// without it the mount is read-only, and a write fails in the guest.
	Writable bool
}

// String reads "/srv/notes -> /notes (ro)", as the capability report shows it.
func (g PathGrant) String() string { return sandbox.PathGrant(g).String() }

// CapabilityError lists capabilities a plugin's manifest requests and its
// grants do not give. A load with Grants.Ungranted = UngrantedError fails
// with it, inside an *Error of kind ErrNotGranted.
type CapabilityError struct {
	// Capabilities are the names the manifest requests (abi.Capability*,
	// or names this host does not know) that the grants do not give.
	Capabilities []string
}

// Error names each capability with the morph.toml key that grants it, and
// the way out (ungranted = "warn"), so the operator knows what to change.
func (e *CapabilityError) Error() string {
	parts := make([]string, len(e.Capabilities))
	for i, c := range e.Capabilities {
		if key := sandbox.Setting(c); key != "" {
			parts[i] = fmt.Sprintf("%s (set %s)", c, key)
		} else {
			parts[i] = fmt.Sprintf("%s (unknown to this host: it cannot be granted)", c)
		}
	}
	return "the manifest requests capabilities not granted: " + strings.Join(parts, ", ") +
		`; grant them in the plugin's [[plugins]] entry of morph.toml, or set ungranted = "warn" to load the plugin anyway`
}

// Defaults of zero Grants limits: 10 s per request, 1 MiB of response
// body, 5 redirects.
const (
	DefaultHTTPTimeout          = 10 * time.Second
	DefaultHTTPMaxResponseBytes = 1 << 20
	DefaultHTTPMaxRedirects     = 5
)

// Policies of Grants.Ungranted: what a capability the manifest requests and
// the grants do not give means at load. UngrantedWarn (or empty) logs a
// warning and loads the plugin; UngrantedError fails the load with
// ErrNotGranted.
const (
	UngrantedWarn  = "warn"
	UngrantedError = "error"
)

// UngrantedPolicies are the valid Grants.Ungranted values, for the config's
// validation.
func UngrantedPolicies() []string { return sandbox.UngrantedPolicies() }

// CheckEnvName reports whether name can name an environment variable, for
// the config's validation of Grants.Env before any load.
func CheckEnvName(name string) error { return sandbox.CheckEnvName(name) }

// CheckAllowedHost reports whether pattern is a valid Grants.Hosts entry: a
// host name or IP address, or "*." and a domain of at least two labels, with
// an optional ":port". Not a URL, and not "*" alone: deny by default means
// the hosts are named. The config validates allowed_hosts with it.
func CheckAllowedHost(pattern string) error { return sandbox.CheckAllowedHost(pattern) }

// ungrantedError is the load failure of a plugin whose manifest requests
// the missing capabilities, under UngrantedError.
func ungrantedError(plugin string, missing []string) *Error {
	return &Error{Plugin: plugin, Kind: ErrNotGranted, Err: &CapabilityError{Capabilities: missing}}
}

package host

import "github.com/morphhost/morph/host/internal/sandbox"

// Grants are what a plugin may reach beyond its own memory and the two host
// functions every plugin has (log and config_get): deny by default. The zero
// Grants give no files, no environment and no network; each field opens one
// capability (directories, environment variables, HTTP hosts) and nothing
// else. Load fixes them for the plugin's lifetime. They are defined, with
// the sandbox that enforces them, in host/internal/sandbox, which both
// loaders use; see its fields there.
type Grants = sandbox.Grants

// PathGrant mounts the host directory Host at Guest, an absolute path in the
// guest, read-only unless Writable.
type PathGrant = sandbox.PathGrant

// CapabilityError lists capabilities a plugin's manifest requests and its
// grants do not give. A load with Grants.Ungranted = UngrantedError fails
// with it, inside an *Error of kind ErrNotGranted.
type CapabilityError = sandbox.CapabilityError

// Defaults of zero Grants limits.
const (
	DefaultHTTPTimeout          = sandbox.DefaultHTTPTimeout
	DefaultHTTPMaxResponseBytes = sandbox.DefaultHTTPMaxResponseBytes
	DefaultHTTPMaxRedirects     = sandbox.DefaultHTTPMaxRedirects
)

// Policies of Grants.Ungranted: what a capability the manifest requests and
// the grants do not give means at load. UngrantedWarn (or empty) logs a
// warning and loads the plugin; UngrantedError fails the load with
// ErrNotGranted.
const (
	UngrantedWarn  = sandbox.UngrantedWarn
	UngrantedError = sandbox.UngrantedError
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

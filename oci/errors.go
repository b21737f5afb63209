package oci

import (
	"errors"
	"fmt"
	"strings"

	"github.com/morphhost/morph/internal/safetext"
)

// The kinds of refusal, for errors.Is. Every refusal is an *Error naming
// the plugin, the reference and the digest; its Kind is one of these.
var (
	// ErrNotSigned: no signature of a format morph reads was found for the manifest.
	ErrNotSigned = errors.New("not signed")
	// ErrBadSignature: a signature does not verify with the policy's key or root, or signs another digest.
	ErrBadSignature = errors.New("signature does not verify")
	// ErrIdentity: a keyless signature verifies but names another identity or issuer than the policy's.
	ErrIdentity = errors.New("signer identity does not match")
	// ErrTampered: bytes the registry served do not hash to their digest, or have another size.
	ErrTampered = errors.New("content does not match its digest")
	// ErrLockMismatch: a reference resolves to a digest other than morph.lock's.
	ErrLockMismatch = errors.New("digest differs from morph.lock")
	// ErrUnlockedTag: a tag with no morph.lock entry and no digest; a tag alone is never trusted.
	ErrUnlockedTag = errors.New("tag is not locked")
	// ErrTooLarge: a manifest, layer or module is over its limit (module_mb), refused before it is downloaded.
	ErrTooLarge = errors.New("too large")
	// ErrLayout: no module found, more than one, a link in its place, or a layer that decompresses past its limit.
	ErrLayout = errors.New("unusable layout")
	// ErrNotCached: offline, or the registry cannot be reached, and the digest is not in the cache.
	ErrNotCached = errors.New("not in the cache")
	// ErrPolicy: the verification policy cannot be applied: key and identity both or neither, a key or
	// trusted root that does not load, or keyless with no trusted root.
	ErrPolicy = errors.New("verification policy unusable")
	// ErrRegistry: the registry refused or failed a request it was reachable for (an HTTP error, a
	// missing blob, an answer morph cannot use); its own error is reachable with errors.As.
	ErrRegistry = errors.New("registry error")
	// ErrBadRef: a reference or digest morph cannot use (not oci://, not sha256:HEX, or a digest other
	// than the reference's).
	ErrBadRef = errors.New("unusable reference")
)

// Error is a refusal about one plugin's reference. Package oci knows
// references, not configurations: it never sets Plugin; a caller that
// knows which [[plugins]] entry the reference came from sets it (errors.As,
// then Plugin = name) so that the message names the plugin.
type Error struct {
	Plugin string // the [[plugins]] name, set by the caller; "" outside a configuration
	Ref    string // the reference as written
	Digest string // the manifest digest, when known
	Kind   error  // one of the Err* kinds above
	Err    error  // the detail: what failed, and what to do
}

func (e *Error) Error() string {
	s := ""
	if e.Plugin != "" {
		s = fmt.Sprintf("plugin %q: ", e.Plugin)
	}
	s += e.Ref
	if e.Digest != "" && !strings.Contains(e.Ref, "@") {
		s += "@" + e.Digest
	}
	if s == "" {
		return e.Err.Error()
	}
	return s + ": " + e.Err.Error()
}

// Is reports the error's kind, so that errors.Is(err, ErrTampered) holds.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap gives the detail, so that errors.As reaches a library's error.
func (e *Error) Unwrap() error { return e.Err }

// registryText is a registry's error (or any error quoting what a registry
// sent) with its message escaped for a terminal and a log line, one line
// of at most 400 bytes; Unwrap keeps errors.As reaching the library's
// error (*errcode.ErrorResponse).
type registryText struct{ err error }

func (e registryText) Error() string { return safetext.Line(e.err.Error(), 400) }

func (e registryText) Unwrap() error { return e.err }

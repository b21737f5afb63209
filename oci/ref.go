package oci

import (
	"fmt"
	"strings"

	"oras.land/oras-go/v2/registry"

	"github.com/morphhost/morph/internal/safetext"
)

// Scheme prefixes every reference morph reads from a registry.
const Scheme = "oci://"

// ParseRef parses oci://REGISTRY/REPO:TAG, oci://REGISTRY/REPO@sha256:HEX or
// oci://REGISTRY/REPO:TAG@sha256:HEX. A reference with neither a tag nor a
// digest is an error: there is no implicit "latest", since a moving default
// is the opposite of knowing what runs.
func ParseRef(s string) (Ref, error) {
	bad := func(format string, a ...any) (Ref, error) {
		return Ref{}, fmt.Errorf("reference %s: %s", safetext.Quote(s, 200), fmt.Sprintf(format, a...))
	}
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return bad("does not start with %s; write %sREGISTRY/REPO:TAG or @sha256:HEX", Scheme, Scheme)
	}
	var r Ref
	if i := strings.IndexByte(rest, '@'); i >= 0 {
		rest, r.Digest = rest[:i], rest[i+1:]
		if err := checkDigest(r.Digest); err != nil {
			return bad("%v", err)
		}
	}
	slash := strings.IndexByte(rest, '/')
	if slash <= 0 {
		return bad("has no repository; write %sREGISTRY/REPO:TAG", Scheme)
	}
	r.Registry, r.Repository = rest[:slash], rest[slash+1:]
	if i := strings.LastIndexByte(r.Repository, ':'); i >= 0 {
		r.Repository, r.Tag = r.Repository[:i], r.Repository[i+1:]
		if r.Tag == "" {
			return bad("has an empty tag after ':'")
		}
	}
	if r.Tag == "" && r.Digest == "" {
		return bad("names no tag and no digest (there is no implicit \"latest\"); add :TAG or @sha256:HEX")
	}
	ref := registry.Reference{Registry: r.Registry, Repository: r.Repository, Reference: r.Tag}
	if err := ref.ValidateRegistry(); err != nil {
		return bad("registry: %v", err)
	}
	if err := ref.ValidateRepository(); err != nil {
		return bad("repository: %v", err)
	}
	if r.Tag != "" {
		if err := ref.ValidateReferenceAsTag(); err != nil {
			return bad("tag: %v", err)
		}
	}
	return r, nil
}

// checkDigest accepts "sha256:" and 64 lower-case hex digits, the only
// digest morph pins (the cache and morph.lock are keyed by it).
func checkDigest(d string) error {
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
		return fmt.Errorf("digest %s is not sha256: and 64 lower-case hex digits", safetext.Quote(d, 100))
	}
	return nil
}

// String gives the reference as ParseRef reads it.
func (r Ref) String() string {
	s := Scheme + r.Registry + "/" + r.Repository
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

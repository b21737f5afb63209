// Package ocitest forwards to internal/ocitest, the OCI tests' harness,
// which moved there so that cmd/morph's end-to-end tests can use it too;
// package oci's tests still import it by this path.
package ocitest

import (
	"testing"

	"github.com/morphhost/morph/internal/ocitest"
)

// Password is ocitest.Password.
const Password = ocitest.Password

// Registry is ocitest.Registry.
type Registry = ocitest.Registry

// The harness's functions, as ocitest documents them.
var (
	Tools         func(testing.TB) string                                         = ocitest.Tools
	StartRegistry func(testing.TB) *Registry                                      = ocitest.StartRegistry
	Run           func(t testing.TB, tool string, args ...string) string          = ocitest.Run
	RunIn         func(t testing.TB, dir, tool string, args ...string) string     = ocitest.RunIn
	Output        func(t testing.TB, tool string, args ...string) (string, error) = ocitest.Output
	KeyPair       func(t testing.TB, dir, prefix string) (key, pub string)        = ocitest.KeyPair
	Digest        func(t testing.TB, ref string) string                           = ocitest.Digest
	Sign          func(t testing.TB, key, ref string, legacy bool)                = ocitest.Sign
	Verify        func(t testing.TB, pub, ref string, legacy bool) error          = ocitest.Verify
)

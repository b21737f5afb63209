package oci

import (
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	const hex = "f436f8021d1e8f39bc7a1b5ac2e3b0f9a4dd1c2b3e4f5a6b7c8d9e0f1a2b3c4d"
	for _, tc := range []struct {
		in   string
		want Ref
		err  string // part of the error; "" for success
	}{
		{in: "oci://ghcr.io/acme/time-plugin:v1", want: Ref{Registry: "ghcr.io", Repository: "acme/time-plugin", Tag: "v1"}},
		{in: "oci://127.0.0.1:5000/plugins/spin@sha256:" + hex, want: Ref{Registry: "127.0.0.1:5000", Repository: "plugins/spin", Digest: "sha256:" + hex}},
		{in: "oci://127.0.0.1:5000/plugins/spin:v2@sha256:" + hex, want: Ref{Registry: "127.0.0.1:5000", Repository: "plugins/spin", Tag: "v2", Digest: "sha256:" + hex}},
		{in: "oci://localhost/a/b/c:1.0", want: Ref{Registry: "localhost", Repository: "a/b/c", Tag: "1.0"}},
		{in: "oci://ghcr.io/acme/time-plugin", err: "no tag and no digest"},
		{in: "oci://127.0.0.1:5000/plugins/spin", err: "no tag and no digest"},
		{in: "ghcr.io/acme/time-plugin:v1", err: "does not start with oci://"},
		{in: "oci://ghcr.io", err: "has no repository"},
		{in: "oci:///acme/x:v1", err: "has no repository"},
		{in: "oci://ghcr.io/acme/x:", err: "empty tag"},
		{in: "oci://ghcr.io/acme/x@sha256:abc", err: "64 lower-case hex"},
		{in: "oci://ghcr.io/acme/x@sha512:" + hex, err: "is not sha256:"},
		{in: "oci://ghcr.io/acme/x@sha256:" + strings.ToUpper(hex), err: "64 lower-case hex"},
		{in: "oci://ghcr.io/Acme/x:v1", err: "repository"},
		{in: "oci://ghcr.io/acme/x:v1 beta", err: "tag"},
		{in: "oci://ghcr.io/acme/x:v1\x1b[2J", err: `\x1b[2J`}, // escaped in the message
	} {
		got, err := ParseRef(tc.in)
		if tc.err != "" {
			if err == nil {
				t.Errorf("ParseRef(%q) = %+v, want an error containing %q", tc.in, got, tc.err)
			} else if !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "reference ") {
				t.Errorf("ParseRef(%q): %v, want it to name the reference and say %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRef(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseRef(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		if s := got.String(); s != tc.in {
			t.Errorf("ParseRef(%q).String() = %q, want the input back", tc.in, s)
		}
	}
}

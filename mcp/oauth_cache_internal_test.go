package mcp

import "testing"

// Two entries of one server that ask for other scopes, or another grant,
// keep other tokens; the scopes' order does not matter.
func TestCacheNameScopes(t *testing.T) {
	const srv = "https://mcp.example.com/mcp"
	base := cacheName(srv, &OAuthConfig{Scopes: []string{"read", "write"}})
	if got := cacheName(srv, &OAuthConfig{Scopes: []string{"write", "read"}}); got != base {
		t.Errorf("the same scopes in another order: %s, want %s", got, base)
	}
	for _, cfg := range []*OAuthConfig{{Scopes: []string{"read"}}, {}, {Scopes: []string{"read", "write"}, ClientCredentials: true}} {
		if got := cacheName(srv, cfg); got == base {
			t.Errorf("%+v: the token file of scopes read and write", cfg)
		}
	}
}

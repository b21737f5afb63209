// Package httpguard holds the checks morph's HTTP servers (mcp serve
// --http, pipeline serve) put in front of their handlers: whether a listen
// address is loopback, the bearer token, and the Origin of a browser's
// request (DNS-rebinding protection). One copy, so that the servers refuse
// the same requests the same way.
package httpguard

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// LoopbackAddr reports whether addr (host:port) names a loopback host. It
// is decided before binding, from the text: a name other than localhost
// may resolve beyond loopback, and an empty host is every interface.
func LoopbackAddr(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	return loopbackName(host), nil
}

// TokenMatches compares a presented token with the expected one in
// constant time (an empty expected token matches nothing).
func TokenMatches(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// Bearer refuses, with 401 and a WWW-Authenticate challenge, a request
// whose Authorization header is not "Bearer <token>".
func Bearer(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || !TokenMatches(strings.TrimSpace(got), token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="morph"`)
			http.Error(w, "Unauthorized: send the bearer token (Authorization: Bearer ...)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Origins is the Origin check: a request whose Origin header is neither in
// Allowed nor (when Loopback) a loopback origin is refused with 403. A
// request without an Origin header (not from a browser) is not concerned.
type Origins struct {
	// Allowed are the origins (scheme://host[:port], exactly) allowed
	// besides the loopback ones.
	Allowed []string
	// Loopback allows the loopback origins (http or https on localhost,
	// 127.0.0.1 or [::1], any port): set it when the listener is loopback.
	Loopback bool
	// Flag names the option that allows an origin, for the refusal's text
	// ("morph mcp serve --allow-origin").
	Flag string
}

// Allows reports whether a request with this Origin header may proceed.
func (o Origins) Allows(origin string) bool {
	return origin == "" || slices.Contains(o.Allowed, origin) || (o.Loopback && loopbackOrigin(origin))
}

// Check wraps next with the check.
func (o Origins) Check(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !o.Allows(r.Header.Get("Origin")) {
			http.Error(w, fmt.Sprintf("Forbidden: origin not allowed (%s allows one)", o.Flag), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackOrigin is whether origin is http(s) on a loopback host.
func loopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Path != "" {
		return false
	}
	return loopbackName(u.Hostname())
}

// LoopbackHost wraps next, for a loopback listener, with a refusal (403)
// of a request whose Host header names another host: a page of a domain
// an attacker points at 127.0.0.1 (DNS rebinding) reaches the listener
// with its own name, and a browser sends no Origin on a same-origin GET.
func LoopbackHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !loopbackName(strings.Trim(host, "[]")) {
			http.Error(w, "Forbidden: a loopback server answers only to a loopback Host (localhost, 127.0.0.1, [::1])", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackName is whether host (no port) is localhost or a loopback IP.
func loopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

package oci

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/morphhost/morph/internal/safetext"
)

// PlainHTTPPattern is one [oci] plain_http entry: a registry spoken to over
// http:// rather than HTTPS. HOST is compared exactly (case aside), never as
// a glob, so that no pattern can send every registry (and its credentials)
// over plain HTTP; only the port may be "*".
type PlainHTTPPattern struct {
	host string // lower case; an IPv6 address without its brackets
	port string // "" (the registry is written without a port), "*" or a number
}

// ParsePlainHTTP reads a plain_http entry: "HOST" (the registry written
// without a port), "HOST:PORT", or "HOST:*" (any port). HOST is a name or
// an IP address ("[::1]" for IPv6), with no wildcard.
func ParsePlainHTTP(s string) (PlainHTTPPattern, error) {
	bad := func(why string) (PlainHTTPPattern, error) {
		return PlainHTTPPattern{}, fmt.Errorf("plain_http entry %s: %s; write HOST, HOST:PORT or HOST:* (e.g. \"127.0.0.1:*\")", safetext.Quote(s, 200), why)
	}
	if strings.ContainsAny(s, "/ \t") {
		return bad("a scheme, a path or a space (want the registry host, without scheme or path)")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if strings.Contains(s, ":") && !(strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]")) {
			return bad("not HOST:PORT (an IPv6 address is written in brackets, [::1])")
		}
		host, port = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), ""
	}
	switch {
	case host == "":
		return bad("no host")
	case net.ParseIP(host) == nil && !validHostname(host):
		return bad("the host is not a name or an IP address (no wildcards: the host is matched exactly)")
	case port == "" && err == nil:
		return bad("an empty port")
	case port != "" && port != "*":
		if n, perr := strconv.Atoi(port); perr != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return bad(fmt.Sprintf("port %q is not a number from 1 to 65535 or *", port))
		}
	}
	return PlainHTTPPattern{host: strings.ToLower(host), port: port}, nil
}

// validHostname: letters, digits, '-' and '.', in non-empty labels.
func validHostname(h string) bool {
	for _, label := range strings.Split(h, ".") {
		if label == "" || strings.Trim(strings.ToLower(label), "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return false
		}
	}
	return true
}

// Match reports whether registry (a Ref's Registry, host[:port]) is the
// pattern's.
func (p PlainHTTPPattern) Match(registry string) bool {
	host, port, err := net.SplitHostPort(registry)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(registry, "["), "]"), ""
	}
	if !strings.EqualFold(host, p.host) {
		return false
	}
	return p.port == port || p.port == "*" && port != ""
}

// String gives the pattern as ParsePlainHTTP reads it.
func (p PlainHTTPPattern) String() string {
	h := p.host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if p.port == "" {
		return h
	}
	return h + ":" + p.port
}

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/host/internal/sandbox/sandboxtest"
)

func testGrant(t *testing.T, g Grants) *httpGrant {
	t.Helper()
	var hosts []hostPattern
	for _, h := range g.Hosts {
		p, err := parseHostPattern(h)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, p)
	}
	h := newHTTPGrant(hosts, g.withDefaults(), func() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) })
	t.Cleanup(h.close)
	return h
}

// The HTTP capability itself, as every loader's http_request uses it.
func TestHTTPGrant(t *testing.T) {
	const maxBytes = 1000
	f := sandboxtest.NewHTTPFixture(t, maxBytes)
	h := testGrant(t, Grants{Hosts: []string{"localhost"}, HTTPMaxResponseBytes: maxBytes, HTTPMaxRedirects: 2, HTTPTimeout: 300 * time.Millisecond})
	ctx := context.Background()

	resp, err := h.do(ctx, abi.HTTPRequest{Method: "POST", URL: f.AllowedURL + "/echo", Headers: map[string]string{"X-Token": "t1"}, Body: "hello"})
	if err != nil {
		t.Fatalf("allowed host: %v", err)
	}
	if resp.Status != http.StatusCreated {
		t.Errorf("allowed host: Status = %d, want %d", resp.Status, http.StatusCreated)
	}
	if resp.Body != "POST t1 hello" {
		t.Errorf("allowed host: Body = %q, want %q", resp.Body, "POST t1 hello")
	}
	for name, want := range map[string]string{"X-Echo-Method": "POST", "X-Multi": "a, b"} {
		if got := resp.Headers[name]; got != want {
			t.Errorf("allowed host: header %s = %q, want %q", name, got, want)
		}
	}
	if resp, err = h.do(ctx, abi.HTTPRequest{URL: f.AllowedURL + "/hop"}); err != nil || resp.Body != "GET  " {
		t.Fatalf("a redirect within the allowed host: %+v, %v", resp, err)
	}
	if resp, err = h.do(ctx, abi.HTTPRequest{URL: f.AllowedURL + "/status"}); err != nil || resp.Status != http.StatusTeapot {
		t.Fatalf("an error status is a response: %+v, %v", resp, err)
	}
	// The limit counts the headers (each one's name and value) with the body.
	if resp, err = h.do(ctx, abi.HTTPRequest{URL: f.AllowedURL + "/exact"}); err != nil {
		t.Fatalf("headers and a body of exactly the limit: %v", err)
	} else if n := responseBytes(resp); n != maxBytes {
		t.Fatalf("/exact: headers %v and a body of %d bytes, %d bytes together; want %d", resp.Headers, len(resp.Body), n, maxBytes)
	}

	cases := []struct {
		name string
		req  abi.HTTPRequest
		kind error
		want string
	}{
		{"host not allowed", abi.HTTPRequest{URL: f.OtherURL()}, ErrHostNotAllowed, "127.0.0.1"},
		{"redirect to a host not allowed", abi.HTTPRequest{URL: f.AllowedURL + "/away"}, ErrHostNotAllowed, "redirect from"},
		{"too many redirects", abi.HTTPRequest{URL: f.AllowedURL + "/loop"}, ErrTooManyRedirects, "more than 2"},
		{"response over the limit", abi.HTTPRequest{URL: f.AllowedURL + "/big"}, ErrResponseTooLarge, "1000-byte limit"},
		{"declared response over the limit", abi.HTTPRequest{URL: f.AllowedURL + "/bigdeclared"}, ErrResponseTooLarge, "and a body of 1001 bytes, over the 1000-byte limit"},
		{"headers over the limit", abi.HTTPRequest{URL: f.AllowedURL + "/bigheader"}, ErrResponseTooLarge, "over the 1000-byte limit of headers and body together (http_max_response_kb)"},
		{"timeout", abi.HTTPRequest{URL: f.AllowedURL + "/slow"}, context.DeadlineExceeded, "timed out"},
		{"not http", abi.HTTPRequest{URL: "file:///etc/passwd"}, nil, "only http and https"},
		{"bad method", abi.HTTPRequest{Method: "GET /x", URL: f.AllowedURL + "/echo"}, nil, "invalid method"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			resp, err := h.do(ctx, c.req)
			if err == nil {
				t.Fatalf("do = %+v, want an error saying %q", resp, c.want)
			}
			if c.kind != nil && !errors.Is(err, c.kind) {
				t.Errorf("do: %v, want %v", err, c.kind)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("do: error %q does not say %q", err, c.want)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
	if n := f.OtherHits.Load(); n != 0 {
		t.Fatalf("the host not allowed received %d requests", n)
	}
	if n := f.LoopHits.Load(); n != 3 {
		t.Fatalf("the redirect loop was hit %d times, want 3 (the request and 2 redirects)", n)
	}

	// The dialer refuses a host not allowed even when the checks before it
	// are bypassed.
	req, _ := http.NewRequest("GET", f.OtherURL(), nil)
	if _, err := h.client.Do(req); !errors.Is(err, ErrHostNotAllowed) || f.OtherHits.Load() != 0 {
		t.Fatalf("the dialer let a request to another host through: %v", err)
	}

	// The defaults of the limits, and no redirects at all.
	def := testGrant(t, Grants{Hosts: []string{"localhost"}})
	if def.timeout != DefaultHTTPTimeout || def.maxBytes != DefaultHTTPMaxResponseBytes {
		t.Fatalf("defaults: timeout %v, max bytes %d", def.timeout, def.maxBytes)
	}
	f.LoopHits.Store(0)
	if _, err := def.do(ctx, abi.HTTPRequest{URL: f.AllowedURL + "/loop"}); !errors.Is(err, ErrTooManyRedirects) || f.LoopHits.Load() != 1+DefaultHTTPMaxRedirects {
		t.Fatalf("default redirect limit: %v after %d hits", err, f.LoopHits.Load())
	}
	none := testGrant(t, Grants{Hosts: []string{"localhost"}, HTTPMaxRedirects: -1})
	if _, err := none.do(ctx, abi.HTTPRequest{URL: f.AllowedURL + "/hop"}); !errors.Is(err, ErrTooManyRedirects) || !strings.Contains(err.Error(), "more than 0") {
		t.Fatalf("no redirects: %v", err)
	}

	// A port in the pattern allows that port only; no hosts: nothing.
	u, _ := url.Parse(f.Allowed.URL)
	byPort := testGrant(t, Grants{Hosts: []string{"localhost:1"}})
	if _, err := byPort.do(ctx, abi.HTTPRequest{URL: "http://localhost:" + u.Port() + "/echo"}); !errors.Is(err, ErrHostNotAllowed) {
		t.Fatalf("another port: %v", err)
	}
	if _, err := testGrant(t, Grants{}).do(ctx, abi.HTTPRequest{URL: f.AllowedURL + "/echo"}); !errors.Is(err, ErrNotGranted) {
		t.Fatalf("no hosts granted: %v", err)
	}
}

func TestAllowedHostPatterns(t *testing.T) {
	for _, ok := range []string{"api.example.com", "API.Example.com.", "*.example.com", "localhost", "localhost:8080", "127.0.0.1", "[::1]:8443", "::1", "my_svc.internal"} {
		if err := CheckAllowedHost(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "*", "*.com", "a.*.com", "https://api.example.com", "api.example.com/v1", "api.example.com:0", "api.example.com:http", "exa mple.com", "user@example.com"} {
		if err := CheckAllowedHost(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	matches := []struct {
		pattern, host, port string
		want                bool
	}{
		{"*.example.com", "a.example.com", "443", true},
		{"*.example.com", "a.b.example.com", "80", true},
		{"*.example.com", "example.com", "443", false},
		{"*.example.com", "badexample.com", "443", false},
		{"api.example.com", "API.EXAMPLE.COM.", "443", true},
		{"api.example.com", "api.example.com.evil.com", "443", false},
		{"api.example.com:8443", "api.example.com", "443", false},
		{"api.example.com:8443", "api.example.com", "8443", true},
		{"::1", "0:0:0:0:0:0:0:1", "80", true},
	}
	for _, m := range matches {
		p, err := parseHostPattern(m.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.match(m.host, m.port); got != m.want {
			t.Errorf("%q matches %s:%s = %v, want %v", m.pattern, m.host, m.port, got, m.want)
		}
	}
}

// responseBytes is resp's size as the response limit counts it: its
// headers' names and values and its body.
func responseBytes(resp abi.HTTPResponse) int {
	n := len(resp.Body)
	for k, v := range resp.Headers {
		n += len(k) + len(v)
	}
	return n
}

// Headers far past the limit are refused as net/http reads them, not once
// read whole (they once could reach net/http's 10 MiB default), with
// ErrResponseTooLarge naming the limit.
func TestHTTPHeadersPastTheLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("h", 1<<20))
		io.WriteString(w, "small")
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	h := testGrant(t, Grants{Hosts: []string{"localhost"}, HTTPMaxResponseBytes: 1000})
	_, err := h.do(context.Background(), abi.HTTPRequest{URL: "http://localhost:" + u.Port() + "/"})
	if !errors.Is(err, ErrResponseTooLarge) || !strings.Contains(err.Error(), "headers over the 1000-byte limit (http_max_response_kb)") ||
		!strings.Contains(err.Error(), fmt.Sprintf("exceeded %d bytes", 1000+headerSlack)) {
		t.Fatalf("a 1 MiB header with a 1000-byte limit: %v; want ErrResponseTooLarge from net/http's own limit", err)
	}
}

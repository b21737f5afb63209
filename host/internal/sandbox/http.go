package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/morphhost/morph/abi"
)

// Failures of a guest's HTTP request, told apart with errors.Is on the
// error of httpGrant.do. host exports each under the same name, where they
// are documented for its callers.
var (
	// ErrNotGranted: the plugin has no allowed hosts (it is also host's
	// kind of a load that fails for capabilities not granted).
	ErrNotGranted = errors.New("capability not granted")
	// ErrHostNotAllowed: the URL's host, or a redirect hop's, is not allowed.
	ErrHostNotAllowed = errors.New("host not allowed")
	// ErrTooManyRedirects: more redirects than the grant's limit.
	ErrTooManyRedirects = errors.New("too many redirects")
	// ErrResponseTooLarge: the response's headers and body together are
	// over the grant's size limit.
	ErrResponseTooLarge = errors.New("HTTP response too large")
)

// httpGrant is one plugin's HTTP capability: the hosts it may reach and the
// client that reaches only them. Every loader serves its guests' HTTP
// requests with do, so the checks live in one place.
type httpGrant struct {
	hosts    []hostPattern
	client   *http.Client
	timeout  time.Duration
	maxBytes int64
	log      func() *slog.Logger
}

// newHTTPGrant builds the plugin's client (g with defaults). Three checks
// keep it on the allowed hosts: do checks the URL, CheckRedirect checks
// every hop before it is sent, and the dialer refuses a connection to any
// other host (defence in depth: no request leaves by a path the other two
// missed). It never uses the host's proxy settings, which would make every
// connection one to the proxy.
func newHTTPGrant(hosts []hostPattern, g Grants, log func() *slog.Logger) *httpGrant {
	h := &httpGrant{hosts: hosts, timeout: g.HTTPTimeout, maxBytes: int64(g.HTTPMaxResponseBytes), log: log}
	dialer := &net.Dialer{Timeout: g.HTTPTimeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if !h.allowed(host, port) {
				return nil, fmt.Errorf("%w: connection to %s refused", ErrHostNotAllowed, addr)
			}
			return dialer.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   g.HTTPTimeout,
		ExpectContinueTimeout: time.Second,
		// send counts the headers in the limit; net/http stops reading
		// them a little past it (their lines' separators and the status
		// line are not counted) rather than at its 10 MiB default.
		MaxResponseHeaderBytes: int64(g.HTTPMaxResponseBytes) + headerSlack,
	}
	maxRedirects := g.HTTPMaxRedirects
	h.client = &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("%w: more than %d", ErrTooManyRedirects, maxRedirects)
			}
			if err := h.check(req.URL); err != nil {
				return fmt.Errorf("redirect from %s: %w", via[len(via)-1].URL.Redacted(), err)
			}
			return nil
		},
	}
	return h
}

// granted reports whether the plugin may make any request at all.
func (h *httpGrant) granted() bool { return len(h.hosts) > 0 }

// allowed reports whether host and port are on the plugin's list.
func (h *httpGrant) allowed(host, port string) bool {
	for _, p := range h.hosts {
		if p.match(host, port) {
			return true
		}
	}
	return false
}

// check refuses a URL that is not http or https to an allowed host.
func (h *httpGrant) check(u *url.URL) error {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return fmt.Errorf("%q: only http and https URLs are allowed", u.Redacted())
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	if u.Hostname() == "" || !h.allowed(u.Hostname(), port) {
		return fmt.Errorf("%w: %s is not in the plugin's allowed_hosts", ErrHostNotAllowed, u.Host)
	}
	return nil
}

// do sends req for a guest and returns the final response, after any
// redirects. It is the whole HTTP capability: every loader's http_request
// host function is a call of do, decoding the guest's request and encoding
// the answer or the error's message for it. ctx is the plugin call's (its
// deadline bounds the request too).
//
// The error wraps ErrNotGranted (the plugin has no allowed hosts),
// ErrHostNotAllowed (the URL's host or a redirect's; nothing was sent to
// it), ErrTooManyRedirects, ErrResponseTooLarge, or context.DeadlineExceeded
// (the grant's HTTPTimeout or the call's deadline passed); otherwise it is a
// bad request or a transport failure. Its message is meant for the guest:
// it names the host, never the grants.
func (h *httpGrant) do(ctx context.Context, req abi.HTTPRequest) (abi.HTTPResponse, error) {
	if req.Method == "" {
		req.Method = http.MethodGet
	}
	start := time.Now()
	resp, err := h.send(ctx, req)
	log := h.log()
	switch {
	case errors.Is(err, ErrNotGranted) || errors.Is(err, ErrHostNotAllowed):
		log.WarnContext(ctx, "guest HTTP request denied", "method", req.Method, "url", redact(req.URL), "error", err)
	case err != nil:
		log.InfoContext(ctx, "guest HTTP request failed", "method", req.Method, "url", redact(req.URL), "duration", time.Since(start), "error", err)
	default:
		log.DebugContext(ctx, "guest HTTP request", "method", req.Method, "url", redact(req.URL), "status", resp.Status,
			"bytes", len(resp.Body), "duration", time.Since(start))
	}
	return resp, err
}

func (h *httpGrant) send(ctx context.Context, req abi.HTTPRequest) (abi.HTTPResponse, error) {
	if !h.granted() {
		return abi.HTTPResponse{}, fmt.Errorf("%w: http: the plugin may reach no host (allowed_hosts is empty)", ErrNotGranted)
	}
	u, err := url.Parse(req.URL)
	if err != nil {
		return abi.HTTPResponse{}, fmt.Errorf("http: bad URL: %w", err)
	}
	if err := h.check(u); err != nil {
		return abi.HTTPResponse{}, err
	}
	method := req.Method
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	var body io.Reader
	if req.Body != "" {
		body = strings.NewReader(req.Body)
	}
	hr, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return abi.HTTPResponse{}, fmt.Errorf("http: %w", err)
	}
	for k, v := range req.Headers {
		hr.Header.Set(k, v)
	}
	resp, err := h.client.Do(hr)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return abi.HTTPResponse{}, fmt.Errorf("http: %s %s: timed out (http_timeout %s, or the call's deadline): %w", method, u.Redacted(), h.timeout, err)
		}
		if headersTooLarge(err) {
			return abi.HTTPResponse{}, fmt.Errorf("%w: %s %s: headers over the %d-byte limit (http_max_response_kb): %w", ErrResponseTooLarge, method, u.Redacted(), h.maxBytes, err)
		}
		return abi.HTTPResponse{}, err // a *url.Error naming method and URL, wrapping the cause
	}
	defer resp.Body.Close()
	out := abi.HTTPResponse{Status: resp.StatusCode}
	var hdr int64 // the headers' bytes as the guest gets them
	if len(resp.Header) > 0 {
		out.Headers = make(map[string]string, len(resp.Header))
		for k, vs := range resp.Header {
			out.Headers[k] = strings.Join(vs, ", ")
			hdr += int64(len(k) + len(out.Headers[k]))
		}
	}
	tooLarge := func(body string) error {
		return fmt.Errorf("%w: %s %s: headers of %d bytes%s, over the %d-byte limit of headers and body together (http_max_response_kb)",
			ErrResponseTooLarge, method, resp.Request.URL.Redacted(), hdr, body, h.maxBytes)
	}
	switch {
	case hdr > h.maxBytes:
		return abi.HTTPResponse{}, tooLarge("")
	case resp.ContentLength > h.maxBytes-hdr:
		return abi.HTTPResponse{}, tooLarge(fmt.Sprintf(" and a body of %d bytes", resp.ContentLength))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, h.maxBytes-hdr+1))
	if err != nil {
		return abi.HTTPResponse{}, fmt.Errorf("http: %s %s: reading the body: %w", method, resp.Request.URL.Redacted(), err)
	}
	if int64(len(b)) > h.maxBytes-hdr {
		return abi.HTTPResponse{}, tooLarge(fmt.Sprintf(" and a body of more than %d bytes", h.maxBytes-hdr))
	}
	out.Body = string(b)
	return out, nil
}

// headerSlack is how far past the response limit net/http reads headers
// (Transport.MaxResponseHeaderBytes): their raw lines hold separators and
// a status line that send does not count.
const headerSlack = 16 << 10

// headersTooLarge reports whether err is net/http's refusal of response
// headers past Transport.MaxResponseHeaderBytes, which it gives no error
// value of its own: HTTP/1's, or HTTP/2's (its header list past the limit
// it advertised).
func headersTooLarge(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "server response headers exceeded") || strings.Contains(msg, "http2: response header list larger than advertised limit")
}

// close drops the client's idle connections.
func (h *httpGrant) close() { h.client.CloseIdleConnections() }

// redact is a URL for the log, without a password.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

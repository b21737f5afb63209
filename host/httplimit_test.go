package host

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
)

// bigHeaderServer answers every request with a header of n bytes and a
// short body.
func bigHeaderServer(t *testing.T, n int) (url, host string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("h", n))
		w.Write([]byte("small"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, strings.TrimPrefix(srv.URL, "http://")
}

// Response headers count in http_max_response_kb, and the native ABI's
// http_request tells its guest why an answer did not reach it: issue 28's
// 6 MiB header reached a guest of memory_mb 4 as an error with an empty
// message (headers were bounded only by net/http's 10 MiB, and the guest
// could not allocate the answer).
func TestHTTPResponseHeadersLimit(t *testing.T) {
	url, host := bigHeaderServer(t, 6<<20)
	req := []byte(`{"url":"` + url + `/"}`)
	l, logs := newLoggedLoader(t)

	// The default limit (1 MiB) refuses the headers, naming it.
	p := load(t, l, Config{Name: "http", Path: fixture(t, "cap_http"), Grants: Grants{Hosts: []string{host}}})
	_, err := p.Call(context.Background(), abi.ExportBuildPrompt, req)
	checkErr(t, "a 6 MiB header, the default limit", err, ErrGuest, "HTTP response too large", "over the 1048576-byte limit", "http_max_response_kb")

	// Within a raised limit, an answer the guest cannot allocate (memory_mb
	// 4) is a short message saying so, and a warning in the log.
	p = load(t, l, Config{Name: "small", Path: fixture(t, "cap_http"), Limits: Limits{MemoryMiB: 4},
		Grants: Grants{Hosts: []string{host}, HTTPMaxResponseBytes: 8 << 20}})
	_, err = p.Call(context.Background(), abi.ExportBuildPrompt, req)
	checkErr(t, "a 6 MiB header, memory_mb 4", err, ErrGuest, "could not be allocated in the guest's memory", "raise memory_mb")
	if !strings.Contains(logs.String(), "the guest could not allocate the host's answer") {
		t.Errorf("the log has no warning of the answer the guest could not allocate:\n%s", logs)
	}
}

// Extism's http_request refuses headers past the limit with
// ErrResponseTooLarge, naming it, before the guest sees anything.
func TestExtismHTTPResponseHeadersLimit(t *testing.T) {
	url, host := bigHeaderServer(t, 2<<20)
	p := extismProbe(t, "http", Config{Values: map[string]string{"url": url}, Grants: Grants{Hosts: []string{host}}})
	_, err := invoke[abi.PromptOutput](context.Background(), p, abi.ExportBuildPrompt, abi.PromptInput{})
	checkErr(t, "a 2 MiB header, the default limit", err, ErrTrap, "http_request", "over the 1048576-byte limit", "http_max_response_kb")
	if !errors.Is(err, ErrResponseTooLarge) {
		t.Errorf("error %v, want ErrResponseTooLarge", err)
	}
}

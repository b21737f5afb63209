// Package sandboxtest serves the HTTP fixture of the grant tests of host
// and of host/internal/sandbox: an allowed server with the answers the
// HTTP capability must handle (redirects, loops, large and slow bodies),
// and another server no grant allows, which counts what reaches it.
package sandboxtest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// HTTPFixture is an allowed server and another one the plugin may not
// reach; the other counts what it receives.
type HTTPFixture struct {
	Allowed, Other *httptest.Server
	OtherHits      atomic.Int32
	LoopHits       atomic.Int32
	AllowedURL     string // the allowed server as http://localhost:port
}

// NewHTTPFixture starts the two servers, closed when t ends; the allowed
// one's /big and /bigdeclared answer bodies of maxBytes+1 bytes (the
// second declared), /bigheader a header X-Big of maxBytes bytes, and /exact
// headers (Content-Length and Content-Type) and a body of maxBytes bytes
// together, as the limit counts them (each header's name and value).
func NewHTTPFixture(t testing.TB, maxBytes int) *HTTPFixture {
	t.Helper()
	f := &HTTPFixture{}
	f.Other = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.OtherHits.Add(1)
		io.WriteString(w, "you should not see this")
	}))
	t.Cleanup(f.Other.Close)
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo-Method", r.Method)
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.Header.Get("X-Token"), body)
	})
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, f.Other.URL+"/stolen", http.StatusFound)
	})
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/echo", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		f.LoopHits.Add(1)
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush() // no Content-Length: the cap is met while reading
		w.Write([]byte(strings.Repeat("x", maxBytes+1)))
	})
	mux.HandleFunc("/bigdeclared", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(maxBytes+1))
		w.Write([]byte(strings.Repeat("x", maxBytes+1)))
	})
	mux.HandleFunc("/exact", func(w http.ResponseWriter, r *http.Request) {
		const typ = "text/plain"
		rest := maxBytes - len("Content-Type"+typ+"Content-Length") // for the body and its length's digits
		n := rest
		for n+len(fmt.Sprint(n)) > rest {
			n--
		}
		w.Header()["Date"] = nil // not sent: its length is the server's
		w.Header().Set("Content-Type", typ)
		w.Header().Set("Content-Length", fmt.Sprint(n))
		w.Write([]byte(strings.Repeat("x", n)))
	})
	mux.HandleFunc("/bigheader", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("h", maxBytes))
		io.WriteString(w, "small")
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusTeapot)
	})
	f.Allowed = httptest.NewServer(mux)
	t.Cleanup(f.Allowed.Close)
	u, _ := url.Parse(f.Allowed.URL)
	f.AllowedURL = "http://localhost:" + u.Port()
	return f
}

// OtherURL is the other server, which no grant of these tests allows
// (127.0.0.1, while the allowed one is reached as localhost).
func (f *HTTPFixture) OtherURL() string { return f.Other.URL + "/direct" }

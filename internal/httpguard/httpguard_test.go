package httpguard

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7140": true, "[::1]:0": true, "localhost:80": true, "LOCALHOST:7140": true,
		":7140": false, "0.0.0.0:7140": false, "example.com:80": false, "10.0.0.1:1": false,
	} {
		got, err := LoopbackAddr(addr)
		if err != nil || got != want {
			t.Errorf("LoopbackAddr(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
	if _, err := LoopbackAddr("no-port"); err == nil {
		t.Error("an address without a port was accepted")
	}
}

func TestBearer(t *testing.T) {
	h := Bearer("s3cret", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for auth, want := range map[string]int{
		"": 401, "Bearer": 401, "Bearer wrong": 401, "Basic s3cret": 401, "Bearer s3cre": 401,
		"Bearer s3cret": 204, "bearer s3cret": 204,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Authorization %q: %d, want %d", auth, w.Code, want)
		}
		if w.Code == 401 && w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: 401 without a challenge", auth)
		}
	}
	if TokenMatches("", "") {
		t.Error("an empty token matched an empty expected token")
	}
}

func TestOrigins(t *testing.T) {
	o := Origins{Allowed: []string{"https://ui.example"}, Loopback: true, Flag: "--allow-origin"}
	for origin, want := range map[string]bool{
		"": true, "https://ui.example": true, "http://127.0.0.1:3000": true, "http://localhost": true,
		"https://evil.example": false, "http://127.0.0.1.evil.example": false, "file://": false, "http://localhost/x": false,
	} {
		if got := o.Allows(origin); got != want {
			t.Errorf("Allows(%q) = %v, want %v", origin, got, want)
		}
	}
	if (Origins{}).Allows("http://localhost") {
		t.Error("a loopback origin was allowed on a listener that is not loopback")
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Origin", "https://evil.example")
	w := httptest.NewRecorder()
	o.Check(http.NotFoundHandler()).ServeHTTP(w, r)
	if w.Code != http.StatusForbidden {
		t.Errorf("cross-origin request: %d, want 403", w.Code)
	}
}

func TestLoopbackHost(t *testing.T) {
	h := LoopbackHost(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for host, want := range map[string]int{
		"127.0.0.1:7140": 204, "localhost:7140": 204, "[::1]:7140": 204, "127.0.0.1": 204, "LOCALHOST": 204,
		"evil.example:7140": 403, "evil.example": 403, "10.0.0.1:7140": 403, "": 403,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Host %q: %d, want %d", host, w.Code, want)
		}
	}
}

package config_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/morphhost/morph/config"
)

// syncBuffer is a prompt the servers' start writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// With Config.AuthPrompt set (morph run on a terminal), an entry with
// oauth and no cached tokens prints its authorization URL there and waits
// for the user within startup_timeout, rather than failing at once.
func TestOpenAuthPrompt(t *testing.T) {
	t.Setenv("BROWSER", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base := srv.URL
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+base+`/.well-known/oauth-protected-resource/mcp"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"resource": base + "/mcp", "authorization_servers": []string{base}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": base, "authorization_endpoint": base + "/authorize",
			"token_endpoint": base + "/token", "registration_endpoint": base + "/register",
			"code_challenge_methods_supported": []string{"S256"}, "response_types_supported": []string{"code"}})
	})
	mux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		writeJSON(w, map[string]any{"client_id": "registered", "redirect_uris": []string{}})
	})
	dir := write(t, map[string]string{"replies.json": replies, "morph.toml": scriptedLLM + `
[[mcp_servers]]
name = "guarded"
url = "` + base + `/mcp"
oauth = {}
startup_timeout = "3s"
`})
	t.Setenv("MODEL_KEY", "k")
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	prompt := &syncBuffer{}
	cfg.AuthPrompt = prompt
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt, err := cfg.Open(ctx, nil)
	if err == nil {
		rt.Close(ctx)
		t.Fatal("Open: no error, want the start to time out waiting for the user")
	}
	if !strings.Contains(err.Error(), "startup_timeout") || strings.Contains(err.Error(), "morph mcp login") {
		t.Errorf("Open: %v; want the wait for the user bounded by startup_timeout, not an unattended refusal", err)
	}
	if out := prompt.String(); !strings.Contains(out, "MCP server guarded needs an authorization") || !strings.Contains(out, base+"/authorize?") {
		t.Errorf("the prompt got %q, want the authorization URL", out)
	}
}

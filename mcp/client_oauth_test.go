package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/mcp"
)

// oauthServer is an MCP server on 127.0.0.1 that wants OAuth, and its
// authorization server (the same origin, as many are): protected resource
// and authorization server metadata, dynamic registration, an authorize
// endpoint that approves at once, a token endpoint (codes and refreshes).
// Its hooks make it hostile.
type oauthServer struct {
	url string // the MCP endpoint

	mu     sync.Mutex
	issued map[string]bool // access tokens

	authorizations, refreshes, unauthorized atomic.Int64
	refuseRefresh                           atomic.Bool
	// metadata, when set, serves the authorization server's metadata.
	metadata http.HandlerFunc
}

func newOAuthServer(t *testing.T, hostile func(o *oauthServer, base string)) *oauthServer {
	t.Helper()
	o := &oauthServer{issued: map[string]bool{}}
	mcpServer := sdk.NewServer(&sdk.Implementation{Name: "guarded", Version: "1"}, nil)
	sdk.AddTool(mcpServer, &sdk.Tool{Name: "echo"}, func(_ context.Context, _ *sdk.CallToolRequest, in struct {
		Message string `json:"message"`
	}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo: " + in.Message}}}, nil, nil
	})
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return mcpServer }, nil)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	base := srv.URL
	o.url = base + "/mcp"
	if hostile != nil {
		hostile(o, base)
	}
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		o.mu.Lock()
		ok := o.issued[token]
		o.mu.Unlock()
		if !ok {
			o.unauthorized.Add(1)
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+base+`/.well-known/oauth-protected-resource/mcp"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	})
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"resource": o.url, "authorization_servers": []string{base}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		if o.metadata != nil {
			o.metadata(w, r)
			return
		}
		writeJSON(w, 200, map[string]any{"issuer": base, "authorization_endpoint": base + "/authorize",
			"token_endpoint": base + "/token", "registration_endpoint": base + "/register",
			"code_challenge_methods_supported": []string{"S256"}, "response_types_supported": []string{"code"}})
	})
	mux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 201, map[string]any{"client_id": "registered", "redirect_uris": []string{}})
	})
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		o.authorizations.Add(1)
		q := r.URL.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
			http.Error(w, "no PKCE", http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, q.Get("redirect_uri")+"?code=the-code&state="+q.Get("state"), http.StatusFound)
	})
	var n atomic.Int64
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			if r.PostForm.Get("code") != "the-code" || r.PostForm.Get("code_verifier") == "" {
				writeJSON(w, 400, map[string]any{"error": "invalid_grant"})
				return
			}
		case "refresh_token":
			o.refreshes.Add(1)
			if o.refuseRefresh.Load() || !strings.HasPrefix(r.PostForm.Get("refresh_token"), "refresh-") {
				writeJSON(w, 400, map[string]any{"error": "invalid_grant"})
				return
			}
		case "client_credentials":
			id, secret, ok := r.BasicAuth()
			if !ok {
				id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
			}
			if id != "machine" || secret != "s3cret" {
				writeJSON(w, 401, map[string]any{"error": "invalid_client"})
				return
			}
		default:
			writeJSON(w, 400, map[string]any{"error": "unsupported_grant_type"})
			return
		}
		i := n.Add(1)
		access := fmt.Sprintf("access-%d", i)
		o.mu.Lock()
		o.issued[access] = true
		o.mu.Unlock()
		writeJSON(w, 200, map[string]any{"access_token": access, "refresh_token": fmt.Sprintf("refresh-%d", i),
			"token_type": "Bearer", "expires_in": 3600})
	})
	return o
}

// asBrowser makes BROWSER this test binary acting as a user who approves
// at once (testBrowser), and the cache directory t's own.
func asBrowser(t *testing.T) {
	t.Setenv("BROWSER", os.Args[0])
	t.Setenv(testBrowserEnv, "1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
}

// tokenFiles are the files of the token cache.
func tokenFiles(t *testing.T) []string {
	t.Helper()
	dir, err := mcp.TokenDir()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	return files
}

// An entry with oauth authorizes once through BROWSER and the loopback
// redirect (PKCE, dynamic registration), caches the tokens (0600, in a
// 0700 directory) and calls the server with them; a second run uses the
// cache with nobody to ask, and the tokens are in no log.
func TestClientOAuthFlowAndCache(t *testing.T) {
	asBrowser(t)
	o := newOAuthServer(t, nil)
	cfg := mcp.ServerConfig{Name: "guarded", URL: o.url, OAuth: &mcp.OAuthConfig{}}
	eng, _, logs, err := clientEngine(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := callRemote(t, eng, "echo", map[string]any{"message": "authorized"}); err != nil || out != "echo: authorized" {
		t.Fatalf("echo: %q, %v", out, err)
	}
	if n := o.authorizations.Load(); n != 1 {
		t.Errorf("%d authorizations, want 1", n)
	}
	files := tokenFiles(t)
	if len(files) != 1 {
		t.Fatalf("token cache: %v, want one file", files)
	}
	for path, want := range map[string]os.FileMode{files[0]: 0o600, filepath.Dir(files[0]): 0o700} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v", path, fi.Mode(), err, want)
		}
	}
	if data, _ := os.ReadFile(files[0]); !strings.Contains(string(data), `"refresh-1"`) {
		t.Errorf("token file holds no refresh token: %s", data)
	}

	t.Setenv("BROWSER", "")
	eng, _, logs2, err := clientEngine(t, cfg)
	if err != nil {
		t.Fatalf("second run, from the cache: %v", err)
	}
	if out, _, err := callRemote(t, eng, "echo", map[string]any{"message": "cached"}); err != nil || out != "echo: cached" {
		t.Errorf("echo from the cache: %q, %v", out, err)
	}
	if n := o.authorizations.Load(); n != 1 {
		t.Errorf("%d authorizations, want the first only", n)
	}
	for _, l := range []string{logs.String(), logs2.String()} {
		if strings.Contains(l, "access-1") || strings.Contains(l, "refresh-1") {
			t.Errorf("a token in the log:\n%s", l)
		}
	}
}

// expireCache makes the cached access token expired, as time would.
func expireCache(t *testing.T) {
	t.Helper()
	files := tokenFiles(t)
	if len(files) != 1 {
		t.Fatalf("token cache: %v, want one file", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	f["token"].(map[string]any)["expiry"] = time.Now().Add(-time.Hour).Format(time.RFC3339)
	data, _ = json.Marshal(f)
	if err := os.WriteFile(files[0], data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// An expired cached token is refreshed (the new one cached); a refresh the
// authorization server refuses falls back to the authorization flow, or,
// with nobody to ask, to an error that says what to do.
func TestClientOAuthRefresh(t *testing.T) {
	asBrowser(t)
	o := newOAuthServer(t, nil)
	cfg := mcp.ServerConfig{Name: "guarded", URL: o.url, OAuth: &mcp.OAuthConfig{}}
	if _, _, _, err := clientEngine(t, cfg); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BROWSER", "")
	expireCache(t)
	if _, _, _, err := clientEngine(t, cfg); err != nil {
		t.Fatalf("a run with an expired token: %v", err)
	}
	if r, a := o.refreshes.Load(), o.authorizations.Load(); r != 1 || a != 1 {
		t.Errorf("%d refreshes, %d authorizations; want 1, 1", r, a)
	}
	if data, _ := os.ReadFile(tokenFiles(t)[0]); !strings.Contains(string(data), `"access-2"`) {
		t.Errorf("the refreshed token is not cached: %s", data)
	}

	o.refuseRefresh.Store(true)
	expireCache(t)
	_, _, _, err := clientEngine(t, cfg)
	if !errors.Is(err, mcp.ErrStartup) || !strings.Contains(err.Error(), "morph mcp login guarded") || !strings.Contains(err.Error(), "BROWSER") {
		t.Errorf("a refused refresh, nobody to ask: %v; want ErrStartup saying to run morph mcp login guarded or set BROWSER", err)
	}
	if len(tokenFiles(t)) != 0 {
		t.Errorf("the refused tokens are still cached")
	}

	t.Setenv("BROWSER", os.Args[0])
	if _, _, _, err := clientEngine(t, cfg); err != nil {
		t.Fatalf("a refused refresh with a browser: %v", err)
	}
	if a := o.authorizations.Load(); a != 2 {
		t.Errorf("%d authorizations, want 2 (the refused refresh authorizes again)", a)
	}
}

// With no tokens and nobody to ask (no BROWSER, no prompt), an entry with
// oauth fails at start, saying what to do, without opening the flow.
func TestClientOAuthUnattended(t *testing.T) {
	t.Setenv("BROWSER", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	o := newOAuthServer(t, nil)
	_, _, _, err := clientEngine(t, mcp.ServerConfig{Name: "guarded", URL: o.url, OAuth: &mcp.OAuthConfig{}})
	var se *mcp.ServerError
	if !errors.Is(err, mcp.ErrStartup) || !errors.Is(err, mcp.ErrAuthorization) || !errors.As(err, &se) || se.Server != "guarded" ||
		!strings.Contains(err.Error(), "morph mcp login guarded") {
		t.Errorf("err = %v; want ErrStartup naming guarded and morph mcp login", err)
	}
	if n := o.authorizations.Load(); n != 0 {
		t.Errorf("%d authorizations, want none", n)
	}
}

// The client credentials grant gets a token with the client's secret,
// with nobody to ask and nothing cached; a wrong secret is ErrAuthorization.
func TestClientOAuthClientCredentials(t *testing.T) {
	t.Setenv("BROWSER", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	o := newOAuthServer(t, nil)
	oauth := &mcp.OAuthConfig{ClientCredentials: true, ClientID: "machine", ClientSecret: "s3cret"}
	eng, _, logs, err := clientEngine(t, mcp.ServerConfig{Name: "guarded", URL: o.url, OAuth: oauth})
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := callRemote(t, eng, "echo", map[string]any{"message": "machine"}); err != nil || out != "echo: machine" {
		t.Errorf("echo: %q, %v", out, err)
	}
	if a, files := o.authorizations.Load(), tokenFiles(t); a != 0 || len(files) != 0 {
		t.Errorf("%d authorizations, token cache %v; want none", a, files)
	}
	if strings.Contains(logs.String(), "s3cret") {
		t.Errorf("the secret in the log:\n%s", logs)
	}
	oauth.ClientSecret = "wrong"
	_, _, _, err = clientEngine(t, mcp.ServerConfig{Name: "guarded", URL: o.url, OAuth: oauth})
	if !errors.Is(err, mcp.ErrAuthorization) || strings.Contains(err.Error(), "wrong") {
		t.Errorf("a wrong secret: %v; want ErrAuthorization, without the secret", err)
	}
	if _, err := mcp.Login(context.Background(), mcp.ServerConfig{Name: "guarded", URL: o.url, OAuth: oauth}, mcp.LoginOptions{}); err == nil {
		t.Errorf("login with client credentials: no error")
	}
}

// A BROWSER command that fails ends the start at once with an error
// naming it, rather than waiting startup_timeout for a redirect.
func TestClientOAuthBrowserFails(t *testing.T) {
	t.Setenv("BROWSER", "false")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	o := newOAuthServer(t, nil)
	_, _, _, err := clientEngine(t, mcp.ServerConfig{Name: "guarded", URL: o.url, OAuth: &mcp.OAuthConfig{}, StartupTimeout: 10 * time.Minute})
	if !errors.Is(err, mcp.ErrAuthorization) || !strings.Contains(err.Error(), `BROWSER ("false") failed`) {
		t.Errorf("err = %v; want ErrAuthorization naming BROWSER", err)
	}
}

// A hostile authorization server is refused with an error, not waited for
// or read whole: metadata of 100 MB, metadata that never comes (within
// startup_timeout), metadata naming another issuer, a token endpoint at a
// plain http address that is not loopback.
func TestClientOAuthHostile(t *testing.T) {
	asBrowser(t)
	var written atomic.Int64
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	for _, tc := range []struct {
		name    string
		hostile func(o *oauthServer, base string)
		want    string
	}{
		{"huge metadata", func(o *oauthServer, base string) {
			o.metadata = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"issuer":"`+base+`","x":"`)
				chunk := strings.Repeat("x", 1<<20)
				for range 100 {
					n, err := io.WriteString(w, chunk)
					written.Add(int64(n))
					if err != nil {
						return
					}
				}
			}
		}, "over 1 MiB"},
		{"metadata never comes", func(o *oauthServer, base string) {
			o.metadata = func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}
		}, "startup_timeout"},
		{"another issuer", func(o *oauthServer, base string) {
			o.metadata = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(map[string]any{"issuer": "https://auth.example.com", "authorization_endpoint": base + "/authorize",
					"token_endpoint": base + "/token", "code_challenge_methods_supported": []string{"S256"}})
			}
		}, "does not match issuer"},
		{"insecure endpoint", func(o *oauthServer, base string) {
			o.metadata = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(map[string]any{"issuer": base, "authorization_endpoint": base + "/authorize",
					"token_endpoint": "http://auth.example.com/token", "registration_endpoint": base + "/register",
					"code_challenge_methods_supported": []string{"S256"}})
			}
		}, "token_endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOAuthServer(t, tc.hostile)
			cfg := mcp.ServerConfig{Name: "guarded", URL: o.url, OAuth: &mcp.OAuthConfig{}, StartupTimeout: time.Minute}
			if tc.want == "startup_timeout" { // the bound under test: short, the others generous
				cfg.StartupTimeout = 3 * time.Second
			}
			_, _, _, err := clientEngine(t, cfg)
			if !errors.Is(err, mcp.ErrStartup) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v; want ErrStartup mentioning %q", err, tc.want)
			}
			if tc.want != "startup_timeout" && !errors.Is(err, mcp.ErrAuthorization) {
				t.Errorf("err = %v; want ErrAuthorization", err)
			}
			if n := o.authorizations.Load(); n != 0 {
				t.Errorf("%d authorizations, want none", n)
			}
		})
	}
	// What the client read is bounded (the SDK's 1 MiB), whatever the
	// socket buffers held.
	if n := written.Load(); n >= 64<<20 {
		t.Errorf("the client took %d bytes of the huge metadata", n)
	}
}

// Login with no BROWSER prints the authorization URL on its prompt (for
// the user to open), waits for the redirect, and caches the tokens; it
// replaces tokens cached before.
func TestLogin(t *testing.T) {
	t.Setenv("BROWSER", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	o := newOAuthServer(t, nil)
	cfg := mcp.ServerConfig{Name: "guarded", URL: o.url, OAuth: &mcp.OAuthConfig{}}
	for round := 1; round <= 2; round++ {
		pr, pw := io.Pipe()
		browsed := make(chan error, 1)
		go func() { // the user: reads the URL, opens it
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				if u, ok := strings.CutPrefix(sc.Text(), "  "); ok {
					browsed <- testBrowser(u)
					io.Copy(io.Discard, pr)
					return
				}
			}
			browsed <- errors.New("no URL printed")
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		tools, err := mcp.Login(ctx, cfg, mcp.LoginOptions{Prompt: pw})
		cancel()
		pw.Close()
		if err != nil || tools != 1 {
			t.Fatalf("login %d: %d tools, %v", round, tools, err)
		}
		if err := <-browsed; err != nil {
			t.Fatalf("login %d: the browser: %v", round, err)
		}
		if n := o.authorizations.Load(); n != int64(round) {
			t.Errorf("login %d: %d authorizations", round, n)
		}
		if files := tokenFiles(t); len(files) != 1 {
			t.Errorf("login %d: token cache %v, want one file", round, files)
		}
	}
	// A user who never opens the URL: the login's bound, named.
	_, err := mcp.Login(context.Background(), cfg, mcp.LoginOptions{Prompt: io.Discard, Timeout: 2 * time.Second})
	if !errors.Is(err, mcp.ErrAuthorization) || !strings.Contains(err.Error(), "the login's 2s") {
		t.Errorf("a login nobody finishes: %v; want ErrAuthorization naming its bound", err)
	}
	if _, err := mcp.Login(context.Background(), mcp.ServerConfig{Name: "plain", URL: o.url}, mcp.LoginOptions{}); err == nil {
		t.Errorf("login to an entry without oauth: no error")
	}
}

// rogueCallback calls the redirect URI of the authorization at authURL
// with an error and a forged state, as a web page open in the user's
// browser could: morph's listener must answer 404.
func rogueCallback(ctx context.Context, authURL string) error {
	u, err := url.Parse(authURL)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.Query().Get("redirect_uri")+"?error=access_denied&state=forged", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		return fmt.Errorf("a callback with a forged state: %s, want 404", resp.Status)
	}
	return nil
}

// The loopback listener takes only the redirect of its authorization (its
// state): a callback from anyone else first is answered 404 and ignored,
// and the authorization goes on.
func TestClientOAuthForgedCallback(t *testing.T) {
	asBrowser(t)
	t.Setenv(testRogueEnv, "1")
	o := newOAuthServer(t, nil)
	eng, _, _, err := clientEngine(t, mcp.ServerConfig{Name: "guarded", URL: o.url, OAuth: &mcp.OAuthConfig{}})
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := callRemote(t, eng, "echo", map[string]any{"message": "authorized"}); err != nil || out != "echo: authorized" {
		t.Fatalf("echo after a forged callback: %q, %v", out, err)
	}
}

package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/morphhost/morph/internal/safetext"
)

// OAuthConfig is an [[mcp_servers]] entry's oauth table: morph authorizes
// itself to the server with OAuth 2.1's authorization code flow (PKCE),
// as MCP's authorization spec has it, through the go-sdk's
// auth.AuthorizationCodeHandler (discovery, registration, token exchange
// and refresh are the SDK's).
type OAuthConfig struct {
	// ClientID is a client pre-registered with the authorization server;
	// ClientSecret its secret (read from the environment), if it has one.
	ClientID     string
	ClientSecret string
	// ClientIDMetadataURL is the https URL of morph's Client ID Metadata
	// Document, used as the client id where the authorization server
	// supports it.
	ClientIDMetadataURL string
	// ClientName is the name morph registers under (dynamic client
	// registration, used when neither of the above applies); default
	// "morph".
	ClientName string
	// Scopes, when set, are the scopes asked for, in place of those the
	// server advertises.
	Scopes []string
	// RedirectPort is the port of the loopback listener that receives the
	// authorization's redirect (http://127.0.0.1:PORT/callback); 0: a free
	// one, chosen when the connection starts.
	RedirectPort int
	// ClientCredentials has morph use OAuth's client credentials grant
	// (the ext-auth extension, SEP-1046; the SDK's
	// extauth.ClientCredentialsHandler) instead: a machine client with
	// ClientID and ClientSecret, no user, no browser, no cached tokens.
	ClientCredentials bool
}

// ErrAuthorization is the kind of ServerError of a server that needs an
// authorization morph could not get: no tokens and nobody to ask (an
// unattended run without BROWSER), a user who did not finish in time, an
// authorization server that refused or broke a rule.
var ErrAuthorization = errors.New("mcp: not authorized")

// TokenDir is where morph keeps the servers' OAuth tokens: a file per
// server URL and client (0600) in a directory only the user may read
// (0700), under the user's cache directory.
func TokenDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the OAuth tokens: %w", err)
	}
	return filepath.Join(dir, "morph", "mcp-tokens"), nil
}

// oauthFlow is one server's OAuth: its handler (the SDK's) and what the
// handler calls back for: the browser step and the token cache.
type oauthFlow struct {
	srv      *server
	cfg      *OAuthConfig
	redirect string // http://127.0.0.1:PORT/callback
	port     int
	client   *http.Client
	cache    string // the token file's path
}

// oauthHandler is the SDK's handler for srv's entry, with the tokens
// cached from an earlier run, if any, as its first token source.
func (srv *server) oauthHandler() (auth.OAuthHandler, error) {
	cfg := srv.cfg.OAuth
	// Each request of the flow (discovery, registration, token exchange,
	// refresh) is bounded by startup_timeout, besides the start's own
	// bound: a refresh runs later, under no other deadline. The SDK bounds
	// the bodies it reads (1 MiB) and checks the URLs it is given (https
	// or loopback, no private address literal, no redirect into one).
	f := &oauthFlow{srv: srv, cfg: cfg, port: cfg.RedirectPort,
		client: &http.Client{Transport: srv.opts.HTTPTransport, Timeout: srv.cfg.StartupTimeout}}
	if cfg.ClientCredentials {
		// No user, nothing to cache: a token per run, from the secret.
		h, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{HTTPClient: f.client,
			Credentials: &oauthex.ClientCredentials{ClientID: cfg.ClientID, ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: cfg.ClientSecret}}})
		if err != nil {
			return nil, err
		}
		return authorizer{h}, nil
	}
	if f.port == 0 {
		// The port must be known before the flow (it is in the client's
		// registration): take a free one now; the flow listens on it again.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("no loopback port for the OAuth redirect: %w", err)
		}
		f.port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	f.redirect = "http://127.0.0.1:" + strconv.Itoa(f.port) + "/callback"
	dir, err := TokenDir()
	if err != nil {
		return nil, err
	}
	f.cache = filepath.Join(dir, cacheName(srv.cfg.URL, cfg))
	name := cfg.ClientName
	if name == "" {
		name = "morph"
	}
	hc := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              f.redirect,
		AuthorizationCodeFetcher: f.fetch,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{f.redirect}, ClientName: name,
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		}},
		RequestRefreshToken: true,
		Client:              f.client,
		NewTokenSource: func(ctx context.Context, c *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
			ts := &cachedTokens{flow: f, src: c.TokenSource(ctx, tok), entry: tokenFile{
				ServerURL: srv.cfg.URL, TokenURL: c.Endpoint.TokenURL, AuthStyle: c.Endpoint.AuthStyle, ClientID: c.ClientID}}
			if c.ClientSecret != cfg.ClientSecret { // one the registration gave: not in the environment
				ts.entry.ClientSecret = c.ClientSecret
			}
			tok, err := ts.Token() // stores it
			if err == nil && tok == nil {
				err = errors.New("its refresh was refused")
			}
			if err != nil {
				return nil, fmt.Errorf("the token just issued: %w", err)
			}
			return ts, nil
		},
	}
	if cfg.ClientIDMetadataURL != "" {
		hc.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: cfg.ClientIDMetadataURL}
	}
	if cfg.ClientID != "" {
		hc.PreregisteredClient = &oauthex.ClientCredentials{ClientID: cfg.ClientID}
		if cfg.ClientSecret != "" {
			hc.PreregisteredClient.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: cfg.ClientSecret}
		}
	}
	if len(cfg.Scopes) > 0 {
		hc.ScopeFilter = func([]string) []string { return cfg.Scopes }
	}
	hc.InitialTokenSource = f.cached()
	h, err := auth.NewAuthorizationCodeHandler(hc)
	if err != nil {
		return nil, err
	}
	return authorizer{h}, nil
}

// authorizer is one of the SDK's handlers with its failures of kind
// ErrAuthorization.
type authorizer struct{ auth.OAuthHandler }

// Authorize runs the flow.
func (a authorizer) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	err := a.OAuthHandler.Authorize(ctx, req, resp)
	switch {
	case err == nil || errors.Is(err, ErrAuthorization):
		return err
	case errors.Is(err, io.ErrUnexpectedEOF) || strings.HasSuffix(err.Error(), io.ErrUnexpectedEOF.Error()):
		// What the SDK's 1 MiB cap on a JSON body reads as: wrapped where
		// the SDK wraps, text where it flattens the metadata's errors (a
		// workaround, pinned by TestClientOAuthHostile's huge metadata: an
		// SDK that words it otherwise fails that test).
		return fmt.Errorf("%w: %w (an answer of the authorization server's cut short, or over 1 MiB)", ErrAuthorization, err)
	default:
		return fmt.Errorf("%w: %w", ErrAuthorization, err)
	}
}

// cacheName is the token file's name of a server URL and a client: the
// client id, or the metadata document's URL, or none (a registered one),
// the scopes asked for (in any order) and the grant: two entries that ask
// for other scopes keep other tokens.
func cacheName(serverURL string, cfg *OAuthConfig) string {
	scopes := slices.Sorted(slices.Values(cfg.Scopes))
	sum := sha256.Sum256([]byte(serverURL + "\n" + cfg.ClientID + "\n" + cfg.ClientIDMetadataURL + "\n" +
		strings.Join(scopes, " ") + "\n" + strconv.FormatBool(cfg.ClientCredentials)))
	return hex.EncodeToString(sum[:16]) + ".json"
}

// tokenFile is a token file: the tokens, and what refreshing them takes.
type tokenFile struct {
	ServerURL    string           `json:"server_url"`
	TokenURL     string           `json:"token_url"`
	AuthStyle    oauth2.AuthStyle `json:"auth_style"`
	ClientID     string           `json:"client_id"`
	ClientSecret string           `json:"client_secret,omitempty"` // a registered client's
	Token        *oauth2.Token    `json:"token"`
}

// cached is the token source of the cache's tokens, nil when there are
// none (or none usable: expired with no refresh token, another server's).
func (f *oauthFlow) cached() oauth2.TokenSource {
	data, err := os.ReadFile(f.cache)
	if err != nil {
		return nil
	}
	var e tokenFile
	if err := json.Unmarshal(data, &e); err != nil || e.Token == nil || e.ServerURL != f.srv.cfg.URL ||
		(!e.Token.Valid() && e.Token.RefreshToken == "") {
		return nil
	}
	secret := e.ClientSecret
	if secret == "" {
		secret = f.cfg.ClientSecret
	}
	c := &oauth2.Config{ClientID: e.ClientID, ClientSecret: secret,
		Endpoint: oauth2.Endpoint{TokenURL: e.TokenURL, AuthStyle: e.AuthStyle}}
	// A refresh outlives the start: its context only carries the client.
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, f.client)
	return &cachedTokens{flow: f, src: c.TokenSource(ctx, e.Token), entry: e, saved: e.Token.AccessToken}
}

// cachedTokens is a token source that stores each new token in the cache,
// and forgets the tokens the authorization server refuses to refresh, so
// that the next request goes without and its 401 starts the authorization
// flow again.
type cachedTokens struct {
	flow  *oauthFlow
	src   oauth2.TokenSource
	mu    sync.Mutex
	entry tokenFile
	saved string // the access token in the cache
	gone  bool   // refused: no more tokens from src
}

// Token is src's token, stored when new; nil (and no error) once the
// server refused a refresh.
func (t *cachedTokens) Token() (*oauth2.Token, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gone {
		return nil, nil
	}
	tok, err := t.src.Token()
	if err != nil {
		var refused *oauth2.RetrieveError
		if !errors.As(err, &refused) {
			return nil, err
		}
		// Never the error's text: it may echo what was sent.
		t.flow.srv.log.Warn("mcp server's OAuth refresh refused; authorizing again")
		t.gone = true
		if err := os.Remove(t.flow.cache); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.flow.srv.log.Warn("mcp server's OAuth tokens not removed from the cache", "error", err)
		}
		return nil, nil
	}
	if tok.AccessToken != t.saved {
		t.entry.Token = tok
		if err := writeTokens(t.flow.cache, &t.entry); err != nil {
			// The tokens still work for this run; the next one authorizes again.
			t.flow.srv.log.Warn("mcp server's OAuth tokens not cached", "error", err)
		} else {
			t.saved = tok.AccessToken
		}
	}
	return tok, nil
}

// writeTokens writes e to path, readable by the user alone, in a directory
// only the user may enter, replacing what was there in one step.
func writeTokens(path string, e *tokenFile) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil { // made by an older morph, or by hand
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tokens-*") // 0600
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// maxCallbackBytes bounds the redirect's request to the loopback listener.
const maxCallbackBytes = 64 << 10

// fetch is the authorization step: the user's browser opens the
// authorization URL (the command in BROWSER, or the user, told on
// AuthPrompt), and the authorization server's redirect to the loopback
// listener brings the code. The SDK checks the state and PKCE.
func (f *oauthFlow) fetch(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	name := f.srv.cfg.Name
	browser := strings.Fields(os.Getenv("BROWSER"))
	prompt := f.srv.opts.AuthPrompt
	if len(browser) == 0 && prompt == nil {
		return nil, fmt.Errorf("%w: the server needs an authorization in a browser and there are no tokens for it: run `morph mcp login %s` once, or set BROWSER to a command that opens a URL",
			ErrAuthorization, name)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(f.port))
	if err != nil {
		return nil, fmt.Errorf("%w: cannot listen for the authorization's redirect on %s: %w", ErrAuthorization, f.redirect, err)
	}
	// Only the redirect of this authorization (its state) is taken: any
	// local process or web page may call the listener first.
	var state string
	if u, err := url.Parse(args.URL); err == nil {
		state = u.Query().Get("state")
	}
	results := make(chan callback, 1)
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: maxCallbackBytes,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/callback" {
				http.NotFound(w, r)
				return
			}
			q := r.URL.Query()
			if q.Get("state") != state {
				http.NotFound(w, r)
				return
			}
			res := callback{code: q.Get("code"), state: q.Get("state"), iss: q.Get("iss"), err: q.Get("error"), desc: q.Get("error_description")}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			msg := "morph is authorized to use MCP server " + name + ". You may close this window."
			if res.err != "" {
				msg = "The authorization of morph for MCP server " + name + " failed. See morph's output."
			}
			io.WriteString(w, "<!doctype html><title>morph</title><p>"+html.EscapeString(msg)+"</p>")
			select { // after the page: the flow's end shuts the listener down
			case results <- res:
			default: // one redirect only
			}
		})}
	go hs.Serve(ln)
	defer func() {
		// The browser gets its page (a handler under way finishes), then
		// the listener closes.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if hs.Shutdown(ctx) != nil {
			hs.Close()
		}
	}()
	if prompt != nil { // also with BROWSER: it may open nothing the user sees
		// The URL is the server's to choose: escaped.
		fmt.Fprintf(prompt, "MCP server %s needs an authorization: open this URL in a browser:\n  %s\n", name, safetext.Line(args.URL, 0))
	}
	var browsed chan error // the BROWSER command's end
	if len(browser) > 0 {
		cmd := exec.Command(browser[0], append(browser[1:], args.URL)...)
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("%w: cannot start BROWSER (%s): %w", ErrAuthorization, safetext.Quote(browser[0], 200), err)
		}
		browsed = make(chan error, 1)
		go func() { browsed <- cmd.Wait() }() // a browser may live on: it is the user's
	}
	for {
		select {
		case res := <-results:
			if res.err != "" {
				return nil, fmt.Errorf("%w: the authorization server answered %s: %s", ErrAuthorization,
					safetext.Quote(res.err, 100), safetext.Quote(res.desc, 300))
			}
			return &auth.AuthorizationResult{Code: res.code, State: res.state, Iss: res.iss}, nil
		case err := <-browsed:
			if err != nil && prompt == nil { // nobody else to open the URL
				return nil, fmt.Errorf("%w: BROWSER (%s) failed: %w", ErrAuthorization, safetext.Quote(browser[0], 200), err)
			}
			browsed = nil // it handed the URL on (xdg-open, open): wait for the redirect
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: no authorization came back to %s in time: %w", ErrAuthorization, f.redirect, ctx.Err())
		}
	}
}

// callback is what the authorization's redirect brought.
type callback struct{ code, state, iss, err, desc string }

// LoginOptions are Login's.
type LoginOptions struct {
	// Logger: as ServersOptions'.
	Logger *slog.Logger
	// Prompt is where the authorization URL is printed for the user
	// (required), also when BROWSER opens it.
	Prompt io.Writer
	// Timeout bounds the whole login, the user's part included; 0: 5 min.
	Timeout time.Duration
	// Version, HTTPTransport: as ServersOptions'.
	Version       string
	HTTPTransport http.RoundTripper
}

// DefaultLoginTimeout is how long Login waits for the user by default.
const DefaultLoginTimeout = 5 * time.Minute

// Login authorizes morph with the server of cfg, an entry with OAuth, and
// caches its tokens for the runs that follow: it forgets the tokens cached
// for it, connects (which runs the flow: BROWSER or the URL printed on
// opts.Prompt) and lists its tools. It returns how many tools it offers.
func Login(ctx context.Context, cfg ServerConfig, opts LoginOptions) (tools int, err error) {
	if cfg.OAuth == nil || cfg.URL == "" {
		return 0, fmt.Errorf("mcp server %q: no oauth table: nothing to log in to", cfg.Name)
	}
	if cfg.OAuth.ClientCredentials {
		return 0, fmt.Errorf("mcp server %q: the client credentials grant has no login: each run gets its token with the client's secret", cfg.Name)
	}
	dir, err := TokenDir()
	if err != nil {
		return 0, err
	}
	if err := os.Remove(filepath.Join(dir, cacheName(cfg.URL, cfg.OAuth))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultLoginTimeout
	}
	cfg.StartupTimeout, cfg.Optional = opts.Timeout, false
	servers := NewServers([]ServerConfig{cfg}, ServersOptions{Logger: opts.Logger, Version: opts.Version,
		HTTPTransport: opts.HTTPTransport, AuthPrompt: opts.Prompt})
	defer servers.Close(context.WithoutCancel(ctx))
	ext, err := servers.Extenders()[0].Open(ctx)
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrAuthorization) {
		// Its start's bound is the login's: say which.
		return 0, fmt.Errorf("%w: not done within the login's %s: %w", ErrAuthorization, opts.Timeout, err)
	}
	if err != nil {
		return 0, err
	}
	return len(ext.Tools), nil
}

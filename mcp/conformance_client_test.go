package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/internal/testenv"
)

// conformanceClientEnv makes a re-executed test binary the client the MCP
// conformance suite drives: morph's own client, configured as an operator
// would, through a morph.toml's [[mcp_servers]] entry.
const conformanceClientEnv = "MORPH_MCP_CONFORMANCE_CLIENT"

// conformanceTools are the scenarios' tools morph's agent calls, by
// scenario; a scenario without one only starts (initialize, tools/list).
var conformanceTools = map[string]string{
	"tools_call":                          "conformance.add_numbers",
	"sse-retry":                           "conformance.test_reconnection",
	"elicitation-sep1034-client-defaults": "conformance.test_client_elicitation_defaults",
}

// testBrowserEnv makes a re-executed test binary the user's browser:
// BROWSER's command, given the authorization URL. The suite's
// authorization server approves at once and redirects to morph's loopback
// listener, which the browser follows.
const testBrowserEnv = "MORPH_MCP_TEST_BROWSER"

// testRogueEnv has testBrowser call the authorization's redirect URI with
// a forged state before it authorizes (rogueCallback).
const testRogueEnv = "MORPH_MCP_TEST_BROWSER_ROGUE"

// conformanceClientSecretEnv holds a pre-registered client's secret, as an
// operator's client_secret_env would.
const conformanceClientSecretEnv = "CONFORMANCE_CLIENT_SECRET"

func init() {
	if os.Getenv(testBrowserEnv) != "" {
		if err := testBrowser(os.Args[len(os.Args)-1]); err != nil {
			fmt.Fprintln(os.Stderr, "test browser:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(conformanceClientEnv) == "" {
		return
	}
	// The suite gives the server's URL as the last argument and the
	// scenario in MCP_CONFORMANCE_SCENARIO.
	if err := conformanceClient(os.Args[len(os.Args)-1], os.Getenv("MCP_CONFORMANCE_SCENARIO")); err != nil {
		fmt.Fprintln(os.Stderr, "morph conformance client:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// testBrowser opens url as a browser would for a user who approves at
// once: it follows the redirects (to morph's loopback listener, last).
// With testRogueEnv set, another page calls morph's listener first, with
// a forged state.
func testBrowser(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if os.Getenv(testRogueEnv) != "" {
		if err := rogueCallback(ctx, url); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Request.URL, resp.Status)
	}
	return nil
}

// conformanceClient opens an engine whose one MCP server is url, and calls
// the scenario's tool as the agent would (Engine.CallTool). An auth/*
// scenario's entry has an oauth table (the suite's client id metadata
// document, and its pre-registered client when it gives one), BROWSER is
// this binary as testBrowser, and the token cache is in a directory of
// its own.
func conformanceClient(url, scenario string) error {
	dir, err := os.MkdirTemp("", "conformance-client")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	entry := "[[mcp_servers]]\nname = \"conformance\"\nurl = " + strconv.Quote(url) + "\ntimeout = \"20s\"\n"
	if strings.HasPrefix(scenario, "auth/") {
		oauth := `client_id_metadata_url = "https://conformance-test.local/client-metadata.json"`
		var given struct {
			ClientID     string `json:"client_id"`
			ClientSecret string `json:"client_secret"`
		}
		if c := os.Getenv("MCP_CONFORMANCE_CONTEXT"); c != "" {
			if err := json.Unmarshal([]byte(c), &given); err != nil {
				return err
			}
		}
		if given.ClientID != "" {
			oauth += ", client_id = " + strconv.Quote(given.ClientID)
		}
		if given.ClientSecret != "" {
			os.Setenv(conformanceClientSecretEnv, given.ClientSecret)
			oauth += ", client_secret_env = " + strconv.Quote(conformanceClientSecretEnv)
		}
		if strings.HasPrefix(scenario, "auth/client-credentials-") { // a machine client, as its operator knows
			oauth = `grant = "client_credentials", client_id = ` + strconv.Quote(given.ClientID) +
				`, client_secret_env = ` + strconv.Quote(conformanceClientSecretEnv)
		}
		entry += "oauth = { " + oauth + " }\n"
		self, err := os.Executable()
		if err != nil {
			return err
		}
		os.Setenv("BROWSER", self)
		os.Setenv(testBrowserEnv, "1")
		os.Setenv("XDG_CACHE_HOME", dir)
	}
	files := map[string]string{
		"replies.json": `{"model":"scripted-test","replies":[{"reply":{"type":"final","final":{"thought":"t","output":"done"}}}]}`,
		"morph.toml":   "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n\n" + entry,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt, err := cfg.Open(ctx, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	tool, ok := conformanceTools[scenario]
	if strings.HasPrefix(scenario, "auth/") {
		tool, ok = "conformance.test-tool", true
	}
	if !ok {
		return nil
	}
	out, err := rt.Engine.CallTool(ctx, rt.Engine.NewSession("").ID(), tool, map[string]any{"a": 2, "b": 40}, cfg.RunOptions())
	fmt.Fprintf(os.Stderr, "%s: %q\n", tool, out)
	return err
}

// The official conformance suite's client scenarios (--suite all) against
// morph's client ([[mcp_servers]] with a url, and an oauth table for the
// auth/* ones): those in conformancePass pass every check, those in
// conformanceFail do not, for the reason given. A scenario changing sides,
// or one the suite adds, fails the test: the README's count is exact.
func TestConformanceClient(t *testing.T) {
	tools := testenv.MCPTools(t)
	node := filepath.Join(tools, "node_modules", ".bin", "node")
	suite := filepath.Join(tools, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "client", "--command", self, "--suite", "all", "--timeout", "90000")
	cmd.Env = append(os.Environ(), conformanceClientEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run() // exits 1: some scenarios do not pass
	line := regexp.MustCompile(`(?m)^[✓✗] (\S+): (\d+) passed, (\d+) failed`)
	seen := map[string]bool{}
	for _, m := range line.FindAllStringSubmatch(out.String(), -1) {
		name, passed, failed := m[1], m[2], m[3]
		seen[name] = true
		// A client that does nothing passes with 0 checks: at least one
		// must have succeeded.
		pass := failed == "0" && passed != "0"
		_, want := conformancePass[name]
		why, wantFail := conformanceFail[name]
		switch {
		case !want && !wantFail:
			t.Errorf("scenario %s (%s passed, %s failed) is new: add it to conformancePass or conformanceFail", name, passed, failed)
		case want && !pass:
			t.Errorf("scenario %s no longer passes: %s passed, %s failed", name, passed, failed)
		case wantFail && pass:
			t.Errorf("scenario %s passes now (it did not: %s): move it to conformancePass and update the README", name, why)
		}
	}
	for name := range conformancePass {
		if !seen[name] {
			t.Errorf("scenario %s did not run", name)
		}
	}
	for name := range conformanceFail {
		if !seen[name] {
			t.Errorf("scenario %s did not run", name)
		}
	}
	if t.Failed() {
		t.Logf("conformance client --suite all:\n%s", out.String())
	}
}

// conformancePass are the client scenarios morph's client passes.
var conformancePass = map[string]struct{}{
	"initialize": {}, "tools_call": {}, "sse-retry": {},
	"auth/metadata-default": {}, "auth/metadata-var1": {}, "auth/metadata-var2": {}, "auth/metadata-var3": {},
	"auth/basic-cimd": {}, "auth/scope-from-www-authenticate": {}, "auth/scope-from-scopes-supported": {},
	"auth/scope-omitted-when-undefined": {}, "auth/scope-step-up": {}, "auth/scope-retry-limit": {},
	"auth/token-endpoint-auth-basic": {}, "auth/token-endpoint-auth-post": {}, "auth/token-endpoint-auth-none": {},
	"auth/pre-registration": {}, "auth/2025-03-26-oauth-endpoint-fallback": {},
	"auth/resource-mismatch": {}, "auth/offline-access-scope": {}, "auth/offline-access-not-supported": {},
	"auth/client-credentials-basic": {},
}

// conformanceFail are the client scenarios morph's client does not pass,
// and why.
var conformanceFail = map[string]string{
	"elicitation-sep1034-client-defaults": "morph's client relays a server's elicitation to the caller of the call " +
		"(morph mcp serve's client); under morph run, as here, there is nobody to ask, and accepting a server's form " +
		"with its defaults on the user's behalf is not a decision a client should make: it declines",
	"auth/2025-03-26-oauth-metadata-backcompat": "the authorization server's metadata at the server's root names " +
		"another issuer (…/oauth); the go-sdk refuses metadata whose issuer is not the one it was fetched for " +
		"(RFC 8414 §3.3), a check morph keeps",
	"auth/client-credentials-jwt": "an extension (SEP-1046): the client_credentials grant authenticated with a " +
		"private key JWT (RFC 7523); the go-sdk's extauth.ClientCredentialsHandler (v1.8.0) takes a client secret " +
		"only, and morph does not hand-write the JWT assertion",
	"auth/cross-app-access-complete-flow": "an extension (enterprise-managed authorization, ID-JAG token exchange " +
		"from an identity provider's ID token); morph does not offer it",
}

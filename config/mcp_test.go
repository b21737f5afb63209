package config_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/mcp"
)

const scriptedLLM = "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\napi_key_env = \"MODEL_KEY\"\n"

// [[mcp_servers]] entries load with their defaults: the prefix is the
// name unless set ("" for none), a relative command and dir resolve
// against the config file's directory, headers' values come from the
// environment when the servers are built.
func TestMCPServersLoad(t *testing.T) {
	t.Setenv("FS_AUTH", "Bearer s3cret")
	dir := write(t, map[string]string{"replies.json": replies, "morph.toml": scriptedLLM + `
[[mcp_servers]]
name = "fs"
command = "./bin/fs-server"
args = ["--root", "/srv"]
dir = "work"
env = { LOG_LEVEL = "info" }
tools = ["read_text_file"]
timeout = "5s"
startup_timeout = "10s"
max_output_kb = 64
restart = "never"
max_restarts = 3
forward_logs = true

[[mcp_servers]]
name = "remote"
url = "http://127.0.0.1:3001/mcp"
headers = { Authorization = "FS_AUTH" }
prefix = ""
optional = true
`})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := cfg.MCPServerConfigs()
	if err != nil {
		t.Fatal(err)
	}
	fs, remote := got[0], got[1]
	if fs.Command != filepath.Join(dir, "bin", "fs-server") || fs.Dir != filepath.Join(dir, "work") || fs.Prefix != "fs" ||
		fs.Timeout != 5*time.Second || fs.StartupTimeout != 10*time.Second || fs.MaxOutputBytes != 64<<10 || fs.Env["LOG_LEVEL"] != "info" ||
		len(fs.Tools) != 1 || fs.Optional || fs.Restart != mcp.RestartNever || fs.MaxRestarts != 3 || !fs.ForwardLogs {
		t.Errorf("fs: %+v", fs)
	}
	if remote.URL != "http://127.0.0.1:3001/mcp" || remote.Prefix != "" || remote.Headers["Authorization"] != "Bearer s3cret" || !remote.Optional ||
		remote.Restart != "" || remote.MaxRestarts != 0 || remote.ForwardLogs {
		t.Errorf("remote: %+v", remote)
	}

	t.Setenv("FS_AUTH", "")
	_, err = cfg.MCPServerConfigs()
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Key != "mcp_servers.1.headers.Authorization" || !strings.Contains(ce.Msg, "FS_AUTH") {
		t.Errorf("with FS_AUTH unset: %v, want an error at the header naming the variable", err)
	}
}

// An oauth table reaches package mcp as it is, the client secret read
// from the variable client_secret_env names (unset: an error at that key).
func TestMCPServersOAuthLoad(t *testing.T) {
	t.Setenv("GH_SECRET", "s3cret")
	dir := write(t, map[string]string{"replies.json": replies, "morph.toml": scriptedLLM + `
[[mcp_servers]]
name = "gh"
url = "https://mcp.example.com/mcp"
oauth = { client_id = "abc", client_secret_env = "GH_SECRET", scopes = ["repo", "read:org"], redirect_port = 8765, client_name = "morph at work" }

[[mcp_servers]]
name = "reg"
url = "https://other.example.com/mcp"
[mcp_servers.oauth]
client_id_metadata_url = "https://morph.example.com/client.json"

[[mcp_servers]]
name = "machine"
url = "https://m.example.com/mcp"
oauth = { grant = "client_credentials", client_id = "ci", client_secret_env = "GH_SECRET" }
`})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := cfg.MCPServerConfigs()
	if err != nil {
		t.Fatal(err)
	}
	gh, reg := got[0].OAuth, got[1].OAuth
	if gh == nil || gh.ClientID != "abc" || gh.ClientSecret != "s3cret" || strings.Join(gh.Scopes, " ") != "repo read:org" ||
		gh.RedirectPort != 8765 || gh.ClientName != "morph at work" {
		t.Errorf("gh: %+v", gh)
	}
	if reg == nil || reg.ClientIDMetadataURL != "https://morph.example.com/client.json" || reg.ClientID != "" || reg.ClientSecret != "" || reg.ClientCredentials {
		t.Errorf("reg: %+v", reg)
	}
	if m := got[2].OAuth; m == nil || !m.ClientCredentials || m.ClientID != "ci" || m.ClientSecret != "s3cret" || gh.ClientCredentials {
		t.Errorf("machine: %+v", m)
	}
	t.Setenv("GH_SECRET", "")
	_, err = cfg.MCPServerConfigs()
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Key != "mcp_servers.0.oauth.client_secret_env" || !strings.Contains(ce.Msg, "GH_SECRET") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("with GH_SECRET unset: %v, want an error at client_secret_env naming the variable", err)
	}
}

// Mistakes in an entry are errors naming the entry's key.
func TestMCPServersErrors(t *testing.T) {
	for _, tc := range []struct{ entry, key, msg string }{
		{`name = "x"`, "mcp_servers.0", "set command (a stdio server) or url"},
		{"name = \"x\"\ncommand = \"a\"\nurl = \"http://h/mcp\"", "mcp_servers.0.url", "not both"},
		{"name = \"a.b\"\ncommand = \"a\"", "mcp_servers.0.name", "want 1 to 32 letters"},
		{"name = \"x\"\nurl = \"ftp://h/mcp\"", "mcp_servers.0.url", "want an http:// or https:// URL"},
		{"name = \"x\"\nurl = \"http://h/mcp\"\nargs = [\"a\"]", "mcp_servers.0.args", "for a stdio server"},
		{"name = \"x\"\ncommand = \"a\"\nheaders = { A = \"B\" }", "mcp_servers.0.headers", "not a stdio one"},
		{"name = \"x\"\ncommand = \"a\"\nenv = { MODEL_KEY = \"k\" }", "mcp_servers.0.env.MODEL_KEY", "model's API key"},
		{"name = \"x\"\nurl = \"http://h/mcp\"\nheaders = { Authorization = \"MODEL_KEY\" }", "mcp_servers.0.headers.Authorization", "model's API key"},
		{"name = \"x\"\nurl = \"http://h/mcp\"\nheaders = { Authorization = \"Bearer abc\" }", "mcp_servers.0.headers.Authorization", "the value itself does not go in the file"},
		{"name = \"x\"\ncommand = \"a\"\nprefix = \"a.b\"", "mcp_servers.0.prefix", "want up to 32"},
		{"name = \"x\"\ncommand = \"a\"\ntimeout = \"-1s\"", "mcp_servers.0.timeout", "must be positive"},
		{"name = \"x\"\ncommand = \"a\"\nmax_output_kb = 0", "mcp_servers.0.max_output_kb", "must be from 1"},
		{"name = \"x\"\ncommand = \"a\"\ntools = [\"t\", \"t\"]", "mcp_servers.0.tools", "named twice"},
		{"name = \"x\"\ncommand = \"a\"\nrestart = \"always\"", "mcp_servers.0.restart", `want "on-failure" or "never"`},
		{"name = \"x\"\ncommand = \"a\"\nmax_restarts = 0", "mcp_servers.0.max_restarts", "must be from 1"},
		{"name = \"x\"\ncommand = \"a\"\ncomand = \"b\"", "mcp_servers.comand", "unknown key"},
		{"name = \"x\"\ncommand = \"a\"\n[[mcp_servers]]\nname = \"x\"\ncommand = \"b\"", "mcp_servers.1.name", "taken"},
		{"name = \"x\"\ncommand = \"a\"\noauth = {}", "mcp_servers.0.oauth", "not a stdio one"},
		{"name = \"x\"\nurl = \"http://h/mcp\"\nheaders = { authorization = \"A\" }\noauth = {}", "mcp_servers.0.oauth", "keep one"},
		{"name = \"x\"\nurl = \"http://h/mcp\"\noauth = { client_secret_env = \"S\" }", "mcp_servers.0.oauth.client_secret_env", "needs the client_id"},
		{"name = \"x\"\nurl = \"http://h/mcp\"\noauth = { client_id = \"c\", client_secret_env = \"s3cr3t value\" }", "mcp_servers.0.oauth.client_secret_env", "the secret itself does not go in the file"},
		{"name = \"x\"\nurl = \"http://h/mcp\"\noauth = { client_id = \"c\", client_secret_env = \"MODEL_KEY\" }", "mcp_servers.0.oauth.client_secret_env", "model's API key"},
		{"name = \"x\"\nurl = \"http://h/mcp\"\noauth = { client_id_metadata_url = \"http://h/client.json\" }", "mcp_servers.0.oauth.client_id_metadata_url", "https:// URL with a path"},
		{"name = \"x\"\nurl = \"http://h/mcp\"\noauth = { client_id_metadata_url = \"https://h/\" }", "mcp_servers.0.oauth.client_id_metadata_url", "https:// URL with a path"},
		{"name = \"x\"\nurl = \"http://h/mcp\"\noauth = { scopes = [\"a b\"] }", "mcp_servers.0.oauth.scopes", "has a space"},
		{"name = \"x\"\nurl = \"http://h/mcp\"\noauth = { redirect_port = 70000 }", "mcp_servers.0.oauth.redirect_port", "from 1 to 65535"},
		{"name = \"x\"\nurl = \"http://h/mcp\"\noauth = { client_secret = \"s\" }", "mcp_servers.oauth.client_secret", "unknown key"},
		{"name = \"x\"\nurl = \"http://h/mcp\"\noauth = { grant = \"implicit\" }", "mcp_servers.0.oauth.grant", "want \"authorization_code\""},
		{"name = \"x\"\nurl = \"http://h/mcp\"\noauth = { grant = \"client_credentials\", client_id = \"c\" }", "mcp_servers.0.oauth.grant", "needs client_id and client_secret_env"},
		{"name = \"x\"\nurl = \"http://h/mcp\"\noauth = { grant = \"client_credentials\", client_id = \"c\", client_secret_env = \"S\", redirect_port = 8000 }", "mcp_servers.0.oauth.redirect_port", "not client_credentials"},
	} {
		ce, _ := loadErr(t, scriptedLLM+"[[mcp_servers]]\n"+tc.entry+"\n")
		if ce.Key != tc.key || !strings.Contains(ce.Msg, tc.msg) {
			t.Errorf("%s:\n got %s: %s\nwant %s: ...%s...", tc.entry, ce.Key, ce.Msg, tc.key, tc.msg)
		}
	}
}

// Open starts the servers: one that cannot start fails Open with an error
// at its entry naming it; optional, it is a warning in the engine's
// status and the run goes on.
func TestMCPServersOpen(t *testing.T) {
	for _, optional := range []bool{false, true} {
		dir := write(t, map[string]string{"replies.json": replies, "morph.toml": scriptedLLM +
			"[[mcp_servers]]\nname = \"gone\"\ncommand = \"/nonexistent/mcp-server\"\n" + map[bool]string{true: "optional = true\n"}[optional]})
		cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Discovery.Project, cfg.Discovery.User = new(bool), new(bool)
		rt, err := cfg.Open(context.Background(), nil)
		if !optional {
			var ce *config.Error
			if !errors.Is(err, mcp.ErrStartup) || !errors.As(err, &ce) || ce.Key != "mcp_servers.0" || !strings.Contains(err.Error(), `mcp server "gone"`) {
				t.Errorf("Open: %v, want ErrStartup at mcp_servers.0 naming the server", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if w := strings.Join(rt.Engine.Status().Warnings, "\n"); !strings.Contains(w, `plugin "gone": optional MCP server not started`) {
			t.Errorf("warnings %q", w)
		}
		rt.Close(context.Background())
	}
}

// The README's example of [[mcp_servers]] (section "Using MCP servers")
// loads, and its servers are what it says.
func TestMCPServersREADMEExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Using MCP servers\n")
	_, block, ok2 := strings.Cut(section, "```toml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("no toml block in the README's section Using MCP servers")
	}
	t.Setenv("SEARCH_AUTH", "Bearer x")
	dir := write(t, map[string]string{"replies.json": replies, "morph.toml": scriptedLLM + block})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := cfg.MCPServerConfigs()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Prefix != "fs" || got[0].Command != "npx" || got[1].Prefix != "" || got[1].Headers["Authorization"] != "Bearer x" || !got[1].Optional {
		t.Errorf("servers %+v", got)
	}
}

// The README's oauth example (section "Using MCP servers", its second toml
// block) loads, the commented variant too.
func TestMCPServersREADMEOAuthExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "## Using MCP servers\n")
	blocks := strings.Split(section, "```toml\n")
	if len(blocks) < 3 {
		t.Fatal("no second toml block in the README's section Using MCP servers")
	}
	block, _, _ := strings.Cut(blocks[2], "```")
	t.Setenv("TRACKER_SECRET", "s")
	for _, variant := range []string{block, strings.Replace(strings.Replace(block, "oauth = {", "# oauth = {", 1), "# oauth = { client_id", "oauth = { client_id", 1)} {
		dir := write(t, map[string]string{"replies.json": replies, "morph.toml": scriptedLLM + variant})
		cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
		if err != nil {
			t.Fatalf("%s\n%v", variant, err)
		}
		got, err := cfg.MCPServerConfigs()
		if err != nil || len(got) != 1 || got[0].OAuth == nil || (got[0].OAuth.Scopes == nil && got[0].OAuth.ClientSecret != "s") {
			t.Errorf("%s\nservers %+v, %v", variant, got, err)
		}
	}
}

package config

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/mcp"
)

// MCPServerEntry is one [[mcp_servers]] entry: an MCP server whose tools
// the agent uses, started (stdio) or reached (Streamable HTTP) when the
// engine initializes, all entries in parallel. An MCP server is not
// sandboxed: see SECURITY.md for what morph still bounds.
//
//	[[mcp_servers]]
//	name = "fs"                        # required: errors, logs and the default prefix use it
//	command = "npx"                    # stdio: command and args ...
//	args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data"]
//	env = { LOG_LEVEL = "info" }       # its whole environment, with PATH and HOME
//	# url = "http://127.0.0.1:3001/mcp"     # ... or Streamable HTTP: exactly one of command and url
//	# headers = { Authorization = "FS_AUTH" } # header = the environment variable holding its value
//	# oauth = { scopes = ["files:read"] }    # ... or OAuth 2.1 (see MCPOAuthEntry)
//	tools = ["read_text_file"]         # only these (the server's names); absent: all
//	prefix = "fs"                      # tools named fs.read_text_file (the default: the name); "" for none
//	timeout = "60s"                    # each call
//	startup_timeout = "30s"            # the start, initialize and the first tools/list
//	max_output_kb = 1024               # each result
//	optional = false                   # true: a server that fails to start is a warning
//	restart = "on-failure"             # a server whose connection ended starts again on the next call; "never"
//	max_restarts = 5                   # restarts within 10 minutes, past which it stays down
//	forward_logs = false               # true: its log messages reach the caller of its one call in flight
type MCPServerEntry struct {
	// Name names the server in errors, logs and Status, and is its tools'
	// default prefix: 1 to 32 letters, digits, '_' or '-'; unique among
	// [[mcp_servers]] and [[plugins]].
	Name string `toml:"name"`
	// Command starts a server that speaks MCP on its standard input and
	// output: a name found on PATH, or a path (a relative one resolved
	// against the config file's directory).
	Command string `toml:"command"`
	// Args are the command's arguments.
	Args []string `toml:"args"`
	// Dir is the command's working directory (relative to the config
	// file's directory); default: morph's.
	Dir string `toml:"dir"`
	// Env is the command's whole environment, with PATH and HOME added
	// from morph's unless set here: nothing else of morph's, and never the
	// model's API key (an entry naming llm.api_key_env is an error).
	Env map[string]string `toml:"env"`
	// URL is a Streamable HTTP server's endpoint (http or https), in
	// place of command.
	URL string `toml:"url"`
	// Headers are sent with every request to URL: header name = the name
	// of the environment variable holding the value (read when the engine
	// opens; unset is an error naming it).
	Headers map[string]string `toml:"headers"`
	// OAuth, for a server at a url, has morph authorize itself with
	// OAuth 2.1 (a browser once, then cached tokens).
	OAuth *MCPOAuthEntry `toml:"oauth"`
	// Tools, when set, are the only tools of the server's used, by the
	// server's names for them; one the server does not offer is a warning.
	Tools []string `toml:"tools"`
	// Prefix names the tools Prefix + "." + the server's name for them;
	// absent: the entry's name; "": the server's names as they are (which
	// may then take a built-in tool's name, with a warning).
	Prefix *string `toml:"prefix"`
	// Timeout bounds each call (default 60s); past it the call is
	// cancelled, the server told, and the model reads that it timed out.
	Timeout time.Duration `toml:"timeout"`
	// StartupTimeout bounds the start: the process or first request,
	// initialize and the first tools/list (default 30s).
	StartupTimeout time.Duration `toml:"startup_timeout"`
	// StopGrace is how long a stdio server has to exit once its input is
	// closed before its process group is killed (default 5s).
	StopGrace time.Duration `toml:"stop_grace"`
	// MaxOutputKB caps each result: text, images and structured content
	// together (default 1024): a larger one is an error the model reads.
	// A message over the larger of it and 4 MiB (plus 64 KiB) fails its
	// call (stdio) or ends the connection (HTTP).
	MaxOutputKB int `toml:"max_output_kb"`
	// MaxTools caps the tools the server may list (default 256).
	MaxTools int `toml:"max_tools"`
	// Optional makes a server that fails to start a warning, its tools
	// absent, instead of an error that stops the run.
	Optional bool `toml:"optional"`
	// Restart is what happens to a server whose connection ended (it
	// exited, or sent what is not JSON-RPC): "on-failure" (the default)
	// starts it again on the next call, with a backoff; "never" keeps it
	// down until morph starts again.
	Restart string `toml:"restart"`
	// MaxRestarts caps the restarts within 10 minutes (default 5); past
	// it the server stays down.
	MaxRestarts int `toml:"max_restarts"`
	// ForwardLogs passes the server's log messages to the caller of its
	// one call in flight (a client of `morph mcp serve`, an embedder's
	// engine.CallNotifier). Off by default: a log message names no call
	// and may be about another caller's, so it is for single-tenant use.
	ForwardLogs bool `toml:"forward_logs"`
}

// MCPOAuthEntry is an [[mcp_servers]] entry's oauth table. With none of
// client_id and client_id_metadata_url, morph registers itself with the
// authorization server (dynamic client registration).
//
//	oauth = { client_id = "abc", client_secret_env = "GH_MCP_SECRET", scopes = ["repo"], redirect_port = 8765 }
type MCPOAuthEntry struct {
	// ClientID is a client registered beforehand with the authorization
	// server.
	ClientID string `toml:"client_id"`
	// ClientSecretEnv names the environment variable holding the
	// pre-registered client's secret, if it has one (never the secret).
	ClientSecretEnv string `toml:"client_secret_env"`
	// ClientIDMetadataURL is the https URL of a Client ID Metadata
	// Document describing morph, used where the authorization server
	// supports it.
	ClientIDMetadataURL string `toml:"client_id_metadata_url"`
	// ClientName is the name morph registers under (default "morph").
	ClientName string `toml:"client_name"`
	// Scopes, when set, replace the scopes the server advertises.
	Scopes []string `toml:"scopes"`
	// RedirectPort is the loopback port of the redirect
	// (http://127.0.0.1:PORT/callback); 0 (the default): any free one.
	RedirectPort int `toml:"redirect_port"`
	// Grant is "authorization_code" (the default: a user, once, in a
	// browser) or "client_credentials" (a machine client: client_id and
	// client_secret_env, no user; the ext-auth extension).
	Grant string `toml:"grant"`
}

// mcpNameRE is what an entry's name may be: short, and a valid start of a
// tool name.
var mcpNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// mcpPrefixRE is what a prefix may be: the same, and "" (none).
var mcpPrefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]{0,32}$`)

// headerNameRE is an HTTP header name (RFC 9110's token).
var headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func (v *validator) mcpServers() {
	seen := map[string]bool{}
	for _, p := range v.c.Plugins {
		seen[p.Name] = true
	}
	secrets := v.c.SecretEnv()
	for i := range v.c.MCPServers {
		s := &v.c.MCPServers[i]
		key := func(field ...string) toml.Key { return append(toml.Key{"mcp_servers", fmt.Sprint(i)}, field...) }
		defined := func(field string) bool { return v.arrayDefined("mcp_servers", i, field) }
		switch {
		case !mcpNameRE.MatchString(s.Name):
			v.fail(key("name"), nil, "want 1 to 32 letters, digits, '_' or '-', got %q", s.Name)
		case seen[s.Name]:
			v.fail(key("name"), nil, "the name %q is taken by another [[mcp_servers]] or [[plugins]] entry", s.Name)
		}
		seen[s.Name] = true
		switch {
		case s.Command == "" && s.URL == "":
			v.fail(key(), nil, "MCP server %q: set command (a stdio server) or url (a Streamable HTTP server)", s.Name)
		case s.Command != "" && s.URL != "":
			v.fail(key("url"), nil, "MCP server %q: set command or url, not both", s.Name)
		case s.URL != "":
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				v.fail(key("url"), err, "MCP server %q: want an http:// or https:// URL, got %q", s.Name, s.URL)
			}
			for _, field := range []string{"args", "env", "dir"} {
				if defined(field) {
					v.fail(key(field), nil, "MCP server %q: %s is for a stdio server (command), not one at a url", s.Name, field)
				}
			}
		default:
			if strings.ContainsRune(s.Command, filepath.Separator) && !filepath.IsAbs(s.Command) {
				s.Command = filepath.Join(filepath.Dir(v.c.File), s.Command)
			}
			if s.Dir != "" && !filepath.IsAbs(s.Dir) {
				s.Dir = filepath.Join(filepath.Dir(v.c.File), s.Dir)
			}
			for _, field := range []string{"headers", "oauth"} {
				if defined(field) {
					v.fail(key(field), nil, "MCP server %q: %s is for a server at a url, not a stdio one", s.Name, field)
				}
			}
		}
		if s.OAuth != nil {
			v.mcpOAuth(s, key, secrets)
		}
		for _, name := range slices.Sorted(maps.Keys(s.Env)) {
			switch {
			case host.CheckEnvName(name) != nil:
				v.fail(key("env", name), nil, "MCP server %q: not an environment variable name", s.Name)
			case slices.Contains(secrets, name):
				v.fail(key("env", name), nil, "MCP server %q: %s holds the model's API key (or another secret of morph's), which no MCP server gets", s.Name, name)
			}
		}
		for _, header := range slices.Sorted(maps.Keys(s.Headers)) {
			env := s.Headers[header]
			switch {
			case !headerNameRE.MatchString(header):
				v.fail(key("headers", header), nil, "MCP server %q: not an HTTP header name", s.Name)
			case host.CheckEnvName(env) != nil:
				v.fail(key("headers", header), nil, "MCP server %q: want the name of the environment variable holding the header's value (the value itself does not go in the file)", s.Name)
			case slices.Contains(secrets, env):
				v.fail(key("headers", header), nil, "MCP server %q: %s holds the model's API key (or another secret of morph's), which no MCP server gets", s.Name, env)
			}
		}
		for j, t := range s.Tools {
			if t == "" || slices.Contains(s.Tools[:j], t) {
				v.fail(key("tools"), nil, "MCP server %q: tool %d is empty or named twice", s.Name, j+1)
			}
		}
		if s.Prefix != nil && !mcpPrefixRE.MatchString(*s.Prefix) {
			v.fail(key("prefix"), nil, "MCP server %q: want up to 32 letters, digits, '_' or '-' (\"\": none), got %q", s.Name, *s.Prefix)
		}
		for field, d := range map[string]time.Duration{"timeout": s.Timeout, "startup_timeout": s.StartupTimeout, "stop_grace": s.StopGrace} {
			if defined(field) && d <= 0 {
				v.fail(key(field), nil, "MCP server %q: must be positive", s.Name)
			}
		}
		if s.Restart != "" && s.Restart != mcp.RestartOnFailure && s.Restart != mcp.RestartNever {
			v.fail(key("restart"), nil, "MCP server %q: want %q or %q, got %q", s.Name, mcp.RestartOnFailure, mcp.RestartNever, s.Restart)
		}
		for field, n := range map[string]int{"max_output_kb": s.MaxOutputKB, "max_tools": s.MaxTools, "max_restarts": s.MaxRestarts} {
			if top := highest(field); defined(field) && (n < 1 || n > top) {
				v.fail(key(field), nil, "MCP server %q: must be from 1 to %d, got %d (leave it out for the default)", s.Name, top, n)
			}
		}
	}
}

// mcpOAuth checks the oauth table of s, an [[mcp_servers]] entry.
func (v *validator) mcpOAuth(s *MCPServerEntry, key func(...string) toml.Key, secrets []string) {
	o := s.OAuth
	if slices.ContainsFunc(slices.Collect(maps.Keys(s.Headers)), func(h string) bool { return strings.EqualFold(h, "Authorization") }) {
		v.fail(key("oauth"), nil, "MCP server %q: an Authorization header and oauth both authorize: keep one", s.Name)
	}
	switch env := o.ClientSecretEnv; {
	case env == "":
	case o.ClientID == "":
		v.fail(key("oauth", "client_secret_env"), nil, "MCP server %q: a client secret needs the client_id it belongs to", s.Name)
	case host.CheckEnvName(env) != nil:
		v.fail(key("oauth", "client_secret_env"), nil, "MCP server %q: want the name of the environment variable holding the secret (the secret itself does not go in the file)", s.Name)
	case slices.Contains(secrets, env):
		v.fail(key("oauth", "client_secret_env"), nil, "MCP server %q: %s holds the model's API key (or another secret of morph's), which no MCP server gets", s.Name, env)
	}
	if u := o.ClientIDMetadataURL; u != "" {
		if pu, err := url.Parse(u); err != nil || pu.Scheme != "https" || pu.Host == "" || strings.Trim(pu.Path, "/") == "" {
			v.fail(key("oauth", "client_id_metadata_url"), err, "MCP server %q: want an https:// URL with a path (the client id the document names), got %q", s.Name, u)
		}
	}
	for j, sc := range o.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\"\\") || slices.Contains(o.Scopes[:j], sc) {
			v.fail(key("oauth", "scopes"), nil, "MCP server %q: scope %d is empty, has a space or a quote, or is named twice", s.Name, j+1)
		}
	}
	switch o.Grant {
	case "", "authorization_code":
	case "client_credentials":
		if o.ClientID == "" || o.ClientSecretEnv == "" {
			v.fail(key("oauth", "grant"), nil, "MCP server %q: the client credentials grant needs client_id and client_secret_env", s.Name)
		}
		for field, set := range map[string]bool{"client_id_metadata_url": o.ClientIDMetadataURL != "", "client_name": o.ClientName != "",
			"scopes": len(o.Scopes) > 0, "redirect_port": o.RedirectPort != 0} {
			if set {
				v.fail(key("oauth", field), nil, "MCP server %q: %s is for the authorization code grant, not client_credentials", s.Name, field)
			}
		}
	default:
		v.fail(key("oauth", "grant"), nil, "MCP server %q: want \"authorization_code\" (the default) or \"client_credentials\", got %q", s.Name, o.Grant)
	}
	if o.RedirectPort < 0 || o.RedirectPort > 65535 {
		v.fail(key("oauth", "redirect_port"), nil, "MCP server %q: want a port from 1 to 65535, or 0 for any free one, got %d", s.Name, o.RedirectPort)
	}
}

// MCPServerConfigs are the [[mcp_servers]] entries as package mcp takes them,
// their headers' values (and OAuth client secret) read from the
// environment: a variable not set (or empty) is an *Error naming the
// entry, the key and the variable.
func (c *Config) MCPServerConfigs() ([]mcp.ServerConfig, error) {
	var out []mcp.ServerConfig
	for i, s := range c.MCPServers {
		prefix := s.Name
		if s.Prefix != nil {
			prefix = *s.Prefix
		}
		sc := mcp.ServerConfig{Name: s.Name, Command: s.Command, Args: s.Args, Dir: s.Dir, Env: s.Env, URL: s.URL,
			Tools: s.Tools, Prefix: prefix, Timeout: s.Timeout, StartupTimeout: s.StartupTimeout, StopGrace: s.StopGrace,
			MaxOutputBytes: s.MaxOutputKB << 10, MaxTools: s.MaxTools, Optional: s.Optional, Restart: s.Restart, MaxRestarts: s.MaxRestarts,
			ForwardLogs: s.ForwardLogs}
		for _, header := range slices.Sorted(maps.Keys(s.Headers)) {
			env := s.Headers[header]
			value := os.Getenv(env)
			if value == "" {
				return nil, c.errorAt(toml.Key{"mcp_servers", fmt.Sprint(i), "headers", header}, nil,
					fmt.Sprintf("MCP server %q: the environment variable %s, which holds the %s header, is not set", s.Name, env, header))
			}
			if sc.Headers == nil {
				sc.Headers = map[string]string{}
			}
			sc.Headers[header] = value
		}
		if o := s.OAuth; o != nil {
			sc.OAuth = &mcp.OAuthConfig{ClientID: o.ClientID, ClientIDMetadataURL: o.ClientIDMetadataURL,
				ClientName: o.ClientName, Scopes: o.Scopes, RedirectPort: o.RedirectPort, ClientCredentials: o.Grant == "client_credentials"}
			if env := o.ClientSecretEnv; env != "" {
				if sc.OAuth.ClientSecret = os.Getenv(env); sc.OAuth.ClientSecret == "" {
					return nil, c.errorAt(toml.Key{"mcp_servers", fmt.Sprint(i), "oauth", "client_secret_env"}, nil,
						fmt.Sprintf("MCP server %q: the environment variable %s, which holds the OAuth client secret, is not set", s.Name, env))
				}
			}
		}
		out = append(out, sc)
	}
	return out, nil
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/mcp"
)

// toolInfo is one tool as `morph tools` reports it.
type toolInfo struct {
	Name string `json:"name"`
	// Source is the engine's: "builtin", "host", or "plugin:NAME" for a
	// WebAssembly plugin's or an MCP server's tool.
	Source string `json:"source"`
	// Kind is what runs it: builtin, host, wasm, mcp, or native (a Go
	// plugin of the embedding host).
	Kind        string          `json:"kind"`
	Plugin      string          `json:"plugin,omitempty"` // the [[plugins]] or [[mcp_servers]] name
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // the tool's JSON Schema
	Mutates     bool            `json:"mutates,omitempty"`
	// Grants are a WebAssembly plugin's capabilities: requested by its
	// manifest, granted by its [[plugins]] entry.
	Grants []host.CapabilityStatus `json:"grants,omitempty"`
}

// toolInfos lists the engine's tools in its status order, each with its
// source and, for a plugin's, what the plugin is and is granted.
func toolInfos(eng *engine.Engine) []toolInfo {
	st := eng.Status()
	plugins := make(map[string]engine.PluginStatus, len(st.Plugins))
	for _, p := range st.Plugins {
		plugins[engine.PluginSource(p.Name)] = p
	}
	out := make([]toolInfo, 0, len(st.Tools))
	for _, ts := range st.Tools {
		ti := toolInfo{Name: ts.Name, Source: ts.Source, Kind: ts.Source, Mutates: ts.Mutates, Parameters: json.RawMessage("{}")}
		if t, ok := eng.Registry().Get(ts.Name); ok {
			ti.Description = t.Description()
			var schema bytes.Buffer // compact: one line for -v
			if json.Compact(&schema, []byte(t.ParameterSchema())) == nil {
				ti.Parameters = schema.Bytes()
			}
		}
		if p, ok := plugins[ts.Source]; ok {
			ti.Plugin, ti.Kind = p.Name, "native"
			switch d := p.Details.(type) {
			case *host.Details:
				ti.Kind, ti.Grants = "wasm", d.Capabilities
			case *mcp.ServerDetails:
				ti.Kind = "mcp"
			}
		}
		out = append(out, ti)
	}
	return out
}

// origin is where a tool comes from, in words: "builtin", "WebAssembly
// plugin count", "MCP server fs".
func (ti toolInfo) origin() string {
	switch ti.Kind {
	case "wasm":
		return "WebAssembly plugin " + label(ti.Plugin)
	case "mcp":
		return "MCP server " + label(ti.Plugin)
	case "native":
		return "Go plugin " + label(ti.Plugin)
	}
	return label(ti.Kind)
}

func newToolsCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		configPath string
		asJSON     bool
		verbose    bool
	)
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "List the tools a config gives the model: each one's source, description, grants and schema",
		Long: `Load the config's plugins and MCP servers, as morph run does, and list every tool
the model is offered: its name, where it comes from (builtin, a WebAssembly plugin, an
MCP server, the embedding host), its description, and for a WebAssembly plugin's tool
the plugin's capabilities (requested by its manifest, granted by its [[plugins]] entry).
-v adds each tool's parameters schema; --json prints all of it as a JSON array.

A pipeline's tool nodes (tool="NAME") and a model's calls name these tools.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(configPath)
			if err != nil {
				return err
			}
			// Loading problems are errors; the engine's warnings are not this
			// command's subject (morph plugin status shows them).
			logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			engineLogger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
			rt, err := cfg.Open(cmd.Context(), logger, engine.WithLogger(engineLogger))
			if err != nil {
				return openFailed(err)
			}
			defer func() { closeRuntime(cmd.Context(), rt, defaultShutdownTimeout, cmd.Context().Err() != nil, stderr) }()
			tools := toolInfos(rt.Engine)
			if asJSON {
				return writeJSON(stdout, tools)
			}
			printTools(stdout, tools, verbose)
			return nil
		},
	}
	cmd.Flags().StringVar(&configPath, "config", defaultConfigFile, "the config file")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tools as a JSON array, schemas included")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print each tool's parameters schema")
	return cmd
}

// printTools prints one block per tool; what a plugin or a server wrote
// (names, descriptions, schemas) is escaped, one line each.
func printTools(w io.Writer, tools []toolInfo, verbose bool) {
	if len(tools) == 0 {
		fmt.Fprintln(w, "no tools: add [tools] builtin, [[plugins]] or [[mcp_servers]] to the config")
		return
	}
	for _, ti := range tools {
		line := fmt.Sprintf("%s (%s)", label(ti.Name), ti.origin())
		if ti.Mutates {
			line += ", changes things (refused in plan mode)"
		}
		fmt.Fprintln(w, line)
		if ti.Description != "" {
			fmt.Fprintf(w, "  %s\n", oneLine(ti.Description, 500))
		}
		if ti.Kind == "wasm" {
			fmt.Fprintf(w, "  grants: %s\n", capabilities(ti.Grants))
		}
		if verbose {
			fmt.Fprintf(w, "  parameters: %s\n", oneLine(string(ti.Parameters), 0))
		}
	}
}

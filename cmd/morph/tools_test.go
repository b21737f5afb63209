package main

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// `morph tools` lists the builtin and the plugin's tools, each with its
// source; the plugin's with its grants; -v and --json with the schema.
func TestToolsLists(t *testing.T) {
	cfg := setup(t, []string{finalReply}, "\n[discovery]\nproject = false\nuser = false\n\n"+
		"[[plugins]]\nname = \"echo\"\npath = \""+fixture(t, "echo_tool")+"\"\nenv = [\"LANG\"]\n")
	code, stdout, stderr := morph(t, "", "tools", "--config", cfg)
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	assertHas(t, "tools", stdout, "calc (builtin)\n", "echo_input (WebAssembly plugin echo)\n",
		"  Fails with its input as the message.\n", "  grants: env (granted: LANG, not requested)\n")
	if strings.Contains(stdout, "parameters:") {
		t.Errorf("without -v, no schema:\n%s", stdout)
	}
	_, stdout, _ = morph(t, "", "tools", "-v", "--config", cfg)
	assertHas(t, "tools -v", stdout, `  parameters: {"type":"object"}`)

	code, stdout, _ = morph(t, "", "tools", "--json", "--config", cfg)
	var tools []toolInfo
	if err := json.Unmarshal([]byte(stdout), &tools); code != 0 || err != nil {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, stdout)
	}
	byName := map[string]toolInfo{}
	for _, ti := range tools {
		byName[ti.Name] = ti
	}
	echo, calc := byName["echo_input"], byName["calc"]
	var schema bytes.Buffer
	if err := json.Compact(&schema, echo.Parameters); err != nil {
		t.Errorf("echo_input's parameters: %v", err)
	}
	if echo.Source != "plugin:echo" || echo.Kind != "wasm" || echo.Plugin != "echo" || schema.String() != `{"type":"object"}` ||
		len(echo.Grants) != 1 || echo.Grants[0].Name != "env" {
		t.Errorf("echo_input: %+v", echo)
	}
	if calc.Source != "builtin" || calc.Kind != "builtin" || calc.Description == "" || !json.Valid(calc.Parameters) {
		t.Errorf("calc: %+v", calc)
	}
}

// morphCommand is `morph WORD` where a string literal tells the user to
// run it: quoted as a command ('morph run', `morph plugin new`), or
// followed by a flag (morph pipeline validate --config F) or by "lists"
// (morph tools lists them); not prose ("morph does when ...", "a morph
// bug", "morph for MCP server").
var morphCommand = regexp.MustCompile("[`']morph ([a-z]+)\\b|\\bmorph ([a-z]+)(?: [a-z]+)? (?:--|lists\\b)")

// commandsIn are the WORDs of the `morph WORD` commands s names.
func commandsIn(s string) []string {
	var words []string
	for _, m := range morphCommand.FindAllStringSubmatch(s, -1) {
		words = append(words, m[1]+m[2])
	}
	return words
}

func TestToolsMessagesNameRealCommands(t *testing.T) {
	for s, want := range map[string]string{
		"(morph tools lists them)": "tools", "'morph run'": "run", "see `morph plugin new`": "plugin",
		"morph tools --config FILE": "tools", "morph pipeline validate --config F": "pipeline", "morph for MCP server": "",
		"(morph does when allow_shell)": "", "a morph bug": "", "which morph sets": "", "morph's cache": "",
	} {
		if got := strings.Join(commandsIn(s), ","); got != want {
			t.Errorf("commandsIn(%q) = %q, want %q", s, got, want)
		}
	}
	root := newRoot(strings.NewReader(""), io.Discard, io.Discard)
	root.InitDefaultCompletionCmd()
	known := map[string]bool{}
	for _, c := range root.Commands() {
		known[c.Name()] = true
	}
	repo := filepath.Join("..", "..")
	for _, dir := range []string{"pipeline", "config", "engine", "host", "cmd/morph", "mcp", "llm/openai"} {
		files, err := filepath.Glob(filepath.Join(repo, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, src, 0) // no comments: prose may say "morph is"
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					return true
				}
				for _, word := range commandsIn(s) {
					if !known[word] {
						t.Errorf("%s: %q tells the user to run \"morph %s\", which is not a command", f, s, word)
					}
				}
				return true
			})
		}
	}
}

// What a plugin wrote (descriptions, schemas with control and
// bidirectional characters, line breaks) reaches the terminal escaped, one
// line each, in text and in JSON. (Names with them do not load.)
func TestToolsHostilePlugin(t *testing.T) {
	cfg := setup(t, []string{finalReply}, "\n[discovery]\nproject = false\nuser = false\n\n"+
		"[[plugins]]\nname = \"evil\"\npath = \""+fixture(t, "hostile_run")+"\"\n")
	for _, args := range [][]string{{"tools", "-v"}, {"tools", "--json"}} {
		code, stdout, stderr := morph(t, "", append(args, "--config", cfg)...)
		if code != 0 {
			t.Fatalf("morph %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
		}
		assertSafe(t, strings.Join(args, " "), stdout+stderr)
		assertHas(t, strings.Join(args, " "), stdout, "lookup_2J_RLO", "FORGED description line")
	}
}

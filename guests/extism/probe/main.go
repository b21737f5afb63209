// Command probe is a hostile morph plugin written with the Extism Go PDK:
// its build_prompt does what the config value "mode" says, so that one
// module covers every row of the host's hostile-guest tests
// (host/extism_test.go). A probe that succeeds at something it should not
// be able to do answers what it got as the system prompt; one that is
// refused reports the refusal as its error.
//
// Modes: "file" reads the file at the config value "path"; "write" writes
// "probe" to it; "env" lists the environment it sees; "http" fetches the
// config value "url" through Extism's http_request; "spin" loops forever;
// "recurse" recurses without bound; "alloc" allocates until it dies;
// "huge" answers 2 MiB; "badjson" answers text that is not JSON; anything
// else answers a valid prompt.
//
// Build (`make extism-guests`, from the repository's root):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags='-s -w' -o extism-probe.wasm ./probe
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	pdk "github.com/extism/go-pdk"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/guests/extism/internal/reply"
)

func main() {}

//go:wasmexport morph_describe
func describe() int32 {
	return reply.JSON(abi.Manifest{Name: "extism-probe", Version: "0.1.0", ABIVersion: abi.Version,
		Hooks: []string{abi.HookBuildPrompt}})
}

// sink keeps what "alloc" allocates reachable.
var sink [][]byte

//go:wasmexport morph_build_prompt
func buildPrompt() int32 {
	mode, _ := pdk.GetConfig("mode")
	path, _ := pdk.GetConfig("path")
	prompt := func(s string) int32 { return reply.JSON(abi.PromptOutput{SystemPrompt: s}) }
	switch mode {
	case "file":
		b, err := os.ReadFile(path)
		if err != nil {
			return reply.Fail(err)
		}
		return prompt("read: " + string(b))
	case "write":
		if err := os.WriteFile(path, []byte("probe"), 0o644); err != nil {
			return reply.Fail(err)
		}
		return prompt("wrote " + path)
	case "env":
		env := os.Environ()
		if len(env) == 0 {
			return reply.Fail(errors.New("the environment is empty"))
		}
		return prompt("env: " + strings.Join(env, " "))
	case "http":
		url, _ := pdk.GetConfig("url")
		res := pdk.NewHTTPRequest(pdk.MethodGet, url).Send()
		return prompt(fmt.Sprintf("http %d: %s", res.Status(), res.Body()))
	case "spin":
		for {
		}
	case "recurse":
		return prompt(fmt.Sprint(recurse(1)))
	case "alloc":
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case "huge":
		pdk.Output([]byte(`{"system_prompt":"` + strings.Repeat("x", 2<<20) + `"}`))
		return 0
	case "badjson":
		pdk.OutputString("this is not json")
		return 0
	}
	return prompt("probe ok")
}

// recurse never returns: each frame needs the next one's result.
func recurse(n int) int { return recurse(n+1) + n }

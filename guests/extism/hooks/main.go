// Command hooks is a morph plugin written with the Extism Go PDK
// (github.com/extism/go-pdk) instead of morph's own: the same hook exports
// and JSON payloads as ABI v1, in Extism's calling convention (each export
// is `() -> i32`, reads its input with pdk.Input and answers with
// pdk.Output, or sets an error and returns non-zero). morph runs it through
// its Extism loader (host/internal/extism).
//
//   - build_prompt does what examples/go-hooks does, for the benchmarks'
//     sake: it appends a "House style" section with the config value
//     "style" to the default prompt;
//   - before_tool_call denies the tools named in the config value
//     "deny_tools" (comma-separated);
//   - on_final logs one line per turn.
//
// Build (`make extism-guests`, from the repository's root):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags='-s -w' -o extism-hooks.wasm ./hooks
package main

import (
	"fmt"
	"slices"
	"strings"

	pdk "github.com/extism/go-pdk"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/guests/extism/internal/reply"
)

func main() {}

// PromptSection is the heading build_prompt appends to the default prompt.
const PromptSection = "## House style (from extism-hooks plugin)"

//go:wasmexport morph_describe
func describe() int32 {
	return reply.JSON(abi.Manifest{Name: "extism-hooks", Version: "0.1.0", ABIVersion: abi.Version,
		Hooks: []string{abi.HookBuildPrompt, abi.HookBeforeToolCall, abi.HookOnFinal}})
}

//go:wasmexport morph_build_prompt
func buildPrompt() int32 {
	var in abi.PromptInput
	if err := pdk.InputJSON(&in); err != nil {
		return reply.Fail(err)
	}
	style, ok := pdk.GetConfig("style")
	if !ok || style == "" {
		style = "Keep the final answer short and plain."
	}
	return reply.JSON(abi.PromptOutput{SystemPrompt: in.DefaultPrompt + "\n" + PromptSection + "\n- " + style + "\n"})
}

//go:wasmexport morph_before_tool_call
func beforeToolCall() int32 {
	var in abi.BeforeToolCallInput
	if err := pdk.InputJSON(&in); err != nil {
		return reply.Fail(err)
	}
	deny, _ := pdk.GetConfig("deny_tools")
	if slices.Contains(strings.Split(deny, ","), in.Tool) {
		return reply.JSON(abi.BeforeToolCallOutput{Deny: true, Reason: in.Tool + " is denied by extism-hooks"})
	}
	return reply.JSON(abi.BeforeToolCallOutput{})
}

//go:wasmexport morph_on_final
func onFinal() int32 {
	var in abi.TurnEnd
	if err := pdk.InputJSON(&in); err != nil {
		return reply.Fail(err)
	}
	pdk.Log(pdk.LogInfo, fmt.Sprintf("extism-hooks: session %s turn %d ended %s", in.SessionID, in.Turn, in.Status))
	return 0
}

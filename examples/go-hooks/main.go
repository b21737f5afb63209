// Command go-hooks is an example morph plugin written in Go with the PDK
// (github.com/morphhost/morph/guests/go/pdk). It implements all four engine hooks
// and serves two tools:
//
//   - build_prompt appends a "House style" section to the engine's default
//     prompt, with the rule from the plugin's config value "style";
//   - build_params sets temperature 0.2 and max_tokens 512, or the config
//     values "temperature" and "max_tokens";
//   - on_tool_success counts successful tool calls per tool and logs each;
//   - fallback_final answers an "incomplete" final that explains why and
//     carries the success counts;
//   - word_count counts the words, lines and characters of a text;
//   - json_query extracts a value from a JSON document by a path like
//     "items[0].name".
//
// and three session middlewares (middleware.go):
//
//   - an audit log: on_turn_start, on_action, on_observation and on_final
//     each log one line ("audit: turn 1 action word_count step 1 ...");
//   - redaction: after_tool_call replaces e-mail addresses and API-key-like
//     strings (sk-...) in tool outputs with "[redacted]";
//   - a guard: before_tool_call denies the tools named in the config value
//     "deny_tools" (comma-separated), and json_query calls whose document is
//     larger than the config value "max_json_bytes", when set.
//
// When the host closes the plugin, each idle instance logs its success
// count (morph_destroy, at debug level).
//
// Build (from this directory) with standard Go (`make examples`):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags='-s -w' -o go-hooks.wasm .
//
// or with TinyGo 0.34 (`make tinygo-examples`; scripts/tinygo.sh builds
// TinyGo once and prints its path):
//
//	TINYGO=$(../../scripts/tinygo.sh)
//	$TINYGO build -target wasip1 -buildmode=c-shared -no-debug -scheduler=none -o go-hooks-tinygo.wasm .
//
// go.mod must stay at go 1.23: TinyGo 0.34 builds no module whose go line is
// newer.
package main

import (
	"strconv"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/guests/go/pdk"
)

// Registration happens in init: a c-shared module never runs main.
func init() {
	pdk.Plugin("go-hooks", "0.1.0")
	pdk.Capabilities(pdk.CapLog, pdk.CapConfig)
	pdk.BuildPrompt(buildPrompt)
	pdk.BuildParams(buildParams)
	pdk.OnToolSuccess(onToolSuccess)
	pdk.FallbackFinal(fallbackFinal)
	pdk.OnTurnStart(auditTurnStart)
	pdk.OnAction(auditAction)
	pdk.OnObservation(auditObservation)
	pdk.OnFinal(auditFinal)
	pdk.BeforeToolCall(guardToolCall)
	pdk.AfterToolCall(redactToolOutput)
	pdk.OnDestroy(onDestroy)
	pdk.Tool("word_count", "Counts the words, lines and characters (Unicode code points) of a text. Returns JSON {\"words\":n,\"lines\":n,\"chars\":n}.",
		wordCountSchema, wordCountTool)
	pdk.Tool("json_query", "Extracts one value from a JSON document by a path of object keys and array indexes, "+
		"such as \"items[0].name\" (\"\" or \"$\" is the whole document). Returns the value as compact JSON.",
		jsonQuerySchema, jsonQueryTool)
}

func main() {}

// PromptSection is the heading build_prompt appends to the default prompt.
const PromptSection = "## House style (from go-hooks plugin)"

// DefaultStyle is the house-style rule when the config has no "style".
const DefaultStyle = "Keep the final answer short and plain; give every number with its unit."

func buildPrompt(in abi.PromptInput) (abi.PromptOutput, error) {
	style, ok := pdk.Config("style")
	if !ok || style == "" {
		style = DefaultStyle
	}
	return abi.PromptOutput{SystemPrompt: in.DefaultPrompt + "\n" + PromptSection + "\n- " + style + "\n"}, nil
}

// Default model parameters of build_params.
const (
	DefaultTemperature = 0.2
	DefaultMaxTokens   = 512
)

func buildParams(abi.ParamsInput) (abi.ParamsOutput, error) {
	temperature, maxTokens := DefaultTemperature, DefaultMaxTokens
	if v, ok := pdk.Config("temperature"); ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 {
			temperature = f
		} else {
			pdk.Logf(abi.LogWarn, "config temperature=%q is not a number >= 0; using %v", v, temperature)
		}
	}
	if v, ok := pdk.Config("max_tokens"); ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			maxTokens = n
		} else {
			pdk.Logf(abi.LogWarn, "config max_tokens=%q is not a positive integer; using %d", v, maxTokens)
		}
	}
	return abi.ParamsOutput{Parameters: map[string]any{"temperature": temperature, "max_tokens": maxTokens}}, nil
}

// successes counts tool successes per tool in this instance's memory. The
// host may replace an instance after a fault, so the counts are best effort.
var successes = map[string]int{}

func onToolSuccess(in abi.ToolSuccessInput) error {
	successes[in.Tool]++
	pdk.Logf(abi.LogInfo, "tool %s succeeded (%d so far)", in.Tool, successes[in.Tool])
	return nil
}

func totalSuccesses() int {
	n := 0
	for _, c := range successes {
		n += c
	}
	return n
}

func fallbackFinal(in abi.FallbackInput) (abi.Final, error) {
	byTool := make(map[string]int, len(successes))
	for k, v := range successes {
		byTool[k] = v
	}
	return abi.Final{
		Thought: "The model did not reach a usable final answer; the go-hooks plugin reports what the run achieved.",
		Output: map[string]any{
			"status":         "incomplete",
			"reason":         in.Reason,
			"steps":          in.Steps,
			"tool_successes": totalSuccesses(),
			"by_tool":        byTool,
		},
	}, nil
}

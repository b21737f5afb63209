package abi

import "encoding/json"

// Version is the ABI version this package describes.
const Version = 1

// MarkerPrefix starts every ABI version marker export; MarkerV1 is version 1's.
// A module exports the marker of each version it implements, as a function
// that is never called (the proxy-wasm convention), so a host can tell the
// version from the export list alone, before instantiating anything.
const (
	MarkerPrefix = "morph_abi_v"
	MarkerV1     = "morph_abi_v1"
)

// HostModule is the import namespace of the host functions of ABI v1.
const HostModule = "morph:host/v1"

// Host functions a guest may import from HostModule.
const (
	// ImportLog: log(level i32, ptr i32, len i32). Writes a UTF-8 message to
	// the host's log under the plugin's name. Levels are the Log* constants.
	ImportLog = "log"
	// ImportConfigGet: config_get(key_ptr i32, key_len i32, out_ptr i32, out_cap i32) -> i32.
	// Looks up the plugin's own config value for key. Returns -1 when the key
	// is absent; otherwise the value's length, having written the value to
	// out_ptr only when that length is <= out_cap (call again with a larger
	// buffer otherwise).
	ImportConfigGet = "config_get"
	// ImportHTTPRequest: http_request(req_ptr i32, req_len i32) -> i64. Sends
	// the HTTPRequest whose JSON is at [req_ptr, req_ptr+req_len) and answers
	// a result packed like an export's (see Pack): the HTTPResponse's JSON,
	// in a buffer the host obtained by calling the guest's own morph_alloc,
	// or, with ErrorFlag set, a UTF-8 message saying why there is no
	// response (the capability is not granted, the host is not allowed, a
	// redirect led elsewhere, the response is too large, the time ran out).
	// Needs CapabilityHTTP: the plugin's allowed_hosts.
	ImportHTTPRequest = "http_request"
)

// Log levels of ImportLog, the values of log/slog's levels.
const (
	LogDebug = -4
	LogInfo  = 0
	LogWarn  = 4
	LogError = 8
)

// Guest exports of ABI v1. Every export except the marker and ExportAlloc has
// the shape (ptr i32, len i32) -> i64: it reads its JSON input from guest
// memory at [ptr, ptr+len) and returns a packed result (see Pack).
const (
	// ExportAlloc: morph_alloc(size i32) -> i32 returns the address of size
	// bytes the host may write the next input into; 0 when it cannot.
	ExportAlloc = "morph_alloc"
	// ExportDescribe returns the plugin's Manifest; its input is empty.
	ExportDescribe = "morph_describe"

	// The four engine hooks.
	ExportBuildPrompt   = "morph_build_prompt"    // PromptInput -> PromptOutput
	ExportBuildParams   = "morph_build_params"    // ParamsInput -> ParamsOutput
	ExportOnToolSuccess = "morph_on_tool_success" // ToolSuccessInput -> empty or {}
	ExportFallbackFinal = "morph_fallback_final"  // FallbackInput -> Final
	// ExportCallTool runs one of the plugin's tools: ToolCallInput -> ToolCallOutput.
	ExportCallTool = "morph_call_tool"

	// Session middleware (abi/middleware.go, SPEC section 10), added within v1.
	ExportOnTurnStart    = "morph_on_turn_start"
	ExportOnAction       = "morph_on_action"
	ExportOnObservation  = "morph_on_observation"
	ExportOnFinal        = "morph_on_final"
	ExportBeforeRun      = "morph_before_run"
	ExportAfterRun       = "morph_after_run"
	ExportBeforeToolCall = "morph_before_tool_call"
	ExportAfterToolCall  = "morph_after_tool_call"
	ExportDestroy        = "morph_destroy"
)

// Hook names as they appear in Manifest.Hooks and in morph.toml.
const (
	HookBuildPrompt   = "build_prompt"
	HookBuildParams   = "build_params"
	HookOnToolSuccess = "on_tool_success"
	HookFallbackFinal = "fallback_final"
)

// EngineHookExports maps each engine hook's name to its export (from Hooks).
var EngineHookExports = exportsOf(EngineHook)

// ErrorFlag marks a packed result whose bytes are a guest-reported error
// message (UTF-8 text) rather than the export's JSON output.
const ErrorFlag = 1 << 31

// MaxPayload is the largest length a packed result can carry.
const MaxPayload = ErrorFlag - 1

// Pack encodes an export's result: the address in the high 32 bits, the
// length in the low 31, and ErrorFlag in bit 31 when isErr. A zero result is
// success with empty output.
func Pack(ptr, length uint32, isErr bool) uint64 {
	v := uint64(ptr)<<32 | uint64(length&MaxPayload)
	if isErr {
		v |= ErrorFlag
	}
	return v
}

// Unpack decodes a result packed by Pack.
func Unpack(v uint64) (ptr, length uint32, isErr bool) {
	return uint32(v >> 32), uint32(v) & MaxPayload, uint32(v)&ErrorFlag != 0
}

// Capabilities a plugin may request in its manifest. A host grants log and
// config to every plugin; it grants the others only as its operator
// configures each plugin (deny by default), and compares the request with
// the grants when it loads the plugin, so that a missing grant shows before
// a call fails for want of it.
const (
	CapabilityLog    = "log"    // ImportLog
	CapabilityConfig = "config" // ImportConfigGet
	// CapabilityHTTP is ImportHTTPRequest to the hosts the operator allows.
	CapabilityHTTP = "http"
	// CapabilityFS is WASI file access to the directories the operator
	// grants, mounted read-only unless granted writable.
	CapabilityFS = "fs"
	// CapabilityEnv is WASI's environment, holding only the variables the
	// operator names.
	CapabilityEnv = "env"
)

// Manifest is what ExportDescribe returns: who the plugin is and what it offers.
type Manifest struct {
	Name         string     `json:"name"`
	Version      string     `json:"version"`
	ABIVersion   int        `json:"abi_version"`
	Hooks        []string   `json:"hooks"`                  // hook names the plugin implements
	Tools        []ToolSpec `json:"tools,omitempty"`        // tools served by ExportCallTool
	Capabilities []string   `json:"capabilities,omitempty"` // capabilities requested: the Capability* names
	// History asks for the session history in middleware payloads; without
	// it they carry none, so the plugin's cost does not grow with the conversation.
	History bool `json:"history,omitempty"`
	// Requires names plugins that must be loaded before this one (their
	// middleware runs first); a missing one or a cycle fails initialization.
	Requires []string `json:"requires,omitempty"`
}

// ToolCallInput asks a plugin to run one of its tools.
type ToolCallInput struct {
	Tool   string         `json:"tool"`
	Params map[string]any `json:"params"`
	// CallID names this call of the tool (engine.CallID): the same on
	// each attempt of the call where the host makes it again (a durable
	// host whose Temporal gave up on an attempt while it ran: its worker
	// died, starved past its heartbeat timeout, timed out or stopped), no
	// other call's. Attempts of one ID may run at once, so a tool whose
	// call has effects outside it does them once per ID atomically (an
	// O_EXCL file, a unique key), not by a check and then an append.
	// Opaque; absent from hosts before it.
	CallID string `json:"call_id,omitempty"`
}

// ToolCallOutput is a tool's result, shown to the model as the observation.
type ToolCallOutput struct {
	Output string `json:"output"`
	// Images go to the model with the observation when it takes images
	// (morph.toml [llm] images), and are dropped otherwise: Output should
	// say what they show.
	Images []Image `json:"images,omitempty"`
	// Content are items of the result beyond text and images (MCP's audio,
	// embedded resources and resource links), which the model does not
	// get: they reach an MCP client of `morph mcp serve` as they are,
	// after Output and Images. Output should say what they hold.
	Content []Content `json:"content,omitempty"`
	// Structured is the result as one JSON value (MCP's structured
	// content), for an MCP client; the model gets Output.
	Structured json.RawMessage `json:"structured,omitempty"`
}

// Content is an item of a tool's result beyond text and images, as MCP's
// content carries it.
type Content struct {
	// Type is "audio", "resource" (an embedded resource: Text, or Data for
	// bytes) or "resource_link" (a URI the client may read).
	Type     string `json:"type"`
	MimeType string `json:"mime_type,omitempty"`
	Data     string `json:"data,omitempty"` // bytes (audio, a binary resource), base64 (standard encoding, padded)
	Text     string `json:"text,omitempty"` // a text resource's text
	URI      string `json:"uri,omitempty"`  // a resource's URI
	Name     string `json:"name,omitempty"` // a resource link's name
}

// Image is an image of a tool's result, as MCP's image content carries it.
type Image struct {
	MimeType string `json:"mime_type"` // image/png, image/jpeg, image/gif or image/webp
	Data     string `json:"data"`      // the image's bytes, base64 (standard encoding, padded)
}

// Package mcp serves morph's tools to Model Context Protocol clients: every
// tool an engine has (its plugins' and its built-ins') is an MCP tool with
// its JSON Schema, and a client's tools/call runs it exactly as a model's
// call runs inside `morph run` (Engine.CallTool: the run's mode and tool
// list, the before/after_tool_call middleware, schema validation, the
// plugin's deadline, memory, grants, isolation and fault policy, the
// observation cap).
//
// The protocol itself is the official Go SDK's
// (github.com/modelcontextprotocol/go-sdk/mcp, imported as sdk in every
// file, since its package name is this one's). What is built here, beside
// it, is what the SDK cannot know:
//
//   - An MCP session is a morph session. Each client session gets an engine
//     session id of its own, so a plugin in session isolation gives it its
//     own instance; when the MCP session ends (stdio: the client closed
//     standard input) the engine session is closed, which releases those
//     instances. The SDK has no session-end hook; Serve owns the session's
//     life instead.
//   - A tool failure (a trap, a timeout, a denial, invalid parameters) is a
//     result with isError and the text the model would have seen, never a
//     JSON-RPC error: the client's model can read it and react, and the
//     server goes on answering.
//   - Schemas are checked before they reach the SDK, whose Server.AddTool
//     panics on an input schema that is not an object: such a tool is not
//     served, and Server.Skipped says why.
//   - Arguments are checked for nesting depth before they are decoded, and
//     a stdio request line longer than Options.MaxRequestBytes ends the
//     session with a *RequestTooLargeError rather than being buffered.
//   - A plugin's progress and log notifications during a call reach the
//     call's client (engine.CallNotifier), progress only under the client's
//     own token, at most Options.MaxNotifications per call.
//
// Served so far: tools over stdio and Streamable HTTP, their results as
// text, images (the images a model would get), other content (audio,
// embedded resources, resource links) and structured content
// (Engine.CallToolResult). List changes, prompts and resources come next
// (issue 26; RATIONALE.md, "MCP: the official Go SDK").
package mcp

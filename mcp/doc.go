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
//   - Stdio is a transport of morph's, one message per line as the
//     specification says: a line too long (Options.MaxRequestBytes), not
//     JSON-RPC, or a batch is answered with a JSON-RPC error and skipped
//     (counted by Server.Refusals), where the SDK's would end the session;
//     requests read ahead of their answers are bounded; a client that
//     stops reading cannot hold Serve past its context.
//   - Calls a session runs at once are capped (Options.MaxCallsPerSession):
//     one more is an isError result wrapping ErrTooManyCalls.
//   - A plugin's progress and log notifications during a call reach the
//     call's client (engine.CallNotifier), progress only under the client's
//     own token, at most Options.MaxNotifications per call; its sampling
//     requests reach a client that declared sampling
//     (engine.CallSampler), at most Options.MaxSamplingPerCall per call.
//
// The other side, Servers, makes MCP servers' tools the engine's: each
// [[mcp_servers]] entry (ServerConfig) is an engine.Extender whose tools
// pass the registry's checks and precedence. Built beside the SDK there:
// stdio servers are started by morph in a process group of their own
// (killed at close after a grace period) with only their entry's
// environment, their output read a bounded line at a time (a line over
// the limit fails its call alone) and their notifications handled as
// read (the SDK queues them unbounded), restarted by the call after a
// crash within bounds; HTTP response bodies are capped (the SDK reads
// JSON ones whole); calls are bounded by a timeout, results by a size,
// tools/list by a count; and every failure is a *ServerError naming the
// server (RATIONALE.md, "MCP servers as plugins, prefixed by default,
// restarted within bounds"). A server's progress, log messages,
// elicitations and sampling requests during a call reach that call's
// caller (client_notify.go, client_ask.go), those that name no call only
// while it is the server's one call in flight.
//
// Served: tools over stdio and Streamable HTTP (Server.Handler), their
// results as text, images (the images a model would get), other content
// (audio, embedded resources, resource links) and structured content
// (Engine.CallToolResult); the tool list follows reloads (SyncTools).
// Plugins' prompts, resources and resource templates (engine.MCPProvider:
// hyper-mcp v2's exports) are listed at NewServer, after a reload
// (Reloaded) and on a plugin's list_changed, and served through
// the SDK's AddPrompt/AddResource/AddResourceTemplate, each get or read a
// call of the plugin in the client's engine session; what a plugin
// answers is checked before the SDK sees it (a name or URI the SDK would
// panic on, a list past Options.MaxItems, content that is not MCP's:
// ErrPluginAnswer), and a name two plugins list is the first's;
// completion goes to the plugin whose prompt or template is named.
// Resources may be subscribed to (at most Options.MaxSubscriptions a
// session): a plugin's notify_resource_updated and a reload reach the
// sessions subscribed. Over HTTP, SSE streams are resumable
// (HTTPOptions.EventStoreBytes) and long calls' streams may be polled
// (HTTPOptions.SSEPollAfter).
package mcp

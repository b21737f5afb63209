// mcp-client.mjs: the TypeScript SDK as an MCP client, for tests of morph's MCP server.
//   node mcp-client.mjs [--call TOOL] [--args JSON] http  URL
//   node mcp-client.mjs [--call TOOL] [--args JSON] stdio COMMAND [ARG...]
// Finds the SDK under $MCP_TOOLS/node_modules (the scripts/mcp-tools.sh cache).
// Prints one JSON object on stdout: {server, protocolVersion, tools, result, progress}; exits 1 on any error.
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const req = createRequire(join(process.env.MCP_TOOLS ?? process.cwd(), "package.json"));
const load = (p) => import(pathToFileURL(req.resolve(`@modelcontextprotocol/sdk/${p}`)).href);
const { Client } = await load("client/index.js");

const argv = process.argv.slice(2);
let call, args = {};
while (argv[0]?.startsWith("--")) {
  const flag = argv.shift(), value = argv.shift();
  if (flag === "--call") call = value;
  else if (flag === "--args") args = JSON.parse(value);
  else throw new Error(`unknown flag ${flag}`);
}
const [kind, target, ...rest] = argv;
let transport;
if (kind === "http") {
  const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
  transport = new StreamableHTTPClientTransport(new URL(target));
} else if (kind === "stdio") {
  const { StdioClientTransport } = await load("client/stdio.js");
  transport = new StdioClientTransport({ command: target, args: rest, stderr: "inherit" });
} else {
  console.error("usage: mcp-client.mjs [--call TOOL] [--args JSON] http URL | stdio COMMAND [ARG...]");
  process.exit(2);
}

// The client tells the transport the negotiated version (HTTP sends it as a header); record it for both kinds.
let protocolVersion;
const setVersion = transport.setProtocolVersion?.bind(transport);
transport.setProtocolVersion = (v) => { protocolVersion = v; setVersion?.(v); };

const client = new Client({ name: "mcp-client.mjs", version: "1.0.0" });
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  // onprogress makes the SDK send a progressToken; the server's notifications/progress are kept in order.
  const progress = [];
  const result = call
    ? await client.callTool({ name: call, arguments: args }, undefined, { onprogress: (p) => progress.push(p) })
    : undefined;
  console.log(JSON.stringify({
    server: client.getServerVersion(),
    protocolVersion,
    tools: tools.map((t) => t.name),
    result,
    progress,
  }));
} catch (err) {
  console.error(`mcp-client.mjs: ${err?.stack ?? err}`);
  process.exitCode = 1;
} finally {
  await client.close();
}

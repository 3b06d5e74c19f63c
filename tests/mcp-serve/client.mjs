// Drives Chela's MCP server with the official TypeScript SDK client (@modelcontextprotocol/sdk).
// Usage: node client.mjs TARGET [COMMAND ARGS...]
//   TARGET  an http://…/mcp URL (Streamable HTTP), or "stdio" followed by the command to run.
// Prints KEY=VALUE lines: SERVER, TOOLS, STORED, CHAT, UNKNOWN (the error code).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [target, command, ...args] = process.argv.slice(2);
const transport =
  target === "stdio"
    ? new StdioClientTransport({ command, args, env: { HOME: process.env.HOME, PATH: process.env.PATH }, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(target), {
      // The gateway asks for its token on loopback too.
      requestInit: { headers: { Authorization: `Bearer ${process.env.CHELA_GATEWAY_TOKEN}` } },
    });
const client = new Client({ name: "ts-sdk-test", version: "1.0.0" });
await client.connect(transport);
const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("");
console.log("SERVER=" + client.getServerVersion()?.name);
const { tools } = await client.listTools();
console.log("TOOLS=" + tools.map((t) => t.name).sort().join(","));
const stored = await client.callTool({ name: "memory_store", arguments: { content: "the ts client was here" } });
console.log("STORED=" + JSON.stringify({ error: stored.isError, text: text(stored) }));
const chat = await client.callTool({ name: "chat", arguments: { message: "hello from typescript" } });
console.log("CHAT=" + JSON.stringify({ error: chat.isError, text: text(chat) }));
try {
  await client.callTool({ name: "no_such_tool", arguments: {} });
  console.log("UNKNOWN=none");
} catch (e) {
  console.log("UNKNOWN=" + e.code);
}
await client.close();

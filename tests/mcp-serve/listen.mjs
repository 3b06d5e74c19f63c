// Listens for Chela's tool list changes with the official TypeScript SDK v2 client
// (@modelcontextprotocol/client), era negotiated with `versionNegotiation: { mode: "auto" }`,
// as its documentation shows.
// Usage: node listen.mjs TARGET [COMMAND ARGS...]
//   TARGET  an http://…/mcp URL, or "stdio" followed by the command that runs `chela mcp serve`
// Prints KEY=VALUE lines: ERA and HONORED once the stream is live (the test then changes the
// tools), TOOLS (sorted names, listed again in the change handler), CLOSED (who ended the
// stream). Gives up after 30 s without a change.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [target, command, ...args] = process.argv.slice(2);
const transport =
  target === "stdio"
    ? new StdioClientTransport({ command, args, env: { HOME: process.env.HOME, PATH: process.env.PATH }, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(target), {
      requestInit: { headers: { Authorization: `Bearer ${process.env.CHELA_GATEWAY_TOKEN}` } },
    });
const client = new Client({ name: "ts-v2-listen-test", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } });
await client.connect(transport);
console.log("ERA=" + client.getProtocolEra());
const changed = new Promise((resolve) => {
  client.setNotificationHandler("notifications/tools/list_changed", async () => {
    const { tools } = await client.listTools();
    resolve(tools.map((t) => t.name).sort().join(","));
  });
});
const subscription = await client.listen({ toolsListChanged: true });
console.log("HONORED=" + JSON.stringify(subscription.honoredFilter));
const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error("no change in 30 s")), 30_000).unref());
console.log("TOOLS=" + (await Promise.race([changed, timeout])));
await subscription.close();
console.log("CLOSED=" + (await subscription.closed));
await client.close();

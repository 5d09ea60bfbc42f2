// The TypeScript MCP SDK's Streamable HTTP client against `serve --http`.
//
// Usage: node http.mjs SCENARIO URL JOURNAL   (bearer token from MCP_TOKEN, if set)
// Prints one JSON object (times in seconds):
//
//   calls   initialize, list the tools, call run_python once: {tools, stdout, isError}
//   cancel  start a run that awaits `slow` (30 s), abort it once the call reached the
//           server (JOURNAL is the toy server's --journal), then time print('next').
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { cancelMidCall, run } from "./common.mjs";

const [scenario, url, journal] = process.argv.slice(2);
const token = process.env.MCP_TOKEN;

const scenarios = {
  async calls(client) {
    const listed = await client.listTools();
    const result = await run(client, "print(await add({'a': 20, 'b': 22}))");
    return {
      tools: listed.tools.map((t) => t.name),
      stdout: result.structuredContent.stdout,
      isError: Boolean(result.isError),
    };
  },
  cancel: (client) => cancelMidCall(client, journal),
};

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: token ? { headers: { Authorization: `Bearer ${token}` } } : {},
});
const client = new Client({ name: "http-test", version: "0.0.0" });
await client.connect(transport);
const out = await scenarios[scenario](client);
await transport.terminateSession().catch(() => {});
await client.close();
console.log(JSON.stringify(out));

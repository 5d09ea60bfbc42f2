// The TypeScript MCP SDK's Streamable HTTP client against `serve --http`.
//
// Usage: node http.mjs SCENARIO URL JOURNAL   (bearer token from MCP_TOKEN, if set)
// Prints one JSON object (times in seconds):
//
//   calls   initialize, list the tools, call run_python once: {tools, stdout, isError}
//   cancel  start a run that awaits `slow` (30 s), abort it once the call reached the
//           server (JOURNAL is the toy server's --journal), then time print('next').
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [scenario, url, journal] = process.argv.slice(2);
const now = () => performance.now() / 1000;
const token = process.env.MCP_TOKEN;

async function journalShows(text, within = 60) {
  const end = now() + within;
  while (now() < end) {
    try {
      if (readFileSync(journal, "utf8").includes(text)) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`the journal never showed ${text}`);
}

const run = (client, code, options = {}) =>
  client.callTool({ name: "run_python", arguments: { code } }, undefined, options);

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
  async cancel(client) {
    const controller = new AbortController();
    const pending = run(client, "await slow({'seconds': 30})\nawait echo({'text': 'after-cancel'})", {
      signal: controller.signal,
    }).then(
      () => "answered",
      (e) => `rejected: ${e.name}`,
    );
    await journalShows("call slow");
    const started = now();
    controller.abort("the user changed their mind");
    const outcome = await pending;
    const cancelled = now();
    const next = await run(client, "print('next')");
    return {
      outcome,
      cancel_returned_s: cancelled - started,
      next_stdout: next.structuredContent.stdout,
      next_after_cancel_s: now() - cancelled,
    };
  },
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

// A wrapped MCP server whose tools use MCP 2025-11-25 tasks, served by the TypeScript SDK's
// own task implementation (McpServer.experimental.tasks, InMemoryTaskStore), so the bridge
// is tested against the reference shapes, not ours.
//
// Usage: node task_server.mjs JOURNAL [--http json|sse]
//
// With --http it serves Streamable HTTP on 127.0.0.1 (a free port, printed as its first
// line; the endpoint is /mcp, one session per initialize) instead of stdio, answering each
// POST with a JSON body (`json`) or an SSE stream (`sse`).
//
// Tools:
//   research  taskSupport "required": {text, seconds} -> after `seconds`, "researched: TEXT".
//             Called without a task, the SDK refuses it with -32601.
//   quick     taskSupport "optional": {text} -> "quick: TEXT" at once.
//   ask       taskSupport "required": {text} -> its task goes to status input_required
//             (as a tool that elicits the user's answer inside a task does) and stays there.
//
// JOURNAL gets one line per request received: its method, the tool name for tools/call,
// and "task" when the request carried params.task (`tools/call research task`,
// `tasks/get`, `tasks/result`, `tasks/cancel`); `finished TEXT` when a research task
// stored its result, and `cancelled TASKID` when a task was cancelled.
import { appendFileSync } from "node:fs";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { InMemoryTaskStore } from "@modelcontextprotocol/sdk/experimental/tasks";
import { z } from "zod";

const journal = process.argv[2];
const note = (line) => appendFileSync(journal, `${line}\n`);

class JournalledStore extends InMemoryTaskStore {
  async updateTaskStatus(taskId, status, message, sessionId) {
    if (status === "cancelled") note(`cancelled ${taskId}`);
    return super.updateTaskStatus(taskId, status, message, sessionId);
  }
}

const taskStore = new JournalledStore();

const handlers = (work) => ({
  async createTask(args, { taskStore: requestStore, taskRequestedTtl }) {
    const task = await requestStore.createTask({ ttl: taskRequestedTtl, pollInterval: 100 });
    (async () => {
      const text = await work(args);
      // The shared store: a task cancelled or past its ttl is no longer working (or gone).
      const now = await taskStore.getTask(task.taskId);
      if (now && now.status === "working") {
        await requestStore.storeTaskResult(task.taskId, "completed", { content: [{ type: "text", text }] });
        note(`finished ${text}`);
      }
    })().catch((e) => note(`error ${e}`));
    return { task };
  },
  async getTask(_args, { taskId, taskStore }) {
    return await taskStore.getTask(taskId);
  },
  async getTaskResult(_args, { taskId, taskStore }) {
    return await taskStore.getTaskResult(taskId);
  },
});

/** A server with the three tools, on the shared task store. */
function newServer() {
  const server = new McpServer(
    { name: "task-server", version: "1.0.0" },
    { capabilities: { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } }, taskStore },
  );
  server.experimental.tasks.registerToolTask(
    "research",
    {
      description: "Research a text for some seconds (a task).",
      inputSchema: { text: z.string(), seconds: z.number() },
      execution: { taskSupport: "required" },
    },
    handlers(async ({ text, seconds }) => {
      await new Promise((r) => setTimeout(r, seconds * 1000));
      return `researched: ${text}`;
    }),
  );

  server.experimental.tasks.registerToolTask(
    "quick",
    {
      description: "Answer at once; may be called as a task.",
      inputSchema: { text: z.string() },
      execution: { taskSupport: "optional" },
    },
    handlers(async ({ text }) => `quick: ${text}`),
  );

  server.experimental.tasks.registerToolTask(
    "ask",
    {
      description: "Ask the user a question inside a task (a task).",
      inputSchema: { text: z.string() },
      execution: { taskSupport: "required" },
    },
    {
      async createTask({ text }, { taskStore: requestStore, taskRequestedTtl }) {
        const task = await requestStore.createTask({ ttl: taskRequestedTtl, pollInterval: 100 });
        await requestStore.updateTaskStatus(task.taskId, "input_required", `asking: ${text}`);
        note(`asking ${text}`);
        return { task };
      },
      async getTask(_args, { taskId, taskStore }) {
        return await taskStore.getTask(taskId);
      },
      async getTaskResult(_args, { taskId, taskStore }) {
        return await taskStore.getTaskResult(taskId);
      },
    },
  );
  return server;
}

/** Connect a new server to `transport`, journalling each request it receives. */
async function serveOn(transport) {
  await newServer().connect(transport);
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if (message.method) {
      const tool = message.method === "tools/call" ? ` ${message.params?.name}` : "";
      note(`${message.method}${tool}${message.params?.task ? " task" : ""}`);
    }
    deliver(message, extra);
  };
}

if (process.argv[3] === "--http") {
  const enableJsonResponse = process.argv[4] === "json";
  const sessions = new Map();
  const http = createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined;
    const id = req.headers["mcp-session-id"];
    let transport = id && sessions.get(id);
    if (!transport) {
      if (id || body?.method !== "initialize") {
        res.writeHead(404).end();
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse,
        onsessioninitialized: (sid) => sessions.set(sid, transport),
      });
      await serveOn(transport);
    }
    await transport.handleRequest(req, res, body);
  });
  http.listen(0, "127.0.0.1", () => console.log(http.address().port));
} else {
  await serveOn(new StdioServerTransport());
}

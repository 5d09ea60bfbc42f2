// Approval of a call made by run_python running as a task (MCP 2025-11-25 tasks, "Input
// Required Status"), with the TypeScript SDK's task client on the other end.
//
// Usage: node approve_task.mjs ANSWER CODE -- SERVE_COMMAND...  (or -- URL for serve --http)
// ANSWER is the action every elicitation/create gets (accept, decline, cancel), or none: the
// client declares no elicitation capability.
// Prints one JSON object:
//   asked     [{message, related_task (the request's related-task id is the run's task),
//             status (the task's status from tasks/get while the question is open)}]
//   messages  the types callToolStream yielded
//   statuses  the statuses notifications/tasks/status carried, in order
//   stdout, error   the run's result
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CallToolResultSchema,
  ElicitRequestSchema,
  TaskStatusNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const sep = process.argv.indexOf("--");
const [answer, code] = process.argv.slice(2, sep);
const command = process.argv.slice(sep + 1);

const capabilities = { tasks: {} };
if (answer !== "none") capabilities.elicitation = { form: {} };
const client = new Client({ name: "approve-task-ts", version: "1.0.0" }, { capabilities });

let taskId = null;
const asked = [];
if (answer !== "none") {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    const related = request.params._meta?.["io.modelcontextprotocol/related-task"]?.taskId ?? null;
    const status = related ? (await client.experimental.tasks.getTask(related)).status : null;
    asked.push({ message: request.params.message, related_task: related !== null && related === taskId, status });
    return { action: answer };
  });
}
const statuses = [];
client.setNotificationHandler(TaskStatusNotificationSchema, (n) => statuses.push(n.params.status));

const transport = command[0].startsWith("http")
  ? new StreamableHTTPClientTransport(new URL(command[0]))
  : new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: "inherit" });
await client.connect(transport);
const messages = [];
let result = null;
for await (const message of client.experimental.tasks.callToolStream(
  { name: "run_python", arguments: { code } },
  CallToolResultSchema,
  { task: { ttl: 60000 } },
)) {
  messages.push(message.type === "error" ? String(message.error) : message.type);
  if (message.type === "taskCreated") taskId = message.task.taskId;
  if (message.type === "result") result = message.result;
}
// The terminal status may come just after the result.
const end = performance.now() + 5000;
while (!statuses.includes("completed") && performance.now() < end) {
  await new Promise((r) => setTimeout(r, 50));
}
await client.close();
console.log(JSON.stringify({
  asked,
  messages,
  statuses,
  stdout: result?.structuredContent?.stdout ?? null,
  error: result?.structuredContent?.error ?? null,
}));

// MCP 2025-11-25 tasks through `serve`, driven by the TypeScript SDK's task client
// (client.experimental.tasks): run_python called as a task, and wrapped tools that require
// tasks (task_server.mjs, whose JOURNAL says what reached it).
//
// Usage: node tasks.mjs SCENARIO JOURNAL -- SERVE_COMMAND...
// Prints one JSON object with what was observed (times in seconds).
//
//   run-as-task     tools/list and the capabilities; run_python as a task (callToolStream):
//                   the stream's message types, the result, tasks/get and tasks/list after.
//   cancel-task     run_python as a task awaiting the toy server's `slow` (30 s, then `echo`
//                   in a `finally`); once the
//                   call reached the server, tasks/cancel; what the stream and tasks/result
//                   then say; the time until `print('next')` answers.
//   required-tool   a run that awaits task_server's `research` (required) and `quick`
//                   (optional): the run's stdout.
//   abort-required  a run awaiting `research` for 30 s, aborted (AbortSignal) once the task
//                   call reached the server: the time until the server saw tasks/cancel.
//   gives-up        a run awaiting `research` for 30 s that ends first (serve's
//                   --call-timeout or --deadline): the run's error, once the server saw
//                   tasks/cancel.
//   task-notes      run_python as a task with `onprogress`, calling `echo` and then sleeping
//                   5 s: the progress notifications ([progress, message]) and the statuses
//                   of the notifications/tasks/status received.
//   end-session     (over HTTP) run_python as a task awaiting `slow` (30 s, then `echo` in a
//                   `finally`); once the call reached the server, the client ends its
//                   session (DELETE): the time until the server saw its call cancelled.
//   asks-input      a run awaiting task_server's `ask`, whose task goes to input_required:
//                   the run's error, once the server saw tasks/cancel.
//
// SERVE_COMMAND may instead be one http:// URL of a running `serve --http` (JOURNAL is then
// the journal of the server it wraps). TOOL_PREFIX (environment, default none) goes before
// task_server's tool names in the code: `tasks__` when serve wraps it by `--config` as the
// server `tasks`.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, TaskStatusNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { abortOnceReached, journalShows as shows, now, run } from "./common.mjs";

const sep = process.argv.indexOf("--");
const [scenario, journal] = process.argv.slice(2, sep);
const command = process.argv.slice(sep + 1);
const journalShows = (text, within) => shows(journal, text, within);
const p = process.env.TOOL_PREFIX ?? "";

const stream = (client, code) =>
  client.experimental.tasks.callToolStream(
    { name: "run_python", arguments: { code } },
    CallToolResultSchema,
    { task: { ttl: 60000 } },
  );

const error = async (promise) => {
  try {
    await promise;
    return null;
  } catch (e) {
    return { code: e.code ?? null, message: String(e.message ?? e) };
  }
};

const scenarios = {
  async "run-as-task"(client) {
    const tools = await client.listTools();
    const seen = [];
    let result = null;
    let taskId = null;
    for await (const message of stream(client, "import time\ntime.sleep(2)\nprint('task done')")) {
      seen.push(message.type);
      if (message.type === "taskCreated") taskId = message.task.taskId;
      if (message.type === "result") result = message.result;
      if (message.type === "error") seen.push(String(message.error));
    }
    const task = await client.experimental.tasks.getTask(taskId);
    const listed = await client.experimental.tasks.listTasks();
    return {
      task_capability: client.getServerCapabilities()?.tasks ?? null,
      execution: tools.tools.find((t) => t.name === "run_python")?.execution ?? null,
      messages: seen,
      stdout: result?.structuredContent?.stdout ?? null,
      related_task: result?._meta?.["io.modelcontextprotocol/related-task"]?.taskId === taskId,
      status: task.status,
      ttl: task.ttl,
      listed: listed.tasks.map((t) => t.taskId === taskId && t.status),
    };
  },
  async "cancel-task"(client) {
    // Were only the call cancelled, `finally` would still reach the server.
    const code = "try:\n    await slow({'seconds': 30})\nfinally:\n    await echo({'text': 'after-cancel'})";
    const messages = stream(client, code);
    const first = await messages.next();
    const taskId = first.value.task.taskId;
    const rest = (async () => {
      const seen = [];
      for await (const message of messages) seen.push(message.type === "error" ? String(message.error) : message.type);
      return seen;
    })();
    await journalShows("call slow");
    const started = now();
    const cancelled = await client.experimental.tasks.cancelTask(taskId);
    const answered = now();
    const seen = await rest;
    // The toy server hears of its call's cancel from the kill, not from the disconnect.
    const upstream = await journalShows("cancelled ", 10);
    const next = await run(client, "print('next')");
    return {
      first: first.value.type,
      cancel_status: cancelled.status,
      cancel_answered_s: answered - started,
      upstream_cancelled_s: upstream - answered,
      stream_after: seen,
      result_error: await error(client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)),
      cancel_again: await error(client.experimental.tasks.cancelTask(taskId)),
      unknown: await error(client.experimental.tasks.getTask("no-such-task")),
      next_stdout: next.structuredContent.stdout,
      next_after_cancel_s: now() - answered,
    };
  },
  async "required-tool"(client) {
    const result = await run(
      client,
      `print(await ${p}research({'text': 'tides', 'seconds': 1}))\nprint(await ${p}quick({'text': 'moon'}))`,
    );
    return { stdout: result.structuredContent.stdout, error: result.structuredContent.error };
  },
  async "abort-required"(client) {
    const code = `await ${p}research({'text': 'slow', 'seconds': 30})`;
    const { outcome, started } = await abortOnceReached(client, journal, code, "tools/call research task");
    const seen = await journalShows("tasks/cancel");
    await journalShows("cancelled ");
    return { outcome, cancel_reached_server_s: seen - started };
  },
  async "task-notes"(client) {
    const statuses = [];
    client.setNotificationHandler(TaskStatusNotificationSchema, (n) => {
      statuses.push(n.params.status);
    });
    const progress = [];
    const code = "print(await echo({'text': 'hi'}))\nimport time\ntime.sleep(5)";
    let result = null;
    for await (const message of client.experimental.tasks.callToolStream(
      { name: "run_python", arguments: { code } },
      CallToolResultSchema,
      { task: { ttl: 60000 }, onprogress: (p) => progress.push([p.progress, p.message]) },
    )) {
      if (message.type === "result") result = message.result;
    }
    // The terminal status may come just after the result.
    const end = now() + 5;
    while (!statuses.includes("completed") && now() < end) await new Promise((r) => setTimeout(r, 50));
    return { progress, statuses, stdout: result?.structuredContent?.stdout ?? null };
  },
  async "end-session"(client) {
    const code = "try:\n    await slow({'seconds': 30})\nfinally:\n    await echo({'text': 'after-cancel'})";
    const messages = stream(client, code);
    const first = await messages.next();
    await journalShows("call slow");
    const started = now();
    await transport.terminateSession();
    const upstream = await journalShows("cancelled ", 10);
    // Give a surviving sandbox time to reach `finally`.
    await new Promise((r) => setTimeout(r, 1000));
    return { first: first.value.type, upstream_cancelled_s: upstream - started };
  },
  async "asks-input"(client) {
    const result = await run(client, `print(await ${p}ask({'text': 'which one?'}))`, { timeout: 120000 });
    await journalShows("tasks/cancel", 10);
    return { error: result.structuredContent.error, stdout: result.structuredContent.stdout };
  },
  async "gives-up"(client) {
    const result = await run(client, `print(await ${p}research({'text': 'slow', 'seconds': 30}))`, {
      timeout: 120000,
    });
    await journalShows("tasks/cancel", 10);
    return { error: result.structuredContent.error };
  },
};

const transport = command[0].startsWith("http")
  ? new StreamableHTTPClientTransport(new URL(command[0]))
  : new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: "inherit" });
const client = new Client({ name: "tasks-ts", version: "1.0.0" }, { capabilities: { tasks: {} } });
await client.connect(transport);
const out = await scenarios[scenario](client);
await client.close();
console.log(JSON.stringify(out));

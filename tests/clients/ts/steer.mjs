// Steer runs of `serve` from the TypeScript MCP SDK: cancel through an AbortSignal, progress,
// and a run longer than the client's request timeout kept alive by resetTimeoutOnProgress.
//
// Usage: node steer.mjs SCENARIO JOURNAL -- SERVE_COMMAND...
// Prints one JSON object with what was observed (times in seconds).
//
//   cancel    start a run that awaits `slow` (30 s); abort it once the call reached the
//             server (JOURNAL is the toy server's --journal); then time `print('next')`.
//   progress  one run with onprogress: 3 calls, then 9 s of sleep; the notifications.
//   long      a run of 12 s with a request timeout of 5 s, resetTimeoutOnProgress on;
//             `long-no-reset` the same without it (the client gives up after 5 s).
//   queue     fill the 4 slots with runs that await `slow` (3 s), queue a fifth that calls
//             `echo` with "queued-side-effect", abort it while it waits, let the 4 finish.
//   leave     start a run that starts a child (its command line names JOURNAL's directory),
//             calls `echo`, then sleeps 60 s; close the client once the call reached the
//             server; serve's pid and how long closing took (the SDK waits for the exit).
import { basename, dirname } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { cancelMidCall, journalShows as shows, now, run } from "./common.mjs";

const sep = process.argv.indexOf("--");
const [scenario, journal] = process.argv.slice(2, sep);
const command = process.argv.slice(sep + 1);
const journalShows = (text, within, count) => shows(journal, text, within, count);

const scenarios = {
  cancel: (client) => cancelMidCall(client, journal),
  async progress(client) {
    const seen = [];
    const start = now();
    const code = "import time\nfor i in range(3):\n    await add({'a': i, 'b': 1})\ntime.sleep(9)\nprint('slept')";
    const result = await run(client, code, {
      onprogress: (p) => seen.push({ t: now() - start, progress: p.progress, message: p.message ?? null }),
    });
    return { stdout: result.structuredContent.stdout, progress: seen };
  },
  async long(client, reset = true) {
    const start = now();
    try {
      const result = await run(client, "import time\ntime.sleep(12)\nprint('slept')", {
        timeout: 5000,
        resetTimeoutOnProgress: reset,
        onprogress: () => {},
      });
      return { stdout: result.structuredContent.stdout, seconds: now() - start };
    } catch (e) {
      return { error: String(e), seconds: now() - start };
    }
  },
  "long-no-reset": (client) => scenarios.long(client, false),
  async queue(client) {
    const busy = [0, 1, 2, 3].map(() => run(client, "await slow({'seconds': 3})\nprint('busy')"));
    await journalShows("call slow", 60, 4);
    const controller = new AbortController();
    const queued = run(client, "await echo({'text': 'queued-side-effect'})", { signal: controller.signal }).then(
      () => "answered",
      (e) => `rejected: ${e.name}`,
    );
    await new Promise((r) => setTimeout(r, 500));
    controller.abort("no longer needed");
    const outcome = await queued;
    const results = await Promise.all(busy);
    await new Promise((r) => setTimeout(r, 1000));
    return { queued: outcome, busy: results.map((r) => r.structuredContent.stdout) };
  },
  async leave(client, transport) {
    const marker = `steer-${basename(dirname(journal))}`;
    const code = [
      "import subprocess, time",
      `subprocess.Popen(['/usr/bin/python3', '-c', 'import time; time.sleep(60)', '${marker}'])`,
      "await echo({'text': 'running'})",
      "time.sleep(60)",
    ].join("\n");
    run(client, code).catch(() => {});
    await journalShows("call echo");
    await new Promise((r) => setTimeout(r, 500));
    const pid = transport.pid;
    const leaving = now();
    await client.close();
    return { serve_pid: pid, marker, leave_s: now() - leaving };
  },
};

const transport = new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: "inherit" });
const client = new Client({ name: "steer-ts", version: "1.0.0" });
await client.connect(transport);
const out = await scenarios[scenario](client, transport);
await client.close();
console.log(JSON.stringify(out));

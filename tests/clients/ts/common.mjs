// What the TypeScript SDK clients (http.mjs, steer.mjs, tasks.mjs) share: the clock, waiting
// for a line in a wrapped server's journal, calling run_python, and aborting a run once its
// call has reached the wrapped server.
import { readFileSync } from "node:fs";

/** Seconds since this process started (monotonic). */
export const now = () => performance.now() / 1000;

/**
 * Wait until the file `journal` holds `text` at least `count` times; the time it did (see
 * `now`). Throws after `within` seconds.
 */
export async function journalShows(journal, text, within = 60, count = 1) {
  const end = now() + within;
  while (now() < end) {
    try {
      if (readFileSync(journal, "utf8").split(text).length > count) return now();
    } catch {}
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`the journal never showed ${text}`);
}

/** Call run_python with `code`; `options` are the SDK's request options. */
export const run = (client, code, options = {}) =>
  client.callTool({ name: "run_python", arguments: { code } }, undefined, options);

/**
 * Start a run of `code` under an AbortSignal and abort it once `journal` shows `reached`.
 * Returns how the call ended ("answered" or "rejected: NAME"), when the abort was sent and
 * when the call had ended (see `now`).
 */
export async function abortOnceReached(client, journal, code, reached) {
  const controller = new AbortController();
  const pending = run(client, code, { signal: controller.signal }).then(
    () => "answered",
    (e) => `rejected: ${e.name}`,
  );
  await journalShows(journal, reached);
  const started = now();
  controller.abort("the user changed their mind");
  const outcome = await pending;
  return { outcome, started, ended: now() };
}

/**
 * The cancel scenario: a run awaiting the toy server's `slow` (30 s) aborted once the call
 * reached the server, then the time until `print('next')` answers.
 */
export async function cancelMidCall(client, journal) {
  const code = "await slow({'seconds': 30})\nawait echo({'text': 'after-cancel'})";
  const { outcome, started, ended } = await abortOnceReached(client, journal, code, "call slow");
  const next = await run(client, "print('next')");
  return {
    outcome,
    cancel_returned_s: ended - started,
    next_stdout: next.structuredContent.stdout,
    next_after_cancel_s: now() - ended,
  };
}

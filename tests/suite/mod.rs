//! Test modules, one per subject (the index; each module's own comment lists its tests).

/// Argument checks against hostile schemas: off the runtime, within the deadline, bounded.
mod argument_checks;
/// An audit log that stops taking records stalls no run.
mod audit_stalls;
/// Client messages serve cannot read get JSON-RPC errors (stdio and HTTP).
mod bad_requests;
/// Answers to a call that hold no tool result, or an `isError` that is no boolean.
mod call_answers;
/// Calls beyond the sixteen served at once: output and the code's end are never held back.
mod call_window;
/// Catalog builds off the runtime thread, re-lists coalesced.
mod catalog_rebuilds;
/// Nothing left behind: processes, cgroups, containers, temp dirs.
mod cleanup;
/// A serve whose stdout lost its reader ends, leaving nothing behind.
mod closed_output;
/// Shared helpers: binaries, `exec`, the skip rule, backends.
pub(crate) mod common;
/// The sandbox's and the bridge's controls, on both backends.
mod controls;
/// The Docker backend end to end.
mod docker_backend;
/// `doctor` and `--strict`.
mod doctor;
/// A server that fails to start: its allow, private, approve and disabledTools lists wait for
/// its first list and do not stop the others.
mod down_server_labels;
/// The main job: `exec` and `serve` with real MCP clients.
mod end_to_end;
/// The exit codes signals leave, and what `exec` prints when one stops it.
mod exit_codes;
/// run_python as a task of protocol 2026-07-28's tasks extension, through rmcp's client.
mod extension_tasks;
/// Golden files of generated contracts.
mod golden;
/// Audit log, read-only mode, approval through elicitation.
mod governance;
/// The native sandbox's monotonic and boot clocks start near zero.
mod host_clocks;
/// A root caller's native sandboxes: host ids that tell nothing of the host's pids.
mod host_ids;
/// `serve --http`'s connections: header read timeout, connection cap.
mod http_connections;
/// `serve --http`: Streamable HTTP clients, token, Origin, sessions, metrics, shutdown.
mod http_serving;
/// Descriptors serve inherited without O_CLOEXEC reach none of its children.
mod inherited_fds;
/// A wrapped server's large lines are read while other work goes on.
mod large_lines;
/// Which layer of the native sandbox denies what.
mod layers;
/// Layers an earlier layer would hide, each alone, against a control without it.
mod layers_alone;
/// Lenient parsing of what wrapped servers send: odd optional fields, external `$ref`s.
mod lenient_parsing;
/// The warm pool through the library API, without serve.
mod library_pool;
/// A wrapped server's tool list: one deadline for all its pages, caps on its tools and bytes.
mod listing_limits;
/// Wrapped servers that misbehave.
mod misbehaving_servers;
/// The memory a wrapped server's patterns may take once compiled: per pattern, per server.
mod pattern_limits;
/// The warm pool: one run per pooled sandbox, dead and stale members replaced.
mod pool;
/// The warm pool under a catalog that keeps changing: it stops starting until the catalog rests.
mod pool_churn;
/// The warm pool's members that stall or stay silent: refills raced, silent members replaced.
mod pool_members;
/// The warm pool's CPU priority: background while a sandbox waits, normal for its run.
mod pool_priority;
/// Private data, discovery, names and schemas, several servers.
mod private_data_and_servers;
/// Hostile probes per class, judged from outside.
mod probes;
/// The bound on runs waiting for a run slot: calls past it are refused, the others run.
mod queued_runs;
/// A re-list that drops a tool the operator's labels name is put in force all the same.
mod relisted_labels;
/// Shared setup of the re-listing tests: a tool call that changes the server's tools.
mod relisting;
/// Remote servers over Streamable HTTP.
mod remote_servers;
/// A request id reused while its request is in flight is refused; the first run goes on.
mod reused_ids;
/// Runner ⇄ host protocol edge cases through `exec`.
mod runner_edge_cases;
/// runner.py against a scripted host.
mod runner_protocol;
/// Starting wrapped servers: parallel, partial failure, retries, list_changed, results.
mod server_startup;
/// The skill's numbers equal the code's constants.
mod skill;
/// A server that re-lists slowly holds runs once, at most RELIST_TIMEOUT.
mod slow_relists;
/// serve's startup cut short by its client going away or a signal: nothing left behind.
mod startup_endings;
/// The client steers its runs: cancellation, progress, going away.
mod steering;
/// `--systemd-scope`: re-running inside a delegated systemd user scope.
mod systemd_scope;
/// MCP 2025-11-25 tasks on the wire: cursors refused, fields of the session's protocol only.
mod task_wire;
/// MCP 2025-11-25 tasks: run_python as a task, wrapped tools that require tasks.
mod tasks;
/// Deadlines, call timeouts and foreign-ABI syscalls, and the numbers the description states.
mod timeouts;
/// The TypeScript MCP SDK as a client of `serve`: cancelling runs, progress.
mod ts_client;
/// A stdio client that stops reading its answers: serve stops reading it, memory bounded.
mod unread_answers;
/// Wrapped servers that stop reading their input: calls given up are never written, and
/// what waits for such a server is bounded.
mod unread_input;
/// A client that never reads serve's stderr: serve goes on answering, signals still end it.
mod unread_stderr;
/// What runs while the code awaits a tool call: timers, pipes, threads, forks, signals.
mod waiting_calls;
/// Integers beyond 64 bits pass through rmcp's message types, from servers and clients.
mod wide_integers;

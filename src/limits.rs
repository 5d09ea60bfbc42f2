//! The fixed limits of a run, in one place.
//!
//! The README states each of them ("How a call works", "Security model"); the runner receives the output limits in its `start` message, and
//! `skills/mcp-code-mode/SKILL.md` is kept equal to them by a test.

use std::time::Duration;

/// Default wall-clock deadline of one run (`--deadline`), seconds.
pub const DEFAULT_DEADLINE_SECS: u64 = 90;
/// Default number of tool calls one run may send to wrapped servers (`--max-calls`).
pub const DEFAULT_MAX_CALLS: u32 = 200;
/// Calls of one run the host may refuse (unknown tool, arguments outside the schema, past the
/// budget, ...) on top of those the budget lets through; the call after that stops the run,
/// so a flood of refused calls cannot flood the audit log, the progress notifications or the
/// host's time until the deadline.
pub const MAX_REFUSED_CALLS: u32 = 1000;
/// Time one tool call may take on its wrapped server before it is refused.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest arguments object, in UTF-8 bytes of its compact JSON.
pub const MAX_ARGS_BYTES: usize = 16 * 1024;
/// Largest result handed back to the code, in UTF-8 bytes; larger results are refused, never cut.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;
/// Longest line a stdio server may send, and largest response body of a remote one, in
/// bytes; a longer one ends the connection. Also the largest `--max-result-bytes` and
/// `maxResultBytes`: a result larger than this could never arrive.
pub const MAX_SERVER_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// Longest line `serve` takes from a stdio client, in bytes (a longer one is answered with an
/// error and skipped), so also the most code a run_python call brings; `exec --file` reads
/// at most this much code too.
pub const MAX_CLIENT_LINE_BYTES: usize = 16 * 1024 * 1024;
/// Longest message of a `ToolError` raised in the code, in characters.
pub const MAX_ERROR_CHARS: usize = 500;
/// Output kept from what the code printed (stdout and stderr together), in bytes.
pub const STDOUT_KEEP_BYTES: usize = 8 * 1024;
/// Output written by one run after which the run is stopped, in bytes.
pub const STDOUT_STOP_BYTES: usize = 1024 * 1024;
/// Longest line the host accepts from the runner, in bytes; a longer one is a protocol violation.
pub const MAX_PROTOCOL_LINE_BYTES: usize = 1024 * 1024;
/// Longest tool description kept from a wrapped server, in bytes (cut on a character boundary).
pub const MAX_DESCRIPTION_BYTES: usize = 2 * 1024;
/// Budget for the stubs in the run_python description, in characters.
pub const STUB_BUDGET_CHARS: usize = 12_000;
/// Nesting depth after which stub types are written `Any`.
pub const STUB_TYPE_DEPTH: usize = 5;
/// Longest parameter name written in a stub, in characters.
pub const MAX_PARAM_NAME_CHARS: usize = 64;
/// Memory of one sandbox, bytes (no swap on top).
pub const MEMORY_BYTES: u64 = 256 * 1024 * 1024;
/// Processes and threads in one sandbox (the launcher's default RLIMIT_NPROC, and the pids
/// cgroup limit).
pub const MAX_PIDS: u64 = launcher::args::defaults::NPROC;
/// Open files per process in the sandbox.
pub const MAX_OPEN_FILES: u64 = launcher::args::defaults::NOFILE;
/// Size of the sandbox's `/tmp` tmpfs, bytes.
pub const TMP_BYTES: u64 = launcher::args::defaults::TMP_SIZE;
/// Files, directories and symlinks the sandbox's `/tmp` may hold at once (its `nr_inodes`);
/// one more gets ENOSPC. Bounds the kernel memory `/tmp` can take where no memory cgroup
/// counts it (the rlimit fallback) to about 10 MiB per sandbox.
pub const TMP_INODES: u64 = launcher::args::defaults::TMP_INODES;
/// Largest file the sandbox can write (RLIMIT_FSIZE), bytes: no file can outgrow `/tmp`.
pub const MAX_FILE_BYTES: u64 = launcher::args::defaults::FSIZE;
/// CPUs one sandbox may use.
pub const CPUS: u64 = 1;
/// Disk reads, and disk writes, one sandbox may make per second on each of the host's
/// disks, in bytes (`src/sandbox/disks.rs`): what reaches a disk is rootfs pages the page
/// cache lacks and `O_DIRECT` reads; cached reads are not counted.
pub const DISK_BYTES_PER_SEC: u64 = 32 * 1024 * 1024;
/// Disk read, and write, operations one sandbox may make per second on each disk.
pub const DISK_OPS_PER_SEC: u64 = 1000;
/// Runs `serve` executes at the same time; further run_python calls wait for a slot (their
/// deadline starts when they start). Bounds the host memory all sandboxes can take together
/// to this many times [`MEMORY_BYTES`].
pub const MAX_CONCURRENT_RUNS: usize = 4;

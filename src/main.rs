//! The `mcp-code-mode` command: parse the command line, log to stderr, run, exit.

// `unsafe` lives only in the launcher crate (its own crate, with its `// SAFETY:` notes);
// none here, and no `#[allow]` can let one in.
#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    // The launcher must run before any thread exists, so it is dispatched first.
    mcp_code_mode::dispatch_launcher();
    mcp_code_mode::run_command_line()
}

//! The `mcp-code-mode` command: parse the command line, log to stderr, run, exit.

use std::process::ExitCode;

fn main() -> ExitCode {
    // The launcher must run before any thread exists (unshare(CLONE_NEWUSER) needs a
    // single-threaded process), so it is dispatched before anything else.
    if std::env::args_os().nth(1).as_deref()
        == Some(mcp_code_mode::sandbox::native::LAUNCHER_SUBCOMMAND.as_ref())
    {
        let code = launcher::run_from_args(std::env::args_os().skip(2));
        return ExitCode::from(u8::try_from(code).unwrap_or(125));
    }
    mcp_code_mode::cli::main()
}

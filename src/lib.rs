//! mcp-code-mode: code mode for any MCP server.
//!
//! A model writes Python that calls a wrapped MCP server's tools as async functions; the code
//! runs in a locked-down sandbox ([`sandbox`]), and every call it makes passes the host-side
//! [`bridge`], which checks it before the wrapped server sees it. [`serve`] serves all of it
//! as one MCP tool, `run_python`.
//!
//! As a library: open a [`bridge::Bridge`] over one
//! server or several ([`config::load_config`]), read its [`bridge::Bridge::stubs`] for your
//! own prompt, run code with [`run::run_code`], build the run_python server without starting
//! it with [`serve::CodeModeServer::new`], or hold one sandbox across cells with
//! [`run::HeldSandbox`] (variables kept, each cell with its own call budget).
//!
//! The private-data rule ([`run::Steering::taint`]) lasts as long as what holds the data: a
//! held sandbox's cells share one taint; each [`run::run_code`] starts untainted (its sandbox
//! is fresh), so an agent loop whose model sees one run's output before it writes the next
//! gives its runs one shared taint through [`run::run_steered`] (see [`run::run_code`]).
//!
//! The native sandbox re-executes the running program as its launcher, so a program that
//! uses [`sandbox::native::NativeBackend::for_rootfs`] calls [`dispatch_launcher`] first.
//!
//! ```standalone_crate
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use mcp_code_mode::bridge::{Bridge, ServerEntry};
//! use mcp_code_mode::run::{HeldSandbox, RunOptions, run_code};
//! use mcp_code_mode::sandbox::native::NativeBackend;
//! use mcp_code_mode::rootfs;
//!
//! fn main() -> anyhow::Result<()> {
//!     // This program doubles as the sandbox's launcher: dispatch before any thread starts.
//!     mcp_code_mode::dispatch_launcher();
//! #   let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
//! #   let toy_server = format!("{target}/debug/examples/toy_server");
//!     let runtime = tokio::runtime::Runtime::new()?;
//!     runtime.block_on(async {
//!         let toy = ServerEntry::stdio("toy", toy_server, Vec::<String>::new()).allow(["add", "echo"]);
//!         let bridge = Arc::new(Bridge::open(vec![toy], false).await?);
//!         assert!(bridge.stubs().contains("async def add(params: dict) -> str:"));
//!
//!         let rootfs = rootfs::ensure(&rootfs::Options::default())?;
//!         let backend = NativeBackend::for_rootfs(&rootfs, 60)?;
//!         let code = "print(await add({'a': 2, 'b': 3}))";
//!         let report = run_code(&bridge, &backend, code, &RunOptions::default()).await?;
//!         assert_eq!(report.result.stdout, "{\"sum\": 5}\n");
//!
//!         // One sandbox across cells: variables are kept, each cell has its own budget.
//!         let mut held = HeldSandbox::start(bridge.clone(), &backend).await?;
//!         held.cell("x = json_text = await add({'a': 1, 'b': 1})", 10, Duration::from_secs(30)).await?;
//!         let second = held.cell("print(x)", 10, Duration::from_secs(30)).await?;
//!         assert_eq!(second.result.stdout, "{\"sum\": 2}\n");
//!         held.close().await;
//!         bridge.close().await;
//!         anyhow::Ok(())
//!     })
//! }
//! ```

// `unsafe` lives only in the launcher crate (its own crate, with its `// SAFETY:` notes);
// none here, and no `#[allow]` can let one in.
#![forbid(unsafe_code)]

// The data flow: serve → run → sandbox → bridge (docs in each module).
/// The host-side checks on every tool call, and the wrapped servers behind them.
pub mod bridge;
/// The run loop between the sandbox's runner and the bridge, and the runner protocol.
pub mod run;
/// Where the code runs: the native launcher or a Docker container.
pub mod sandbox;
/// The MCP server (`run_python`) and its tool description.
pub mod serve;

mod cli;
/// `exec --file`: the code read from a file, at most as much as a run_python call brings.
mod code_file;
pub mod config;
mod doctor;
mod exact_json;
/// The audit log, the read-only mode and approval of calls through MCP elicitation.
mod governance;
/// The fixed limits of a run (deadline, calls, sizes, memory), in one place.
pub mod limits;
mod lines;
mod mcp_tasks;
mod pyjson;
pub mod rootfs;
/// SIGTERM, SIGINT and SIGHUP: how they end `serve` and `exec`, and the exit codes they leave.
mod signals;
mod stderr_log;
mod stderr_queue;

pub use serve::description;

/// Run the `mcp-code-mode` command line (`serve`, `exec`, `rootfs`, `build-image`, `doctor`)
/// and return the process's exit code: 0 on success, 1 when a run failed, 2 on a usage or
/// setup error, 128 + the signal's number when SIGTERM, SIGINT or SIGHUP ended `serve` or `exec`
/// (143, 130, 129), and `doctor`'s own 0/1/2. Call
/// [`dispatch_launcher`] before it.
pub fn run_command_line() -> std::process::ExitCode {
    cli::main()
}

/// Run the sandbox launcher and exit, when this process was started as one
/// (`PROGRAM __launcher …`), or a wrapped server tied to `serve`'s life and exec it
/// (`PROGRAM __tied SERVE_PID SERVER ARGS…`, `launcher::tied`); return at once otherwise,
/// after recording that this program has both modes (wrapped servers then start through
/// `__tied`).
///
/// Call it first thing in `main`, before any thread starts: the launcher creates a user
/// namespace, which unshare(2) refuses to a multi-threaded process (EINVAL).
pub fn dispatch_launcher() {
    if std::env::args_os().nth(1).as_deref() == Some(sandbox::native::LAUNCHER_SUBCOMMAND.as_ref())
    {
        let code = launcher::run_from_args(std::env::args_os().skip(2));
        std::process::exit(code);
    }
    if std::env::args_os().nth(1).as_deref() == Some(launcher::tied::SUBCOMMAND.as_ref()) {
        std::process::exit(launcher::tied::run_from_args(std::env::args_os().skip(2)));
    }
    bridge::upstream::tied::enable();
}

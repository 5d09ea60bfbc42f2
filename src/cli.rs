//! The command line (clap): `serve`, `exec`, `rootfs build`.
//!
//! Exit codes of `exec`: 0 when the code finished without error, 1 when it raised or was
//! stopped, 2 when the command line or startup failed (with a message on stderr). A SIGTERM,
//! SIGINT or SIGHUP ends `serve` and `exec` with 128 + its number ([`crate::signals`]);
//! `exec` prints the stopped run's result first.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::builder::TypedValueParser;
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::bridge::catalog::{PrivateLabels, Selection};
use crate::bridge::upstream::ServerSpec;
use crate::bridge::{Bridge, OpenOptions, ServerEntry};
use crate::governance::audit::{AuditLog, AuditOptions};
use crate::governance::options::GovernanceArgs;
use crate::limits::{DEFAULT_DEADLINE_SECS, DEFAULT_MAX_CALLS};
use crate::rootfs::{self, Source};
use crate::run::pool::{DEFAULT_POOL_SIZE, Pool};
use crate::run::{CANCELLED, RunOptions, Steering, run_steered};
use crate::sandbox::Backend;
use crate::sandbox::docker::DockerBackend;
use crate::sandbox::native::NativeBackend;
use crate::sandbox::native::scope::{self, ScopeMode};
use crate::serve::queue::{DEFAULT_MAX_QUEUED_BYTES, DEFAULT_MAX_QUEUED_RUNS, QueueLimits};
use crate::serve::{CodeModeServer, StdioClient};
use crate::signals;

/// Code mode for any MCP server: model-written Python in a sandbox, every tool call checked.
#[derive(Parser, Debug)]
#[command(name = "mcp-code-mode", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the run_python MCP tool on stdio (or Streamable HTTP with --http), wrapping the
    /// server after `--`.
    Serve(ServeArgs),
    /// Run code once against the wrapped server and print the result object as JSON.
    Exec(ExecArgs),
    /// Manage the sandbox's read-only Python rootfs.
    Rootfs {
        #[command(subcommand)]
        command: RootfsCommand,
    },
    /// Import the rootfs as a local Docker image (no registry) for `--backend docker`.
    BuildImage(RootfsArgs),
    /// Check which sandbox layers this host gives, one line each, with the fix for the rest
    /// (exit 0: every layer; 1: the native backend runs degraded; 2: it cannot run).
    Doctor(DoctorArgs),
}

impl Command {
    /// The `--systemd-scope` mode, for the commands that start native sandboxes.
    fn systemd_scope(&self) -> Option<ScopeMode> {
        match self {
            Command::Serve(ServeArgs { run, .. }) | Command::Exec(ExecArgs { run, .. })
                if run.backend == BackendKind::Native =>
            {
                Some(run.systemd_scope)
            }
            Command::Doctor(args) => Some(args.systemd_scope),
            _ => None,
        }
    }
}

/// The help of every `--rootfs` option; the defaults are [`rootfs::cache_root`]'s.
const ROOTFS_HELP: &str = "Cache directory of the rootfs, built there on first use (default: \
/var/cache/mcp-code-mode for root, else $XDG_CACHE_HOME/mcp-code-mode, else \
~/.cache/mcp-code-mode)";

#[derive(Args, Debug)]
struct DoctorArgs {
    /// Build the rootfs (and the Docker image, when an engine answers) if missing, so the
    /// sandbox probe can run.
    #[arg(long)]
    build: bool,
    #[arg(long, value_name = "DIR", env = "MCP_CODE_MODE_ROOTFS", help = ROOTFS_HELP)]
    rootfs: Option<PathBuf>,
    /// Check from inside a delegated systemd scope, as `serve` and `exec` would run.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    systemd_scope: ScopeMode,
}

#[derive(Subcommand, Debug)]
enum RootfsCommand {
    /// Build the rootfs (again) and print its directory.
    Build(RootfsArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
enum BackendKind {
    /// Linux namespaces, cgroups, Landlock and seccomp; no Docker, no setuid.
    Native,
    /// The same rootfs as a local Docker image, one container per run (needs a Docker engine).
    Docker,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
enum FromKind {
    /// Copy the host's python3 (any CPython >= 3.10).
    Host,
    /// Assemble it from Debian packages with apt.
    Debian,
}

#[derive(Args, Debug)]
struct RootfsArgs {
    /// Where the Python comes from.
    #[arg(long = "from", value_enum, default_value = "host")]
    from: FromKind,
    /// The host interpreter to copy with `--from host` (default: python3 on PATH).
    #[arg(long)]
    python: Option<PathBuf>,
    #[arg(long, value_name = "DIR", env = "MCP_CODE_MODE_ROOTFS", help = ROOTFS_HELP)]
    rootfs: Option<PathBuf>,
}

impl RootfsArgs {
    fn options(self) -> rootfs::Options {
        rootfs::Options {
            source: match self.from {
                FromKind::Host => Source::Host {
                    python: self.python,
                },
                FromKind::Debian => Source::Debian,
            },
            cache_root: self.rootfs,
            quiet: false,
        }
    }
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Where the code runs.
    #[arg(long, value_enum, default_value = "native")]
    backend: BackendKind,
    /// Keep only this tool (repeatable; default: all tools).
    #[arg(long = "allow", value_name = "TOOL")]
    allow: Vec<String>,
    /// Label this tool private (repeatable): after it is called, only private tools work.
    #[arg(long = "private", value_name = "TOOL")]
    private: Vec<String>,
    /// Pass this variable from our environment to the wrapped server (repeatable); an unset
    /// one is an error, as an unset `${VAR}` in a config file is.
    #[arg(long = "env", value_name = "NAME", value_parser = env_name)]
    env: Vec<String>,
    /// Several servers from an `mcpServers` config file (instead of --allow, --private,
    /// --env and the command).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Wall-clock deadline of one run, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_DEADLINE_SECS, value_parser = clap::value_parser!(u64).range(1..=3600))]
    deadline: u64,
    /// Tool calls one run may send.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CALLS, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    max_calls: u32,
    #[arg(long, value_name = "DIR", env = "MCP_CODE_MODE_ROOTFS", help = ROOTFS_HELP)]
    rootfs: Option<PathBuf>,
    /// Time one wrapped tool call may take, in seconds (above 0, at most 3600); a config
    /// entry's `timeout` overrides it for that server. The run's deadline still bounds
    /// every call.
    #[arg(long, value_name = "SECONDS", default_value_t = crate::limits::CALL_TIMEOUT.as_secs_f64(), value_parser = call_timeout_secs)]
    call_timeout: f64,
    /// Time each wrapped server may take to start and answer `initialize` and `tools/list`,
    /// in seconds (above 0, at most 3600); a config entry's `startupTimeout` overrides it
    /// for that server. `serve` answers its client's `initialize` only once every server
    /// has started or failed, so a hanging server delays it by this much.
    #[arg(long, value_name = "SECONDS", default_value_t = crate::bridge::STARTUP_TIMEOUT.as_secs_f64(), value_parser = call_timeout_secs)]
    startup_timeout: f64,
    /// All or nothing: refuse to start unless every wrapped server starts, and the native
    /// backend unless every layer `doctor` checks is ok (exit 2 with what is not).
    #[arg(long)]
    strict: bool,
    /// Largest tool result handed to the code, in bytes (a config entry's `maxResultBytes`
    /// wins for its server); larger results are refused, never cut. At most 16 MiB, the
    /// longest message a wrapped server may send.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..=(crate::limits::MAX_SERVER_MESSAGE_BYTES as u64)))]
    max_result_bytes: Option<u64>,
    /// Run inside a delegated systemd user scope (systemd-run --user --scope -p
    /// Delegate=yes), so runs get cgroup limits where no cgroup is writable: auto (only
    /// then, on cgroup v2 with a reachable user manager), on (always; fail if impossible),
    /// off. Native backend only.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    systemd_scope: ScopeMode,
    #[command(flatten)]
    governance: GovernanceArgs,
    /// The wrapped MCP server's command and arguments: everything after `--`, or from the
    /// first argument that is not an option on (so `serve npx -y server` works too, as the
    /// MCP Inspector CLI passes it). An unknown option before the command is refused by
    /// name rather than taken as the command (so `exec --bogus --code …` says `--bogus`).
    #[arg(value_name = "COMMAND", trailing_var_arg = true, num_args = 0..)]
    command: Vec<String>,
}

#[derive(Args, Debug)]
struct ServeArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Sandboxes kept started ahead, each ready for one run (0: every run starts its own).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_POOL_SIZE, value_parser = clap::value_parser!(u16).range(0..=64))]
    pool: u16,
    /// Runs that may wait for a run slot at once, over every session; a call past it gets
    /// a tool error at once (0: none waits).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_QUEUED_RUNS, value_parser = clap::value_parser!(u32).range(0..=1_000_000).map(|n| n as usize))]
    max_queued_runs: usize,
    /// Bytes of code the runs waiting for a run slot may hold together; a call that would
    /// take them past it gets a tool error at once.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_QUEUED_BYTES, value_parser = clap::value_parser!(u64).range(0..=(1 << 40)).map(|n| n as usize))]
    max_queued_bytes: usize,
    #[command(flatten)]
    http: crate::serve::http::args::HttpArgs,
}

impl ServeArgs {
    /// The bounds of the runs waiting for a slot.
    fn queue_limits(&self) -> QueueLimits {
        QueueLimits {
            runs: self.max_queued_runs,
            bytes: self.max_queued_bytes,
        }
    }
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["code", "file"])))]
struct ExecArgs {
    /// The code to run.
    #[arg(long)]
    code: Option<String>,
    /// A file holding the code to run.
    #[arg(long)]
    file: Option<PathBuf>,
    #[command(flatten)]
    run: RunArgs,
}

/// Parse the command line and run; the process's exit code. Lines still queued for stderr
/// are given [`crate::stderr_queue::FINAL_WAIT`] to be written: a stderr nobody reads does
/// not keep the process from ending.
pub(crate) fn main() -> ExitCode {
    let code = run();
    crate::stderr_queue::finish(crate::stderr_queue::FINAL_WAIT);
    code
}

fn run() -> ExitCode {
    let cli = Cli::parse();
    init_logging(matches!(cli.command, Command::Serve(_)));
    // Descriptors our own parent leaked without O_CLOEXEC (a pipe, a socket) would pass on
    // to every wrapped server, launcher and docker client we start; ours are close-on-exec
    // already, and those a child should get are handed to it at its spawn.
    if let Err(e) = launcher::fds::close_on_exec_above_stdio() {
        tracing::warn!(
            "could not mark inherited descriptors close-on-exec, so the processes started here inherit them: {e}"
        );
    }
    // Before any thread or child exists: this may re-execute us inside a systemd scope.
    if let Some(mode) = cli.command.systemd_scope()
        && let Err(e) = scope::enter(mode)
    {
        crate::stderr_log::error_line(&e.to_string());
        return ExitCode::from(2);
    }
    // From here on the process stays itself: stderr is written by a thread of its own, so
    // that a client that never reads it cannot freeze the runtime thread below.
    crate::stderr_queue::start();
    // One thread runs every task: a tool call's wake-ups (the runner's line, the server's
    // answer, the result written back) stay on it instead of waking a second worker, which
    // took about 15% of serve's CPU per call and 1.5 of its 4 context switches. Nothing may
    // block this thread: blocking work (spawning sandboxes, cgroupfs) runs on the spawner
    // thread and tokio's blocking pool, and stdin is read without either (`ClientInput`), so
    // that a client holding stdin open does not hold the shutdown below for its 2 s.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            crate::stderr_log::error_line(&format!("failed to start the async runtime: {e}"));
            return ExitCode::from(2);
        }
    };
    let outcome = runtime.block_on(dispatch(cli));
    runtime.shutdown_timeout(Duration::from_secs(2));
    match outcome {
        Ok(code) => code,
        Err(e) => {
            crate::stderr_log::error_line(&format!("{e:#}"));
            ExitCode::from(2)
        }
    }
}

fn init_logging(serving: bool) {
    // rmcp logs every handshake and notification at info; its warnings are enough here.
    let default = if serving { "info,rmcp=warn" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("MCP_CODE_MODE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(crate::stderr_log::EscapedStderr)
        .with_ansi(false)
        .with_target(false)
        .try_init();
}

async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Doctor(args) => {
            let report = crate::doctor::run(args.rootfs, args.build).await;
            #[allow(clippy::print_stdout)]
            {
                print!("{}", report.render());
            }
            Ok(ExitCode::from(report.exit_code()))
        }
        Command::BuildImage(args) => {
            let options = args.options();
            let tag = tokio::task::spawn_blocking(move || -> anyhow::Result<String> {
                let rootfs = rootfs::ensure(&options)?;
                Ok(crate::sandbox::docker::build_image(&rootfs)?)
            })
            .await??;
            #[allow(clippy::print_stdout)]
            {
                println!("{tag}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Rootfs {
            command: RootfsCommand::Build(args),
        } => {
            let options = args.options();
            let built = tokio::task::spawn_blocking(move || rootfs::build(&options)).await??;
            #[allow(clippy::print_stdout)]
            {
                println!("{}", built.dir.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(args) => {
            let http = args.http.options()?;
            if let Some(http) = http {
                // SIGTERM, SIGINT or SIGHUP during startup ends it; later, it starts a
                // graceful shutdown.
                let caught = Arc::new(std::sync::OnceLock::new());
                let mut shutdown = Box::pin(signals::recorded(&caught));
                let prepared = tokio::select! {
                    biased;
                    prepared = prepare(&args.run) => Some(prepared),
                    () = &mut shutdown => None,
                };
                let Some((bridge, backend, options)) = prepared.transpose()? else {
                    return Ok(startup_ended(caught.get().copied()).await);
                };
                let pool = Arc::new(Pool::new(bridge.clone(), backend, usize::from(args.pool)));
                let server = CodeModeServer::with_pool(bridge.clone(), pool.clone(), options)
                    .with_session_runs(http.session_runs)
                    .with_queue_limits(args.queue_limits());
                let served = crate::serve::http::serve_http(server, http, shutdown).await;
                pool.close().await;
                bridge.close().await;
                served?;
                return Ok(caught.get().map_or(ExitCode::SUCCESS, |ending| {
                    ExitCode::from(ending.exit_code())
                }));
            }
            // The client's pipes and the signals are watched before the wrapped servers
            // start: a client that goes away (stdin ends) or a signal during startup ends it.
            let mut client = StdioClient::take();
            let mut signalled = Box::pin(signals::first());
            let prepared = tokio::select! {
                biased;
                prepared = client.unless_gone(prepare(&args.run)) => prepared,
                ending = &mut signalled => return Ok(startup_ended(Some(ending)).await),
            };
            let Some((bridge, backend, options)) = prepared.transpose()? else {
                return Ok(startup_ended(None).await);
            };
            let pool = Arc::new(Pool::new(bridge.clone(), backend, usize::from(args.pool)));
            let server = CodeModeServer::with_pool(bridge.clone(), pool.clone(), options)
                .with_queue_limits(args.queue_limits());
            // A signal cancels the runs and ends the session as the client's leaving does:
            // each run's answer (cancelled at shutdown) is still written to the client.
            let ender = server.clone();
            let wind_down = move || {
                ender.stop_taking_runs();
                ender.cancel_all_runs();
            };
            let serving = server.serve_stdio(client);
            let served =
                signals::until_signal_wound_down(serving, signalled, wind_down, SIGNAL_WIND_DOWN)
                    .await;
            pool.close().await;
            bridge.close().await;
            match served {
                Ok(served) => served.map(|()| ExitCode::SUCCESS),
                Err(ending) => Ok(ExitCode::from(ending.exit_code())),
            }
        }
        Command::Exec(args) => {
            let code = match (&args.code, &args.file) {
                (Some(code), _) => code.clone(),
                (None, Some(path)) => crate::code_file::read(path)?,
                (None, None) => bail!("give --code or --file"),
            };
            let (bridge, backend, options) = prepare(&args.run).await?;
            let (report, ending) =
                run_until_signal(&bridge, backend.as_ref(), &code, &options).await;
            // A start cut short by a signal is removed in the background: wait for it.
            let _ = tokio::time::timeout(crate::run::pool::ENDING_LIMIT, backend.settle()).await;
            bridge.close().await;
            let report = report?;
            // Which limits held is part of what a run reports; stdout carries only the result.
            // A run refused before its sandbox started held no limits: no empty field then.
            match &report.limits {
                Some(limits) => crate::stderr_log::line(&format!(
                    "mcp-code-mode: limits: {limits}; calls sent: {}",
                    report.calls
                )),
                None => {
                    crate::stderr_log::line(&format!("mcp-code-mode: calls sent: {}", report.calls))
                }
            }
            #[allow(clippy::print_stdout)]
            {
                println!("{}", report.result.to_json());
            }
            Ok(match ending {
                Some(ending) => ExitCode::from(ending.exit_code()),
                None if report.result.succeeded() => ExitCode::SUCCESS,
                None => ExitCode::from(1),
            })
        }
    }
}

/// How long a signal-ended `serve` on stdio lets its session end after cancelling its runs
/// (each run ends within its sandbox's kill, at most 500 ms), so that their answers reach the
/// client; then it is dropped.
const SIGNAL_WIND_DOWN: Duration = Duration::from_secs(2);

/// How long an ended startup waits at most for the wrapped servers it started to be reaped.
const STARTUP_REAP_WAIT: Duration = Duration::from_millis(200);
/// How often that wait looks whether a child is left.
const STARTUP_REAP_POLL: Duration = Duration::from_millis(2);

/// serve's exit after its startup ended unfinished, by `ending` or (`None`) by the client
/// going away: 0, or 128 + the signal's number. The dropped startup killed the servers it
/// had started (each server's process is killed when dropped); this gives their watchers
/// up to [`STARTUP_REAP_WAIT`] to reap them, so that none is left as a zombie, and ends as
/// soon as this process has no child left.
async fn startup_ended(ending: Option<signals::Ending>) -> ExitCode {
    if let Some(ending) = ending {
        tracing::info!("{} during startup; ending", ending.name());
    }
    let waited = std::time::Instant::now();
    while has_children() && waited.elapsed() < STARTUP_REAP_WAIT {
        tokio::time::sleep(STARTUP_REAP_POLL).await;
    }
    ending.map_or(ExitCode::SUCCESS, |ending| {
        ExitCode::from(ending.exit_code())
    })
}

/// Whether this process has a child not yet reaped, running or exited: waitid(2) on every
/// child with `WNOHANG | WNOWAIT` looks without reaping (tokio's watchers reap them), and
/// fails with ECHILD only when no child is left.
fn has_children() -> bool {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    !matches!(waitid(Id::All, flags), Err(nix::errno::Errno::ECHILD))
}

/// `exec`'s run, stopped by the first SIGTERM, SIGINT or SIGHUP: its sandbox is killed, and
/// the result keeps what the code printed, with an error naming the signal (`stopped by
/// SIGINT; the sandbox was killed`). The signal, if one came, is returned beside the result.
async fn run_until_signal(
    bridge: &Arc<Bridge>,
    backend: &dyn Backend,
    code: &str,
    options: &RunOptions,
) -> (
    Result<crate::run::RunReport, crate::sandbox::SandboxError>,
    Option<signals::Ending>,
) {
    let steering = Steering::default();
    // Watched before the run starts, so no signal slips past while it is first polled.
    let signalled = signals::first();
    let run = run_steered(bridge, backend, code, options, &steering);
    tokio::pin!(run);
    let ending = tokio::select! {
        report = &mut run => return (report, None),
        ending = signalled => ending,
    };
    // A cancelled run returns at once with what the code printed so far.
    steering.cancel.cancel();
    let mut report = run.await;
    if let Ok(report) = &mut report
        && report.result.error.as_deref() == Some(CANCELLED)
    {
        report.result.error = Some(format!(
            "stopped by {}; the sandbox was killed",
            ending.name()
        ));
    }
    (report, Some(ending))
}

/// `--call-timeout` and `--startup-timeout`: seconds above 0 and at most 3600.
/// An `--env` value: a variable's name. `NAME=VALUE` (the form MCP client configs use) is
/// refused saying `--env` takes a name and where the value goes, instead of looking up a
/// variable called `NAME=VALUE`, which is never set.
fn env_name(text: &str) -> Result<String, String> {
    match text.split_once('=') {
        Some((name, _)) => Err(format!(
            "--env takes a variable name, and {text:?} is not one: set {name} in the environment this program starts with (an MCP client sets it through the server entry's \"env\") and pass --env {name}"
        )),
        None if text.is_empty() => Err("--env takes a variable name, not an empty word".into()),
        None => Ok(text.to_owned()),
    }
}

fn call_timeout_secs(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if secs > 0.0 && secs <= 3600.0 => Ok(secs),
        _ => Err("a number of seconds above 0 and at most 3600".into()),
    }
}

/// The servers to wrap, and the config file's `audit` when there is one.
fn entries(args: &RunArgs) -> anyhow::Result<(Vec<ServerEntry>, Option<AuditOptions>)> {
    if let Some(path) = &args.config {
        if !args.allow.is_empty()
            || !args.private.is_empty()
            || !args.env.is_empty()
            || !args.governance.approve.is_empty()
            || !args.command.is_empty()
        {
            bail!(
                "--config cannot be combined with --allow, --private, --env, --approve or a server command: put those in the config file"
            );
        }
        let config = crate::config::load(path)?;
        for warning in &config.warnings {
            tracing::warn!("config: {warning}");
        }
        return Ok((config.servers, config.audit));
    }
    let Some((command, rest)) = args.command.split_first() else {
        bail!("no server command: put the wrapped MCP server's command after `--`");
    };
    let mut env = Vec::new();
    for name in &args.env {
        match std::env::var(name) {
            Ok(value) => env.push((name.clone(), value)),
            // As an unset `${VAR}` in a config file stops startup (config/vars.rs).
            Err(_) => bail!("--env {name}: the variable {name} is not set in this environment"),
        }
    }
    let entry = ServerEntry {
        spec: ServerSpec {
            name: "server".into(),
            command: command.clone(),
            args: rest.to_vec(),
            env,
            cwd: None,
            remote: None,
            startup_timeout: None,
        },
        selection: Selection {
            allow: (!args.allow.is_empty()).then(|| args.allow.clone()),
            private: if args.private.is_empty() {
                PrivateLabels::None
            } else {
                PrivateLabels::Some(args.private.clone())
            },
            deny: Vec::new(),
            ..Selection::default()
        },
        max_result_bytes: None,
        call_timeout: None,
        from_command_line: true,
    };
    Ok((vec![entry], None))
}

async fn prepare(args: &RunArgs) -> anyhow::Result<(Arc<Bridge>, Arc<dyn Backend>, RunOptions)> {
    let (mut entries, config_audit) = entries(args)?;
    let startup_timeout = Duration::try_from_secs_f64(args.startup_timeout)
        .context("--startup-timeout must be a number of seconds above 0")?;
    for entry in &mut entries {
        entry.spec.startup_timeout.get_or_insert(startup_timeout);
    }
    args.governance.apply(&mut entries);
    // Opened before anything starts: an audit log that cannot be opened stops startup.
    let audit = match args.governance.audit_options().or(config_audit) {
        Some(options) => Some(Arc::new(AuditLog::open(options)?)),
        None => None,
    };
    let options = RunOptions {
        deadline: Duration::from_secs(args.deadline),
        max_calls: args.max_calls,
    };
    let call_timeout = Duration::try_from_secs_f64(args.call_timeout)
        .context("--call-timeout must be a number of seconds above 0")?;
    let rootfs_options = rootfs::Options {
        source: Source::Host { python: None },
        cache_root: args.rootfs.clone(),
        quiet: false,
    };
    // The wrapped servers start (all at once) while the rootfs is checked or built.
    let open = Bridge::open_with(
        entries,
        OpenOptions {
            prefixed: args.config.is_some(),
            strict: args.strict,
        },
    );
    let ensure = tokio::task::spawn_blocking(move || rootfs::ensure(&rootfs_options));
    let (bridge, rootfs) = tokio::join!(open, ensure);
    let mut bridge = bridge?.with_call_timeout(call_timeout);
    if let Some(bytes) = args.max_result_bytes {
        bridge = bridge.with_max_result_bytes(usize::try_from(bytes).unwrap_or(usize::MAX));
    }
    if let Some(log) = audit {
        bridge = bridge.with_audit(log);
    }
    let bridge = Arc::new(bridge);
    let backend = async {
        let rootfs = rootfs?.context("failed to prepare the sandbox's rootfs")?;
        backend(args, rootfs).await
    };
    match backend.await {
        Ok(backend) => Ok((bridge, backend, options)),
        Err(e) => {
            bridge.close().await;
            Err(e)
        }
    }
}

async fn backend(args: &RunArgs, rootfs: rootfs::Rootfs) -> anyhow::Result<Arc<dyn Backend>> {
    if args.strict && args.backend == BackendKind::Native {
        crate::doctor::require_every_layer(&rootfs).await?;
    }
    Ok(match args.backend {
        BackendKind::Native => Arc::new(NativeBackend::new(
            std::env::current_exe().context("failed to find this program's path")?,
            rootfs.dir.clone(),
            rootfs.argv(),
            args.deadline + 5,
        )),
        BackendKind::Docker => {
            let cpu_seconds = args.deadline + 5;
            Arc::new(
                tokio::task::spawn_blocking(move || DockerBackend::new(&rootfs, cpu_seconds))
                    .await?
                    .context("failed to prepare the docker backend")?,
            )
        }
    })
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;

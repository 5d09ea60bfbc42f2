//! The Docker backend: the same rootfs as an image, one container per run.
//!
//! Per backend: the rootfs directory is imported as a local image tagged by its content digest
//! (no registry; [`build_image`]), containers left by an earlier process that died are
//! removed, and the launcher's seccomp policy is exported as Docker's profile JSON
//! (`seccomp_json`). Per run, over the Docker Engine API (the `bollard` client, to the
//! engine the `docker` client reaches: `DOCKER_HOST`, else the current context's endpoint,
//! by default `/var/run/docker.sock`): the container is created
//! ([`create::create_body`]: no network, a read-only root, a small /tmp, uid 65534, no
//! capabilities, no_new_privs, the exported seccomp profile, the limits of
//! [`crate::limits`]), attached to (its stdin and its stdout are the protocol, its stderr is
//! drained), then started. No client process is kept per sandbox: the attach is a
//! connection `serve` holds. stdin is closed for good when that connection ends
//! (`StdinOnce`), so the runner exits when `serve` drops the sandbox or dies. No automatic
//! removal: `wait` reads the exit status and `OOMKilled`, then removes the container;
//! whatever path a run ends by, dropping its [`crate::sandbox::SandboxControl`] removes the
//! container, over the API in a task of the backend's, off the runtime's thread (the
//! `docker` client when no runtime runs); a start whose caller went away finishes its
//! current step and removes what it made ([`Backend::settle`] waits for both). The image
//! import, the stray sweep, the reaper and the removal's fallback run the `docker` client,
//! which gets only `PATH`, `HOME`, `DOCKER_HOST` and `DOCKER_CONTEXT` from our environment.
//!
//! What the code inside sees of its environment: `PATH` (Docker's default, added by Docker
//! when the image sets none), `HOSTNAME=sandbox` (set by Docker), `HOME=/nonexistent` (from
//! the rootfs's /etc/passwd); nothing of the host's. Docker also bind-mounts generated
//! /etc/hosts, /etc/hostname and /etc/resolv.conf (with `nameserver 0.0.0.0`, not the host's
//! resolver); /sys, /dev/pts and /dev/mqueue are covered by empty read-only tmpfs mounts.
//! /dev holds Docker's default nodes (null, zero, full, random, urandom, tty) and the fd links.

mod container;
pub mod create;
mod seccomp_json;

use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{Backend, BoxFuture, Sandbox, SandboxError};
use crate::rootfs::Rootfs;
use crate::sandbox::disks::whole_disks;
use crate::sandbox::owner::{Owner, RunName};

/// Repository of the images built from rootfs directories; the tag is the first 16 hex
/// characters of the rootfs digest.
pub const IMAGE_REPOSITORY: &str = "mcp-code-mode-rootfs";
/// Image label holding the full rootfs digest.
pub const DIGEST_LABEL: &str = "mcp-code-mode.rootfs-digest";
/// Container label marking our containers; its value is the process that started the
/// container, as `Owner` writes it. The container's name is a [`RunName`], by which
/// [`remove_strays`] judges it.
pub const OWNER_LABEL: &str = "mcp-code-mode.owner";
/// The only variables of our environment the docker client receives.
pub const CLIENT_ENV: [&str; 4] = ["PATH", "HOME", "DOCKER_HOST", "DOCKER_CONTEXT"];
/// uid and gid of the code inside (the rootfs's /etc/passwd entry `nobody`).
pub const SANDBOX_ID: u32 = launcher::idmap::SANDBOX_ID;
/// Longest time one `docker` command (import, list, rm) may take, and the longest wait for
/// the engine's answer to one API request (create, attach, start, kill, inspect, remove; a
/// stream, such as an attach or a wait for the exit, is not bounded once it has begun).
pub const DOCKER_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

const HINT: &str = "is the Docker engine running? see scripts/start-docker";

/// What can go wrong with Docker.
#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    /// A docker (or tar) command could not be started, timed out, or failed.
    #[error("failed to {what}: {why} ({HINT})")]
    Command {
        /// What we tried to do, e.g. `import the rootfs as image mcp-code-mode-rootfs:…`.
        what: String,
        /// The error, or the command's stderr.
        why: String,
    },
    /// The seccomp profile could not be exported or written.
    #[error("failed to write the seccomp profile for docker: {0}")]
    Seccomp(String),
}

fn command_error(what: impl Into<String>, why: impl Into<String>) -> DockerError {
    DockerError::Command {
        what: what.into(),
        why: why.into(),
    }
}

/// The image tag for `rootfs`: `mcp-code-mode-rootfs:<first 16 hex of its digest>`.
pub fn image_tag(rootfs: &Rootfs) -> String {
    let short: String = rootfs.digest.chars().take(16).collect();
    format!("{IMAGE_REPOSITORY}:{short}")
}

/// The variables the docker client gets out of `env`: only those named in [`CLIENT_ENV`].
pub fn client_env(env: impl IntoIterator<Item = (String, String)>) -> Vec<(String, String)> {
    env.into_iter()
        .filter(|(k, _)| CLIENT_ENV.contains(&k.as_str()))
        .collect()
}

/// A `docker` command with an empty environment but [`client_env`] of ours.
fn docker_std() -> std::process::Command {
    let mut command = std::process::Command::new("docker");
    command
        .env_clear()
        .envs(client_env(std::env::vars()))
        .stdin(Stdio::null());
    command
}

/// Runs a short docker command to its end, bounded by [`DOCKER_COMMAND_TIMEOUT`]; its
/// stdout on success.
fn run_bounded(mut command: std::process::Command, what: &str) -> Result<String, DockerError> {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|e| command_error(what, format!("cannot run docker: {e}")))?;
    let status =
        wait_bounded(&mut child, DOCKER_COMMAND_TIMEOUT).map_err(|why| command_error(what, why))?;
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    if status.success() {
        Ok(out)
    } else {
        Err(command_error(what, format!("{status}: {}", err.trim())))
    }
}

/// Waits for `child` at most `limit`, killing it when the time is up.
fn wait_bounded(
    child: &mut std::process::Child,
    limit: Duration,
) -> Result<std::process::ExitStatus, String> {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if start.elapsed() >= limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("timed out after {} s", limit.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Imports `rootfs.dir` as the image [`image_tag`] (`tar -c | docker import -`, no registry),
/// labelled with [`DIGEST_LABEL`]; does nothing when the tag exists. Prints a progress line
/// on stderr when it imports. Files are owned by root in the image, whoever built the rootfs.
/// Returns the tag.
///
/// # Errors
/// [`DockerError::Command`] when docker or tar cannot run or fails.
pub fn build_image(rootfs: &Rootfs) -> Result<String, DockerError> {
    let tag = image_tag(rootfs);
    if image_exists(&tag)? {
        return Ok(tag);
    }
    let what = format!("import the rootfs {} as image {tag}", rootfs.dir.display());
    crate::stderr_log::line(&format!(
        "docker: importing the rootfs {} as image {tag}",
        rootfs.dir.display()
    ));
    let mut tar = std::process::Command::new("tar")
        .args(["--owner=0", "--group=0", "--numeric-owner", "-C"])
        .arg(&rootfs.dir)
        .args(["-c", "."])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| command_error(&what, format!("cannot run tar: {e}")))?;
    let Some(tar_out) = tar.stdout.take() else {
        return Err(command_error(&what, "tar has no stdout"));
    };
    let mut import = docker_std();
    import
        .arg("import")
        .arg("--change")
        .arg(format!(
            "LABEL {DIGEST_LABEL}={} mcp-code-mode.python={}",
            rootfs.digest, rootfs.python_version
        ))
        .arg("--message")
        .arg(format!("mcp-code-mode rootfs {}", rootfs.key))
        .arg("-")
        .arg(&tag)
        .stdin(Stdio::from(tar_out));
    let imported = run_bounded(import, &what);
    let tar_status = wait_bounded(&mut tar, DOCKER_COMMAND_TIMEOUT);
    imported?;
    match tar_status {
        Ok(status) if status.success() => Ok(tag),
        Ok(status) => {
            let mut err = String::new();
            if let Some(mut e) = tar.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            Err(command_error(what, format!("tar {status}: {}", err.trim())))
        }
        Err(why) => Err(command_error(what, format!("tar {why}"))),
    }
}

fn image_exists(tag: &str) -> Result<bool, DockerError> {
    let mut command = docker_std();
    command
        .args(["image", "ls", "--quiet", "--filter"])
        .arg(format!("reference={tag}"));
    Ok(!run_bounded(command, &format!("look for image {tag}"))?
        .trim()
        .is_empty())
}

/// Removes the containers with an [`OWNER_LABEL`] whose name is a [`RunName`] of a dead
/// process (a serve or exec that was killed before it could clean up). Returns how many
/// were removed.
///
/// # Errors
/// [`DockerError::Command`] when docker cannot list or remove them.
pub fn remove_strays() -> Result<usize, DockerError> {
    let mut list = docker_std();
    list.args(["ps", "--all", "--no-trunc", "--filter"])
        .arg(format!("label={OWNER_LABEL}"))
        .arg("--format")
        .arg("{{.Names}}");
    let listed = run_bounded(list, "list the sandbox containers")?;
    let strays: Vec<&str> = listed
        .lines()
        .map(str::trim)
        .filter(|name| RunName::is_stray(name))
        .collect();
    if strays.is_empty() {
        return Ok(0);
    }
    tracing::warn!(
        "removing {} container(s) left by a process that died: {}",
        strays.len(),
        strays.join(", ")
    );
    let mut rm = docker_std();
    rm.args(["rm", "--force"]).args(&strays);
    run_bounded(rm, "remove containers left by a process that died")?;
    Ok(strays.len())
}

/// `$0` of the reaper's shell: tests and `ps` find it by this name.
pub const REAPER_NAME: &str = "mcp-code-mode-reaper";

/// The reaper's script: wait for end of file on stdin (a pipe whose only writer is this
/// process), then force-remove every container labelled with the owner `$1`.
const REAPER_SCRIPT: &str = "cat >/dev/null; \
    ids=$(docker ps --all --quiet --no-trunc --filter \"label=$2=$1\"); \
    [ -z \"$ids\" ] || docker rm --force $ids >/dev/null 2>&1";

/// Starts, once per process, a reaper that removes this process's containers when it dies,
/// however it dies (SIGKILL included), so a sandbox's code does not outlive `serve` or
/// `exec`. The reaper is a `sh` outside the container (the code cannot reach it), in its own
/// process group (a terminal's Ctrl-C to our group does not end it), whose stdin is a pipe
/// whose write end only this process holds (close-on-exec, never closed while we live): the
/// kernel closes it when we die, the reaper reads end of file, lists the containers with
/// our [`OWNER_LABEL`] and removes them (`docker rm --force`: SIGKILL, then removal). It
/// idles in `read(2)` until then, and also runs at an ordinary exit, when it finds nothing.
/// When the reaper itself cannot start, or is killed together with us, the bounds left are
/// each process's RLIMIT_CPU and the next start's [`remove_strays`].
fn start_reaper() {
    static WRITER: std::sync::OnceLock<Option<std::process::ChildStdin>> =
        std::sync::OnceLock::new();
    WRITER.get_or_init(|| {
        use std::os::unix::process::CommandExt;
        let owner = Owner::current().to_string();
        let mut command = std::process::Command::new("sh");
        command
            .arg("-c")
            .arg(REAPER_SCRIPT)
            .arg(REAPER_NAME)
            .arg(&owner)
            .arg(OWNER_LABEL)
            .env_clear()
            .envs(client_env(std::env::vars()))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        match command.spawn() {
            // The child is never waited for: it ends only after we do.
            Ok(mut child) => child.stdin.take(),
            Err(e) => {
                tracing::warn!(
                    "cannot start the container reaper (sh: {e}): if this process is \
                     killed, its containers run on until RLIMIT_CPU or the next start"
                );
                None
            }
        }
    });
}

/// Starts sandboxes as Docker containers of the rootfs image.
pub struct DockerBackend {
    image: String,
    argv: Vec<String>,
    /// Docker's seccomp profile, compact JSON.
    seccomp_profile: String,
    owner: String,
    cpu_seconds: u64,
    engine: container::Engine,
}

impl DockerBackend {
    /// A backend for `rootfs`, with RLIMIT_CPU of `cpu_seconds` in each container. Blocking:
    /// builds the image when it is missing ([`build_image`]), starts this process's reaper
    /// once ([`start_reaper`]), removes containers of dead owners ([`remove_strays`]) and
    /// exports the seccomp profile. The engine's API connection, to the engine the `docker`
    /// client reaches, is made at the first spawn.
    ///
    /// # Errors
    /// [`DockerError::Command`] when the engine does not answer or the import fails;
    /// [`DockerError::Seccomp`] when the profile cannot be exported.
    pub fn new(rootfs: &Rootfs, cpu_seconds: u64) -> Result<Self, DockerError> {
        let image = build_image(rootfs)?;
        start_reaper();
        if let Err(e) = remove_strays() {
            tracing::warn!("{e}");
        }
        let text = seccomp_json::export_text(&launcher::seccomp::policy())
            .map_err(|e| DockerError::Seccomp(e.to_string()))?;
        // Compact, as `docker run --security-opt seccomp=FILE` sends the file's content.
        let seccomp_profile = serde_json::from_str::<serde_json::Value>(&text)
            .map(|profile| profile.to_string())
            .map_err(|e| DockerError::Seccomp(e.to_string()))?;
        Ok(Self {
            image,
            argv: rootfs.argv(),
            seccomp_profile,
            owner: Owner::current().to_string(),
            cpu_seconds,
            engine: container::Engine::new(container::engine_host(std::env::vars())),
        })
    }

    /// The create request of one container: [`create::create_body`] with this backend's
    /// image, command, owner, profile and RLIMIT_CPU, and this host's whole disks.
    pub fn create_body(&self) -> bollard::models::ContainerCreateBody {
        let disks = create::disk_nodes(&whole_disks(Path::new("/sys/block")), Path::new("/dev"));
        create::create_body(&create::ContainerSpec {
            owner: &self.owner,
            seccomp_profile: &self.seccomp_profile,
            cpu_seconds: self.cpu_seconds,
            image: &self.image,
            argv: &self.argv,
            disks: &disks,
        })
    }
}

impl Backend for DockerBackend {
    fn spawn(&self) -> BoxFuture<'_, Result<Sandbox, SandboxError>> {
        Box::pin(async move {
            let name = RunName::next().to_string();
            self.engine.start(name, self.create_body()).await
        })
    }

    fn settle(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.engine.settled())
    }
}

#[cfg(test)]
mod tests;

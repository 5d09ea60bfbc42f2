//! The Docker backend: the same rootfs as an image, one container per run.
//!
//! Per backend: the rootfs directory is imported as a local image tagged by its content digest
//! (no registry; [`build_image`]), containers left by an earlier process that died are
//! removed, and the launcher's seccomp policy is written as Docker's profile JSON to a private
//! temp file (`seccomp_json`). Per run: `docker run -i` (the container's
//! stdin/stdout are the protocol) with no network, a read-only root, a small /tmp, uid 65534,
//! no capabilities, no_new_privs, the exported seccomp profile, and the limits of
//! [`crate::limits`]. The docker client gets only `PATH`, `HOME`, `DOCKER_HOST` and
//! `DOCKER_CONTEXT` from our environment. No `--rm`: after the client exits, `wait` reads
//! `OOMKilled` and removes the container; whatever path a run ends by, dropping its
//! [`SandboxControl`] removes the container (synchronously, bounded).
//!
//! What the code inside sees of its environment: `PATH` (Docker's default, added by Docker
//! when the image sets none), `HOSTNAME=sandbox` (set by Docker), `HOME=/nonexistent` (from
//! the rootfs's /etc/passwd); nothing of the host's. Docker also bind-mounts generated
//! /etc/hosts, /etc/hostname and /etc/resolv.conf (with `nameserver 0.0.0.0`, not the host's
//! resolver); /sys, /dev/pts and /dev/mqueue are covered by empty read-only tmpfs mounts.
//! /dev holds Docker's default nodes (null, zero, full, random, urandom, tty) and the fd links.

mod seccomp_json;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use super::{
    Backend, BoxFuture, Ending, HeldLimits, Sandbox, SandboxControl, SandboxError, StderrDrain,
    exit_code, spawner, take_pipes,
};
use crate::limits::{
    CPUS, DISK_BYTES_PER_SEC, DISK_OPS_PER_SEC, MAX_FILE_BYTES, MAX_OPEN_FILES, MAX_PIDS,
    MEMORY_BYTES, TMP_BYTES,
};
use crate::rootfs::Rootfs;
use crate::sandbox::disks::{BlockDevice, whole_disks};
use crate::sandbox::owner::{Owner, RunName};
use launcher::rlimits::{MSGQUEUE_BYTES, SIGPENDING};

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
/// Longest time one docker command (inspect, kill, rm, import) may take.
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
    eprintln!(
        "docker: importing the rootfs {} as image {tag}",
        rootfs.dir.display()
    );
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

/// Write the profile `text` beside the rootfs (content-addressed, written once), or to a
/// temp file when the cache directory is not writable.
fn write_profile(
    rootfs: &Rootfs,
    text: &str,
) -> Result<(PathBuf, Option<tempfile::TempPath>), DockerError> {
    use sha2::{Digest, Sha256};
    let seccomp_err =
        |path: &Path, e: std::io::Error| DockerError::Seccomp(format!("{}: {e}", path.display()));
    let digest = hex::encode(Sha256::digest(text.as_bytes()));
    if let Some(cache) = rootfs.dir.parent() {
        let path = cache.join(format!("docker-seccomp-{}.json", &digest[..16]));
        if std::fs::read_to_string(&path).is_ok_and(|existing| existing == text) {
            return Ok((path, None));
        }
        let written = tempfile::Builder::new()
            .prefix(".docker-seccomp-")
            .tempfile_in(cache)
            .and_then(|mut file| {
                file.write_all(text.as_bytes())?;
                file.flush()?;
                file.persist(&path).map_err(|e| e.error)?;
                Ok(())
            });
        if written.is_ok() {
            return Ok((path, None));
        }
    }
    // tempfile creates the file with mode 0600; it is deleted with the backend.
    let mut file = tempfile::Builder::new()
        .prefix("mcp-code-mode-seccomp-")
        .suffix(".json")
        .tempfile()
        .map_err(|e| DockerError::Seccomp(e.to_string()))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.flush())
        .map_err(|e| seccomp_err(file.path(), e))?;
    let temp = file.into_temp_path();
    Ok((temp.to_path_buf(), Some(temp)))
}

/// Starts sandboxes as Docker containers of the rootfs image.
pub struct DockerBackend {
    image: String,
    argv: Vec<String>,
    seccomp: PathBuf,
    /// Set when the profile had to go to a temp file (the cache was not writable).
    _seccomp_temp: Option<tempfile::TempPath>,
    owner: String,
    cpu_seconds: u64,
}

impl DockerBackend {
    /// A backend for `rootfs`, with RLIMIT_CPU of `cpu_seconds` in each container. Blocking:
    /// builds the image when it is missing ([`build_image`]), starts this process's reaper
    /// once ([`start_reaper`]), removes containers of dead owners ([`remove_strays`]) and
    /// writes the seccomp profile once, content-addressed,
    /// beside the rootfs in its cache directory (`docker-seccomp-<sha256/16>.json`; a
    /// private temp file deleted with the backend when the cache is not writable), so a
    /// killed process leaves no file behind.
    ///
    /// # Errors
    /// [`DockerError::Command`] when the engine does not answer or the import fails;
    /// [`DockerError::Seccomp`] when the profile cannot be written.
    pub fn new(rootfs: &Rootfs, cpu_seconds: u64) -> Result<Self, DockerError> {
        let image = build_image(rootfs)?;
        start_reaper();
        if let Err(e) = remove_strays() {
            tracing::warn!("{e}");
        }
        let text = seccomp_json::export_text(&launcher::seccomp::policy())
            .map_err(|e| DockerError::Seccomp(e.to_string()))?;
        let (seccomp, seccomp_temp) = write_profile(rootfs, &text)?;
        Ok(Self {
            image,
            argv: rootfs.argv(),
            seccomp,
            _seccomp_temp: seccomp_temp,
            owner: Owner::current().to_string(),
            cpu_seconds,
        })
    }

    /// The `docker run` arguments for the container `name` (everything after `docker`).
    pub fn run_args(&self, name: &str) -> Vec<String> {
        let mut args = run_args(
            name,
            &self.owner,
            &self.seccomp,
            self.cpu_seconds,
            &self.image,
            &self.argv,
        );
        let image = args
            .iter()
            .position(|a| *a == self.image)
            .unwrap_or(args.len());
        let disks = whole_disks(Path::new("/sys/block"));
        args.splice(image..image, disk_limit_args(&disks, Path::new("/dev")));
        args
    }
}

/// `--device-{read,write}-{bps,iops}` for each of `disks` whose node in `dev` is a block
/// device of its number (Docker takes a path and reads the number from it): the container's
/// reads and writes of every whole disk of the host, at [`DISK_BYTES_PER_SEC`] and
/// [`DISK_OPS_PER_SEC`] (crate::sandbox::disks says why every disk).
pub fn disk_limit_args(disks: &[BlockDevice], dev: &Path) -> Vec<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let mut args = Vec::new();
    for disk in disks {
        let node = dev.join(&disk.name);
        let Ok(meta) = std::fs::metadata(&node) else {
            continue;
        };
        let (Ok(major), Ok(minor)) = (u32::try_from(disk.major), u32::try_from(disk.minor)) else {
            continue;
        };
        let number = libc::makedev(major, minor);
        if !meta.file_type().is_block_device() || meta.rdev() != number {
            continue;
        }
        let node = node.display();
        for (flag, value) in [
            ("read-bps", DISK_BYTES_PER_SEC),
            ("write-bps", DISK_BYTES_PER_SEC),
            ("read-iops", DISK_OPS_PER_SEC),
            ("write-iops", DISK_OPS_PER_SEC),
        ] {
            args.push(format!("--device-{flag}={node}:{value}"));
        }
    }
    args
}

/// The `docker run` arguments (after `docker`) for one sandbox; every limit from
/// [`crate::limits`].
pub fn run_args(
    name: &str,
    owner: &str,
    seccomp: &Path,
    cpu_seconds: u64,
    image: &str,
    argv: &[String],
) -> Vec<String> {
    let id = SANDBOX_ID;
    let mut args: Vec<String> = vec![
        "run".into(),
        "--interactive".into(),
        "--pull=never".into(),
        format!("--name={name}"),
        format!("--label={OWNER_LABEL}={owner}"),
        "--log-driver=none".into(),
        // isolation
        "--network=none".into(),
        // Docker writes the host's resolver into /etc/resolv.conf even without a network.
        "--dns=0.0.0.0".into(),
        "--ipc=none".into(),
        "--cgroupns=private".into(),
        "--hostname=sandbox".into(),
        "--read-only".into(),
        // The mode of /tmp is copied from the image (0755, root), so it is given to the user.
        format!("--tmpfs=/tmp:rw,noexec,nosuid,nodev,size={TMP_BYTES},uid={id},gid={id}"),
        // Like the native sandbox, no /sys.
        "--tmpfs=/sys:ro,noexec,nosuid,nodev,size=4096".into(),
        // No pseudo-terminals: an empty /dev/pts leaves /dev/ptmx (a link into it) dangling.
        // Reading a pty master blocks forever, and the native sandbox has none either.
        "--tmpfs=/dev/pts:ro,noexec,nosuid,nodev,size=4096".into(),
        // Docker mounts a world-writable mqueue filesystem on /dev/mqueue even with
        // --ipc=none: files there are writable outside /tmp (tests/probes/fs). Cover it.
        "--tmpfs=/dev/mqueue:ro,noexec,nosuid,nodev,size=4096".into(),
        "--workdir=/tmp".into(),
        format!("--user={id}:{id}"),
        "--cap-drop=ALL".into(),
        "--security-opt=no-new-privileges".into(),
        format!("--security-opt=seccomp={}", seccomp.display()),
        // limits
        format!("--memory={MEMORY_BYTES}"),
        format!("--memory-swap={MEMORY_BYTES}"),
        format!("--pids-limit={MAX_PIDS}"),
        format!("--cpus={CPUS}"),
        format!("--ulimit=nofile={MAX_OPEN_FILES}:{MAX_OPEN_FILES}"),
        format!("--ulimit=fsize={MAX_FILE_BYTES}:{MAX_FILE_BYTES}"),
        format!("--ulimit=cpu={cpu_seconds}:{cpu_seconds}"),
        // Per-user host counters, as the native launcher sets them (launcher::rlimits).
        format!("--ulimit=sigpending={SIGPENDING}:{SIGPENDING}"),
        format!("--ulimit=msgqueue={MSGQUEUE_BYTES}:{MSGQUEUE_BYTES}"),
        // No --ulimit nproc: RLIMIT_NPROC counts every process of uid 65534 in the host's
        // user namespace, so concurrent sandboxes would share one budget; --pids-limit holds.
        image.into(),
    ];
    args.extend(argv.iter().cloned());
    args
}

impl Backend for DockerBackend {
    fn spawn(&self) -> BoxFuture<'_, Result<Sandbox, SandboxError>> {
        Box::pin(async move {
            let name = RunName::next().to_string();
            let mut command = Command::new("docker");
            command
                .args(self.run_args(&name))
                .env_clear()
                .envs(client_env(std::env::vars()))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true);
            let child = spawner::spawn(command)
                .await
                .map_err(|e| SandboxError::Spawn(format!("docker run: {e} ({HINT})")))?;
            // From here on, dropping the control removes the container.
            let mut control = DockerControl {
                child,
                name,
                stderr: StderrDrain::start(None),
                removed: false,
                oom: false,
                started: false,
            };
            let (stdin, stdout) = take_pipes(&mut control.child)?;
            control.stderr = StderrDrain::start(control.child.stderr.take());
            Ok(Sandbox {
                stdin,
                stdout,
                control: Box::new(control),
            })
        })
    }
}

struct DockerControl {
    /// The `docker run` client.
    child: Child,
    /// The container's name.
    name: String,
    stderr: StderrDrain,
    /// The container is gone (removed by us).
    removed: bool,
    /// `docker inspect` said OOMKilled.
    oom: bool,
    /// `docker inspect` said the container started. Kept in the control: a wait cut short
    /// (the run's exit grace) may already have removed the container, and a later wait must
    /// not take the code's own status 125-127 for a failure of docker.
    started: bool,
}

/// A docker command for the async paths, bounded by [`DOCKER_COMMAND_TIMEOUT`]; its stdout
/// when it succeeded.
async fn docker_async(args: &[&str]) -> Option<String> {
    let mut command = Command::new("docker");
    command
        .args(args)
        .env_clear()
        .envs(client_env(std::env::vars()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(DOCKER_COMMAND_TIMEOUT, command.output())
        .await
        .ok()?
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

impl SandboxControl for DockerControl {
    fn kill(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.removed {
                return;
            }
            // The container first: killing only the client would leave it running.
            let _ = docker_async(&["kill", &self.name]).await;
            let _ = self.child.start_kill();
        })
    }

    fn wait(&mut self) -> BoxFuture<'_, Ending> {
        Box::pin(async move {
            // `docker run` exits with the container's status (128+signal when killed), or
            // 125-127 when docker itself failed.
            let status = self.child.wait().await.ok().and_then(exit_code);
            // Whether the container ever started: only then is a status of 125-127 the
            // code's own (it can exit with any status and write anything on stderr).
            if !self.removed {
                let format = "{{.State.OOMKilled}} {{.State.StartedAt}}";
                if let Some(out) = docker_async(&["inspect", "--format", format, &self.name]).await
                {
                    let mut fields = out.split_whitespace();
                    self.oom = fields.next() == Some("true");
                    self.started = fields.next().is_some_and(|at| !at.starts_with("0001-"));
                }
                if docker_async(&["rm", "--force", &self.name]).await.is_some() {
                    self.removed = true;
                }
            }
            let stderr = self.stderr.text().await;
            let start_failure = match status {
                Some(125..=127) if !self.started => {
                    Some(SandboxError::Spawn(format!("docker run failed: {stderr}")))
                }
                _ => None,
            };
            Ending {
                status,
                memory_limit_hit: self.oom,
                stderr,
                start_failure,
            }
        })
    }

    fn limits(&self) -> HeldLimits {
        HeldLimits::Docker
    }
}

impl Drop for DockerControl {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        if self.removed {
            return;
        }
        let mut rm = docker_std();
        rm.args(["rm", "--force", &self.name]);
        if let Err(e) = run_bounded(rm, &format!("remove container {}", self.name)) {
            // "No such container" when docker run failed before creating it.
            if !e.to_string().contains("No such container") {
                tracing::warn!("{e}");
            }
        }
    }
}

#[cfg(test)]
mod tests;

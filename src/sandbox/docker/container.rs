//! One sandbox's container over the Docker Engine API: create, attach, start, wait, kill,
//! remove. No client process per sandbox: the protocol runs over the attach connection to
//! the engine's socket, which `serve` itself holds.

use std::pin::Pin;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::errors::Error as EngineError;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder,
};
use futures::{Stream, StreamExt};
use tokio::io::{AsyncWriteExt, DuplexStream};
use tokio_util::task::AbortOnDropHandle;

use super::{DOCKER_COMMAND_TIMEOUT, HINT, client_env, docker_std, run_bounded};
use crate::sandbox::{
    BoxFuture, Ending, HeldLimits, Removals, Sandbox, SandboxControl, SandboxError, StderrDrain,
    StderrFeed,
};

/// Bytes of stdout the demultiplexer holds for a reader that is behind, as much as a Linux
/// pipe holds: beyond it, reading the attach stream waits. Stderr frames never wait: they
/// go straight into the stderr drain, which keeps a bounded part.
const PIPE_BYTES: usize = 64 * 1024;

/// The engine's address when neither `DOCKER_HOST` nor a context names one.
pub(super) const DEFAULT_ENGINE_HOST: &str = "unix:///var/run/docker.sock";

/// The address of the engine the `docker` client talks to: `DOCKER_HOST`, else the endpoint
/// of `DOCKER_CONTEXT`'s context or of the current one (`docker context inspect`), so that
/// the API connection reaches the engine the client's commands (the image import, the
/// reaper, the removals) reach. When the client cannot say: `DOCKER_HOST`, else
/// [`DEFAULT_ENGINE_HOST`]. `env` is our environment, of which the client gets only
/// [`client_env`]. Blocking (one bounded `docker` command).
pub(super) fn engine_host(env: impl IntoIterator<Item = (String, String)>) -> String {
    let env = client_env(env);
    let mut inspect = std::process::Command::new("docker");
    inspect
        .env_clear()
        .envs(env.iter().cloned())
        .stdin(std::process::Stdio::null())
        .args([
            "context",
            "inspect",
            "--format",
            "{{.Endpoints.docker.Host}}",
        ]);
    match run_bounded(inspect, "find the Docker engine's address") {
        Ok(host) if !host.trim().is_empty() => host.trim().to_owned(),
        _ => env
            .into_iter()
            .find(|(k, _)| k == "DOCKER_HOST")
            .map_or_else(|| DEFAULT_ENGINE_HOST.into(), |(_, v)| v),
    }
}

/// The engine connection of a backend: made at its first use (the backend may be built
/// outside the runtime that uses it), then shared by its sandboxes.
pub(super) struct Engine {
    /// `unix://PATH`, `tcp://HOST:PORT` or `http://HOST:PORT` ([`engine_host`]).
    host: String,
    docker: tokio::sync::OnceCell<Docker>,
    /// Starts whose caller went away, and removals of containers dropped midway.
    removals: Removals,
}

impl Engine {
    pub(super) fn new(host: String) -> Self {
        Self {
            host,
            docker: tokio::sync::OnceCell::new(),
            removals: Removals::default(),
        }
    }

    /// Resolves once the containers dropped midway are removed ([`Self::start`],
    /// [`DockerControl`]'s drop).
    pub(super) async fn settled(&self) {
        self.removals.settled().await;
    }

    /// The client of the engine at `host` (no TLS, no ssh: other schemes fail here); each
    /// request's answer bounded by [`DOCKER_COMMAND_TIMEOUT`] (a stream, such as an attach
    /// or a wait, is not bounded once it has begun). The API version is the lower of
    /// bollard's and the engine's (`GET /version`), so an older engine (20.10: API 1.41) and
    /// a newer one (which may refuse old versions) both answer. A failure is not kept: the
    /// next sandbox tries again.
    async fn docker(&self) -> Result<&Docker, SandboxError> {
        self.docker
            .get_or_try_init(|| async {
                Docker::connect_with_host(&self.host)?
                    .with_timeout(DOCKER_COMMAND_TIMEOUT)
                    .negotiate_version()
                    .await
            })
            .await
            .map_err(|e| {
                failed(
                    &format!("connect to the Docker engine at {}", self.host),
                    &e,
                )
            })
    }

    /// Creates the container `name` from `body`, attaches to its stdin, stdout and stderr
    /// (before the start, so no output is lost), then starts it.
    ///
    /// The steps run in a task of their own, so a caller that goes away (its run cancelled
    /// or out of time, serve ending) never cuts a request short: a create request dropped
    /// before the engine has made its container could leave a container made after its
    /// removal was asked for. The task then stops at the next step and removes what it
    /// made, off the caller's path; [`Self::settled`] waits for it.
    ///
    /// # Errors
    /// [`SandboxError::Spawn`] when the engine cannot be reached or refuses one of the steps
    /// (no such image, an invalid option, the runtime failed to start the container); a
    /// container made before the failure is removed.
    pub(super) async fn start(
        &self,
        name: String,
        body: ContainerCreateBody,
    ) -> Result<Sandbox, SandboxError> {
        let docker = self.docker().await?.clone();
        let removals = self.removals.clone();
        let (started, wanted) = tokio::sync::oneshot::channel();
        self.removals.spawn_on(
            async move {
                let mut control = DockerControl {
                    docker,
                    name,
                    stderr: StderrDrain::start(None::<tokio::io::Empty>),
                    demux: None,
                    removed: false,
                    exit: None,
                    oom: false,
                    inspected: false,
                    removals,
                };
                let sandbox = steps(&mut control, body, &started).await;
                let sandbox = sandbox.map(|(stdin, stdout)| Sandbox {
                    stdin,
                    stdout,
                    control: Box::new(control),
                });
                // The caller went away: the container is ended here.
                if let Err(Ok(mut sandbox)) = started.send(sandbox) {
                    sandbox.control.release().await;
                }
            },
            &tokio::runtime::Handle::current(),
        );
        wanted.await.unwrap_or_else(|_| {
            Err(SandboxError::Spawn(
                "the container's start ended without a word".into(),
            ))
        })
    }
}

/// The create, attach and start of `control`'s container; its stdin and stdout. Stops
/// after a step once nobody waits on `started` any more. On failure the container made
/// is removed.
async fn steps(
    control: &mut DockerControl,
    body: ContainerCreateBody,
    started: &tokio::sync::oneshot::Sender<Result<Sandbox, SandboxError>>,
) -> Result<
    (
        Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
        Box<dyn tokio::io::AsyncRead + Send + Unpin>,
    ),
    SandboxError,
> {
    let docker = control.docker.clone();
    let name = control.name.clone();
    let gone = || SandboxError::Spawn("nobody waits for the container any more".into());
    let create = CreateContainerOptionsBuilder::new().name(&name).build();
    let created = docker.create_container(Some(create), body).await;
    if let Err(e) = created {
        // A create the engine refused made nothing; one that timed out may have.
        control.release().await;
        return Err(failed("create the container", &e));
    }
    if started.is_closed() {
        control.release().await;
        return Err(gone());
    }
    let attach = AttachContainerOptionsBuilder::new()
        .stream(true)
        .stdin(true)
        .stdout(true)
        .stderr(true)
        .build();
    let attached = match docker.attach_container(&name, Some(attach)).await {
        Ok(attached) => attached,
        Err(e) => {
            control.release().await;
            return Err(failed("attach to the container", &e));
        }
    };
    // A duplex end reads end of file once the other end is dropped and its bytes read.
    let (stdout_in, stdout) = tokio::io::duplex(PIPE_BYTES);
    let (drain, stderr_in) = StderrDrain::feed();
    control.stderr = drain;
    control.demux = Some(AbortOnDropHandle::new(tokio::spawn(demux(
        attached.output,
        stdout_in,
        stderr_in,
    ))));
    if started.is_closed() {
        control.release().await;
        return Err(gone());
    }
    if let Err(e) = docker.start_container(&name, None).await {
        control.release().await;
        return Err(failed("start the container", &e));
    }
    Ok((Box::new(attached.input), Box::new(stdout)))
}

fn failed(what: &str, e: &EngineError) -> SandboxError {
    SandboxError::Spawn(format!("failed to {what}: {e} ({HINT})"))
}

/// Copies the attach stream's frames out: stdout frames to `stdout`, stderr frames into
/// the stderr drain's feed (no copy through a pipe: a flood of stderr costs one push per
/// frame, nothing once the drain's kept part is full), until the stream ends (the container
/// exited and its output is all sent, or the connection broke); then both are dropped,
/// which the stdout reader sees as end of file and the drain as the end of stderr. A stdout
/// reader that went away loses its frames; stderr goes on.
async fn demux(
    mut frames: Pin<Box<dyn Stream<Item = Result<LogOutput, EngineError>> + Send>>,
    mut stdout: DuplexStream,
    mut stderr: StderrFeed,
) {
    let mut stdout_open = true;
    while let Some(Ok(frame)) = frames.next().await {
        match frame {
            // Without a tty every frame has a stream header; `Console` is what the decoder
            // yields for bytes it finds without one.
            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                if stdout_open && stdout.write_all(&message).await.is_err() {
                    stdout_open = false;
                }
            }
            LogOutput::StdErr { message } => stderr.push(&message),
            LogOutput::StdIn { .. } => {}
        }
    }
}

struct DockerControl {
    docker: Docker,
    /// The container's name.
    name: String,
    stderr: StderrDrain,
    /// The task copying the attach stream out; aborted with the control.
    demux: Option<AbortOnDropHandle<()>>,
    /// The container is gone (removed by us).
    removed: bool,
    /// The exit status the engine reported, once it did.
    exit: Option<i32>,
    /// The engine said OOMKilled.
    oom: bool,
    /// The engine was asked whether it OOMKilled the container.
    inspected: bool,
    /// Where a drop leaves the container's removal.
    removals: Removals,
}

impl DockerControl {
    /// The container's exit status from `POST /containers/{name}/wait` (condition
    /// `not-running`): the code's own status, or 128+signal when it was killed (the engine
    /// reports a SIGKILLed container as 137). `None` when the engine does not say.
    async fn exit_status(&self) -> Option<i32> {
        match self.docker.wait_container(&self.name, None).next().await {
            Some(Ok(answer)) => i32::try_from(answer.status_code).ok(),
            // bollard reports a non-zero status as an error carrying it.
            Some(Err(EngineError::DockerContainerWaitError { code, .. })) => {
                i32::try_from(code).ok()
            }
            _ => None,
        }
    }
}

impl SandboxControl for DockerControl {
    fn kill(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if !self.removed {
                // SIGKILL to every process of the container; bounded by the client's timeout.
                let _ = self.docker.kill_container(&self.name, None).await;
            }
        })
    }

    fn wait(&mut self) -> BoxFuture<'_, Ending> {
        Box::pin(async move {
            if !self.removed {
                // A wait cut short (the run's exit grace) may already have the status, and
                // may have removed the container without knowing it: asking again would
                // then get no status and lose the one the engine gave.
                if self.exit.is_none() {
                    self.exit = self.exit_status().await;
                }
                if !self.inspected {
                    if let Ok(inspected) = self.docker.inspect_container(&self.name, None).await {
                        self.oom = inspected
                            .state
                            .and_then(|state| state.oom_killed)
                            .unwrap_or(false);
                    }
                    self.inspected = true;
                }
                self.removed = remove_over_api(&self.docker, &self.name).await;
            }
            Ending {
                status: self.exit,
                memory_limit_hit: self.oom,
                stderr: self.stderr.text().await,
                // A container that could not start fails its sandbox's start instead.
                start_failure: None,
            }
        })
    }

    fn limits(&self) -> HeldLimits {
        HeldLimits::Docker
    }

    /// Removes the container over the API when no wait did (a wait cut short by the run's
    /// exit grace); one the engine does not know is removed already.
    fn release(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if !self.removed {
                self.removed = remove_over_api(&self.docker, &self.name).await;
            }
        })
    }
}

impl Drop for DockerControl {
    /// Without [`SandboxControl::release`] first (a run dropped midway): the container is
    /// removed over the API in a task of the backend's ([`Engine::settled`] waits for it),
    /// never on the runtime's thread, which every run and session shares; with the
    /// `docker` client, blocking and bounded, when no runtime runs or the task is dropped
    /// before it is done (the runtime shutting down).
    fn drop(&mut self) {
        self.demux = None;
        if self.removed {
            return;
        }
        let removal = Removal {
            name: std::mem::take(&mut self.name),
            pending: true,
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let docker = self.docker.clone();
                self.removals.spawn_on(removal.over_api(docker), &runtime);
            }
            Err(_) => drop(removal),
        }
    }
}

/// Force-removes the container `name` over the API (SIGKILL, then removal); whether it is
/// gone (removed now, or unknown to the engine).
async fn remove_over_api(docker: &Docker, name: &str) -> bool {
    let force = RemoveContainerOptionsBuilder::new().force(true).build();
    match docker.remove_container(name, Some(force)).await {
        Ok(()) => true,
        Err(EngineError::DockerResponseServerError {
            status_code: 404, ..
        }) => true,
        Err(e) => {
            tracing::warn!("failed to remove container {name}: {e}");
            false
        }
    }
}

/// A container still to be removed: over the API ([`Self::over_api`]), else, when dropped
/// before that is done, with the `docker` client (blocking, bounded: the runtime may be
/// shutting down).
struct Removal {
    name: String,
    pending: bool,
}

impl Removal {
    /// Over the API; when that fails, with the `docker` client on the blocking pool.
    async fn over_api(mut self, docker: Docker) {
        if remove_over_api(&docker, &self.name).await {
            self.pending = false;
        } else {
            let _ = tokio::task::spawn_blocking(move || drop(self)).await;
        }
    }
}

impl Drop for Removal {
    fn drop(&mut self) {
        if !self.pending {
            return;
        }
        let mut rm = docker_std();
        rm.args(["rm", "--force", &self.name]);
        if let Err(e) = run_bounded(rm, &format!("remove container {}", self.name)) {
            // "No such container" when the start failed before the engine made it.
            if !e.to_string().contains("No such container") {
                tracing::warn!("{e}");
            }
        }
    }
}

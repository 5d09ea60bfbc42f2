//! The read-only Python rootfs that backs both sandbox backends.
//!
//! A rootfs is a directory holding CPython at `/usr/bin/python3`, its standard library at
//! `/usr/lib/python3.X` (bytecode precompiled), the shared libraries they load, the dynamic
//! loader, the runner ([`RUNNER_FILES`]: the entry `/runner.py` and its package in
//! `/usr/lib/mcp-code-mode`, bytecode precompiled too), an `/etc/passwd` and `/etc/group`
//! that know uid/gid 65534, and empty mount points `/tmp`, `/dev` and `/proc`. No shell, no
//! pip, no site-packages.
//!
//! It is built once per [key](rootfs_key) under a cache root and then only read:
//! `<cache root>/rootfs-<key>/`, with a manifest at `<dir>/.mcp-code-mode-rootfs` that
//! records the [digest](Rootfs::digest) of the finished tree. A directory without the
//! manifest is not a rootfs. Two recipes ([`Source`]): copy the host's own Python, or
//! assemble one from Debian packages with apt. Either is verified by starting the rootfs's
//! Python inside it (`unshare -r --root`) before it is moved into place.

mod debian;
mod host;
mod staging;
mod tree;
mod verify;

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// `[(path, contents), ..]` of files embedded from the repository's `rootfs/` directory,
/// each at the same relative path.
macro_rules! embed_rootfs_files {
    ($($path:literal),* $(,)?) => {
        &[$(($path, include_str!(concat!("../../rootfs/", $path)))),*]
    };
}

/// The runner, as embedded in this binary: `(path inside the rootfs, relative to its root;
/// contents)`, in the order they are hashed into the [key](rootfs_key). Every rootfs holds
/// each file at its path. `runner.py` is the entry ([`RUNNER_IN_ROOTFS`]); the rest is the
/// package it imports, `code_mode_runner` in [`RUNNER_LIB_IN_ROOTFS`], and the list of
/// standard-library module names it reads (`stdlib_modules.txt`, which the host's tool
/// naming embeds too).
pub const RUNNER_FILES: &[(&str, &str)] = embed_rootfs_files![
    "runner.py",
    "usr/lib/mcp-code-mode/code_mode_runner/__init__.py",
    "usr/lib/mcp-code-mode/code_mode_runner/channel.py",
    "usr/lib/mcp-code-mode/code_mode_runner/abi.py",
    "usr/lib/mcp-code-mode/code_mode_runner/wire.py",
    "usr/lib/mcp-code-mode/code_mode_runner/inbox.py",
    "usr/lib/mcp-code-mode/code_mode_runner/tools.py",
    "usr/lib/mcp-code-mode/code_mode_runner/capture.py",
    "usr/lib/mcp-code-mode/code_mode_runner/errors.py",
    "usr/lib/mcp-code-mode/code_mode_runner/cells.py",
    "usr/lib/mcp-code-mode/code_mode_runner/stdlib_modules.txt",
];

/// Version of the build recipe; bump it whenever the layout or the steps change, so every
/// cached rootfs is rebuilt.
pub const RECIPE_VERSION: &str = "mcp-code-mode-rootfs-3";

/// Name of the manifest file at the top of a rootfs directory.
pub const MANIFEST_NAME: &str = ".mcp-code-mode-rootfs";

/// Environment variable that overrides the cache root (used by tests).
pub const ROOTFS_ENV: &str = "MCP_CODE_MODE_ROOTFS";

/// Path of Python inside the rootfs.
pub const PYTHON_IN_ROOTFS: &str = "/usr/bin/python3";
/// Path of runner.py, the runner's entry, inside the rootfs.
pub const RUNNER_IN_ROOTFS: &str = "/runner.py";
/// Directory of the runner's package inside the rootfs (the entry adds it to `sys.path`);
/// its bytecode is precompiled there.
pub const RUNNER_LIB_IN_ROOTFS: &str = "/usr/lib/mcp-code-mode";
/// Flags Python gets inside the sandbox: isolated mode (no environment, no user site, no
/// script directory on sys.path), no `site` import, no bytecode writes.
pub const PYTHON_FLAGS: [&str; 3] = ["-I", "-S", "-B"];

/// Where a rootfs's Python comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The host's own CPython (>= 3.10): `python3` from PATH, or the given interpreter.
    Host { python: Option<PathBuf> },
    /// Debian packages fetched with `apt-get download` (no root needed) and unpacked with
    /// `dpkg-deb -x`; needs apt's package lists on the host.
    Debian,
}

impl Source {
    /// The kind as it goes into the key and the manifest: `host` or `debian`.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Host { .. } => "host",
            Source::Debian => "debian",
        }
    }
}

/// What to build, and where.
#[derive(Debug, Clone)]
pub struct Options {
    /// The recipe.
    pub source: Source,
    /// Cache root (`--rootfs DIR`); `None` means [`cache_root`]'s default.
    pub cache_root: Option<PathBuf>,
    /// Print no progress lines on stderr.
    pub quiet: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            source: Source::Host { python: None },
            cache_root: None,
            quiet: false,
        }
    }
}

/// A finished rootfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rootfs {
    /// The rootfs directory, `<cache root>/rootfs-<key>`.
    pub dir: PathBuf,
    /// 16 hex characters: what the rootfs was built from (recipe, the runner's files, source
    /// kind).
    pub key: String,
    /// 64 hex characters: sha256 of the finished tree (see [`tree_digest`]); the Docker
    /// backend tags its image by it.
    pub digest: String,
    /// Version of the Python inside, e.g. `3.11.7`.
    pub python_version: String,
    /// `host` or `debian`.
    pub source: String,
}

impl Rootfs {
    /// The command to exec inside the sandbox:
    /// `["/usr/bin/python3", "-I", "-S", "-B", "/runner.py"]`.
    pub fn argv(&self) -> Vec<String> {
        runner_argv()
    }

    /// Reads the rootfs at `dir` from its manifest; `None` when `dir` has no readable
    /// manifest (then it is not a rootfs).
    pub fn open(dir: &Path) -> Option<Rootfs> {
        let text = fs::read_to_string(dir.join(MANIFEST_NAME)).ok()?;
        let field = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
                .map(str::to_string)
        };
        Some(Rootfs {
            dir: dir.to_path_buf(),
            key: field("key")?,
            digest: field("digest")?,
            python_version: field("python")?,
            source: field("source")?,
        })
    }
}

/// The command to exec inside the sandbox (python, its flags, `/runner.py`).
pub fn runner_argv() -> Vec<String> {
    let mut argv = vec![PYTHON_IN_ROOTFS.to_string()];
    argv.extend(PYTHON_FLAGS.iter().map(|flag| flag.to_string()));
    argv.push(RUNNER_IN_ROOTFS.to_string());
    argv
}

/// Everything that can go wrong while finding, building or verifying a rootfs.
#[derive(Debug, thiserror::Error)]
pub enum RootfsError {
    /// No cache root could be derived from the environment.
    #[error(
        "failed to find a cache directory: neither XDG_CACHE_HOME nor HOME is an absolute path; pass --rootfs DIR"
    )]
    NoCacheDir,
    /// A filesystem operation failed.
    #[error("failed to {action} {}: {error}{}", path.display(), io_hint(action))]
    Io {
        action: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    /// A helper program could not be started or reported failure.
    #[error("failed to run {command}: {why}{}", hint_suffix(.hint))]
    Command {
        command: String,
        why: String,
        hint: Option<&'static str>,
    },
    /// The source Python cannot be used.
    #[error("failed to use {} as the source python: {why}; pass --python PATH to pick another CPython >= 3.10", python.display())]
    Python { python: PathBuf, why: String },
    /// A shared library could not be found or placed.
    #[error("failed to resolve the shared libraries of {}: {why}", elf.display())]
    Library { elf: PathBuf, why: String },
    /// The Debian recipe could not be worked out from apt's view of the archive.
    #[error("failed to assemble python from Debian packages: {why}{}", hint_suffix(.hint))]
    Debian {
        why: String,
        hint: Option<&'static str>,
    },
    /// The built tree does not run Python (or lacks a required module).
    #[error("failed to verify the rootfs built in {}: {why}", dir.display())]
    Verify { dir: PathBuf, why: String },
}

fn hint_suffix(hint: &Option<&'static str>) -> String {
    hint.map(|hint| format!("; {hint}")).unwrap_or_default()
}

pub(crate) fn io_err(
    action: &'static str,
    path: &Path,
) -> impl FnOnce(std::io::Error) -> RootfsError {
    let path = path.to_path_buf();
    move |error| RootfsError::Io {
        action,
        path,
        error,
    }
}

fn io_hint(action: &str) -> &'static str {
    if action.contains("cache directory") {
        " (pass --rootfs DIR, or set MCP_CODE_MODE_ROOTFS, to a directory you can write)"
    } else {
        ""
    }
}

/// The cache root: `explicit` (`--rootfs DIR`) if given, else `$MCP_CODE_MODE_ROOTFS`, else
/// [`ROOT_CACHE`] when running as root, else `$XDG_CACHE_HOME/mcp-code-mode`, else
/// `$HOME/.cache/mcp-code-mode`.
///
/// Root gets a system directory because the sandbox of a root caller runs as a host uid of
/// its own (not root, not the owner), which must be able to search every directory above the
/// rootfs as one of the others (`/root` is 0700).
///
/// Errors: [`RootfsError::NoCacheDir`] when none of them is an absolute path.
pub fn cache_root(explicit: Option<&Path>) -> Result<PathBuf, RootfsError> {
    if let Some(dir) = explicit {
        return Ok(dir.to_path_buf());
    }
    let var = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    if let Some(dir) = var(ROOTFS_ENV) {
        return Ok(dir);
    }
    if running_as_root() {
        return Ok(PathBuf::from(ROOT_CACHE));
    }
    if let Some(dir) = var("XDG_CACHE_HOME") {
        return Ok(dir.join("mcp-code-mode"));
    }
    if let Some(home) = var("HOME") {
        return Ok(home.join(".cache").join("mcp-code-mode"));
    }
    Err(RootfsError::NoCacheDir)
}

/// The cache root of a process running as root.
pub const ROOT_CACHE: &str = "/var/cache/mcp-code-mode";

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// The key of a rootfs built by `source` with this binary: the first 16 hex characters of
/// sha256 over [`RECIPE_VERSION`], the number of [`RUNNER_FILES`], each one's path and
/// contents in that order, and the source kind (each string length-prefixed).
pub fn rootfs_key(source: &Source) -> String {
    key_of(RECIPE_VERSION, RUNNER_FILES, source.kind())
}

/// [`rootfs_key`] of any recipe version, runner files and source kind.
fn key_of(recipe: &str, files: &[(&str, &str)], kind: &str) -> String {
    let mut hash = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    };
    field(recipe.as_bytes());
    field(&(files.len() as u64).to_le_bytes());
    for (path, contents) in files {
        field(path.as_bytes());
        field(contents.as_bytes());
    }
    field(kind.as_bytes());
    hex::encode(hash.finalize())[..16].to_string()
}

/// The directory the rootfs for `options` lives in (it may not exist yet).
pub fn rootfs_dir(options: &Options) -> Result<PathBuf, RootfsError> {
    let root = cache_root(options.cache_root.as_deref())?;
    Ok(root.join(format!("rootfs-{}", rootfs_key(&options.source))))
}

/// The cached rootfs for `options` if its manifest is present and its runner files match
/// this binary's ([`runner_damage`]), else a fresh [`build`] (which replaces a damaged one).
pub fn ensure(options: &Options) -> Result<Rootfs, RootfsError> {
    let dir = rootfs_dir(options)?;
    if let Some(rootfs) = Rootfs::open(&dir) {
        match runner_damage(&dir) {
            None => return Ok(rootfs),
            Some(why) => Progress {
                quiet: options.quiet,
            }
            .step(&format!("rebuilding {}: {why}", dir.display())),
        }
    }
    build(options)
}

/// Why the rootfs at `dir` cannot run this binary's runner: the first of [`RUNNER_FILES`]
/// that is missing, unreadable or differs from the embedded one, as
/// `"<path> is missing"` / `"<path> differs from the runner in this binary"` /
/// `"failed to read <path>: <error>"`; `None` when every one matches. Reads about 11 small
/// files; bytecode and the rest of the tree are not checked.
pub fn runner_damage(dir: &Path) -> Option<String> {
    RUNNER_FILES.iter().find_map(|(path, contents)| {
        let shown = format!("/{path}");
        match fs::read(dir.join(path)) {
            Ok(found) if found == contents.as_bytes() => None,
            Ok(_) => Some(format!("{shown} differs from the runner in this binary")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Some(format!("{shown} is missing"))
            }
            Err(e) => Some(format!("failed to read {shown}: {e}")),
        }
    })
}

/// Builds the rootfs for `options`, replacing a cached one with the same key.
///
/// The tree is assembled in a locked build directory inside the cache root (removed on any
/// error; one left by a build that was killed is removed by a later build, see
/// `staging.rs`), verified, and renamed into place. If another process put a complete rootfs
/// there while this one was building (and this call found none when it started), theirs
/// is kept and ours is deleted. One progress line per step goes to stderr unless
/// `options.quiet`. Needs `unshare` (util-linux) and unprivileged user namespaces for the
/// verification and the bytecode step; `ldd` for the host recipe; `apt-get`, `apt-cache`
/// and `dpkg-deb` for the Debian recipe.
pub fn build(options: &Options) -> Result<Rootfs, RootfsError> {
    let progress = Progress {
        quiet: options.quiet,
    };
    let root = cache_root(options.cache_root.as_deref())?;
    fs::create_dir_all(&root).map_err(io_err("create the cache directory", &root))?;
    let key = rootfs_key(&options.source);
    let dir = root.join(format!("rootfs-{key}"));
    let existed = Rootfs::open(&dir).is_some();

    for dir in staging::sweep(&root) {
        progress.step(&format!(
            "removed {}, left by a build that did not finish",
            dir.display()
        ));
    }
    let staging = staging::Staging::new(&root)?;
    let tree = staging.path().join("tree");
    fs::create_dir(&tree).map_err(io_err("create", &tree))?;

    let python_version = match &options.source {
        Source::Host { python } => host::assemble(python.as_deref(), &tree, &progress)?,
        Source::Debian => debian::assemble(&tree, staging.path(), &progress)?,
    };
    tree::write_base_files(&tree)?;
    progress.step("precompiling the standard library and the runner to bytecode");
    verify::precompile(&tree, &python_version)?;
    progress.step("starting the rootfs python inside the rootfs to check it");
    verify::check(&tree)?;
    tree::normalize_modes(&tree)?;
    let digest = tree_digest(&tree)?;
    let rootfs = Rootfs {
        dir: dir.clone(),
        key,
        digest,
        python_version,
        source: options.source.kind().to_string(),
    };
    tree::write_manifest(&tree, &rootfs)?;
    progress.step(&format!(
        "finished {} ({}, digest {})",
        dir.display(),
        tree::human_size(tree::size(&tree)?),
        &rootfs.digest[..16]
    ));
    install(&tree, &dir, existed, staging.path())?;
    Ok(rootfs)
}

/// Moves the finished `tree` to `dir`. A rootfs already there is replaced if it `existed`
/// before this build began, and kept (ours dropped) if another process made it meanwhile.
fn install(tree: &Path, dir: &Path, existed: bool, staging: &Path) -> Result<(), RootfsError> {
    if dir.exists() {
        if !existed && Rootfs::open(dir).is_some() {
            return Ok(()); // another build won the race; the staging dir is dropped
        }
        // Replace it: move the old one into our staging dir, which is removed on drop.
        let old = staging.join("old");
        fs::rename(dir, &old).map_err(io_err("move aside the old rootfs", dir))?;
    }
    match fs::rename(tree, dir) {
        Ok(()) => Ok(()),
        Err(_) if Rootfs::open(dir).is_some() => Ok(()), // lost a race just now
        Err(error) => Err(io_err("move the new rootfs into", dir)(error)),
    }
}

/// sha256 (64 hex characters) of a tree: over every entry but the manifest, in sorted
/// order of relative path, its path, kind, mode bits, and its symlink target or file
/// contents. Ownership and times are left out.
pub fn tree_digest(dir: &Path) -> Result<String, RootfsError> {
    tree::digest(dir)
}

/// Prints the build's progress lines.
pub(crate) struct Progress {
    quiet: bool,
}

impl Progress {
    pub(crate) fn step(&self, what: &str) {
        if !self.quiet {
            crate::stderr_log::line(&format!("rootfs: {what}"));
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())
    }
}

#[cfg(test)]
mod tests;

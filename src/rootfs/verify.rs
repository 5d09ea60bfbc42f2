//! Steps that run the rootfs's own Python inside the tree, with `unshare -r --root`: the
//! bytecode compile, and the final check. Running `<tree>/usr/bin/python3` directly would
//! load the host's libraries and standard library, and prove nothing.

use std::path::Path;
use std::process::{Command, Output};

use super::tree;
use super::{PYTHON_FLAGS, PYTHON_IN_ROOTFS, RUNNER_LIB_IN_ROOTFS, RootfsError};

const UNSHARE_HINT: &str = "the build runs the new python with `unshare --user --map-root-user --root`; \
install util-linux and allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, \
or the AppArmor restriction on Ubuntu)";

/// Runs `argv` inside `root` as the (mapped) root user, with an empty environment.
pub(crate) fn run_inside(root: &Path, argv: &[&str]) -> Result<Output, RootfsError> {
    run_inside_with(root, argv, &[])
}

/// [`run_inside`] with the environment `env`.
fn run_inside_with(
    root: &Path,
    argv: &[&str],
    env: &[(&str, &str)],
) -> Result<Output, RootfsError> {
    let mut command = Command::new("unshare");
    command
        .arg("--user")
        .arg("--map-root-user")
        .arg(format!("--root={}", root.display()))
        .args(argv)
        .env_clear()
        .envs(env.iter().copied());
    command.output().map_err(|error| RootfsError::Command {
        command: "unshare".into(),
        why: error.to_string(),
        hint: Some(UNSHARE_HINT),
    })
}

fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.trim().lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// Compiles the standard library and the runner's package ([`RUNNER_LIB_IN_ROOTFS`]) to
/// `__pycache__/*.pyc` (unchecked-hash, so the files neither go stale nor depend on times)
/// with the rootfs's own Python, several processes at once. `-B` in the sandbox only stops
/// Python from writing bytecode: it reads these, and skips compiling the runner's modules
/// at every start. The entry, `/runner.py`, runs as `__main__`, which Python always compiles.
pub(crate) fn precompile(root: &Path, version: &str) -> Result<(), RootfsError> {
    let minor = version.split('.').take(2).collect::<Vec<_>>().join(".");
    let stdlib = format!("/usr/lib/python{minor}");
    let entries = tree::sorted_entries(&tree::inside(root, Path::new(&stdlib)))?;
    let workers = std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .clamp(1, 16);
    let mut groups: Vec<Vec<String>> = vec![Vec::new(); workers];
    for (index, entry) in entries.iter().enumerate() {
        let name = entry
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let is_source = entry.is_dir() || name.ends_with(".py");
        if is_source && name != "lib-dynload" {
            groups[index % workers].push(format!("{stdlib}/{name}"));
        }
    }
    groups[entries.len() % workers].push(RUNNER_LIB_IN_ROOTFS.to_string());
    let results: Vec<Result<Output, RootfsError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = groups
            .iter()
            .filter(|group| !group.is_empty())
            .map(|group| {
                scope.spawn(move || {
                    // Not -I: PYTHONHASHSEED=0 must apply, or set and frozenset constants
                    // are marshalled in a random order and the digest changes per build.
                    let mut argv = vec![
                        PYTHON_IN_ROOTFS,
                        "-s",
                        "-S",
                        "-B",
                        "-m",
                        "compileall",
                        "-q",
                        "-f",
                    ];
                    argv.extend(["--invalidation-mode", "unchecked-hash"]);
                    argv.extend(group.iter().map(String::as_str));
                    run_inside_with(root, &argv, &[("PYTHONHASHSEED", "0")])
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle.join().unwrap_or_else(|_| {
                    Err(RootfsError::Command {
                        command: format!("{PYTHON_IN_ROOTFS} -m compileall (inside the rootfs)"),
                        why: "its thread panicked".into(),
                        hint: None,
                    })
                })
            })
            .collect()
    });
    for result in results {
        let out = result?;
        if !out.status.success() {
            return Err(RootfsError::Command {
                command: format!("{PYTHON_IN_ROOTFS} -m compileall (inside the rootfs)"),
                why: format!("{}: {}{}", out.status, tail(&out.stdout), tail(&out.stderr)),
                hint: Some(UNSHARE_HINT),
            });
        }
    }
    Ok(())
}

/// Modules the runner needs; the build fails without any of them.
pub(super) const REQUIRED_MODULES: &[&str] = &[
    "asyncio",
    "json",
    "socket",
    "threading",
    "subprocess",
    "select",
    "hashlib",
    "ast",
    "traceback",
    "fcntl",
    "codecs",
    "queue",
    "linecache",
    "keyword",
    "inspect",
];

const CHECK: &str = r#"
import importlib, os, sys, threading
for name in sys.argv[1].split(","):
    importlib.import_module(name)
assert sys.prefix == "/usr", "sys.prefix is %r, not /usr" % sys.prefix
dynload = [p for p in sys.path if p.endswith("lib-dynload")][0]
bad = []
for f in sorted(os.listdir(dynload)):
    try:
        importlib.import_module(f.split(".")[0])
    except Exception as e:
        bad.append("%s: %s" % (f, e))
assert not bad, "extension modules fail to load: " + "; ".join(bad)
t = threading.Thread(target=print, args=("thread",))
t.start(); t.join()
print("ok", sys.version.split()[0])
"#;

/// Starts the rootfs's Python inside the tree, exactly as the sandbox will (same flags),
/// and checks that it imports [`REQUIRED_MODULES`] and every extension module in
/// lib-dynload (which proves every shared library resolves inside the tree), and can
/// start a thread.
pub(crate) fn check(root: &Path) -> Result<(), RootfsError> {
    let required = REQUIRED_MODULES.join(",");
    let mut argv = vec![PYTHON_IN_ROOTFS];
    argv.extend(PYTHON_FLAGS);
    argv.extend(["-c", CHECK, &required]);
    let out = run_inside(root, &argv)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && stdout.contains("thread\nok ") {
        return Ok(());
    }
    Err(RootfsError::Verify {
        dir: root.to_path_buf(),
        why: format!(
            "its python did not start or import what the runner needs ({}): {}{}",
            out.status,
            tail(&out.stdout),
            tail(&out.stderr)
        ),
    })
}

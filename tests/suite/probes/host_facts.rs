//! What the host offers the probes of one class to aim at ([`HostFacts`]): a sentinel
//! process, UNIX sockets, a secret file, the strings that name the host, the device nodes.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::suite::common::unprivileged;

/// The device nodes whose host inode (device and inode number, times, mode) the probes must
/// leave alone.
const DEVICE_NODES: [&str; 4] = ["null", "zero", "random", "urandom"];

/// A string the host puts in the environment of `exec`; it must appear nowhere inside.
pub(super) const SECRET: &str = "mcp-code-mode-probe-secret-7d41c2";

/// What the host offers the probes to aim at, for one class on one backend: each must stay
/// out of reach. Dropping it stops the sentinel and the listeners.
pub(super) struct HostFacts {
    /// A host process the sandbox must not be able to signal, in our process group: of our
    /// own uid when we are not root (a native sandbox's host uid then), else of host nobody
    /// (a Docker sandbox's host uid; a root caller's native sandbox has a host uid of its own).
    sentinel: Child,
    _abstract: UnixListener,
    _pathname: UnixListener,
    unix_path: PathBuf,
    secret_path: PathBuf,
    pub(super) facts: Value,
    /// Times, mode and owner of each host device node in [`DEVICE_NODES`] at the start.
    devices: Vec<String>,
}

impl HostFacts {
    pub(super) fn new(tag: &str) -> Self {
        let pid = std::process::id();
        let mut sleep = Command::new("sleep");
        sleep.arg("600").stdin(Stdio::null());
        if !unprivileged() {
            sleep.uid(65534).gid(65534);
        }
        let sentinel = sleep.spawn().expect("start the sentinel");
        let abstract_name = format!("mcp-code-mode-probe-{pid}-{tag}");
        let abstract_listener = UnixListener::bind_addr(
            &SocketAddr::from_abstract_name(abstract_name.as_bytes()).expect("abstract name"),
        )
        .expect("listen on a host abstract socket");
        let unix_path = std::env::temp_dir().join(format!("mcp-code-mode-probe-{pid}-{tag}.sock"));
        let _ = std::fs::remove_file(&unix_path);
        let pathname = UnixListener::bind(&unix_path).expect("listen on a host unix socket");
        let secret_path =
            std::env::temp_dir().join(format!("mcp-code-mode-probe-{pid}-{tag}.secret"));
        std::fs::write(&secret_path, SECRET).expect("write the host secret");
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        let users = host_users();
        let user = std::env::var("USER").unwrap_or_default();
        // Strings that name the host; none may appear in what the sandbox can read.
        let mut strings = vec![
            SECRET.to_owned(),
            format!("{}/", home.trim_end_matches('/')),
            env!("CARGO_MANIFEST_DIR").to_owned(),
            crate::suite::common::target_dir().display().to_string(),
        ];
        if !user.is_empty() && user != "root" {
            strings.push(format!("/{user}/"));
        }
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let hostname = hostname.trim();
        if hostname.len() >= 4 && !["localhost", "sandbox"].contains(&hostname) {
            strings.push(hostname.to_owned());
        }
        let devices: serde_json::Map<String, Value> = DEVICE_NODES
            .iter()
            .filter_map(|name| {
                let st = std::fs::metadata(format!("/dev/{name}")).ok()?;
                Some(((*name).to_owned(), json!([st.dev(), st.ino()])))
            })
            .collect();
        let facts = json!({
            "devices": devices,
            "pid": pid,
            "sentinel_pid": sentinel.id(),
            "abstract": abstract_name,
            "unix_path": unix_path,
            "home": home,
            "secret_path": secret_path,
            "users": users,
            "strings": strings,
        });
        HostFacts {
            devices: device_state(),
            sentinel,
            _abstract: abstract_listener,
            _pathname: pathname,
            unix_path,
            secret_path,
            facts,
        }
    }

    /// The device nodes whose times, mode or owner changed since the start.
    pub(super) fn changed_devices(&self) -> Vec<String> {
        device_state()
            .into_iter()
            .filter(|now| !self.devices.contains(now))
            .collect()
    }

    pub(super) fn sentinel_alive(&mut self) -> bool {
        matches!(self.sentinel.try_wait(), Ok(None))
    }
}

impl Drop for HostFacts {
    fn drop(&mut self) {
        let _ = self.sentinel.kill();
        let _ = self.sentinel.wait();
        let _ = std::fs::remove_file(&self.unix_path);
        let _ = std::fs::remove_file(&self.secret_path);
    }
}

/// `name mtime ctime mode uid gid` (times in ns) of each host device node in DEVICE_NODES.
fn device_state() -> Vec<String> {
    DEVICE_NODES
        .iter()
        .filter_map(|name| {
            let st = std::fs::metadata(format!("/dev/{name}")).ok()?;
            Some(format!(
                "{name} {}.{:09} {}.{:09} {:o} {} {}",
                st.mtime(),
                st.mtime_nsec(),
                st.ctime(),
                st.ctime_nsec(),
                st.mode(),
                st.uid(),
                st.gid()
            ))
        })
        .collect()
}

/// Names of the host's accounts with uid 1000 or more (not nobody).
fn host_users() -> Vec<String> {
    std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let uid: u32 = f.get(2)?.parse().ok()?;
            (uid >= 1000 && uid != 65534).then(|| f[0].to_owned())
        })
        .collect()
}

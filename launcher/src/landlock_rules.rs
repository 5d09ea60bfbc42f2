//! Stage 10: Landlock, at the best ABI the kernel offers (best effort, outcome reported).
//!
//! Filesystem: read and execute under `/`, read and write but never execute under `/tmp`,
//! read and write on `/dev/null`; everything else handled and so denied (no write anywhere
//! else, even where a mount is writable). ABI >= 4: TCP bind and connect handled with no rule
//! (denied). ABI >= 5: ioctl on devices handled (denied except where granted). ABI >= 6:
//! abstract unix sockets and signals scoped to the sandbox's own domain. Source: landlock(7),
//! Documentation/userspace-api/landlock.rst ("Access rights", "Scope flags").

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, LandlockStatus, PathBeneath, PathFd,
    RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
    make_bitflags,
};

/// The newest ABI whose rights the plan uses (6: scopes). Older kernels get what they know.
pub const TARGET_ABI: ABI = ABI::V6;

/// Access granted beneath one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRule {
    /// The directory (or file) the rule covers, with everything beneath it.
    pub path: PathBuf,
    /// What is allowed there.
    pub access: BitFlags<AccessFs>,
}

/// The whole Landlock policy as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandlockPlan {
    /// Filesystem rights the ruleset handles: denied unless a [`PathRule`] grants them.
    pub handled_fs: BitFlags<AccessFs>,
    /// Network rights handled (with no rule: denied).
    pub handled_net: BitFlags<AccessNet>,
    /// IPC scopes: the sandbox cannot reach outside its Landlock domain with these.
    pub scopes: BitFlags<Scope>,
    /// The grants.
    pub paths: Vec<PathRule>,
}

/// What the kernel actually enforced.
#[derive(Debug, PartialEq, Eq)]
pub struct Enforced {
    /// Fully, partially (an older ABI), or not at all (no Landlock).
    pub status: RulesetStatus,
    /// The ABI the crate used, or None when Landlock is unavailable.
    pub abi: Option<ABI>,
}

/// Building or applying the ruleset failed (only hard errors: best-effort gaps are not).
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    /// The landlock crate or syscalls failed.
    #[error("failed to apply the landlock ruleset: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    /// A path in the plan could not be opened (O_PATH).
    #[error("failed to open {path} for a landlock rule: {why}")]
    Path { path: PathBuf, why: String },
}

/// Builds the plan. `root` may only be listed; each of `root_entries` (the entries of
/// `root` other than `tmp`, with whether each is a directory) gets read + execute beneath it;
/// `tmp` gets read + write without execute; `dev_null` read + write.
///
/// Landlock rights only add up, so `/tmp` must not lie beneath a rule that grants execute:
/// that is why the root is covered entry by entry instead of with one rule on `/`.
pub fn plan(
    root: &Path,
    root_entries: &[(PathBuf, bool)],
    tmp: &Path,
    dev_null: &Path,
) -> LandlockPlan {
    let all = AccessFs::from_all(TARGET_ABI);
    let read = AccessFs::from_read(TARGET_ABI);
    let tmp_access = all & !make_bitflags!(AccessFs::{Execute | MakeChar | MakeBlock | IoctlDev});
    let mut paths = vec![PathRule {
        path: root.to_owned(),
        access: make_bitflags!(AccessFs::{ReadDir}),
    }];
    paths.extend(root_entries.iter().map(|(path, is_dir)| PathRule {
        path: path.clone(),
        access: if *is_dir {
            read
        } else {
            read & AccessFs::from_file(TARGET_ABI)
        },
    }));
    paths.push(PathRule {
        path: tmp.to_owned(),
        access: tmp_access,
    });
    paths.push(PathRule {
        path: dev_null.to_owned(),
        access: make_bitflags!(AccessFs::{ReadFile | WriteFile}),
    });
    LandlockPlan {
        handled_fs: all,
        handled_net: AccessNet::from_all(TARGET_ABI),
        scopes: Scope::from_all(TARGET_ABI),
        paths,
    }
}

/// The entries of `root` except `tmp`, each with whether it is a directory (symlinks
/// followed, as Landlock's O_PATH open follows them).
pub fn root_entries(root: &Path, tmp: &Path) -> Result<Vec<(PathBuf, bool)>, LandlockError> {
    let list_err = |e: std::io::Error| LandlockError::Path {
        path: root.to_owned(),
        why: e.to_string(),
    };
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(root).map_err(list_err)? {
        let path = entry.map_err(list_err)?.path();
        if path != tmp {
            let is_dir = path.is_dir();
            entries.push((path, is_dir));
        }
    }
    entries.sort();
    Ok(entries)
}

/// Applies `plan` to this process (and every later child). Best effort: rights the kernel
/// does not know are left out, and [`Enforced`] says what held.
pub fn install(plan: &LandlockPlan) -> Result<Enforced, LandlockError> {
    let mut created = Ruleset::default()
        .handle_access(plan.handled_fs)?
        .handle_access(plan.handled_net)?
        .scope(plan.scopes)?
        .create()?;
    for rule in &plan.paths {
        let fd = PathFd::new(&rule.path).map_err(|e| LandlockError::Path {
            path: rule.path.clone(),
            why: e.to_string(),
        })?;
        created = created.add_rule(PathBeneath::new(fd, rule.access))?;
    }
    let status: RestrictionStatus = created.restrict_self()?;
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => Some(effective_abi),
        _ => None,
    };
    Ok(Enforced {
        status: status.ruleset,
        abi,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::Exit;
    use crate::testutil::{in_child, landlock_available};
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn tmp_may_be_written_but_never_executed_and_the_root_never_written() {
        let entries = [(PathBuf::from("/usr"), true), (PathBuf::from("/f"), false)];
        let p = plan(
            Path::new("/"),
            &entries,
            Path::new("/tmp"),
            Path::new("/dev/null"),
        );
        assert_eq!(
            p.paths[0].access,
            make_bitflags!(AccessFs::{ReadDir}),
            "/ itself: list only"
        );
        let usr = &p.paths[1].access;
        assert!(usr.contains(AccessFs::Execute) && !usr.contains(AccessFs::WriteFile));
        assert!(
            !p.paths[2].access.contains(AccessFs::ReadDir),
            "a file gets file rights only"
        );
        let tmp = &p.paths[3].access;
        assert_eq!(p.paths[3].path, Path::new("/tmp"));
        assert!(tmp.contains(AccessFs::WriteFile) && !tmp.contains(AccessFs::Execute));
        assert!(
            p.handled_net
                .contains(AccessNet::ConnectTcp | AccessNet::BindTcp)
        );
        assert!(p.scopes.contains(Scope::AbstractUnixSocket | Scope::Signal));
        assert!(p.handled_fs.contains(AccessFs::IoctlDev));
    }

    #[test]
    fn landlock_denies_writes_outside_tmp_exec_from_tmp_and_tcp_connect() {
        if !landlock_available() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let tool = tmp.path().join("true");
        std::fs::copy("/bin/true", &tool).unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (tmp_path, elsewhere_path) = (tmp.path().to_owned(), elsewhere.path().to_owned());
        let exit = in_child(move || {
            crate::sys::set_no_new_privs().unwrap();
            // The host's / stands in for the rootfs: every entry but /tmp readable, and only
            // our temp dir (not its sibling) writable.
            let root = Path::new("/");
            let entries = root_entries(root, Path::new("/tmp")).unwrap();
            let enforced =
                install(&plan(root, &entries, &tmp_path, Path::new("/dev/null"))).unwrap();
            assert_eq!(enforced.status, RulesetStatus::FullyEnforced);
            let errno = |r: std::io::Result<()>| r.err().and_then(|e| e.raw_os_error());
            // Positive controls: write in tmp, exec from /, write /dev/null.
            let tmp_write = errno(std::fs::write(tmp_path.join("ok"), "x"));
            let exec_root = std::process::Command::new("/bin/true")
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            let null = errno(std::fs::write("/dev/null", "x"));
            // Denials.
            let other_write = errno(std::fs::write(elsewhere_path.join("no"), "x"));
            let tmp_exec = errno(
                std::process::Command::new(tmp_path.join("true"))
                    .status()
                    .map(drop),
            );
            let tcp = errno(std::net::TcpStream::connect(addr).map(drop));
            let ok = tmp_write.is_none()
                && exec_root
                && null.is_none()
                && other_write == Some(libc::EACCES)
                && tmp_exec == Some(libc::EACCES)
                && tcp == Some(libc::EACCES);
            if ok {
                0
            } else {
                eprintln!(
                    "{tmp_write:?} {exec_root} {null:?} {other_write:?} {tmp_exec:?} {tcp:?}"
                );
                1
            }
        });
        assert_eq!(exit, Exit::Code(0));
    }
}

//! The Debian recipe: CPython from the distribution's own packages, fetched with
//! `apt-get download` (no root needed), unpacked with `dpkg-deb -x`, then laid out like
//! the host recipe. Only the library closure is taken: packages that bring a shell, perl
//! or package-manager machinery are never followed.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::tree;
use super::{Progress, RootfsError, io_err, verify};

/// Packages never taken, nor followed: shells, perl, dpkg/debconf, data-only packages.
const SKIPPED: &[&str] = &[
    "base-files",
    "bash",
    "coreutils",
    "dash",
    "debconf",
    "debconf-2.0",
    "cdebconf",
    "debianutils",
    "dpkg",
    "gcc-12-base",
    "install-info",
    "libc-bin",
    "media-types",
    "mime-support",
    "ncurses-base",
    "netbase",
    "perl",
    "perl-base",
    "readline-common",
    "sensible-utils",
    "tar",
    "tzdata",
    "usrmerge",
    "usr-is-merged",
];

const APT_HINT: &str =
    "run `apt-get update` (the recipe needs apt's package lists), or use --from host";

fn apt(program: &str, args: &[&str], cwd: Option<&Path>) -> Result<String, RootfsError> {
    let mut command = Command::new(program);
    command.args(args);
    if let Some(dir) = cwd {
        command.current_dir(dir);
    }
    let shown = format!("{program} {}", args.join(" "));
    let out = command.output().map_err(|error| RootfsError::Command {
        command: shown.clone(),
        why: error.to_string(),
        hint: Some("this recipe needs apt-get, apt-cache and dpkg-deb (a Debian or Ubuntu host)"),
    })?;
    if !out.status.success() {
        return Err(RootfsError::Command {
            command: shown,
            why: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            hint: Some(APT_HINT),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The packages `apt-cache depends` output says the listed ones need: the first of each
/// set of alternatives, the first provider of a virtual package.
fn parse_depends(output: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut in_alternatives = false; // the previous line was "|Depends: …"
    let mut want_provider = false; // the previous dependency was a <virtual> package
    for line in output.lines() {
        let indent = line.len() - line.trim_start_matches([' ', '|']).len();
        let trimmed = line.trim_start();
        if indent >= 4 && want_provider {
            found.push(trimmed.to_string());
            want_provider = false;
            continue;
        }
        want_provider = false;
        let Some((kind, name)) = trimmed.split_once(": ") else {
            continue;
        };
        if !matches!(kind.trim_start_matches('|'), "Depends" | "PreDepends") {
            continue;
        }
        let first_of_group = !in_alternatives;
        in_alternatives = kind.starts_with('|');
        if !first_of_group {
            continue;
        }
        let name = name.split(':').next().unwrap_or(name).trim();
        if name.starts_with('<') {
            want_provider = true;
        } else {
            found.push(name.to_string());
        }
    }
    found
}

/// The package closure of CPython 3.`minor`, without [`SKIPPED`] packages.
fn closure(minor: &str) -> Result<BTreeSet<String>, RootfsError> {
    let roots = [
        format!("python3.{minor}-minimal"),
        format!("libpython3.{minor}-minimal"),
        format!("libpython3.{minor}-stdlib"),
    ];
    let mut seen: BTreeSet<String> = roots.iter().cloned().collect();
    let mut frontier: Vec<String> = roots.to_vec();
    while !frontier.is_empty() {
        let mut args = vec![
            "depends",
            "--no-recommends",
            "--no-suggests",
            "--no-conflicts",
            "--no-breaks",
            "--no-replaces",
            "--no-enhances",
        ];
        args.extend(frontier.iter().map(String::as_str));
        let output = apt("apt-cache", &args, None)?;
        frontier = parse_depends(&output)
            .into_iter()
            .filter(|name| !SKIPPED.contains(&name.as_str()))
            .filter(|name| seen.insert(name.clone()))
            .collect();
    }
    Ok(seen)
}

/// The Python minor version Debian's `python3-minimal` depends on (`11` for 3.11).
fn default_minor() -> Result<String, RootfsError> {
    let output = apt("apt-cache", &["depends", "python3-minimal"], None)?;
    parse_depends(&output)
        .into_iter()
        .find_map(|name| {
            let minor = name.strip_prefix("python3.")?.strip_suffix("-minimal")?;
            minor
                .chars()
                .all(|c| c.is_ascii_digit())
                .then(|| minor.to_string())
        })
        .ok_or(RootfsError::Debian {
            why: "apt-cache does not say which python3.X-minimal python3-minimal depends on".into(),
            hint: Some(APT_HINT),
        })
}

/// Fills `root` from Debian packages, working in `scratch`; returns the Python version.
pub(crate) fn assemble(
    root: &Path,
    scratch: &Path,
    progress: &Progress,
) -> Result<String, RootfsError> {
    let minor = default_minor()?;
    let packages = closure(&minor)?;
    let names: Vec<&str> = packages.iter().map(String::as_str).collect();

    progress.step(&format!(
        "downloading {} Debian packages for python3.{minor} ({})",
        names.len(),
        names.join(" ")
    ));
    let debs = scratch.join("debs");
    fs::create_dir(&debs).map_err(io_err("create", &debs))?;
    let mut args = vec!["download", "-q"];
    args.extend(&names);
    apt("apt-get", &args, Some(&debs))?;

    progress.step("unpacking them with dpkg-deb");
    let unpacked = scratch.join("unpacked");
    fs::create_dir(&unpacked).map_err(io_err("create", &unpacked))?;
    for deb in tree::sorted_entries(&debs)? {
        let deb_arg = deb.to_string_lossy().into_owned();
        let dest_arg = unpacked.to_string_lossy().into_owned();
        apt("dpkg-deb", &["-x", &deb_arg, &dest_arg], None)?;
    }

    let x = format!("python3.{minor}");
    progress.step(&format!(
        "laying out python at /usr/bin/python3 and the standard library at /usr/lib/{x}"
    ));
    let binary = unpacked.join("usr/bin").join(&x);
    if !binary.is_file() {
        return Err(RootfsError::Debian {
            why: format!("{} is not in the packages", binary.display()),
            hint: None,
        });
    }
    let bin = root.join("usr/bin");
    tree::copy_file(&binary, &bin.join("python3"))?;
    symlink("python3", bin.join(&x)).map_err(io_err("create the symlink", &bin.join(&x)))?;
    let stdlib = root.join("usr/lib").join(&x);
    tree::copy_stdlib(&unpacked.join("usr/lib").join(&x), &stdlib)?;
    tree::copy_dynload(
        &unpacked.join("usr/lib").join(&x).join("lib-dynload"),
        &stdlib.join("lib-dynload"),
    )?;

    progress.step("copying the shared libraries and the loader");
    for dir in library_dirs(&unpacked)? {
        copy_libraries(&unpacked, &dir, root)?;
    }

    let out = verify::run_inside(
        root,
        &[
            "/usr/bin/python3",
            "-I",
            "-S",
            "-c",
            "import sys; print(sys.version.split()[0])",
        ],
    )?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || version.is_empty() {
        return Err(RootfsError::Verify {
            dir: root.to_path_buf(),
            why: format!(
                "its python does not start ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(version)
}

/// Directories of the unpacked packages that hold shared libraries (relative paths).
fn library_dirs(unpacked: &Path) -> Result<Vec<PathBuf>, RootfsError> {
    let mut dirs = Vec::new();
    for base in ["lib", "usr/lib"] {
        let path = unpacked.join(base);
        if !path.is_dir() {
            continue;
        }
        for entry in tree::sorted_entries(&path)? {
            let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if entry.is_dir() && name.contains("-linux-") {
                dirs.push(PathBuf::from(base).join(name));
            }
        }
    }
    for base in ["lib64", "usr/lib64"] {
        if unpacked.join(base).is_dir() {
            dirs.push(PathBuf::from(base));
        }
    }
    Ok(dirs)
}

/// Copies the `*.so*` files and symlinks at the top of `unpacked/dir` to `root/dir`;
/// symlinks stay symlinks (their targets are read inside the rootfs).
fn copy_libraries(unpacked: &Path, dir: &Path, root: &Path) -> Result<(), RootfsError> {
    let dest_dir = root.join(dir);
    fs::create_dir_all(&dest_dir).map_err(io_err("create", &dest_dir))?;
    for entry in tree::sorted_entries(&unpacked.join(dir))? {
        let Some(name) = entry.file_name() else {
            continue;
        };
        if !name.to_string_lossy().contains(".so") {
            continue;
        }
        let meta = fs::symlink_metadata(&entry).map_err(io_err("read", &entry))?;
        let dest = dest_dir.join(name);
        if meta.file_type().is_symlink() {
            let target = fs::read_link(&entry).map_err(io_err("read the symlink", &entry))?;
            symlink(&target, &dest).map_err(io_err("create the symlink", &dest))?;
        } else if meta.is_file() {
            tree::copy_file(&entry, &dest)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depends_output_takes_first_alternatives_and_providers() {
        let output = "libpython3.11-stdlib\n\
            \x20 Depends: libpython3.11-minimal\n\
            \x20|Depends: media-types\n\
            \x20 Depends: mime-support\n\
            \x20 Depends: libbz2-1.0\n\
            \x20 Depends: <libfoo-virtual>\n\
            \x20   libfoo1\n\
            \x20   libfoo2\n\
            \x20 PreDepends: libc6:any\n\
            \x20 Recommends: ca-certificates\n";
        assert_eq!(
            parse_depends(output),
            [
                "libpython3.11-minimal",
                "media-types",
                "libbz2-1.0",
                "libfoo1",
                "libc6"
            ]
        );
    }
}

//! Filesystem steps shared by both recipes: copying, layout, modes, digest, manifest.

use std::fs;
use std::io::Read;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{MANIFEST_NAME, RUNNER_FILES, Rootfs, RootfsError, io_err};

/// `abs` (an absolute path as seen inside the rootfs) under the tree `root`.
pub(crate) fn inside(root: &Path, abs: &Path) -> PathBuf {
    root.join(abs.strip_prefix("/").unwrap_or(abs))
}

/// Lexically normalised absolute path (`..` and `.` removed); sound here because every
/// prefix it is applied to has already had its symlinks resolved.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Copies the file `src` to `dest`, creating parent directories.
pub(crate) fn copy_file(src: &Path, dest: &Path) -> Result<(), RootfsError> {
    if let Some(parent) = dest.parent() {
        fs::create_dir_all(parent).map_err(io_err("create", parent))?;
    }
    fs::copy(src, dest).map_err(io_err("copy", src))?;
    Ok(())
}

/// Recreates the host path `path` in `root` exactly as the host resolves it: each symlink
/// met on the way (`/lib64`, `/lib64/ld-linux-x86-64.so.2`, `libfoo.so.1`) becomes the same
/// symlink inside, and the file it ends at is copied.
pub(crate) fn replicate(root: &Path, path: &Path) -> Result<(), RootfsError> {
    let mut path = normalize(path);
    'restart: for _ in 0..40 {
        let mut current = PathBuf::from("/");
        let parts: Vec<_> = path
            .components()
            .filter_map(|part| match part {
                Component::Normal(name) => Some(name.to_os_string()),
                _ => None,
            })
            .collect();
        for (index, name) in parts.iter().enumerate() {
            let host = current.join(name);
            let dest = inside(root, &host);
            let meta = fs::symlink_metadata(&host).map_err(io_err("read", &host))?;
            if meta.file_type().is_symlink() {
                let target = fs::read_link(&host).map_err(io_err("read the symlink", &host))?;
                if fs::symlink_metadata(&dest).is_err() {
                    symlink(&target, &dest).map_err(io_err("create the symlink", &dest))?;
                }
                let mut next = normalize(&current.join(&target));
                next.extend(&parts[index + 1..]);
                path = next;
                continue 'restart;
            } else if meta.is_dir() {
                if fs::symlink_metadata(&dest).is_err() {
                    fs::create_dir(&dest).map_err(io_err("create", &dest))?;
                }
                current = host;
            } else {
                if fs::symlink_metadata(&dest).is_err() {
                    copy_file(&host, &dest)?;
                }
                return Ok(());
            }
        }
        return Ok(());
    }
    Err(RootfsError::Library {
        elf: path,
        why: "too many levels of symbolic links".into(),
    })
}

/// Whether a standard-library entry is left out of the rootfs. `rel` is relative to the
/// stdlib directory.
fn left_out(rel: &Path, is_dir: bool) -> bool {
    let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let top = rel.components().count() == 1;
    if is_dir {
        matches!(
            name,
            "__pycache__" | "test" | "tests" | "idle_test" | "site-packages" | "dist-packages"
        ) || (top
            && (matches!(
                name,
                "idlelib" | "tkinter" | "turtledemo" | "ensurepip" | "lib-dynload"
            ) || name.starts_with("config-")))
    } else {
        name.ends_with(".pyc")
            || name.ends_with(".pyo")
            || name.ends_with(".exe")
            || (top && matches!(name, "sitecustomize.py" | "EXTERNALLY-MANAGED"))
    }
}

/// Whether an extension module in lib-dynload is left out (test modules; tkinter).
fn extension_left_out(name: &str) -> bool {
    [
        "_tkinter",
        "_test",
        "_ctypes_test",
        "_xxtestfuzz",
        "xxlimited",
        "xxsubtype",
        "_xxsubinterpreters",
    ]
    .iter()
    .any(|prefix| name.starts_with(prefix))
}

/// Copies the standard library at `src` to `dest`, leaving out tests, site-packages,
/// GUI and packaging tools, bytecode and lib-dynload (see [`copy_dynload`]). A symlink
/// into the stdlib stays a symlink; one that leads out of it is left out.
pub(crate) fn copy_stdlib(src: &Path, dest: &Path) -> Result<(), RootfsError> {
    let src_real = fs::canonicalize(src).map_err(io_err("resolve", src))?;
    copy_filtered(&src_real, &src_real, dest, &left_out)
}

/// Copies the extension modules of `src` (lib-dynload) to `dest`; returns the copied paths
/// on the host (for the library scan).
pub(crate) fn copy_dynload(src: &Path, dest: &Path) -> Result<Vec<PathBuf>, RootfsError> {
    fs::create_dir_all(dest).map_err(io_err("create", dest))?;
    let mut copied = Vec::new();
    for entry in sorted_entries(src)? {
        let name = entry
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        let meta = fs::metadata(&entry).map_err(io_err("read", &entry))?;
        if !meta.is_file() || !name.contains(".so") || extension_left_out(&name) {
            continue;
        }
        copy_file(&entry, &dest.join(&name))?;
        copied.push(entry);
    }
    Ok(copied)
}

fn copy_filtered(
    base: &Path,
    src: &Path,
    dest: &Path,
    skip: &dyn Fn(&Path, bool) -> bool,
) -> Result<(), RootfsError> {
    fs::create_dir_all(dest).map_err(io_err("create", dest))?;
    for entry in sorted_entries(src)? {
        let rel = entry.strip_prefix(base).unwrap_or(&entry);
        let Some(name) = entry.file_name() else {
            continue;
        };
        let meta = fs::symlink_metadata(&entry).map_err(io_err("read", &entry))?;
        if meta.file_type().is_symlink() {
            let target = fs::read_link(&entry).map_err(io_err("read the symlink", &entry))?;
            let resolved = fs::canonicalize(&entry).ok();
            let stays_inside = resolved.as_ref().is_some_and(|r| r.starts_with(base));
            if target.is_relative()
                && stays_inside
                && !skip(rel, resolved.as_ref().is_some_and(|r| r.is_dir()))
            {
                let link = dest.join(name);
                symlink(&target, &link).map_err(io_err("create the symlink", &link))?;
            }
        } else if meta.is_dir() {
            if !skip(rel, true) {
                copy_filtered(base, &entry, &dest.join(name), skip)?;
            }
        } else if meta.is_file() && !skip(rel, false) {
            copy_file(&entry, &dest.join(name))?;
        }
    }
    Ok(())
}

/// The entries of `dir`, sorted by name.
pub(crate) fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, RootfsError> {
    let mut entries = fs::read_dir(dir)
        .map_err(io_err("list", dir))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(io_err("list", dir))?;
    entries.sort();
    Ok(entries)
}

/// Writes the runner ([`RUNNER_FILES`]), `/etc/passwd`, `/etc/group`, and the empty mount
/// points.
pub(crate) fn write_base_files(root: &Path) -> Result<(), RootfsError> {
    for dir in ["tmp", "dev", "proc", "etc"] {
        let path = root.join(dir);
        fs::create_dir_all(&path).map_err(io_err("create", &path))?;
    }
    let users = [
        (
            "etc/passwd",
            "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n\
             nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
        ),
        ("etc/group", "root:x:0:\nnogroup:x:65534:\n"),
    ];
    for (name, text) in RUNNER_FILES.iter().chain(&users) {
        let path = root.join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io_err("create", parent))?;
        }
        fs::write(&path, text).map_err(io_err("write", &path))?;
    }
    Ok(())
}

/// Directories 0755; files 0755 when the source had any execute bit, else 0644; so any uid
/// (a root caller's sandbox runs as a host uid of its own) can read everything, and nothing is
/// setuid, setgid or writable by others.
pub(crate) fn normalize_modes(root: &Path) -> Result<(), RootfsError> {
    walk(root, &mut |path, meta| {
        let mode = if meta.is_dir() || meta.permissions().mode() & 0o111 != 0 {
            0o755
        } else {
            0o644
        };
        if !meta.file_type().is_symlink() && meta.permissions().mode() & 0o7777 != mode {
            fs::set_permissions(path, fs::Permissions::from_mode(mode))
                .map_err(io_err("set the mode of", path))?;
        }
        Ok(())
    })
}

/// Calls `visit` on every entry under `root` (not `root` itself), parents before children,
/// in sorted order; symlinks are not followed.
pub(crate) fn walk(
    root: &Path,
    visit: &mut dyn FnMut(&Path, &fs::Metadata) -> Result<(), RootfsError>,
) -> Result<(), RootfsError> {
    for entry in sorted_entries(root)? {
        let meta = fs::symlink_metadata(&entry).map_err(io_err("read", &entry))?;
        visit(&entry, &meta)?;
        if meta.is_dir() {
            walk(&entry, visit)?;
        }
    }
    Ok(())
}

/// See [`super::tree_digest`].
pub(crate) fn digest(root: &Path) -> Result<String, RootfsError> {
    let mut paths = Vec::new();
    walk(root, &mut |path, _| {
        paths.push(path.to_path_buf());
        Ok(())
    })?;
    // Sort by the bytes of the relative path, so the order does not depend on the walk.
    let mut rels: Vec<(Vec<u8>, PathBuf)> = paths
        .into_iter()
        .map(|path| {
            use std::os::unix::ffi::OsStrExt;
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .as_os_str()
                .as_bytes()
                .to_vec();
            (rel, path)
        })
        .filter(|(rel, _)| rel.as_slice() != MANIFEST_NAME.as_bytes())
        .collect();
    rels.sort();
    let mut hash = Sha256::new();
    let field = |hash: &mut Sha256, bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    };
    for (rel, path) in rels {
        let meta = fs::symlink_metadata(&path).map_err(io_err("read", &path))?;
        field(&mut hash, &rel);
        let mode = meta.permissions().mode() & 0o7777;
        if meta.file_type().is_symlink() {
            use std::os::unix::ffi::OsStrExt;
            let target = fs::read_link(&path).map_err(io_err("read the symlink", &path))?;
            field(&mut hash, b"l");
            field(&mut hash, target.as_os_str().as_bytes());
        } else if meta.is_dir() {
            field(&mut hash, b"d");
            field(&mut hash, &mode.to_le_bytes());
        } else {
            field(&mut hash, b"f");
            field(&mut hash, &mode.to_le_bytes());
            let mut file = fs::File::open(&path).map_err(io_err("open", &path))?;
            let mut contents = Sha256::new();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = file.read(&mut buf).map_err(io_err("read", &path))?;
                if n == 0 {
                    break;
                }
                contents.update(&buf[..n]);
            }
            field(&mut hash, &contents.finalize());
        }
    }
    Ok(hex::encode(hash.finalize()))
}

/// Writes the manifest (`key=value` lines) that marks a finished rootfs.
pub(crate) fn write_manifest(root: &Path, rootfs: &Rootfs) -> Result<(), RootfsError> {
    let text = format!(
        "recipe={}\nkey={}\ndigest={}\npython={}\nsource={}\n",
        super::RECIPE_VERSION,
        rootfs.key,
        rootfs.digest,
        rootfs.python_version,
        rootfs.source
    );
    let path = root.join(MANIFEST_NAME);
    fs::write(&path, text).map_err(io_err("write", &path))?;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644))
        .map_err(io_err("set the mode of", &path))
}

/// Total bytes of the regular files under `root`.
pub(crate) fn size(root: &Path) -> Result<u64, RootfsError> {
    let mut total = 0;
    walk(root, &mut |_, meta| {
        if meta.is_file() {
            total += meta.len();
        }
        Ok(())
    })?;
    Ok(total)
}

pub(crate) fn human_size(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

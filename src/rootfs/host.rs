//! The host recipe: copy the host's own CPython, its standard library and the shared
//! libraries they load (found with `ldd`).

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::tree::{self, inside};
use super::{Progress, RootfsError, io_err};

/// What the source interpreter says about itself.
#[derive(Debug)]
struct Probe {
    version: String,
    minor: u32,
    executable: PathBuf,
    stdlib: PathBuf,
    dynload: PathBuf,
    /// The prefix it was built for (`sysconfig`'s `prefix`), e.g. `~/.pyenv/versions/3.11.7`.
    build_prefix: PathBuf,
}

const PROBE: &str = "import sys, sysconfig, os\n\
v = sys.version_info\n\
dyn = [p for p in sys.path if p.endswith('lib-dynload')]\n\
print(sys.implementation.name)\n\
print('%d.%d.%d' % (v.major, v.minor, v.micro))\n\
print(v.major, v.minor)\n\
print(os.path.realpath(sys.executable))\n\
print(sysconfig.get_path('stdlib'))\n\
print(dyn[0] if dyn else '')\n\
print(sysconfig.get_config_var('prefix') or '')\n";

fn probe(python: &Path) -> Result<Probe, RootfsError> {
    let bad = |why: String| RootfsError::Python {
        python: python.to_path_buf(),
        why,
    };
    let out = Command::new(python)
        .args(["-I", "-S", "-c", PROBE])
        .output()
        .map_err(|error| bad(format!("cannot run it: {error}")))?;
    if !out.status.success() {
        return Err(bad(format!(
            "it exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<&str> = text.lines().collect();
    let [
        implementation,
        version,
        numbers,
        executable,
        stdlib,
        dynload,
        build_prefix,
    ] = lines[..]
    else {
        return Err(bad(format!("unexpected answer to the probe: {text:?}")));
    };
    if implementation != "cpython" {
        return Err(bad(format!("it is {implementation}, not CPython")));
    }
    let (major, minor) = numbers
        .split_once(' ')
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
        .ok_or_else(|| bad(format!("unexpected version {numbers:?}")))?;
    if major != 3 || minor < 10 {
        return Err(bad(format!(
            "it is Python {version}; 3.10 or newer is needed"
        )));
    }
    if dynload.is_empty() {
        return Err(bad("it has no lib-dynload directory on sys.path".into()));
    }
    Ok(Probe {
        version: version.to_string(),
        minor,
        executable: PathBuf::from(executable),
        stdlib: PathBuf::from(stdlib),
        dynload: PathBuf::from(dynload),
        build_prefix: PathBuf::from(build_prefix),
    })
}

/// Fills `root` from the host's Python (`python`, else `python3` from PATH); returns its
/// version.
pub(crate) fn assemble(
    python: Option<&Path>,
    root: &Path,
    progress: &Progress,
) -> Result<String, RootfsError> {
    let python = python
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("python3"));
    let probe = probe(&python)?;
    let x = format!("python3.{}", probe.minor);

    progress.step(&format!(
        "copying python {} from {}",
        probe.version,
        probe.executable.display()
    ));
    let bin = root.join("usr/bin");
    tree::copy_file(&probe.executable, &bin.join("python3"))?;
    symlink("python3", bin.join(&x)).map_err(io_err("create the symlink", &bin.join(&x)))?;

    progress.step(&format!(
        "copying the standard library ({} to /usr/lib/{x})",
        probe.stdlib.display()
    ));
    let stdlib = root.join("usr/lib").join(&x);
    tree::copy_stdlib(&probe.stdlib, &stdlib)?;
    let extensions = tree::copy_dynload(&probe.dynload, &stdlib.join("lib-dynload"))?;

    progress.step(&format!(
        "copying the shared libraries of python and its {} extension modules",
        extensions.len()
    ));
    let mut elfs = vec![probe.executable.clone()];
    elfs.extend(extensions);
    copy_libraries(root, &elfs)?;
    if !probe.build_prefix.as_os_str().is_empty() {
        progress.step(&format!(
            "writing /usr for the build prefix {}",
            probe.build_prefix.display()
        ));
        neutralize_prefix(root, &probe.build_prefix)?;
    }
    Ok(probe.version)
}

/// Replaces the source python's build prefix (e.g. `/home/me/.pyenv/versions/3.11.7`, which
/// names the builder's home) by one under `/usr`, where the rootfs keeps python, in every file of
/// `root`: in Python sources (`_sysconfigdata*.py`) as text; in binaries (RUNPATH, the
/// compiled-in prefix) in place, as the same number of bytes, keeping the last component:
/// `////…/usr/3.11.7`. No offset moves, and a string the linker merged into the tail of the
/// prefix (the version string is one: `3.11.7` shares the bytes of `…/versions/3.11.7`)
/// still reads the same. A prefix under /usr already, or too short, is left alone.
pub(crate) fn neutralize_prefix(root: &Path, prefix: &Path) -> Result<(), RootfsError> {
    let old = prefix.as_os_str().as_encoded_bytes();
    let last = prefix
        .file_name()
        .map(|n| n.as_encoded_bytes())
        .unwrap_or_default();
    let kept = [b"usr/".as_slice(), last].concat();
    if old.len() <= kept.len() || prefix.starts_with("/usr") || !prefix.is_absolute() {
        return Ok(());
    }
    let mut padded = vec![b'/'; old.len() - kept.len()];
    padded.extend_from_slice(&kept);
    for path in regular_files(root)? {
        let bytes = fs::read(&path).map_err(io_err("read", &path))?;
        if !contains(&bytes, old) {
            continue;
        }
        let new = if path.extension().is_some_and(|e| e == "py") {
            replace_all(&bytes, old, b"/usr")
        } else {
            replace_all(&bytes, old, &padded)
        };
        let mode = fs::metadata(&path)
            .map_err(io_err("read", &path))?
            .permissions();
        let mut writable = mode.clone();
        std::os::unix::fs::PermissionsExt::set_mode(
            &mut writable,
            std::os::unix::fs::PermissionsExt::mode(&mode) | 0o200,
        );
        fs::set_permissions(&path, writable).map_err(io_err("make writable", &path))?;
        fs::write(&path, new).map_err(io_err("rewrite", &path))?;
        fs::set_permissions(&path, mode).map_err(io_err("restore the mode of", &path))?;
    }
    Ok(())
}

/// [`regular_files`] for the rootfs tests.
#[cfg(test)]
pub(crate) fn regular_files_for_tests(dir: &Path) -> Vec<PathBuf> {
    regular_files(dir).unwrap()
}

/// Every regular file below `dir` (symlinks are not followed).
fn regular_files(dir: &Path) -> Result<Vec<PathBuf>, RootfsError> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in fs::read_dir(&dir).map_err(io_err("read", &dir))? {
            let entry = entry.map_err(io_err("read", &dir))?;
            let kind = entry.file_type().map_err(io_err("read", &entry.path()))?;
            if kind.is_dir() {
                todo.push(entry.path());
            } else if kind.is_file() {
                files.push(entry.path());
            }
        }
    }
    Ok(files)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn replace_all(bytes: &[u8], old: &[u8], new: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(old) {
            out.extend_from_slice(new);
            i += old.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// One line of `ldd` output that names a file to copy.
#[derive(Debug, PartialEq, Eq)]
enum Needed {
    /// `libfoo.so.1 => /path/libfoo.so.1 (0x…)`
    Library { name: String, path: PathBuf },
    /// `/lib64/ld-linux-x86-64.so.2 (0x…)`: the program interpreter.
    Loader(PathBuf),
}

/// Parses `ldd` output for several files; a library that is `not found` is an error.
fn parse_ldd(output: &str) -> Result<Vec<Needed>, String> {
    let mut needed = Vec::new();
    for line in output.lines() {
        let line = line.trim();
        if line.is_empty() || line.ends_with(':') || !line.contains(" (0x") && !line.contains("=>")
        {
            continue; // a file header, "statically linked", "not a dynamic executable"
        }
        if let Some((name, rest)) = line.split_once(" => ") {
            if rest.trim() == "not found" {
                return Err(format!("{name} not found"));
            }
            let path = rest.split(" (0x").next().unwrap_or("").trim();
            if path.starts_with('/') {
                needed.push(Needed::Library {
                    name: name.trim().to_string(),
                    path: PathBuf::from(path),
                });
            }
        } else {
            let path = line.split(" (0x").next().unwrap_or("").trim();
            if path.starts_with('/') {
                needed.push(Needed::Loader(PathBuf::from(path)));
            } // else the vDSO
        }
    }
    Ok(needed)
}

/// Whether ld.so finds libraries in `dir` without a cache or a RUNPATH.
fn is_system_dir(dir: &Path) -> bool {
    ["/lib", "/usr/lib", "/lib64", "/usr/lib64"]
        .iter()
        .any(|system| dir.starts_with(system))
}

/// Copies every library the `elfs` load (and the loader) into `root`: a library in a
/// system directory at its host path with the symlinks on the way; one elsewhere (pyenv's
/// libpython) as `/usr/lib/<name>`, which ld.so searches by default. Also libgcc_s, which
/// glibc loads at run time for `pthread_exit`.
fn copy_libraries(root: &Path, elfs: &[PathBuf]) -> Result<(), RootfsError> {
    let out = Command::new("ldd")
        .args(elfs)
        .output()
        .map_err(|error| RootfsError::Command {
            command: "ldd".into(),
            why: error.to_string(),
            hint: Some("install libc-bin"),
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let needed = parse_ldd(&text).map_err(|why| RootfsError::Library {
        elf: elfs[0].clone(),
        why,
    })?;
    let mut libc_dir = None;
    for item in &needed {
        match item {
            Needed::Loader(path) => tree::replicate(root, path)?,
            Needed::Library { name, path } => {
                let dir = path.parent().unwrap_or(Path::new("/"));
                let real_dir = fs::canonicalize(dir).map_err(io_err("resolve", dir))?;
                if name == "libc.so.6" {
                    libc_dir = Some(dir.to_path_buf());
                }
                if is_system_dir(&real_dir) {
                    tree::replicate(root, path)?;
                } else {
                    let dest = inside(root, Path::new("/usr/lib")).join(name);
                    if !dest.exists() {
                        tree::copy_file(path, &dest)?;
                    }
                }
            }
        }
    }
    if let Some(dir) = libc_dir {
        let gcc_s = dir.join("libgcc_s.so.1");
        if gcc_s.exists() {
            tree::replicate(root, &gcc_s)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_names_libraries_and_the_loader() {
        let out = "/usr/bin/python3.11:\n\
            \tlinux-vdso.so.1 (0x00007ffd)\n\
            \tlibpython3.11.so.1.0 => /root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0 (0x00007f)\n\
            \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\
            \t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n\
            /x/_json.so:\n\tstatically linked\n";
        let needed = parse_ldd(out).unwrap();
        assert_eq!(
            needed,
            vec![
                Needed::Library {
                    name: "libpython3.11.so.1.0".into(),
                    path: "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0".into()
                },
                Needed::Library {
                    name: "libc.so.6".into(),
                    path: "/lib/x86_64-linux-gnu/libc.so.6".into()
                },
                Needed::Loader("/lib64/ld-linux-x86-64.so.2".into()),
            ]
        );
    }

    #[test]
    fn the_build_prefix_becomes_usr_in_sources_and_keeps_its_length_in_binaries() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let prefix = "/home/me/.pyenv/versions/3.11.7";
        fs::create_dir_all(root.join("usr/lib/python3.11")).unwrap();
        let sysconfig = root.join("usr/lib/python3.11/_sysconfigdata_x.py");
        fs::write(
            &sysconfig,
            format!("build_time_vars = {{'prefix': '{prefix}'}}\n"),
        )
        .unwrap();
        let elf = root.join("usr/bin/python3");
        fs::create_dir_all(elf.parent().unwrap()).unwrap();
        let binary = [b"\x7fELF\0".as_slice(), prefix.as_bytes(), b"/lib\0tail"].concat();
        fs::write(&elf, &binary).unwrap();
        fs::write(root.join("other"), "nothing to see").unwrap();
        neutralize_prefix(root, Path::new(prefix)).unwrap();
        assert_eq!(
            fs::read_to_string(&sysconfig).unwrap(),
            "build_time_vars = {'prefix': '/usr'}\n"
        );
        let rewritten = fs::read(&elf).unwrap();
        assert_eq!(rewritten.len(), binary.len());
        let text = String::from_utf8_lossy(&rewritten);
        assert!(
            !text.contains("home") && text.contains("/usr/3.11.7/lib\0tail"),
            "{text}"
        );
        assert_eq!(
            Path::new(text.split('\0').nth(1).unwrap()),
            Path::new("/usr/3.11.7/lib"),
            "repeated slashes name the same directory"
        );
        // A system python is left alone.
        neutralize_prefix(root, Path::new("/usr")).unwrap();
    }

    #[test]
    fn a_missing_library_is_an_error() {
        let out = "\tlibfoo.so.1 => not found\n";
        assert_eq!(parse_ldd(out), Err("libfoo.so.1 not found".into()));
    }

    #[test]
    fn only_library_directories_count_as_system_ones() {
        assert!(is_system_dir(Path::new("/usr/lib/x86_64-linux-gnu")));
        assert!(!is_system_dir(Path::new(
            "/root/.pyenv/versions/3.11.7/lib"
        )));
    }
}

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
}

const PROBE: &str = "import sys, sysconfig, os\n\
v = sys.version_info\n\
dyn = [p for p in sys.path if p.endswith('lib-dynload')]\n\
print(sys.implementation.name)\n\
print('%d.%d.%d' % (v.major, v.minor, v.micro))\n\
print(v.major, v.minor)\n\
print(os.path.realpath(sys.executable))\n\
print(sysconfig.get_path('stdlib'))\n\
print(dyn[0] if dyn else '')\n";

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
    Ok(probe.version)
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

//! Builds real rootfs trees into temporary cache roots. They need `unshare -r`; without it
//! they are skipped by `testkit::require` (a failure under CI).

use super::*;
use std::os::unix::fs::PermissionsExt;

/// Whether `unshare --user --map-root-user --root=/` works on this host.
fn unshare_available() -> bool {
    std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "--root=/", "true"])
        .env_clear()
        .output()
        .is_ok_and(|out| out.status.success())
}

fn unshare_or_skip() -> bool {
    testkit::require(
        unshare_available(),
        "`unshare --user --map-root-user --root=/` does not work on this host",
    )
}

fn options(cache: &Path, source: Source) -> Options {
    Options {
        source,
        cache_root: Some(cache.to_path_buf()),
        quiet: true,
    }
}

/// Runs python inside the rootfs, as the sandbox does, and returns its stdout.
fn python_inside(rootfs: &Rootfs, code: &str) -> String {
    let mut argv = vec![PYTHON_IN_ROOTFS];
    argv.extend(PYTHON_FLAGS);
    argv.extend(["-c", code]);
    let out = verify::run_inside(&rootfs.dir, &argv).expect("unshare runs");
    assert!(
        out.status.success(),
        "python failed inside {}: {}",
        rootfs.dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

fn check_rootfs(rootfs: &Rootfs, cache: &Path) {
    assert_eq!(rootfs.dir, cache.join(format!("rootfs-{}", rootfs.key)));
    assert_eq!(
        Rootfs::open(&rootfs.dir).as_ref(),
        Some(rootfs),
        "the manifest round-trips"
    );
    assert_eq!(
        tree_digest(&rootfs.dir).unwrap(),
        rootfs.digest,
        "the digest is the tree's"
    );
    assert_eq!(
        rootfs.argv(),
        ["/usr/bin/python3", "-I", "-S", "-B", "/runner.py"]
    );

    // Python starts inside, finds its stdlib there, and uses the precompiled bytecode.
    let out = python_inside(
        rootfs,
        "import sys, asyncio, json, socket, subprocess, threading, hashlib, sqlite3, ssl, ctypes\n\
         import importlib.util as u\n\
         print(sys.prefix, sys.version.split()[0], asyncio.__file__)\n\
         print(u.cache_from_source(asyncio.__file__))",
    );
    let lines: Vec<&str> = out.lines().collect();
    let minor = rootfs
        .python_version
        .split('.')
        .take(2)
        .collect::<Vec<_>>()
        .join(".");
    assert_eq!(
        lines[0],
        format!(
            "/usr {} /usr/lib/python{minor}/asyncio/__init__.py",
            rootfs.python_version
        )
    );
    assert!(
        tree::inside(&rootfs.dir, Path::new(lines[1])).is_file(),
        "no bytecode at {}",
        lines[1]
    );

    // What must not be there.
    let lib = rootfs.dir.join(format!("usr/lib/python{minor}"));
    for absent in [
        "site-packages",
        "dist-packages",
        "test",
        "ensurepip",
        "idlelib",
        "tkinter",
    ] {
        assert!(!lib.join(absent).exists(), "{absent} is in the rootfs");
    }
    for shell in [
        "bin/sh",
        "usr/bin/sh",
        "bin/bash",
        "usr/bin/bash",
        "bin/dash",
    ] {
        assert!(!rootfs.dir.join(shell).exists(), "{shell} is in the rootfs");
    }
    let out = python_inside(
        rootfs,
        "import importlib.util as u\nprint([m for m in ('pip', 'mcp', 'mcp_code_mode', 'setuptools') if u.find_spec(m)])",
    );
    assert_eq!(out, "[]\n");

    // Users, runner, mount points.
    let passwd = fs::read_to_string(rootfs.dir.join("etc/passwd")).unwrap();
    assert!(passwd.contains("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin"));
    assert!(
        fs::read_to_string(rootfs.dir.join("etc/group"))
            .unwrap()
            .contains(":65534:")
    );
    for (path, contents) in RUNNER_FILES {
        assert_eq!(
            fs::read(rootfs.dir.join(path)).unwrap(),
            contents.as_bytes(),
            "/{path} is not the embedded one"
        );
    }
    // The runner's modules have bytecode where the sandbox's Python looks for it.
    let modules: Vec<String> = RUNNER_FILES
        .iter()
        .filter(|(path, _)| {
            path.starts_with(RUNNER_LIB_IN_ROOTFS.trim_start_matches('/')) && path.ends_with(".py")
        })
        .map(|(path, _)| format!("'/{path}'"))
        .collect();
    assert!(!modules.is_empty());
    let out = python_inside(
        rootfs,
        &format!(
            "import importlib.util as u\nfor m in [{}]: print(u.cache_from_source(m))",
            modules.join(", ")
        ),
    );
    for pyc in out.lines() {
        assert!(
            tree::inside(&rootfs.dir, Path::new(pyc)).is_file(),
            "no bytecode at {pyc}"
        );
    }
    assert_eq!(out.lines().count(), modules.len());
    for dir in ["tmp", "dev", "proc"] {
        assert_eq!(
            fs::read_dir(rootfs.dir.join(dir)).unwrap().count(),
            0,
            "/{dir} is not empty"
        );
    }

    // Every file world-readable, every directory world-searchable, nothing setuid/setgid.
    tree::walk(&rootfs.dir, &mut |path, meta| {
        let mode = meta.permissions().mode();
        if !meta.file_type().is_symlink() {
            assert_eq!(mode & 0o7000, 0, "{} has mode {mode:o}", path.display());
            assert_eq!(
                mode & 0o004,
                0o004,
                "{} is not world-readable",
                path.display()
            );
            assert!(
                !meta.is_dir() || mode & 0o001 != 0,
                "{} is not searchable",
                path.display()
            );
            assert_eq!(mode & 0o022, 0, "{} is writable by others", path.display());
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_rootfs_built_from_the_host_python_runs_inside_itself() {
    if !unshare_or_skip() {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let opts = options(cache.path(), Source::Host { python: None });
    let first = build(&opts).expect("the host recipe builds");
    check_rootfs(&first, cache.path());

    // ensure() finds it; build() again gives the same tree; no temp dir is left behind.
    assert_eq!(ensure(&opts).unwrap(), first);
    let second = build(&opts).expect("a second build");
    assert_eq!(
        second.digest, first.digest,
        "the same inputs give the same tree"
    );
    let names: Vec<String> = fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, [format!("rootfs-{}", first.key)]);

    // No file names the prefix the host python was built for (pyenv's, under a home).
    let prefix = std::process::Command::new("python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_config_var('prefix'))",
        ])
        .output()
        .unwrap();
    let prefix = String::from_utf8_lossy(&prefix.stdout).trim().to_owned();
    if prefix.len() >= 4 && !prefix.starts_with("/usr") {
        let naming: Vec<PathBuf> = host::regular_files_for_tests(&first.dir)
            .into_iter()
            .filter(|f| {
                fs::read(f)
                    .unwrap()
                    .windows(prefix.len())
                    .any(|w| w == prefix.as_bytes())
            })
            .collect();
        assert!(
            naming.is_empty(),
            "{naming:?} name the build prefix {prefix}"
        );
    }
}

/// A Python laid out as pyenv lays it out: a small program that embeds CPython
/// (`Py_BytesMain`), linked against a copy of the host's libpython in `<dir>/lib`, a
/// directory ld.so does not search by default (found through the RUNPATH `$ORIGIN/../lib`).
/// Built with `cc` from the host's Python headers (Debian: gcc, libpython3-dev); `Err` says
/// what is missing.
fn pyenv_like_python(dir: &Path) -> Result<PathBuf, String> {
    let vars = std::process::Command::new("python3")
        .args([
            "-c",
            "import sysconfig as s; print(*(s.get_config_var(k) or '' for k in \
             ('INSTSONAME', 'LIBDIR', 'INCLUDEPY', 'LDVERSION')), sep='\\n')",
        ])
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    let vars = String::from_utf8_lossy(&vars.stdout).into_owned();
    let [soname, libdir, include, ldversion] = vars.lines().collect::<Vec<_>>()[..] else {
        return Err(format!("python3 did not describe its build: {vars:?}"));
    };
    let libpython = Path::new(libdir).join(soname);
    if !soname.contains(".so") || !libpython.is_file() {
        return Err(format!(
            "the host python3 has no shared libpython ({libpython:?})"
        ));
    }
    if !Path::new(include).join("Python.h").is_file() {
        return Err(format!(
            "{include}/Python.h is missing (install libpython3-dev)"
        ));
    }
    let (lib, bin) = (dir.join("lib"), dir.join("bin"));
    fs::create_dir_all(&lib).map_err(|e| e.to_string())?;
    fs::create_dir_all(&bin).map_err(|e| e.to_string())?;
    fs::copy(&libpython, lib.join(soname)).map_err(|e| e.to_string())?;
    std::os::unix::fs::symlink(soname, lib.join(format!("libpython{ldversion}.so")))
        .map_err(|e| e.to_string())?;
    let main = dir.join("main.c");
    fs::write(
        &main,
        "#include <Python.h>\nint main(int argc, char **argv) { return Py_BytesMain(argc, argv); }\n",
    )
    .map_err(|e| e.to_string())?;
    let python = bin.join(format!("python{ldversion}"));
    let cc = std::process::Command::new("cc")
        .arg("-o")
        .arg(&python)
        .arg(&main)
        .arg(format!("-I{include}"))
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-lpython{ldversion}"))
        .arg("-Wl,-rpath,$ORIGIN/../lib")
        .output()
        .map_err(|e| format!("cc: {e} (install gcc)"))?;
    if !cc.status.success() {
        return Err(format!(
            "cc failed: {}",
            String::from_utf8_lossy(&cc.stderr).trim()
        ));
    }
    Ok(python)
}

#[test]
fn a_rootfs_built_from_a_pyenv_python_finds_its_libpython_inside() {
    if !unshare_or_skip() {
        return;
    }
    let prefix = tempfile::tempdir().unwrap();
    let python = pyenv_like_python(prefix.path());
    let Ok(python) = python else {
        testkit::require(false, &python.unwrap_err());
        return;
    };
    let soname = fs::read_dir(prefix.path().join("lib"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .find(|n| n.to_string_lossy().contains(".so."))
        .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let rootfs = build(&options(
        cache.path(),
        Source::Host {
            python: Some(python),
        },
    ))
    .unwrap();
    check_rootfs(&rootfs, cache.path());
    assert!(rootfs.dir.join("usr/lib").join(&soname).is_file());
    let inside = prefix.path().strip_prefix("/").unwrap();
    assert!(
        !rootfs.dir.join(inside).exists(),
        "the private prefix is not copied"
    );
}

#[test]
fn a_rootfs_built_from_debian_packages_runs_inside_itself() {
    if !unshare_or_skip() {
        return;
    }
    let apt_ready = std::process::Command::new("apt-cache")
        .args(["show", "python3-minimal"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !testkit::require(
        apt_ready,
        "apt has no package lists here (run apt-get update)",
    ) {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let rootfs = build(&options(cache.path(), Source::Debian)).expect("the debian recipe builds");
    check_rootfs(&rootfs, cache.path());
    assert_eq!(rootfs.source, "debian");
}

#[test]
fn a_failed_build_leaves_nothing_behind() {
    let cache = tempfile::tempdir().unwrap();
    let opts = options(
        cache.path(),
        Source::Host {
            python: Some("/nonexistent/python3".into()),
        },
    );
    let error = build(&opts).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("failed to use /nonexistent/python3 as the source python"),
        "{error}"
    );
    assert_eq!(fs::read_dir(cache.path()).unwrap().count(), 0);
}

#[test]
fn a_directory_without_a_manifest_is_not_a_rootfs() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(Rootfs::open(dir.path()), None);
    fs::write(dir.path().join(MANIFEST_NAME), "recipe=x\nkey=abc\n").unwrap();
    assert_eq!(Rootfs::open(dir.path()), None, "an incomplete manifest");
}

#[test]
fn the_key_depends_on_the_source_kind_only() {
    let host = rootfs_key(&Source::Host { python: None });
    assert_eq!(host.len(), 16);
    assert!(host.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(
        host,
        rootfs_key(&Source::Host {
            python: Some("/x".into())
        })
    );
    assert_ne!(host, rootfs_key(&Source::Debian));
}

#[test]
fn the_key_changes_with_any_runner_file() {
    let key = |files: &[(&str, &str)]| key_of(RECIPE_VERSION, files, "host");
    let base = key(RUNNER_FILES);
    assert_eq!(base, rootfs_key(&Source::Host { python: None }));
    let edited: Vec<String> = RUNNER_FILES
        .iter()
        .map(|(_, contents)| format!("{contents}\n"))
        .collect();
    for index in 0..RUNNER_FILES.len() {
        let mut files = RUNNER_FILES.to_vec();
        files[index].1 = &edited[index];
        assert_ne!(key(&files), base, "{} edited", files[index].0);
        let mut files = RUNNER_FILES.to_vec();
        files[index].0 = "elsewhere.py";
        assert_ne!(key(&files), base, "{} moved", RUNNER_FILES[index].0);
        let mut files = RUNNER_FILES.to_vec();
        files.remove(index);
        assert_ne!(key(&files), base, "{} left out", RUNNER_FILES[index].0);
    }
    assert_ne!(
        key_of("mcp-code-mode-rootfs-0", RUNNER_FILES, "host"),
        base,
        "another recipe"
    );
}

/// Every file under the repository's `rootfs/` (but bytecode) is one of [`RUNNER_FILES`], so a
/// new runner module cannot be left out of the rootfs or the key.
#[test]
fn every_file_of_the_repository_rootfs_directory_is_embedded() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("rootfs");
    let mut found = Vec::new();
    tree::walk(&base, &mut |path, meta| {
        let rel = path
            .strip_prefix(&base)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if meta.is_file() && !rel.contains("__pycache__") {
            found.push(rel);
        }
        Ok(())
    })
    .unwrap();
    found.sort();
    let mut embedded: Vec<String> = RUNNER_FILES.iter().map(|(p, _)| p.to_string()).collect();
    embedded.sort();
    assert_eq!(found, embedded);
    assert_eq!(RUNNER_FILES[0].0, RUNNER_IN_ROOTFS.trim_start_matches('/'));
}

#[test]
fn an_explicit_cache_root_wins() {
    assert_eq!(
        cache_root(Some(Path::new("/x/y"))).unwrap(),
        PathBuf::from("/x/y")
    );
}

#[test]
fn the_digest_covers_contents_modes_and_links() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::write(root.join("a"), "one").unwrap();
    let base = tree_digest(root).unwrap();
    fs::write(root.join(MANIFEST_NAME), "ignored").unwrap();
    assert_eq!(tree_digest(root).unwrap(), base, "the manifest is left out");
    fs::write(root.join("a"), "two").unwrap();
    let changed = tree_digest(root).unwrap();
    assert_ne!(changed, base);
    fs::set_permissions(root.join("a"), fs::Permissions::from_mode(0o755)).unwrap();
    assert_ne!(tree_digest(root).unwrap(), changed);
    std::os::unix::fs::symlink("a", root.join("b")).unwrap();
    assert_ne!(tree_digest(root).unwrap(), changed);
}

//! Stage 12: execve(2) the program with an empty environment (cwd /tmp was set by the
//! mount stage). On success this never returns.

use std::ffi::{CString, OsString};

use crate::sys;

/// The exec failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// An argument held a NUL byte.
    #[error("failed to exec: argument {0:?} contains a NUL byte")]
    Nul(OsString),
    /// execve(2) failed (ENOENT: not in the rootfs; EACCES: not executable or Landlock).
    #[error("failed to exec {program:?} inside the rootfs: {source}")]
    Execve {
        program: OsString,
        source: std::io::Error,
    },
}

/// Replaces this process with `program[0]`, argv = `program`, envp = empty.
pub fn exec_program(program: &[OsString]) -> ExecError {
    let argv: Result<Vec<CString>, ExecError> = program
        .iter()
        .map(|a| sys::cstring(a).map_err(|_| ExecError::Nul(a.clone())))
        .collect();
    let argv = match argv {
        Ok(argv) if !argv.is_empty() => argv,
        Ok(_) => return ExecError::Nul(OsString::new()),
        Err(e) => return e,
    };
    let source = sys::execve(&argv[0], &argv, &[]);
    ExecError::Execve {
        program: program[0].clone(),
        source,
    }
}

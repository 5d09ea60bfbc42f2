//! Stage 9: no_new_privs, so no execve can gain privileges again (setuid bits, file
//! capabilities), and seccomp and Landlock can be installed without CAP_SYS_ADMIN.
//! Source: prctl(2) PR_SET_NO_NEW_PRIVS; Documentation/userspace-api/no_new_privs.rst.

use crate::sys;

/// prctl(PR_SET_NO_NEW_PRIVS) failed.
#[derive(Debug, thiserror::Error)]
pub enum PrivsError {
    /// The prctl call failed.
    #[error("failed to set no_new_privs: {0}")]
    NoNewPrivs(#[source] std::io::Error),
}

/// Sets no_new_privs (irreversible, inherited by every child).
pub fn forbid_new_privileges() -> Result<(), PrivsError> {
    sys::set_no_new_privs().map_err(PrivsError::NoNewPrivs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::Exit;
    use crate::testutil::in_child;

    #[test]
    fn no_new_privs_is_set_and_survives_exec() {
        let exit = in_child(|| {
            forbid_new_privileges().unwrap();
            // The flag as the next program sees it, read from /proc after an execve.
            let out = std::process::Command::new("/bin/grep")
                .args(["^NoNewPrivs:", "/proc/self/status"])
                .output()
                .unwrap();
            let line = String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            if sys::no_new_privs().unwrap() && line == "NoNewPrivs: 1" {
                0
            } else {
                1
            }
        });
        assert_eq!(exit, Exit::Code(0));
    }
}

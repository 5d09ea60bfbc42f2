//! The launcher's seccomp [`Policy`] exported as a Docker seccomp profile (JSON).
//!
//! One policy serves both backends (docs/architecture.md, "One seccomp policy"):
//! the native launcher loads [`launcher::seccomp::policy`] with libseccomp, and the Docker
//! backend hands the same data to the engine in each container's create request (the
//! `seccomp=<profile JSON>` security option, as `docker run --security-opt seccomp=<file>`
//! sends the file's content). This module
//! is the pure translation; the golden copy `tests/golden/docker-seccomp.json` makes every
//! change to the policy a reviewed diff (rewrite it with `UPDATE_GOLDEN=1 cargo test`).
//!
//! Shape of the profile (moby `profiles/seccomp` types, the OCI runtime spec's
//! `LinuxSeccomp`):
//! - `defaultAction` `SCMP_ACT_ERRNO` with `defaultErrnoRet` = [`Policy::default_errno`];
//! - `architectures`: only the native one. libseccomp then sends every other architecture,
//!   and x32, to its bad-arch action. The profile format has no field for that action, and
//!   runc leaves libseccomp's default, which kills only the calling thread (the run would
//!   hang until its deadline), so runner.py adds a filter of its own, before any thread
//!   starts, that kills the whole process on those syscalls as the native filter does (the
//!   policy's `prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)` rule lets it);
//! - `syscalls`: one entry allowing [`Policy::allow`]; one entry per [`Policy::allow_if`]
//!   rule, its comparisons as `args` (`SCMP_CMP_MASKED_EQ` with `value` = the mask and
//!   `valueTwo` = the value, libseccomp's operand order); one entry answering
//!   [`Policy::enosys`] with `errnoRet` ENOSYS;
//! - a rule's `why` goes into the entry's `comment`.

use launcher::seccomp::{CmpOp, Policy};
use serde_json::{Value, json};

/// ENOSYS on every architecture we export for (include/uapi/asm-generic/errno.h).
const ENOSYS: i32 = 38;

/// Why a policy cannot be exported.
#[derive(Debug, thiserror::Error)]
pub(super) enum SeccompJsonError {
    /// Docker has no name for the policy's architecture.
    #[error(
        "failed to export the seccomp policy: architecture {0:?} has no libseccomp name here; \
         add it to seccomp_json::scmp_arch"
    )]
    UnknownArch(String),
}

/// libseccomp's name (`SCMP_ARCH_*`) for a Rust architecture name
/// (`std::env::consts::ARCH`), or `None` when we do not know it.
pub(super) fn scmp_arch(arch: &str) -> Option<&'static str> {
    Some(match arch {
        "x86_64" => "SCMP_ARCH_X86_64",
        "x86" => "SCMP_ARCH_X86",
        "aarch64" => "SCMP_ARCH_AARCH64",
        "arm" => "SCMP_ARCH_ARM",
        "riscv64" => "SCMP_ARCH_RISCV64",
        "s390x" => "SCMP_ARCH_S390X",
        "powerpc64" if cfg!(target_endian = "little") => "SCMP_ARCH_PPC64LE",
        "powerpc64" => "SCMP_ARCH_PPC64",
        _ => return None,
    })
}

/// Docker's seccomp profile for `policy`, as a JSON value (see the module docs for the shape).
///
/// # Errors
/// [`SeccompJsonError::UnknownArch`] when `policy.arch` has no `SCMP_ARCH_*` name.
pub(super) fn export(policy: &Policy) -> Result<Value, SeccompJsonError> {
    let arch =
        scmp_arch(policy.arch).ok_or_else(|| SeccompJsonError::UnknownArch(policy.arch.into()))?;
    let mut syscalls = vec![json!({
        "names": policy.allow,
        "action": "SCMP_ACT_ALLOW",
        "comment": "allowed whatever the arguments (launcher::seccomp ALLOW)",
    })];
    for rule in &policy.allow_if {
        let args: Vec<Value> = rule
            .args
            .iter()
            .map(|a| match a.op {
                CmpOp::MaskedEq { mask } => json!({
                    "index": a.index,
                    "value": mask,
                    "valueTwo": a.value,
                    "op": "SCMP_CMP_MASKED_EQ",
                }),
            })
            .collect();
        syscalls.push(json!({
            "names": [rule.syscall],
            "action": "SCMP_ACT_ALLOW",
            "args": args,
            "comment": rule.why,
        }));
    }
    // A rule whose action equals the default is redundant (libseccomp refuses it).
    if !policy.enosys.is_empty() && policy.default_errno != ENOSYS {
        syscalls.push(json!({
            "names": policy.enosys,
            "action": "SCMP_ACT_ERRNO",
            "errnoRet": ENOSYS,
            "comment": "answered ENOSYS so the C library falls back to an older call (clone3 -> clone)",
        }));
    }
    Ok(json!({
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": policy.default_errno,
        "architectures": [arch],
        "syscalls": syscalls,
    }))
}

/// [`export`] as pretty-printed JSON text with a final newline: the content of
/// `tests/golden/docker-seccomp.json`, and (compacted) of the profile given to the engine.
///
/// # Errors
/// As [`export`].
pub(super) fn export_text(policy: &Policy) -> Result<String, SeccompJsonError> {
    let mut text = serde_json::to_string_pretty(&export(policy)?).unwrap_or_default();
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use launcher::seccomp::policy;
    use std::collections::HashSet;

    fn entries(profile: &Value) -> &Vec<Value> {
        profile["syscalls"]
            .as_array()
            .expect("syscalls is an array")
    }

    fn names(entry: &Value) -> Vec<&str> {
        entry["names"]
            .as_array()
            .expect("names is an array")
            .iter()
            .map(|n| n.as_str().expect("a name is a string"))
            .collect()
    }

    #[test]
    fn the_export_contains_every_rule_of_the_policy_and_nothing_else() {
        let p = policy();
        let profile = export(&p).unwrap();
        assert_eq!(profile["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(profile["defaultErrnoRet"], p.default_errno);
        assert_eq!(
            profile["architectures"],
            json!([scmp_arch(p.arch).unwrap()])
        );

        let unconditional: Vec<&str> = entries(&profile)
            .iter()
            .filter(|e| e["action"] == "SCMP_ACT_ALLOW" && e.get("args").is_none())
            .flat_map(names)
            .collect();
        assert_eq!(unconditional, p.allow, "the unconditional allowlist");

        let conditional: Vec<&Value> = entries(&profile)
            .iter()
            .filter(|e| e["action"] == "SCMP_ACT_ALLOW" && e.get("args").is_some())
            .collect();
        assert_eq!(
            conditional.len(),
            p.allow_if.len(),
            "one entry per conditional rule"
        );
        for (entry, rule) in conditional.iter().zip(&p.allow_if) {
            assert_eq!(names(entry), vec![rule.syscall]);
            assert_eq!(entry["comment"], rule.why);
            let args = entry["args"].as_array().unwrap();
            assert_eq!(args.len(), rule.args.len(), "{}", rule.syscall);
            for (arg, cmp) in args.iter().zip(&rule.args) {
                let CmpOp::MaskedEq { mask } = cmp.op;
                assert_eq!(arg["index"], cmp.index);
                assert_eq!(arg["op"], "SCMP_CMP_MASKED_EQ");
                assert_eq!(arg["value"], mask, "{}: value is the mask", rule.syscall);
                assert_eq!(
                    arg["valueTwo"], cmp.value,
                    "{}: valueTwo is the datum",
                    rule.syscall
                );
            }
        }

        let enosys: Vec<&str> = entries(&profile)
            .iter()
            .filter(|e| e["action"] == "SCMP_ACT_ERRNO")
            .inspect(|e| assert_eq!(e["errnoRet"], ENOSYS))
            .flat_map(names)
            .collect();
        assert_eq!(enosys, p.enosys);
        assert!(enosys.contains(&"clone3"), "clone3 must answer ENOSYS");
    }

    #[test]
    fn nothing_the_policy_refuses_is_allowed_by_the_export() {
        let profile = export(&policy()).unwrap();
        let allowed: HashSet<&str> = entries(&profile)
            .iter()
            .filter(|e| e["action"] == "SCMP_ACT_ALLOW")
            .flat_map(names)
            .collect();
        for (name, why) in launcher::seccomp::REFUSED {
            assert!(!allowed.contains(name), "{name} must stay refused: {why}");
        }
    }

    #[test]
    fn every_integer_comparison_in_the_export_ignores_the_high_32_bits() {
        let profile = export(&policy()).unwrap();
        for entry in entries(&profile) {
            for arg in entry["args"].as_array().into_iter().flatten() {
                let mask = arg["value"].as_u64().unwrap();
                assert_eq!(mask >> 32, 0, "{entry}");
                assert_eq!(arg["op"], "SCMP_CMP_MASKED_EQ");
            }
        }
    }

    #[test]
    fn an_unknown_architecture_is_an_error_not_an_empty_profile() {
        let p = Policy {
            arch: "vax",
            ..policy()
        };
        let err = export(&p).unwrap_err().to_string();
        assert!(
            err.starts_with("failed to export the seccomp policy"),
            "{err}"
        );
    }

    #[test]
    fn the_export_equals_the_golden_copy() {
        if !testkit::require(
            std::env::consts::ARCH == "x86_64",
            "the golden copy is the x86_64 profile",
        ) {
            return;
        }
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden/docker-seccomp.json");
        testkit::golden(&path, &export_text(&policy()).unwrap());
    }
}

//! Stage 11: the seccomp filter. The policy is data ([`policy`]); [`install`] loads it with
//! libseccomp. The host exports the same [`Policy`] as Docker's seccomp JSON, so one policy
//! serves both backends.
//!
//! Shape: an allowlist for the native architecture only (other architectures and x32 are
//! killed), a default errno (EPERM), a few syscalls allowed only when their arguments match
//! ([`Rule`]), and `clone3` answered ENOSYS so glibc falls back to `clone` (with EPERM it does
//! not, and Python cannot start threads). Every integer argument is compared on its low 32
//! bits: the kernel reads `int` arguments as 32-bit, so a 64-bit compare can be bypassed by
//! setting high bits (`socket(AF_INET | 1 << 32)` passed a plain equality rule on this
//! machine). Rules say "allow iff equal", never "deny iff equal".
//! A syscall allowed whatever its arguments is answered by its number and arch alone, so the
//! kernel's seccomp action cache (Linux 5.11+) allows it without running the program: a tool
//! call's write, poll and recvfrom cost the same inside the sandbox as outside. The program's
//! length counts only for the syscalls with argument rules and the refused ones.
//! Sources: seccomp(2), seccomp_rule_add(3), Documentation/userspace-api/seccomp_filter.rst.
//!
//! The policy itself is in `policy.rs`; this module holds its shape and the filter builder.

use libseccomp::{ScmpAction, ScmpArgCompare, ScmpCompareOp, ScmpFilterContext, ScmpSyscall};

mod policy;
#[cfg(test)]
mod tests;

pub use self::policy::{
    CLONE_NEW_ANY, FCNTLS, IOCTLS, LOW_32, PR_SET_DUMPABLE, PR_SET_SECCOMP, PRCTLS, REFUSED,
    SECCOMP_MODE_FILTER, SOCKOPTS, policy,
};

/// How an argument is compared. Only masked equality is used (allow iff equal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `(arg & mask) == value` — libseccomp `SCMP_CMP_MASKED_EQ`; in Docker's JSON
    /// `"op": "SCMP_CMP_MASKED_EQ", "value": mask, "valueTwo": value`.
    MaskedEq {
        /// The bits of the argument that are compared.
        mask: u64,
    },
}

/// One argument comparison of a [`Rule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgCmp {
    /// The argument's position, 0 to 5.
    pub index: u32,
    /// The comparison.
    pub op: CmpOp,
    /// The value the masked argument must equal.
    pub value: u64,
}

/// A syscall allowed only when every comparison in `args` holds. Several rules for the same
/// syscall are alternatives (any one allows the call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The syscall's name, as libseccomp and Docker spell it.
    pub syscall: &'static str,
    /// All must hold (AND); each index appears at most once per rule.
    pub args: Vec<ArgCmp>,
    /// Why the rule is shaped so, and where the constant comes from.
    pub why: &'static str,
}

/// The whole filter as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The only architecture allowed (the native one, e.g. `x86_64`); any other, and x32,
    /// kill the process (libseccomp's bad-arch action `KillProcess`).
    pub arch: &'static str,
    /// errno returned for every syscall not allowed below (EPERM unless --seccomp-errno).
    pub default_errno: i32,
    /// Syscalls allowed whatever their arguments.
    pub allow: Vec<&'static str>,
    /// Syscalls allowed only with matching arguments.
    pub allow_if: Vec<Rule>,
    /// Syscalls answered ENOSYS, so the C library falls back to an older call.
    pub enosys: Vec<&'static str>,
}

/// Building or loading the filter failed.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// libseccomp refused the filter, a rule, or the load.
    #[error("failed to {what} seccomp filter: {why}")]
    Filter { what: String, why: String },
}

fn filter_err(
    what: impl Into<String>,
) -> impl FnOnce(libseccomp::error::SeccompError) -> SeccompError {
    let what = what.into();
    move |e| SeccompError::Filter {
        what,
        why: e.to_string(),
    }
}

fn syscall(name: &str) -> Result<ScmpSyscall, SeccompError> {
    ScmpSyscall::from_name(name).map_err(filter_err(format!("resolve syscall {name:?} for the")))
}

/// Builds the libseccomp filter for `policy` without loading it.
pub fn build(policy: &Policy) -> Result<ScmpFilterContext, SeccompError> {
    let default = ScmpAction::Errno(policy.default_errno);
    let mut ctx = ScmpFilterContext::new(default).map_err(filter_err("create the"))?;
    // Only the native arch is in the filter; a syscall from another arch (i386 via int 0x80)
    // or from x32 (syscall number with bit 30 set) hits the bad-arch action.
    ctx.set_act_badarch(ScmpAction::KillProcess)
        .map_err(filter_err("set bad-arch action of the"))?;
    for name in &policy.allow {
        ctx.add_rule(ScmpAction::Allow, syscall(name)?)
            .map_err(filter_err(format!("allow {name} in the")))?;
    }
    for rule in &policy.allow_if {
        let cmps: Vec<ScmpArgCompare> = rule
            .args
            .iter()
            .map(|a| match a.op {
                CmpOp::MaskedEq { mask } => {
                    ScmpArgCompare::new(a.index, ScmpCompareOp::MaskedEqual(mask), a.value)
                }
            })
            .collect();
        ctx.add_rule_conditional(ScmpAction::Allow, syscall(rule.syscall)?, &cmps)
            .map_err(filter_err(format!("add the {} rule to the", rule.syscall)))?;
    }
    // A rule whose action equals the default is refused by libseccomp (and is redundant).
    if policy.default_errno != libc::ENOSYS {
        for name in &policy.enosys {
            ctx.add_rule(ScmpAction::Errno(libc::ENOSYS), syscall(name)?)
                .map_err(filter_err(format!("answer {name} ENOSYS in the")))?;
        }
    }
    Ok(ctx)
}

/// Loads `policy` into this thread (and every later child). Needs no_new_privs (stage 9).
/// After this, only allowed syscalls run; the next call should be execve.
pub fn install(policy: &Policy) -> Result<(), SeccompError> {
    let ctx = build(policy)?;
    ctx.load().map_err(filter_err("load the"))
}

//! The probe classes: hostile Python from inside the sandbox, judged from outside.
//!
//! Every file in `tests/probes/<class>/` performs one hostile attempt (plus its positive
//! control) and prints one JSON line `{"probe", "outcome", "errno", "control", ...}`; it runs
//! through the real `mcp-code-mode exec` on each backend, after `tests/probes/prelude.py` and
//! the facts about the host it must not reach ([`host_facts::HostFacts`]). A run that prints no line
//! (the sandbox was stopped, or the probe raised) is judged by the result instead:
//! `stopped:<reason>` or `raised:<exception>`. [`expect::EXPECT`] lists, per probe, the accepted
//! outcomes: one outcome class per probe (the same on both backends); errnos may differ by
//! backend where the table says so. `exit 0` is never an outcome. After every probe the host
//! checks that nothing named with the probe's marker survived the run and that what exec
//! printed is bounded; after every class, that a host process of the sandbox's uid (the
//! sentinel) is still alive. One test per class per backend; the probes of a class run in
//! parallel. The whole table runs once more on the native backend with seccomp answering a
//! sentinel errno ([`expect::UNDER_SENTINEL`], through the test-only
//! `MCP_CODE_MODE_TEST_SECCOMP_ERRNO`), so each denial is attributed to seccomp or to another
//! layer, and its table says which. The
//! per-layer view of the launcher alone is in `layers.rs` and `layers_alone.rs`.
//!
//! Index: the expectation tables and their check against the probe files (`expect`); the host
//! facts (`host_facts`); one probe's run and its verdict, with the survivor check (`verdict`);
//! here, one test per probe class and backend, and per class with the sentinel errno
//! (`classes_on_both_backends!`), with the sentinel-process and device-node checks;
//! isolation between concurrent runs (`between_runs`).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

mod between_runs;
mod expect;
mod host_facts;
mod verdict;

use expect::{SENTINEL, probes_of};
use host_facts::HostFacts;
use verdict::{Errno, run_probe};

/// Probes of one class running at once, per backend.
const PARALLEL: usize = 4;

/// Runs every probe of `class` on `backend`, prints the table, fails with every mismatch.
fn class_is_contained(backend: &str, class: &str) {
    run_class(backend, class, Errno::Shipped)
}

/// [`class_is_contained`] with seccomp answering the sentinel errno: the table also says
/// which layer refused each probe (`seccomp`, or `other` for every other layer).
fn class_denials_are_attributed(backend: &str, class: &str) {
    run_class(backend, class, Errno::Sentinel)
}

fn run_class(backend: &str, class: &str, errno: Errno) {
    let mut host = HostFacts::new(&format!("{backend}-{class}"));
    let probes = probes_of(class);
    let next = AtomicUsize::new(0);
    let verdicts = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..PARALLEL.min(probes.len()) {
            s.spawn(|| {
                while let Some(probe) = probes.get(next.fetch_add(1, Ordering::SeqCst)) {
                    let verdict = run_probe(backend, probe, &host.facts, errno);
                    verdicts.lock().unwrap().push(verdict);
                }
            });
        }
    });
    let mut verdicts = verdicts.into_inner().unwrap();
    verdicts.sort_by(|a, b| a.probe.cmp(&b.probe));
    let mut table = String::new();
    let mut failed = Vec::new();
    for v in &verdicts {
        let mark = if v.failures.is_empty() { "ok" } else { "FAIL" };
        let layer = match errno {
            Errno::Shipped => "",
            Errno::Sentinel if v.observed.contains(SENTINEL) => " seccomp",
            Errno::Sentinel => " other  ",
        };
        table += &format!(
            "{backend:6}{layer} {:34} {:40} {:>6.1}s {mark}\n",
            v.probe,
            v.observed,
            v.took.as_secs_f64()
        );
        for f in &v.failures {
            failed.push(format!("{backend} {}: {f}", v.probe));
        }
    }
    eprint!("{table}");
    let changed = host.changed_devices();
    if !changed.is_empty() {
        failed.push(format!(
            "{backend} {class}: the host's device nodes changed: {changed:?}"
        ));
    }
    if !host.sentinel_alive() {
        failed.push(format!(
            "{backend} {class}: the host sentinel (uid of the sandbox, our process group) was killed"
        ));
    }
    assert!(failed.is_empty(), "\n{table}\n{}", failed.join("\n"));
}

fn ready(backend: &str) -> bool {
    super::common::backend_ready(backend)
}

macro_rules! classes_on_both_backends {
    ($($name:ident => $class:literal),* $(,)?) => {
        mod native {
            $( #[test] fn $name() { if super::ready("native") { super::class_is_contained("native", $class) } } )*
        }
        mod docker {
            $( #[test] fn $name() { if super::ready("docker") { super::class_is_contained("docker", $class) } } )*
        }
        /// The same classes with seccomp answering the sentinel errno, on the native backend
        /// only: the Docker engine here (20.10.24, runc 1.1.5) answers EPERM whatever the
        /// profile's `defaultErrnoRet` says (checked with `docker run` and a profile of 99).
        mod native_sentinel {
            $( #[test] fn $name() { if super::ready("native") { super::class_denials_are_attributed("native", $class) } } )*
        }
    };
}

classes_on_both_backends!(
    net_probes_are_contained => "net",
    fs_probes_are_contained => "fs",
    priv_probes_are_contained => "priv",
    krn_probes_are_contained => "krn",
    res_probes_are_contained => "res",
    proto_probes_are_contained => "proto",
    env_probes_are_contained => "env",
    life_probes_are_contained => "life",
    quota_probes_are_contained => "quota",
    iso_probes_are_contained => "iso",
);

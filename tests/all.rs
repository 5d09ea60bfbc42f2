//! The integration suite: one test binary, modules under `suite/`.
//!
//! Tests drive the real binaries (`mcp-code-mode`, the toy server). A test that needs
//! something this host lacks prints `SKIPPED` (past the harness's capture) and returns when
//! run by a person; under `CI=true` or `CI=1` it fails instead (`testkit::require`, the one
//! skip rule of the workspace). Golden files follow `testkit::golden`.

// Tests may unwrap: a panic is the test failing with the value that was wrong.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;

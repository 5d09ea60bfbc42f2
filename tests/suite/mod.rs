//! Test modules, one per subject.

pub mod common;
mod end_to_end;
mod runner_protocol;
mod threat_model;

//! Test modules, one per subject.

pub mod common;
mod end_to_end;
mod runner_protocol;
mod seed_features;
mod threat_model;
mod misbehaving_servers;

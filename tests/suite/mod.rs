//! Test modules, one per subject.

pub mod common;
mod end_to_end;
mod golden;
mod runner_protocol;
mod seed_features;
mod skill;
mod threat_model;
mod misbehaving_servers;

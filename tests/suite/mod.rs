//! Test modules, one per subject.

mod cleanup;
pub mod common;
mod docker_backend;
mod doctor;
mod end_to_end;
mod golden;
mod layers;
mod misbehaving_servers;
mod probes;
mod runner_edge_cases;
mod runner_protocol;
mod seed_features;
mod skill;
mod steering;
mod systemd_scope;
mod threat_model;

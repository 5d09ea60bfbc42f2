//! Governance of what the code does through the bridge: the audit log of every run and call
//! ([`audit`]), the read-only mode and which calls need approval ([`policy`]), and asking a
//! person through MCP elicitation ([`approval`]). README "Governance" says how to use them;
//! `docs/audit-log.md` is the log's schema.

pub(crate) mod approval;
pub(crate) mod audit;
mod audit_writer;
pub(crate) mod options;
pub(crate) mod policy;

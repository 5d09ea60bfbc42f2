//! mcp-code-mode: code mode for any MCP server.
//!
//! A model writes Python that calls a wrapped MCP server's tools as async functions; the code
//! runs in a locked-down sandbox ([`sandbox`]), and every call it makes passes the host-side
//! [`bridge`], which checks it before the wrapped server sees it. [`server`] serves all of it
//! as one MCP tool, `run_python`.

pub mod bridge;
pub mod cli;
pub mod config;
pub mod description;
pub mod limits;
pub mod protocol;
pub mod pyjson;
pub mod rootfs;
pub mod run;
pub mod sandbox;
pub mod server;

//! Golden files for generated contracts: the run_python description and the stubs.
//! Rewrite them with `UPDATE_GOLDEN=1 cargo test golden` and review the diff (refused under
//! CI; `scripts/test` fails if a run left tests/golden changed).
//!
//! Index: the run_python description, the hostile stubs, the summary fallback.

use std::path::PathBuf;

use mcp_code_mode::bridge::{Bridge, Catalog, Selection, ServerEntry, ServerTools};
use mcp_code_mode::description::describe;
use mcp_code_mode::limits::{DEFAULT_DEADLINE_SECS, DEFAULT_MAX_CALLS};

use super::common::example;

async fn bridge(args: &[&str]) -> Bridge {
    let entry = ServerEntry::stdio(
        "server",
        example("toy_server").display().to_string(),
        args.iter().copied(),
    );
    Bridge::open(vec![entry], false)
        .await
        .expect("open the toy server")
}

fn check(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    testkit::golden(&path, actual);
    // Compared or rewritten, the file now holds exactly what was generated.
    let stored = std::fs::read_to_string(&path).expect("the golden file exists");
    assert_eq!(stored, actual, "{}", path.display());
}

/// The run_python description of the toy server started with `args`, at the default limits.
async fn description(args: &[&str]) -> String {
    let b = bridge(args).await;
    let text = describe(
        &b.catalog(),
        DEFAULT_DEADLINE_SECS,
        DEFAULT_MAX_CALLS,
        &b.call_timeouts(),
    );
    b.close().await;
    text
}

#[tokio::test]
async fn the_run_python_description_matches_its_golden_file() {
    check("run_python_description.txt", &description(&[]).await);
}

#[tokio::test]
async fn hostile_stubs_match_their_golden_file() {
    let b = bridge(&["--hostile"]).await;
    check("hostile_stubs.txt", &b.stubs());
    b.close().await;
}

#[tokio::test]
async fn the_summary_fallback_matches_its_golden_file() {
    check(
        "summary_fallback.txt",
        &description(&["--many", "100"]).await,
    );
}

/// The stubs of a real server's tools, from its `tools/list` captured once into
/// `tests/fixtures/schemas/NAME.json`.
fn real_server_stubs(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/schemas")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).expect("read the fixture");
    let fixture: serde_json::Value = serde_json::from_str(&text).expect("parse the fixture");
    let tools: Vec<rmcp::model::Tool> =
        serde_json::from_value(fixture["tools"].clone()).expect("tools as rmcp reads them");
    let selection = Selection::default();
    let catalog = Catalog::build(&[ServerTools {
        name,
        prefixed: false,
        tools: &tools,
        selection: &selection,
    }])
    .expect("the catalog builds");
    assert_eq!(catalog.tools().len(), tools.len(), "a tool was left out");
    catalog
        .tools()
        .iter()
        .map(|t| t.stub.as_str())
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[test]
fn server_everything_stubs_match_their_golden_file() {
    check(
        "stubs-server-everything.txt",
        &real_server_stubs("server-everything"),
    );
}

#[test]
fn server_memory_stubs_match_their_golden_file() {
    let stubs = real_server_stubs("server-memory");
    // The fields of nested objects are spelled out, not `list[dict]` alone.
    assert!(
        stubs.contains("name: str — The name of the entity"),
        "{stubs}"
    );
    check("stubs-server-memory.txt", &stubs);
}

#[test]
fn server_filesystem_stubs_match_their_golden_file() {
    let stubs = real_server_stubs("server-filesystem");
    assert!(
        stubs.contains("oldText: str — Text to search for - must match exactly"),
        "{stubs}"
    );
    assert!(stubs.contains("dryRun?: bool = False"), "{stubs}");
    check("stubs-server-filesystem.txt", &stubs);
}

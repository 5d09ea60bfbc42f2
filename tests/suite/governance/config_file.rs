//! A config file sets read-only mode and approval per server, and the audit log.

use serde_json::json;

use super::{Fixture, of_kind, records};
use crate::suite::common::{ExecOptions, exec_with};

#[test]
fn a_config_file_sets_read_only_and_approval_per_server_and_the_audit_log() {
    let Some(f) = Fixture::ready() else { return };
    let server = f.server();
    let config = json!({
        "audit": {"file": "config-audit.jsonl", "args": "full"},
        "mcpServers": {
            "notes": {"command": server[0], "args": [server[1]], "readOnly": true},
            "tracker": {"command": server[0], "args": [server[1]], "approve": ["write_note"]}
        }
    });
    let path = f.dir.path().join("servers.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let code = "print(sorted(n for n in TOOLS if n.startswith('notes__')))\nprint(await tracker__delete_note({'id': 1}))\ntry:\n    await tracker__write_note({'id': 1})\nexcept ToolError as e:\n    print('ToolError:', e)";
    let run = exec_with(
        code,
        ExecOptions {
            args: vec!["--config".into(), path.display().to_string()],
            server: Vec::new(),
            ..Default::default()
        },
    );
    let printed = run.printed();
    assert!(
        // The refusal names the function the code called, its server (there are two) and
        // the setting that asked for approval, not the MCP name or a flag nobody gave.
        printed.starts_with(
            "['notes__read_note']\ndone\nToolError: tracker__write_note (server \"tracker\") refused: it needs a person's approval (\"approve\" in the config entry \"tracker\"), and this run has no MCP client to ask (exec"
        ),
        "{run:?}"
    );
    assert_eq!(f.calls_received(), ["delete_note"]);
    let records = records(&f.dir.path().join("config-audit.jsonl"));
    let calls = of_kind(&records, "call");
    assert_eq!(calls.len(), 2, "{records:?}");
    assert_eq!(calls[0]["server"], "tracker");
    assert_eq!(calls[0]["args"], json!({"id": 1}));
    assert_eq!(calls[1]["approval"]["decision"], "unavailable");
}

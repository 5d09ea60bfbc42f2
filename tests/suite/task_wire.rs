//! The wire of MCP 2025-11-25 tasks as `serve` answers them over stdio, spoken to in raw
//! JSON-RPC lines (a client SDK would hide what is checked here):
//! - `tasks/list` answers in one page and gives no cursor, so a made-up `cursor` is refused
//!   with -32602 (Invalid params), as the specification's "Protocol Errors" asks, and a
//!   list without one answers the task;
//! - `tasks/result` carries only the fields of the session's protocol: no `resultType`
//!   (added in 2026-07-28) in a 2025-11-25 session, `resultType: "complete"` for a
//!   2026-07-28 client (which has no `initialize` and names its version in each request's
//!   `_meta`);
//! - a run whose `progressToken` is no string or integer (MCP basic/utilities/progress) is
//!   refused with -32602, as a task and as a plain call, instead of running without progress.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::common::serve_toy;

/// `serve --pool 0` on the toy server, spoken to in raw lines by a client of one protocol
/// version.
struct Session {
    _serve: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The `_meta` every request carries (2026-07-28), or `None` (2025-11-25).
    meta: Option<Value>,
}

impl Session {
    /// A 2025-11-25 client, after `initialize` and `notifications/initialized`.
    async fn initialized() -> Self {
        let mut session = Self::spawn(None);
        let init = session
            .request(
                1,
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"}}),
            )
            .await;
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        session
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        session
    }

    /// A 2026-07-28 client: no `initialize`; each request names the version in `_meta`.
    fn stateless() -> Self {
        Self::spawn(Some(json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {},
        })))
    }

    fn spawn(meta: Option<Value>) -> Self {
        let (serve, stdin, stdout) = serve_toy();
        Self {
            _serve: serve,
            stdin,
            stdout,
            meta,
        }
    }

    async fn send(&mut self, message: &Value) {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.stdin.write_all(&line).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// Send request `id` and read lines (skipping notifications) until its answer, 60 s at
    /// most.
    async fn request(&mut self, id: u64, method: &str, mut params: Value) -> Value {
        if let (Some(meta), Some(params)) = (&self.meta, params.as_object_mut()) {
            params.insert("_meta".into(), meta.clone());
        }
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&message).await;
        let read = async {
            let mut line = String::new();
            loop {
                line.clear();
                assert_ne!(
                    self.stdout.read_line(&mut line).await.unwrap(),
                    0,
                    "serve closed stdout before answering {message}"
                );
                let answer: Value = serde_json::from_str(&line).unwrap();
                if answer["id"] == id {
                    return answer;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(60), read)
            .await
            .unwrap_or_else(|_| panic!("no answer to {message} within 60 s"))
    }

    /// Run `print('done')` as a task and wait for its `tasks/result` answer; its task id too.
    async fn task_result(&mut self) -> (String, Value) {
        let created = self
            .request(
                2,
                "tools/call",
                json!({"name": "run_python", "arguments": {"code": "print('done')"},
                    "task": {"ttl": 60000}}),
            )
            .await;
        let task_id = created["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("no task: {created}"))
            .to_owned();
        let result = self
            .request(3, "tasks/result", json!({"taskId": task_id}))
            .await;
        assert_eq!(
            result["result"]["structuredContent"]["stdout"], "done\n",
            "{result}"
        );
        (task_id, result)
    }
}

#[tokio::test]
async fn tasks_list_refuses_a_cursor_it_never_gave() {
    let mut session = Session::initialized().await;
    let (task_id, _) = session.task_result().await;
    let refused = session
        .request(4, "tasks/list", json!({"cursor": "zzz"}))
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("\"zzz\"")),
        "{refused}"
    );
    let listed = session.request(5, "tasks/list", json!({})).await;
    assert_eq!(listed["result"]["tasks"][0]["taskId"], task_id, "{listed}");
    assert!(listed["result"].get("nextCursor").is_none(), "{listed}");
}

#[tokio::test]
async fn tasks_result_has_no_result_type_in_a_2025_11_25_session() {
    let mut session = Session::initialized().await;
    let (task_id, result) = session.task_result().await;
    assert!(result["result"].get("resultType").is_none(), "{result}");
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], task_id,
        "{result}"
    );
}

#[tokio::test]
async fn tasks_result_has_result_type_complete_in_a_2026_07_28_session() {
    let mut session = Session::stateless();
    let (_, result) = session.task_result().await;
    assert_eq!(result["result"]["resultType"], "complete", "{result}");
}

#[tokio::test]
async fn a_run_whose_progress_token_is_no_string_or_integer_is_refused_as_a_task_and_as_a_plain_call()
 {
    let mut session = Session::initialized().await;
    let run = |task: bool, token: Value| {
        let mut params = json!({"name": "run_python", "arguments": {"code": "print('done')"},
            "_meta": {"progressToken": token}});
        if task {
            params["task"] = json!({"ttl": 60000});
        }
        params
    };
    for (id, task) in [(2, true), (3, false)] {
        let refused = session
            .request(id, "tools/call", run(task, json!(1.5)))
            .await;
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        assert!(
            refused["error"]["message"].as_str().is_some_and(
                |m| m.contains("the progressToken 1.5 is neither a string nor an integer")
            ),
            "{refused}"
        );
    }
    // A string token is taken either way.
    let created = session
        .request(4, "tools/call", run(true, json!("p")))
        .await;
    assert!(created["result"]["task"]["taskId"].is_string(), "{created}");
    let plain = session
        .request(5, "tools/call", run(false, json!("q")))
        .await;
    assert_eq!(
        plain["result"]["structuredContent"]["stdout"], "done\n",
        "{plain}"
    );
}

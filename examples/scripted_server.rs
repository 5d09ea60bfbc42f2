//! A stdio "MCP server" that replays a scenario, for the misbehaving-server tests.
//!
//! It does not use rmcp on purpose: it writes whatever bytes the scenario says, so it can send
//! junk, BOMs, CRLF, `NaN`, endless lines, server→client requests, or die mid-call.
//!
//! Usage: `scripted_server SCENARIO.json`. The scenario is an object:
//! - `tools`: the array sent as `tools/list`'s `tools`, verbatim (default `[]`);
//! - `log`: a file; every line received on stdin is appended to it as it arrives;
//! - `eol`: the line ending of the replies this program builds (default `"\n"`);
//! - `start`: steps run before stdin is read;
//! - `churn_ms`: send `notifications/tools/list_changed` every this many milliseconds, from
//!   the client's `notifications/initialized` until a `calm` step;
//! - `on`: steps per request, keyed `"tools/call:NAME"`, then by method (`"initialize"`,
//!   `"tools/list"`, `"tools/call"`); a request with no entry gets the default answer
//!   (initialize echoes the client's version, tools/list sends `tools`, ping `{}`, anything
//!   else "method not found"). Notifications are only logged.
//!
//! Each request is handled on its own thread, so calls overlap and stdin keeps being read
//! (and logged) while a call hangs. Steps, in order:
//! - `{"reply": RESULT}`: a response with this result; in it `"$PID"` and `"$PPID"` become
//!   this process's and its parent's ids, `"$ENV"` its environment as an object, `"$x*N"`
//!   N `x` characters, `"$deep*N"` a schema N objects deep, `"$tools*N"` N tools (`tool_0`...),
//!   `"$heavy_tools*N"` N tools (`heavy_0`...) whose schemas take real work to compile
//!   (patterns, nesting, unions),
//!   `"$CURSOR"` a `nextCursor` new for each request, `"$ANSWERS"` the answers received to this request's `ask`s,
//!   and `$LISTED` inside a string the number of `tools/list` requests answered before this one;
//! - `{"error": {"code": .., "message": ..}}`: an error response;
//! - `{"raw": "TEXT"}`: TEXT as is (no newline added); `$ID` becomes the request's id;
//! - `{"fill": N}`: N bytes of `x`, no newline, written in 1 MiB pieces;
//! - `{"reply_text": N}`: a response whose one text block is N bytes of `x`;
//! - `{"stderr": N}`: N bytes of stderr, as 100-byte lines; `{"stderr": "TEXT"}`: one line;
//! - `{"ask": {"method": .., "params": ..}}`: a request to the client; waits up to 5 s for
//!   its answer and keeps it for `$ANSWERS`;
//! - `{"set_tools": [...]}`: later `tools/list` answers send these tools instead;
//! - `{"calm": true}`: stop the `churn_ms` notifications;
//! - `{"sleep_ms": N}`, `{"hang": true}` (never answer), `{"exit": CODE}`.

// A test fixture: a bad scenario file fails it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

type Waiters = Arc<Mutex<HashMap<String, Sender<Value>>>>;

struct Script {
    scenario: Value,
    tools: Mutex<Value>,
    out: Mutex<std::io::Stdout>,
    waiters: Waiters,
    eol: String,
    /// `tools/list` requests answered so far (`$LISTED`).
    listed: AtomicU64,
    /// Set by a `calm` step: the `churn_ms` notifications stop.
    calm: AtomicBool,
}

impl Script {
    fn write(&self, bytes: &[u8]) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        if out.write_all(bytes).and_then(|()| out.flush()).is_err() {
            // The client stopped reading; a real server would die of SIGPIPE.
            std::process::exit(141);
        }
    }

    fn line(&self, value: &Value, answers: &[Value]) {
        let env: serde_json::Map<String, Value> =
            std::env::vars().map(|(k, v)| (k, Value::from(v))).collect();
        let text = expand(value.clone())
            .to_string()
            .replace("\"$PID\"", &std::process::id().to_string())
            .replace(
                "\"$PPID\"",
                &std::os::unix::process::parent_id().to_string(),
            )
            .replace("\"$ENV\"", &Value::from(env).to_string())
            .replace("\"$ANSWERS\"", &Value::from(answers.to_vec()).to_string())
            .replace(
                "\"$CURSOR\"",
                &Value::from(format!("page-{}", value["id"])).to_string(),
            );
        self.write(format!("{text}{}", self.eol).as_bytes());
    }

    fn run(&self, steps: &[Value], id: &Value) {
        let mut answers = Vec::new();
        for (n, step) in steps.iter().enumerate() {
            let Some((kind, arg)) = step.as_object().and_then(|o| o.iter().next()) else {
                continue;
            };
            let count = arg.as_u64().unwrap_or(0) as usize;
            match kind.as_str() {
                "reply" => self.line(
                    &json!({"jsonrpc": "2.0", "id": id, "result": arg}),
                    &answers,
                ),
                "error" => self.line(&json!({"jsonrpc": "2.0", "id": id, "error": arg}), &[]),
                "raw" => self.write(
                    arg.as_str()
                        .unwrap_or_default()
                        .replace("$ID", &id.to_string())
                        .as_bytes(),
                ),
                "fill" => {
                    let chunk = vec![b'x'; 1 << 20];
                    for start in (0..count).step_by(chunk.len()) {
                        self.write(&chunk[..chunk.len().min(count - start)]);
                    }
                }
                // Written as is: `x` needs no escaping, and serializing and searching a text
                // of megabytes the way `line` does costs this debug-built fixture about 0.2 s
                // of CPU per 4 MB reply, which under load outlasted a caller's 20 s deadline.
                "reply_text" => self.write(
                    format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}{}"#,
                        "x".repeat(count),
                        self.eol
                    )
                    .as_bytes(),
                ),
                "stderr" if arg.is_string() => {
                    eprintln!("{}", arg.as_str().unwrap_or_default());
                }
                "stderr" => {
                    let line = format!("{}\n", "e".repeat(99));
                    let mut err = std::io::stderr().lock();
                    for _ in 0..count / line.len() {
                        let _ = err.write_all(line.as_bytes());
                    }
                }
                "ask" => {
                    let ask_id = format!("ask-{id}-{n}");
                    let (tx, rx) = channel();
                    self.waiters
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(ask_id.clone(), tx);
                    let mut request = arg.clone();
                    request["jsonrpc"] = json!("2.0");
                    request["id"] = json!(ask_id);
                    self.line(&request, &[]);
                    let answer = rx.recv_timeout(Duration::from_secs(5));
                    answers.push(answer.unwrap_or(json!("no answer within 5 s")));
                }
                "calm" => self.calm.store(true, Ordering::SeqCst),
                "set_tools" => {
                    *self.tools.lock().unwrap_or_else(|p| p.into_inner()) = arg.clone();
                }
                "sleep_ms" => std::thread::sleep(Duration::from_millis(count as u64)),
                "hang" => loop {
                    std::thread::sleep(Duration::from_secs(3600));
                },
                "exit" => std::process::exit(arg.as_i64().unwrap_or(1) as i32),
                other => eprintln!("scripted_server: unknown step {other:?}"),
            }
        }
    }

    fn default_answer(&self, method: &str, request: &Value) -> Vec<Value> {
        let result = match method {
            "initialize" => json!({
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted", "version": "0"}
            }),
            "tools/list" => {
                let tools = self.tools.lock().unwrap_or_else(|p| p.into_inner()).clone();
                let listed = self.listed.fetch_add(1, Ordering::SeqCst);
                let tools: Value = serde_json::from_str(
                    &tools.to_string().replace("$LISTED", &listed.to_string()),
                )
                .unwrap();
                json!({ "tools": tools })
            }
            "ping" => json!({}),
            _ => return vec![json!({"error": {"code": -32601, "message": "method not found"}})],
        };
        vec![json!({ "reply": result })]
    }

    fn handle(&self, request: Value) {
        let id = request["id"].clone();
        let method = request["method"].as_str().unwrap_or_default().to_owned();
        let on = &self.scenario["on"];
        let steps = request["params"]["name"]
            .as_str()
            .and_then(|name| on.get(format!("{method}:{name}")))
            .or_else(|| on.get(&method))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_else(|| self.default_answer(&method, &request));
        self.run(&steps, &id);
    }
}

/// Strings `"$x*N"` become N `x` characters, `"$tools*N"` N tools and `"$deep*N"` a schema
/// nested N objects deep (big payloads without big scenario files).
fn expand(value: Value) -> Value {
    match value {
        Value::String(s) => {
            if let Some(n) = s.strip_prefix("$x*").and_then(|n| n.parse().ok()) {
                Value::String("x".repeat(n))
            } else if let Some(n) = s.strip_prefix("$tools*").and_then(|n| n.parse().ok()) {
                (0..n)
                    .map(|i: usize| json!({"name": format!("tool_{i}"), "inputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}}}))
                    .collect()
            } else if let Some(n) = s.strip_prefix("$heavy_tools*").and_then(|n| n.parse().ok()) {
                (0..n).map(heavy_tool).collect()
            } else if let Some(n) = s.strip_prefix("$deep*").and_then(|n| n.parse().ok()) {
                (0..n).fold(
                    json!({"type": "string"}),
                    |inner, _| json!({"type": "object", "properties": {"x": inner}}),
                )
            } else {
                Value::String(s)
            }
        }
        Value::Array(items) => items.into_iter().map(expand).collect(),
        Value::Object(map) => map.into_iter().map(|(k, v)| (k, expand(v))).collect(),
        other => other,
    }
}

/// A tool like a real API wrapper's: eight patterned string parameters, a date, a nested
/// object with an array and a union, some required, no others allowed.
fn heavy_tool(i: usize) -> Value {
    let mut properties: serde_json::Map<String, Value> = (0..8)
        .map(|p| {
            let schema = json!({
                "type": "string",
                "pattern": format!("^[a-z]{{1,16}}(-[0-9]+)?-{p}$"),
                "maxLength": 64,
                "description": format!("Parameter {p} of tool {i}, a lowercase name with an optional number.")
            });
            (format!("p{p}"), schema)
        })
        .collect();
    properties.insert(
        "when".into(),
        json!({"type": "string", "format": "date-time"}),
    );
    properties.insert(
        "nested".into(),
        json!({"type": "object", "properties": {
            "a": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 1000}},
            "b": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "null"}, {"enum": ["x", "y", "z"]}]}
        }}),
    );
    json!({
        "name": format!("heavy_{i}"),
        "description": format!("Heavy tool number {i}, for measuring catalog builds."),
        "inputSchema": {
            "type": "object",
            "properties": properties,
            "required": ["p0", "p1"],
            "additionalProperties": false
        }
    })
}

/// With `churn_ms` in the scenario: send `list_changed` that often until a `calm` step.
fn churn(script: &Arc<Script>) {
    let Some(every) = script.scenario["churn_ms"].as_u64() else {
        return;
    };
    let script = script.clone();
    std::thread::spawn(move || {
        while !script.calm.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(every));
            script.write(
                b"{\"jsonrpc\": \"2.0\", \"method\": \"notifications/tools/list_changed\"}\n",
            );
        }
    });
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: scripted_server SCENARIO.json");
    let text = std::fs::read_to_string(&path).expect("read the scenario");
    let scenario: Value = serde_json::from_str(&text).expect("parse the scenario");
    let mut log = scenario["log"].as_str().map(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .expect("open the log")
    });
    let script = Arc::new(Script {
        eol: scenario["eol"].as_str().unwrap_or("\n").to_owned(),
        out: Mutex::new(std::io::stdout()),
        waiters: Arc::default(),
        tools: Mutex::new(scenario.get("tools").cloned().unwrap_or(json!([]))),
        listed: AtomicU64::new(0),
        calm: AtomicBool::new(false),
        scenario,
    });

    if let Some(start) = script.scenario["start"].as_array() {
        script.run(start, &Value::Null);
    }
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if let Some(log) = log.as_mut() {
            let _ = writeln!(log, "{line}");
        }
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if message.get("method").is_none() {
            let key = message["id"].as_str().unwrap_or_default().to_owned();
            let waiter = script
                .waiters
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&key);
            if let Some(tx) = waiter {
                let _ = tx.send(message);
            }
        } else if message["method"] == "notifications/initialized" {
            churn(&script);
        } else if message.get("id").is_some() {
            let script = script.clone();
            std::thread::spawn(move || script.handle(message));
        }
    }
    // The client closed our stdin: give answers being written a moment, then end.
    std::thread::sleep(Duration::from_millis(100));
}

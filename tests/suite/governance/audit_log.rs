//! The audit log of a run: sent, refused and approved calls; a run replayed from its log; a
//! log that survives a SIGKILLed `serve`; `--audit-required` failing closed on a full disk;
//! `--audit-args` and `--audit-code`; logs that cannot be opened or are symlinks; the server
//! named in a refusal's record; records that Python's `str.splitlines()` keeps one per line.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Fixture, of_kind, printed, records};

/// The run of the audit test: one call sent, two refused by the bridge (the second to a
/// tool that needs approval, refused by its schema before anyone is asked), one approved.
const MIXED: &str = "print(await read_note({'id': 7}))\ntry:\n    await read_note({'id': 'seven'})\nexcept ToolError as e:\n    print('refused')\ntry:\n    await write_note({'id': 7, 'color': 'red'})\nexcept ToolError as e:\n    print('refused')\nprint(await write_note({'id': 7, 'text': 'x'}))";

#[test]
fn audit_records_a_run_with_sent_refused_and_approved_calls() {
    let Some(f) = Fixture::ready() else { return };
    let reply = f.run_approved("accept", MIXED, &["--approve", "write_note"]);
    assert_eq!(printed(&reply), "done\nrefused\nrefused\ndone\n", "{reply}");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&f.audit).unwrap().mode() & 0o777, 0o600);
    let records = f.records();
    assert!(
        records.iter().all(|r| r["v"] == 1 && r["time"].is_string()),
        "{records:?}"
    );
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["run_start", "call", "call", "call", "call", "run_end"]
    );
    let run = records[0]["run"].as_str().unwrap();
    assert!(
        records
            .iter()
            .all(|r| r["run"] == run && r["session"] == records[0]["session"])
    );
    assert_eq!(records[0]["code"], MIXED);
    assert_eq!(records[0]["code_sha256"], sha256_hex(MIXED.as_bytes()));
    let calls = &records[1..5];
    let summary: Vec<(u64, &str, &str)> = calls
        .iter()
        .map(|c| {
            (
                c["seq"].as_u64().unwrap(),
                c["tool"].as_str().unwrap(),
                c["verdict"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (1, "read_note", "sent"),
            (2, "read_note", "refused"),
            (3, "write_note", "refused"),
            (4, "write_note", "sent"),
        ]
    );
    assert_eq!(calls[0]["server"], "server");
    assert_eq!(calls[0]["result_bytes"], 4);
    assert_eq!(calls[0]["isError"], false);
    let digest = sha256_hex(br#"{"id":7}"#);
    assert_eq!(calls[0]["args"], json!({"sha256": digest, "bytes": 8}));
    assert!(
        calls[1]["reason"]
            .as_str()
            .unwrap()
            .contains("outside its schema")
    );
    assert!(calls[2]["reason"].as_str().unwrap().contains("\"color\""));
    assert!(calls[0].get("approval").is_none());
    assert!(
        calls[2].get("approval").is_none(),
        "asked about a call its schema refuses"
    );
    assert_eq!(reply["asked"].as_array().unwrap().len(), 1, "{reply}");
    assert_eq!(calls[3]["approval"]["decision"], "accepted");
    let end = &records[5];
    assert_eq!(end["outcome"], "ok");
    assert_eq!(end["calls"], 2);
    assert!(end["duration_ms"].as_u64().is_some());
}

/// The lowercase hex sha256 of `bytes`, as the audit log writes digests.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The calls of a log as (seq, tool, args digest, verdict), for comparing two runs.
fn call_trace(records: &[Value]) -> Vec<(Value, Value, Value, Value)> {
    of_kind(records, "call")
        .into_iter()
        .map(|c| {
            (
                c["seq"].clone(),
                c["tool"].clone(),
                c["args"].clone(),
                c["verdict"].clone(),
            )
        })
        .collect()
}

#[test]
fn audit_log_replays_a_run_from_its_recorded_code_with_the_same_calls() {
    let Some(f) = Fixture::ready() else { return };
    let code = "for i in range(3):\n    print(await read_note({'id': i}))\ntry:\n    await write_note({'id': 'x'})\nexcept ToolError:\n    print('refused')";
    let exec = |audit: &Path, code: &str| f.exec(code, &["--audit", &audit.display().to_string()]);
    let first = exec(&f.audit, code);
    assert_eq!(first.printed(), "done\ndone\ndone\nrefused\n", "{first:?}");
    let original = f.records();
    let start = of_kind(&original, "run_start")[0];
    let recorded = start["code"].as_str().unwrap();
    assert_eq!(start["code_sha256"], sha256_hex(recorded.as_bytes()));
    let replay_log = f.dir.path().join("replay.jsonl");
    let replay = exec(&replay_log, recorded);
    assert_eq!(replay.printed(), first.printed());
    let replayed = records(&replay_log);
    assert_ne!(of_kind(&replayed, "run_start")[0]["run"], start["run"]);
    assert_eq!(call_trace(&replayed), call_trace(&original));
    assert_eq!(call_trace(&original).len(), 4);
    assert_eq!(
        of_kind(&replayed, "run_end")[0]["outcome"],
        of_kind(&original, "run_end")[0]["outcome"]
    );
}

/// Send one JSON-RPC message to a serve child.
fn send(stdin: &mut impl Write, message: Value) {
    writeln!(stdin, "{message}").unwrap();
    stdin.flush().unwrap();
}

#[test]
fn audit_log_survives_a_serve_killed_mid_run_every_complete_record_parses() {
    let Some(f) = Fixture::ready() else { return };
    let audit = f.audit.display().to_string();
    let command = f.serve(&["--audit", &audit, "--audit-args", "full"]);
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "killer", "version": "1"}}}),
    );
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    let code =
        "i = 0\nwhile True:\n    await write_note({'id': i, 'text': 'p' * 2000})\n    i += 1";
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "run_python", "arguments": {"code": code}}}),
    );
    let started = Instant::now();
    while of_kind(&f.records(), "call").len() < 20 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{:?}",
            f.records()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let text = std::fs::read_to_string(&f.audit).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    // Every line ended by a newline is one whole record; only a last line without one may
    // be torn.
    for line in &lines {
        if line.ends_with('\n') {
            serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        }
    }
    let before = f.records();
    assert_eq!(before[0]["kind"], "run_start");
    assert!(of_kind(&before, "run_end").is_empty());
    // The next process appends after whatever was torn, on a line of its own.
    let run = f.exec("print(await read_note({'id': 1}))", &["--audit", &audit]);
    assert_eq!(run.printed(), "done\n", "{run:?}");
    let after = f.records();
    assert_eq!(
        after.len(),
        before.len() + 3,
        "{}",
        std::fs::read_to_string(&f.audit).unwrap()
    );
}

#[test]
fn audit_required_fails_closed_on_a_full_disk_and_sends_nothing() {
    let Some(f) = Fixture::ready() else { return };
    let code = "print(await read_note({'id': 1}))";
    let required = f.exec(code, &["--audit", "/dev/full", "--audit-required"]);
    assert!(required.stopped(), "{required:?}");
    assert!(
        required.error().contains("/dev/full") && required.error().contains("--audit-required"),
        "{required:?}"
    );
    assert!(f.calls_received().is_empty(), "{:?}", f.calls_received());
    // No sandbox ran, so no limits held: the summary line says only the calls.
    assert!(
        required.stderr.contains("mcp-code-mode: calls sent: 0")
            && !required.stderr.contains("limits: ;"),
        "{required:?}"
    );
    // Without --audit-required the failure is reported and the run goes on.
    let lenient = f.exec(code, &["--audit", "/dev/full"]);
    assert_eq!(lenient.printed(), "done\n", "{lenient:?}");
    assert!(
        lenient.stderr.contains("No space left on device"),
        "{lenient:?}"
    );
    assert_eq!(f.calls_received(), ["read_note"]);
}

#[test]
fn audit_args_full_or_off_and_audit_code_off_shape_the_records() {
    let Some(f) = Fixture::ready() else { return };
    let code = "print(await read_note({'id': 3}))";
    let audit = f.audit.display().to_string();
    let full = f.exec(
        code,
        &[
            "--audit",
            &audit,
            "--audit-args",
            "full",
            "--audit-code",
            "off",
        ],
    );
    assert_eq!(full.printed(), "done\n", "{full:?}");
    let records = f.records();
    let start = of_kind(&records, "run_start")[0];
    assert!(start.get("code").is_none(), "{start}");
    assert_eq!(start["code_sha256"], sha256_hex(code.as_bytes()));
    assert_eq!(of_kind(&records, "call")[0]["args"], json!({"id": 3}));
    std::fs::remove_file(&f.audit).unwrap();
    let off = f.exec(code, &["--audit", &audit, "--audit-args", "off"]);
    assert_eq!(off.printed(), "done\n", "{off:?}");
    let records = f.records();
    assert_eq!(of_kind(&records, "run_start")[0]["code"], code);
    let call = of_kind(&records, "call")[0];
    assert!(call.get("args").is_none(), "{call}");
    assert_eq!(call["verdict"], "sent", "{call}");
}

#[test]
fn audit_log_that_cannot_be_opened_stops_startup() {
    let f = Fixture::new();
    let run = f.exec("print(1)", &["--audit", "/nonexistent-dir/audit.jsonl"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("cannot be opened"), "{run:?}");
}

#[test]
fn audit_log_that_is_a_symlink_stops_startup_and_its_target_is_untouched() {
    let f = Fixture::new();
    let victim = f.dir.path().join("victim.conf");
    std::fs::write(&victim, "a config\n").unwrap();
    let link = f.dir.path().join("planted.jsonl");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let run = f.exec("print(1)", &["--audit", &link.display().to_string()]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("symbolic link"), "{run:?}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "a config\n");
}

#[test]
fn audit_names_the_server_of_a_known_tool_refused_for_its_argument_size() {
    let Some(f) = Fixture::ready() else { return };
    let code = "for args in ({'id': 1, 'text': 'x' * 20000}, {'id': 'x'}):\n    try:\n        await read_note(args)\n    except ToolError:\n        print('refused')";
    let audit = f.audit.display().to_string();
    let run = f.exec(code, &["--audit", &audit]);
    assert_eq!(run.printed(), "refused\nrefused\n", "{run:?}");
    let records = f.records();
    let calls = of_kind(&records, "call");
    assert_eq!(calls.len(), 2, "{records:?}");
    assert!(
        calls[0]["reason"].as_str().unwrap().contains("bytes"),
        "{}",
        calls[0]
    );
    for call in calls {
        assert_eq!(call["verdict"], "refused", "{call}");
        assert_eq!(call["server"], "server", "{call}");
        assert_eq!(call["tool"], "read_note", "{call}");
    }
    assert!(f.calls_received().is_empty(), "{:?}", f.calls_received());
}

/// The pieces of `text` as Python's `str.splitlines()` cuts them (at `\n`, `\r`, `\r\n`,
/// `\x0b`, `\x0c`, `\x1c`, `\x1d`, `\x1e`, U+0085, U+2028 and U+2029; no empty last piece).
fn python_splitlines(text: &str) -> Vec<&str> {
    let breaks = [
        '\n', '\r', '\x0b', '\x0c', '\x1c', '\x1d', '\x1e', '\u{85}', '\u{2028}', '\u{2029}',
    ];
    let mut pieces = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(breaks) {
        pieces.push(&rest[..at]);
        let width = if rest[at..].starts_with("\r\n") {
            2
        } else {
            rest[at..].chars().next().map_or(1, char::len_utf8)
        };
        rest = &rest[at + width..];
    }
    if !rest.is_empty() {
        pieces.push(rest);
    }
    pieces
}

/// README: line separators are escaped wherever sandbox or server text is logged. Code and
/// a tool's argument holding U+2028, U+2029, U+0085 and the control characters Python also
/// splits at are written escaped, so `str.splitlines()` gives one piece per record.
#[test]
fn audit_records_split_by_python_splitlines_are_one_piece_each() {
    let Some(f) = Fixture::ready() else { return };
    let raw = "a\u{2028}b\u{2029}c\u{85}d\x0be\x0cf\x1cg\x1dh\x1ei";
    // The schema refuses `note`, but the call's record keeps its arguments.
    let code = format!(
        "note = '{raw}' + '\\r\\n'\ntry:\n    await read_note({{'id': 3, 'note': note}})\nexcept ToolError:\n    print('refused')"
    );
    let audit = f.audit.display().to_string();
    let run = f.exec(&code, &["--audit", &audit, "--audit-args", "full"]);
    assert_eq!(run.printed(), "refused\n", "{run:?}");
    let text = std::fs::read_to_string(&f.audit).unwrap();
    let records = f.records();
    let pieces = python_splitlines(&text);
    assert_eq!(pieces.len(), records.len(), "{text}");
    assert!(records.len() >= 3, "{text}");
    for piece in pieces {
        serde_json::from_str::<Value>(piece).unwrap_or_else(|e| panic!("{e}: {piece}"));
    }
    assert_eq!(of_kind(&records, "run_start")[0]["code"], code);
    let call = of_kind(&records, "call")[0];
    let note = format!("{raw}\r\n");
    assert_eq!(call["args"], json!({"id": 3, "note": note}), "{call}");
}

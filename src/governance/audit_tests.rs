use super::*;
use crate::governance::audit_writer::{MAX_QUEUED_BYTES, WRITE_WAIT};

fn run_start(run: &str) -> Record {
    Record::RunStart(RunStart {
        run: run.into(),
        session: "s".into(),
        code_sha256: sha256_hex(b"print(1)"),
        code: Some("print(1)".into()),
    })
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn a_new_log_is_mode_0600_and_each_record_is_one_line_with_its_version_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(AuditOptions::new(&path)).unwrap();
    log.write(&run_start("r1")).await.unwrap();
    log.write(&run_start("r2")).await.unwrap();
    let mode = std::fs::metadata(&path).unwrap().mode() & 0o7777;
    assert_eq!(mode, 0o600);
    let records = lines(&path);
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["v"], SCHEMA_VERSION);
    assert_eq!(records[0]["kind"], "run_start");
    assert_eq!(records[1]["run"], "r2");
    assert_eq!(records[0]["code"], "print(1)");
    let time = records[0]["time"].as_str().unwrap();
    assert!(chrono::DateTime::parse_from_rfc3339(time).is_ok(), "{time}");
}

#[tokio::test]
async fn an_existing_world_readable_log_is_made_0600_and_appended_to() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    std::fs::write(&path, "{\"old\": 1}\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let log = AuditLog::open(AuditOptions::new(&path)).unwrap();
    log.write(&run_start("r1")).await.unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o7777, 0o600);
    let records = lines(&path);
    assert_eq!(records[0]["old"], 1);
    assert_eq!(records[1]["run"], "r1");
}

#[tokio::test]
async fn a_record_torn_by_a_crash_stays_alone_on_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    std::fs::write(&path, "{\"whole\": 1}\n{\"torn\": ").unwrap();
    let log = AuditLog::open(AuditOptions::new(&path)).unwrap();
    log.write(&run_start("r1")).await.unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let parsed: Vec<_> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    assert_eq!(parsed.len(), 2, "{text}");
    assert_eq!(parsed[1]["run"], "r1");
}

#[tokio::test]
async fn a_full_disk_is_reported_remembered_and_fails_a_required_log() {
    let mut options = AuditOptions::new("/dev/full");
    options.required = true;
    let log = AuditLog::open(options).unwrap();
    assert!(log.check_required().is_ok());
    let err = log.write(&run_start("r1")).await.unwrap_err();
    assert!(err.to_string().contains("/dev/full"), "{err}");
    assert!(
        log.failure().unwrap().contains("No space left"),
        "{:?}",
        log.failure()
    );
    let refused = log.check_required().unwrap_err().to_string();
    assert!(refused.contains("--audit-required"), "{refused}");
    // Not required: the failure is remembered but nothing is refused.
    let log = AuditLog::open(AuditOptions::new("/dev/full")).unwrap();
    assert!(log.write(&run_start("r1")).await.is_err());
    assert!(log.failure().is_some());
    assert!(log.check_required().is_ok());
}

#[test]
fn an_unwritable_path_is_an_error_at_open() {
    let err = AuditLog::open(AuditOptions::new("/nonexistent-dir/audit.jsonl")).unwrap_err();
    assert!(err.to_string().contains("cannot be opened"), "{err}");
    // Printed as an error chain (`{:#}`, as the command line does), the cause appears once.
    let chain = format!("{:#}", anyhow::Error::from(err));
    assert_eq!(
        chain.matches("No such file or directory").count(),
        1,
        "{chain}"
    );
}

#[test]
fn arguments_are_recorded_in_full_as_a_digest_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let args = serde_json::json!({"path": "/etc/passwd", "n": 1});
    let mut options = AuditOptions::new(dir.path().join("a"));
    let digest = AuditLog::open(options.clone())
        .unwrap()
        .args_field(&args)
        .unwrap();
    assert_eq!(digest["bytes"], 28);
    assert_eq!(
        digest["sha256"],
        sha256_hex(br#"{"path":"/etc/passwd","n":1}"#)
    );
    assert!(!digest.to_string().contains("passwd"));
    options.args = ArgsMode::Full;
    assert_eq!(
        AuditLog::open(options.clone()).unwrap().args_field(&args),
        Some(args.clone())
    );
    options.args = ArgsMode::Off;
    assert_eq!(
        AuditLog::open(options.clone()).unwrap().args_field(&args),
        None
    );
    options.code = false;
    assert_eq!(
        AuditLog::open(options).unwrap().code_field("print(1)"),
        None
    );
}

#[test]
fn what_the_code_can_make_as_large_as_a_line_is_recorded_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = AuditOptions::new(dir.path().join("a"));
    options.args = ArgsMode::Full;
    let log = AuditLog::open(options).unwrap();
    let small = serde_json::json!({"text": "x".repeat(100)});
    assert_eq!(log.args_field(&small), Some(small.clone()));
    let large = serde_json::json!({"text": "x".repeat(crate::limits::MAX_ARGS_BYTES)});
    let recorded = log.args_field(&large).unwrap();
    assert_eq!(recorded["bytes"], crate::limits::MAX_ARGS_BYTES + 11);
    assert!(recorded["sha256"].is_string());
    let name = "n".repeat(500_000);
    let cut = recorded_tool_name(&name);
    assert_eq!(cut.chars().count(), MAX_RECORDED_TOOL_CHARS + 1);
    assert!(cut.ends_with('…'));
    assert_eq!(
        recorded_tool_name("é".repeat(200).as_str()),
        "é".repeat(200)
    );
}

#[tokio::test]
async fn a_call_record_names_its_verdict_approval_and_result() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(AuditOptions::new(&path)).unwrap();
    log.write(&Record::Call(CallRecord {
        run: "r".into(),
        session: "s".into(),
        seq: 1,
        server: Some("toy".into()),
        tool: "add".into(),
        args: None,
        verdict: Verdict::Refused,
        reason: Some("declined by the user".into()),
        approval: Some(Approval {
            decision: Decision::Declined,
            wait_ms: 12,
        }),
        duration_ms: 13,
        result_bytes: None,
        is_error: None,
    }))
    .await
    .unwrap();
    let record = &lines(&path)[0];
    assert_eq!(record["kind"], "call");
    assert_eq!(record["verdict"], "refused");
    assert_eq!(record["approval"]["decision"], "declined");
    assert!(record.get("isError").is_none());
    assert!(record.get("args").is_none());
}

#[test]
fn a_symlink_as_the_log_is_refused_and_its_target_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.conf");
    std::fs::write(&victim, "a config\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    let link = dir.path().join("audit.jsonl");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let err = AuditLog::open(AuditOptions::new(&link)).unwrap_err();
    assert!(matches!(err, AuditError::Refused { .. }), "{err:?}");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "a config\n");
    assert_eq!(std::fs::metadata(&victim).unwrap().mode() & 0o7777, 0o644);
    // A dangling link is not followed to create its target either.
    let dangling = dir.path().join("dangling.jsonl");
    std::os::unix::fs::symlink(dir.path().join("absent"), &dangling).unwrap();
    assert!(AuditLog::open(AuditOptions::new(&dangling)).is_err());
    assert!(!dir.path().join("absent").exists());
}

#[test]
fn a_hard_linked_log_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.conf");
    std::fs::write(&victim, "a config\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    let link = dir.path().join("audit.jsonl");
    std::fs::hard_link(&victim, &link).unwrap();
    let err = AuditLog::open(AuditOptions::new(&link)).unwrap_err();
    assert!(err.to_string().contains("2 hard links"), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "a config\n");
    assert_eq!(std::fs::metadata(&victim).unwrap().mode() & 0o7777, 0o644);
}

#[test]
fn another_users_file_or_fifo_is_refused_and_a_device_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    std::fs::write(&file, "").unwrap();
    let meta = std::fs::metadata(&file).unwrap();
    let me = nix::unistd::geteuid().as_raw();
    assert_eq!(foreign(&meta, me), None);
    let why = foreign(&meta, me.wrapping_add(1)).unwrap();
    assert!(why.contains("owned by uid"), "{why}");
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let meta = std::fs::metadata(&fifo).unwrap();
    assert_eq!(foreign(&meta, me), None);
    assert!(foreign(&meta, me.wrapping_add(1)).is_some());
    // Devices are root's (only root makes them) and are used as they are.
    let null = std::fs::metadata("/dev/null").unwrap();
    assert_eq!(foreign(&null, me.wrapping_add(1)), None);
}

#[test]
fn a_log_another_user_owns_is_refused_without_a_chmod() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    std::fs::write(&path, "{\"theirs\": 1}\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    if nix::unistd::chown(&path, Some(nix::unistd::Uid::from_raw(65534)), None).is_err() {
        // Only root can give a file away; `foreign` itself is checked above for any user.
        assert!(!nix::unistd::geteuid().is_root());
        return;
    }
    let err = AuditLog::open(AuditOptions::new(&path)).unwrap_err();
    assert!(err.to_string().contains("owned by uid 65534"), "{err}");
    assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o7777, 0o644);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"theirs\": 1}\n");
}

#[tokio::test]
async fn a_fifo_nobody_reads_stalls_only_the_writer_and_a_required_log_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let mut options = AuditOptions::new(&fifo);
    options.required = true;
    let log = AuditLog::open(options).unwrap();
    let mut big = run_start("r");
    if let Record::RunStart(start) = &mut big {
        start.code = Some("x".repeat(16 << 10));
    }
    // The pipe holds 64 KiB: within a few records one waits, at most WRITE_WAIT, and fails.
    let bound = WRITE_WAIT + std::time::Duration::from_secs(3);
    let mut failed = None;
    for _ in 0..64 {
        let started = std::time::Instant::now();
        let written = tokio::time::timeout(bound, log.write(&big))
            .await
            .expect("a write to a full FIFO waits at most WRITE_WAIT");
        if let Err(e) = written {
            failed = Some((e, started.elapsed()));
            break;
        }
    }
    let (err, took) = failed.expect("a write to the full FIFO fails");
    assert!(took >= WRITE_WAIT, "it failed after {took:?}: {err}");
    assert!(err.to_string().contains("took no record"), "{err}");
    assert!(log.check_required().is_err());
    // Stalled: the next records fail at once, and one too many for the queue is dropped.
    let started = std::time::Instant::now();
    assert!(log.write(&big).await.is_err());
    assert!(started.elapsed() < WRITE_WAIT, "{:?}", started.elapsed());
    let failed_before = log.failed_writes();
    for _ in 0..(MAX_QUEUED_BYTES >> 14) + 4 {
        log.write_unwaited(&big);
    }
    assert!(log.failed_writes() > failed_before);
    assert!(
        log.failure().unwrap().contains("dropped"),
        "{:?}",
        log.failure()
    );
}

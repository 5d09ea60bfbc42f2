//! Results a server can send: every shape reaches the code as clear, bounded text.

use mcp_code_mode::bridge::CallError;

use super::{PROMPTLY, Scenario, call, open, timed};

#[tokio::test]
async fn every_result_shape_reaches_the_code_as_clear_bounded_text() {
    let scenario = Scenario::load("results");
    let bridge = open(&scenario).await;
    assert_eq!(
        call(&bridge, "structured_only").await.unwrap(),
        r#"{"n": 1, "s": "\u00e9"}"#
    );
    assert_eq!(call(&bridge, "empty_content").await.unwrap(), "");
    assert_eq!(call(&bridge, "empty_object").await.unwrap(), "");
    assert_eq!(
        call(&bridge, "error_text").await,
        Err(CallError::ToolFailed("quota exceeded".into()))
    );
    assert_eq!(
        call(&bridge, "error_structured").await,
        Err(CallError::ToolFailed(r#"{"why": "quota"}"#.into()))
    );
    assert!(
        matches!(call(&bridge, "error_bare").await, Err(CallError::ToolFailed(t)) if t.contains("no message"))
    );

    let text = call(&bridge, "blocks").await.unwrap();
    for part in [
        "first",
        "[image: image/png, 4000 bytes of base64]",
        "[audio: audio/wav, 4 bytes of base64]",
        "embedded text",
        "[resource file:///blob.bin: 4 bytes of base64]",
        "[resource link: https://example.com/doc (doc)]",
        "\"hologram\"",
        "\"image\"",
    ] {
        assert!(text.contains(part), "{part:?} missing from {text:?}");
    }
    assert_eq!(text.lines().count(), 9, "one line per block: {text:?}");
    assert!(text.len() < 2000, "bounded: {} bytes", text.len());

    let text = call(&bridge, "huge_blob").await.unwrap();
    assert!(text.len() < 500, "a 2 MB image is a short line: {text:?}");
    assert!(text.contains("2000000 bytes of base64"), "{text}");

    assert_eq!(
        call(&bridge, "big_ints").await.unwrap(),
        r#"{"above_2_53": 9007199254740993, "u64_max": 18446744073709551615, "i64_min": -9223372036854775808}"#
    );

    for tool in ["nan", "infinity", "beyond_f64", "lone_surrogate"] {
        let (outcome, took) = timed(&bridge, tool).await;
        let why = match outcome {
            Err(CallError::ToolFailed(t)) => t,
            Err(CallError::Refused(refusal)) => refusal.to_string(),
            other => panic!("{tool}: expected a failure, got {other:?}"),
        };
        assert!(why.contains("not valid JSON"), "{tool}: {why}");
        assert!(took < PROMPTLY, "{tool} took {took:?}");
    }
    // The bad lines did not break the connection.
    assert_eq!(call(&bridge, "empty_content").await.unwrap(), "");
    bridge.close().await;
}

#[tokio::test]
async fn integers_beyond_64_bits_in_structured_content_reach_the_code_as_the_server_wrote_them() {
    let scenario = Scenario::load("results");
    let bridge = open(&scenario).await;
    // Keys in the server's order; floats as the same floats, written the shortest way.
    assert_eq!(
        call(&bridge, "beyond_64_bits").await.unwrap(),
        r#"{"zeta": 18446744073709551616, "alpha": [-123456789012345678901234567890, 340282366920938463463374607431768211457], "f": 100.0, "g": 0.30000000000000004}"#
    );
    bridge.close().await;
}

//! Read-only mode on annotated tools: only tools annotated read-only are kept, and a hidden
//! tool's call is refused before it is sent.

use super::{Fixture, printed};

#[test]
fn read_only_mode_keeps_only_tools_annotated_read_only_and_says_how_many_it_hid() {
    let Some(f) = Fixture::ready() else { return };
    let reply = f.run_approved("none", "print(sorted(TOOLS))", &["--read-only"]);
    assert_eq!(printed(&reply), "['read_note']\n", "{reply}");
    let description = reply["description"].as_str().unwrap();
    assert!(
        description.contains("Read-only mode is on")
            && description.contains("4 other tools are hidden"),
        "{description}"
    );
    assert!(!description.contains("def write_note"), "{description}");
}

#[test]
fn read_only_mode_refuses_a_hidden_tool_before_it_is_sent() {
    let Some(f) = Fixture::ready() else { return };
    let run = f.exec(
        "try:\n    await globals()['delete_note']({'id': 1})\nexcept KeyError:\n    print('absent')",
        &["--read-only"],
    );
    assert_eq!(run.printed(), "absent\n", "{run:?}");
    assert!(f.calls_received().is_empty());
}

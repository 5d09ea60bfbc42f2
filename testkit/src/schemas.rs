//! Hostile JSON Schemas whose check costs 2^depth validator steps, built at any depth: the
//! argument-check cost tests (the host crate's unit tests of the work count, and the suite's
//! end-to-end refusals) share them, so both measure the same shapes.

use serde_json::{Value, json};

/// `depth` levels, each an `anyOf` of a reference to the next level and a property of its
/// own, with `unevaluatedProperties: false`; the last level's reference is a property `a`
/// (an integer). The validator walks 2^depth branches for `{"a": 1}`.
pub fn unevaluated_chain(depth: usize) -> Value {
    let mut defs = serde_json::Map::new();
    for k in 0..depth {
        let next = if k + 1 < depth {
            json!({"$ref": format!("#/$defs/L{}", k + 1)})
        } else {
            json!({"properties": {"a": {"type": "integer"}}})
        };
        defs.insert(
            format!("L{k}"),
            json!({"anyOf": [next, {"properties": {format!("x{k}"): true}}], "unevaluatedProperties": false}),
        );
    }
    json!({"type": "object", "$ref": "#/$defs/L0", "$defs": defs})
}

/// `depth` resources (`L0.json`...) each declaring the anchor `n`, whose `anyOf` refers twice
/// to the next resource's `n`; the last resource's `n` is a string, and the property `x` refers
/// to `L0.json#n`. The validator takes 2^depth paths for an invalid `x` (`{"x": 1}`).
pub fn anchor_chain(depth: usize) -> Value {
    let mut defs = serde_json::Map::new();
    for k in 0..depth {
        let next = json!({"$ref": format!("L{}.json#n", k + 1)});
        defs.insert(
            format!("L{k}"),
            json!({"$id": format!("L{k}.json"), "$defs": {"n": {"$anchor": "n", "anyOf": [next.clone(), next]}}}),
        );
    }
    defs.insert(
        format!("L{depth}"),
        json!({"$id": format!("L{depth}.json"), "$defs": {"n": {"$anchor": "n", "type": "string"}}}),
    );
    json!({"$id": "https://ex.com/root.json", "type": "object",
        "properties": {"x": {"$ref": "L0.json#n"}}, "$defs": defs})
}

//! Which argument checks may run on the async runtime itself instead of the blocking pool:
//! a schema decided safe once, when the catalog is built ([`inline_safe`]), and a check whose
//! counted work is small for its sizes ([`inline_evaluations`]). Every other check runs off
//! the runtime (check.rs).

use serde_json::Value;

use super::{Counter, PatternCosts, SchemaIndex};

/// Work a check may take and still run on the async runtime, in evaluations times the bytes
/// of schema and argument: an evaluation of a subschema without the keywords
/// [`inline_safe`] refuses costs at most in proportion to that subschema and that argument
/// node (a type, an `enum` or `const` compared, a `required` list, a string's length, an
/// object's keys), so this bounds the time a check holds the runtime: well under a
/// millisecond (an ordinary tool's check counts a few thousand).
pub(crate) const INLINE_WORK: u64 = 200_000;

/// Most evaluations a check of an argument of `args_bytes` against a schema of
/// `schema_bytes` (both as JSON) may take to run on the async runtime: [`INLINE_WORK`]
/// shared out over the bytes an evaluation may touch.
pub(crate) fn inline_evaluations(schema_bytes: usize, args_bytes: usize) -> u64 {
    let bytes = u64::try_from(schema_bytes.saturating_add(args_bytes)).unwrap_or(u64::MAX);
    INLINE_WORK / bytes.max(1)
}

/// Keywords one evaluation of which can cost more than in proportion to its subschema and
/// its argument node, or that apply subschemas [`super::CountedSchema::weighed_evaluations`]
/// does not count: a regular expression can backtrack; `uniqueItems` compares every pair of items;
/// `unevaluatedProperties`/`unevaluatedItems` evaluate their neighbours again; dynamic
/// references resolve by the path taken; `contentSchema` applies to a string parsed as JSON.
/// (`format` is never asserted here: schema.rs.)
const NOT_INLINE: [&str; 12] = [
    "pattern",
    "patternProperties",
    "uniqueItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "$recursiveAnchor",
    "contentSchema",
    "contentMediaType",
    "contentEncoding",
];

/// Keywords whose value maps names (of properties, definitions) to subschemas: its keys are
/// names, not keywords.
const NAME_MAPS: [&str; 5] = [
    "properties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "dependencies",
];

/// Whether a check against `root` may run on the async runtime when its count is within
/// [`inline_evaluations`]: `root` uses none of [`NOT_INLINE`], declares no `$id` below its
/// root (a nested resource changes what its references mean), and every `$ref` in it
/// resolves as the count resolves it with `index` (so the count follows what the validator
/// walks). Decided once per schema, when the catalog is built
/// ([`super::CountedSchema::inline_safe`]). Errs towards `false`: a keyword-like key anywhere
/// but among the names of [`NAME_MAPS`] counts, inside `enum` or `default` values too.
pub(super) fn inline_safe(root: &Value, index: &SchemaIndex) -> bool {
    let no_patterns = PatternCosts::default();
    let counter = Counter::new(root, 0, &no_patterns, index);
    // (value, whether its keys are names)
    let mut stack = vec![(root, false)];
    while let Some((v, names)) = stack.pop() {
        match v {
            Value::Object(map) => {
                if names {
                    stack.extend(map.values().map(|sub| (sub, false)));
                    continue;
                }
                if NOT_INLINE.iter().any(|k| map.contains_key(*k)) {
                    return false;
                }
                if !std::ptr::eq(v, root) && (map.contains_key("$id") || map.contains_key("id")) {
                    return false;
                }
                if let Some(reference) = map.get("$ref")
                    && reference
                        .as_str()
                        .is_none_or(|r| !matches!(counter.resolve("$ref", r), Ok(Some(_))))
                {
                    return false;
                }
                for (key, sub) in map {
                    stack.push((sub, NAME_MAPS.contains(&key.as_str())));
                }
            }
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, false))),
            _ => {}
        }
    }
    true
}

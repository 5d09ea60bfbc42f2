//! How much work checking one argument against a schema takes, counted before the check.
//!
//! A validator walks the schema once per place it applies: a subschema reached through two
//! `$ref`s is evaluated twice, so a "billion laughs" DAG (each level `allOf` two references to
//! the level below) costs 2^N evaluations at N levels, and a diamond inside a recursive cycle
//! doubles the work at each level of the argument. Depth alone does not bound it.
//!
//! [`CountedSchema::weighed_evaluations`] counts the (subschema, instance node) evaluations a
//! check of THIS argument would do, memoized over those pairs, so the count itself costs at
//! most one step per distinct pair (never more than the limit) however large the true number
//! is. The count is an upper bound of what the validator does: every applicator is counted as
//! applying (`anyOf` without short-circuit, both `then` and `else`, `patternProperties` and
//! `additionalProperties` on every property). An ordinary recursive schema (a tree whose
//! `left`, `right` or `children.items` refer back to the node) costs in proportion to the
//! argument, which is at most 16 KiB.
//!
//! References are resolved as the validator resolves them inside the schema ([`refs`]): `#`
//! JSON pointers and `#name` anchors inside the resource they appear in, and a reference
//! naming a resource's `$id` (its whole value or its last path segment) with an optional
//! fragment inside that resource. `$dynamicRef` and `$recursiveRef` count as plain
//! references (an anchor not in the resource is looked for in the whole schema). A reference
//! that resolves to nothing here counts as one evaluation (the validator accepts anything
//! there); one whose base could name more than one resource refuses the check
//! ([`TooCostly::Unplaced`]; see docs/threat-model.md).
//!
//! Two kinds of keyword cost more than one evaluation: `unevaluatedProperties` and
//! `unevaluatedItems` walk the schema's in-place subschemas again ([`unevaluated`]), and an
//! `enum` or `const` compared value by value weighs the values compared ([`values`]).
//!
//! A regular expression is weighed by the string it is matched against ([`PatternCosts`]):
//! each `pattern` evaluation, and each match of a `patternProperties` key against a property
//! name, adds the steps that match can take, not 1. The check's total, evaluations and
//! matching steps together, is what the limit bounds.
//!
//! Everything the count needs from the schema alone (which resource a `$id` names, where an
//! anchor is declared, how each `enum` compares) is found once per tool when the catalog is
//! built ([`index`]): counting one call never walks the schema.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use super::patterns::{PatternWeights, Weight};

mod index;
mod inline;
mod refs;
mod unevaluated;
mod values;
pub(crate) use index::CountedSchema;
use index::SchemaIndex;
pub(crate) use inline::inline_evaluations;
use inline::inline_safe;

/// Why a check was not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TooCostly {
    /// More than the limit of evaluations.
    Evaluations(u64),
    /// A reference loop that never moves into the argument (it would never end), or nesting
    /// deeper than [`MAX_NESTING`].
    Loops,
    /// A reference whose base could name more than one of the schema's resources: which one
    /// the validator takes, and so what it costs, is not known.
    Unplaced,
}

/// Deepest chain of (subschema, instance node) evaluations followed, references included.
pub(crate) const MAX_NESTING: usize = 1024;

/// Most backtracking steps one match of a pattern on fancy-regex's backtracking engine may
/// take (its `backtrack_limit`, which the validator is built with: schema.rs). Past it the
/// match stops and the string is refused as not matching. fancy-regex counts every branch
/// it returns to, across every start position of one search.
pub(crate) const BACKTRACK_LIMIT: usize = 1_000;

/// States of a linear pattern's automaton that one work unit pays for, per byte matched.
const STATES_PER_UNIT: u64 = 32;
/// Bytes of a backtracking pattern that one work unit pays for, per step and byte matched.
const PATTERN_BYTES_PER_UNIT: u64 = 16;

/// What matching each of a schema's regular expressions (`pattern` values, `patternProperties`
/// keys) costs, in work units per byte of the string matched; found once per schema when the
/// catalog is built, from the weighing that bounds the patterns' memory
/// ([`super::patterns::PatternBudget::admit`]: one automaton build per distinct pattern).
///
/// A pattern the linear `regex` engine accepts (after the validator's ECMA-262 translation)
/// is run by it (fancy-regex hands such patterns over whole): a match takes at most one pass
/// over the string per automaton state, so it weighs `(bytes + 1) × ⌈states / 32⌉`. Any
/// other pattern (lookaround, backreferences, atomic groups, possessive repeats...) runs on
/// fancy-regex's backtracking engine: at most [`BACKTRACK_LIMIT`] returns to a branch, and
/// between two of them one forward pass, which may scan the rest of the string once per
/// part of the pattern; it weighs `(BACKTRACK_LIMIT + 1) × (bytes + 1) × ⌈pattern bytes / 16⌉`.
/// So a backtracking pattern on a string of more than about a thousand bytes is over the
/// limit of a check by itself.
#[derive(Debug, Default)]
pub(crate) struct PatternCosts {
    /// Linear patterns (shared with the build's other tools that have them) and their units
    /// per byte; a pattern not here is weighed as backtracking.
    linear: HashMap<Arc<str>, u64>,
}

impl PatternCosts {
    /// Weigh every `pattern` value and `patternProperties` key anywhere in `root`, each
    /// distinct one once (for a schema compiled alone; the catalog's come from its budget).
    pub(crate) fn of(root: &Value) -> Self {
        let mut weights = PatternWeights::default();
        let mut costs = Self::default();
        for pattern in super::patterns::patterns(root) {
            if let (known, Some(w)) = weights.of(pattern) {
                costs.add(known, w);
            }
        }
        costs
    }

    /// Note what matching `pattern` costs, from its weight: linear, by its automaton's
    /// states; otherwise it stays weighed as backtracking.
    pub(crate) fn add(&mut self, pattern: Arc<str>, weight: Weight) {
        if let Some(states) = weight.linear_states {
            self.linear
                .insert(pattern, states.div_ceil(STATES_PER_UNIT).max(1));
        }
    }

    /// Work units of one match of `pattern` against a string of `bytes` bytes.
    pub(super) fn weight(&self, pattern: &str, bytes: usize) -> u64 {
        let span = u64::try_from(bytes).unwrap_or(u64::MAX).saturating_add(1);
        match self.linear.get(pattern) {
            Some(&units) => span.saturating_mul(units),
            None => {
                let parts = u64::try_from(pattern.len())
                    .unwrap_or(u64::MAX)
                    .div_ceil(PATTERN_BYTES_PER_UNIT)
                    .max(1);
                (BACKTRACK_LIMIT as u64 + 1)
                    .saturating_mul(span)
                    .saturating_mul(parts)
            }
        }
    }
}

/// [`CountedSchema::weighed_evaluations`] against `root` indexed for this count alone.
#[cfg(test)]
pub(crate) fn weighed_evaluations(
    root: &Value,
    instance: &Value,
    limit: u64,
    patterns: &PatternCosts,
) -> Result<u64, TooCostly> {
    let index = SchemaIndex::of(root);
    Counter::new(root, limit, patterns, &index).count(root, instance)
}

struct Counter<'s> {
    limit: u64,
    patterns: &'s PatternCosts,
    /// (subschema, instance node) → its count, for pairs reached through a reference.
    memo: HashMap<(usize, usize), u64>,
    /// Pairs being counted now: meeting one again is a loop.
    open: HashSet<(usize, usize)>,
    /// (subschema, instance node) → the work of the `unevaluated*` walk below it.
    marked: HashMap<(usize, usize), u64>,
    /// Pairs being walked now: the walk stops at one met again, as the validator's does.
    marking: HashSet<(usize, usize)>,
    depth: usize,
    /// What the count looks up in the schema instead of walking it.
    index: &'s SchemaIndex,
    /// The schema indexed: where the index's answers are found.
    root: &'s Value,
    /// The resource the subschema being counted belongs to: where its references resolve.
    resource: &'s Value,
    /// Property names as string nodes (`propertyNames` applies to them), kept until the
    /// count ends so that no memo entry outlives the node its address stands for.
    names: Vec<Vec<Value>>,
}

fn key(schema: &Value, instance: &Value) -> (usize, usize) {
    (
        std::ptr::from_ref(schema) as usize,
        std::ptr::from_ref(instance) as usize,
    )
}

impl<'s> Counter<'s> {
    fn new(
        root: &'s Value,
        limit: u64,
        patterns: &'s PatternCosts,
        index: &'s SchemaIndex,
    ) -> Self {
        Counter {
            limit,
            patterns,
            memo: HashMap::new(),
            open: HashSet::new(),
            marked: HashMap::new(),
            marking: HashSet::new(),
            depth: 0,
            index,
            root,
            resource: root,
            names: Vec::new(),
        }
    }

    fn add(&self, total: u64, more: u64) -> Result<u64, TooCostly> {
        let sum = total.saturating_add(more);
        if sum > self.limit {
            Err(TooCostly::Evaluations(self.limit))
        } else {
            Ok(sum)
        }
    }

    fn count(&mut self, schema: &'s Value, instance: &Value) -> Result<u64, TooCostly> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(TooCostly::Loops);
        }
        let outer = self.resource;
        if refs::is_resource(schema) {
            self.resource = schema;
        }
        let counted = self.count_object(schema, instance);
        self.resource = outer;
        self.depth -= 1;
        counted
    }

    fn via_ref(
        &mut self,
        (target, resource): refs::Target<'s>,
        instance: &Value,
    ) -> Result<u64, TooCostly> {
        let pair = key(target, instance);
        if let Some(&n) = self.memo.get(&pair) {
            return Ok(n);
        }
        if !self.open.insert(pair) {
            return Err(TooCostly::Loops);
        }
        let outer = std::mem::replace(&mut self.resource, resource);
        let n = self.count(target, instance);
        self.resource = outer;
        self.open.remove(&pair);
        let n = n?;
        self.memo.insert(pair, n);
        Ok(n)
    }

    fn count_object(&mut self, schema: &'s Value, instance: &Value) -> Result<u64, TooCostly> {
        let Value::Object(map) = schema else {
            return Ok(1);
        };
        let mut total = 1u64;
        for keyword in ["$ref", "$dynamicRef", "$recursiveRef"] {
            if let Some(Value::String(reference)) = map.get(keyword)
                && let Some(target) = self.resolve(keyword, reference)?
            {
                let n = self.via_ref(target, instance)?;
                total = self.add(total, n)?;
            }
        }
        for keyword in ["allOf", "anyOf", "oneOf"] {
            if let Some(Value::Array(items)) = map.get(keyword) {
                for item in items {
                    let n = self.count(item, instance)?;
                    total = self.add(total, n)?;
                }
            }
        }
        for keyword in ["not", "if", "then", "else"] {
            if let Some(sub) = map.get(keyword) {
                let n = self.count(sub, instance)?;
                total = self.add(total, n)?;
            }
        }
        for (keyword, is_const) in [("enum", false), ("const", true)] {
            let Some(value) = map.get(keyword) else {
                continue;
            };
            let options = match value {
                Value::Array(options) if !is_const => options.as_slice(),
                _ if is_const => std::slice::from_ref(value),
                _ => continue,
            };
            // Every `enum` and `const` of the schema is indexed; one missing from the index
            // would be weighed all the same.
            let units = match self.index.shape(value) {
                Some(shape) => shape.compared(instance),
                None => values::Shape::of(options, is_const).compared(instance),
            };
            total = self.add(total, units)?;
        }
        let walks = match instance {
            Value::Object(_) => map.contains_key("unevaluatedProperties"),
            Value::Array(_) => map.contains_key("unevaluatedItems"),
            _ => false,
        };
        if walks {
            let n = self.marking(schema, instance)?;
            total = self.add(total, n)?;
        }
        match instance {
            Value::Object(object) => {
                total = self.object_keywords(map, object, total)?;
                for keyword in ["dependentSchemas", "dependencies"] {
                    if let Some(Value::Object(deps)) = map.get(keyword) {
                        for sub in deps.values() {
                            let n = self.count(sub, instance)?;
                            total = self.add(total, n)?;
                        }
                    }
                }
            }
            Value::Array(items) => total = self.array_keywords(map, items, total)?,
            Value::String(text) => {
                if let Some(Value::String(pattern)) = map.get("pattern") {
                    total = self.add(total, self.patterns.weight(pattern, text.len()))?;
                }
            }
            _ => {}
        }
        Ok(total)
    }

    fn object_keywords(
        &mut self,
        map: &'s serde_json::Map<String, Value>,
        object: &serde_json::Map<String, Value>,
        mut total: u64,
    ) -> Result<u64, TooCostly> {
        if let Some(Value::Object(properties)) = map.get("properties") {
            for (name, value) in object {
                if let Some(sub) = properties.get(name) {
                    let n = self.count(sub, value)?;
                    total = self.add(total, n)?;
                }
            }
        }
        if let Some(Value::Object(patterns)) = map.get("patternProperties") {
            // Each name is matched against each pattern, again for `additionalProperties`
            // and `unevaluatedProperties` (which apply to the names no pattern matches).
            let matchings = 1
                + u64::from(map.contains_key("additionalProperties"))
                + u64::from(map.contains_key("unevaluatedProperties"));
            for (pattern, sub) in patterns {
                for (name, value) in object {
                    let n = self.count(sub, value)?;
                    total = self.add(total, n)?;
                    let matching = self.patterns.weight(pattern, name.len());
                    total = self.add(total, matching.saturating_mul(matchings))?;
                }
            }
        }
        for keyword in ["additionalProperties", "unevaluatedProperties"] {
            if let Some(sub) = map.get(keyword) {
                for value in object.values() {
                    let n = self.count(sub, value)?;
                    total = self.add(total, n)?;
                }
            }
        }
        if let Some(sub) = map.get("propertyNames") {
            let names: Vec<Value> = object.keys().cloned().map(Value::String).collect();
            for name in &names {
                let n = self.count(sub, name)?;
                total = self.add(total, n)?;
            }
            // Moving the vector keeps its items where they are.
            self.names.push(names);
        }
        Ok(total)
    }

    fn array_keywords(
        &mut self,
        map: &'s serde_json::Map<String, Value>,
        items: &[Value],
        mut total: u64,
    ) -> Result<u64, TooCostly> {
        for keyword in ["prefixItems", "items"] {
            match map.get(keyword) {
                Some(Value::Array(tuple)) => {
                    for (sub, item) in tuple.iter().zip(items) {
                        let n = self.count(sub, item)?;
                        total = self.add(total, n)?;
                    }
                }
                Some(sub) if keyword == "items" => {
                    for item in items {
                        let n = self.count(sub, item)?;
                        total = self.add(total, n)?;
                    }
                }
                _ => {}
            }
        }
        for keyword in ["additionalItems", "unevaluatedItems", "contains"] {
            if let Some(sub) = map.get(keyword) {
                for item in items {
                    let n = self.count(sub, item)?;
                    total = self.add(total, n)?;
                }
            }
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every pattern weighed as backtracking.
    fn evaluations(root: &Value, instance: &Value, limit: u64) -> Result<u64, TooCostly> {
        weighed_evaluations(root, instance, limit, &PatternCosts::default())
    }

    pub(super) fn laughs(levels: usize) -> Value {
        let mut defs = serde_json::Map::new();
        defs.insert("a0".into(), json!({"type": "string"}));
        for i in 1..=levels {
            let below = format!("#/$defs/a{}", i - 1);
            defs.insert(
                format!("a{i}"),
                json!({"allOf": [{"$ref": below}, {"$ref": below}]}),
            );
        }
        json!({"type": "object", "$defs": defs, "properties": {"x": {"$ref": format!("#/$defs/a{levels}")}}})
    }

    #[test]
    fn a_dag_of_refs_costs_two_to_the_levels_and_is_counted_cheaply() {
        let ten = evaluations(&laughs(10), &json!({"x": "s"}), u64::MAX).unwrap();
        assert!(ten > 1 << 11, "{ten}");
        // Thirty levels: 2^31 evaluations, counted in a moment.
        let started = std::time::Instant::now();
        assert_eq!(
            evaluations(&laughs(30), &json!({"x": "s"}), 1_000_000),
            Err(TooCostly::Evaluations(1_000_000))
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // No argument, nothing evaluated under `x`.
        assert!(evaluations(&laughs(30), &json!({}), 1_000_000).unwrap() < 10);
    }

    #[test]
    fn a_diamond_inside_a_recursive_cycle_doubles_per_level_of_the_argument() {
        let schema = json!({"$defs": {
            "l": {"allOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}]},
            "a": {"type": "object", "properties": {"x": {"$ref": "#/$defs/l"}}},
            "b": {"type": "object", "properties": {"x": {"$ref": "#/$defs/l"}}}},
            "properties": {"x": {"$ref": "#/$defs/l"}}});
        let mut arg = json!(1);
        for _ in 0..60 {
            arg = json!({"x": arg});
        }
        // Memoized per (subschema, node) the count is cheap, and it is over any budget.
        assert_eq!(
            evaluations(&schema, &arg, 1_000_000),
            Err(TooCostly::Evaluations(1_000_000))
        );
    }

    #[test]
    fn ordinary_recursive_schemas_cost_in_proportion_to_the_argument() {
        let schema = json!({"$defs": {"node": {"type": "object", "properties": {
            "v": {"type": "integer"}, "left": {"$ref": "#/$defs/node"}, "right": {"$ref": "#/$defs/node"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
            "properties": {"root": {"$ref": "#"}, "n": {"$ref": "#/$defs/node"}}});
        let mut node = json!({"v": 1});
        for _ in 0..40 {
            node = json!({"v": 1, "left": node.clone(), "children": [{"v": 2}, {"v": 3}]});
        }
        let n = evaluations(&schema, &json!({"n": node}), 1_000_000).unwrap();
        assert!(n < 2_000, "{n}");
    }

    #[test]
    fn a_reference_loop_that_never_moves_into_the_argument_is_refused() {
        for schema in [
            json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}),
            json!({"allOf": [{"$ref": "#"}]}),
        ] {
            assert_eq!(
                evaluations(&schema, &json!({"x": 1}), 1_000_000),
                Err(TooCostly::Loops),
                "{schema}"
            );
        }
    }

    #[test]
    fn references_through_ids_and_anchors_are_followed() {
        let mut defs = serde_json::Map::new();
        defs.insert(
            "a0".into(),
            json!({"$id": "http://e.com/a0", "$anchor": "z0", "type": "string"}),
        );
        for i in 1..=30 {
            defs.insert(
                format!("a{i}"),
                json!({"$id": format!("http://e.com/a{i}"), "allOf": [{"$ref": format!("a{}", i - 1)}, {"$ref": format!("http://e.com/a{}", i - 1)}]}),
            );
        }
        let schema = json!({"$id": "http://e.com/root", "$defs": defs, "properties": {"x": {"$ref": "a30"}, "y": {"$ref": "#z0"}}});
        assert_eq!(
            evaluations(&schema, &json!({"x": "s"}), 1_000_000),
            Err(TooCostly::Evaluations(1_000_000))
        );
        assert!(evaluations(&schema, &json!({"y": "s"}), 1_000_000).unwrap() < 10);
    }

    /// The tester's pattern: three lookaheads, each scanning to the end of the string from
    /// every start position (quadratic on fancy-regex's backtracking engine), `|z` repeated
    /// `alternatives` times so that each pattern is its own.
    fn lookaheads(alternatives: usize) -> String {
        format!("(?=.*b$)(?=.*b$)(?=.*b$)b${}", "|z".repeat(alternatives))
    }

    #[test]
    fn many_lookaround_patterns_on_a_long_string_are_too_costly_to_check() {
        let all: Vec<Value> = (0..20).map(|i| json!({"pattern": lookaheads(i)})).collect();
        let schema = json!({"properties": {"s": {"type": "string", "allOf": all}}});
        let patterns = PatternCosts::of(&schema);
        let long = json!({"s": format!("{}b", "a".repeat(15_000))});
        assert_eq!(
            weighed_evaluations(&schema, &long, 1_000_000, &patterns),
            Err(TooCostly::Evaluations(1_000_000))
        );
        // One such pattern on that string is over the budget by itself.
        let one = json!({"properties": {"s": {"pattern": lookaheads(0)}}});
        assert_eq!(
            weighed_evaluations(&one, &long, 1_000_000, &PatternCosts::of(&one)),
            Err(TooCostly::Evaluations(1_000_000))
        );
        // A short string is weighed by its length and checked.
        let short = json!({"s": "aaab"});
        let n = weighed_evaluations(&schema, &short, 1_000_000, &patterns).unwrap();
        assert!(n > 20 * (BACKTRACK_LIMIT as u64), "{n}");
        assert!(n < 1_000_000, "{n}");
    }

    #[test]
    fn a_plain_pattern_is_weighed_linearly_in_its_string() {
        let schema = json!({"properties": {"s": {"type": "string", "pattern": "^[a-z0-9 ]*$"}}});
        let patterns = PatternCosts::of(&schema);
        let n = |len: usize| {
            weighed_evaluations(
                &schema,
                &json!({"s": "a".repeat(len)}),
                1_000_000,
                &patterns,
            )
            .unwrap()
        };
        // 16 KiB, the most an argument may be: weighed, and well within the budget.
        let full = n(16 * 1024);
        assert!(full > 16 * 1024, "{full}");
        assert!(full < 100_000, "{full}");
        assert!(n(8 * 1024) < full / 2 + 100);
        // The same string against a lookahead pattern is over the budget.
        let fancy = json!({"properties": {"s": {"pattern": "^(?=[a-z])[a-z0-9 ]*$"}}});
        assert_eq!(
            weighed_evaluations(
                &fancy,
                &json!({"s": "a".repeat(16 * 1024)}),
                1_000_000,
                &PatternCosts::of(&fancy)
            ),
            Err(TooCostly::Evaluations(1_000_000))
        );
    }

    #[test]
    fn property_name_patterns_are_weighed_by_each_name() {
        let long_names = |n: usize| {
            let mut object = serde_json::Map::new();
            for i in 0..n {
                object.insert(format!("{i}{}", "k".repeat(900)), json!(1));
            }
            Value::Object(object)
        };
        for schema in [
            json!({"patternProperties": {"(?=k)k": {}}}),
            json!({"patternProperties": {"(?=k)k": {}}, "additionalProperties": false}),
            json!({"propertyNames": {"pattern": "(?=k)k"}}),
        ] {
            let patterns = PatternCosts::of(&schema);
            let one = weighed_evaluations(&schema, &long_names(1), 10_000_000, &patterns).unwrap();
            assert!(one > 900 * BACKTRACK_LIMIT as u64, "{schema}: {one}");
            assert_eq!(
                weighed_evaluations(&schema, &long_names(16), 1_000_000, &patterns),
                Err(TooCostly::Evaluations(1_000_000)),
                "{schema}"
            );
        }
    }
}

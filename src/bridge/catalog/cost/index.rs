//! What counting a check's work needs from the schema alone, found in one walk of the schema
//! when the catalog is built ([`SchemaIndex`]), so that counting one call's work costs in
//! proportion to its arguments and never walks the schema (servers publish schemas of
//! 10-15 MB: a walk of one per call took about 0.1 s).
//!
//! The index answers exactly what walking the schema at each reference would: which resource
//! a `$id` base names, which subschema declares an anchor inside a resource (or anywhere),
//! and how each `enum` and `const` compares its values ([`super::values::Shape`]). It owns
//! all it holds and borrows nothing: numbers, node addresses (the schema is never changed
//! once indexed, and its root is boxed, so its nodes do not move), the names of `$id`s and
//! anchors, and the path from the root of each subschema a lookup answers with, followed in
//! the schema when the lookup is made (a map lookup per level). A [`CountedSchema`] owns the
//! schema and its index together.

use std::collections::HashMap;

use serde_json::Value;

use super::refs::{Target, is_resource};
use super::values::Shape;
use super::{Counter, PatternCosts, TooCostly};

/// A tool's inputSchema (as compiled) with its [`SchemaIndex`], built once per tool when the
/// catalog is built; what [`CountedSchema::weighed_evaluations`] counts against.
pub(crate) struct CountedSchema {
    /// Boxed so that the root keeps its address (the index knows it by it) when this moves.
    schema: Box<Value>,
    index: SchemaIndex,
}

impl CountedSchema {
    /// Own `schema` and index it: one walk of the schema, linear in its nodes.
    pub(crate) fn index(schema: Value) -> Self {
        let schema = Box::new(schema);
        let index = SchemaIndex::of(&schema);
        Self { schema, index }
    }

    /// The schema as compiled.
    pub(crate) fn schema(&self) -> &Value {
        &self.schema
    }

    /// The work checking `instance` against this schema takes, or [`TooCostly`] as soon as it
    /// passes `limit` (the work done to count is bounded by `limit` too, and never walks the
    /// schema): evaluations, each regular expression match weighed by `patterns` (one not in
    /// it as backtracking).
    pub(crate) fn weighed_evaluations(
        &self,
        instance: &Value,
        limit: u64,
        patterns: &PatternCosts,
    ) -> Result<u64, TooCostly> {
        let root = &*self.schema;
        Counter::new(root, limit, patterns, &self.index).count(root, instance)
    }

    /// Whether a small check against this schema may run on the async runtime
    /// ([`super::inline_safe`]).
    pub(crate) fn inline_safe(&self) -> bool {
        super::inline_safe(&self.schema, &self.index)
    }
}

/// One step from a node to one of its values: a key of an object, an index of an array.
#[derive(Debug, Clone)]
enum Key<S> {
    Name(S),
    Item(usize),
}

/// Where a subschema lies: the steps from the root down to it.
#[derive(Debug, Clone)]
struct Place(Box<[Key<Box<str>>]>);

impl Place {
    /// The place the walk's `path` leads to.
    fn of(path: &[Key<&str>]) -> Self {
        Place(
            path.iter()
                .map(|key| match key {
                    Key::Name(name) => Key::Name(Box::from(*name)),
                    Key::Item(i) => Key::Item(*i),
                })
                .collect(),
        )
    }

    /// The subschema at this place in `root`, and the one `resource` steps down on the way
    /// (the root for 0). Every place the index holds is in the schema it indexed; were one
    /// not, the count would refuse the check ([`TooCostly::Unplaced`]) rather than guess.
    fn find<'s>(&self, root: &'s Value, resource: usize) -> Result<Target<'s>, TooCostly> {
        let mut at = root;
        let mut found_resource = root;
        for (depth, key) in self.0.iter().enumerate() {
            at = match (at, key) {
                (Value::Object(map), Key::Name(name)) => map.get(&**name),
                (Value::Array(items), Key::Item(i)) => items.get(*i),
                _ => None,
            }
            .ok_or(TooCostly::Unplaced)?;
            if depth + 1 == resource {
                found_resource = at;
            }
        }
        Ok((at, found_resource))
    }
}

/// The resources a `$id` base names: one (its address and place), or more than one (the
/// count cannot tell which the validator takes).
#[derive(Debug)]
enum Named {
    One(usize, Place),
    Several,
}

/// Where a subschema references may be resolved from (the root, or one with a `$id`) lies in
/// the walk: its subtree is the positions `first..end`, and `resource` is the address of the
/// nearest subschema with its own `$id` at or above it (0: none).
#[derive(Debug)]
struct Document {
    first: usize,
    end: usize,
    resource: usize,
}

/// What [`Counter`] looks up in the schema instead of walking it, built by
/// [`SchemaIndex::of`]. Subschemas are known by their address (the schema is never changed
/// once indexed, so its nodes do not move) and found by their [`Place`].
#[derive(Debug)]
pub(crate) struct SchemaIndex {
    /// A `$id` without its fragment → the subschemas declaring it.
    whole: HashMap<Box<str>, Named>,
    /// The last path segment of a `$id` without its fragment → the subschemas declaring it.
    last: HashMap<Box<str>, Named>,
    /// The root and every subschema with a `$id`, by address.
    documents: HashMap<usize, Document>,
    /// Address of the declarer's resource or 0 → anchor name → the subschemas declaring that
    /// anchor there, with their positions in the walk, in walk order.
    anchors: HashMap<usize, Declarers>,
    /// Anchor name → the first subschema anywhere declaring it, and the steps from the root
    /// to its resource (0: the root).
    anywhere: HashMap<Box<str>, (Place, usize)>,
    /// Address of an `enum`'s or a `const`'s value → how it compares its values.
    shapes: HashMap<usize, Shape>,
}

/// Anchor name → the subschemas declaring it in one resource, with their positions in the
/// walk, in walk order.
type Declarers = HashMap<Box<str>, Vec<(usize, Place)>>;

/// The address `value` is known by in the index.
fn address(value: &Value) -> usize {
    std::ptr::from_ref(value) as usize
}

/// What a node's size is wanted for: nothing, an `enum` or `const` value compared, or an
/// `enum`'s array (each of its values is compared).
#[derive(Clone, Copy, PartialEq)]
enum Want {
    Nothing,
    Size,
    ItemSizes,
}

/// The nearest subschema with its own `$id` at or above a node, and its depth in the walk's
/// path.
type Resource<'s> = Option<(&'s Value, usize)>;

/// One step of the walk: a node entered (with the key it is reached by, its resource and
/// what its size is wanted for), or a container left (with the position it was entered at,
/// and whether its size is wanted).
enum Step<'s> {
    Enter(&'s Value, Option<Key<&'s str>>, Resource<'s>, Want),
    Leave(&'s Value, usize, Resource<'s>, bool),
}

impl SchemaIndex {
    /// Index `root` in one walk. The walk visits nodes in the order the count's lookups
    /// used to search them (a stack: each node's values pushed in order, the last popped
    /// first), so "the first subschema declaring an anchor" is the same one. The index knows
    /// `root`'s nodes by address: it answers for `root` as long as it is not moved or changed.
    pub(crate) fn of(root: &Value) -> Self {
        let mut index = SchemaIndex {
            whole: HashMap::new(),
            last: HashMap::new(),
            documents: HashMap::new(),
            anchors: HashMap::new(),
            anywhere: HashMap::new(),
            shapes: HashMap::new(),
        };
        // `enum`/`const` values met ((value, is_const)), and the sizes of their containers.
        let mut compared: Vec<(&Value, bool)> = Vec::new();
        let mut sizes: HashMap<usize, u64> = HashMap::new();
        // The keys from the root to the container being walked.
        let mut path: Vec<Key<&str>> = Vec::new();
        let mut position = 0usize;
        let mut stack = vec![Step::Enter(root, None, None, Want::Nothing)];
        while let Some(step) = stack.pop() {
            let (v, key, resource, want) = match step {
                Step::Enter(v, key, resource, want) => (v, key, resource, want),
                Step::Leave(v, first, resource, sized) => {
                    path.pop();
                    let end = position;
                    if sized {
                        sizes.insert(address(v), u64::try_from(end - first).unwrap_or(u64::MAX));
                    }
                    let is_document =
                        std::ptr::eq(v, root) || v.get("$id").is_some_and(Value::is_string);
                    if is_document {
                        let resource = resource.map_or(0, |(r, _)| address(r));
                        index.documents.insert(
                            address(v),
                            Document {
                                first,
                                end,
                                resource,
                            },
                        );
                    }
                    continue;
                }
            };
            #[cfg(test)]
            tests::walked(1);
            let first = position;
            position += 1;
            if matches!(v, Value::Object(_) | Value::Array(_)) {
                // The root is reached by no key: its leave pops nothing.
                path.extend(key);
            }
            // A subschema with its own `$id` is its own resource and its subtree's.
            let resource = if is_resource(v) {
                Some((v, path.len()))
            } else {
                resource
            };
            if matches!(v, Value::Object(_) | Value::Array(_)) {
                stack.push(Step::Leave(v, first, resource, want == Want::Size));
            }
            match v {
                Value::Object(map) => {
                    index.declarations(v, map, resource, first, &path);
                    if let Some(values @ Value::Array(_)) = map.get("enum") {
                        compared.push((values, false));
                    }
                    compared.extend(map.get("const").map(|c| (c, true)));
                    for (key, sub) in map {
                        let want = match (key.as_str(), sub) {
                            ("const", _) => Want::Size,
                            ("enum", Value::Array(_)) => Want::ItemSizes,
                            _ => Want::Nothing,
                        };
                        stack.push(Step::Enter(sub, Some(Key::Name(key)), resource, want));
                    }
                }
                Value::Array(items) => {
                    let want = if want == Want::ItemSizes {
                        Want::Size
                    } else {
                        Want::Nothing
                    };
                    stack.extend(
                        items
                            .iter()
                            .enumerate()
                            .map(|(i, item)| Step::Enter(item, Some(Key::Item(i)), resource, want)),
                    );
                }
                _ => {}
            }
        }
        for (value, is_const) in compared {
            let options = match value {
                Value::Array(options) if !is_const => options.as_slice(),
                _ => std::slice::from_ref(value),
            };
            let size = |v: &Value| sizes.get(&address(v)).copied().unwrap_or(1);
            index
                .shapes
                .insert(address(value), Shape::sized(options, is_const, size));
        }
        index
    }

    /// Note what the object `v` (`map`, at walk position `position` and path `path`, in
    /// `resource`) declares: its `$id`, and the anchors it names.
    fn declarations(
        &mut self,
        v: &Value,
        map: &serde_json::Map<String, Value>,
        resource: Resource<'_>,
        position: usize,
        path: &[Key<&str>],
    ) {
        let id = map.get("$id").and_then(Value::as_str);
        let mut declared: Vec<&str> = Vec::with_capacity(3);
        for name in [
            map.get("$anchor").and_then(Value::as_str),
            map.get("$dynamicAnchor").and_then(Value::as_str),
            id.and_then(|id| id.strip_prefix('#')),
        ]
        .into_iter()
        .flatten()
        {
            if !declared.contains(&name) {
                declared.push(name);
            }
        }
        if id.is_none() && declared.is_empty() {
            return;
        }
        let place = Place::of(path);
        if let Some(id) = id {
            let without_fragment = id.split('#').next().unwrap_or(id);
            let last = without_fragment
                .rsplit('/')
                .next()
                .unwrap_or(without_fragment);
            for (names, key) in [(&mut self.whole, without_fragment), (&mut self.last, last)] {
                match names.get_mut(key) {
                    None => {
                        names.insert(key.into(), Named::One(address(v), place.clone()));
                    }
                    Some(named @ Named::One(..)) => {
                        if !matches!(named, Named::One(other, _) if *other == address(v)) {
                            *named = Named::Several;
                        }
                    }
                    Some(Named::Several) => {}
                }
            }
        }
        let (resource_address, resource_depth) =
            resource.map_or((0, 0), |(r, depth)| (address(r), depth));
        for name in declared {
            self.anchors
                .entry(resource_address)
                .or_default()
                .entry(name.into())
                .or_default()
                .push((position, place.clone()));
            if !self.anywhere.contains_key(name) {
                self.anywhere
                    .insert(name.into(), (place.clone(), resource_depth));
            }
        }
    }

    /// The one resource of `root` (the schema indexed) whose `$id` `base` names: its whole
    /// value (without fragment) first, else its last path segment; `Ok(None)` when none does.
    pub(super) fn named<'s>(
        &self,
        root: &'s Value,
        base: &str,
    ) -> Result<Option<&'s Value>, TooCostly> {
        let wanted = base.rsplit('/').next().unwrap_or(base);
        match self.whole.get(base).or_else(|| self.last.get(wanted)) {
            None => Ok(None),
            Some(Named::One(_, place)) => Ok(Some(place.find(root, 0)?.0)),
            Some(Named::Several) => Err(TooCostly::Unplaced),
        }
    }

    /// The first subschema (in walk order) of `document`'s subtree declaring the anchor
    /// `name`, searching `document`'s own resource only (subschemas of a resource nested in
    /// it, their own `$id`, are theirs). `document` is the root of `root` (the schema
    /// indexed) or a subschema of it with a `$id`: the only places a count resolves from.
    pub(super) fn anchor<'s>(
        &self,
        root: &'s Value,
        document: &Value,
        name: &str,
    ) -> Result<Option<&'s Value>, TooCostly> {
        let Some(document) = self.documents.get(&address(document)) else {
            return Ok(None);
        };
        let Some(declarers) = self
            .anchors
            .get(&document.resource)
            .and_then(|names| names.get(name))
        else {
            return Ok(None);
        };
        let at = declarers.partition_point(|(position, _)| *position < document.first);
        match declarers.get(at) {
            Some((position, place)) if *position < document.end => Ok(Some(place.find(root, 0)?.0)),
            _ => Ok(None),
        }
    }

    /// The first subschema anywhere in `root` (the schema indexed) declaring the anchor
    /// `name`, and its resource.
    pub(super) fn anywhere<'s>(
        &self,
        root: &'s Value,
        name: &str,
    ) -> Result<Option<Target<'s>>, TooCostly> {
        self.anywhere
            .get(name)
            .map(|(place, resource)| place.find(root, *resource))
            .transpose()
    }

    /// How the `enum` or `const` whose value is `value` compares its values.
    pub(super) fn shape(&self, value: &Value) -> Option<&Shape> {
        self.shapes.get(&address(value))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::json;
    use std::cell::Cell;

    thread_local! {
        /// Schema nodes this thread's walks visited (the index's walk, and counting the nodes
        /// of an `enum` value or argument).
        static WALKED: Cell<u64> = const { Cell::new(0) };
    }

    /// Count `nodes` visited by a walk.
    pub(in super::super) fn walked(nodes: u64) {
        WALKED.with(|w| w.set(w.get() + nodes));
    }

    fn walked_so_far() -> u64 {
        WALKED.with(Cell::get)
    }

    /// A schema of `n` resources, each declaring the anchor `a` and holding an `enum` of 20
    /// arrays; the root's properties refer to one by `$id`, by anchor (plain and dynamic) and
    /// to the enum of another.
    fn many_resources(n: usize) -> Value {
        let mut defs = serde_json::Map::new();
        let values: Vec<Value> = (0..20).map(|i| json!([i, {"k": i}])).collect();
        for i in 0..n {
            defs.insert(
                format!("r{i}"),
                json!({"$id": format!("https://ex.com/r{i}.json"), "$anchor": "a",
                    "type": "array", "items": {"enum": values.clone()}, "const": [1, 2, 3]}),
            );
        }
        json!({"$id": "https://ex.com/root.json", "$defs": defs, "properties": {
            "whole": {"$ref": "https://ex.com/r7.json"},
            "anchored": {"$ref": "r9.json#a"},
            "dynamic": {"$dynamicRef": "#a"},
            "pointer": {"$ref": "#/$defs/r11"}}})
    }

    #[test]
    fn counting_a_call_against_an_indexed_schema_walks_only_the_argument() {
        let schema = many_resources(5_000);
        let before = walked_so_far();
        let counted = CountedSchema::index(schema.clone());
        let indexing = walked_so_far() - before;
        // The index walks the whole schema once: 5,000 resources of 90-odd nodes.
        assert!(indexing > 5_000 * 80, "{indexing}");
        let patterns = PatternCosts::default();
        let arg = json!({"whole": [[1, {"k": 1}]], "anchored": [[2, {"k": 2}]],
            "dynamic": [[3, {"k": 3}]], "pointer": [[4, {"k": 4}]]});
        let before = walked_so_far();
        let n = counted.weighed_evaluations(&arg, 1_000_000, &patterns);
        let per_call = walked_so_far() - before;
        // Counting the argument's nodes against each enum (at most its 17 nodes each time)
        // is all the walking a call does.
        assert!(per_call < 2_000, "{per_call}");
        // The same count as indexing the schema for this count alone.
        assert_eq!(
            n,
            super::super::weighed_evaluations(&schema, &arg, 1_000_000, &patterns)
        );
        // Every reference was followed: each of the four enums compared its 20 arrays.
        assert!(n.unwrap() > 4 * 20, "{n:?}");
    }

    #[test]
    fn an_anchor_is_looked_up_in_its_own_resource_and_the_first_declared_is_taken() {
        // `#a` from the root is the root's own `a` (a string), not the nested resource's (a
        // DAG of 2^30); `#b` from the `#frag` subschema is the `b` inside it, not its
        // sibling's.
        let mut schema = super::super::tests::laughs(30);
        let mut nested = json!({"$id": "nested.json", "$defs": schema["$defs"].clone()});
        nested["$defs"]["a"] = json!({"$anchor": "a", "$ref": "#/$defs/a30"});
        schema["$defs"]["nested"] = nested;
        schema["$defs"]["mine"] = json!({"$anchor": "a", "type": "string"});
        schema["$defs"]["frag"] =
            json!({"$id": "#frag", "$defs": {"b": {"$anchor": "b", "type": "string"}}});
        schema["$defs"]["other"] = json!({"$anchor": "b", "$ref": "#/$defs/a30"});
        schema["properties"]["y"] = json!({"$ref": "#a"});
        schema["properties"]["z"] = json!({"$ref": "x/#b"});
        schema["properties"]["w"] = json!({"$ref": "nested.json#a"});
        let counted = CountedSchema::index(schema);
        let patterns = PatternCosts::default();
        let y = counted.weighed_evaluations(&json!({"y": "s"}), 1_000_000, &patterns);
        assert!(y.unwrap() < 10, "{y:?}");
        // `x/` names the subschema whose `$id` has an empty last segment: `#frag`.
        let z = counted.weighed_evaluations(&json!({"z": "s"}), 1_000_000, &patterns);
        assert!(z.unwrap() < 10, "{z:?}");
        // The nested resource's `a` is the DAG.
        assert_eq!(
            counted.weighed_evaluations(&json!({"w": "s"}), 1_000_000, &patterns),
            Err(TooCostly::Evaluations(1_000_000))
        );
        let root = counted.schema();
        let frag = &root["$defs"]["frag"];
        assert!(std::ptr::eq(
            counted.index.anchor(root, frag, "b").unwrap().unwrap(),
            &frag["$defs"]["b"]
        ));
        assert_eq!(counted.index.anchor(root, frag, "a"), Ok(None));
    }
}

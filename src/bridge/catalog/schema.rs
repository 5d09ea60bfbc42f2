//! Compiling a tool's inputSchema into a validator, once, at startup.
//!
//! One policy for every draft:
//! - the draft comes from a known `$schema` (draft-04, -06, -07, 2019-09, 2020-12, with or
//!   without `https`, trailing `#`); an unknown or missing `$schema` means 2020-12;
//! - `format` is an annotation, never asserted (servers write `format` loosely, and the
//!   2020-12 default is annotation-only; one rule for all drafts);
//! - `$ref`s resolve only inside the schema: nothing is fetched from the network or a file.
//!   A reference that cannot be resolved that way (a remote or `file:` URI, a relative one
//!   against a remote `$id`, a `#/...` pointer to nothing) keeps its tool: the subschema
//!   behind it accepts any value, everything else in the schema is still checked, and the
//!   catalog logs one warning naming the references ([`ArgsValidator::unchecked`]; test
//!   `a_schema_with_an_external_ref_keeps_its_tool_and_checks_the_rest`);
//! - a schema nested deeper than [`MAX_SCHEMA_DEPTH`], or one the validator cannot compile,
//!   leaves its tool out with a warning (test `a_schema_too_deep_to_check_is_left_out_not_fatal`);
//! - arguments the schema does not name are refused unless it says `additionalProperties`
//!   (true or a schema) or `patternProperties`/`unevaluatedProperties` allow them (README "How a call works", step 3);
//!   a schema that names no properties at all (`{"type": "object"}`, `{}`, a tool with no
//!   inputSchema) accepts any object, as JSON Schema says; `"properties": {}` names none.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use jsonschema::{PatternCache, Validator};

use super::offline::{AcceptAnything, build, draft_of, taken};
use serde_json::Value;

/// Deepest JSON nesting of a schema that is compiled.
pub(super) const MAX_SCHEMA_DEPTH: usize = 64;
/// Errors listed in one refusal before it says how many more.
const MAX_LISTED_ERRORS: usize = 3;
/// Most work one check may take: (subschema, argument node) evaluations plus each regular
/// expression match weighed by its string ([`super::cost`]); above it the call is refused
/// unchecked. About 0.1 s of CPU in a release build.
pub(crate) const MAX_CHECK_EVALUATIONS: u64 = 1_000_000;
/// A refused argument whose check takes at most this many evaluations lists up to
/// [`MAX_LISTED_ERRORS`] errors (the validator collects every error first, one per failing
/// evaluation, in memory).
const LISTING_EVALUATIONS: u64 = 10_000;
/// Above [`LISTING_EVALUATIONS`] and up to this, a refused argument is described by its first
/// error (the validator stops at the first failing `allOf` branch, but collects every error
/// of a failing `anyOf`/`oneOf`); above it, the refusal says only that they do not fit, so
/// describing never costs memory in proportion to a large check.
const DESCRIBED_EVALUATIONS: u64 = 50_000;

/// Why [`ArgsValidator::check`] refused arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckError {
    /// They do not fit the schema: a short, bounded reason.
    Outside(String),
    /// Checking them would cost more than [`MAX_CHECK_EVALUATIONS`] evaluations, or loops.
    TooCostly(String),
}

/// A compiled inputSchema.
pub struct ArgsValidator {
    validator: Validator,
    /// The schema as compiled, indexed once for counting a check's work ([`super::cost`]).
    schema: super::cost::CountedSchema,
    /// What matching each of its regular expressions costs ([`super::cost::PatternCosts`]).
    patterns: super::cost::PatternCosts,
    named: Option<HashSet<String>>,
    unchecked: Vec<String>,
    /// The schema's bytes as JSON when a small check of it may run on the async runtime
    /// ([`super::cost::CountedSchema::inline_safe`]); `None` when every check runs off it.
    inline_bytes: Option<usize>,
}

/// Longest reference quoted in [`ArgsValidator::unchecked`], in characters.
const MAX_QUOTED_REF_CHARS: usize = 120;
/// References listed in [`ArgsValidator::unchecked`] at most.
const MAX_LISTED_REFS: usize = 5;

/// Why a schema could not be compiled (the tool is left out).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SchemaError {
    /// Deeper than [`MAX_SCHEMA_DEPTH`].
    #[error(
        "its inputSchema is nested more than {MAX_SCHEMA_DEPTH} levels deep, too deep to check"
    )]
    TooDeep,
    /// The inputSchema is not an object or boolean.
    #[error("its inputSchema is not a JSON Schema object")]
    NotASchema,
    /// No object can pass it (`false`, `{"type": "string"}`: [`super::no_object`]), and a
    /// tool's arguments are always an object, so no call of the tool could go out.
    #[error(
        "its inputSchema accepts no object ({0}), and a tool's arguments are always an object: no call could pass"
    )]
    NoObject(String),
    /// The validator refused it (bad keyword values, unresolvable `$ref`).
    #[error("its inputSchema cannot be compiled: {0}")]
    Invalid(String),
}

/// JSON nesting depth of `value` (a scalar is 0), computed without recursion.
pub(super) fn depth(value: &Value) -> usize {
    let mut max = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, d + 1))),
            Value::Object(map) => stack.extend(map.values().map(|i| (i, d + 1))),
            _ => {}
        }
    }
    max
}

impl ArgsValidator {
    /// Compile `schema`.
    ///
    /// # Errors
    /// [`SchemaError`] when the schema is too deep, not a schema, or not compilable offline.
    pub fn compile(schema: &Value) -> Result<Self, SchemaError> {
        let costs = super::cost::PatternCosts::of(schema);
        Self::compile_with(schema, &PatternCache::new(), costs)
    }

    /// [`Self::compile`], its regular expressions taken from `patterns` when another build
    /// given that cache compiled them already, and added to it otherwise (the catalog shares
    /// one per build: `super::patterns`), and what matching each costs given as `costs` (the
    /// catalog weighs each distinct pattern once per build).
    ///
    /// # Errors
    /// As [`Self::compile`].
    pub(crate) fn compile_with(
        schema: &Value,
        patterns: &PatternCache,
        costs: super::cost::PatternCosts,
    ) -> Result<Self, SchemaError> {
        if depth(schema) > MAX_SCHEMA_DEPTH {
            return Err(SchemaError::TooDeep);
        }
        if !matches!(schema, Value::Object(_) | Value::Bool(_)) {
            return Err(SchemaError::NotASchema);
        }
        if let Some(why) = super::no_object::refuses_every_object(schema) {
            return Err(SchemaError::NoObject(why));
        }
        let draft = draft_of(schema);
        let mut prepared = schema.clone();
        if let Value::Object(map) = &mut prepared {
            // The draft is chosen above; an unknown meta-schema URI must not be fetched.
            map.remove("$schema");
        }
        let validator = build(draft, &prepared, None, patterns);
        let (validator, unchecked) = match validator {
            Ok(v) => (v, Vec::new()),
            Err(first) => {
                // References that cannot be resolved inside the schema: the part behind them
                // accepts anything, the rest is still checked. Nothing is fetched.
                let seen = Arc::new(Mutex::new(Vec::new()));
                let retriever = AcceptAnything {
                    asked: seen.clone(),
                };
                match build(draft, &prepared, Some(retriever), patterns) {
                    Ok(v) => (v, taken(&seen)),
                    Err(_) => {
                        let mut dropped = Vec::new();
                        let root = prepared.clone();
                        drop_unresolvable_refs(&mut prepared, &root, &mut dropped);
                        if dropped.is_empty() {
                            return Err(first);
                        }
                        let retriever = AcceptAnything {
                            asked: seen.clone(),
                        };
                        let v = build(draft, &prepared, Some(retriever), patterns)
                            .map_err(|_| first)?;
                        let mut all = dropped;
                        all.extend(taken(&seen));
                        (v, all)
                    }
                }
            }
        };
        let mut unchecked: Vec<String> = unchecked
            .into_iter()
            .map(|r| crate::bridge::refusal::cap(&r, MAX_QUOTED_REF_CHARS))
            .collect();
        unchecked.sort();
        unchecked.dedup();
        let prepared = super::cost::CountedSchema::index(prepared);
        let inline_bytes = prepared
            .inline_safe()
            .then(|| serde_json::to_vec(prepared.schema()).map_or(usize::MAX, |v| v.len()));
        Ok(Self {
            validator,
            patterns: costs,
            schema: prepared,
            named: named_only(schema),
            unchecked,
            inline_bytes,
        })
    }

    /// The references of the schema that could not be resolved inside it (at most
    /// [`MAX_LISTED_REFS`], each cut to [`MAX_QUOTED_REF_CHARS`]): the values they stand for
    /// are not checked. Empty for a fully checked schema.
    pub fn unchecked(&self) -> &[String] {
        &self.unchecked[..self.unchecked.len().min(MAX_LISTED_REFS)]
    }

    /// Check `args`: first the work it takes is counted ([`super::cost`]) and
    /// more than [`MAX_CHECK_EVALUATIONS`] refuses them unchecked; then the validator's
    /// short-circuiting `is_valid`; only a refused argument is described, by its first error
    /// (or up to [`MAX_LISTED_ERRORS`] when the check is small), so memory never grows with
    /// the number of errors.
    ///
    /// # Errors
    /// [`CheckError`] with a short, bounded reason.
    pub fn check(&self, args: &Value) -> Result<(), CheckError> {
        self.check_names(args)?;
        let work = match self.schema.weighed_evaluations(
            args,
            MAX_CHECK_EVALUATIONS,
            &self.patterns,
        ) {
            Ok(work) => work,
            Err(super::cost::TooCostly::Evaluations(limit)) => {
                return Err(CheckError::TooCostly(format!(
                    "checking them would take more than {limit} evaluations (the schema's $refs repeat subschemas, its patterns are matched against long strings, its unevaluated* keywords walk nested branches again, or its enums are compared value by value); the call was not sent"
                )));
            }
            Err(super::cost::TooCostly::Loops) => {
                return Err(CheckError::TooCostly(format!(
                    "the schema's $refs loop without moving into the arguments, or nest more than {} deep; the call was not sent",
                    super::cost::MAX_NESTING
                )));
            }
            Err(super::cost::TooCostly::Unplaced) => {
                return Err(CheckError::TooCostly(
                    "a $ref of the schema could name more than one of its resources, so the work of checking them cannot be counted; the call was not sent".into(),
                ));
            }
        };
        self.validate(args, work)
    }

    /// [`Self::check`], when it is small enough to run on the async runtime: the schema is
    /// [`super::cost::CountedSchema::inline_safe`] and checking `args` (`args_bytes` as JSON) takes at most
    /// [`super::cost::inline_evaluations`] evaluations. `None` when it is not (the check then
    /// runs off the runtime, check.rs); counting that costs at most that many steps.
    pub(crate) fn check_inline(
        &self,
        args: &Value,
        args_bytes: usize,
    ) -> Option<Result<(), CheckError>> {
        let schema_bytes = self.inline_bytes?;
        let limit = super::cost::inline_evaluations(schema_bytes, args_bytes);
        if limit == 0 {
            return None;
        }
        if let Err(refused) = self.check_names(args) {
            return Some(Err(refused));
        }
        let work = self
            .schema
            .weighed_evaluations(args, limit, &self.patterns)
            .ok()?;
        Some(self.validate(args, work))
    }

    /// The arguments are an object and, when the schema allows only the properties it
    /// names, name no others.
    fn check_names(&self, args: &Value) -> Result<(), CheckError> {
        let outside = |why: String| Err(CheckError::Outside(why));
        let Value::Object(map) = args else {
            return outside("the arguments must be an object".into());
        };
        if let Some(named) = &self.named {
            let unnamed: Vec<&str> = map
                .keys()
                .filter(|k| !named.contains(k.as_str()))
                .map(String::as_str)
                .collect();
            if !unnamed.is_empty() {
                return outside(format!(
                    "arguments the schema does not name: {}",
                    unnamed
                        .iter()
                        .take(MAX_LISTED_ERRORS)
                        .map(|k| pyjson_str(k))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        Ok(())
    }

    /// Validate `args`, whose check counts `work` evaluations: the validator's
    /// short-circuiting `is_valid`, and only for refused arguments a description.
    fn validate(&self, args: &Value, work: u64) -> Result<(), CheckError> {
        let outside = |why: String| Err(CheckError::Outside(why));
        if self.validator.is_valid(args) {
            return Ok(());
        }
        let describe = |e: jsonschema::ValidationError<'_>| {
            let path = e.instance_path().to_string();
            let place = if path.is_empty() {
                "arguments".to_owned()
            } else {
                path
            };
            format!(
                "{place}: {}",
                crate::bridge::refusal::cap(&e.to_string(), 120)
            )
        };
        let errors: Vec<String> = if work <= LISTING_EVALUATIONS {
            self.validator
                .iter_errors(args)
                .take(MAX_LISTED_ERRORS + 1)
                .map(describe)
                .collect()
        } else if work <= DESCRIBED_EVALUATIONS {
            self.validator
                .validate(args)
                .err()
                .map(describe)
                .into_iter()
                .collect()
        } else {
            Vec::new()
        };
        if errors.is_empty() {
            return outside(format!(
                "they do not fit it (a check of {work} evaluations is not described further)"
            ));
        }
        let mut text = errors
            .iter()
            .take(MAX_LISTED_ERRORS)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ");
        if errors.len() > MAX_LISTED_ERRORS {
            text.push_str("; …");
        }
        outside(text)
    }
}

fn pyjson_str(s: &str) -> String {
    crate::pyjson::to_string(&Value::String(s.chars().take(64).collect()))
}

/// The property names when the schema allows no others, or `None` when it allows any.
fn named_only(schema: &Value) -> Option<HashSet<String>> {
    let Value::Object(map) = schema else {
        return None;
    };
    let allows_more = match map.get("additionalProperties") {
        Some(Value::Bool(false)) | None => false,
        Some(_) => true,
    };
    if allows_more
        || map.contains_key("patternProperties")
        || map.contains_key("unevaluatedProperties")
        || map.contains_key("$ref")
        || ["anyOf", "oneOf", "allOf", "if", "dependentSchemas"]
            .iter()
            .any(|k| map.contains_key(*k))
    {
        // The schema itself decides through its composition; the validator enforces it.
        return None;
    }
    // A schema that names no properties says nothing about them: any object is accepted
    // (unless `additionalProperties: false` says none is).
    match map.get("properties").and_then(Value::as_object) {
        Some(properties) => Some(properties.keys().cloned().collect()),
        None if map.get("additionalProperties") == Some(&Value::Bool(false)) => {
            Some(HashSet::new())
        }
        None => None,
    }
}

/// Remove from `schema` every `$ref` that is not a `#` pointer resolving inside `root`
/// (an external URI whose fragment points into a document we do not have, a pointer to
/// nothing), noting each in `dropped`. Iterative: schemas are already depth-bounded.
fn drop_unresolvable_refs(schema: &mut Value, root: &Value, dropped: &mut Vec<String>) {
    let mut stack = vec![schema];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref")
                    && !resolves_locally(r, root)
                {
                    dropped.push(r.clone());
                    map.remove("$ref");
                }
                stack.extend(map.values_mut());
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            _ => {}
        }
    }
}

/// Whether `reference` is `#`, a `#/json/pointer` that exists in `root`, or a `#name` that a
/// `$anchor` in `root` declares.
fn resolves_locally(reference: &str, root: &Value) -> bool {
    let Some(fragment) = reference.strip_prefix('#') else {
        return false;
    };
    if fragment.is_empty() {
        return true;
    }
    if fragment.starts_with('/') {
        let decoded = percent_decode(fragment);
        return root.pointer(&decoded).is_some();
    }
    let mut stack = vec![root];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => {
                if map.get("$anchor").and_then(Value::as_str) == Some(fragment) {
                    return true;
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items.iter()),
            _ => {}
        }
    }
    false
}

/// `%XX` escapes of a URI fragment decoded (RFC 3986 section 2.1); invalid ones kept.
pub(super) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn add() -> ArgsValidator {
        ArgsValidator::compile(&json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]})).unwrap()
    }

    #[test]
    fn arguments_outside_the_schema_are_refused() {
        let v = add();
        assert!(v.check(&json!({"a": 1, "b": 2})).is_ok());
        assert!(v.check(&json!({"a": "x", "b": 1})).is_err());
        assert!(v.check(&json!({"a": 1})).is_err());
        let e = v.check(&json!({"a": 1, "b": 2, "c": 3})).unwrap_err();
        assert!(
            matches!(&e, CheckError::Outside(why) if why.contains("\"c\"")),
            "{e:?}"
        );
        assert!(v.check(&json!([1, 2])).is_err());
    }

    #[test]
    fn schemas_that_allow_more_accept_more() {
        let v =
            ArgsValidator::compile(&json!({"properties": {"a": {}}, "additionalProperties": true}))
                .unwrap();
        assert!(v.check(&json!({"a": 1, "zzz": 2})).is_ok());
        // No properties named at all: any object.
        for schema in [json!({}), json!({"type": "object"})] {
            let v = ArgsValidator::compile(&schema).unwrap();
            assert!(v.check(&json!({})).is_ok(), "{schema}");
            assert!(v.check(&json!({"x": 1, "y": [2]})).is_ok(), "{schema}");
            assert!(v.check(&json!([1])).is_err(), "{schema}");
        }
        // Named as none, or closed: no argument.
        for schema in [
            json!({"type": "object", "properties": {}}),
            json!({"type": "object", "additionalProperties": false}),
        ] {
            let v = ArgsValidator::compile(&schema).unwrap();
            assert!(v.check(&json!({})).is_ok(), "{schema}");
            assert!(v.check(&json!({"x": 1})).is_err(), "{schema}");
        }
    }

    #[test]
    fn a_schema_no_object_can_pass_is_refused_naming_why() {
        for schema in [
            json!({"type": "string"}),
            json!({"not": {}}),
            json!({"type": "null"}),
        ] {
            let refused = ArgsValidator::compile(&schema).err();
            assert!(
                matches!(refused, Some(SchemaError::NoObject(_))),
                "{schema}"
            );
        }
        assert!(ArgsValidator::compile(&json!({"type": ["object", "null"]})).is_ok());
    }

    #[test]
    fn a_schema_too_deep_is_refused() {
        let mut s = json!({"type": "string"});
        for _ in 0..100 {
            s = json!({"type": "object", "properties": {"x": s}});
        }
        assert_eq!(ArgsValidator::compile(&s).err(), Some(SchemaError::TooDeep));
        assert!(depth(&s) > MAX_SCHEMA_DEPTH);
    }

    #[test]
    fn a_schema_with_an_external_ref_keeps_its_tool_and_checks_the_rest() {
        // A listener on 127.0.0.1 would see a fetch; none may happen.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        for r in [
            format!("http://127.0.0.1:{port}/x.json"),
            format!("http://127.0.0.1:{port}/x.json#/$defs/n"),
            "file:///etc/passwd".to_owned(),
            "https://example.com/s".to_owned(),
            "#/$defs/missing".to_owned(),
            "other.json".to_owned(),
        ] {
            let schema = json!({
                "$id": format!("http://127.0.0.1:{port}/root.json"),
                "type": "object",
                "properties": {"n": {"$ref": r}, "k": {"type": "integer"}},
                "required": ["k"]
            });
            let v = ArgsValidator::compile(&schema).unwrap_or_else(|e| panic!("{r}: {e:?}"));
            assert!(!v.unchecked().is_empty(), "{r}: the warning names it");
            // The part behind the reference accepts anything; the rest is checked.
            assert!(v.check(&json!({"k": 1, "n": ["anything"]})).is_ok(), "{r}");
            assert!(v.check(&json!({"k": "x"})).is_err(), "{r}");
            assert!(v.check(&json!({"n": 1})).is_err(), "{r}: required");
            assert!(v.check(&json!({"k": 1, "zzz": 1})).is_err(), "{r}: unnamed");
        }
        assert!(listener.accept().is_err(), "something was fetched");
        // A fully resolvable schema has nothing unchecked.
        assert!(add().unchecked().is_empty());
        let local = json!({"$defs": {"n": {"type": "integer"}, "a b": {"type": "string"}}, "properties": {"n": {"$ref": "#/$defs/n"}, "s": {"$ref": "#/$defs/a%20b"}}});
        let v = ArgsValidator::compile(&local).unwrap();
        assert!(v.unchecked().is_empty());
        assert!(v.check(&json!({"n": "x"})).is_err());
        assert!(v.check(&json!({"s": 1})).is_err());
    }

    #[test]
    fn drafts_and_unknown_schema_uris_compile() {
        for uri in [
            "http://json-schema.org/draft-07/schema#",
            "https://json-schema.org/draft/2020-12/schema",
            "http://json-schema.org/draft-04/schema#",
            "urn:example:unknown",
        ] {
            let v = ArgsValidator::compile(&json!({"$schema": uri, "properties": {"a": {"type": "integer", "format": "weird"}}})).unwrap();
            assert!(v.check(&json!({"a": 1})).is_ok());
            assert!(v.check(&json!({"a": "x"})).is_err());
        }
    }

    fn bytes(v: &Value) -> usize {
        serde_json::to_vec(v).unwrap().len()
    }

    #[test]
    fn only_a_small_check_of_a_plain_schema_runs_on_the_runtime() {
        // An ordinary tool, and properties merely named like keywords.
        for (schema, args) in [
            (
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
                json!({"text": "x"}),
            ),
            (
                json!({"properties": {"pattern": {"type": "string"}, "id": {"type": "integer", "format": "int32"}}}),
                json!({"pattern": "(a+)+$", "id": 1}),
            ),
        ] {
            let v = ArgsValidator::compile(&schema).unwrap();
            assert_eq!(
                v.check_inline(&args, bytes(&args)),
                Some(Ok(())),
                "{schema}"
            );
            let wrong = json!({"text": 1, "id": "x"});
            assert!(
                matches!(
                    v.check_inline(&wrong, bytes(&wrong)),
                    Some(Err(CheckError::Outside(_)))
                ),
                "{schema}"
            );
        }
        // A regular expression can backtrack, `uniqueItems` compares every pair, the others
        // evaluate what the count does not follow: never on the runtime, however small.
        for schema in [
            json!({"properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}),
            json!({"patternProperties": {"^(a+)+$": {}}}),
            json!({"properties": {"s": {"type": "object", "propertyNames": {"pattern": "^(a|a)*$"}}}}),
            json!({"properties": {"s": {"uniqueItems": true}}}),
            json!({"properties": {"s": {}}, "unevaluatedProperties": false}),
            json!({"$dynamicAnchor": "n", "properties": {"s": {"$dynamicRef": "#n"}}}),
            json!({"properties": {"s": {"contentMediaType": "application/json", "contentSchema": {"type": "object"}}}}),
            json!({"$defs": {"n": {"$id": "http://e.com/n", "$defs": {"x": {"type": "string"}}, "$ref": "#/$defs/x"}}, "properties": {"s": {"$ref": "http://e.com/n"}}}),
            json!({"properties": {"s": {"$ref": "https://example.com/other.json"}}}),
        ] {
            let v = ArgsValidator::compile(&schema).unwrap_or_else(|e| panic!("{schema}: {e:?}"));
            let args = json!({"s": "aaaa"});
            assert_eq!(v.check_inline(&args, bytes(&args)), None, "{schema}");
        }
        // A DAG of $refs (each level `allOf` twice the level below): plain keywords, but
        // 2^13 evaluations for one string, over what runs on the runtime.
        let mut defs = serde_json::Map::new();
        defs.insert("a0".into(), json!({"type": "string"}));
        for i in 1..=12 {
            let below = format!("#/$defs/a{}", i - 1);
            defs.insert(
                format!("a{i}"),
                json!({"allOf": [{"$ref": below}, {"$ref": below}]}),
            );
        }
        let dag = json!({"$defs": defs, "properties": {"x": {"$ref": "#/$defs/a12"}}});
        let v = ArgsValidator::compile(&dag).unwrap();
        let args = json!({"x": "s"});
        assert_eq!(v.check_inline(&args, bytes(&args)), None);
        assert_eq!(v.check(&args), Ok(()));
        assert_eq!(v.check_inline(&json!({}), 2), Some(Ok(())));
        // A large argument takes even a plain check off the runtime.
        let v = add();
        assert_eq!(v.check_inline(&json!({"a": 1, "b": 2}), 300_000), None);
    }

    #[test]
    fn recursive_refs_validate() {
        let s = json!({
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}}}},
            "type": "object", "properties": {"head": {"$ref": "#/$defs/node"}}
        });
        let v = ArgsValidator::compile(&s).unwrap();
        assert!(
            v.check(&json!({"head": {"v": 1, "next": {"v": 2}}}))
                .is_ok()
        );
        assert!(
            v.check(&json!({"head": {"v": 1, "next": {"v": "x"}}}))
                .is_err()
        );
    }

    #[test]
    fn a_backtracking_pattern_stops_at_its_step_limit() {
        // `(?=b)b` tries every start position, one backtracking step each, before it finds
        // the `b` at the end: past the limit the match stops and the string is refused.
        let v =
            ArgsValidator::compile(&json!({"properties": {"s": {"pattern": "(?=b)b"}}})).unwrap();
        let within = format!("{}b", "a".repeat(super::super::cost::BACKTRACK_LIMIT / 2));
        assert!(v.validator.is_valid(&json!({ "s": within })));
        let past = format!("{}b", "a".repeat(super::super::cost::BACKTRACK_LIMIT * 2));
        assert!(!v.validator.is_valid(&json!({ "s": past })));
    }
}

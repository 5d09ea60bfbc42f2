//! How a tool's inputSchema is handed to the validator: which draft, formats as annotations,
//! the pattern engine and its limits, compiled regular expressions shared, nothing fetched.

use std::sync::{Arc, Mutex};

use jsonschema::{Draft, PatternCache, Retrieve, Uri, Validator};
use serde_json::Value;

use super::schema::SchemaError;

/// The draft `schema` names in `$schema` (with or without `https`, a trailing `#`); an
/// unknown or missing one means 2020-12.
pub(super) fn draft_of(schema: &Value) -> Draft {
    let uri = schema.get("$schema").and_then(Value::as_str).unwrap_or("");
    let uri = uri
        .trim_end_matches('#')
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    match uri {
        "json-schema.org/draft-04/schema" => Draft::Draft4,
        "json-schema.org/draft-06/schema" => Draft::Draft6,
        "json-schema.org/draft-07/schema" => Draft::Draft7,
        "json-schema.org/draft/2019-09/schema" => Draft::Draft201909,
        _ => Draft::Draft202012,
    }
}

/// Compile `schema` offline, its regular expressions shared through `patterns`; with
/// `retriever`, a reference outside it resolves to a schema that accepts anything instead of
/// failing.
pub(super) fn build(
    draft: Draft,
    schema: &Value,
    retriever: Option<AcceptAnything>,
    patterns: &PatternCache,
) -> Result<Validator, SchemaError> {
    // A pattern on the backtracking engine stops after a bounded number of steps (cost.rs
    // weighs each match by that bound); one whose automaton would pass the per-pattern limit
    // fails to compile (the catalog weighs patterns before, patterns.rs, and says why).
    let options = jsonschema::options()
        .with_draft(draft)
        .should_validate_formats(false)
        .with_pattern_options(
            jsonschema::PatternOptions::fancy_regex()
                .backtrack_limit(super::cost::BACKTRACK_LIMIT)
                .size_limit(super::patterns::MAX_PATTERN_AUTOMATON_BYTES),
        )
        .with_pattern_cache(patterns.clone());
    let options = match retriever {
        Some(r) => options.with_retriever(r),
        None => options.offline(),
    };
    options
        .build(schema)
        .map_err(|e| SchemaError::Invalid(crate::bridge::refusal::cap(&e.to_string(), 200)))
}

/// A retriever that fetches nothing: every URI it is asked for is noted and stands for a
/// schema that accepts any value.
pub(super) struct AcceptAnything {
    /// The URIs asked for (at most 64).
    pub(super) asked: Arc<Mutex<Vec<String>>>,
}

impl Retrieve for AcceptAnything {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        if let Ok(mut asked) = self.asked.lock()
            && asked.len() < 64
        {
            asked.push(uri.as_str().to_owned());
        }
        Ok(Value::Object(serde_json::Map::new()))
    }
}

/// The URIs noted so far, taken out.
pub(super) fn taken(seen: &Mutex<Vec<String>>) -> Vec<String> {
    seen.lock()
        .map(|mut v| std::mem::take(&mut *v))
        .unwrap_or_default()
}

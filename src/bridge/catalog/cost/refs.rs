//! Where a reference leads, for the count: the subschema the validator evaluates in its place
//! and the resource (the nearest subschema with its own `$id`) that subschema belongs to.
//!
//! JSON Schema resolves a reference against the resource it appears in: `#/...` pointers and
//! `#name` anchors look inside the current resource only, and `other.json#name` looks for the
//! anchor inside the resource `other.json` names (anchors are per resource, so many resources
//! may each declare `name`). A base names a resource by its `$id`, matched whole or by its last
//! path segment (`L1.json` names `https://ex.com/L1.json`). A base more than one resource
//! could stand for is [`TooCostly::Unplaced`]: the count cannot tell which the validator
//! takes, so it does not guess a cheap one.

use serde_json::Value;

use super::{Counter, TooCostly};

/// Where a reference leads: the subschema and its resource.
pub(super) type Target<'s> = (&'s Value, &'s Value);

/// Whether `schema` starts a resource of its own (a `$id` that is not only a fragment).
pub(super) fn is_resource(schema: &Value) -> bool {
    schema
        .get("$id")
        .and_then(Value::as_str)
        .is_some_and(|id| !id.starts_with('#'))
}

impl<'s> Counter<'s> {
    /// The subschema `reference` (the value of `keyword`) names, seen from the current
    /// resource; `Ok(None)` when it names nothing inside the schema (the validator accepts
    /// anything there, or left the tool out).
    pub(super) fn resolve(
        &self,
        keyword: &str,
        reference: &str,
    ) -> Result<Option<Target<'s>>, TooCostly> {
        let (base, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        let document = if base.is_empty() {
            self.resource
        } else {
            match self.index.named(self.root, base)? {
                Some(document) => document,
                None => return Ok(None),
            }
        };
        if fragment.is_empty() {
            return Ok(Some((document, document)));
        }
        if fragment.starts_with('/') {
            return Ok(pointer(
                document,
                &super::super::schema::percent_decode(fragment),
            ));
        }
        if let Some(found) = self.index.anchor(self.root, document, fragment)? {
            return Ok(Some((found, document)));
        }
        // A dynamic reference resolves through the resources the evaluation passed: any
        // resource of the schema may declare the anchor it lands on.
        if keyword != "$ref"
            && let Some(found) = self.index.anywhere(self.root, fragment)?
        {
            return Ok(Some(found));
        }
        Ok(None)
    }
}

/// The JSON pointer `pointer` (decoded) inside `document`, and the resource it lands in: the
/// last subschema with its own `$id` on the way (`document` itself when none).
fn pointer<'s>(document: &'s Value, pointer: &str) -> Option<Target<'s>> {
    let mut at = document;
    let mut resource = document;
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        at = match at {
            Value::Object(map) => map.get(&token)?,
            Value::Array(items) => items.get(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
        if is_resource(at) {
            resource = at;
        }
    }
    Some((at, resource))
}

#[cfg(test)]
mod tests {
    use super::super::{PatternCosts, weighed_evaluations};
    use super::*;
    use serde_json::json;
    use testkit::schemas::anchor_chain;

    #[test]
    fn an_anchor_reference_across_resources_is_counted_along_the_path_the_validator_takes() {
        let count = |depth: usize| {
            weighed_evaluations(
                &anchor_chain(depth),
                &json!({"x": 1}),
                1_000_000,
                &PatternCosts::default(),
            )
        };
        let eight = count(8).unwrap();
        assert!(eight > 1 << 8, "{eight}");
        assert!(count(10).unwrap() > 3 * eight, "{eight}");
        assert_eq!(count(22), Err(TooCostly::Evaluations(1_000_000)));
    }

    #[test]
    fn a_pointer_is_resolved_inside_the_resource_it_appears_in() {
        // Inside `inner.json`, `#/$defs/s` is inner's `s` (a string), not the root's (a
        // DAG of 2^30).
        let mut schema = super::super::tests::laughs(30);
        schema["$defs"]["s"] = json!({"$ref": "#/$defs/a30"});
        schema["properties"]["y"] =
            json!({"$id": "inner.json", "$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s"});
        let n = weighed_evaluations(
            &schema,
            &json!({"y": "s"}),
            1_000_000,
            &PatternCosts::default(),
        );
        assert!(n.unwrap() < 10);
    }

    #[test]
    fn a_reference_naming_more_than_one_resource_is_not_counted_as_cheap() {
        let schema = json!({"$defs": {
            "a": {"$id": "https://a.example/item.json", "type": "string"},
            "b": {"$id": "https://b.example/item.json", "type": "string"}},
            "properties": {"x": {"$ref": "item.json"}}});
        assert_eq!(
            weighed_evaluations(
                &schema,
                &json!({"x": "s"}),
                1_000_000,
                &PatternCosts::default()
            ),
            Err(TooCostly::Unplaced)
        );
        // Named whole, it is one resource.
        let mut whole = schema.clone();
        whole["properties"]["x"]["$ref"] = json!("https://a.example/item.json");
        assert!(
            weighed_evaluations(
                &whole,
                &json!({"x": "s"}),
                1_000_000,
                &PatternCosts::default()
            )
            .unwrap()
                < 10
        );
    }
}

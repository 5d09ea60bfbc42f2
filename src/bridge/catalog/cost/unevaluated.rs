//! What `unevaluatedProperties` and `unevaluatedItems` cost on top of their own subschema.
//!
//! To learn which properties (items) the rest of the schema evaluated, the validator walks the
//! subschemas that apply in place (`$ref`, `allOf`, `anyOf`, `oneOf`, `if`/`then`/`else`,
//! `dependentSchemas`) again, and validates each `allOf`/`anyOf`/`oneOf` branch and each `if`
//! once more to see whether it applied; a nested `unevaluated*` validates its properties
//! (items) again, and `contains` each item. Every such validation contains the nested
//! `unevaluated*` work in turn, so a chain of `anyOf`s each with `unevaluatedProperties` costs
//! 2^depth. [`Counter::marking`] counts that walk: one evaluation per subschema walked plus
//! every validation it repeats, memoized per (subschema, argument node) like the count itself
//! (the validator walks a reference cycle once: so does this).

use serde_json::Value;

use super::{Counter, TooCostly, key};

impl<'s> Counter<'s> {
    /// The work of the validator's walk, for an `unevaluated*` keyword of `schema`, of what
    /// `schema` evaluates at `instance` (an object or an array).
    pub(super) fn marking(
        &mut self,
        schema: &'s Value,
        instance: &Value,
    ) -> Result<u64, TooCostly> {
        let Value::Object(map) = schema else {
            return Ok(0);
        };
        let pair = key(schema, instance);
        if let Some(&n) = self.marked.get(&pair) {
            return Ok(n);
        }
        if !self.marking.insert(pair) {
            return Ok(0);
        }
        self.depth += 1;
        let outer = self.resource;
        if super::refs::is_resource(schema) {
            self.resource = schema;
        }
        let counted = if self.depth > super::MAX_NESTING {
            Err(TooCostly::Loops)
        } else {
            self.marking_of(map, instance)
        };
        self.resource = outer;
        self.depth -= 1;
        self.marking.remove(&pair);
        let n = counted?;
        self.marked.insert(pair, n);
        Ok(n)
    }

    fn marking_of(
        &mut self,
        map: &'s serde_json::Map<String, Value>,
        instance: &Value,
    ) -> Result<u64, TooCostly> {
        let mut total = 1u64;
        for keyword in ["$ref", "$dynamicRef", "$recursiveRef"] {
            if let Some(Value::String(reference)) = map.get(keyword)
                && let Some((target, resource)) = self.resolve(keyword, reference)?
            {
                let outer = std::mem::replace(&mut self.resource, resource);
                let n = self.marking(target, instance);
                self.resource = outer;
                total = self.add(total, n?)?;
            }
        }
        // Each branch validated again to see whether it applied, then walked.
        let mut branches: Vec<&'s Value> = Vec::new();
        for keyword in ["allOf", "anyOf", "oneOf"] {
            if let Some(Value::Array(items)) = map.get(keyword) {
                branches.extend(items);
            }
        }
        branches.extend(map.get("if"));
        for branch in branches {
            let n = self.count(branch, instance)?;
            total = self.add(total, n)?;
            let n = self.marking(branch, instance)?;
            total = self.add(total, n)?;
        }
        let mut walked: Vec<&'s Value> = ["then", "else"]
            .iter()
            .filter_map(|k| map.get(*k))
            .collect();
        match instance {
            Value::Object(object) => {
                for keyword in ["dependentSchemas", "dependencies"] {
                    if let Some(Value::Object(deps)) = map.get(keyword) {
                        walked.extend(deps.values());
                    }
                }
                if let Some(sub) = map.get("unevaluatedProperties") {
                    for value in object.values() {
                        let n = self.count(sub, value)?;
                        total = self.add(total, n)?;
                    }
                }
                if let Some(Value::Object(patterns)) = map.get("patternProperties") {
                    for pattern in patterns.keys() {
                        for name in object.keys() {
                            total = self.add(total, self.patterns.weight(pattern, name.len()))?;
                        }
                    }
                }
            }
            Value::Array(items) => {
                for keyword in ["contains", "unevaluatedItems"] {
                    if let Some(sub) = map.get(keyword) {
                        for item in items {
                            let n = self.count(sub, item)?;
                            total = self.add(total, n)?;
                        }
                    }
                }
            }
            _ => {}
        }
        for sub in walked {
            let n = self.marking(sub, instance)?;
            total = self.add(total, n)?;
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{PatternCosts, weighed_evaluations};
    use super::*;
    use serde_json::json;
    use testkit::schemas::unevaluated_chain;

    fn count(schema: &Value, args: &Value) -> Result<u64, TooCostly> {
        weighed_evaluations(schema, args, 1_000_000, &PatternCosts::default())
    }

    #[test]
    fn a_deep_chain_of_unevaluated_properties_under_any_of_is_too_costly_to_check() {
        let ten = count(&unevaluated_chain(10), &json!({"a": 1})).unwrap();
        let twelve = count(&unevaluated_chain(12), &json!({"a": 1})).unwrap();
        assert!(ten > 1 << 10, "{ten}");
        assert!(twelve > 3 * ten, "{ten} {twelve}");
        assert_eq!(
            count(&unevaluated_chain(18), &json!({"a": 1})),
            Err(TooCostly::Evaluations(1_000_000))
        );
    }

    #[test]
    fn unevaluated_items_under_a_chain_of_branches_is_weighed_on_arrays() {
        let mut defs = serde_json::Map::new();
        for k in 0..18 {
            defs.insert(
                format!("L{k}"),
                json!({"anyOf": [{"$ref": format!("#/$defs/L{}", k + 1)}, {"prefixItems": [true]}],
                    "unevaluatedItems": false}),
            );
        }
        defs.insert("L18".into(), json!({"prefixItems": [{"type": "integer"}]}));
        let schema = json!({"properties": {"a": {"$ref": "#/$defs/L0"}}, "$defs": defs});
        assert_eq!(
            count(&schema, &json!({"a": [1]})),
            Err(TooCostly::Evaluations(1_000_000))
        );
    }

    #[test]
    fn an_ordinary_unevaluated_properties_schema_costs_in_proportion_to_the_argument() {
        let schema = json!({"type": "object",
            "allOf": [{"properties": {"a": {"type": "integer"}}}, {"$ref": "#/$defs/b"}],
            "if": {"properties": {"kind": {"const": "x"}}}, "then": {"properties": {"x": {}}},
            "$defs": {"b": {"properties": {"b": {"type": "string"}, "kind": {}}}},
            "unevaluatedProperties": false});
        let n = count(&schema, &json!({"a": 1, "b": "s", "kind": "x", "x": 2})).unwrap();
        assert!(n < 100, "{n}");
        // A self-reference inside the walk is walked once, as the validator does.
        let cyclic = json!({"properties": {"c": {"$ref": "#"}}, "anyOf": [{"$ref": "#/$defs/d"}],
            "$defs": {"d": {"properties": {"d": {}}}}, "unevaluatedProperties": false});
        let mut arg = json!({"d": 1});
        for _ in 0..50 {
            arg = json!({"c": arg});
        }
        let n = count(&cyclic, &arg).unwrap();
        assert!(n < 5_000, "{n}");
    }
}

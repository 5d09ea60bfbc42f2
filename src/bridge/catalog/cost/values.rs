//! What comparing an argument node with an `enum`'s or a `const`'s values costs.
//!
//! The validator looks a string up in a hash set when every value is a string (or null), and
//! an integer up by binary search when every value is an integer (or null); otherwise it
//! compares the node with each value of the node's JSON type in turn, and one comparison walks
//! at most the smaller of the two values. So such an `enum` weighs, per evaluation, one unit
//! per value of the node's type plus the nodes compared ([`Shape::compared`]); a hashed or
//! searched one weighs 1.

use serde_json::Value;

/// How the validator compares a node with one `enum`'s (or `const`'s) values, found once per
/// schema when the catalog is built (super::index): looking an `enum` through again for each
/// argument node would cost more than the weight it adds, and each call in proportion to the
/// schema.
#[derive(Debug)]
pub(super) struct Shape {
    /// Every value a string or null: a string is looked up (hashed), anything else is not
    /// compared.
    hashed: bool,
    /// Every value an integer or null: an integer is looked up (binary search).
    searched: bool,
    /// Values that are not arrays or objects, by [`kind`].
    scalars: [u64; 4],
    /// The JSON nodes of each array value, and of each object value.
    arrays: Vec<u64>,
    objects: Vec<u64>,
}

/// `null`, `true`/`false`, numbers, strings: 0 to 3; arrays and objects: `None`.
fn kind(value: &Value) -> Option<usize> {
    match value {
        Value::Null => Some(0),
        Value::Bool(_) => Some(1),
        Value::Number(_) => Some(2),
        Value::String(_) => Some(3),
        Value::Array(_) | Value::Object(_) => None,
    }
}

impl Shape {
    /// The shape of `enum: values`, or of `const: values[0]` when `is_const`.
    pub(super) fn of(values: &[Value], is_const: bool) -> Self {
        Self::sized(values, is_const, |value| nodes(value, u64::MAX))
    }

    /// [`Shape::of`], with the JSON nodes of each array or object value told by `size` (the
    /// index counts them in its own walk of the schema).
    pub(super) fn sized(values: &[Value], is_const: bool, size: impl Fn(&Value) -> u64) -> Self {
        let lookup = !is_const && values.len() > 1;
        let mut shape = Shape {
            hashed: lookup
                && values
                    .iter()
                    .all(|v| matches!(v, Value::String(_) | Value::Null)),
            searched: lookup && values.iter().all(|v| v.is_null() || v.as_i64().is_some()),
            scalars: [0; 4],
            arrays: Vec::new(),
            objects: Vec::new(),
        };
        for value in values {
            match (kind(value), value) {
                (Some(k), _) => shape.scalars[k] += 1,
                (None, Value::Array(_)) => shape.arrays.push(size(value)),
                (None, _) => shape.objects.push(size(value)),
            }
        }
        shape
    }

    /// Work units of comparing `instance` with these values: 1 when it is looked up, else one
    /// per value of its JSON type plus, for an array or object, the nodes each comparison may
    /// walk (at most the smaller of the two values).
    pub(super) fn compared(&self, instance: &Value) -> u64 {
        if self.hashed || (self.searched && (instance.as_i64().is_some() || !instance.is_number()))
        {
            return 1;
        }
        let containers = match (kind(instance), instance) {
            (Some(k), _) => return self.scalars[k].max(1),
            (None, Value::Array(_)) => &self.arrays,
            (None, _) => &self.objects,
        };
        // Counting the argument's nodes stops at the largest value's: it never costs more
        // than the weight it adds.
        let Some(&largest) = containers.iter().max() else {
            return 1;
        };
        let own = nodes(instance, largest);
        containers.iter().fold(1u64, |units, &value| {
            units.saturating_add(1).saturating_add(value.min(own))
        })
    }
}

/// JSON nodes of `value`, counted up to `cap`.
fn nodes(value: &Value, cap: u64) -> u64 {
    let mut count = 0u64;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        #[cfg(test)]
        super::index::tests::walked(1);
        count += 1;
        if count >= cap {
            return cap;
        }
        match v {
            Value::Array(items) => stack.extend(items.iter()),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::super::{PatternCosts, TooCostly, weighed_evaluations};
    use super::*;
    use serde_json::json;

    fn count(schema: &Value, args: &Value) -> Result<u64, TooCostly> {
        weighed_evaluations(schema, args, 1_000_000, &PatternCosts::default())
    }

    #[test]
    fn a_large_enum_of_arrays_is_weighed_by_its_values() {
        let values: Vec<Value> = (0..1_000).map(|i| json!([i])).collect();
        let schema =
            json!({"properties": {"s": {"type": "array", "items": {"enum": values.clone()}}}});
        let one = count(&schema, &json!({"s": [[1]]})).unwrap();
        assert!(one > 1_000, "{one}");
        // The tester's argument: 4,000 small arrays against the enum.
        let many = json!({"s": vec![json!([1]); 4_000]});
        assert_eq!(
            count(&schema, &many),
            Err(TooCostly::Evaluations(1_000_000))
        );
        // A value of another type than the enum's is never compared.
        let strings = json!({"s": vec![json!("a"); 4_000]});
        assert!(count(&schema, &strings).unwrap() < 20_000);
    }

    #[test]
    fn string_and_integer_enums_are_looked_up_not_compared() {
        let strings: Vec<Value> = (0..100_000).map(|i| json!(format!("v{i}"))).collect();
        let integers: Vec<Value> = (0..100_000).map(|i| json!(i)).collect();
        for values in [strings, integers] {
            let schema = json!({"properties": {"s": {"items": {"enum": values}}}});
            let n = count(&schema, &json!({"s": vec![json!("v1"); 3_000]})).unwrap();
            assert!(n < 10_000, "{n}");
            let n = count(&schema, &json!({"s": vec![json!(7); 3_000]})).unwrap();
            assert!(n < 10_000, "{n}");
        }
        // A float against integers is compared with each.
        let integers: Vec<Value> = (0..1_000).map(|i| json!(i)).collect();
        let schema = json!({"properties": {"s": {"items": {"enum": integers}}}});
        assert_eq!(
            count(&schema, &json!({"s": vec![json!(1.5); 3_000]})),
            Err(TooCostly::Evaluations(1_000_000))
        );
    }

    #[test]
    fn a_comparison_walks_at_most_the_smaller_value() {
        let big = json!(vec![json!([1, 2, 3]); 1_000]);
        let one = Shape::of(std::slice::from_ref(&big), true);
        assert!(one.compared(&json!([1])) < 5);
        let n = one.compared(&big);
        assert!(n > 4_000, "{n}");
        let mixed = [json!(1), json!("a"), json!(2)];
        assert_eq!(Shape::of(&mixed, false).compared(&json!(true)), 1);
        assert_eq!(Shape::of(&mixed, false).compared(&json!(3)), 2);
    }
}

//! JSON parsing that refuses duplicate keys.
//!
//! RFC 8259 §4 leaves duplicate names undefined and common parsers keep the last one
//! silently; a config file with a server name twice must stop startup instead, so this
//! parser reports the first duplicate with its path (`mcpServers.notes`).

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The key under which serde_json's `arbitrary_precision` feature (Cargo.toml) hands a
/// visitor a number it does not read as an i64 or u64, as a one-entry map to its text.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Parse `text`, refusing any object with a key twice.
///
/// # Errors
/// A message with the line and column, or `duplicate key at PATH` for a repeated key.
pub(super) fn parse(text: &str) -> Result<Value, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Seed {
        path: String::new(),
    }
    .deserialize(&mut de)
    .map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(value)
}

struct Seed {
    path: String,
}

impl<'de> DeserializeSeed<'de> for Seed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Seed {
    fn child(&self, key: &str) -> Seed {
        let path = if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        };
        Seed { path }
    }
}

impl<'de> Visitor<'de> for Seed {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        let mut index = 0;
        while let Some(item) = seq.next_element_seed(self.child(&index.to_string()))? {
            items.push(item);
            index += 1;
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.is_empty() && key == NUMBER_TOKEN {
                // A number serde_json does not hand over as an i64 or u64 (a float, an
                // integer beyond 64 bits) comes as a map of this one key and its text.
                let text: String = map.next_value()?;
                return text
                    .parse::<serde_json::Number>()
                    .map(Value::Number)
                    .map_err(serde::de::Error::custom);
            }
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!(
                    "duplicate key at {}",
                    self.child(&key).path
                )));
            }
            let value = map.next_value_seed(self.child(&key))?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_refused_with_their_path() {
        let e = parse(r#"{"mcpServers": {"a": {}, "a": {}}}"#).unwrap_err();
        assert!(e.contains("duplicate key at mcpServers.a"), "{e}");
        let e = parse(r#"{"mcpServers": {"a": {"args": [], "args": []}}}"#).unwrap_err();
        assert!(e.contains("mcpServers.a.args"), "{e}");
    }

    #[test]
    fn ordinary_json_parses_in_order() {
        let v = parse(r#"{"b": 1, "a": [true, null, "x", 1.5, 18446744073709551616]}"#).unwrap();
        assert_eq!(
            v.to_string(),
            r#"{"b":1,"a":[true,null,"x",1.5,18446744073709551616]}"#
        );
        assert_eq!(v["a"][3].as_f64(), Some(1.5));
        assert!(parse("{} x").is_err());
    }
}

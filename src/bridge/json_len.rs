//! The size of a value written as compact JSON, counted without building the text.

use serde::Serialize;

/// The bytes of `value` as compact JSON (`serde_json::to_writer`'s output), counted by a
/// writer that keeps nothing. `usize::MAX` if `value` fails to serialize (a map with
/// non-string keys), so a size limit refuses it.
pub(crate) fn json_len<T: Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::json_len;

    #[test]
    fn the_count_is_the_length_of_the_compact_text() {
        let value = json!({"a": [1, "é", null], "b": {"c": 2.5}});
        assert_eq!(json_len(&value), serde_json::to_vec(&value).unwrap().len());
    }
}

//! Lenient reading of what a wrapped server sends: a malformed optional field never costs a
//! tool, a server or a text (README "Wrapped servers that misbehave").
//!
//! rmcp's typed model refuses a whole tool, content block or `initialize` answer when one
//! field has the wrong type. Before it reads them, each is repaired here:
//! - strings that spell a boolean (`"true"`, `"False"`) where a hint or flag wants one
//!   (`readOnlyHint`, `listChanged`, `isError`) are read as that boolean;
//! - a content block's `priority` given as a numeric string is read as the number, and
//!   `"high"`, `"medium"` (`"normal"`) and `"low"` as 1, 0.5 and 0; any other `priority`
//!   is dropped; `audience` keeps only the roles MCP defines (`user`,
//!   `assistant`, in any case; a single string is a list of one);
//! - a `resource_link` with no `name` keeps its URI, which becomes its name;
//! - a text block whose `text` is a number or boolean keeps it as text;
//! - a tool result's `null` optional fields are dropped, and a `structuredContent` that is
//!   no object next to content blocks too; an `isError` that is no boolean even so is
//!   read as an error, a first text block saying why ([`call_result`]);
//! - every other optional field rmcp cannot read is dropped, one field at a time
//!   ([`keep_readable`]), and the rest is kept; unknown fields are kept as they are (rmcp
//!   ignores them).
//!
//! Each repair is logged at debug level with what was changed. Only what cannot be read even
//! then is lost: a tool with no usable name or inputSchema (warned, the rest of the list is
//! kept), a content block of unknown shape (named in a bracketed line by `repair.rs`).
//! Nothing here relaxes a check: the bridge still validates arguments, sizes and names.

use rmcp::model::{
    Annotations, CallToolResult, ContentBlock, Icon, Implementation, InitializeResult,
    ResourceContents, ServerCapabilities, Tool, ToolAnnotations,
};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Most repairs kept for one log line.
const MAX_HINTS: usize = 8;

/// What was repaired in one message, for one debug log line.
#[derive(Debug, Default)]
pub(super) struct Hints(Vec<String>);

impl Hints {
    fn note(&mut self, hint: String) {
        if self.0.len() < MAX_HINTS {
            self.0.push(crate::bridge::refusal::cap(&hint, 200));
        }
    }

    /// Log the repairs (debug level), if any, as made to `what`.
    pub(super) fn log(&self, what: &str) {
        if !self.0.is_empty() {
            tracing::debug!("repaired {what} from the server: {}", self.0.join("; "));
        }
    }

    #[cfg(test)]
    pub(super) fn all(&self) -> &[String] {
        &self.0
    }
}

/// Whether `T` reads `value` (read in place, as from its text when it holds an integer
/// beyond 64 bits: [`crate::exact_json::typed_ref`]).
fn parses<T: DeserializeOwned>(value: &Value) -> bool {
    crate::exact_json::typed_ref::<T>(value).is_ok()
}

/// Whether `T` reads the object `obj` (as [`parses`]).
fn object_parses<T: DeserializeOwned>(obj: &Map<String, Value>) -> bool {
    crate::exact_json::typed_object::<T>(obj).is_ok()
}

/// Keep the fields of `obj` that `T` can read: the `core` fields as they are, then every
/// other field, one at a time, when `T` still reads the object with it added. Dropped fields
/// are noted in `hints` with `place`. Returns whether `T` reads the result.
pub(super) fn keep_readable<T: DeserializeOwned>(
    obj: &mut Map<String, Value>,
    core: &[&str],
    place: &str,
    hints: &mut Hints,
) -> bool {
    if object_parses::<T>(obj) {
        return true;
    }
    let mut kept: Map<String, Value> = obj
        .iter()
        .filter(|(k, _)| core.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !object_parses::<T>(&kept) {
        return false;
    }
    for (key, value) in obj.iter() {
        if core.contains(&key.as_str()) {
            continue;
        }
        kept.insert(key.clone(), value.clone());
        if !object_parses::<T>(&kept) {
            kept.remove(key);
            hints.note(format!("dropped {place}{key} ({})", kind(value)));
        }
    }
    *obj = kept;
    true
}

/// `true`/`false` spelled as a string (any case) or as 0/1, else `None`.
fn as_bool(value: &Value) -> Option<bool> {
    match value {
        Value::String(s) if s.eq_ignore_ascii_case("true") => Some(true),
        Value::String(s) if s.eq_ignore_ascii_case("false") => Some(false),
        Value::Number(n) if n.as_u64() == Some(1) => Some(true),
        Value::Number(n) if n.as_u64() == Some(0) => Some(false),
        _ => None,
    }
}

/// Read the `keys` of `obj` that spell a boolean as that boolean.
fn booleans(obj: &mut Map<String, Value>, keys: &[&str], place: &str, hints: &mut Hints) {
    for key in keys {
        if let Some(value) = obj.get_mut(*key)
            && !value.is_boolean()
            && let Some(b) = as_bool(value)
        {
            hints.note(format!("read {place}{key} {value} as {b}"));
            *value = Value::Bool(b);
        }
    }
}

/// Repair one tool of a `tools/list` answer in place. `false` when it cannot be read at all
/// (no string name, or a shape rmcp refuses even reduced to its name and schema).
pub(super) fn tool(tool: &mut Value, hints: &mut Hints) -> bool {
    if parses::<Tool>(tool) {
        return true;
    }
    let Some(obj) = tool.as_object_mut() else {
        return false;
    };
    if let Some(Value::Object(annotations)) = obj.get_mut("annotations") {
        let hint_keys = [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ];
        booleans(annotations, &hint_keys, "annotations.", hints);
        keep_readable::<ToolAnnotations>(annotations, &[], "annotations.", hints);
    }
    icons(obj, hints);
    keep_readable::<Tool>(obj, &["name", "inputSchema"], "", hints)
}

/// Keep the icons rmcp can read; drop the others.
fn icons(obj: &mut Map<String, Value>, hints: &mut Hints) {
    if let Some(Value::Array(list)) = obj.get_mut("icons") {
        let before = list.len();
        list.retain(parses::<Icon>);
        if list.len() < before {
            hints.note(format!("dropped {} unreadable icons", before - list.len()));
        }
    }
}

/// A `priority` spelled as a string, as MCP's number from 0 (least important) to 1 (most;
/// spec "Server Features § Resources § Annotations"): a numeric string is that number, and
/// the words servers use instead are read on that scale (`"high"` 1, `"medium"` or
/// `"normal"` 0.5, `"low"` 0, in any case). Anything else is `None` (the field is dropped).
fn priority_number(s: &str) -> Option<serde_json::Number> {
    let s = s.trim();
    let n = match s.to_ascii_lowercase().as_str() {
        "high" => 1.0,
        "medium" | "normal" => 0.5,
        "low" => 0.0,
        _ => s.parse::<f64>().ok().filter(|n| n.is_finite())?,
    };
    serde_json::Number::from_f64(n)
}

/// Repair the `annotations` of a content block or embedded resource.
fn content_annotations(obj: &mut Map<String, Value>, hints: &mut Hints) {
    let Some(Value::Object(annotations)) = obj.get_mut("annotations") else {
        return;
    };
    if let Some(priority) = annotations.get_mut("priority")
        && let Value::String(s) = priority
        && let Some(n) = priority_number(s)
    {
        hints.note(format!("read priority {s:?} as {n}"));
        *priority = Value::Number(n);
    }
    if let Some(audience) = annotations.get_mut("audience") {
        if let Value::String(one) = audience {
            *audience = Value::Array(vec![Value::String(one.clone())]);
        }
        if let Value::Array(roles) = audience {
            let before = roles.len();
            roles.retain_mut(|r| match r.as_str().map(str::to_ascii_lowercase) {
                Some(role) if role == "user" || role == "assistant" => {
                    *r = Value::String(role);
                    true
                }
                _ => false,
            });
            if roles.len() < before {
                hints.note(format!(
                    "dropped {} audience values MCP does not define",
                    before - roles.len()
                ));
            }
        }
    }
    keep_readable::<Annotations>(annotations, &[], "annotations.", hints);
}

/// Repair one content block of a `tools/call` result in place. `false` when it still cannot
/// be read (the caller names it instead).
pub(super) fn content_block(block: &mut Value, hints: &mut Hints) -> bool {
    if parses::<ContentBlock>(block) {
        return true;
    }
    let Some(obj) = block.as_object_mut() else {
        return false;
    };
    content_annotations(obj, hints);
    let kind = obj.get("type").and_then(Value::as_str).unwrap_or_default();
    let core: &[&str] = match kind {
        "text" => {
            if let Some(text) = obj.get_mut("text")
                && matches!(text, Value::Number(_) | Value::Bool(_))
            {
                hints.note(format!("read a text block's text {text} as text"));
                *text = Value::String(text.to_string());
            }
            &["type", "text"]
        }
        "image" | "audio" => &["type", "data", "mimeType"],
        "resource" => {
            if let Some(Value::Object(resource)) = obj.get_mut("resource") {
                let core: &[&str] = if resource.contains_key("blob") {
                    &["uri", "blob"]
                } else {
                    &["uri", "text"]
                };
                keep_readable::<ResourceContents>(resource, core, "resource.", hints);
            }
            &["type", "resource"]
        }
        "resource_link" => {
            if !obj.get("name").is_some_and(Value::is_string)
                && let Some(uri) = obj.get("uri").filter(|u| u.is_string()).cloned()
            {
                hints.note(format!(
                    "a resource link with no name is named by its URI {uri}"
                ));
                obj.insert("name".into(), uri);
            }
            icons(obj, hints);
            &["type", "uri", "name"]
        }
        _ => return false,
    };
    keep_readable::<ContentBlock>(obj, core, "", hints)
}

/// Repair the fields of a `tools/call` result around its content blocks (the blocks are
/// repaired one by one by the caller).
pub(super) fn call_result(result: &mut Map<String, Value>, hints: &mut Hints) {
    // `null` is no value for an optional field: dropped, so `"structuredContent": null`
    // leaves the text to the content and `"content": null` reads as no blocks.
    for key in ["content", "structuredContent", "isError", "_meta"] {
        if result.get(key).is_some_and(Value::is_null) {
            result.remove(key);
            hints.note(format!("dropped {key} (null)"));
        }
    }
    // `structuredContent` is a JSON object (MCP 2025-06-18 "Structured Content"); another
    // value next to content blocks is dropped so the blocks' text is what the code gets.
    // Without blocks it is kept: it is all the result says.
    let blocks = result
        .get("content")
        .is_some_and(|c| c.as_array().is_none_or(|a| !a.is_empty()));
    if blocks
        && let Some(structured) = result.get("structuredContent")
        && !structured.is_object()
    {
        hints.note(format!("dropped structuredContent ({})", kind(structured)));
        result.remove("structuredContent");
    }
    booleans(result, &["isError"], "", hints);
    if let Some(odd) = result.get("isError").filter(|v| !v.is_boolean()) {
        read_as_error(result, kind(odd), hints);
    }
    let content = result.insert("content".into(), Value::Array(Vec::new()));
    keep_readable::<CallToolResult>(result, &["content"], "", hints);
    match content {
        Some(content) => result.insert("content".into(), content),
        None => result.remove("content"),
    };
}

/// Read a result whose `isError` is no boolean even as spelled (`"yes"`, `2`, an object;
/// `what` names its type) as an error: a server that signals failure in the wrong type must
/// not pass for a success (fail closed). A text block put first says why; what the result
/// said follows it: its blocks (a bare string or a lone block too, as the caller reads
/// them), or its `structuredContent` as JSON when it has none.
fn read_as_error(result: &mut Map<String, Value>, what: &str, hints: &mut Hints) {
    hints.note(format!("read isError ({what}) as true"));
    result.insert("isError".into(), Value::Bool(true));
    let text = |text: String| serde_json::json!({"type": "text", "text": text});
    let mut blocks = vec![text(format!(
        "[the server's isError is {what}, not a boolean: the result is read as an error]"
    ))];
    match result.remove("content") {
        Some(Value::Array(rest)) if !rest.is_empty() => blocks.extend(rest),
        Some(Value::String(said)) => blocks.push(text(said)),
        Some(Value::Array(_)) | None => {
            if let Some(structured) = result.get("structuredContent") {
                blocks.push(text(crate::pyjson::to_string(structured)));
            }
        }
        Some(other) => blocks.push(other),
    }
    result.insert("content".into(), Value::Array(blocks));
}

/// Repair an `initialize` answer in place: a missing or unreadable `serverInfo` becomes
/// `{"name": "unknown", "version": "unknown"}`, capabilities of the wrong shape are dropped
/// one by one (flags spelled as strings are read as booleans), other optional fields too.
pub(super) fn initialize(result: &mut Value, hints: &mut Hints) {
    if parses::<InitializeResult>(result) {
        return;
    }
    let Some(obj) = result.as_object_mut() else {
        return;
    };
    let info = obj
        .entry("serverInfo")
        .or_insert_with(|| Value::Object(Map::new()));
    if !info.is_object() {
        hints.note(format!("replaced serverInfo ({})", kind(info)));
        *info = Value::Object(Map::new());
    }
    if let Value::Object(info) = info {
        for key in ["name", "version"] {
            match info.get(key) {
                Some(Value::String(_)) => {}
                Some(Value::Number(n)) => {
                    let text = n.to_string();
                    info.insert(key.into(), Value::String(text));
                }
                _ => {
                    hints.note(format!("serverInfo.{key} missing, read as \"unknown\""));
                    info.insert(key.into(), Value::String("unknown".into()));
                }
            }
        }
        icons(info, hints);
        keep_readable::<Implementation>(info, &["name", "version"], "serverInfo.", hints);
    }
    let capabilities = obj
        .entry("capabilities")
        .or_insert_with(|| Value::Object(Map::new()));
    if !capabilities.is_object() {
        hints.note(format!("replaced capabilities ({})", kind(capabilities)));
        *capabilities = Value::Object(Map::new());
    }
    if let Value::Object(capabilities) = capabilities {
        for (name, capability) in capabilities.iter_mut() {
            if let Value::Object(flags) = capability {
                let place = format!("capabilities.{name}.");
                booleans(flags, &["listChanged", "subscribe"], &place, hints);
            }
        }
        keep_readable::<ServerCapabilities>(capabilities, &[], "capabilities.", hints);
    }
    keep_readable::<InitializeResult>(
        obj,
        &["protocolVersion", "capabilities", "serverInfo"],
        "",
        hints,
    );
}

/// `value`'s JSON type in words (`null`, `a number`, `an object`, ...), for hints and errors.
pub(super) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `result` as [`call_result`] repairs it: its `isError` and the text of its blocks.
    fn repaired_call(result: Value) -> (Value, Vec<Value>) {
        let Value::Object(mut result) = result else {
            unreachable!()
        };
        call_result(&mut result, &mut Hints::default());
        let texts = match result.get("content") {
            Some(Value::Array(blocks)) => blocks.iter().map(|b| b["text"].clone()).collect(),
            _ => Vec::new(),
        };
        (result.get("isError").cloned().unwrap_or(Value::Null), texts)
    }

    #[test]
    fn an_is_error_that_is_no_boolean_is_read_as_an_error_whose_first_block_says_so() {
        let why = |what: &str| {
            json!(format!(
                "[the server's isError is {what}, not a boolean: the result is read as an error]"
            ))
        };
        let text = |t: &str| json!([{"type": "text", "text": t}]);
        for (result, texts) in [
            (
                json!({"content": text("fine"), "isError": "yes"}),
                vec![why("a string"), json!("fine")],
            ),
            (
                json!({"content": "bare", "isError": 2}),
                vec![why("a number"), json!("bare")],
            ),
            (
                json!({"content": [], "structuredContent": {"n": 1}, "isError": {}}),
                vec![why("an object"), json!("{\"n\": 1}")],
            ),
            (json!({"isError": [true]}), vec![why("an array")]),
        ] {
            let (is_error, got) = repaired_call(result.clone());
            assert_eq!(is_error, json!(true), "{result}");
            assert_eq!(got, texts, "{result}");
        }
        // What reads as a boolean, and null (no value), keep their meaning and the text.
        for (flag, read) in [
            (json!("true"), json!(true)),
            (json!("False"), json!(false)),
            (json!(0), json!(false)),
            (json!(null), json!(null)),
        ] {
            let (is_error, got) = repaired_call(json!({"content": text("t"), "isError": flag}));
            assert_eq!((is_error, got), (read, vec![json!("t")]), "{flag}");
        }
    }

    #[test]
    fn hints_of_the_wrong_type_are_read_or_dropped_and_the_tool_is_kept() {
        let mut hints = Hints::default();
        let mut t = json!({"name": "t", "inputSchema": {"type": "object"}, "title": 5,
            "annotations": {"readOnlyHint": "true", "destructiveHint": "maybe", "title": "T", "openWorldHint": 0},
            "icons": [{"src": "https://x/i.png"}, {"nosrc": 1}], "future": {"kept": true}});
        assert!(tool(&mut t, &mut hints));
        let read: Tool = serde_json::from_value(t.clone()).unwrap();
        let a = read.annotations.unwrap();
        assert_eq!(a.read_only_hint, Some(true));
        assert_eq!(a.open_world_hint, Some(false));
        assert_eq!(a.destructive_hint, None);
        assert_eq!(a.title.as_deref(), Some("T"));
        assert_eq!(read.title, None);
        assert_eq!(read.icons.unwrap().len(), 1);
        assert_eq!(
            t["future"],
            json!({"kept": true}),
            "unknown fields are kept"
        );
        assert!(hints.all().len() >= 4, "{:?}", hints.all());
    }

    #[test]
    fn a_tool_with_no_usable_schema_or_name_is_not_read() {
        let mut hints = Hints::default();
        assert!(!tool(
            &mut json!({"name": 1, "inputSchema": {}}),
            &mut hints
        ));
        assert!(!tool(
            &mut json!({"name": "x", "inputSchema": 3}),
            &mut hints
        ));
    }

    #[test]
    fn priority_and_audience_are_repaired_and_the_text_kept() {
        let mut hints = Hints::default();
        let mut b = json!({"type": "text", "text": "hello", "annotations": {"priority": "0.5", "audience": ["User", "system", 3]}});
        assert!(content_block(&mut b, &mut hints));
        assert_eq!(
            b["annotations"],
            json!({"priority": 0.5, "audience": ["user"]})
        );
        let mut b = json!({"type": "text", "text": "hi", "annotations": {"priority": "urgent!", "audience": "system", "lastModified": 7}});
        assert!(content_block(&mut b, &mut hints));
        let read: ContentBlock = serde_json::from_value(b).unwrap();
        assert_eq!(read.as_text().map(|t| t.text.as_str()), Some("hi"));
    }

    #[test]
    fn a_priority_word_is_read_on_mcps_scale_not_dropped() {
        let mut hints = Hints::default();
        for (word, n) in [
            ("high", 1.0),
            ("Medium", 0.5),
            ("normal", 0.5),
            (" LOW ", 0.0),
        ] {
            let mut b = json!({"type": "text", "text": "t", "annotations": {"priority": word}});
            assert!(content_block(&mut b, &mut hints));
            assert_eq!(b["annotations"]["priority"], json!(n), "{word}");
        }
    }

    #[test]
    fn a_resource_link_without_a_name_keeps_its_uri() {
        let mut hints = Hints::default();
        let mut b = json!({"type": "resource_link", "uri": "file:///r.txt", "size": "big", "mimeType": 4, "extra": 1});
        assert!(content_block(&mut b, &mut hints));
        assert_eq!(b["name"], "file:///r.txt");
        assert!(parses::<ContentBlock>(&b), "{b}");
        assert!(b.get("size").is_none(), "{b}");
    }

    #[test]
    fn unknown_content_fields_are_kept_and_unreadable_blocks_refused() {
        let mut hints = Hints::default();
        let mut b = json!({"type": "text", "text": "t", "colour": "red"});
        assert!(content_block(&mut b, &mut hints));
        assert!(hints.all().is_empty());
        assert!(!content_block(&mut json!({"type": "hologram"}), &mut hints));
        assert!(!content_block(&mut json!({"type": "text"}), &mut hints));
        let mut b = json!({"type": "text", "text": 42});
        assert!(content_block(&mut b, &mut hints));
        assert_eq!(b["text"], "42");
    }

    #[test]
    fn an_initialize_answer_with_odd_fields_still_starts_the_session() {
        let mut hints = Hints::default();
        let mut r = json!({"protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": "true"}, "logging": 5},
            "serverInfo": {"name": "odd", "version": 2, "icons": "no"}, "instructions": ["x"]});
        initialize(&mut r, &mut hints);
        let read: InitializeResult = serde_json::from_value(r).unwrap();
        assert_eq!(read.server_info.version, "2");
        assert_eq!(
            read.capabilities.tools.and_then(|t| t.list_changed),
            Some(true)
        );
        assert!(read.instructions.is_none());
        let mut r = json!({"protocolVersion": "2025-06-18"});
        initialize(&mut r, &mut hints);
        assert!(parses::<InitializeResult>(&r), "{r}");
    }
}

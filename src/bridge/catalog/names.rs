//! Python names for MCP tools (README "How a call works", step 1).
//!
//! In order: `server__tool` with `--config`; the name in NFKC, the form Python reads
//! identifiers in (`ｐｒｉｎｔ` is `print` to it); every character no Python identifier may
//! hold becomes `_` (`get-weather` → `get_weather`), while letters of any script stay
//! (`名前`, `échec`: [`super::identifier_chars`], the characters Python 3.10 takes); an
//! empty name or one that cannot start an identifier (a digit, a combining mark) gets a
//! leading `_`; should the result not be in NFKC (a kept mark next to a `_`), every
//! non-ASCII character becomes `_` instead, so the name the code writes is the name it
//! calls; a name that would shadow a keyword (soft keywords included), a builtin, a
//! dunder, a top-level module of Python's standard library (`json`, `os`: an `import` would
//! replace the tool) or a name the runner defines gets a trailing `_`. Two tools that end up with the
//! same name stop startup ([`crate::bridge::catalog`] checks).
//!
//! The runner refuses a `start` whose tools take a reserved name (its `inbox.reserved`: the
//! same rule, over the same standard-library list, with the keywords and builtins of its own
//! Python, which [`is_reserved`]'s lists cover), so every name [`python_name`] gives is one
//! it takes.

use unicode_normalization::UnicodeNormalization;

use super::identifier_chars::{is_continue, is_start};
use super::stdlib_modules::is_stdlib_module;

/// Separator between a server's name and its tool's name under `--config`.
pub(crate) const SERVER_SEPARATOR: &str = "__";

/// Names the runner defines in the code's globals (its `inbox.RUNNER_NAMES`).
pub(crate) const RUNNER_NAMES: &[&str] = &["ToolError", "TOOLS", "search_tools"];

/// Python 3 keywords (`keyword.kwlist`).
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Python soft keywords (`keyword.softkwlist`, 3.12): legal names, but confusing ones.
const SOFT_KEYWORDS: &[&str] = &["_", "case", "match", "type"];

/// `dir(builtins)` of CPython 3.11–3.13, without dunders (those are caught by the dunder rule).
const BUILTINS: &[&str] = &[
    "ArithmeticError",
    "AssertionError",
    "AttributeError",
    "BaseException",
    "BaseExceptionGroup",
    "BlockingIOError",
    "BrokenPipeError",
    "BufferError",
    "BytesWarning",
    "ChildProcessError",
    "ConnectionAbortedError",
    "ConnectionError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "DeprecationWarning",
    "EOFError",
    "Ellipsis",
    "EncodingWarning",
    "EnvironmentError",
    "Exception",
    "ExceptionGroup",
    "FileExistsError",
    "FileNotFoundError",
    "FloatingPointError",
    "FutureWarning",
    "GeneratorExit",
    "IOError",
    "ImportError",
    "ImportWarning",
    "IndentationError",
    "IndexError",
    "InterruptedError",
    "IsADirectoryError",
    "KeyError",
    "KeyboardInterrupt",
    "LookupError",
    "MemoryError",
    "ModuleNotFoundError",
    "NameError",
    "NotADirectoryError",
    "NotImplemented",
    "NotImplementedError",
    "OSError",
    "OverflowError",
    "PendingDeprecationWarning",
    "PermissionError",
    "ProcessLookupError",
    "PythonFinalizationError",
    "RecursionError",
    "ReferenceError",
    "ResourceWarning",
    "RuntimeError",
    "RuntimeWarning",
    "StopAsyncIteration",
    "StopIteration",
    "SyntaxError",
    "SyntaxWarning",
    "SystemError",
    "SystemExit",
    "TabError",
    "TimeoutError",
    "TypeError",
    "UnboundLocalError",
    "UnicodeDecodeError",
    "UnicodeEncodeError",
    "UnicodeError",
    "UnicodeTranslateError",
    "UnicodeWarning",
    "UserWarning",
    "ValueError",
    "Warning",
    "ZeroDivisionError",
    "abs",
    "aiter",
    "all",
    "anext",
    "any",
    "ascii",
    "bin",
    "bool",
    "breakpoint",
    "bytearray",
    "bytes",
    "callable",
    "chr",
    "classmethod",
    "compile",
    "complex",
    "copyright",
    "credits",
    "delattr",
    "dict",
    "dir",
    "divmod",
    "enumerate",
    "eval",
    "exec",
    "exit",
    "filter",
    "float",
    "format",
    "frozenset",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "help",
    "hex",
    "id",
    "input",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "license",
    "list",
    "locals",
    "map",
    "max",
    "memoryview",
    "min",
    "next",
    "object",
    "oct",
    "open",
    "ord",
    "pow",
    "print",
    "property",
    "quit",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "setattr",
    "slice",
    "sorted",
    "staticmethod",
    "str",
    "sum",
    "super",
    "tuple",
    "vars",
    "zip",
];

/// The Python name for `tool`, alone or (with `server`) as `server__tool`.
///
/// The result is always a Python identifier, in NFKC, that every Python the runner supports
/// takes (`str.isidentifier`) and reads as itself, and that shadows no keyword, builtin,
/// dunder, standard-library module or runner name.
pub fn python_name(server: Option<&str>, tool: &str) -> String {
    let base: String = match server {
        Some(server) => format!("{server}{SERVER_SEPARATOR}{tool}"),
        None => tool.to_owned(),
    }
    .nfkc()
    .collect();
    let mut name = identifier(&base, is_continue);
    if !name.chars().eq(name.nfkc()) {
        name = identifier(&base, |c| c.is_ascii_alphanumeric() || c == '_');
    }
    if is_reserved(&name) {
        name.push('_');
    }
    name
}

/// `text` with every character `keeps` refuses made `_`, and a leading `_` when it is empty
/// or its first character cannot start an identifier.
fn identifier(text: &str, keeps: impl Fn(char) -> bool) -> String {
    let mut name: String = text
        .chars()
        .map(|c| if keeps(c) { c } else { '_' })
        .collect();
    if !name.starts_with(is_start) {
        name.insert(0, '_');
    }
    name
}

/// Whether `name` would shadow a keyword, a builtin, a dunder, a top-level module of
/// Python's standard library (the runner's `stdlib_modules.txt`) or a runner name. The
/// runner's `inbox.reserved` is the same rule, so it takes every name this leaves.
pub(crate) fn is_reserved(name: &str) -> bool {
    is_dunder(name)
        || KEYWORDS.contains(&name)
        || SOFT_KEYWORDS.contains(&name)
        || BUILTINS.contains(&name)
        || RUNNER_NAMES.contains(&name)
        || is_stdlib_module(name)
}

/// Whether `name` is a real dunder, `^__[^_](.*[^_])?__$`: `__class__` is, `__`, `____` and
/// `__class___` (the renamed one) are not.
fn is_dunder(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() >= 5
        && name.starts_with("__")
        && name.ends_with("__")
        && bytes[2] != b'_'
        && bytes[bytes.len() - 3] != b'_'
}

/// Whether `name` can be written bare as a Python parameter name in a stub.
pub(crate) fn is_plain_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') && !KEYWORDS.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_not_identifiers_are_renamed() {
        assert_eq!(python_name(None, "get-weather"), "get_weather");
        assert_eq!(python_name(None, "a.b c"), "a_b_c");
        assert_eq!(python_name(None, "1st"), "_1st");
        assert_eq!(python_name(None, ""), "__");
        assert_eq!(python_name(None, "a\u{200b}b\u{202e}"), "a_b_");
        assert_eq!(python_name(None, "😀x"), "_x");
    }

    #[test]
    fn names_that_are_python_identifiers_in_any_script_are_kept_whole() {
        for name in [
            "名前",
            "検索",
            "échec",
            "İstanbul",
            "ünïcödé",
            "héllo",
            "données_2",
        ] {
            assert_eq!(python_name(None, name), name);
        }
        assert_eq!(python_name(Some("notes"), "検索"), "notes__検索");
        // Read as Python reads identifiers (NFKC): fullwidth letters are ASCII ones, a
        // decomposed é is composed, a ligature is its letters.
        assert_eq!(python_name(None, "ｐｒｉｎｔ"), "print_");
        assert_eq!(python_name(None, "e\u{301}chec"), "échec");
        assert_eq!(python_name(None, "\u{fb01}le"), "file");
        // A character that cannot start an identifier gets a leading `_`; one Python 3.10
        // does not know (CJK Extension H, Unicode 15.0) becomes `_`.
        assert_eq!(python_name(None, "٣abc"), "_٣abc");
        assert_eq!(python_name(None, "名\u{31350}"), "名_");
    }

    #[test]
    fn every_name_given_out_is_an_identifier_in_nfkc_that_python_3_10_takes() {
        for tool in [
            "a\u{200b}\u{301}",
            "\u{301}x",
            "x\u{31350}\u{301}",
            "\u{1100}\u{1161}",
            "\u{fb01}\u{301}",
            "Å\u{301}",
            "ｔｏｏｌ－ｘ",
            "名前\n\t",
            "\u{202e}evil",
        ] {
            let name = python_name(None, tool);
            assert!(name.chars().eq(name.nfkc()), "{tool:?} -> {name:?}");
            assert!(name.starts_with(is_start), "{tool:?} -> {name:?}");
            assert!(name.chars().all(is_continue), "{tool:?} -> {name:?}");
        }
    }

    #[test]
    fn names_that_would_shadow_get_a_trailing_underscore() {
        for (tool, want) in [
            ("print", "print_"),
            ("class", "class_"),
            ("match", "match_"),
            ("__builtins__", "__builtins___"),
            ("__import__", "__import___"),
            ("__class__", "__class___"),
            ("__a__", "__a___"),
            ("____", "____"),
            ("_____", "_____"),
            ("___x__", "___x__"),
            ("__x___", "__x___"),
            ("_", "__"),
            ("type", "type_"),
            ("ToolError", "ToolError_"),
            ("TOOLS", "TOOLS_"),
            ("search_tools", "search_tools_"),
            ("json", "json_"),
            ("asyncio", "asyncio_"),
            ("os", "os_"),
            ("sys", "sys_"),
            ("re", "re_"),
            ("add", "add"),
        ] {
            assert_eq!(python_name(None, tool), want, "{tool}");
        }
    }

    #[test]
    fn every_standard_library_module_is_reserved_and_renamed() {
        for module in super::super::stdlib_modules::stdlib_modules() {
            assert!(is_reserved(module), "{module}");
            assert_eq!(python_name(None, module), format!("{module}_"));
        }
    }

    #[test]
    fn only_real_dunders_count_as_dunders() {
        for name in ["__class__", "__a__", "__init__", "__x_y__"] {
            assert!(is_dunder(name), "{name}");
        }
        for name in [
            "__",
            "___",
            "____",
            "_____",
            "__a",
            "a__",
            "__a_",
            "___a__",
            "__a___",
            "__class___",
        ] {
            assert!(!is_dunder(name), "{name}");
        }
    }

    #[test]
    fn no_name_given_out_is_reserved() {
        for tool in [
            "",
            "_",
            "__",
            "___",
            "____",
            "__class__",
            "__builtins__",
            "print",
            "None",
            "match",
            "ToolError",
            "1",
            "-",
            "__a__",
            "a-b",
            "é",
            "ｐｒｉｎｔ",
            "ＴＯＯＬＳ",
            "\u{fb01}lter",
        ] {
            let name = python_name(None, tool);
            assert!(!is_reserved(&name), "{tool} -> {name}");
        }
    }

    #[test]
    fn config_names_start_with_the_server() {
        assert_eq!(python_name(Some("notes"), "search"), "notes__search");
        assert_eq!(python_name(Some("my-srv"), "t"), "my_srv__t");
        assert_eq!(
            python_name(Some("a"), "b__c"),
            python_name(Some("a__b"), "c")
        );
    }

    #[test]
    fn only_plain_identifiers_are_written_bare() {
        assert!(is_plain_identifier("first_name"));
        assert!(!is_plain_identifier("from"));
        assert!(!is_plain_identifier("cik-A"));
        assert!(!is_plain_identifier("1st"));
        assert!(!is_plain_identifier(""));
        assert!(is_plain_identifier("type"));
    }
}

//! Top-level module names of Python's standard library, which a tool name must not take:
//! `import json` in the code would silently replace a tool named `json`.
//!
//! The list is the runner's own file, `stdlib_modules.txt` of its package (one name a line,
//! `#` comments; `sorted(sys.stdlib_module_names)` of the rootfs's Python 3.11, the
//! command that regenerates it is in its header), embedded here at build time. The runner
//! reads the same file to refuse a start that gives a tool one of these names, so the host
//! and the runner cannot disagree about it.

/// The list file, as the rootfs holds it (`RUNNER_FILES` of `crate::rootfs` embeds the same).
const LIST: &str =
    include_str!("../../../rootfs/usr/lib/mcp-code-mode/code_mode_runner/stdlib_modules.txt");

/// The module names of [`LIST`], in its (sorted) order: every line that is neither empty nor
/// a `#` comment, trimmed.
pub(super) fn stdlib_modules() -> impl Iterator<Item = &'static str> {
    LIST.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
}

/// Whether `name` is a top-level module of Python's standard library.
pub(super) fn is_stdlib_module(name: &str) -> bool {
    stdlib_modules().any(|module| module == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_holds_every_generated_name_once_in_order() {
        let names: Vec<&str> = stdlib_modules().collect();
        assert_eq!(names.len(), 305);
        assert!(names.windows(2).all(|w| w[0] < w[1]));
        assert!(
            names
                .iter()
                .all(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        );
        for module in ["__future__", "asyncio", "json", "os", "sys", "zoneinfo"] {
            assert!(is_stdlib_module(module), "{module}");
        }
        assert!(!is_stdlib_module("requests") && !is_stdlib_module("# Top-level"));
    }
}

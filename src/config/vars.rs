//! Variables in config values: `${VAR}`, `${VAR:-default}` and VS Code's `${env:VAR}`.
//!
//! The rule is Claude Code's for `.mcp.json` (README "Config file"): `${VAR}` is the value of
//! `VAR` in `serve`'s own environment, `${VAR:-default}` falls back to `default` when `VAR`
//! is unset or empty, and VS Code's `${env:VAR}` is read like `${VAR}`. A variable that is
//! unset and has no default is an error naming it, never an empty string. A bare `$VAR` is
//! left as written (no shell is involved), and so is a `$` not followed by `{`. VS Code's
//! `${input:…}` prompts have no place to ask, so they are an error that says what to write
//! instead. Names are letters, digits and `_` (POSIX names, plus VS Code's `workspaceFolder`
//! style, which is then looked up in the environment like any other).

/// Why a value could not be expanded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(super) enum VarError {
    /// `${NAME}` with `NAME` unset and no default.
    #[error("the variable {0} is not set (give it a default with ${{{0}:-default}})")]
    Unset(String),
    /// `${…` without its closing `}`, or an empty or odd name inside.
    #[error(
        "{0:?} is not a variable reference (write ${{NAME}}, ${{NAME:-default}} or ${{env:NAME}})"
    )]
    Malformed(String),
    /// VS Code's `${input:id}`.
    #[error(
        "{0:?} asks for a VS Code input, which mcp-code-mode cannot prompt for; set an environment variable and write ${{env:NAME}}"
    )]
    Input(String),
}

/// Expand every variable reference in `text`, reading values with `lookup`.
///
/// # Errors
/// [`VarError`] for the first reference that cannot be expanded.
pub(super) fn expand(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, VarError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(VarError::Malformed(cut(&rest[start..])));
        };
        let inner = &after[..end];
        let reference = &rest[start..start + 2 + end + 1];
        out.push_str(&resolve(inner, reference, lookup)?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn resolve(
    inner: &str,
    reference: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, VarError> {
    if inner.starts_with("input:") {
        return Err(VarError::Input(cut(reference)));
    }
    let inner = inner.strip_prefix("env:").unwrap_or(inner);
    let (name, default) = match inner.split_once(":-") {
        Some((name, default)) => (name, Some(default)),
        None => (inner, None),
    };
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(VarError::Malformed(cut(reference)));
    }
    match (lookup(name), default) {
        (Some(value), Some(default)) if value.is_empty() => Ok(default.to_owned()),
        (Some(value), _) => Ok(value),
        (None, Some(default)) => Ok(default.to_owned()),
        (None, None) => Err(VarError::Unset(name.to_owned())),
    }
}

/// A reference quoted in an error, at most 60 characters.
fn cut(text: &str) -> String {
    crate::bridge::refusal::cap(text, 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/ada".into()),
            "TOKEN" => Some("s3cr3t".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn x(text: &str) -> Result<String, VarError> {
        expand(text, &env)
    }

    #[test]
    fn set_variables_expand_in_every_form() {
        assert_eq!(x("${HOME}/data").unwrap(), "/home/ada/data");
        assert_eq!(x("Bearer ${env:TOKEN}").unwrap(), "Bearer s3cr3t");
        assert_eq!(x("${TOKEN:-none}").unwrap(), "s3cr3t");
        assert_eq!(x("${HOME}${TOKEN}").unwrap(), "/home/adas3cr3t");
        assert_eq!(x("no variables").unwrap(), "no variables");
    }

    #[test]
    fn defaults_apply_when_unset_or_empty() {
        assert_eq!(x("${NOPE:-fallback}").unwrap(), "fallback");
        assert_eq!(x("${EMPTY:-fallback}").unwrap(), "fallback");
        assert_eq!(x("${NOPE:-}").unwrap(), "");
        assert_eq!(x("${env:NOPE:-d}").unwrap(), "d");
        assert_eq!(x("${EMPTY}").unwrap(), "", "set but empty is its value");
    }

    #[test]
    fn an_unset_variable_without_a_default_is_an_error_naming_it() {
        assert_eq!(x("${API_TOKEN}"), Err(VarError::Unset("API_TOKEN".into())));
        assert_eq!(
            x("Bearer ${env:API_TOKEN}"),
            Err(VarError::Unset("API_TOKEN".into()))
        );
        assert!(
            VarError::Unset("X".into())
                .to_string()
                .contains("${X:-default}")
        );
    }

    #[test]
    fn bare_dollars_are_left_alone_and_odd_references_refused() {
        assert_eq!(x("$HOME and $ and $$").unwrap(), "$HOME and $ and $$");
        assert!(matches!(x("${HOME"), Err(VarError::Malformed(_))));
        assert!(matches!(x("${}"), Err(VarError::Malformed(_))));
        assert!(matches!(x("${A B}"), Err(VarError::Malformed(_))));
        assert!(matches!(x("${input:api-key}"), Err(VarError::Input(_))));
    }
}

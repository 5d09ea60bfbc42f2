//! Which tools a read-only server keeps, and which calls need a person's approval, decided
//! from the tools' annotations (MCP `ToolAnnotations`, spec 2025-06-18 "Tool annotations":
//! `readOnlyHint` default false, `destructiveHint` default true and meaningful only when
//! `readOnlyHint` is false).
//!
//! Annotations are hints the wrapped server gives about itself; a server that lies about
//! them defeats both rules (README "Read-only mode").

use std::collections::BTreeSet;

use rmcp::model::Tool;

/// Whether a server in read-only mode (`--read-only`, `readOnly: true`) keeps this tool:
/// only when it is annotated `readOnlyHint: true` and not `destructiveHint: true` (a
/// contradictory pair is dropped). A tool without annotations is dropped.
pub(crate) fn kept_when_read_only(tool: &Tool) -> bool {
    let Some(annotations) = &tool.annotations else {
        return false;
    };
    annotations.read_only_hint == Some(true) && annotations.destructive_hint != Some(true)
}

/// Whether the tool is annotated read-only (`readOnlyHint: true`).
pub(crate) fn annotated_read_only(tool: &Tool) -> bool {
    tool.annotations
        .as_ref()
        .is_some_and(|a| a.read_only_hint == Some(true))
}

/// Which calls of one server need a person's approval before they go out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ApprovalRule {
    /// None (the default).
    #[default]
    None,
    /// These tools, by name (the names `--allow` takes).
    Tools(BTreeSet<String>),
    /// Every tool not annotated `readOnlyHint: true` (`approve: "destructive"`,
    /// `--approve-destructive`).
    Destructive,
}

impl ApprovalRule {
    /// Whether a call to `tool` needs approval; `names` are the names a listed label may
    /// give it (its MCP name, its Python name, with a config its `server__` name), each
    /// looked up in the list (a set: no scan of the list per tool).
    pub fn needs_approval(&self, tool: &Tool, names: &[String]) -> bool {
        match self {
            Self::None => false,
            Self::Tools(tools) => names.iter().any(|n| tools.contains(n)),
            Self::Destructive => !annotated_read_only(tool),
        }
    }

    /// The names this rule lists (to check each names a tool).
    pub fn listed(&self) -> impl Iterator<Item = &String> {
        match self {
            Self::Tools(tools) => Some(tools.iter()),
            _ => None,
        }
        .into_iter()
        .flatten()
    }

    /// This rule and `other` together: destructive wins; two lists are merged.
    pub fn union(self, other: Self) -> Self {
        match (self, other) {
            (Self::Destructive, _) | (_, Self::Destructive) => Self::Destructive,
            (Self::Tools(mut a), Self::Tools(b)) => {
                a.extend(b);
                Self::Tools(a)
            }
            (Self::None, rule) | (rule, Self::None) => rule,
        }
    }
}

/// Which settings made a server's calls need approval: the text a refusal names, so the
/// person reading it knows what asked for approval. Set by the config file's reader (an
/// entry's `approve`) and by [`super::options::GovernanceArgs::apply`] (the flags).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApprovalSources {
    /// `--approve TOOL` was given.
    pub approve_flag: bool,
    /// `--approve-destructive` was given.
    pub destructive_flag: bool,
    /// The server's config entry has its own `approve`.
    pub config_entry: bool,
}

impl ApprovalSources {
    /// The settings as a person finds them, joined with ` and `: `--approve`,
    /// `--approve-destructive`, `"approve" in the config entry "ENTRY"` (`entry` shown as
    /// a JSON string, at most 64 characters, control characters escaped); when none is
    /// known (a rule set through the library), `the approval rule of its server entry`.
    pub fn describe(&self, entry: &str) -> String {
        let entry = crate::sandbox::escape_controls(&format!(
            "{:?}",
            crate::bridge::refusal::cap(entry, 64)
        ));
        let mut parts = Vec::new();
        if self.approve_flag {
            parts.push("--approve".to_owned());
        }
        if self.destructive_flag {
            parts.push("--approve-destructive".to_owned());
        }
        if self.config_entry {
            parts.push(format!("\"approve\" in the config entry {entry}"));
        }
        if parts.is_empty() {
            return "the approval rule of its server entry".to_owned();
        }
        parts.join(" and ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn tool(read_only: Option<bool>, destructive: Option<bool>) -> Tool {
        let mut tool = Tool::new("t", "d", Arc::new(serde_json::Map::new()));
        if read_only.is_some() || destructive.is_some() {
            let mut a = rmcp::model::ToolAnnotations::default();
            a.read_only_hint = read_only;
            a.destructive_hint = destructive;
            tool.annotations = Some(a);
        }
        tool
    }

    #[test]
    fn read_only_mode_keeps_only_tools_annotated_read_only_and_not_destructive() {
        assert!(kept_when_read_only(&tool(Some(true), None)));
        assert!(kept_when_read_only(&tool(Some(true), Some(false))));
        assert!(!kept_when_read_only(&tool(Some(true), Some(true))));
        assert!(!kept_when_read_only(&tool(Some(false), Some(false))));
        assert!(!kept_when_read_only(&tool(None, Some(false))));
        assert!(!kept_when_read_only(&tool(None, None)));
    }

    #[test]
    fn destructive_approval_covers_every_tool_not_annotated_read_only() {
        let rule = ApprovalRule::Destructive;
        assert!(!rule.needs_approval(&tool(Some(true), None), &["t".to_owned()]));
        assert!(rule.needs_approval(&tool(Some(false), Some(false)), &["t".to_owned()]));
        assert!(rule.needs_approval(&tool(None, None), &["t".to_owned()]));
    }

    #[test]
    fn a_listed_tool_needs_approval_by_either_of_its_names() {
        let rule = ApprovalRule::Tools(["srv__del".to_owned()].into());
        assert!(rule.needs_approval(
            &tool(Some(true), None),
            &["del".to_owned(), "srv__del".to_owned()]
        ));
        assert!(!rule.needs_approval(
            &tool(None, None),
            &["get".to_owned(), "srv__get".to_owned()]
        ));
        assert!(!ApprovalRule::None.needs_approval(&tool(None, None), &["t".to_owned()]));
    }

    #[test]
    fn the_sources_of_a_rule_are_named_as_a_person_sets_them() {
        let none = ApprovalSources::default();
        assert_eq!(none.describe("x"), "the approval rule of its server entry");
        let flag = ApprovalSources {
            approve_flag: true,
            ..none
        };
        assert_eq!(flag.describe("x"), "--approve");
        let both = ApprovalSources {
            destructive_flag: true,
            config_entry: true,
            ..none
        };
        assert_eq!(
            both.describe("notes\u{1b}"),
            "--approve-destructive and \"approve\" in the config entry \"notes\\u{1b}\""
        );
    }

    #[test]
    fn rules_merge_with_destructive_winning() {
        let a = ApprovalRule::Tools(["x".to_owned()].into());
        let b = ApprovalRule::Tools(["y".to_owned()].into());
        assert_eq!(
            a.clone().union(b),
            ApprovalRule::Tools(["x".to_owned(), "y".to_owned()].into())
        );
        assert_eq!(
            a.union(ApprovalRule::Destructive),
            ApprovalRule::Destructive
        );
    }
}

//! What a catalog build does with a label (an `allow`, `private` or `approve` entry) that
//! names no tool: refuse the catalog at a server's first list, where it is most likely a
//! typo, but only warn at a re-list, where the server dropped or renamed a tool.

use super::CatalogError;

/// What a catalog build does when one of a server's labels names no tool it could name
/// ([`super::LabelList`] says which tools those are).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LabelCheck {
    /// Refuse the catalog with [`CatalogError::UnknownLabel`]: the server's first list (at
    /// startup, or its start on a later try), where a label naming nothing is most likely a
    /// typo, so startup stops rather than run with a governance setting that does nothing.
    Refuse,
    /// Warn naming the label and go on: a re-list after `list_changed`. The server dropped
    /// or renamed a tool the label named; the labels still apply only to the tools they
    /// name, so the tool that is gone is gone from the catalog (a call to it is refused as
    /// unknown) and the rest of the new list comes into force.
    Warn,
    /// Go on without a word: a server whose list this build does not change (its labels
    /// were checked, or warned about, when that list came).
    Quiet,
}

impl LabelCheck {
    /// Deal with `miss`, a label naming no tool: `Err(miss)` when refusing, else `Ok` (with
    /// a warning when warning).
    ///
    /// # Errors
    /// `miss`, with [`LabelCheck::Refuse`].
    pub(super) fn missed(self, miss: CatalogError) -> Result<(), CatalogError> {
        match (self, &miss) {
            (Self::Refuse, _) => Err(miss),
            (
                Self::Warn,
                CatalogError::UnknownLabel {
                    list,
                    tool,
                    server,
                    hint,
                },
            ) => {
                tracing::warn!(
                    server = %server,
                    "the {} {tool:?} names nothing in the server's new tool list{hint}: it applies to no tool until the server lists one of that name again, and the rest of the new list is in force",
                    list.entry()
                );
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use rmcp::model::Tool;
    use serde_json::json;

    use super::super::{Catalog, PrivateLabels, Selection, ServerTools};
    use super::*;
    use crate::governance::policy::ApprovalRule;

    fn tool(name: &str) -> Tool {
        serde_json::from_value(json!({"name": name, "inputSchema": {"type": "object"}})).unwrap()
    }

    /// Builds one server `s` listing `tools`, whose allowlist, private labels and approval
    /// entries each name `gone` (no longer listed) besides the tools they keep.
    fn build(tools: &[&str], gone: &str, check: LabelCheck) -> Result<Catalog, CatalogError> {
        let tools: Vec<Tool> = tools.iter().map(|n| tool(n)).collect();
        let selection = Selection {
            allow: Some(vec!["kept".into(), gone.into()]),
            private: PrivateLabels::Some(vec!["kept".into(), gone.into()]),
            approve: ApprovalRule::Tools([gone.to_owned()].into()),
            ..Selection::default()
        };
        let servers = [ServerTools {
            name: "s",
            prefixed: false,
            tools: &tools,
            selection: &selection,
        }];
        Catalog::build_unless(&servers, &[check], &AtomicBool::new(false))
            .map(|c| c.expect("not stopped"))
    }

    #[test]
    fn a_label_naming_a_tool_no_longer_listed_is_refused_at_a_first_list() {
        let e = build(&["kept", "Add"], "add", LabelCheck::Refuse).err();
        assert!(
            matches!(&e, Some(CatalogError::UnknownLabel { tool, .. }) if tool == "add"),
            "{e:?}"
        );
    }

    #[test]
    fn at_a_relist_labels_naming_a_gone_tool_leave_it_out_and_the_rest_of_the_list_is_kept() {
        for check in [LabelCheck::Warn, LabelCheck::Quiet] {
            let catalog = build(&["kept", "Add"], "add", check).expect("the new list is taken");
            let kept: Vec<&str> = catalog
                .tools()
                .iter()
                .map(|t| t.mcp_name.as_str())
                .collect();
            // `Add` is a new tool the allowlist does not name: still left out.
            assert_eq!(kept, ["kept"], "{check:?}");
            assert!(catalog.get("kept").unwrap().private);
        }
    }

    #[test]
    fn other_refusals_stay_at_a_relist() {
        let tools = [tool("a_b"), tool("a-b")];
        let selection = Selection::default();
        let servers = [ServerTools {
            name: "s",
            prefixed: false,
            tools: &tools,
            selection: &selection,
        }];
        let built = Catalog::build_unless(&servers, &[LabelCheck::Warn], &AtomicBool::new(false));
        assert!(matches!(built, Err(CatalogError::NameClash { .. })));
    }
}

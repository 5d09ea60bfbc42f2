//! What a catalog build does with a label (an `allow`, `private`, `approve` or
//! `disabledTools` entry) that names no tool: refuse the catalog at a server's first list,
//! where it is most likely a typo, but only warn at a re-list, where the server dropped or
//! renamed a tool. A server that failed to start has listed nothing yet: its labels wait for
//! its first list, on the later try that starts it.

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
    /// or renamed a tool the label named, so the warning gives no did-you-mean hint (a close
    /// name in the new list is another tool, not the one meant); the labels still apply only to the tools they
    /// name, so the tool that is gone is gone from the catalog (a call to it is refused as
    /// unknown) and the rest of the new list comes into force.
    Warn,
    /// Go on without a word: a server whose list this build does not change (its labels
    /// were checked, or warned about, when that list came), or one that is not running (it
    /// listed nothing; its labels are checked at its first list).
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
            // No did-you-mean hint here, unlike at a first list: the entry named a tool the
            // server had, so a close name in the new list is another tool, and pointing at it
            // would read as advice to label that one instead.
            (
                Self::Warn,
                CatalogError::UnknownLabel {
                    list, tool, server, ..
                },
            ) => {
                tracing::warn!(
                    server = %server,
                    "the {} {tool:?} names nothing in the server's new tool list: it applies to no tool until the server lists one of that name again, and the rest of the new list is in force",
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
    use std::sync::{Arc, Mutex};

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

    /// What `f` logs through tracing on this thread, as the fmt layer writes it.
    fn logged(f: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Lines(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Lines {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        String::from_utf8(lines.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn a_label_naming_a_tool_no_longer_listed_is_refused_at_a_first_list_with_a_hint() {
        let e = build(&["kept", "Add"], "add", LabelCheck::Refuse).err();
        assert!(
            matches!(&e, Some(CatalogError::UnknownLabel { tool, .. }) if tool == "add"),
            "{e:?}"
        );
        // At a first list the entry is most likely a typo: the close name is the hint.
        let message = e.unwrap().to_string();
        assert!(message.contains(r#"did you mean "Add"?"#), "{message}");
    }

    #[test]
    fn the_relist_warning_for_a_gone_tool_points_at_no_other_tool() {
        let log = logged(|| {
            build(&["kept", "Add"], "add", LabelCheck::Warn).expect("the new list is taken");
        });
        for entry in ["allowlist entry", "approval entry"] {
            let line = format!(r#"the {entry} "add" names nothing in the server's new tool list"#);
            assert!(log.contains(&line), "{log}");
        }
        assert!(!log.contains("did you mean"), "{log}");
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

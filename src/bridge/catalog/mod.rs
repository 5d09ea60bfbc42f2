//! The catalog: every kept tool with its Python name, stub, summary, validator and labels.
//!
//! Built once at startup from each server's `tools/list`. A tool is kept when it is on its
//! server's allowlist (default: all) and its inputSchema compiles; one whose schema is too
//! deep, cannot be compiled, accepts no object (no_object.rs) or whose patterns would take
//! too much memory (patterns.rs) is left out with a warning. Startup stops when two kept tools
//! would get the same Python name, or when an allowlist, approval or private label names no
//! tool it could name (see [`LabelList`]); at a re-list such a label only gets a warning, and
//! a server that is not running has its labels checked at its first list ([`LabelCheck`]).

mod cost;
mod identifier_chars;
mod label_check;
pub(crate) mod names;
mod no_object;
mod offline;
mod params;
mod patterns;
mod schema;
mod stdlib_modules;
mod stub;
mod types;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};

use jsonschema::PatternCache;
use rmcp::model::Tool;
use serde_json::Value;

pub(crate) use self::label_check::LabelCheck;
use self::names::python_name;
pub use self::patterns::{MAX_PATTERN_AUTOMATON_BYTES, MAX_SERVER_PATTERN_BYTES};
use self::patterns::{PatternBudget, PatternWeights};
pub(crate) use self::schema::{ArgsValidator, CheckError};
use self::stub::{StubInput, runner_params, stub, summary};
use crate::governance::policy::{ApprovalRule, ApprovalSources, kept_when_read_only};
use crate::run::protocol::ToolEntry;

/// Which tools of a server are labelled private.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum PrivateLabels {
    /// None (the default).
    #[default]
    None,
    /// Every tool of the server (`"private": true`).
    All,
    /// These tools, by their MCP names.
    Some(Vec<String>),
}

/// Per-server selection: allowlist and private labels, by MCP tool names.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Selection {
    /// Tools to keep; `None` keeps all.
    pub allow: Option<Vec<String>>,
    /// Private labels.
    pub private: PrivateLabels,
    /// Tools left out (a config's `disabledTools`).
    pub deny: Vec<String>,
    /// Read-only mode (`--read-only`, `readOnly: true`): keep only the tools annotated
    /// read-only (`crate::governance::policy::kept_when_read_only`).
    pub read_only: bool,
    /// Which calls need a person's approval before they go out (`--approve`, `approve`).
    pub approve: ApprovalRule,
    /// Which settings made up `approve`, for the refusals that name them.
    pub approve_sources: ApprovalSources,
}

/// One kept tool.
pub struct CatalogTool {
    /// Index of its server in the bridge.
    pub server: usize,
    /// The server's name.
    pub server_name: String,
    /// The MCP name, as the server spells it.
    pub mcp_name: String,
    /// The Python name.
    pub py_name: String,
    /// The stub.
    pub stub: String,
    /// The summary line.
    pub summary: String,
    /// Labelled private.
    pub private: bool,
    /// The compiled inputSchema.
    pub validator: std::sync::Arc<ArgsValidator>,
    /// Its outputSchema is the single-`result` wrapper: results give the inner value.
    pub unwrap_result: bool,
    /// Its parameter names as the server spells them ([`stub::runner_params`]).
    pub params: Vec<String>,
    /// A call needs a person's approval before it goes out.
    pub approve: bool,
}

/// Why the catalog could not be built (startup stops).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CatalogError {
    /// Two tools would get one Python name.
    #[error(
        "tools {first} and {second} would both be called {py_name}; rename one or leave one out with an allowlist"
    )]
    NameClash {
        /// `server:tool` of the first.
        first: String,
        /// `server:tool` of the second.
        second: String,
        /// The shared Python name.
        py_name: String,
    },
    /// A label names no tool it could name (which tools those are depends on its list).
    #[error("the {entry} {tool:?} on server {server:?} {misses}{hint}", entry = .list.entry(), misses = .list.misses())]
    UnknownLabel {
        /// The list the label is on.
        list: LabelList,
        /// The label.
        tool: String,
        /// The server.
        server: String,
        /// `; did you mean "get-sum"?` when a tool's name is close, else empty.
        hint: String,
    },
}

/// The list a label is on, which decides the tools it may name and so the words of
/// [`CatalogError::UnknownLabel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelList {
    /// `--allow`, or `allow` in a config entry: may name any tool the server lists.
    Allow,
    /// `--private`, or `private` in a config entry: may name a tool kept (or hidden by
    /// read-only mode), not one the allowlist or `disabledTools` leaves out or whose
    /// inputSchema could not be checked, since no call of such a tool is possible.
    Private,
    /// `--approve`, or `approve` in a config entry: may name any tool the server lists.
    Approve,
    /// `disabledTools` in a config entry: may name any tool the server lists. A miss would
    /// leave the tool meant to be switched off callable, so it stops startup like the others.
    Disabled,
}

impl LabelList {
    /// What one label of this list is called in a message.
    fn entry(self) -> &'static str {
        match self {
            Self::Allow => "allowlist entry",
            Self::Private => "private label",
            Self::Approve => "approval entry",
            Self::Disabled => "disabledTools entry",
        }
    }

    /// Why a label of this list can name nothing, in the message's words.
    fn misses(self) -> &'static str {
        match self {
            Self::Allow | Self::Approve | Self::Disabled => {
                "names no tool the server lists (a typo? a label is the server's name for the tool or the name the code calls it by)"
            }
            Self::Private => {
                "names no kept tool (a typo, a tool the allowlist or disabledTools leaves out, or one left out because its inputSchema could not be checked)"
            }
        }
    }
}

/// The names a label (from `--allow`, `--private`, `allow`, `private`, `disabledTools`,
/// `approve`) may give the tool `mcp_name`: the server's name for it, or the Python name the
/// code sees (`get_sum` for `get-sum`; with a config also `server__get_sum`).
fn label_forms(server: &ServerTools<'_>, mcp_name: &str) -> Vec<String> {
    let mut forms = vec![mcp_name.to_owned(), python_name(None, mcp_name)];
    if server.prefixed {
        forms.push(python_name(Some(server.name), mcp_name));
    }
    forms
}

/// Labels as a set, for [`named_by`].
fn label_set(list: &[String]) -> HashSet<&str> {
    list.iter().map(String::as_str).collect()
}

/// Whether one of `forms` (a tool's [`label_forms`]) is in `labels`: a few hash lookups
/// per tool, however many labels and tools there are.
fn named_by(labels: &HashSet<&str>, forms: &[String]) -> bool {
    !labels.is_empty() && forms.iter().any(|f| labels.contains(f.as_str()))
}

/// `; did you mean "NAME"?` for the tool name closest to `label` (Levenshtein distance, case
/// and `-`/`_` ignored) when it is close enough to be a typo, else empty.
fn closest<'a>(label: &str, names: impl Iterator<Item = &'a str>) -> String {
    let fold = |s: &str| s.to_lowercase().replace('-', "_");
    let wanted = fold(label);
    let best = names
        .map(|n| (strsim::levenshtein(&wanted, &fold(n)), n))
        .min_by_key(|(d, _)| *d);
    match best {
        Some((distance, name)) if distance <= (wanted.chars().count() / 3).max(2) => {
            format!("; did you mean {name:?}?")
        }
        _ => String::new(),
    }
}

/// All kept tools, in server order then `tools/list` order.
#[derive(Default)]
pub struct Catalog {
    tools: Vec<CatalogTool>,
    by_name: HashMap<String, usize>,
    generation: u64,
    unavailable: Vec<(String, String)>,
    /// Tools hidden by read-only mode, by server name (servers in read-only mode only).
    read_only_hidden: Vec<(String, usize)>,
}

/// How one server's tools are compiled in a build: the build's shared patterns and their
/// weights, and the server's budget for them.
struct Compiler<'a> {
    patterns: &'a PatternCache,
    weights: &'a mut PatternWeights,
    budget: &'a mut PatternBudget,
}

/// One server's tools as listed, with its selection, for [`Catalog::build`].
pub struct ServerTools<'a> {
    /// Server name.
    pub name: &'a str,
    /// Whether tool names get the `server__` prefix (config mode).
    pub prefixed: bool,
    /// Its tools.
    pub tools: &'a [Tool],
    /// Its allowlist and labels.
    pub selection: &'a Selection,
}

impl Catalog {
    /// Build the catalog; warnings for left-out tools go to the log. Linear in the number of
    /// tools and labels (names and labels are looked up in hash sets), so a server's
    /// [`crate::bridge::MAX_LISTED_TOOLS`] tools cost one schema compile and one stub each.
    ///
    /// # Errors
    /// [`CatalogError`] for a name clash or a label that names no tool it could name.
    pub fn build(servers: &[ServerTools<'_>]) -> Result<Self, CatalogError> {
        let checks = vec![LabelCheck::Refuse; servers.len()];
        Self::build_unless(servers, &checks, &AtomicBool::new(false)).map(Option::unwrap_or_default)
    }

    /// [`Self::build`], with `checks[i]` saying what a label of server `i` naming no tool does
    /// (a server without one refuses), given up (`Ok(None)`) as soon as `stop` is set: it is
    /// checked before each tool, so a build nobody waits for any more ends within one tool's
    /// compile.
    ///
    /// # Errors
    /// As [`Self::build`], a label naming no tool only where its check is
    /// [`LabelCheck::Refuse`].
    pub(crate) fn build_unless(
        servers: &[ServerTools<'_>],
        checks: &[LabelCheck],
        stop: &AtomicBool,
    ) -> Result<Option<Self>, CatalogError> {
        let mut catalog = Catalog::default();
        // A pattern repeated across tools and servers is weighed and compiled once per build; a
        // new build compiles afresh, so an old catalog's patterns go with it.
        let patterns = PatternCache::new();
        let mut weights = PatternWeights::default();
        for (index, server) in servers.iter().enumerate() {
            let check = checks.get(index).copied().unwrap_or(LabelCheck::Refuse);
            if !catalog.add_server(index, server, check, &patterns, &mut weights, stop)? {
                return Ok(None);
            }
        }
        Ok(Some(catalog))
    }

    /// Add the kept tools of `server` (the `index`th), compiling their patterns through
    /// `patterns` and weighing them through `weights`, a label naming no tool dealt with by
    /// `check`; `Ok(false)` when `stop` was set.
    fn add_server(
        &mut self,
        index: usize,
        server: &ServerTools<'_>,
        check: LabelCheck,
        patterns: &PatternCache,
        weights: &mut PatternWeights,
        stop: &AtomicBool,
    ) -> Result<bool, CatalogError> {
        let selection = server.selection;
        let allow = selection.allow.as_deref().map(label_set);
        let deny = label_set(&selection.deny);
        let private = match &selection.private {
            PrivateLabels::Some(list) => label_set(list),
            _ => HashSet::new(),
        };
        // Every label must name a listed tool: the names of every listed tool, once.
        let listed = || -> HashSet<String> {
            server
                .tools
                .iter()
                .flat_map(|t| label_forms(server, &t.name))
                .collect()
        };
        let unknown = |list, label: &String| CatalogError::UnknownLabel {
            list,
            tool: label.clone(),
            server: server.name.to_owned(),
            hint: closest(label, server.tools.iter().map(|t| t.name.as_ref())),
        };
        let checked = check != LabelCheck::Quiet;
        if let Some(list) = selection.allow.as_ref().filter(|_| checked) {
            let listed = listed();
            for label in list.iter().filter(|l| !listed.contains(*l)) {
                check.missed(unknown(LabelList::Allow, label))?;
            }
        }
        if checked && !selection.deny.is_empty() {
            let listed = listed();
            for label in selection.deny.iter().filter(|l| !listed.contains(*l)) {
                check.missed(unknown(LabelList::Disabled, label))?;
            }
        }
        let mut seen_here = HashSet::new();
        // The names of the tools kept or hidden by read-only mode, for the private labels.
        let mut labelled_here = HashSet::new();
        let mut hidden = 0;
        let mut budget = PatternBudget::default();
        for tool in server.tools {
            if stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            let mcp_name = tool.name.to_string();
            if !seen_here.insert(mcp_name.clone()) {
                tracing::warn!(server = server.name, tool = %mcp_name, "left out a second tool of the same name");
                continue;
            }
            let forms = label_forms(server, &mcp_name);
            if allow.as_ref().is_some_and(|allow| !named_by(allow, &forms))
                || named_by(&deny, &forms)
            {
                continue;
            }
            if selection.read_only && !kept_when_read_only(tool) {
                hidden += 1;
                if !private.is_empty() {
                    labelled_here.extend(forms);
                }
                continue;
            }
            let compiler = Compiler {
                patterns,
                weights: &mut *weights,
                budget: &mut budget,
            };
            let Some(entry) = Self::entry(index, server, tool, &forms, &private, compiler) else {
                continue;
            };
            if let Some(&other) = self.by_name.get(&entry.py_name) {
                let other = &self.tools[other];
                return Err(CatalogError::NameClash {
                    first: format!("{}:{}", other.server_name, other.mcp_name),
                    second: format!("{}:{}", entry.server_name, entry.mcp_name),
                    py_name: entry.py_name,
                });
            }
            if !private.is_empty() {
                labelled_here.extend(forms);
            }
            self.by_name.insert(entry.py_name.clone(), self.tools.len());
            self.tools.push(entry);
        }
        if let PrivateLabels::Some(list) = &selection.private
            && checked
        {
            for label in list.iter().filter(|l| !labelled_here.contains(l.as_str())) {
                let kept_names = self
                    .tools
                    .iter()
                    .filter(|t| t.server == index)
                    .map(|t| t.mcp_name.as_str());
                check.missed(CatalogError::UnknownLabel {
                    list: LabelList::Private,
                    tool: label.clone(),
                    server: server.name.to_owned(),
                    hint: closest(label, kept_names),
                })?;
            }
        }
        if checked && selection.approve.listed().next().is_some() {
            let listed = listed();
            for label in selection.approve.listed().filter(|l| !listed.contains(*l)) {
                check.missed(unknown(LabelList::Approve, label))?;
            }
        }
        if selection.read_only {
            self.read_only_hidden.push((server.name.to_owned(), hidden));
        }
        Ok(true)
    }

    /// The catalog entry of `tool` (its label names `forms`), or `None` (with a warning)
    /// when its patterns are over the budget or its inputSchema cannot be compiled.
    fn entry(
        index: usize,
        server: &ServerTools<'_>,
        tool: &Tool,
        forms: &[String],
        private_labels: &HashSet<&str>,
        compiler: Compiler<'_>,
    ) -> Option<CatalogTool> {
        let selection = server.selection;
        let mcp_name = tool.name.to_string();
        let schema = Value::Object((*tool.input_schema).clone());
        let costs = match compiler.budget.admit(&schema, compiler.weights) {
            Ok(costs) => costs,
            Err(e) => {
                tracing::warn!(server = server.name, tool = %mcp_name, "left out: {e}");
                return None;
            }
        };
        let validator = match ArgsValidator::compile_with(&schema, compiler.patterns, costs) {
            Ok(v) if !v.unchecked().is_empty() => {
                tracing::warn!(
                    server = server.name,
                    tool = %mcp_name,
                    "its inputSchema refers to {} that cannot be resolved inside it (nothing is fetched): the values there are passed on unchecked, the rest is checked",
                    v.unchecked().join(", ")
                );
                v
            }
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(server = server.name, tool = %mcp_name, "left out: {e}");
                return None;
            }
        };
        let private = match &selection.private {
            PrivateLabels::None => false,
            PrivateLabels::All => true,
            PrivateLabels::Some(_) => named_by(private_labels, forms),
        };
        let py_name = python_name(server.prefixed.then_some(server.name), &mcp_name);
        let approve = selection.approve.needs_approval(tool, forms);
        let output = tool
            .output_schema
            .as_ref()
            .map(|o| Value::Object((**o).clone()));
        let input = StubInput {
            name: &py_name,
            description: tool.description.as_deref(),
            input_schema: &schema,
            output_schema: output.as_ref(),
            private,
            approve,
        };
        Some(CatalogTool {
            server: index,
            server_name: server.name.to_owned(),
            stub: stub(&input),
            summary: summary(&input),
            mcp_name,
            py_name,
            private,
            validator: std::sync::Arc::new(validator),
            params: runner_params(&schema),
            unwrap_result: output
                .as_ref()
                .and_then(crate::bridge::upstream::result::result_wrapper)
                .is_some(),
            approve,
        })
    }

    /// This catalog with its generation number and the servers that are not running
    /// (name, why).
    pub fn with_state(mut self, generation: u64, unavailable: Vec<(String, String)>) -> Self {
        self.generation = generation;
        self.unavailable = unavailable;
        self
    }

    /// The servers in read-only mode, each with how many of its tools that mode hid.
    pub fn read_only_hidden(&self) -> &[(String, usize)] {
        &self.read_only_hidden
    }

    /// Its generation: a later catalog of the same bridge has a higher one.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Servers that are not running, each by the name its user knows
    /// (`ServerEntry::shown_name`), with why (their tools are missing from this catalog).
    pub fn unavailable(&self) -> &[(String, String)] {
        &self.unavailable
    }

    /// The tool the code calls `py_name`.
    pub fn get(&self, py_name: &str) -> Option<&CatalogTool> {
        self.by_name.get(py_name).map(|&i| &self.tools[i])
    }

    /// Every kept tool, in catalog order.
    pub fn tools(&self) -> &[CatalogTool] {
        &self.tools
    }

    /// The runner's view: names, stubs, summaries and labels.
    pub fn entries(&self) -> Vec<ToolEntry> {
        self.tools
            .iter()
            .map(|t| ToolEntry {
                name: t.py_name.clone(),
                stub: t.stub.clone(),
                summary: t.summary.clone(),
                private: t.private,
                params: t.params.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, schema: Value) -> Tool {
        serde_json::from_value(json!({"name": name, "inputSchema": schema})).unwrap()
    }

    fn build(
        servers: &[(&str, Vec<Tool>, Selection)],
        prefixed: bool,
    ) -> Result<Catalog, CatalogError> {
        let st: Vec<ServerTools<'_>> = servers
            .iter()
            .map(|(n, t, s)| ServerTools {
                name: n,
                prefixed,
                tools: t,
                selection: s,
            })
            .collect();
        Catalog::build(&st)
    }

    #[test]
    fn a_name_clash_across_servers_stops_startup() {
        let servers = [
            ("a-b", vec![tool("x", json!({}))], Selection::default()),
            ("a_b", vec![tool("x", json!({}))], Selection::default()),
        ];
        let e = build(&servers, true).err().unwrap();
        assert!(
            e.to_string().contains("a-b:x") && e.to_string().contains("a_b:x"),
            "{e}"
        );
    }

    #[test]
    fn a_clash_through_the_separator_stops_startup() {
        let servers = [
            ("a", vec![tool("b__c", json!({}))], Selection::default()),
            ("a__b", vec![tool("c", json!({}))], Selection::default()),
        ];
        assert!(matches!(
            build(&servers, true),
            Err(CatalogError::NameClash { .. })
        ));
    }

    #[test]
    fn a_schema_too_deep_to_check_is_left_out_not_fatal() {
        let mut deep = json!({"type": "string"});
        for _ in 0..200 {
            deep = json!({"type": "object", "properties": {"x": deep}});
        }
        let servers = [(
            "s",
            vec![tool("deep", deep), tool("ok", json!({}))],
            Selection::default(),
        )];
        let c = build(&servers, false).unwrap();
        assert!(c.get("deep").is_none());
        assert!(c.get("ok").is_some());
    }

    #[test]
    fn labels_must_name_kept_tools() {
        let sel = Selection {
            allow: None,
            private: PrivateLabels::Some(vec!["nope".into()]),
            deny: vec![],
            ..Selection::default()
        };
        let servers = [("s", vec![tool("ok", json!({}))], sel)];
        assert!(matches!(
            build(&servers, false),
            Err(CatalogError::UnknownLabel { .. })
        ));
        let sel = Selection {
            allow: Some(vec!["ok".into()]),
            private: PrivateLabels::Some(vec!["other".into()]),
            deny: vec![],
            ..Selection::default()
        };
        let servers = [(
            "s",
            vec![tool("ok", json!({})), tool("other", json!({}))],
            sel,
        )];
        assert!(matches!(
            build(&servers, false),
            Err(CatalogError::UnknownLabel { .. })
        ));
    }

    #[test]
    fn a_disabled_tools_entry_naming_no_tool_stops_the_build_naming_it() {
        let sel = Selection {
            deny: vec!["git_reset".into()],
            ..Selection::default()
        };
        let servers = [("s", vec![tool("git_reset", json!({}))], sel)];
        assert!(build(&servers, false).unwrap().get("git_reset").is_none());
        let sel = Selection {
            deny: vec!["git_rest".into()],
            ..Selection::default()
        };
        let servers = [("s", vec![tool("git_reset", json!({}))], sel)];
        let e = build(&servers, false).err().map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("disabledTools entry \"git_rest\"")
                    && e.contains("did you mean \"git_reset\"?")),
            "{e:?}"
        );
    }

    #[test]
    fn labels_take_the_server_name_or_the_python_name_and_a_miss_suggests() {
        let sel = Selection {
            allow: Some(vec!["get_sum".into(), "notes__echo_it".into()]),
            private: PrivateLabels::Some(vec!["notes__get_sum".into()]),
            deny: vec![],
            ..Selection::default()
        };
        let servers = [(
            "notes",
            vec![
                tool("get-sum", json!({})),
                tool("echo-it", json!({})),
                tool("other", json!({})),
            ],
            sel,
        )];
        let c = build(&servers, true).unwrap();
        assert!(c.get("notes__get_sum").unwrap().private);
        assert!(c.get("notes__echo_it").is_some());
        assert!(c.get("notes__other").is_none());
        let sel = Selection {
            allow: Some(vec!["get_summ".into()]),
            ..Selection::default()
        };
        let servers = [("s", vec![tool("get-sum", json!({}))], sel)];
        let e = build(&servers, false).err().unwrap().to_string();
        assert!(e.contains("did you mean \"get-sum\"?"), "{e}");
        let sel = Selection {
            allow: Some(vec!["zzzzzz".into()]),
            ..Selection::default()
        };
        let servers = [("s", vec![tool("get-sum", json!({}))], sel)];
        let e = build(&servers, false).err().unwrap().to_string();
        assert!(!e.contains("did you mean"), "{e}");
    }

    #[test]
    fn the_allowlist_keeps_other_tools_out() {
        let sel = Selection {
            allow: Some(vec!["add".into()]),
            private: PrivateLabels::None,
            deny: vec![],
            ..Selection::default()
        };
        let servers = [(
            "s",
            vec![tool("add", json!({})), tool("echo", json!({}))],
            sel,
        )];
        let c = build(&servers, false).unwrap();
        assert!(c.get("add").is_some());
        assert!(c.get("echo").is_none());
        assert_eq!(c.entries().len(), 1);
    }
}

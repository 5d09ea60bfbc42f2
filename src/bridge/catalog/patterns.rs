//! What the regular expressions of a server's tools may hold in memory once compiled.
//!
//! Every `pattern` and `patternProperties` key of a kept tool's inputSchema is compiled when
//! the catalog is built, and the compiled automata live as long as the catalog. They are what
//! a large listing costs in memory (a few KiB for a small pattern, hundreds of KiB for a
//! counted repetition such as `[a-z]{1,1000}`, some 25 bytes of JSON), far more than the
//! listing's own bytes, which [`crate::bridge::MAX_LISTED_BYTES`] caps. So, per build:
//! - a pattern is compiled once for the whole catalog, however many tools repeat it (the
//!   validators share one `jsonschema::PatternCache`);
//! - one pattern whose automaton would take more than [`MAX_PATTERN_AUTOMATON_BYTES`] leaves
//!   its tool out (the validator is also built with that limit);
//! - a server's distinct patterns, weighed by [`weight`], may take at most
//!   [`MAX_SERVER_PATTERN_BYTES`] in all: a tool whose new patterns would pass it is left out,
//!   and the tools before it stay.
//!
//! Tools left out get a warning naming the limit, as for a schema nested too deep.
//!
//! The same weighing tells what matching a pattern costs a call's check
//! ([`super::cost::PatternCosts`]): each distinct pattern's automata are built once per
//! build ([`PatternWeights`]), for both.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use fancy_regex::{Assertion, Expr};
use regex_automata::nfa::thompson;
use serde_json::Value;

use super::cost::PatternCosts;

/// Most heap one automaton of a pattern may take: the limit of the linear engine's automaton
/// (its Thompson NFA) for each part of a pattern that engine runs. Ordinary patterns (an
/// e-mail address, a UUID, `^[A-Za-z0-9_.-]{1,255}$`) take a few KiB to some 30 KiB.
pub const MAX_PATTERN_AUTOMATON_BYTES: usize = 1 << 20;

/// Most memory the distinct compiled patterns of one server's kept tools may take, as
/// [`weight`] estimates it; about 6,000 small patterns.
pub const MAX_SERVER_PATTERN_BYTES: u64 = 64 << 20;

/// What a compiled pattern holds besides its automata (the engine's strategy, its caches'
/// pool, the validator's node), in bytes: measured about 8 KiB per small pattern.
const PATTERN_OVERHEAD_BYTES: u64 = 8 << 10;

/// Characters of a pattern quoted in a warning.
const MAX_QUOTED_PATTERN_CHARS: usize = 60;

/// Why a tool's patterns are not compiled (the tool is left out).
#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum PatternsTooLarge {
    /// One pattern's automaton would pass [`MAX_PATTERN_AUTOMATON_BYTES`].
    #[error(
        "its pattern {0} would compile to an automaton of more than {limit} KiB",
        limit = MAX_PATTERN_AUTOMATON_BYTES >> 10
    )]
    Pattern(String),
    /// Its new patterns would take the server's past [`MAX_SERVER_PATTERN_BYTES`].
    #[error(
        "its patterns would take the regular expressions compiled for its server's tools past {limit} MiB (about {used} MiB compiled before it); tools sharing patterns cost them once",
        limit = MAX_SERVER_PATTERN_BYTES >> 20
    )]
    Server {
        /// MiB taken by the tools kept before it.
        used: u64,
    },
}

/// What one pattern weighs ([`weight`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Weight {
    /// Memory it takes once compiled, estimated, in bytes.
    pub(crate) bytes: u64,
    /// States of its automaton when the linear engine runs the whole pattern; `None` when a
    /// part of it needs fancy-regex's backtracking engine (lookaround, backreferences...), or
    /// it cannot be compiled.
    pub(crate) linear_states: Option<u64>,
}

/// Every distinct pattern weighed in one catalog build, across its servers: each is weighed
/// (its automata built) once, however many tools repeat it.
#[derive(Default)]
pub(crate) struct PatternWeights {
    /// Pattern → its weight, `None` when over [`MAX_PATTERN_AUTOMATON_BYTES`].
    weighed: HashMap<Arc<str>, Option<Weight>>,
}

impl PatternWeights {
    /// `pattern` (shared with every other holder of it) and its [`weight`], weighed now
    /// unless it was before.
    pub(crate) fn of(&mut self, pattern: &str) -> (Arc<str>, Option<Weight>) {
        if let Some((known, w)) = self.weighed.get_key_value(pattern) {
            return (known.clone(), *w);
        }
        let w = weight(pattern);
        let known: Arc<str> = Arc::from(pattern);
        self.weighed.insert(known.clone(), w);
        (known, w)
    }
}

/// The patterns of one server's tools in one catalog build, and what they take.
pub(crate) struct PatternBudget {
    /// Patterns already paid for.
    seen: HashSet<Arc<str>>,
    /// Their total [`weight`].
    used: u64,
    /// Most they may take.
    limit: u64,
}

impl Default for PatternBudget {
    fn default() -> Self {
        Self::with_limit(MAX_SERVER_PATTERN_BYTES)
    }
}

impl PatternBudget {
    /// A budget of `limit` bytes.
    pub(crate) fn with_limit(limit: u64) -> Self {
        Self {
            seen: HashSet::new(),
            used: 0,
            limit,
        }
    }

    /// Pay for the patterns of `schema` not paid for yet (weighed through `weights`), or
    /// refuse them all (nothing is paid) when one is too large or together they pass the
    /// limit. Admitted, what matching each of them costs a call's check.
    ///
    /// # Errors
    /// [`PatternsTooLarge`]: the tool is to be left out.
    pub(crate) fn admit(
        &mut self,
        schema: &Value,
        weights: &mut PatternWeights,
    ) -> Result<PatternCosts, PatternsTooLarge> {
        let mut costs = PatternCosts::default();
        let mut new: Vec<Arc<str>> = Vec::new();
        let mut added = 0u64;
        for pattern in patterns(schema) {
            let (known, w) = weights.of(pattern);
            let w = w.ok_or_else(|| {
                PatternsTooLarge::Pattern(crate::pyjson::to_string(&Value::String(
                    crate::bridge::refusal::cap(pattern, MAX_QUOTED_PATTERN_CHARS),
                )))
            })?;
            costs.add(known.clone(), w);
            if self.seen.contains(&known) || new.contains(&known) {
                continue;
            }
            added = added.saturating_add(w.bytes);
            new.push(known);
        }
        if self.used.saturating_add(added) > self.limit {
            return Err(PatternsTooLarge::Server {
                used: self.used >> 20,
            });
        }
        self.used += added;
        self.seen.extend(new);
        Ok(costs)
    }
}

/// Every `pattern` value and `patternProperties` key anywhere in `root` (what the validator
/// compiles), with repeats.
pub(crate) fn patterns(root: &Value) -> Vec<&str> {
    let mut found = Vec::new();
    let mut stack = vec![root];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(p)) = map.get("pattern") {
                    found.push(p.as_str());
                }
                if let Some(Value::Object(props)) = map.get("patternProperties") {
                    found.extend(props.keys().map(String::as_str));
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items.iter()),
            _ => {}
        }
    }
    found
}

/// What `pattern` weighs, as the validator compiles it (ECMA-262 translated, then
/// fancy-regex, which hands the parts without lookaround or backreferences to the linear
/// engine, the whole pattern when it has none). Its memory: [`PATTERN_OVERHEAD_BYTES`] plus
/// twice the automata of those parts (the engine builds a forward and a reverse automaton of
/// each). `None` when one part's automaton would pass [`MAX_PATTERN_AUTOMATON_BYTES`]. A
/// pattern that cannot be parsed weighs the overhead and is not linear: the validator
/// refuses it and its tool is left out anyway.
pub(crate) fn weight(pattern: &str) -> Option<Weight> {
    #[cfg(test)]
    tests::WEIGHED.with(|n| n.set(n.get() + 1));
    let mut weighed = Weight {
        bytes: PATTERN_OVERHEAD_BYTES,
        linear_states: None,
    };
    let Ok(translated) = jsonschema_regex::to_rust_regex(pattern) else {
        return Some(weighed);
    };
    let Ok(tree) = Expr::parse_tree(&translated) else {
        return Some(weighed);
    };
    let mut parts = Vec::new();
    let whole = linear(&tree.expr, &mut parts);
    if whole {
        parts.push(&tree.expr);
    }
    let compiler = || {
        let mut compiler = thompson::Compiler::new();
        compiler
            .configure(thompson::Config::new().nfa_size_limit(Some(MAX_PATTERN_AUTOMATON_BYTES)));
        compiler
    };
    for part in parts {
        let mut text = String::new();
        part.to_str(&mut text, 0);
        match compiler().build(&text) {
            Ok(nfa) => {
                let bytes = u64::try_from(nfa.memory_usage()).unwrap_or(u64::MAX);
                weighed.bytes = weighed.bytes.saturating_add(bytes.saturating_mul(2));
                if whole {
                    weighed.linear_states = u64::try_from(nfa.states().len()).ok();
                }
            }
            Err(e) if e.size_limit().is_some() => return None,
            // Syntax the linear engine reads otherwise: left to the validator to compile.
            Err(_) => {}
        }
    }
    Some(weighed)
}

/// Whether `expr` is made only of what the linear engine runs (then its parent may hand it
/// over whole); when it is not, its largest such parts are pushed on `parts`.
fn linear<'e>(expr: &'e Expr, parts: &mut Vec<&'e Expr>) -> bool {
    let children: Vec<&Expr> = expr.children_iter().collect();
    let flags: Vec<bool> = children.iter().map(|c| linear(c, parts)).collect();
    if plain_node(expr) && flags.iter().all(|&f| f) {
        return true;
    }
    parts.extend(
        children
            .into_iter()
            .zip(flags)
            .filter_map(|(c, f)| f.then_some(c)),
    );
    false
}

/// Whether `expr` itself (not its children) is something the linear engine runs, which
/// `Expr::to_str` can write in its syntax.
fn plain_node(expr: &Expr) -> bool {
    match expr {
        Expr::Empty
        | Expr::Any { .. }
        | Expr::Literal { .. }
        | Expr::Concat(_)
        | Expr::Alt(_)
        | Expr::Group(_)
        | Expr::Repeat { .. }
        | Expr::Delegate { .. } => true,
        Expr::Assertion(a) => matches!(
            a,
            Assertion::StartText
                | Assertion::EndText
                | Assertion::StartLine { .. }
                | Assertion::StartLineOniguruma { .. }
                | Assertion::EndLine { .. }
                | Assertion::WordBoundary
                | Assertion::NotWordBoundary
                | Assertion::LeftWordBoundary
                | Assertion::RightWordBoundary
                | Assertion::LeftWordHalfBoundary
                | Assertion::RightWordHalfBoundary
        ),
        _ => false,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::cost::BACKTRACK_LIMIT;
    use super::*;
    use serde_json::json;
    use std::cell::Cell;

    thread_local! {
        /// Patterns this thread weighed (their automata built).
        pub(super) static WEIGHED: Cell<u64> = const { Cell::new(0) };
    }

    #[test]
    fn a_pattern_in_many_tools_and_servers_is_weighed_once_per_build_for_memory_and_checks() {
        let schema = json!({"properties": {
            "a": {"pattern": "^[a-z]{1,16}$"},
            "b": {"pattern": "^(?=x)[a-z]{1,16}$"},
            "c": {"patternProperties": {"^[a-z]{1,16}$": {}}}}});
        let weights = &mut PatternWeights::default();
        let before = WEIGHED.with(Cell::get);
        // Two servers (a budget each) of three tools each.
        for _ in 0..2 {
            let mut budget = PatternBudget::default();
            for _ in 0..3 {
                let costs = budget.admit(&schema, weights).unwrap();
                // Every tool gets what matching its patterns costs, paid for or not: the
                // linear one by its automaton, the lookahead one as backtracking.
                let linear = costs.weight("^[a-z]{1,16}$", 100);
                assert!((101..=101 * 4).contains(&linear), "{linear}");
                let fancy = costs.weight("^(?=x)[a-z]{1,16}$", 100);
                assert!(fancy > 100 * BACKTRACK_LIMIT as u64, "{fancy}");
            }
        }
        assert_eq!(WEIGHED.with(Cell::get) - before, 2);
        // Weighed for a check alone, the same costs.
        let alone = PatternCosts::of(&schema);
        assert_eq!(alone.weight("^[a-z]{1,16}$", 100), {
            PatternBudget::default()
                .admit(&schema, &mut PatternWeights::default())
                .unwrap()
                .weight("^[a-z]{1,16}$", 100)
        });
    }

    #[test]
    fn a_pattern_weighs_its_automata_lookaround_or_not() {
        let bytes = |pattern| weight(pattern).unwrap().bytes;
        let small = bytes("^[a-z]{1,16}$");
        assert!(small < 3 * PATTERN_OVERHEAD_BYTES, "{small}");
        let large = bytes("^[a-z]{1,1000}$");
        assert!(large > 50_000, "{large}");
        // The same automaton behind a lookahead is still counted: fancy-regex hands that
        // part to the linear engine.
        let behind = bytes("(?=a)[a-z]{1,1000}");
        assert!(behind > 50_000, "{behind}");
        // Backreferences alone: the overhead.
        assert_eq!(bytes(r"(a)\1") - PATTERN_OVERHEAD_BYTES, {
            bytes("(a)") - PATTERN_OVERHEAD_BYTES
        });
    }

    #[test]
    fn a_pattern_whose_automaton_passes_the_limit_is_refused() {
        for pattern in [
            "[a-z]{1,50000}",
            "(?=x)[a-z]{1,50000}",
            "(?:[a-z]{1,1000}){1,50}",
        ] {
            assert_eq!(weight(pattern), None, "{pattern}");
            let e = PatternBudget::default()
                .admit(
                    &json!({"properties": {"s": {"pattern": pattern}}}),
                    &mut PatternWeights::default(),
                )
                .unwrap_err();
            assert!(e.to_string().contains("more than 1024 KiB"), "{e}");
        }
    }

    #[test]
    fn a_server_pays_once_per_pattern_and_up_to_its_limit() {
        let one = weight("^[a-z]{1,1000}-0$").unwrap().bytes;
        let mut budget = PatternBudget::with_limit(3 * one + one / 2);
        let weights = &mut PatternWeights::default();
        let schema = |i: usize| {
            json!({"properties": {
                "a": {"pattern": format!("^[a-z]{{1,1000}}-{i}$")},
                "b": {"items": {"pattern": format!("^[a-z]{{1,1000}}-{i}$")}},
            }})
        };
        // The same pattern in many tools costs once.
        for _ in 0..10 {
            budget.admit(&schema(0), weights).unwrap();
        }
        budget.admit(&schema(1), weights).unwrap();
        budget.admit(&schema(2), weights).unwrap();
        // The fourth distinct pattern passes the limit: refused, nothing paid.
        let e = budget.admit(&schema(3), weights).unwrap_err();
        assert!(matches!(e, PatternsTooLarge::Server { .. }), "{e}");
        assert!(budget.admit(&schema(1), weights).is_ok());
        // patternProperties keys are patterns too.
        let keys = json!({"patternProperties": {"^[a-z]{1,1000}-9$": {}}});
        assert!(budget.admit(&keys, weights).is_err());
    }
}

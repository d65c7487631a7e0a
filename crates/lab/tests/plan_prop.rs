//! Hostile plan files: TOML built from the plan's own keys with wrong types, huge, negative
//! and empty values, unknown keys and big matrices. Loading returns a plan or a typed
//! error naming the key, never panics, and never expands a matrix it would refuse.

use std::path::Path;
use std::time::{Duration, Instant};

use loadlab_lab::plan::MAX_CONFIGURATIONS;
use loadlab_lab::{Plan, PlanError};
use proptest::prelude::*;

/// A generous hang bound for one load, not a performance threshold.
const HANG_BOUND: Duration = Duration::from_secs(10);

/// The first segment of every field a plan error may name.
const TOP_KEYS: [&str; 9] = [
    "name",
    "description",
    "target",
    "matrix",
    "exclude",
    "scenario",
    "load",
    "slo",
    "quick",
];

fn parse(text: &str, quick: bool) -> Result<Plan, PlanError> {
    let start = Instant::now();
    let result = Plan::parse(text, "prop.toml", Path::new("."), quick);
    assert!(
        start.elapsed() < HANG_BOUND,
        "took {:?}:\n{text}",
        start.elapsed()
    );
    result
}

/// Checks that a refusal is typed and names a key of the plan.
fn assert_names_a_key(e: &PlanError, text: &str) {
    match e {
        PlanError::Field {
            path,
            field,
            allowed,
            ..
        } => {
            assert_eq!(path, "prop.toml");
            let head = field.split(['.', '[']).next().unwrap_or_default();
            assert!(
                TOP_KEYS.contains(&head),
                "field `{field}` names no key:\n{text}"
            );
            assert!(!allowed.is_empty(), "no allowed range for `{field}`");
        }
        PlanError::Parse { path, message } => {
            assert_eq!(path, "prop.toml");
            assert!(!message.is_empty(), "empty parse message:\n{text}");
        }
        PlanError::Read { .. } => panic!("a plan text cannot fail to be read: {e}"),
    }
}

/// A TOML value of any type, often an extreme one.
fn value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        Just("0".to_string()),
        Just("-1".to_string()),
        Just("9223372036854775807".to_string()),
        Just("1e308".to_string()),
        Just("-1e308".to_string()),
        Just("inf".to_string()),
        Just("nan".to_string()),
        Just("1e-300".to_string()),
        any::<f64>().prop_map(|f| format!("{f:?}")),
        Just("\"\"".to_string()),
        Just("true".to_string()),
        ".{0,24}".prop_map(|s| toml::Value::String(s).to_string()),
        prop::sample::select(vec![
            "\"10s\"",
            "\"0s\"",
            "\"-1s\"",
            "\"99999999999h\"",
            "\"open\"",
            "\"closed\"",
            "\"poisson\"",
            "\"http2\"",
            "\"grpc\"",
            "\"client\"",
            "\"0-4095\"",
            "\"4096\"",
            "\"127.0.0.2-127.0.0.1\"",
            "\"65001\"",
            "\"X: y\"",
            "\"{nope}\"",
            "\"{port}\"",
            "\"http://127.0.0.1:1/\"",
            "\"https://[::1]:1/\"",
            "\"ftp://x\"",
        ])
        .prop_map(str::to_string),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            prop::collection::vec(
                (
                    key(&[
                        "start",
                        "max",
                        "precision",
                        "growth",
                        "confirm",
                        "http",
                        "tcp",
                        "status",
                        "zz"
                    ]),
                    inner
                ),
                0..4
            )
            .prop_map(|kv| {
                let body: Vec<String> = kv.into_iter().map(|(k, v)| format!("{k} = {v}")).collect();
                format!("{{ {} }}", body.join(", "))
            }),
        ]
    })
}

fn key(keys: &'static [&'static str]) -> impl Strategy<Value = &'static str> {
    prop::sample::select(keys)
}

/// `key = value` lines for one table, keys drawn from `keys` (some unknown).
fn table(keys: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::collection::vec((key(keys), value()), 0..6).prop_map(|kv| {
        // A key twice is a TOML error too, which is fine, but keep most texts parseable.
        let mut seen = std::collections::BTreeSet::new();
        kv.into_iter()
            .filter(|(k, _)| seen.insert(*k))
            .map(|(k, v)| format!("{k} = {v}\n"))
            .collect()
    })
}

const SCENARIO_KEYS: &[&str] = &[
    "name",
    "url",
    "method",
    "headers",
    "body",
    "keep_alive",
    "close_by",
    "timeout",
    "rate",
    "requests",
    "protocol",
    "insecure",
    "call",
    "metadata",
    "bogus",
];
const LOAD_KEYS: &[&str] = &[
    "model",
    "steps",
    "knee",
    "together",
    "step_duration",
    "warmup",
    "pause",
    "connections",
    "max_connections",
    "concurrency",
    "threads",
    "arrival",
    "source_addrs",
    "cpus",
    "bogus",
];
const SLO_KEYS: &[&str] = &["p99_ms", "max_error_rate", "min_achieved_ratio", "bogus"];
const TARGET_KEYS: &[&str] = &[
    "command",
    "shell",
    "env",
    "cwd",
    "ready",
    "ready_timeout",
    "stop_grace",
    "files",
    "cpus",
    "unavailable_exit",
    "bogus",
];

/// A plan text: a valid skeleton whose tables get extra (often hostile) keys.
fn plan_text() -> impl Strategy<Value = String> {
    (
        prop::option::of(value()),
        table(SCENARIO_KEYS),
        table(LOAD_KEYS),
        table(SLO_KEYS),
        prop::option::of(table(TARGET_KEYS)),
        prop::collection::vec(("[a-z]{1,3}", prop::collection::vec(value(), 0..4)), 0..3),
    )
        .prop_map(|(name, scenario, load, slo, target, matrix)| {
            let mut t = format!("name = {}\n", name.unwrap_or_else(|| "\"p\"".into()));
            if !matrix.is_empty() {
                t.push_str("[matrix]\n");
                let mut seen = std::collections::BTreeSet::new();
                for (k, vals) in matrix.into_iter().filter(|(k, _)| seen.insert(k.clone())) {
                    t.push_str(&format!("{k} = [{}]\n", vals.join(", ")));
                }
            }
            if let Some(target) = target {
                t.push_str("[[target]]\nname = \"t\"\n");
                t.push_str(&target);
            }
            // The scenario's own keys come first, so a generated `name`/`url` wins.
            t.push_str("[[scenario]]\n");
            t.push_str(&scenario);
            if !scenario.contains("name =") {
                t.push_str("name = \"s\"\n");
            }
            if !scenario.contains("url =") {
                t.push_str("url = \"http://127.0.0.1:1/\"\n");
            }
            t.push_str("[load]\n");
            t.push_str(&load);
            if !load.contains("steps =") && !load.contains("knee =") && !load.contains("together =")
            {
                t.push_str("steps = [1]\n");
            }
            t.push_str("[slo]\n");
            t.push_str(&slo);
            t
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any plan built from the plan's keys loads or is refused with a typed error naming a
    /// key, with or without `--quick`.
    #[test]
    fn any_plan_loads_or_names_a_key(text in plan_text(), quick: bool) {
        match parse(&text, quick) {
            Ok(plan) => {
                prop_assert_eq!(&plan.name, plan.name.trim());
                prop_assert!(!plan.scenarios.is_empty());
                let configs = plan.configs();
                prop_assert!(configs.len() <= MAX_CONFIGURATIONS);
            }
            Err(e) => assert_names_a_key(&e, &text),
        }
    }

    /// Arbitrary text is a plan or a typed error, never a panic.
    #[test]
    fn arbitrary_text_is_refused_with_a_typed_error(text in "(?s).{0,200}") {
        match parse(&text, false) {
            Ok(plan) => prop_assert!(!plan.scenarios.is_empty()),
            Err(e) => assert_names_a_key(&e, &text),
        }
    }

    /// A matrix is accepted exactly when its product is within the bound, and then expands
    /// to that many configurations.
    #[test]
    fn matrix_product_is_bounded(sizes in prop::collection::vec(1usize..=40, 0..8)) {
        let mut text = String::from("name = \"m\"\n[matrix]\n");
        for (i, n) in sizes.iter().enumerate() {
            let vals: Vec<String> = (0..*n).map(|v| v.to_string()).collect();
            text.push_str(&format!("p{i} = [{}]\n", vals.join(",")));
        }
        text.push_str("[[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:1/\"\n[load]\nsteps = [1]\n");
        let product = sizes.iter().try_fold(1usize, |p, n| p.checked_mul(*n));
        match (parse(&text, false), product) {
            (Ok(plan), Some(p)) if p <= MAX_CONFIGURATIONS => {
                prop_assert_eq!(plan.configs().len(), p);
            }
            (Err(PlanError::Field { field, allowed, .. }), p) if p.is_none_or(|p| p > MAX_CONFIGURATIONS) => {
                prop_assert_eq!(field, "matrix");
                prop_assert!(allowed.contains(&MAX_CONFIGURATIONS.to_string()), "{}", allowed);
            }
            (other, p) => prop_assert!(false, "product {:?} gave {:?}", p, other.map(|p| p.matrix)),
        }
    }
}

/// Regression: a matrix of 10^9 configurations was accepted and expanded at run time
/// (memory and time without bound); it is refused when the plan loads, naming `[matrix]`.
#[test]
fn a_billion_configurations_are_refused_not_expanded() {
    let mut text = String::from("name = \"big\"\n[matrix]\n");
    for i in 0..9 {
        text.push_str(&format!("p{i} = [0,1,2,3,4,5,6,7,8,9]\n"));
    }
    text.push_str(
        "[[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:1/\"\n[load]\nsteps = [1]\n",
    );
    let e = parse(&text, false).expect_err("a billion configurations");
    let message = e.to_string();
    assert!(
        matches!(&e, PlanError::Field { field, .. } if field == "matrix"),
        "{message}"
    );
    assert!(
        message.contains("1000000000 configurations (p0: 10, p1: 10,"),
        "{message}"
    );
    assert!(
        message.contains("at most 10000 configurations"),
        "{message}"
    );
    // Twenty lists of ten: the product overflows usize, refused the same way.
    let mut text = String::from("name = \"huge\"\n[matrix]\n");
    for i in 0..20 {
        text.push_str(&format!("p{i} = [0,1,2,3,4,5,6,7,8,9]\n"));
    }
    text.push_str(
        "[[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:1/\"\n[load]\nsteps = [1]\n",
    );
    let e = parse(&text, false).expect_err("10^20 configurations");
    assert!(
        e.to_string().contains("at most 10000 configurations"),
        "{e}"
    );
}

/// The `--quick` overlay's matrix is bounded too: it replaces lists before validation.
#[test]
fn a_quick_matrix_is_bounded_too() {
    let mut text = String::from("name = \"q\"\n[matrix]\na = [1]\n");
    text.push_str(
        "[[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:1/\"\n[load]\nsteps = [1]\n",
    );
    text.push_str("[quick.matrix]\n");
    let vals: Vec<String> = (0..200).map(|v| v.to_string()).collect();
    text.push_str(&format!("a = [{}]\n", vals.join(",")));
    assert!(parse(&text, true).is_ok(), "200 configurations are allowed");
    let mut text = text.replace("[quick.matrix]\n", "[quick.matrix]\nb = [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51]\n");
    text = text.replace("[matrix]\na = [1]\n", "[matrix]\na = [1]\nb = [1]\n");
    let e = parse(&text, true).expect_err("200 x 51 configurations");
    assert!(
        e.to_string()
            .contains("10200 configurations (a: 200, b: 51)"),
        "{e}"
    );
}

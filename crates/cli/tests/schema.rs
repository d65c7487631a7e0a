//! The committed schema is itself checked: it accepts real results (every other test
//! validates its result too) and rejects broken ones.

mod util;

use util::{assert_schema_valid, run, Behavior, TestServer};

#[test]
fn schema_rejects_results_that_break_the_contract() {
    let s = TestServer::start(Behavior::Ok);
    let r = run(&[&s.url("/"), "-n", "50", "-c", "2", "-q"]);
    let good = r.json().clone();
    assert_schema_valid(&good);

    let validator = jsonschema::validator_for(&util::schema()).unwrap();
    let mut missing = good.clone();
    missing.as_object_mut().unwrap().remove("achieved_rps");
    assert!(
        !validator.is_valid(&missing),
        "a missing field must be rejected"
    );
    let mut wrong = good.clone();
    wrong["latency_ms"]["p99"] = serde_json::json!("fast");
    assert!(
        !validator.is_valid(&wrong),
        "a string latency must be rejected"
    );
    let mut extra = good.clone();
    extra["errors"]
        .as_object_mut()
        .unwrap()
        .remove("request_timeout");
    assert!(
        !validator.is_valid(&extra),
        "every error class must be listed"
    );
}

#[test]
fn histograms_in_the_result_decode_and_match_the_summary() {
    let s = TestServer::start(Behavior::Ok);
    let r = run(&[&s.url("/"), "-n", "500", "-c", "2", "-q"]);
    let j = r.json();
    let h = loadlab_engine::records::decode_histogram(j["histograms"]["latency"].as_str().unwrap())
        .unwrap();
    assert_eq!(h.len(), 500);
    let p99 = h.value_at_quantile(0.99) as f64 / 1000.0;
    assert_eq!(j["latency_ms"]["p99"].as_f64().unwrap(), p99);
    let per_second = j["histograms"]["per_second_latency"].as_array().unwrap();
    assert_eq!(per_second.len(), j["per_second"].as_array().unwrap().len());
    let total: u64 = per_second
        .iter()
        .map(|s| {
            loadlab_engine::records::decode_histogram(s.as_str().unwrap())
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(total, 500);
}

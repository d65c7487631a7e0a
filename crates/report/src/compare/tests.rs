//! The comparison's rules on synthetic series: known differences are found, identical data
//! is within the noise, and knee ranges that overlap (or touch at a borderline step) are
//! not resolved.

use hdrhistogram::Histogram;
use loadlab_engine::Model;
use loadlab_lab::verdict::Limit;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::input::{Level, Run, Series};
use super::*;

/// One second of `n` latencies uniform in `[lo_ms, hi_ms]`.
fn second(rng: &mut SmallRng, n: usize, lo_ms: f64, hi_ms: f64) -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 3_600_000_000, 2).unwrap();
    for _ in 0..n {
        h.record((1000.0 * rng.gen_range(lo_ms..=hi_ms)) as u64)
            .unwrap();
    }
    h
}

/// A sustained run of `seconds` seconds at `rate` req/s, latency uniform in `[lo, hi]` ms.
fn run(seed: u64, seconds: usize, rate: u64, lo: f64, hi: f64) -> Run {
    let mut rng = SmallRng::seed_from_u64(seed);
    Run::synthetic(
        (0..seconds)
            .map(|_| second(&mut rng, rate as usize, lo, hi))
            .collect(),
        vec![rate; seconds],
        Some(true),
        false,
    )
}

fn level(load: f64, runs: Vec<Run>) -> Level {
    Level {
        load,
        runs,
        excluded: 0,
    }
}

/// A level whose one run carries only a verdict (for knee tests).
fn verdict(load: f64, sustained: bool, unresolved: bool) -> Level {
    level(
        load,
        vec![Run::synthetic(
            Vec::new(),
            Vec::new(),
            Some(sustained),
            unresolved,
        )],
    )
}

fn knee(sustained: Option<f64>, not_sustained: Option<f64>) -> KneeRange {
    KneeRange {
        sustained,
        not_sustained,
        limited_by: not_sustained.map(|_| Limit::Latency),
        source: KneeSource::FixedSteps,
        confirmed: false,
        non_monotonic: false,
    }
}

fn series(config: &str, k: Option<KneeRange>, levels: Vec<Level>) -> Series {
    Series {
        scenario: "sleep".into(),
        config: config.into(),
        model: Model::Open,
        unit: "req/s",
        knee: k,
        levels,
    }
}

fn knees(a: &Series, b: &Series) -> KneeComparison {
    knee::compare(
        (a.knee.as_ref().unwrap(), a, "A"),
        (b.knee.as_ref().unwrap(), b, "B"),
        "req/s",
    )
}

/// workers=2 fails at 50; workers=16 holds 50 and fails at 200.
fn workers_2_and_16(clean_at_50: bool) -> (Series, Series) {
    let a = series(
        "workers=2",
        Some(knee(Some(10.0), Some(50.0))),
        vec![
            verdict(10.0, true, false),
            verdict(50.0, false, false),
            verdict(200.0, false, false),
        ],
    );
    let b = series(
        "workers=16",
        Some(knee(Some(50.0), Some(200.0))),
        vec![
            verdict(10.0, true, false),
            verdict(50.0, true, !clean_at_50),
            verdict(200.0, false, false),
        ],
    );
    (a, b)
}

#[test]
fn knee_ranges_apart_with_a_clean_step_between_are_a_difference() {
    let (a, b) = workers_2_and_16(true);
    let k = knees(&a, &b);
    assert_eq!(k.finding, Finding::Better, "{}", k.why);
    assert!((k.change.unwrap() - 4.0).abs() < 1e-9, "{k:?}");
    // Between 10 and 50 against between 50 and 200: 50/50 - 1 to 200/10 - 1.
    assert_eq!(k.change_range, [Some(0.0), Some(19.0)]);
    assert!(
        k.evidence
            .contains("A was not sustained at 50 (latency), B sustained 50"),
        "{}",
        k.evidence
    );
    // The other way round: lower, and the closest the ranges allow is no change at all.
    let k = knees(&b, &a);
    assert_eq!(k.finding, Finding::Worse, "{}", k.why);
    assert_eq!(k.change_range, [Some(-0.95), Some(0.0)]);
}

#[test]
fn touching_knee_ranges_at_a_borderline_step_are_not_resolved() {
    // workers=16 held 50 only within what its count could resolve: nothing separates.
    let (a, b) = workers_2_and_16(false);
    let k = knees(&a, &b);
    assert_eq!(k.finding, Finding::Borderline, "{}", k.why);
    assert!(k.why.contains("B held 50 only within"), "{}", k.why);
}

#[test]
fn overlapping_knee_ranges_are_not_resolved_by_the_step_spacing() {
    let levels = || {
        [50.0, 100.0, 200.0, 400.0]
            .map(|l| verdict(l, l <= 100.0, false))
            .into()
    };
    let a = series("c", Some(knee(Some(50.0), Some(200.0))), levels());
    let b = series("c", Some(knee(Some(100.0), Some(400.0))), levels());
    let k = knees(&a, &b);
    assert_eq!(k.finding, Finding::NotResolvedBySteps, "{}", k.why);
    assert!(!k.finding.is_difference());
    assert!(
        k.why.contains("not resolved by the step spacing"),
        "{}",
        k.why
    );
    // Neither reached its knee: the same open range.
    let a = series("c", Some(knee(Some(800.0), None)), levels());
    let k = knees(&a, &a);
    assert_eq!(k.finding, Finding::SameRange);
    assert_eq!(k.change_range, [Some(-1.0), None]);
    // loadlab was the limit: nothing to compare.
    let u = series("c", Some(knee(None, None)), levels());
    assert_eq!(knees(&a, &u).finding, Finding::NotComparable);
}

#[test]
fn a_knee_at_least_above_a_failed_step_is_lower_by_a_bounded_amount() {
    // The baseline held 10, 40 and 80; the other failed at 40: at least 50 % lower.
    let a = series(
        "workers=16",
        Some(knee(Some(80.0), None)),
        [10.0, 40.0, 80.0].map(|l| verdict(l, true, false)).into(),
    );
    let b = series(
        "workers=2",
        Some(knee(Some(10.0), Some(40.0))),
        vec![verdict(10.0, true, false), verdict(40.0, false, false)],
    );
    let k = knees(&a, &b);
    assert_eq!(k.finding, Finding::Worse, "{}", k.why);
    assert_eq!(k.change_range, [Some(-1.0), Some(-0.5)]);
}

fn step(a: Vec<Run>, b: Vec<Run>) -> StepComparison {
    compare_step(&level(50.0, a), &level(50.0, b), &Method::default())
}

#[test]
fn a_known_p99_difference_is_found_with_its_size() {
    // 30 % slower throughout, 10 seconds of 200 requests each.
    let s = step(
        vec![run(1, 10, 200, 90.0, 110.0)],
        vec![run(2, 10, 200, 117.0, 143.0)],
    );
    assert_eq!(s.p99.finding, Finding::Worse, "{}", s.p99.why);
    // The interval holds the true 30 %, to the per-second histograms' 1 % precision.
    let [lo, hi] = s.p99.ci.unwrap();
    assert!(lo > 0.05 && lo <= 0.31 && hi >= 0.29, "{:?}", s.p99.ci);
    assert!(
        s.p99.why.contains("99.9 % CI") && s.p99.why.contains("10+10 per-second histograms"),
        "{}",
        s.p99.why
    );
    // The same throughput: within the noise.
    assert_eq!(
        s.achieved.finding,
        Finding::WithinNoise,
        "{}",
        s.achieved.why
    );
    assert_eq!(s.achieved.change, Some(0.0));
}

#[test]
fn identical_steps_are_within_the_noise() {
    let s = step(
        vec![run(3, 10, 200, 90.0, 110.0)],
        vec![run(3, 10, 200, 90.0, 110.0)],
    );
    assert_eq!(s.p99.finding, Finding::WithinNoise, "{}", s.p99.why);
    assert_eq!(s.p99.change, Some(0.0));
    // Other draws of the same latency: within the noise too.
    for seed in 10..20 {
        let s = step(
            vec![run(seed, 8, 150, 90.0, 110.0)],
            vec![run(seed + 100, 8, 150, 90.0, 110.0)],
        );
        assert!(!s.p99.finding.is_difference(), "{}", s.p99.why);
    }
}

#[test]
fn a_resolved_change_inside_the_noise_threshold_is_not_called() {
    // 1 % slower, very steadily: resolved, but the interval stays within ±5 %.
    let s = step(
        vec![run(4, 30, 500, 100.0, 100.5)],
        vec![run(5, 30, 500, 101.0, 101.5)],
    );
    assert_eq!(s.p99.finding, Finding::BelowThreshold, "{}", s.p99.why);
    let [lo, _] = s.p99.ci.unwrap();
    assert!(lo > 0.0, "{:?}", s.p99.ci);
}

#[test]
fn overlapping_repeats_hold_back_a_resolved_change() {
    // Each side ran the step twice; pooled, B's p99 is steadily above A's, but B's first run
    // is below A's second: run-to-run noise covers the change.
    let s = step(
        vec![run(6, 20, 200, 100.0, 101.0), run(7, 20, 200, 120.0, 121.0)],
        vec![run(8, 20, 200, 115.0, 116.0), run(9, 20, 200, 140.0, 141.0)],
    );
    let [lo, _] = s.p99.ci.unwrap();
    assert!(lo > 0.05, "the interval alone resolves it: {:?}", s.p99.ci);
    assert_eq!(s.p99.finding, Finding::WithinRepeatSpread, "{}", s.p99.why);
    assert_eq!(s.baseline.runs, 2);
    assert!(s.p99.why.contains("2 runs"), "{}", s.p99.why);
}

#[test]
fn too_few_seconds_are_not_tested() {
    // Ten times slower, but 3 seconds a side could be ordered so by chance 1 time in 10.
    let s = step(
        vec![run(10, 3, 400, 90.0, 110.0)],
        vec![run(11, 3, 400, 900.0, 1100.0)],
    );
    assert_eq!(s.p99.finding, Finding::TooLittleData, "{}", s.p99.why);
    assert_eq!(s.achieved.finding, Finding::TooLittleData);
    assert!(s.p99.change.unwrap() > 5.0);
    assert!(s.p99.why.contains("7 a side would do"), "{}", s.p99.why);
}

#[test]
fn single_configurations_are_paired_and_the_rest_listed() {
    assert_eq!(
        sole_configs(&["workers=2", "workers=2"], &["workers=16"]),
        Some(["workers=2".to_string(), "workers=16".to_string()])
    );
    assert_eq!(sole_configs(&["a"], &["a"]), None);
    assert_eq!(sole_configs(&["a", "b"], &["c"]), None);

    let sleep = |config: &str| {
        series(
            config,
            None,
            vec![level(10.0, vec![run(1, 8, 10, 100.0, 101.0)])],
        )
    };
    let mut health = sleep("workers=2");
    health.scenario = "health".into();
    let a = Input::synthetic(vec![sleep("workers=2"), health]);
    let b = Input::synthetic(vec![sleep("workers=16")]);
    let c = compare(&[&a, &b], &Method::default());
    let pair = &c.pairs[0];
    assert_eq!(
        pair.paired_configs,
        Some(["workers=2".to_string(), "workers=16".to_string()])
    );
    assert_eq!(pair.series.len(), 1);
    assert_eq!(
        pair.series[0].name(),
        "sleep / workers=16 against workers=2"
    );
    assert_eq!(
        pair.only_in_baseline,
        vec![SeriesKey {
            scenario: "health".into(),
            config: "workers=2".into()
        }]
    );
    assert!(pair.only_in_other.is_empty());
    let text = text::render(&c);
    assert!(
        text.contains("only in A (not matched by scenario and configuration): health / workers=2"),
        "{text}"
    );
    // The JSON shape decodes back into the same value.
    let json = serde_json::to_string(&c).unwrap();
    assert_eq!(serde_json::from_str::<Comparison>(&json).unwrap(), c);
}

#[test]
fn a_p99_that_is_a_few_slowest_responses_is_not_tested() {
    // 10 req/s for 9 s: the p99 of 90 responses is the slowest one. One stray slow response
    // in the baseline (a second at 134 ms, the others near 106 ms) must not read as a change.
    let mut rng = SmallRng::seed_from_u64(12);
    let mut seconds: Vec<Histogram<u64>> =
        (0..9).map(|_| second(&mut rng, 10, 104.0, 110.0)).collect();
    seconds[6].record(134_000).unwrap();
    let a = Run::synthetic(seconds, vec![10; 9], Some(true), false);
    let s = step(vec![a], vec![run(13, 9, 10, 101.0, 106.0)]);
    assert_eq!(s.p99.finding, Finding::TooLittleData, "{}", s.p99.why);
    assert!(
        s.p99
            .why
            .contains("rests on the slowest 1; testing it needs 1,000 responses a side"),
        "{}",
        s.p99.why
    );
    assert!(s.p99.change.unwrap() < -0.15, "{:?}", s.p99.change);
}

/// A run whose one request name `name` had `n` latencies uniform in `[lo, hi]` ms (its
/// histogram over the window only, as a run keeps a name's).
fn named_run(seed: u64, n: usize, lo: f64, hi: f64) -> Run {
    let mut rng = SmallRng::seed_from_u64(seed);
    // 3 significant digits, as the engine records a name's latency.
    let mut h = Histogram::new_with_bounds(1, 3_600_000_000, 3).unwrap();
    for _ in 0..n {
        h.record((1000.0 * rng.gen_range(lo..=hi)) as u64).unwrap();
    }
    run(seed, 8, 100, 90.0, 110.0).with_name("checkout", &h, n as f64 / 8.0, Some(true))
}

fn named(config: &str, runs: Vec<Run>) -> Series {
    series(config, None, vec![level(50.0, runs)])
}

/// The one name's comparison at the one load.
fn name_step(a: Vec<Run>, b: Vec<Run>) -> names::NameStepComparison {
    let (a, b) = (named("c", a), named("c", b));
    let mut n = names::compare(&a, &b, &Method::default()).unwrap();
    assert_eq!(n.names.len(), 1);
    n.names.remove(0).steps.remove(0)
}

#[test]
fn a_names_p99_is_at_most_within_the_noise_never_a_difference() {
    // The same latency drawn twice, 5,000 responses a side: within the noise.
    let s = name_step(
        vec![named_run(1, 5000, 90.0, 110.0)],
        vec![named_run(2, 5000, 90.0, 110.0)],
    );
    assert_eq!(s.p99.finding, Finding::WithinNoise, "{}", s.p99.why);
    let [lo, hi] = s.p99.ci.unwrap();
    assert!(lo < 0.0 && hi > 0.0 && hi - lo < 0.05, "{:?}", s.p99.ci);
    assert!(
        s.p99
            .why
            .contains("order statistics of 5000+5000 responses taken as independent"),
        "{}",
        s.p99.why
    );
    // Twice as slow: the optimistic interval excludes no change, but without per-second
    // data per name that is no evidence: not tested, no interval given.
    let s = name_step(
        vec![named_run(3, 5000, 90.0, 110.0)],
        vec![named_run(4, 5000, 180.0, 220.0)],
    );
    assert_eq!(s.p99.finding, Finding::TooLittleData, "{}", s.p99.why);
    assert!(s.p99.ci.is_none());
    assert!(
        (s.p99.change.unwrap() - 1.0).abs() < 0.02,
        "{:?}",
        s.p99.change
    );
    assert!(
        s.p99
            .why
            .contains("not tested for noise (no per-second data per name)")
            && s.p99.why.contains("no difference is called"),
        "{}",
        s.p99.why
    );
    // Achieved is shown, never tested.
    assert_eq!(s.achieved.finding, Finding::TooLittleData);
    assert_eq!(s.achieved.change, Some(0.0));
    // Fewer than 1,000 responses: the p99 is not looked at, as the whole's.
    let s = name_step(
        vec![named_run(5, 500, 90.0, 110.0)],
        vec![named_run(6, 500, 90.0, 110.0)],
    );
    assert_eq!(s.p99.finding, Finding::TooLittleData, "{}", s.p99.why);
    assert!(s
        .p99
        .why
        .contains("testing it needs 1,000 responses a side"));
}

#[test]
fn repeated_runs_of_a_name_are_pooled() {
    let s = name_step(
        vec![
            named_run(7, 2000, 90.0, 110.0),
            named_run(8, 2000, 90.0, 110.0),
        ],
        vec![named_run(9, 4000, 90.0, 110.0)],
    );
    assert_eq!(s.baseline.runs, 2);
    assert_eq!(s.baseline.responses, 4000);
    assert_eq!(s.baseline.sustained, Some(true));
    assert_eq!(s.p99.finding, Finding::WithinNoise, "{}", s.p99.why);
}

#[test]
fn the_order_statistic_interval_of_a_quantile_covers_it_as_often_as_it_says() {
    // 400 samples of 1,000 latencies uniform in 0..100 ms (true p99: 99 ms), at 90 %: the
    // interval holds 99 ms in about 90 % of them, and never reaches past the data.
    let mut rng = SmallRng::seed_from_u64(42);
    let mut covered = 0;
    for _ in 0..400 {
        let h = second(&mut rng, 1000, 0.0, 100.0);
        let c = bootstrap::Counts::of(&h);
        let (lo, hi) = names::quantile_bounds(&c, 0.99, 0.9).unwrap();
        assert!(lo <= hi && hi <= h.max());
        // Values are recorded to 2 significant digits: 99 ms is the bucket 99,000..99,999 µs.
        if lo <= 99_999 && hi >= 99_000 {
            covered += 1;
        }
    }
    assert!((340..=400).contains(&covered), "{covered} of 400");
    // Too few values to bound a p99 at 99.9 %: no interval.
    let mut h = Histogram::<u64>::new(2).unwrap();
    for v in 1..=50u64 {
        h.record(v).unwrap();
    }
    assert_eq!(
        names::quantile_bounds(&bootstrap::Counts::of(&h), 0.99, 0.999),
        None
    );
}

#[test]
fn streams_of_repeated_runs_take_the_worst_percentile_and_are_never_a_difference() {
    let streams = |first: f64, gap: f64, stalls: Option<u64>| StreamFigures {
        streams: 4,
        first_message_p50_ms: Some(first),
        first_message_p99_ms: Some(2.0 * first),
        gap_p50_ms: Some(gap),
        gap_p99_ms: Some(2.0 * gap),
        window_stalls: stalls,
        stream_seconds: 40,
        failed_stream_seconds: (gap > 60.0).into(),
    };
    let s = step(
        vec![
            run(1, 3, 20, 40.0, 60.0).with_streams(streams(10.0, 50.0, None)),
            run(2, 3, 20, 40.0, 60.0).with_streams(streams(30.0, 45.0, None)),
        ],
        vec![run(3, 3, 20, 90.0, 110.0).with_streams(streams(12.0, 100.0, None))],
    );
    // Percentiles do not merge: the repeats' worst, never an average no run had; counts add.
    let a = s.baseline.streams.unwrap();
    assert_eq!(a.streams, 8);
    assert_eq!(
        (a.first_message_p99_ms, a.gap_p50_ms, a.gap_p99_ms),
        (Some(60.0), Some(50.0), Some(100.0))
    );
    assert_eq!(a.window_stalls, None);
    // Stream-seconds add up over the repeats.
    assert_eq!((a.stream_seconds, a.failed_stream_seconds), (80, 0));
    let b = s.other.streams.unwrap();
    assert_eq!((b.stream_seconds, b.failed_stream_seconds), (40, 1));
    // Stalls of streams that send add up; a side without them is none, not zero.
    assert_eq!(
        StreamFigures::over([
            streams(1.0, 1.0, Some(3)),
            streams(1.0, 1.0, None),
            streams(1.0, 1.0, Some(4)),
        ])
        .unwrap()
        .window_stalls,
        Some(7)
    );
    assert_eq!(StreamFigures::over([]), None);
    // A run without streams has none to show.
    assert_eq!(
        step(vec![run(1, 3, 20, 1.0, 2.0)], vec![]).baseline.streams,
        None
    );
}

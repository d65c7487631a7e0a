//! The search against model servers whose knee is a known function of their knobs, each
//! step judged with noise through the real knee search and race.

use super::*;
use crate::knee::{self, KneeParams, StepSignal};
use crate::verdict::Limit;

/// The fixture of `bench/tune.sh`: `b` has an optimum inside its range, `mode` changes
/// nothing, `cost` only costs. 5 × 2 × 5 = 50 configurations.
/// A configuration's parameters.
type Params = [(String, String)];
/// A matrix, and its configurations.
type Matrix = (Vec<(String, Vec<String>)>, Vec<Vec<(String, String)>>);
/// What the model's diagnosis says of a configuration.
type Diagnose<'a> = &'a dyn Fn(&Params) -> (Option<Bottleneck>, Vec<String>);

fn fixture() -> Matrix {
    let matrix = vec![
        (
            "b".to_string(),
            ["1", "3", "5", "7", "9"].map(String::from).to_vec(),
        ),
        (
            "cost".to_string(),
            ["0", "1", "2", "3", "4"].map(String::from).to_vec(),
        ),
        ("mode".to_string(), ["x", "y"].map(String::from).to_vec()),
    ];
    let mut configs = Vec::new();
    for b in &matrix[0].1 {
        for c in &matrix[1].1 {
            for m in &matrix[2].1 {
                configs.push(vec![
                    ("b".to_string(), b.clone()),
                    ("cost".to_string(), c.clone()),
                    ("mode".to_string(), m.clone()),
                ]);
            }
        }
    }
    (matrix, configs)
}

/// The fixture's capacity (req/s); `bench/tune.sh` computes the same.
fn capacity(params: &[(String, String)]) -> f64 {
    let get = |k: &str| params.iter().find(|(n, _)| n == k).unwrap().1.as_str();
    let b = match get("b") {
        "1" => 0.4,
        "3" => 0.7,
        "5" => 0.9,
        "7" => 1.0,
        _ => 0.8,
    };
    let cost: f64 = get("cost").parse().unwrap();
    400.0 * b * (1.0 - 0.15 * cost)
}

struct Model<'a> {
    configs: &'a [Vec<(String, String)>],
    cap: &'a dyn Fn(&Params) -> f64,
    /// What the diagnosis says at a configuration's first unsustained step.
    diagnose: Diagnose<'a>,
    rng: Rng,
    params: KneeParams,
    order: Vec<usize>,
    /// The share of steps that are generator-limited.
    glitches: f64,
}

impl Evaluator for Model<'_> {
    type Error = ();
    fn eval(&mut self, config: usize, race: Option<Race>, _why: &str) -> Result<Eval, ()> {
        self.order.push(config);
        let cap = (self.cap)(&self.configs[config]);
        let rng = &mut self.rng;
        let mut steps = 0;
        let glitches = self.glitches;
        // Sustained when the load is under the capacity, give or take 2 % of noise; a few
        // steps are generator-limited (a shared machine), which ends a search.
        let mut step = |v: f64, _| {
            steps += 1;
            if rng.unit() < glitches {
                return StepSignal::NotSustained(Limit::GeneratorLimited);
            }
            let noisy = cap * (1.0 + 0.04 * (rng.unit() - 0.5));
            if v <= noisy {
                StepSignal::Sustained
            } else {
                StepSignal::NotSustained(Limit::Latency)
            }
        };
        let o = match race {
            Some(r) => knee::race(self.params, r, &mut step),
            None => knee::search(self.params, &mut step),
        };
        let (bottleneck, named) = (self.diagnose)(&self.configs[config]);
        // As tune's own evaluation: a search stopped by loadlab is ranked on its floor.
        let not_the_server = o.limited_by == Some(Limit::GeneratorLimited) || o.stopped.is_some();
        Ok(Eval {
            lo: o.knee,
            hi: o.first_unsustained.filter(|_| !not_the_server),
            not_the_server,
            dropped: o.dropped(),
            bottleneck,
            named,
            steps,
            load_s: steps as f64,
            ..Eval::default()
        })
    }
    fn stopped(&self) -> bool {
        false
    }
}

fn params() -> KneeParams {
    KneeParams {
        start: 5.0,
        max: 2000.0,
        precision: 0.05,
        growth: 2.0,
        integer: false,
        confirm: 1,
        poisson_s: None,
    }
}

/// Full-search steps of every configuration (what the full product costs).
fn full_product_steps(configs: &[Vec<(String, String)>], cap: &dyn Fn(&Params) -> f64) -> usize {
    configs
        .iter()
        .map(|c| {
            let k = cap(c);
            let mut n = 0;
            knee::search(params(), &mut |v, _| {
                n += 1;
                if v <= k {
                    StepSignal::Sustained
                } else {
                    StepSignal::NotSustained(Limit::Latency)
                }
            });
            n
        })
        .sum()
}

#[test]
fn finds_the_fixtures_best_in_a_fraction_of_the_product() {
    let (matrix, configs) = fixture();
    let space = Space::new(&matrix, &configs, &|_| Vec::new());
    assert!(space.knobs[0].ordered && !space.knobs[2].ordered);
    let best_cap = configs.iter().map(|c| capacity(c)).fold(0.0, f64::max);
    let full = full_product_steps(&configs, &capacity);
    let budget = default_budget(configs.len());
    assert_eq!(budget, Budget::Configs(15));
    let (mut good, mut worst_evals, mut worst_share) = (0, 0, 0.0f64);
    let runs = 200;
    for seed in 0..runs {
        let mut m = Model {
            configs: &configs,
            cap: &capacity,
            diagnose: &|_| (None, Vec::new()),
            rng: Rng(seed ^ 0xABCD),
            params: params(),
            order: Vec::new(),
            glitches: 0.02,
        };
        let o = search(&space, &mut m, budget, seed).unwrap();
        let b = o.best.expect("a best configuration");
        let named = capacity(&configs[o.trials[b].config]);
        if named >= 0.95 * best_cap {
            good += 1;
        }
        worst_evals = worst_evals.max(o.trials.len());
        let steps: usize = o.trials.iter().map(|t| t.eval.steps).sum();
        worst_share = worst_share.max(steps as f64 / full as f64);
    }
    // The targets: within 5 % of the best in 9 of 10 runs, at most 15 of the 50
    // configurations, at most 20 % of the full product's load.
    assert!(
        good * 10 >= runs * 9,
        "{good} of {runs} runs found a configuration within 5 %"
    );
    assert!(worst_evals <= 15, "{worst_evals} configurations evaluated");
    assert!(
        worst_share <= 0.20,
        "{:.0} % of the full product's steps",
        100.0 * worst_share
    );
    eprintln!("{good} of {runs} within 5 %, at most {worst_evals} evaluated, at most {:.1} % of the product's steps", 100.0 * worst_share);
}

#[test]
fn a_knob_that_relieves_the_diagnosed_bottleneck_is_tried_first() {
    // Document 000's /sleep: capacity = workers × 10 req/s, backlog changes nothing; the
    // diagnosis says concurrency-bound and names the workers setting.
    let matrix = vec![
        (
            "backlog".to_string(),
            ["16", "1024"].map(String::from).to_vec(),
        ),
        (
            "workers".to_string(),
            ["2", "16"].map(String::from).to_vec(),
        ),
    ];
    let configs: Vec<Vec<(String, String)>> = ["16", "1024"]
        .iter()
        .flat_map(|b| {
            ["2", "16"].iter().map(move |w| {
                vec![
                    ("backlog".to_string(), b.to_string()),
                    ("workers".to_string(), w.to_string()),
                ]
            })
        })
        .collect();
    let workers = |c: &[(String, String)]| c[1].1.parse::<f64>().unwrap();
    let cap = move |c: &[(String, String)]| 10.0 * workers(c);
    let diagnose = |c: &[(String, String)]| {
        (
            Some(Bottleneck::ConcurrencyBound),
            vec![format!("workers={}", c[1].1)],
        )
    };
    for seed in 0..20 {
        let space = Space::new(&matrix, &configs, &|_| Vec::new());
        let mut m = Model {
            configs: &configs,
            cap: &cap,
            diagnose: &diagnose,
            rng: Rng(seed),
            params: params(),
            order: Vec::new(),
            glitches: 0.0,
        };
        let o = search(&space, &mut m, default_budget(4), seed).unwrap();
        // The start is the lower middle (backlog 16, workers 2); the diagnosis named
        // workers=2, so workers 16 comes next, then backlog; then the search has tried
        // every neighbour of the best. (When noise puts backlog 1024's range above
        // backlog 16's, that one is the best and its other neighbour is tried too.)
        let ids: Vec<String> = m
            .order
            .iter()
            .map(|&i| format!("{}/{}", configs[i][0].1, configs[i][1].1))
            .collect();
        assert_eq!(ids[..3], ["16/2", "16/16", "1024/16"], "seed {seed}");
        let all = if ids.len() == 4 {
            Ended::Exhausted
        } else {
            Ended::Converged
        };
        assert_eq!(o.ended, all);
        assert!(
            o.trials[1].reason.contains("the diagnosis named workers=2"),
            "{}",
            o.trials[1].reason
        );
        assert_eq!(configs[o.trials[o.best.unwrap()].config][1].1, "16");
    }
    // With `relieves` in the plan and no parameter named, the same order.
    let space = Space::new(&matrix, &configs, &|k| {
        if k == "workers" {
            vec![Bottleneck::ConcurrencyBound]
        } else {
            Vec::new()
        }
    });
    let mut m = Model {
        configs: &configs,
        cap: &cap,
        diagnose: &|_| (Some(Bottleneck::ConcurrencyBound), Vec::new()),
        rng: Rng(7),
        params: params(),
        order: Vec::new(),
        glitches: 0.0,
    };
    let o = search(&space, &mut m, Budget::Configs(2), 7).unwrap();
    assert_eq!(m.order, [0, 1]);
    assert_eq!(o.ended, Ended::Budget);
    assert!(o.trials[1]
        .reason
        .contains("more workers relieves the concurrency-bound limit"));
}

#[test]
fn a_worse_newcomer_is_dropped_in_the_race_and_an_excluded_middle_is_skipped() {
    let matrix = vec![("n".to_string(), ["1", "2", "3"].map(String::from).to_vec())];
    // The middle (n=2) is excluded: the start is the nearest configuration.
    let configs = vec![
        vec![("n".to_string(), "1".to_string())],
        vec![("n".to_string(), "3".to_string())],
    ];
    let space = Space::new(&matrix, &configs, &|_| Vec::new());
    assert_eq!(space.find(&[1]), None);
    let cap = |c: &[(String, String)]| if c[0].1 == "1" { 100.0 } else { 40.0 };
    let mut m = Model {
        configs: &configs,
        cap: &cap,
        diagnose: &|_| (None, Vec::new()),
        rng: Rng(1),
        params: params(),
        order: Vec::new(),
        glitches: 0.0,
    };
    let o = search(&space, &mut m, Budget::Configs(10), 1).unwrap();
    // n=3 is not a neighbour of n=1 (n=2 lies between, excluded): the search converges.
    assert_eq!(o.trials.len(), 1);
    assert_eq!(o.ended, Ended::Converged);
    // Two ordered values side by side: the lower one is the start, and a worse newcomer
    // is dropped after the two race steps.
    let matrix = vec![("n".to_string(), ["1", "3"].map(String::from).to_vec())];
    let space = Space::new(&matrix, &configs, &|_| Vec::new());
    let cap = |c: &[(String, String)]| if c[0].1 == "1" { 100.0 } else { 40.0 };
    let mut m = Model {
        configs: &configs,
        cap: &cap,
        diagnose: &|_| (None, Vec::new()),
        rng: Rng(1),
        params: params(),
        order: Vec::new(),
        glitches: 0.0,
    };
    let o = search(&space, &mut m, Budget::Configs(10), 1).unwrap();
    assert_eq!(o.trials.len(), 2);
    assert!(o.trials[1].eval.dropped, "{:?}", o.trials[1]);
    assert_eq!(o.trials[1].eval.steps, 2);
    assert_eq!(o.trials[1].race_at, o.trials[0].eval.lo);
    assert_eq!(o.best, Some(0));
    assert!(o.trials[0].eval.resolved_above(&o.trials[1].eval));
}

#[test]
fn a_load_budget_stops_before_the_next_configuration() {
    let (matrix, configs) = fixture();
    let space = Space::new(&matrix, &configs, &|_| Vec::new());
    let mut m = Model {
        configs: &configs,
        cap: &capacity,
        diagnose: &|_| (None, Vec::new()),
        rng: Rng(3),
        params: params(),
        order: Vec::new(),
        glitches: 0.0,
    };
    // One step costs one "second" in the model: 10 s is spent by the first search.
    let o = search(&space, &mut m, Budget::LoadSeconds(10.0), 3).unwrap();
    assert_eq!(o.ended, Ended::Budget);
    let spent: f64 = o.trials.iter().map(|t| t.eval.load_s).sum();
    let before_last: f64 = spent - o.trials.last().unwrap().eval.load_s;
    assert!(before_last < 10.0 && spent >= 10.0, "{spent}");
}

#[test]
fn a_race_reuses_the_best_knees_bracket_and_drops_only_on_two_failures() {
    let p = KneeParams {
        confirm: 1,
        precision: 0.1,
        ..params()
    };
    let at_cap = |cap: f64| {
        move |v: f64, _| {
            if v <= cap {
                StepSignal::Sustained
            } else {
                StepSignal::NotSustained(Limit::Latency)
            }
        }
    };
    let race = Race {
        at: 160.0,
        then: Some(170.0),
    };
    // Equal to the best: 160 held, 170 not: the bracket is already narrow, both ends are
    // confirmed: 4 steps, where a search from 160 would climb to 320 and bisect back.
    let mut loads = Vec::new();
    let cap = at_cap(165.0);
    let o = knee::race(p, race, &mut |v, ph| {
        loads.push(v);
        cap(v, ph)
    });
    assert_eq!(loads, [160.0, 170.0, 160.0, 170.0]);
    assert_eq!(o.range, Some([160.0, 170.0]));
    assert!(o.confirmed && !o.dropped());
    // Better: past 170 the search grows from there.
    let mut loads = Vec::new();
    let cap = at_cap(500.0);
    let o = knee::race(p, race, &mut |v, ph| {
        loads.push(v);
        cap(v, ph)
    });
    assert_eq!(loads[..3], [160.0, 170.0, 340.0]);
    assert!(o.knee.unwrap() >= 340.0 && o.first_unsustained.unwrap() > 500.0 * 0.99);
    // Worse: not sustained twice at 160, dropped there.
    let mut loads = Vec::new();
    let cap = at_cap(100.0);
    let o = knee::race(p, race, &mut |v, ph| {
        loads.push(v);
        cap(v, ph)
    });
    assert_eq!(loads, [160.0, 160.0]);
    assert!(o.dropped() && o.knee.is_none() && o.first_unsustained == Some(160.0));
    // Not sustained once, sustained on the repeat: not dropped, and said to disagree.
    let mut n = 0;
    let o = knee::race(p, race, &mut |v, _| {
        n += 1;
        if n == 1 || v > 165.0 {
            StepSignal::NotSustained(Limit::Latency)
        } else {
            StepSignal::Sustained
        }
    });
    assert!(!o.dropped());
    assert!(o.non_monotonic.iter().any(|m| m.contains("race")), "{o:?}");
}

#[test]
fn an_incumbent_limited_by_loadlab_is_replaced_by_a_higher_floor() {
    let trial = |config, lo, hi, not_the_server| Trial {
        config,
        race_at: None,
        reason: String::new(),
        eval: Eval {
            lo: Some(lo),
            hi,
            not_the_server,
            ..Eval::default()
        },
    };
    // The start's search ended generator-limited at 160 (its knee: at least 160): a
    // newcomer that held 250 to 260 is better, though not "resolvably" against an unknown
    // ceiling.
    let trials = [
        trial(0, 160.0, None, true),
        trial(1, 250.0, Some(260.0), false),
    ];
    assert_eq!(best(&trials), Some(1));
    // A server-limited incumbent is replaced only by a range wholly above its own.
    let trials = [
        trial(0, 250.0, Some(260.0), false),
        trial(1, 255.0, Some(265.0), false),
        trial(2, 260.0, Some(270.0), false),
    ];
    assert_eq!(best(&trials), Some(2));
}

#[test]
fn a_boundary_load_one_side_sustained_in_some_runs_separates_nothing() {
    // CI at 8b08296: pool=4 with a knob that changes nothing; mode=a sustained 79.69 in 2
    // of 2 runs (knee 79.69 to 84.67), mode=b in 1 of 2 (knee 74.38 to 79.69, and 85 failed
    // in its only run). Touching ranges were called a resolved difference.
    let a = Eval {
        lo: Some(79.6875),
        hi: Some(84.66796875),
        ..Eval::default()
    };
    let mut b = Eval {
        lo: Some(74.375),
        hi: Some(79.6875),
        beyond_mixed: Some(85.0),
        ..Eval::default()
    };
    assert!(!a.resolved_above(&b) && !b.resolved_above(&a));
    // Had every run of b failed at 79.69, the step would separate them.
    b.beyond_mixed = None;
    assert!(a.resolved_above(&b));
    // Nothing above a sustained-once `hi` failed in every run: no ceiling at all.
    b.beyond_mixed = Some(f64::INFINITY);
    assert!(!Eval {
        lo: Some(1e9),
        ..Eval::default()
    }
    .resolved_above(&b));
}

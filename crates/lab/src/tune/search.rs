//! The search of `loadlab tune`, over anything that evaluates a configuration (the lab, or
//! a model in the tests): a hill climb from the middle of the matrix that moves one knob at
//! a time, tries first what the incumbent's diagnosis and the effects measured so far
//! point at, and races every newcomer at the incumbent's knee.
//!
//! - **Start**: the middle value of each ordered knob (numbers, in numeric order), a value
//!   of each category chosen by the seed; a full knee search.
//! - **Neighbours** of the incumbent (the best so far: replaced only by a knee resolvably
//!   higher, its lowest possible value at or above the incumbent's highest): one
//!   step up or down an ordered knob, any other value of a category.
//! - **Priorities**: more of a knob that relieves the incumbent's bottleneck (the plan's
//!   `[tune.knobs]`, or the parameter the diagnosis named, such as `workers=2` at a
//!   concurrency limit); the direction that moved the knee before on that knob (measured
//!   on one-knob-apart pairs); a knob not moved yet; a knob whose moves changed nothing the
//!   measurement resolves comes last. The seed breaks ties.
//! - **Racing**: a newcomer runs first at the incumbent's knee; not sustained there twice,
//!   it is dropped after those steps; sustained, its next step is the top of the
//!   incumbent's range (the bracket reused: a newcomer that only matches the incumbent is
//!   done after confirming it), and its search grows from there.
//! - **End**: when every neighbour of the incumbent was tried (a local optimum), or the
//!   budget is spent, or the run is stopped.

use crate::diagnosis::Bottleneck;
pub use crate::knee::Race;
use crate::plan::Budget;

/// One knob (matrix parameter) of the space.
#[derive(Clone, Debug, PartialEq)]
pub struct Knob {
    /// The parameter's name.
    pub name: String,
    /// Values in search order: ascending for a numeric knob, as written for a category.
    pub values: Vec<String>,
    /// Every value is a number: neighbours are the next value up and down.
    pub ordered: bool,
    /// Bottlenecks that more of it relieves (`[tune.knobs]`).
    pub relieves: Vec<Bottleneck>,
}

/// The configurations as points: one coordinate (value index) per knob.
#[derive(Clone, Debug)]
pub struct Space {
    /// Knobs in the plan's parameter order.
    pub knobs: Vec<Knob>,
    /// Per configuration (in the plan's order), its value index on each knob.
    pub coords: Vec<Vec<usize>>,
}

impl Space {
    /// The space of `configs` (each a list of `(parameter, value)`), over `matrix`'s
    /// parameters; `relieves` gives each knob's `[tune.knobs]` entry.
    pub fn new(
        matrix: &[(String, Vec<String>)],
        configs: &[Vec<(String, String)>],
        relieves: &dyn Fn(&str) -> Vec<Bottleneck>,
    ) -> Space {
        let knobs: Vec<Knob> = matrix
            .iter()
            .map(|(name, values)| {
                let nums: Option<Vec<f64>> = values.iter().map(|v| v.parse().ok()).collect();
                let mut values = values.clone();
                let ordered = nums.is_some() && values.len() > 1;
                if let Some(nums) = nums {
                    let mut pairs: Vec<(f64, String)> = nums.into_iter().zip(values).collect();
                    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
                    values = pairs.into_iter().map(|(_, v)| v).collect();
                }
                Knob {
                    name: name.clone(),
                    relieves: relieves(name),
                    values,
                    ordered,
                }
            })
            .collect();
        let coords = configs
            .iter()
            .map(|params| {
                knobs
                    .iter()
                    .map(|k| {
                        let v = params
                            .iter()
                            .find(|(n, _)| n == &k.name)
                            .map(|(_, v)| v.as_str());
                        k.values
                            .iter()
                            .position(|x| Some(x.as_str()) == v)
                            .unwrap_or(0)
                    })
                    .collect()
            })
            .collect();
        Space { knobs, coords }
    }

    /// The configuration at these coordinates, unless excluded.
    pub fn find(&self, coords: &[usize]) -> Option<usize> {
        self.coords.iter().position(|c| c == coords)
    }

    /// The one knob in which configurations `a` and `b` differ, if exactly one.
    pub fn one_apart(&self, a: usize, b: usize) -> Option<usize> {
        let mut differ = (0..self.knobs.len()).filter(|&k| self.coords[a][k] != self.coords[b][k]);
        match (differ.next(), differ.next()) {
            (Some(k), None) => Some(k),
            _ => None,
        }
    }

    /// `name=value` of configuration `i` on knob `k`.
    pub fn setting(&self, i: usize, k: usize) -> String {
        format!(
            "{}={}",
            self.knobs[k].name, self.knobs[k].values[self.coords[i][k]]
        )
    }
}

/// What evaluating one configuration found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Eval {
    /// The highest load sustained in every run (`None`: none was).
    pub lo: Option<f64>,
    /// The lowest load above it not sustained (`None`: not reached).
    pub hi: Option<f64>,
    /// Dropped in the race: not sustained at the incumbent's knee.
    pub dropped: bool,
    /// It did not run (unavailable, its target failed): no knee.
    pub failed: bool,
    /// The knee was not reached for a reason that is not the server's (generator-limited,
    /// an agent lost): `lo` is a lower bound only.
    pub not_the_server: bool,
    /// When some run sustained `hi` (its runs disagreed): the lowest load above it that no
    /// run sustained (`INFINITY`: none was tried). A load sustained in one run and not in
    /// another bounds nothing: the knee may lie above it. `None` when no run sustained `hi`.
    pub beyond_mixed: Option<f64>,
    /// The first bottleneck the diagnosis found at `hi`.
    pub bottleneck: Option<Bottleneck>,
    /// Matrix parameters the diagnosis named (`workers=2`).
    pub named: Vec<String>,
    /// Steps run.
    pub steps: usize,
    /// Load time spent, seconds (warm-up and measured time of its steps).
    pub load_s: f64,
}

impl Eval {
    /// The knee is at least this.
    pub fn floor(&self) -> f64 {
        self.lo.unwrap_or(0.0)
    }

    /// The knee is below this: `hi`, or past a `hi` some run sustained, the first load no
    /// run did.
    pub fn ceiling(&self) -> f64 {
        self.beyond_mixed
            .unwrap_or_else(|| self.hi.unwrap_or(f64::INFINITY))
    }

    /// Its knee is above `other`'s whatever the step spacing hid: its lowest possible knee
    /// is at or above `other`'s highest.
    pub fn resolved_above(&self, other: &Eval) -> bool {
        !self.failed && !other.failed && self.lo.is_some() && self.floor() >= other.ceiling()
    }
}

/// Evaluates configurations (runs their knee searches).
pub trait Evaluator {
    /// What can stop the search.
    type Error;
    /// Evaluates configuration `config`; with `race`, raced at the best knee so far first.
    /// `why` is the reason it was chosen (for progress lines).
    fn eval(&mut self, config: usize, race: Option<Race>, why: &str) -> Result<Eval, Self::Error>;
    /// The run was stopped: evaluate nothing more.
    fn stopped(&self) -> bool;
}

/// Why the search ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// Every neighbour of the best configuration was tried: a local optimum.
    Converged,
    /// The budget was spent.
    Budget,
    /// Every configuration was tried.
    Exhausted,
    /// The run was stopped.
    Interrupted,
}

/// One configuration tried.
#[derive(Clone, Debug)]
pub struct Trial {
    /// The configuration (index in the plan's order).
    pub config: usize,
    /// The load it was raced at (the incumbent's knee then).
    pub race_at: Option<f64>,
    /// Why it was tried.
    pub reason: String,
    /// What it found.
    pub eval: Eval,
}

/// The search's outcome.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Every configuration tried, in order.
    pub trials: Vec<Trial>,
    /// The best trial (highest knee), if any configuration has a knee.
    pub best: Option<usize>,
    /// Why it ended.
    pub ended: Ended,
}

/// A small deterministic generator (SplitMix64): the seed's only use is to break ties and
/// pick the categories' first values.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The best trial (the incumbent): the first with a knee, replaced only by one whose knee
/// is resolvably higher (its lowest possible knee at or above the incumbent's highest). A
/// newcomer that only matched the incumbent within the step spacing does not replace it:
/// noise would otherwise move the search to an equal configuration's neighbours. An
/// incumbent whose search ended on loadlab's own limit (generator-limited: its knee is only
/// known to be at least its floor) is replaced by any higher floor.
pub fn best(trials: &[Trial]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, t) in trials.iter().enumerate() {
        if t.eval.failed || t.eval.lo.is_none() {
            continue;
        }
        let replaces = |b: &Eval| {
            t.eval.resolved_above(b)
                // The incumbent's search ended on loadlab's limit, not the server's: its
                // knee is known only to be at least its floor, so a higher floor wins.
                || (b.not_the_server && t.eval.floor() > b.floor())
        };
        if best.is_none_or(|b| replaces(&trials[b].eval)) {
            best = Some(i);
        }
    }
    best
}

/// What the trials so far say of moving knob `k` up (its values ascending): +1 when a
/// move up resolvably raised the knee (or a move down lowered it), -1 the reverse, summed
/// over every one-knob-apart pair; and whether some pair showed no resolved difference.
fn trend(space: &Space, trials: &[Trial], k: usize) -> (i32, usize, usize) {
    let (mut net, mut pairs, mut flat) = (0, 0, 0);
    for (i, a) in trials.iter().enumerate() {
        for b in &trials[i + 1..] {
            if a.eval.failed || b.eval.failed || space.one_apart(a.config, b.config) != Some(k) {
                continue;
            }
            pairs += 1;
            let up = space.coords[b.config][k] > space.coords[a.config][k];
            let (low, high) = if up { (a, b) } else { (b, a) };
            if high.eval.resolved_above(&low.eval) {
                net += 1;
            } else if low.eval.resolved_above(&high.eval) {
                net -= 1;
            } else {
                flat += 1;
            }
        }
    }
    (net, pairs, flat)
}

/// Configuration `c` was tried and told something: a try that ended on loadlab's own limit
/// before any load was sustained (generator-limited in its race) says nothing of the
/// server, and the configuration may be tried once more.
fn tried(trials: &[Trial], c: usize) -> bool {
    let mine = trials.iter().filter(|t| t.config == c);
    let (mut n, mut told) = (0, false);
    for t in mine {
        n += 1;
        told |= !(t.eval.not_the_server && t.eval.lo.is_none());
    }
    told || n >= 2
}

/// A candidate move from the incumbent and how strongly the evidence points at it.
struct Candidate {
    config: usize,
    priority: f64,
    why: String,
}

fn candidates(space: &Space, trials: &[Trial], inc: &Trial, rng: &mut Rng) -> Vec<Candidate> {
    let tried = |c: usize| tried(trials, c);
    let here = &space.coords[inc.config];
    let mut out = Vec::new();
    for (k, knob) in space.knobs.iter().enumerate() {
        let moves: Vec<(usize, i32)> = if knob.ordered {
            [-1i32, 1]
                .iter()
                .filter_map(|&d| {
                    let v = here[k] as i64 + d as i64;
                    (v >= 0 && (v as usize) < knob.values.len()).then_some((v as usize, d))
                })
                .collect()
        } else {
            (0..knob.values.len())
                .filter(|&v| v != here[k])
                .map(|v| (v, 0))
                .collect()
        };
        let (net, pairs, flat) = trend(space, trials, k);
        let setting = space.setting(inc.config, k);
        for (v, dir) in moves {
            let mut c = here.clone();
            c[k] = v;
            let Some(config) = space.find(&c) else {
                continue;
            };
            if tried(config) {
                continue;
            }
            let mut priority = rng.unit();
            let mut why = Vec::new();
            let relieves = inc
                .eval
                .bottleneck
                .is_some_and(|b| knob.relieves.contains(&b));
            if relieves {
                let b = inc.eval.bottleneck.map_or("", |b| b.label());
                match dir {
                    1 => {
                        priority += 100.0;
                        why.push(format!(
                            "more {} relieves the {b} limit the diagnosis found",
                            knob.name
                        ));
                    }
                    -1 => priority -= 30.0,
                    _ => {
                        priority += 50.0;
                        why.push(format!(
                            "{} relieves the {b} limit the diagnosis found",
                            knob.name
                        ));
                    }
                }
            }
            if inc.eval.named.iter().any(|n| n == &setting) {
                match dir {
                    1 => {
                        priority += 80.0;
                        why.push(format!("the diagnosis named {setting}"));
                    }
                    -1 => priority -= 30.0,
                    _ => {}
                }
            }
            if dir != 0 && net != 0 {
                let with = (net > 0) == (dir > 0);
                priority += if with { 60.0 } else { -60.0 };
                if with {
                    why.push(format!(
                        "{} {} raised the knee before",
                        if dir > 0 { "more" } else { "less" },
                        knob.name
                    ));
                }
            }
            if pairs == 0 {
                priority += 20.0;
                why.push(format!("{} not moved yet", knob.name));
            } else if flat == pairs {
                priority -= 40.0;
            }
            if why.is_empty() {
                why.push(if pairs > 0 && flat == pairs {
                    format!(
                        "a neighbour ({} changed nothing resolved so far)",
                        knob.name
                    )
                } else {
                    "a neighbour of the best so far".to_string()
                });
            }
            out.push(Candidate {
                config,
                priority,
                why: format!("{}: {}", space.setting(config, k), why.join("; ")),
            });
        }
    }
    out.sort_by(|a, b| b.priority.total_cmp(&a.priority));
    out
}

/// The starting configuration: the middle of each ordered knob, a seeded value of each
/// category; excluded, the nearest configuration that is not.
fn start(space: &Space, rng: &mut Rng) -> usize {
    let want: Vec<usize> = space
        .knobs
        .iter()
        .map(|k| {
            if k.ordered {
                (k.values.len() - 1) / 2
            } else {
                (rng.next() % k.values.len() as u64) as usize
            }
        })
        .collect();
    (0..space.coords.len())
        .min_by_key(|&i| {
            space.coords[i]
                .iter()
                .zip(&want)
                .map(|(a, b)| a.abs_diff(*b))
                .sum::<usize>()
        })
        .unwrap_or(0)
}

/// Runs the search within `budget`.
pub fn search<E: Evaluator>(
    space: &Space,
    ev: &mut E,
    budget: Budget,
    seed: u64,
) -> Result<Outcome, E::Error> {
    let mut rng = Rng(seed);
    let first = start(space, &mut rng);
    let mut trials: Vec<Trial> = Vec::new();
    let ended = loop {
        if ev.stopped() {
            break Ended::Interrupted;
        }
        if (0..space.coords.len()).all(|c| tried(&trials, c)) {
            break Ended::Exhausted;
        }
        let spent: f64 = trials.iter().map(|t| t.eval.load_s).sum();
        match budget {
            Budget::Configs(n) if trials.len() >= n => break Ended::Budget,
            Budget::LoadSeconds(s) if spent >= s => break Ended::Budget,
            _ => {}
        }
        let (config, race_at, why) = match best(&trials) {
            None if trials.is_empty() => (
                first,
                None,
                "the start: the middle of each ordered knob".to_string(),
            ),
            // Nothing has a knee yet (the start failed or sustained nothing): the nearest
            // untried configuration, searched in full.
            None => {
                let near = (0..space.coords.len())
                    .filter(|&c| !tried(&trials, c))
                    .min_by_key(|&c| {
                        space.coords[c]
                            .iter()
                            .zip(&space.coords[first])
                            .map(|(a, b)| a.abs_diff(*b))
                            .sum::<usize>()
                    })
                    .expect("an untried configuration remains");
                (
                    near,
                    None,
                    "no configuration has a knee yet: the nearest to the start".into(),
                )
            }
            Some(b) => {
                let inc = trials[b].clone();
                match candidates(space, &trials, &inc, &mut rng)
                    .into_iter()
                    .next()
                {
                    Some(c) => (
                        c.config,
                        inc.eval.lo.map(|at| Race {
                            at,
                            then: inc.eval.hi,
                        }),
                        c.why,
                    ),
                    None => break Ended::Converged,
                }
            }
        };
        let eval = ev.eval(config, race_at, &why)?;
        trials.push(Trial {
            config,
            race_at: race_at.map(|r| r.at),
            reason: why,
            eval,
        });
    };
    Ok(Outcome {
        best: best(&trials),
        trials,
        ended,
    })
}

/// The default budget for a matrix of `n` configurations: 30 % of them, at least 4 (or
/// all of them, when fewer).
pub fn default_budget(n: usize) -> Budget {
    Budget::Configs(n.min(4.max((n * 3).div_ceil(10))))
}

#[cfg(test)]
mod tests;

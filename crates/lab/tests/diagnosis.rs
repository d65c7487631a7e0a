//! The diagnosis rules on recorded steps: real bundles of the source plans at `--quick`
//! (committed under `tests/fixtures/diagnosis/`), replayed through the same tracker the lab
//! uses, and variants of their steps where a rule must not fire.

use std::path::Path;

use loadlab_engine::ErrorClass;
use loadlab_lab::bundle::StepRecord;
use loadlab_lab::diagnosis::{Bottleneck, Diagnosis, Tracker};
use loadlab_lab::verdict::Limit;
use loadlab_system::probe::CpusTicks;

fn steps(name: &str) -> Vec<StepRecord> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/diagnosis")
        .join(format!("{name}.steps.jsonl"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).expect("a step record"))
        .collect()
}

fn tracker() -> Tracker {
    let mut t = Tracker::default();
    t.somaxconn = Some(4096);
    t.ports = Some(28232);
    t
}

/// Every step of a bundle through one tracker, in order.
fn replay(steps: &[StepRecord]) -> Vec<Option<Diagnosis>> {
    let mut t = tracker();
    steps.iter().map(|s| t.step(s)).collect()
}

fn kinds(d: &Diagnosis) -> Vec<Bottleneck> {
    d.findings.iter().map(|f| f.bottleneck).collect()
}

#[test]
fn sleep_over_workers_names_the_workers_and_sustained_steps_have_no_diagnosis() {
    let steps = steps("backlog-workers");
    let mut named = 0;
    for (s, d) in steps.iter().zip(replay(&steps)) {
        if s.verdict.sustained {
            // Health at 800 req/s included: no diagnosis for what held.
            assert!(d.is_none(), "{} {} {}", s.config, s.scenario, s.load);
            continue;
        }
        let d = d.expect("every step not sustained is diagnosed");
        assert_eq!(s.scenario, "sleep");
        let workers = &s.params.iter().find(|(k, _)| k == "workers").unwrap().1;
        let c = d
            .findings
            .iter()
            .find(|f| f.bottleneck == Bottleneck::ConcurrencyBound)
            .unwrap_or_else(|| panic!("{} at {}: {:?}", s.config, s.load, kinds(&d)));
        let n: f64 = workers.parse().unwrap();
        let est = c.figures["in_service"];
        assert!(
            (est - n).abs() <= 0.2 * n,
            "{} at {}: ≈{est} for {n} workers",
            s.config,
            s.load
        );
        assert_eq!(
            c.parameter.as_deref(),
            Some(format!("workers={workers}").as_str())
        );
        assert!(!kinds(&d).contains(&Bottleneck::CpuBound));
        assert!(
            !kinds(&d).contains(&Bottleneck::AcceptQueue),
            "no overflow was recorded"
        );
        named += 1;
    }
    assert!(named >= 4, "{named} steps named their workers");
}

/// The first step not sustained of a configuration with 16 workers.
fn saturated(steps: &[StepRecord]) -> (usize, StepRecord) {
    let i = steps
        .iter()
        .position(|s| !s.verdict.sustained && s.config.contains("workers=16"))
        .unwrap();
    (i, steps[i].clone())
}

/// Replays the steps with step `i` replaced by `step`; its diagnosis.
fn diagnose_variant(steps: &[StepRecord], i: usize, step: StepRecord) -> Option<Diagnosis> {
    let mut v = steps[..i].to_vec();
    v.push(step);
    replay(&v).pop().unwrap()
}

/// `s` with its target using `used` of its CPUs and waiting `waited` of their time to run
/// (fractions), and its CPUs busy `busy` of the time in every second of the probe (`None`:
/// not read, as in the recorded runs).
fn with_cpu(mut s: StepRecord, used: f64, waited: f64, busy: Option<f64>) -> StepRecord {
    let p = s.probes.as_mut().unwrap();
    let cpus = p.limits.as_ref().unwrap().cpus;
    p.delta.cpu_percent = 100.0 * used * cpus;
    p.delta.cpu_wait_percent = 100.0 * waited * cpus;
    p.delta.cpus_busy_share = busy;
    for (k, sample) in p.samples.iter_mut().enumerate() {
        if let Some(pr) = sample.process.as_mut() {
            pr.cpus_ticks = busy.map(|b| CpusTicks {
                busy: (1000.0 * b * k as f64) as u64,
                total: 1000 * k as u64,
            });
        }
    }
    s
}

#[test]
fn cpu_bound_needs_the_cpu_figure_and_a_step_not_sustained() {
    let steps = steps("backlog-workers");
    let (i, mut s) = saturated(&steps);
    // The same step with its target's CPUs full: CPU-bound, and no longer concurrency-bound
    // (that rule needs the CPU low).
    let p = s.probes.as_mut().unwrap();
    let cpus = p.limits.as_ref().unwrap().cpus;
    p.delta.cpu_percent = 97.0 * cpus;
    let d = diagnose_variant(&steps, i, s.clone()).unwrap();
    assert!(kinds(&d).contains(&Bottleneck::CpuBound), "{:?}", kinds(&d));
    assert!(!kinds(&d).contains(&Bottleneck::ConcurrencyBound));
    // CPU high but the step sustained: nothing to diagnose.
    let mut held = s.clone();
    held.verdict.sustained = true;
    held.verdict.limits.clear();
    assert!(diagnose_variant(&steps, i, held).is_none());
    // Without the target's CPU limits (an older bundle), neither CPU rule fires.
    s.probes.as_mut().unwrap().limits = None;
    let d = diagnose_variant(&steps, i, s).unwrap();
    assert!(!kinds(&d).contains(&Bottleneck::CpuBound));
    assert!(!kinds(&d).contains(&Bottleneck::ConcurrencyBound));
}

#[test]
fn a_target_starved_of_its_cpus_is_cpu_bound_not_idle() {
    let steps = steps("backlog-workers");
    let (i, s) = saturated(&steps);
    let diagnosed = |used: f64, waited: f64| {
        diagnose_variant(
            &steps,
            i,
            with_cpu(s.clone(), used / 100.0, waited / 100.0, None),
        )
        .unwrap()
    };
    // Used 55 % of its CPUs and waited 40 % for them behind other processes: the CPU is
    // the limit (a shared one), and the target is not idle, so no pool is blamed.
    let d = diagnosed(55.0, 40.0);
    let c = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::CpuBound)
        .unwrap_or_else(|| panic!("{:?}", kinds(&d)));
    assert!(c.evidence.contains("used 55 %"), "{}", c.evidence);
    assert!(
        c.evidence.contains("waited 40 % of the time"),
        "{}",
        c.evidence
    );
    assert!(c.evidence.contains("CPUs it shares"), "{}", c.evidence);
    assert!((c.figures["demand"] - 0.95).abs() < 1e-9);
    assert!(
        !kinds(&d).contains(&Bottleneck::ConcurrencyBound),
        "{:?}",
        kinds(&d)
    );
    assert!(
        !kinds(&d).contains(&Bottleneck::Timeouts),
        "{:?}",
        kinds(&d)
    );
    // Used 30 %, waited 5 %: idle enough; the CPU is not named, the pool is.
    let d = diagnosed(30.0, 5.0);
    assert!(
        !kinds(&d).contains(&Bottleneck::CpuBound),
        "{:?}",
        kinds(&d)
    );
    assert!(
        kinds(&d).contains(&Bottleneck::ConcurrencyBound),
        "{:?}",
        kinds(&d)
    );
    // Used 97 %: CPU-bound by its own work, said as before.
    let d = diagnosed(97.0, 30.0);
    let c = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::CpuBound)
        .unwrap();
    assert!(!c.evidence.contains("shares"), "{}", c.evidence);
}

#[test]
fn a_few_overflows_after_latency_exploded_are_not_the_bottleneck() {
    let steps = steps("backlog-workers");
    let (i, s) = saturated(&steps);
    // Overflows of the target's queue, with what they cost loadlab's connections: a dropped
    // handshake waits for a retransmission, 1 s at least.
    let with_overflows_at = |sample: usize, n: u64| {
        let mut s = s.clone();
        let p = s.probes.as_mut().unwrap();
        for x in &mut p.samples[sample..] {
            x.kernel.listen_overflows += n;
        }
        p.delta.listen_overflows += n;
        s.result.latency_ms.max = Some(1004.0);
        s
    };
    // Three overflows in the last sample, long after latency rose: a symptom.
    let last = s.probes.as_ref().unwrap().samples.len() - 1;
    let d = diagnose_variant(&steps, i, with_overflows_at(last, 3)).unwrap();
    assert!(
        !kinds(&d).contains(&Bottleneck::AcceptQueue),
        "{:?}",
        kinds(&d)
    );
    // Many of them: named whenever they came.
    let d = diagnose_variant(&steps, i, with_overflows_at(last, 5000)).unwrap();
    let q = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::AcceptQueue)
        .expect("accept queue");
    assert!(
        q.evidence
            .contains("the plan set backlog=16, somaxconn is 4096"),
        "{}",
        q.evidence
    );
    // In the first interval, before latency rose: named, with the order said.
    let d = diagnose_variant(&steps, i, with_overflows_at(1, 3)).unwrap();
    let q = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::AcceptQueue)
        .expect("accept queue");
    assert!(q.evidence.contains("before latency rose"), "{}", q.evidence);
}

/// The overflow counters are the network namespace's: another listener's overflows (a test
/// filling its own queue beside the run, another server on the host) while every connection
/// and request of loadlab's took under the second a dropped handshake costs are not the
/// target's, however many and however early; with a request that waited a second, they are.
#[test]
fn overflows_of_another_listener_are_not_the_targets() {
    let steps = steps("backlog-workers");
    let (i, s) = saturated(&steps);
    let mut other = s.clone();
    let p = other.probes.as_mut().unwrap();
    for x in &mut p.samples[1..] {
        x.kernel.listen_overflows += 5000;
    }
    p.delta.listen_overflows += 5000;
    let slowest = s.result.latency_ms.max.unwrap();
    assert!(slowest < 1000.0 && s.result.errors_total == 0, "{slowest}");
    let d = diagnose_variant(&steps, i, other.clone()).unwrap();
    assert!(
        !kinds(&d).contains(&Bottleneck::AcceptQueue),
        "{:?}",
        kinds(&d)
    );
    assert!(
        d.ruled_out
            .iter()
            .any(|r| r.contains("5000 listen-queue overflows")
                && r.contains("none of them on loadlab's connections")
                && r.contains("another listener's queue overflowed")),
        "{:?}",
        d.ruled_out
    );
    // A request that waited past a retransmission, or one that failed: the target's, maybe.
    let mut waited = other.clone();
    waited.result.latency_ms.max = Some(1001.0);
    let d = diagnose_variant(&steps, i, waited).unwrap();
    assert!(
        kinds(&d).contains(&Bottleneck::AcceptQueue),
        "{:?}",
        kinds(&d)
    );
    let mut failed = other;
    failed.result.errors_total = 1;
    let d = diagnose_variant(&steps, i, failed).unwrap();
    assert!(
        kinds(&d).contains(&Bottleneck::AcceptQueue),
        "{:?}",
        kinds(&d)
    );
}

/// Where the target's own listening sockets were read (their drops, from the kernel's
/// socket diagnostics), they decide: the namespace's overflows with none at the target's
/// listener are another's, even with requests that failed and waited; drops at its own
/// listener are named with its port and backlog, from when they began.
#[test]
fn the_targets_own_listener_decides_whose_queue_overflowed() {
    use loadlab_system::probe::{ListenDelta, ListenSample};
    let steps = steps("backlog-workers");
    let (i, s) = saturated(&steps);
    let with = |own_drops_from: Option<usize>| {
        let mut s = s.clone();
        s.result.errors_total = 40;
        s.result.latency_ms.max = Some(3000.0);
        let p = s.probes.as_mut().unwrap();
        for (n, x) in p.samples.iter_mut().enumerate() {
            x.kernel.listen_overflows += 5000 * n as u64;
            let drops = own_drops_from.map_or(0, |from| 50 * n.saturating_sub(from) as u64);
            if let Some(proc) = x.process.as_mut() {
                proc.listen = Some(ListenSample {
                    ports: vec![8080],
                    queued: 3,
                    backlog: 511,
                    drops,
                });
            }
        }
        p.delta = loadlab_system::probe::ProbeDelta::from_samples(&p.samples);
        s
    };
    let theirs = with(None);
    let l = theirs
        .probes
        .as_ref()
        .unwrap()
        .delta
        .listen
        .clone()
        .unwrap();
    assert_eq!((l.drops, l.backlog, l.queued_max), (0, 511, 3), "{l:?}");
    let d = diagnose_variant(&steps, i, theirs).unwrap();
    assert!(
        !kinds(&d).contains(&Bottleneck::AcceptQueue),
        "{:?}",
        kinds(&d)
    );
    assert!(
        d.ruled_out.iter().any(|r| r.contains(
            "none at the target's own listening socket (port 8080: backlog 511, up to 3 seen \
             waiting): another listener's queue overflowed"
        )),
        "{:?}",
        d.ruled_out
    );
    let own = with(Some(1));
    let ListenDelta {
        drops,
        drops_from_s,
        ..
    } = own.probes.as_ref().unwrap().delta.listen.clone().unwrap();
    let t1 = own.probes.as_ref().unwrap().samples[1].t_s;
    assert_eq!(drops_from_s, Some(t1));
    assert!(drops > 0);
    let d = diagnose_variant(&steps, i, own).unwrap();
    let q = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::AcceptQueue)
        .expect("accept queue");
    assert!(
        q.evidence.starts_with(&format!(
            "the target's listen queue (port 8080: backlog 511, up to 3 seen waiting) dropped \
             {drops} connection attempts"
        )),
        "{}",
        q.evidence
    );
    assert_eq!(q.figures["listener_drops"], drops as f64);
    assert_eq!(q.figures["backlog"], 511.0);
}

#[test]
fn timeouts_with_the_cpu_low_and_the_latency_split() {
    let steps = steps("backlog-workers");
    let diagnoses = replay(&steps);
    let (s, d) = steps
        .iter()
        .zip(&diagnoses)
        .find(|(s, _)| s.result.errors.sum_of(&[ErrorClass::RequestTimeout]) > 0)
        .expect("a step with timeouts");
    let d = d.as_ref().unwrap();
    let t = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::Timeouts)
        .unwrap_or_else(|| panic!("{} at {}: {:?}", s.config, s.load, kinds(d)));
    assert!(t.evidence.contains("requests timed out"), "{}", t.evidence);
    // From the first step to this one, the latency grew in the server's service time
    // (requests wait in the server's queue for a worker), not in loadlab.
    let note = d.latency_note.as_deref().unwrap();
    assert_eq!(d.latency_split.len(), 2);
    let (a, b) = (&d.latency_split[0], &d.latency_split[1]);
    assert!(
        b.service_ms - a.service_ms > 0.5 * (b.latency_ms - a.latency_ms),
        "{note}"
    );
}

/// plans/proxy-pool-jvm.toml: a JVM whose two dispatcher threads are the pool uses half of
/// its core or more for its own threads (the JIT, the collector, the HTTP layer) while the
/// core idles the rest. Its demand is not low, but its CPUs had room: the timeouts are a
/// pool's. Full CPUs, unread ones, or one busy thread keep the rule from firing.
#[test]
fn timeouts_with_the_cpu_half_used_and_its_cpus_idle_are_a_pool() {
    let steps = steps("backlog-workers");
    let i = steps
        .iter()
        .position(|s| s.result.errors.sum_of(&[ErrorClass::RequestTimeout]) > 0)
        .expect("a step with timeouts");
    let on = |cpus: f64, used: f64, busy: Option<f64>, thread: Option<f64>| {
        let mut s = steps[i].clone();
        s.probes.as_mut().unwrap().limits.as_mut().unwrap().cpus = cpus;
        let mut s = with_cpu(s, used, 0.08 / cpus, busy);
        let p = s.probes.as_mut().unwrap();
        p.delta.busiest_thread_cpu = thread;
        p.delta.busiest_thread_wait = thread.map(|_| 0.01);
        p.delta.busiest_thread = thread.map(|_| "dispatcher-1".into());
        diagnose_variant(&steps, i, s).unwrap()
    };
    let variant = |used, busy, thread| on(1.0, used, busy, thread);
    let timeouts = |d: &Diagnosis| {
        d.findings
            .iter()
            .find(|f| f.bottleneck == Bottleneck::Timeouts)
            .cloned()
    };
    // Every finding's sentence (an unknown's says what ruled each bottleneck out).
    let unknown_or_ruled_out = |d: &Diagnosis| {
        let all: Vec<String> = d.findings.iter().map(|f| f.evidence.clone()).collect();
        all.join(" | ")
    };
    // 58 % used, its CPU busy 62 % of the time: the pool's timeouts.
    let d = variant(0.58, Some(0.62), Some(0.2));
    let t = timeouts(&d).unwrap_or_else(|| panic!("{:?}", kinds(&d)));
    assert!(
        t.evidence.contains(
            "while the target used 58 % of its CPUs, its CPUs idle 38 % of the time the timed-out requests waited: requests waited for a pool"
        ),
        "{}",
        t.evidence
    );
    assert!((t.figures["cpus_idle"] - 0.38).abs() < 1e-9);
    assert!(t.figures["demand"] >= 0.5, "{:?}", t.figures);
    // The same with a low demand: the sentence says no more than before.
    let d = variant(0.3, Some(0.35), Some(0.2));
    let t = timeouts(&d).unwrap();
    assert!(
        t.evidence
            .contains("the target used 30 % of its CPUs: requests waited"),
        "{}",
        t.evidence
    );
    // Full CPUs: the CPU may be what they waited for.
    let d = variant(0.58, Some(0.9), Some(0.2));
    assert!(timeouts(&d).is_none(), "{:?}", kinds(&d));
    let said = unknown_or_ruled_out(&d);
    // Used 58 % and waited 8 %, all of it behind others (busy 90 % > 58 %): demand 66 %.
    assert!(
        said.contains(
            "timeouts, but the target's CPU demand was 66 % of its CPUs, not below 50 %, and its CPUs idle 10 % of the time the timed-out requests waited, not 25 %"
        ),
        "{said}"
    );
    // Two CPUs idle 38 % of the time, but one thread that ran nearly all of it: that thread
    // is the limit, and the timeouts are not called a pool's.
    let d = on(2.0, 0.58, Some(0.62), Some(0.97));
    assert!(timeouts(&d).is_none(), "{:?}", kinds(&d));
    assert!(
        kinds(&d).contains(&Bottleneck::ThreadBound),
        "{:?}",
        kinds(&d)
    );
    assert!(!unknown_or_ruled_out(&d).contains("waited for a pool"));
    // Without that thread, the same two CPUs had room.
    assert!(timeouts(&on(2.0, 0.58, Some(0.62), Some(0.3))).is_some());
    // The CPUs' busy time not read (an older probe): demand alone, not low.
    let d = variant(0.58, None, Some(0.2));
    assert!(timeouts(&d).is_none(), "{:?}", kinds(&d));
}

#[test]
fn a_full_pool_with_its_cpus_idle_is_named_whatever_share_the_target_used() {
    let steps = steps("backlog-workers");
    let (i, s) = saturated(&steps);
    let with = |used: f64, busy: f64| {
        diagnose_variant(&steps, i, with_cpu(s.clone(), used, 0.05, Some(busy))).unwrap()
    };
    // 60 % used, its CPUs idle 37 % of the time its threads waited: the workers, said with
    // the idle share; at 27 %, close to the threshold, said so.
    for (busy, said) in [
        (0.63, "with 60 % CPU, its CPUs idle 37 % of the time its threads waited to run, and "),
        (0.73, "its CPUs idled 27 % of the time its threads waited to run, close to the 25 % below which they are not called idle"),
    ] {
        let d = with(0.6, busy);
        let c = d
            .findings
            .iter()
            .find(|f| f.bottleneck == Bottleneck::ConcurrencyBound)
            .unwrap_or_else(|| panic!("{busy}: {:?}", kinds(&d)));
        assert!(c.evidence.contains(said), "{}", c.evidence);
        assert!(c.parameter.as_deref().unwrap().starts_with("workers="));
    }
    // Full CPUs: not a pool's.
    let d = with(0.6, 0.9);
    assert!(
        !kinds(&d).contains(&Bottleneck::ConcurrencyBound),
        "{:?}",
        kinds(&d)
    );
}

/// A latency bound the lowest load already broke is said as such, first: no load meets
/// it. A bound the lowest load met is ruled out with the figure it was read against.
#[test]
fn a_latency_floor_above_the_bound_is_said_as_such() {
    use loadlab_lab::verdict::Limit;
    let steps = steps("backlog-workers");
    let (i, mut s) = saturated(&steps);
    if !s.verdict.limits.contains(&Limit::Latency) {
        s.verdict.limits.push(Limit::Latency);
    }
    let lowest = steps
        .iter()
        .find(|x| x.config == s.config && x.scenario == s.scenario)
        .unwrap();
    let first = &lowest.result.latency_ms;
    let (min, p99) = (first.min.unwrap(), first.p99.unwrap());
    assert!(lowest.verdict.sustained && min < p99, "{first:?}");
    let with_bound = |bound: f64| {
        let mut v = steps[..i].to_vec();
        v.push(s.clone());
        let mut t = tracker().with_latency_bounds(vec![(99.0, bound)]);
        v.iter().map(|s| t.step(s)).last().unwrap().unwrap()
    };
    // Below the fastest answer at the lowest load.
    let d = with_bound(min / 2.0);
    assert_eq!(
        d.findings[0].bottleneck,
        Bottleneck::LatencyFloor,
        "{:?}",
        kinds(&d)
    );
    let e = &d.findings[0].evidence;
    assert!(
        e.starts_with("the fastest answer at the lowest load, ") && e.ends_with("no load meets it"),
        "{e}"
    );
    // Between the fastest answer and the lowest load's p99, which kept pace: at rest.
    let d = with_bound((min + p99) / 2.0);
    assert_eq!(
        d.findings[0].bottleneck,
        Bottleneck::LatencyFloor,
        "{:?}",
        kinds(&d)
    );
    assert!(
        d.findings[0]
            .evidence
            .contains("its latency at rest, not the load, breaks the bound"),
        "{}",
        d.findings[0].evidence
    );
    assert_eq!(d.findings[0].figures["bound_ms"], (min + p99) / 2.0);
    // Above it: the load broke the bound, not the floor.
    let d = with_bound(p99 * 1.5);
    assert!(
        !kinds(&d).contains(&Bottleneck::LatencyFloor),
        "{:?}",
        kinds(&d)
    );
    assert!(
        d.ruled_out
            .iter()
            .any(|r| r.starts_with("latency floor above the SLO: at the lowest load, ")),
        "{:?}",
        d.ruled_out
    );
}

#[test]
fn nothing_found_is_said_with_what_was_looked_at() {
    let steps = steps("backlog-workers");
    let (i, mut s) = saturated(&steps);
    // Make the step's figures say nothing: no timeouts, CPU half used, throughput held.
    s.result.errors = Default::default();
    s.result.achieved_rps = s.load;
    let p = s.probes.as_mut().unwrap();
    p.delta.cpu_percent = 60.0 * p.limits.as_ref().unwrap().cpus;
    let d = diagnose_variant(&steps, i, s).unwrap();
    assert_eq!(kinds(&d), vec![Bottleneck::Unknown]);
    let e = &d.findings[0].evidence;
    // Each bottleneck is ruled out by what its rule saw, with the figure.
    assert!(
        e.starts_with("no rule had its evidence; ruled out: "),
        "{e}"
    );
    for said in [
        "CPU-bound: target CPU 60 % of its 1 CPU",
        "concurrency-bound: the target's CPU demand was 60 % of its CPUs, not below 50 %",
        "accept queue: 0 listen-queue overflows",
        "timeouts with the CPU to spare: no request timed out",
        "upstream (502, 504): 0 502 or 504 answers",
        "server refused (5xx): 0 5xx (but 502 and 504), 429 or 408 answers",
    ] {
        assert!(e.contains(said), "{said} not in: {e}");
    }
    // Every rule that looked said what it saw: all but crash and agent_lost (they do not
    // apply to a local, living target), latency_floor (this tracker has no latency bound)
    // and the six this older recording has no evidence for (cgroup quota, memory and pids
    // limits, the busiest thread, what the threads waited on, the host's steal), said under
    // "Not seen".
    assert_eq!(
        d.ruled_out.len(),
        loadlab_lab::diagnosis::rules::RULES.len() - 9,
        "{:?}",
        d.ruled_out
    );
    // Without probes, the rules that need them say what was not seen.
    let (_, mut s) = saturated(&steps);
    s.result.errors = Default::default();
    s.result.achieved_rps = s.load;
    s.probes = None;
    let d = diagnose_variant(&steps, i, s).unwrap();
    let e = &d.findings[0].evidence;
    for unseen in [
        "the target's CPU (not probed)",
        "the kernel's listen-queue counters (not probed)",
        "the target's memory (not probed)",
        "the target's cgroup (not probed)",
    ] {
        assert!(e.contains(unseen), "{unseen} not in: {e}");
    }
    assert!(e.contains(". Not seen: "), "{e}");
}

#[test]
fn a_saturated_thread_is_read_against_what_a_stealing_host_left_it() {
    let steps = steps("backlog-workers");
    let (i, mut s) = saturated(&steps);
    // Node's case on a VM whose host stole a fifth of the time: one thread charged 76 % of
    // a CPU (the kernel leaves the stolen time out of it) while the process used 38 % of
    // its 2 CPUs.
    let p = s.probes.as_mut().unwrap();
    p.limits.as_mut().unwrap().cpus = 2.0;
    p.delta.cpu_percent = 76.0;
    p.delta.cpu_wait_percent = 1.0;
    p.delta.busiest_thread_cpu = Some(0.76);
    p.delta.busiest_thread_wait = Some(0.01);
    p.delta.busiest_thread = Some("node".into());
    let with_steal = |steal: Option<f64>| {
        let mut s = s.clone();
        s.probes.as_mut().unwrap().delta.steal_share = steal;
        diagnose_variant(&steps, i, s).unwrap()
    };
    // Without steal, 77 % is not a saturated thread.
    for steal in [None, Some(0.0)] {
        let d = with_steal(steal);
        assert!(
            !kinds(&d).contains(&Bottleneck::ThreadBound),
            "{:?}",
            kinds(&d)
        );
    }
    // With a fifth stolen, it ran 95 % of what the host left it: the thread is the limit.
    let d = with_steal(Some(0.2));
    let f = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::ThreadBound)
        .unwrap_or_else(|| panic!("{:?}", kinds(&d)));
    assert!(
        f.evidence.contains(
            "its busiest thread (`node`) used 76 % of one CPU (95 % of what the host left it: a VM's host took 20 % of the time"
        ),
        "{}",
        f.evidence
    );
}

#[test]
fn a_host_that_took_a_fifth_of_the_cpus_is_named_after_the_server_or_alone() {
    let steps = steps("backlog-workers");
    let (i, s) = saturated(&steps);
    let with_steal = |s: &StepRecord, steal: Option<f64>| {
        let mut s = s.clone();
        s.probes.as_mut().unwrap().delta.steal_share = steal;
        diagnose_variant(&steps, i, s).unwrap()
    };
    let ruled_out = |d: &Diagnosis| {
        d.ruled_out
            .iter()
            .find(|r| r.starts_with("the VM's host took the CPUs: "))
            .cloned()
            .unwrap_or_else(|| panic!("{:?}", d.ruled_out))
    };
    // A pool of 16 sleeping workers, its CPU low: the host's share, however large, is not
    // what held it back, and is not named.
    for steal in [Some(0.0), Some(0.1), Some(0.46)] {
        let d = with_steal(&s, steal);
        assert!(
            !kinds(&d).contains(&Bottleneck::HostSteal),
            "{:?}",
            kinds(&d)
        );
        assert!(
            ruled_out(&d).contains("a VM's host took "),
            "{}",
            ruled_out(&d)
        );
    }
    assert!(
        ruled_out(&with_steal(&s, Some(0.46))).contains("not what held it back"),
        "{}",
        ruled_out(&with_steal(&s, Some(0.46)))
    );
    // A target that used its CPU (95 %): CPU-bound first, the host's share after it, with
    // its figures.
    let mut busy = s.clone();
    let p = busy.probes.as_mut().unwrap();
    p.delta.cpu_percent = 95.0 * p.limits.as_ref().unwrap().cpus;
    let k = kinds(&with_steal(&busy, Some(0.1)));
    assert!(!k.contains(&Bottleneck::HostSteal), "{k:?}");
    // Steal not read (an older recording): not seen, never guessed.
    let k = kinds(&with_steal(&busy, None));
    assert!(!k.contains(&Bottleneck::HostSteal), "{k:?}");
    let d = with_steal(&busy, Some(0.46));
    let k = kinds(&d);
    assert_eq!(k[0], Bottleneck::CpuBound, "{k:?}");
    assert_eq!(k.last(), Some(&Bottleneck::HostSteal), "{k:?}");
    let f = d.findings.last().unwrap();
    assert_eq!(f.figures["steal_share"], 0.46);
    assert!(f.figures["target_cpu_wanted"] >= 0.95, "{:?}", f.figures);
    assert!(
        f.evidence
            .starts_with("a VM's host took 46 % of the time this machine's CPUs wanted to run at "),
        "{}",
        f.evidence
    );
    // Nothing of the server's fired on a target that wanted 60 % of its CPU: the host is
    // the answer, not `unknown`.
    let mut quiet = s.clone();
    quiet.result.errors = Default::default();
    quiet.result.achieved_rps = quiet.load;
    let p = quiet.probes.as_mut().unwrap();
    p.delta.cpu_percent = 60.0 * p.limits.as_ref().unwrap().cpus;
    assert_eq!(
        kinds(&with_steal(&quiet, Some(0.0))),
        vec![Bottleneck::Unknown]
    );
    assert_eq!(
        kinds(&with_steal(&quiet, Some(0.3))),
        vec![Bottleneck::HostSteal]
    );
}

#[test]
fn late_sends_the_verdict_excused_are_ruled_out_as_late_not_as_on_schedule() {
    let steps = steps("backlog-workers");
    let (i, s) = saturated(&steps);
    let ruled_out = |s: StepRecord| {
        diagnose_variant(&steps, i, s)
            .unwrap()
            .ruled_out
            .into_iter()
            .find(|r| r.starts_with("generator-limited"))
            .expect("the generator rule is ruled out")
    };
    // On schedule: said so.
    let said = ruled_out(s.clone());
    assert!(
        said.contains("loadlab kept to its schedule (lag p99 "),
        "{said}"
    );
    // Late, and the verdict found it too little to matter (no generator-limited limit):
    // the sends were late, and the diagnosis does not say they were not.
    let mut late = s;
    late.result.generator_limited = true;
    late.result.schedule_lag_ms.p99 = 16.1;
    late.result.schedule_lag_ms.max = 27.5;
    assert!(!late.verdict.limits.contains(&Limit::GeneratorLimited));
    let said = ruled_out(late);
    assert!(
        said.contains(
            "loadlab sent some requests late (lag p99 16.10 ms, worst 27.50 ms), too little to change the verdict"
        ),
        "{said}"
    );
}

#[test]
fn a_small_pool_behind_nginx_times_out_with_the_cpu_low() {
    // plans/proxy-pool.toml (document 003): three pages share a pool of 2 at 80 req/s in
    // all; with 32 the same load is sustained.
    let steps = steps("proxy-pool");
    for (s, d) in steps.iter().zip(replay(&steps)) {
        let pool = &s.params.iter().find(|(k, _)| k == "pool").unwrap().1;
        if pool == "32" {
            assert!(s.verdict.sustained && d.is_none(), "{}", s.config);
            continue;
        }
        let d = d.expect("diagnosed");
        let t = d
            .findings
            .iter()
            .find(|f| f.bottleneck == Bottleneck::Timeouts)
            .unwrap_or_else(|| panic!("{} {}: {:?}", s.config, s.scenario, kinds(&d)));
        assert!(t.figures["utilization"] < 0.1, "{}", t.evidence);
        // No sustained step of this scenario measured its service time unloaded: no
        // Little's-law estimate is made (a saturated step's service time includes queueing
        // inside the server, and the three pages share the pool).
        assert!(
            !kinds(&d).contains(&Bottleneck::ConcurrencyBound),
            "{:?}",
            kinds(&d)
        );
    }
}

#[test]
fn ports_and_descriptors_say_which_side_ran_out() {
    let steps = steps("backlog-workers");
    let (i, s) = saturated(&steps);
    let with_errors = |class: ErrorClass, n: u64| {
        let mut s = s.clone();
        let mut counts = [0u64; ErrorClass::COUNT];
        counts[class.index()] = n;
        s.result.errors = loadlab_engine::ErrorCounts::from_array(counts);
        s
    };
    let d = diagnose_variant(&steps, i, with_errors(ErrorClass::LocalPortExhaustion, 400)).unwrap();
    let f = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::ClientPorts)
        .expect("client ports");
    assert!(
        f.evidence.contains("no free local port 400 times"),
        "{}",
        f.evidence
    );
    // TIME_WAIT filling the range (28,232 ports here) without a port error: loadlab's
    // ports only when loadlab closed the connections; a server that closes holds the
    // TIME_WAIT itself, and the rule must not fire.
    let waiting = |close_by: Option<loadlab_engine::CloseBy>| {
        let mut s = s.clone();
        s.result.keep_alive = close_by.is_none();
        s.result.close_by = close_by;
        s.probes.as_mut().unwrap().delta.time_wait_max = 27_000;
        diagnose_variant(&steps, i, s).unwrap()
    };
    let d = waiting(Some(loadlab_engine::CloseBy::Client));
    let f = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::ClientPorts)
        .expect("client ports from TIME_WAIT");
    assert!(
        f.evidence.contains("27000 sockets in TIME_WAIT"),
        "{}",
        f.evidence
    );
    assert!(f.evidence.contains("close_by = client"), "{}", f.evidence);
    for other in [Some(loadlab_engine::CloseBy::Server), None] {
        assert!(
            !kinds(&waiting(other)).contains(&Bottleneck::ClientPorts),
            "{other:?}"
        );
    }
    let d = diagnose_variant(&steps, i, with_errors(ErrorClass::FdExhaustion, 9)).unwrap();
    assert!(
        kinds(&d).contains(&Bottleneck::Descriptors),
        "{:?}",
        kinds(&d)
    );
    // The target at its own nofile limit.
    let mut full = s.clone();
    let p = full.probes.as_mut().unwrap();
    let limit = p.limits.as_ref().unwrap().nofile_soft.unwrap();
    p.delta.fds_max = limit;
    let d = diagnose_variant(&steps, i, full).unwrap();
    let f = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::Descriptors)
        .expect("descriptors");
    assert!(
        f.evidence
            .contains(&format!("against its nofile limit of {limit}")),
        "{}",
        f.evidence
    );
    // Neither without its evidence.
    let d = diagnose_variant(&steps, i, s).unwrap();
    assert!(!kinds(&d).contains(&Bottleneck::ClientPorts));
    assert!(!kinds(&d).contains(&Bottleneck::Descriptors));
}

/// The saturated step with its target in a cgroup whose figures are `cgroup` (JSON of a
/// `CgroupDelta`) under the limits `limits` (JSON of `CgroupLimits`), using `cpu` of one CPU.
fn in_cgroup(
    steps: &[StepRecord],
    cpu: f64,
    cgroup: serde_json::Value,
    limits: serde_json::Value,
    shares_with_loadlab: bool,
) -> Diagnosis {
    let (i, mut s) = saturated(steps);
    let p = s.probes.as_mut().unwrap();
    p.delta.cpu_percent = 100.0 * cpu;
    p.delta.cpu_wait_percent = 0.0;
    p.delta.cgroup = Some(serde_json::from_value(cgroup).unwrap());
    p.cgroup_limits = Some(serde_json::from_value(limits.clone()).unwrap());
    if let Some(q) = limits["cpu"]["cpus"].as_f64() {
        let l = p.limits.as_mut().unwrap();
        l.cpus = q;
        l.cpus_from = format!("cgroup v1 quota of {q:.2} CPUs at /t");
    }
    p.source = Some(
        serde_json::from_value(serde_json::json!({
            "kind": "pid", "pid": 42, "found": "pid 42 (server)",
            "cgroup": "/t", "cgroup_version": "v1",
            "shares_cgroup_with_loadlab": shares_with_loadlab,
        }))
        .unwrap(),
    );
    diagnose_variant(steps, i, s).unwrap()
}

#[test]
fn a_cpu_quota_that_throttles_the_target_is_named_with_its_figures() {
    let steps = steps("backlog-workers");
    let quota = serde_json::json!({"cpu": {"cpus": 0.25, "quota_us": 25000, "period_us": 100000, "version": "v1", "path": "/t"}});
    let throttled = |periods: u64, throttled: u64| {
        serde_json::json!({"cpu_s": 2.48, "cpu_percent": 24.8, "cpu_quota_cpus": 0.25,
            "periods": periods, "throttled_periods": throttled, "throttled_s": 7.7})
    };
    let d = in_cgroup(&steps, 0.248, throttled(100, 87), quota.clone(), false);
    let t = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::CpuThrottled)
        .unwrap_or_else(|| panic!("{:?}", kinds(&d)));
    assert!(
        t.evidence.contains(
            "used 24.8 % of one CPU against a quota of 25.0 %: throttled in 87 of 100 periods, 7.7 s throttled"
        ),
        "{}",
        t.evidence
    );
    assert!(
        t.evidence.contains("(cgroup v1 quota at /t)"),
        "{}",
        t.evidence
    );
    assert_eq!(t.figures["throttled_periods"], 87.0);
    // The quota is the finer finding: the CPUs it capped are not named as well.
    assert!(
        !kinds(&d).contains(&Bottleneck::CpuBound),
        "{:?}",
        kinds(&d)
    );
    assert!(!t.evidence.contains("loadlab"), "{}", t.evidence);
    // Throttled in 5 periods of 100: the quota was not the limit; the CPU figure, capped
    // by the quota, still says CPU-bound.
    let d = in_cgroup(&steps, 0.248, throttled(100, 5), quota.clone(), false);
    assert!(
        !kinds(&d).contains(&Bottleneck::CpuThrottled),
        "{:?}",
        kinds(&d)
    );
    assert!(
        d.ruled_out
            .iter()
            .any(|r| r.starts_with("CPU quota (throttled): used 24.8 %")),
        "{:?}",
        d.ruled_out
    );
    // A cgroup that holds loadlab too: said, never blamed on the server alone.
    let d = in_cgroup(&steps, 0.248, throttled(100, 87), quota, true);
    let t = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::CpuThrottled)
        .unwrap();
    assert!(t.evidence.contains("also holds loadlab"), "{}", t.evidence);
    assert!(t.advice.starts_with("run loadlab outside"), "{}", t.advice);
}

#[test]
fn memory_and_pids_limits_of_the_cgroup() {
    let steps = steps("backlog-workers");
    let limits = serde_json::json!({
        "memory": {"value": 268435456u64, "version": "v2", "path": "/t"},
        "pids": {"value": 64, "version": "v2", "path": "/t"}});
    let d = in_cgroup(
        &steps,
        0.1,
        serde_json::json!({"memory_peak_bytes": 266338304u64, "memory_limit_bytes": 268435456u64,
            "oom_kills": 2, "memory_max_events": 40, "pids_peak": 64, "pids_limit": 64,
            "pids_max_events": 3, "psi_memory_some_percent": 35.0}),
        limits.clone(),
        false,
    );
    let m = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::MemoryLimit)
        .unwrap_or_else(|| panic!("{:?}", kinds(&d)));
    assert!(
        m.evidence
            .contains("memory peaked at 99 % of its 256 MB limit (254 MB), 2 OOM kills, the limit hit 40 times; its tasks stalled on memory 35 % of the time"),
        "{}",
        m.evidence
    );
    let p = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::PidsLimit)
        .unwrap_or_else(|| panic!("{:?}", kinds(&d)));
    assert!(
        p.evidence
            .contains("64 of its 64 tasks (processes and threads), 3 forks refused"),
        "{}",
        p.evidence
    );
    // Far from both limits: ruled out with the figures.
    let d = in_cgroup(
        &steps,
        0.1,
        serde_json::json!({"memory_peak_bytes": 20971520u64, "memory_limit_bytes": 268435456u64,
            "oom_kills": 0, "memory_max_events": 0, "pids_peak": 9, "pids_limit": 64, "pids_max_events": 0}),
        limits,
        false,
    );
    assert!(!kinds(&d).contains(&Bottleneck::MemoryLimit));
    assert!(!kinds(&d).contains(&Bottleneck::PidsLimit));
    assert!(
        d.ruled_out
            .iter()
            .any(|r| r == "pids limit: 9 of its 64 tasks (processes and threads), 0 forks refused"),
        "{:?}",
        d.ruled_out
    );
}

#[test]
fn the_offered_figure_is_what_loadlab_sent_not_the_steps_nominal_rate() {
    let steps = steps("backlog-workers");
    let (i, s) = saturated(&steps);
    let offered = |s: &StepRecord| {
        let d = diagnose_variant(&steps, i, s.clone()).unwrap();
        d.findings
            .iter()
            .find(|f| f.bottleneck == Bottleneck::ConcurrencyBound)
            .unwrap()
            .figures["offered_in_service"]
    };
    let o = offered(&s);
    // What was sent in the window times the 100 ms sleep's floor.
    let sent = s.result.attempts() as f64 / s.result.duration_s;
    assert!(
        (o / sent - 0.1).abs() < 0.01,
        "offered ≈{o} at {sent}/s sent"
    );
    // A step whose nominal rate says otherwise (a Poisson draw, a flow's sessions): the
    // figure stays with what was sent.
    let mut other = s.clone();
    other.load *= 1.5;
    assert!((offered(&other) - o).abs() < 1e-9);
}

#[test]
fn skewed_service_times_count_the_pool_over_their_mean_too() {
    let steps = steps("backlog-workers");
    let (i, s) = saturated(&steps);
    // The steps before it, with the service times of its configuration and scenario made
    // skewed by `ratio` (a mean that many times the median: a few slow requests), and the
    // saturated step with `workers` set to `workers`.
    let variant = |ratio: f64, workers: &str| {
        let mut v = steps[..i].to_vec();
        for p in v
            .iter_mut()
            .filter(|p| p.config == s.config && p.scenario == s.scenario)
        {
            let st = &mut p.result.service_time_ms;
            st.mean = st.p50.map(|m| m * ratio);
        }
        let mut knee = s.clone();
        for kv in knee.params.iter_mut().filter(|(k, _)| k == "workers") {
            kv.1 = workers.to_string();
        }
        v.push(knee);
        let d = replay(&v).pop().unwrap().unwrap();
        d.findings
            .into_iter()
            .find(|f| f.bottleneck == Bottleneck::ConcurrencyBound)
            .unwrap_or_else(|| panic!("{ratio} {workers}: no concurrency_bound"))
    };
    // The 100 ms sleep: ≈16 in service by the median, ≈35 by a mean 2.2 times it.
    let c = variant(2.2, "16");
    let (by_median, by_mean) = (c.figures["in_service"], c.figures["in_service_by_mean"]);
    assert!((by_median - 16.0).abs() <= 3.2, "{by_median}");
    assert!((by_mean / by_median - 2.2).abs() < 0.01, "{by_mean}");
    assert!(
        c.evidence
            .contains("the service times were skewed, a mean of"),
        "{}",
        c.evidence
    );
    // The median's count still names the 16 workers.
    assert_eq!(c.parameter.as_deref(), Some("workers=16"));
    // A pool the size of the mean's count is named by it.
    let n = by_mean.round() as u64;
    let c = variant(2.2, &n.to_string());
    assert_eq!(c.parameter, Some(format!("workers={n}")), "{}", c.evidence);
    // Named by neither: the mean's count is said as a lower bound.
    let c = variant(2.2, "100");
    assert_eq!(c.parameter, None);
    assert!(
        c.evidence.contains(&format!(
            "a pool (workers, threads, connections) of at least ≈{} is the limit",
            loadlab_engine::format::num(by_mean)
        )),
        "{}",
        c.evidence
    );
    // Not skewed (a mean 1.2 times the median): one count, as before, and the mean's pool
    // is not named.
    let c = variant(1.2, &n.to_string());
    assert!(!c.figures.contains_key("in_service_by_mean"));
    assert!(!c.evidence.contains("skewed"), "{}", c.evidence);
    assert_eq!(c.parameter, None);
    assert!(
        c.evidence.contains("a pool of about that size"),
        "{}",
        c.evidence
    );
}

#[test]
fn a_limit_reached_leads_the_concurrency_it_capped_whatever_moved_first() {
    let steps = steps("backlog-workers");
    let (i, s) = saturated(&steps);
    // The saturated step names its pool; with the target at its nofile limit as well, the
    // limit comes first and the pool is said to be its consequence.
    let mut full = s.clone();
    let p = full.probes.as_mut().unwrap();
    p.delta.fds_max = p.limits.as_ref().unwrap().nofile_soft.unwrap();
    let d = diagnose_variant(&steps, i, full).unwrap();
    assert_eq!(kinds(&d)[0], Bottleneck::Descriptors, "{:?}", kinds(&d));
    let f = &d.findings[0];
    assert!(
        f.evidence.contains("it could accept no more connections"),
        "{}",
        f.evidence
    );
    let c = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::ConcurrencyBound)
        .unwrap_or_else(|| panic!("{:?}", kinds(&d)));
    assert!(
        c.evidence
            .contains("likely a consequence of the descriptor limit (nofile) reached above"),
        "{}",
        c.evidence
    );
    assert!(
        c.advice
            .starts_with("raise the descriptor limit (nofile) first"),
        "{}",
        c.advice
    );
    // A cgroup's memory limit with OOM kills: first too, whatever the onsets say.
    let d = in_cgroup(
        &steps,
        0.1,
        serde_json::json!({"memory_peak_bytes": 266338304u64, "memory_limit_bytes": 268435456u64,
            "oom_kills": 16, "memory_max_events": 40}),
        serde_json::json!({"memory": {"value": 268435456u64, "version": "v2", "path": "/t"}}),
        false,
    );
    assert_eq!(kinds(&d)[0], Bottleneck::MemoryLimit, "{:?}", kinds(&d));
    // Without a limit, the pool leads as before, with no such clause.
    let d = diagnose_variant(&steps, i, s).unwrap();
    let c = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::ConcurrencyBound)
        .unwrap();
    assert!(!c.evidence.contains("consequence"), "{}", c.evidence);
}

#[test]
fn a_gap_of_errors_is_no_saturation_for_the_pool() {
    let steps = steps("backlog-workers");
    let (i, mut s) = saturated(&steps);
    // Latency flat and the service time at its floor: the only sign left is that fewer were
    // answered than offered.
    s.result.latency_trend = None;
    s.result.service_time_ms.p50 = Some(0.1);
    let offered = s.load;
    s.result.achieved_rps = 0.7 * offered;
    let held_back = diagnose_variant(&steps, i, s.clone()).unwrap();
    assert!(
        kinds(&held_back).contains(&Bottleneck::ConcurrencyBound),
        "answered 70 % of what was offered: {:?}",
        kinds(&held_back)
    );
    // The same gap, every missing answer a reset: the server failed them, it did not queue.
    let missing = (0.3 * offered * s.result.duration_s).ceil() as u64;
    let mut counts = [0u64; ErrorClass::COUNT];
    counts[ErrorClass::ConnectionReset.index()] = missing;
    s.result.errors = loadlab_engine::ErrorCounts::from_array(counts);
    s.result.errors_total = missing;
    let d = diagnose_variant(&steps, i, s).unwrap();
    assert!(
        !kinds(&d).contains(&Bottleneck::ConcurrencyBound),
        "{:?}",
        kinds(&d)
    );
    assert!(
        d.ruled_out
            .iter()
            .any(|r| r.starts_with("concurrency-bound")
                && r.contains("no sign the server was saturated")),
        "{:?}",
        d.ruled_out
    );
}

#[test]
fn a_proxys_502_and_504_name_its_upstream_and_a_503_a_server_shedding_work() {
    let steps = steps("backlog-workers");
    let (i, s) = saturated(&steps);
    let answered = |codes: &[(&str, u64)]| {
        let mut s = s.clone();
        let failed: u64 = codes.iter().map(|c| c.1).sum();
        let mut counts = [0u64; ErrorClass::COUNT];
        counts[ErrorClass::Http5xx.index()] = failed;
        s.result.errors = loadlab_engine::ErrorCounts::from_array(counts);
        s.result.errors_total = failed;
        for (c, n) in codes {
            s.result.status_codes.insert((*c).to_string(), *n);
        }
        diagnose_variant(&steps, i, s).unwrap()
    };
    let d = answered(&[("504", 120), ("502", 3)]);
    let f = d
        .findings
        .iter()
        .find(|f| f.bottleneck == Bottleneck::Upstream)
        .unwrap_or_else(|| panic!("{:?}", kinds(&d)));
    assert!(
        f.evidence.contains("120 with 504 (gateway timeout")
            && f.evidence.contains("3 with 502 (bad gateway")
            && f.evidence.contains("not the proxy shedding work"),
        "{}",
        f.evidence
    );
    assert!(!kinds(&d).contains(&Bottleneck::Refused), "{:?}", kinds(&d));
    let d = answered(&[("503", 120)]);
    assert!(kinds(&d).contains(&Bottleneck::Refused), "{:?}", kinds(&d));
    assert!(
        !kinds(&d).contains(&Bottleneck::Upstream),
        "{:?}",
        kinds(&d)
    );
}

#[test]
fn a_target_near_its_nofile_while_connections_were_dropped_ran_out() {
    let steps = steps("backlog-workers");
    let (i, s) = saturated(&steps);
    // 85 % of its nofile at the once-a-second samples: not enough alone (a peak between
    // samples is not seen), enough with connections reset on the way.
    let near = |resets: u64| {
        let mut s = s.clone();
        let p = s.probes.as_mut().unwrap();
        let limit = p.limits.as_ref().unwrap().nofile_soft.unwrap();
        p.delta.fds_max = limit * 85 / 100;
        let mut counts = [0u64; ErrorClass::COUNT];
        counts[ErrorClass::ConnectionReset.index()] = resets;
        s.result.errors = loadlab_engine::ErrorCounts::from_array(counts);
        s.result.errors_total = resets;
        diagnose_variant(&steps, i, s).unwrap()
    };
    let d = near(0);
    assert!(
        !kinds(&d).contains(&Bottleneck::Descriptors),
        "{:?}",
        kinds(&d)
    );
    let d = near(12);
    assert_eq!(kinds(&d)[0], Bottleneck::Descriptors, "{:?}", kinds(&d));
    assert!(
        d.findings[0]
            .evidence
            .contains("and 12 connections were reset or closed"),
        "{}",
        d.findings[0].evidence
    );
}

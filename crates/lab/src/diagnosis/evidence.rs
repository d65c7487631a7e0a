//! The evidence of one step, computed once: what every rule reads.

use loadlab_engine::RunResult;
use loadlab_engine::{ErrorClass, Protocol};
use loadlab_system::probe::{cpus_busy_share_within, CgroupDelta, ProbeReport};

use super::{num, pct, Context, CPU_BOUND, CPU_LOW, CPU_ROOM};

/// A thread that ran at least this fraction of the time while doing nearly all of its
/// process's work ([`ALONE`]) is the limit even below [`CPU_BOUND`]: a step's edges and the
/// sampling between probes dilute a saturated event loop's figure by a few percent (89 %
/// measured for a Node.js loop at its knee).
pub const NEARLY_BOUND: f64 = 0.8;
/// The share of its process's CPU time such a thread did.
pub const ALONE: f64 = 0.9;
use crate::plan::Model;
use crate::target::TargetExit;
use crate::verdict::{Limit, Verdict};

/// The parts of a finished step a diagnosis reads (a view of a
/// [`StepRecord`](crate::bundle::StepRecord), which converts into one).
#[derive(Clone, Copy, Debug)]
pub struct StepFacts<'a> {
    /// Configuration id.
    pub config: &'a str,
    /// Scenario name.
    pub scenario: &'a str,
    /// Step number within the configuration and scenario.
    pub index: u32,
    /// Open or closed loop.
    pub model: Model,
    /// Offered req/s (open) or requests in flight (closed).
    pub load: f64,
    /// The configuration's matrix parameters.
    pub params: &'a [(String, String)],
    /// The step's verdict.
    pub verdict: &'a Verdict,
    /// A target that exited during the step.
    pub crashed: Option<&'a TargetExit>,
    /// What the probes saw.
    pub probes: Option<&'a ProbeReport>,
    /// The engine's result.
    pub result: &'a RunResult,
    /// A response of the server to the step's request, described in a few words with its
    /// status and the start of its body (captured when most requests were rejected).
    pub response_sample: Option<&'a str>,
}

/// The target's CPU over the step, in CPUs, against the CPUs it may use.
#[derive(Clone, Debug, PartialEq)]
pub struct Cpu {
    /// CPUs used.
    pub used: f64,
    /// CPUs wanted and waited for (its threads runnable, not running).
    pub wait: f64,
    /// CPUs it may use (affinity, capped by its cgroup quota).
    pub cpus: f64,
    /// Where `cpus` comes from.
    pub from: String,
    /// The share of the time its CPUs were not idle while its threads waited, whoever ran,
    /// a VM's host included (`ProbeDelta::cpus_busy_share`; `None`: not read, or its CPUs
    /// capped by a cgroup quota, where idle CPUs say nothing of what it may use).
    pub busy: Option<f64>,
}

impl Cpu {
    /// Used, as a fraction of its CPUs.
    pub fn util(&self) -> f64 {
        self.used / self.cpus
    }

    /// Waited for behind other processes, as a fraction of its CPUs: its threads' waits,
    /// but no more than the time other processes kept its CPUs busy. Threads that wait
    /// behind each other while its CPUs idle (bursts: more runnable threads than CPUs for a
    /// moment) are not short of CPU over the step. Without the CPUs' busy time, every wait.
    pub fn waited(&self) -> f64 {
        let wait = match self.busy {
            Some(b) => self.wait.min((b * self.cpus - self.used).max(0.0)),
            None => self.wait,
        };
        wait / self.cpus
    }

    /// Waited for in all (behind other processes or its own threads), as a fraction of
    /// its CPUs.
    pub fn waited_all(&self) -> f64 {
        self.wait / self.cpus
    }

    /// What it wanted of its CPUs: used plus waited for behind other processes
    /// ([`Cpu::waited`]), at most all.
    pub fn demand(&self) -> f64 {
        (self.util() + self.waited()).min(1.0)
    }

    /// The share of the time its CPUs were idle while its threads waited, when read.
    pub fn idle(&self) -> Option<f64> {
        self.busy.map(|b| (1.0 - b).max(0.0))
    }

    /// `1 CPU (affinity: 1 CPU)`.
    pub fn cpus_words(&self) -> String {
        format!(
            "{} CPU{} ({})",
            num(self.cpus),
            if self.cpus == 1.0 { "" } else { "s" },
            self.from
        )
    }
}

/// A sign that the server was saturated during the step: work waited for it.
#[derive(Clone, Debug, PartialEq)]
pub enum Saturation {
    /// Latency grew with the send time (resolved): a queue built up.
    QueueGrew {
        /// Latency added per second of the step, ms.
        slope_ms_per_s: f64,
    },
    /// The service time's median rose above its floor: requests waited inside the server.
    WaitedInside {
        /// This step's service-time median, ms.
        p50_ms: f64,
        /// The floor, ms.
        floor_ms: f64,
    },
    /// Open loop: the server answered fewer than were offered, and not because it failed
    /// the rest (a gap of errors is no queue).
    HeldBack {
        /// Achieved, in `unit`.
        achieved: f64,
        /// Offered, in `unit`.
        offered: f64,
        /// The step's rate unit: `req/s`, `msg/s`, `sessions/s`.
        unit: &'static str,
    },
    /// Closed loop: the server had fewer requests in service than loadlab kept in flight.
    FewerInService {
        /// In service by Little's law.
        in_service: f64,
        /// In flight.
        in_flight: f64,
    },
}

impl Saturation {
    /// One clause with the figures.
    pub fn describe(&self) -> String {
        match self {
            Saturation::QueueGrew { slope_ms_per_s } => format!(
                "latency grew {} ms per second of the step (a queue built up)",
                num(*slope_ms_per_s)
            ),
            Saturation::WaitedInside { p50_ms, floor_ms } => format!(
                "the service-time median rose to {} ms from a floor of {} ms (requests waited inside the server)",
                num(*p50_ms),
                num(*floor_ms)
            ),
            Saturation::HeldBack {
                achieved,
                offered,
                unit,
            } => format!(
                "{} {unit} answered of {} offered",
                num(*achieved),
                num(*offered)
            ),
            Saturation::FewerInService {
                in_service,
                in_flight,
            } => format!(
                "≈{} in service of {} in flight",
                num(*in_service),
                num(*in_flight)
            ),
        }
    }
}

/// How the target's cgroup CPU quota stopped it during the step.
#[derive(Clone, Debug, PartialEq)]
pub struct Throttling {
    /// The quota, in CPUs.
    pub quota_cpus: f64,
    /// Where the quota is set (`cgroup v1 … at /path`), when known.
    pub quota_from: Option<String>,
    /// CPUs the cgroup (or, without its own figure, the target's processes) used.
    pub used_cpus: f64,
    /// Enforcement periods with work to run.
    pub periods: u64,
    /// Of those, periods the quota ran out in.
    pub throttled_periods: u64,
    /// Seconds its tasks were stopped.
    pub throttled_s: f64,
}

impl Throttling {
    /// The throttled periods as a fraction of the periods.
    pub fn share(&self) -> f64 {
        self.throttled_periods as f64 / self.periods.max(1) as f64
    }

    /// At least [`THROTTLED_SHARE`] of at least 5 periods were throttled.
    pub fn significant(&self) -> bool {
        self.periods >= 5 && self.share() >= THROTTLED_SHARE
    }
}

/// A mix of named requests whose every name has a floor: each name's achieved and floor.
/// Empty otherwise (one request, or a name with no sustained step yet).
fn mix_of(r: &RunResult, ctx: &Context) -> Vec<(String, f64, f64)> {
    if r.by_name.is_empty() {
        return Vec::new();
    }
    let mut mix = Vec::new();
    for n in &r.by_name {
        match ctx.name_floors_ms.get(&n.name) {
            Some(f) if *f > 0.0 => mix.push((n.name.clone(), n.achieved_rps, *f)),
            _ => return Vec::new(),
        }
    }
    mix
}

/// A cgroup throttled in at least this share of its quota periods was held by its quota.
pub const THROTTLED_SHARE: f64 = 0.2;

/// Everything the rules read about one step, computed once.
pub struct Evidence<'a> {
    /// The step.
    pub step: &'a StepFacts<'a>,
    /// The earlier steps' figures and the machine's.
    pub ctx: &'a Context,
    /// The target's CPU (`None` when not probed, or without its limits).
    pub cpu: Option<Cpu>,
    /// Requests in service at once by Little's law: achieved × the service-time floor
    /// (`None` without a floor); for a mix of named requests, the sum over the names of
    /// each one's achieved × its floor.
    pub in_service: Option<f64>,
    /// The floor `in_service` was counted with, ms: the scenario's, or for a mix the
    /// floors averaged over what each name achieved.
    pub floor_ms: Option<f64>,
    /// A mix: each name's part of `in_service`, (name, achieved req/s, floor ms).
    pub mix: Vec<(String, f64, f64)>,
    /// Server streams opened at a rate: each one's lifetime after its first message, ms,
    /// which it holds the server for beyond the floor (0 otherwise).
    pub lifetime_ms: f64,
    /// The signs that the server was saturated, strongest first.
    pub saturation: Vec<Saturation>,
}

/// Server streams opened at a rate: each one's lifetime, ms (0 for other runs).
fn lifetime_ms(r: &loadlab_engine::RunResult) -> f64 {
    r.stream_timing
        .as_ref()
        .and_then(|t| t.opened.as_ref())
        .map_or(0.0, |o| o.lifetime_ms)
}

impl StepFacts<'_> {
    /// The rate offered (open loop): the step's load, or, for a log replayed at a multiple
    /// of its speed, the rate that replay offered.
    pub fn offered(&self) -> f64 {
        match self.result.traffic.as_ref().and_then(|t| t.replay.as_ref()) {
            Some(_) => self.result.offered_rps.unwrap_or(self.load),
            None => self.load,
        }
    }
}

impl<'a> Evidence<'a> {
    /// The evidence of `step`.
    pub fn of(step: &'a StepFacts<'a>, ctx: &'a Context) -> Evidence<'a> {
        let r = step.result;
        let cpu = step.probes.and_then(|p| {
            let l = p.limits.as_ref()?;
            Some(Cpu {
                used: p.delta.cpu_percent / 100.0,
                wait: p.delta.cpu_wait_percent / 100.0,
                cpus: l.cpus,
                from: l.cpus_from.clone(),
                busy: p
                    .delta
                    .cpus_busy_share
                    .filter(|_| !l.cpus_from.contains("quota")),
            })
        });
        let mix = mix_of(r, ctx);
        let lifetime_ms = lifetime_ms(r);
        let (in_service, floor) = if mix.is_empty() {
            let floor = ctx.service_floor_ms.filter(|f| *f > 0.0);
            (
                floor.map(|f| r.achieved_rps * (f + lifetime_ms) / 1000.0),
                floor,
            )
        } else {
            let n: f64 = mix.iter().map(|(_, a, f)| a * f / 1000.0).sum();
            (
                Some(n),
                (r.achieved_rps > 0.0).then(|| 1000.0 * n / r.achieved_rps),
            )
        };
        let mut saturation = Vec::new();
        if let Some(t) = r.latency_trend.as_ref().filter(|t| t.resolved) {
            saturation.push(Saturation::QueueGrew {
                slope_ms_per_s: 1000.0 * t.slope,
            });
        }
        if let (Some(floor), Some(p50)) = (floor, r.service_time_ms.p50) {
            if p50 >= 1.5 * floor && p50 >= floor + 1.0 {
                saturation.push(Saturation::WaitedInside {
                    p50_ms: p50,
                    floor_ms: floor,
                });
            }
        }
        let offered = step.offered();
        // Failures a second: a server that answered fewer than offered because it failed
        // the rest (resets, refusals) was not saturated by that gap.
        let failing = if r.duration_s > 0.0 {
            r.errors_total as f64 / r.duration_s
        } else {
            0.0
        };
        match step.model {
            Model::Open if r.achieved_rps + failing < 0.95 * offered => {
                saturation.push(Saturation::HeldBack {
                    achieved: r.achieved_rps,
                    offered,
                    unit: if offered == step.load {
                        crate::plan::result_unit(r)
                    } else {
                        r.protocol.units().rate
                    },
                })
            }
            Model::Closed => {
                if let Some(n) = in_service.filter(|n| *n < 0.8 * step.load) {
                    saturation.push(Saturation::FewerInService {
                        in_service: n,
                        in_flight: step.load,
                    });
                }
            }
            Model::Open => {}
        }
        Evidence {
            step,
            ctx,
            cpu,
            in_service,
            floor_ms: floor,
            mix,
            lifetime_ms,
            saturation,
        }
    }

    /// The engine's result.
    pub fn result(&self) -> &'a RunResult {
        self.step.result
    }

    /// The probes' report.
    pub fn probes(&self) -> Option<&'a ProbeReport> {
        self.step.probes
    }

    /// The SLO clauses the step failed.
    pub fn limits(&self) -> &'a [Limit] {
        &self.step.verdict.limits
    }

    /// Seconds of warm-up before the measured window (probe seconds count from the step's
    /// start, window seconds from the end of the warm-up).
    pub fn warmup_s(&self) -> f64 {
        self.step.result.warmup_s
    }

    /// The target's cgroup figures over the step, when probed.
    pub fn cgroup(&self) -> Option<&'a CgroupDelta> {
        self.probes()?.delta.cgroup.as_ref()
    }

    /// The target's cgroup also holds loadlab: its CPU, memory and pressure figures include
    /// loadlab's own.
    pub fn shares_cgroup_with_loadlab(&self) -> bool {
        self.probes()
            .and_then(|p| p.source.as_ref())
            .is_some_and(|s| s.shares_cgroup_with_loadlab)
    }

    /// The target's busiest thread ran, or waited to run, at least [`CPU_BOUND`] of the
    /// time, or ran at least [`NEARLY_BOUND`] of it doing at least [`ALONE`] of its
    /// process's CPU work: (CPUs used, CPUs waited for, its name). Every rule reads a
    /// thread-bound target from here.
    pub fn busy_thread(&self) -> Option<(f64, f64, &'a str)> {
        let d = &self.probes()?.delta;
        let (used, waited) = self.busiest_thread()?;
        let process_cpus =
            self.cpu.as_ref().map_or(0.0, |c| c.util() * c.cpus) / (1.0 - self.steal_share());
        let alone = used >= NEARLY_BOUND && process_cpus > 0.0 && used >= ALONE * process_cpus;
        (used + waited >= CPU_BOUND || alone)
            .then(|| (used, waited, d.busiest_thread.as_deref().unwrap_or("?")))
    }

    /// The target's busiest thread over the step, when probed: (CPUs used, read against
    /// what a VM's host left it, since a thread's CPU time leaves out what was stolen while
    /// it ran; CPUs waited for).
    pub fn busiest_thread(&self) -> Option<(f64, f64)> {
        let d = &self.probes()?.delta;
        Some((
            d.busiest_thread_cpu? / (1.0 - self.steal_share()),
            d.busiest_thread_wait.unwrap_or(0.0),
        ))
    }

    /// Of the time the machine's CPUs wanted to run over the step, the share a VM's host
    /// took (steal): 0 when not probed, and at most 0.5 (past that nothing is read from a
    /// thread's CPU time).
    pub fn steal_share(&self) -> f64 {
        self.probes()
            .and_then(|p| p.delta.steal_share)
            .filter(|s| s.is_finite())
            .map_or(0.0, |s| s.clamp(0.0, 0.5))
    }

    /// How the target's CPU quota throttled it (`None` without a quota or its counters).
    pub fn throttling(&self) -> Option<Throttling> {
        let p = self.probes()?;
        let c = p.delta.cgroup.as_ref()?;
        let quota = p.cgroup_limits.as_ref().and_then(|l| l.cpu.as_ref());
        let quota_cpus = c.cpu_quota_cpus.or(quota.map(|q| q.cpus))?;
        let used_cpus = c
            .cpu_percent
            .map(|x| x / 100.0)
            .or(self.cpu.as_ref().map(|c| c.used))?;
        Some(Throttling {
            quota_cpus,
            quota_from: quota.map(|q| format!("cgroup {} quota at {}", q.version, q.path)),
            used_cpus,
            periods: c.periods?,
            throttled_periods: c.throttled_periods?,
            throttled_s: c.throttled_s.unwrap_or(0.0),
        })
    }

    /// The step failed on a clause the server answers for (latency, throughput, errors).
    pub fn failed_on_the_server(&self) -> bool {
        self.limits()
            .iter()
            .any(|l| matches!(l, Limit::Latency | Limit::Throughput | Limit::Errors))
    }

    /// The target wanted less than [`CPU_LOW`] of its CPUs (false when not probed).
    pub fn cpu_low(&self) -> bool {
        self.cpu.as_ref().is_some_and(|c| c.demand() < CPU_LOW)
    }

    /// Its CPUs, idle `idle` of some time, had room: at least [`CPU_ROOM`], with no thread
    /// of the target busy ([`Evidence::busy_thread`]: a thread that ran all the time is the
    /// limit, however idle the other CPUs were). The idle share, when they had.
    pub fn room(&self, idle: Option<f64>) -> Option<f64> {
        idle.filter(|i| *i >= CPU_ROOM && self.busy_thread().is_none())
    }

    /// [`Evidence::room`] over the step: its CPUs' idle share of the time its threads waited
    /// to run ([`Cpu::idle`]). `None` when not read (not probed, or its CPUs capped by a
    /// cgroup quota).
    pub fn cpu_room(&self) -> Option<f64> {
        self.room(self.cpu.as_ref()?.idle())
    }

    /// The CPU was not what the step's requests waited for: the target's demand was low
    /// ([`Evidence::cpu_low`]), or its CPUs had room ([`Evidence::cpu_room`]).
    pub fn cpu_spare(&self) -> bool {
        self.cpu_low() || self.cpu_room().is_some()
    }

    /// The idle share of the target's CPUs over the time the step's timed-out requests
    /// waited: from a timeout before the first second with a timeout to the end of the last
    /// one (all of the step when they were counted after its window), every interval between
    /// probe samples that overlaps it, by its ticks. The step-wide share ([`Cpu::idle`])
    /// weighs the seconds its threads waited most instead: a JVM's JIT at the start, while
    /// the requests queued for a pool after it. `None` without timeouts, or where
    /// [`Cpu::busy`] is not read.
    pub fn timeouts_idle(&self) -> Option<f64> {
        self.cpu.as_ref()?.busy?;
        let r = self.result();
        let classes = [ErrorClass::RequestTimeout, ErrorClass::ConnectTimeout];
        let mut seconds = r
            .per_second
            .iter()
            .filter(|s| s.errors_by_class.sum_of(&classes) > 0)
            .map(|s| s.second as f64);
        let w = self.warmup_s();
        let (from, to) = match seconds.next() {
            Some(first) => (
                w + first - r.timeout_ms / 1000.0,
                w + seconds.next_back().unwrap_or(first) + 1.0,
            ),
            // Counted after the window (requests still in flight at its end): all of it.
            None if r.errors.sum_of(&classes) > 0 => (f64::NEG_INFINITY, f64::INFINITY),
            None => return None,
        };
        let share = cpus_busy_share_within(&self.probes()?.samples, from, to)?;
        Some((1.0 - share).max(0.0))
    }

    /// Why the CPU was spare, for a sentence that already says what the target used: empty
    /// when its demand was low, else `, its CPUs idle 38 % of {of}` when they had room.
    pub fn room_words(&self, idle: Option<f64>, of: &str) -> String {
        match self.room(idle) {
            Some(idle) if !self.cpu_low() => format!(", its CPUs idle {} of {of}", pct(idle)),
            _ => String::new(),
        }
    }

    /// Why the CPU was not spare, for a ruled-out line: `the target's CPU demand was 71 % of
    /// its CPUs, not below 50 %, and its CPUs idle 12 % of {of}, not 25 %`.
    pub fn not_spare_words(&self, idle: Option<f64>, of: &str) -> String {
        let Some(cpu) = &self.cpu else {
            return "the target's CPU was not probed".into();
        };
        let idle = match (idle, self.busy_thread()) {
            (Some(i), _) if i < CPU_ROOM => {
                format!(
                    ", and its CPUs idle {} of {of}, not {}",
                    pct(i),
                    pct(CPU_ROOM)
                )
            }
            (Some(i), Some((_, _, name))) => format!(
                ", and though its CPUs idled {} of {of}, its thread `{name}` was busy",
                pct(i)
            ),
            _ => String::new(),
        };
        format!(
            "the target's CPU demand was {} of its CPUs, not below {}{idle}",
            pct(cpu.demand()),
            pct(CPU_LOW)
        )
    }

    /// The CPU figure for sentences: `3 % CPU`, or `CPU not probed`.
    pub fn cpu_words(&self) -> String {
        self.cpu.as_ref().map_or("CPU not probed".into(), |c| {
            format!("{} CPU", pct(c.util()))
        })
    }

    /// `40 req/s` (`msg/s`, `sessions/s`: the step's unit), `16 in flight`, `400 open
    /// connections` (held WebSocket connections, event streams), or `×4 the log (41 req/s)`
    /// (a log replayed at its times).
    pub fn load_words(&self) -> String {
        let r = self.result();
        if r.traffic.as_ref().is_some_and(|t| t.replay.is_some()) {
            return format!(
                "×{} the log ({} req/s)",
                num(self.step.load),
                num(self.step.offered())
            );
        }
        match self.step.model {
            Model::Closed
                if r.sessions.is_none()
                    && matches!(
                        r.protocol,
                        Protocol::Http1 | Protocol::Http2 | Protocol::Grpc
                    ) =>
            {
                format!("{} in flight", num(self.step.load))
            }
            _ => format!("{} {}", num(self.step.load), crate::plan::result_unit(r)),
        }
    }

    /// Requests loadlab offered at once, by Little's law over the service-time floor (open
    /// loop), or those it kept in flight (closed loop). Open loop counts what was sent in
    /// the window, not the step's nominal rate: a Poisson step of 4 s at 25/s may send 29/s,
    /// and a flow's sessions send at the rate their users arrived and thought.
    pub fn offered_in_service(&self) -> Option<f64> {
        let r = self.result();
        let sent = |attempts: u64, nominal: Option<f64>| {
            if r.duration_s > 0.0 && attempts > 0 {
                Some(attempts as f64 / r.duration_s)
            } else {
                nominal
            }
        };
        if !self.mix.is_empty() && self.step.model == Model::Open {
            return Some(
                r.by_name
                    .iter()
                    .filter_map(|n| {
                        let f = self.ctx.name_floors_ms.get(&n.name)?;
                        Some(sent(n.attempts(), n.offered_rps)? * f / 1000.0)
                    })
                    .sum(),
            );
        }
        let floor = self.ctx.service_floor_ms.filter(|f| *f > 0.0)? + self.lifetime_ms;
        Some(match self.step.model {
            Model::Open => sent(r.attempts(), Some(self.step.offered()))? * floor / 1000.0,
            Model::Closed => self.step.load,
        })
    }

    /// When latency rose within the measured window: the first second whose p99 exceeded
    /// twice the baseline (the p99 of the scenario's first step, else this step's first
    /// second) and the baseline plus 1 ms, in window seconds.
    pub fn latency_onset(&self) -> Option<f64> {
        let r = self.result();
        let first = self
            .ctx
            .baseline_p99_ms
            .or_else(|| r.per_second.iter().find_map(|s| s.latency_p99_ms))?;
        let bound = (2.0 * first).max(first + 1.0);
        r.per_second
            .iter()
            .find(|s| s.latency_p99_ms.is_some_and(|p| p > bound))
            .map(|s| s.second as f64)
    }

    /// The first second of the measured window with a failed request.
    pub fn first_error_second(&self) -> Option<f64> {
        self.result()
            .per_second
            .iter()
            .find(|s| s.errors > 0)
            .map(|s| s.second as f64)
    }
}

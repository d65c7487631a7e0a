//! Pre-flight: will this plan fail because of the machine rather than the server?
//!
//! [`diagnose`] compares what a plan will ask of the machine ([`Demand`]) with what the
//! machine offers ([`Facts`]) and returns one [`Finding`] per check, the passing ones
//! included, each failing one with the commands that fix it:
//!
//! - `nofile`: file descriptors for every client connection;
//! - `somaxconn`, `tcp_max_syn_backlog`: the kernel caps on the server's listen backlog;
//! - `ephemeral_ports`: local ports for the connections, and for TIME_WAIT when keep-alive
//!   is off (`ab` without keep-alive hangs at ~16,000 requests with 16,383 ports);
//! - `tuning`: the rest of the kernel settings of the actix-web backlog/workers tuning;
//! - `wakeups`: how late this machine wakes a sleeping thread (loadlab's workers sleep to
//!   each send time), and the steal time of a virtual machine's busy host.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use serde::{Deserialize, Serialize};

use crate::ports::{self, PortBudget, FD_RESERVE, TIME_WAIT_SECONDS};
use crate::{os, procfs};

/// Schedule lag p99 above this (ms) marks a run generator-limited (the engine's
/// `LAG_LIMIT_MS`); a machine that wakes sleeping threads later than this at p99 gets
/// steps noted late whatever loadlab does.
pub const LAG_LIMIT_MS: f64 = 1.0;

/// Sleeps [`Facts::read`] takes to measure the wake-ups, and the time between them: 0.4 s.
pub const WAKEUP_SAMPLES: usize = 200;
/// See [`WAKEUP_SAMPLES`]: 2 ms, a worker's sleep between sends at 500 req/s.
pub const WAKEUP_GAP_NS: u64 = 2_000_000;

/// How late this machine woke a sleeping thread, measured by [`Facts::read`] with
/// [`os::wakeup_lateness_ns`].
#[derive(Clone, Debug, PartialEq)]
pub struct Wakeups {
    /// Sleeps measured.
    pub samples: usize,
    /// Time between their deadlines, ms.
    pub gap_ms: f64,
    /// Median lateness, ms.
    pub p50_ms: f64,
    /// 99th percentile (nearest rank), ms.
    pub p99_ms: f64,
    /// Worst, ms.
    pub max_ms: f64,
}

impl Wakeups {
    /// Summarizes lateness figures (ns) of sleeps `gap_ns` apart; `None` when there are none.
    pub fn of(late_ns: &[u64], gap_ns: u64) -> Option<Wakeups> {
        let mut v = late_ns.to_vec();
        v.sort_unstable();
        let ms = |ns: u64| ns as f64 / 1e6;
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        (!v.is_empty()).then(|| Wakeups {
            samples: v.len(),
            gap_ms: ms(gap_ns),
            p50_ms: ms(rank(0.5)),
            p99_ms: ms(rank(0.99)),
            max_ms: ms(v[v.len() - 1]),
        })
    }

    /// Measures this thread's wake-ups: [`WAKEUP_SAMPLES`] sleeps [`WAKEUP_GAP_NS`] apart.
    pub fn measure() -> Option<Wakeups> {
        Wakeups::of(
            &os::wakeup_lateness_ns(WAKEUP_SAMPLES, WAKEUP_GAP_NS),
            WAKEUP_GAP_NS,
        )
    }
}

/// What a plan will ask of the machine.
#[derive(Clone, Debug, PartialEq)]
pub struct Demand {
    /// Most client connections open at once.
    pub connections: u64,
    /// The listen backlog the server is configured with, if the plan sets one.
    pub backlog: Option<u64>,
    /// New connections per second when keep-alive is off (`None`: keep-alive on).
    pub new_connections_per_s: Option<f64>,
    /// With keep-alive off, the server closes each connection (loadlab asks it to with
    /// `Connection: close`), so the TIME_WAIT lands on the server's side, not on loadlab's
    /// ports; `false`: loadlab closes (`close_by = "client"`), holding each port 60 s.
    pub server_closes: bool,
    /// How long the load lasts, seconds.
    pub duration_s: f64,
    /// The target is on a loopback address.
    pub loopback: bool,
    /// Local source addresses connections are spread over (0 counts as 1).
    pub source_addrs: u64,
}

/// What the machine offers (read from /proc of the current network namespace;
/// constructible by hand in tests).
#[derive(Clone, Debug, PartialEq)]
pub struct Facts {
    /// `nofile` soft limit of this process.
    pub nofile_soft: u64,
    /// `nofile` hard limit of this process.
    pub nofile_hard: u64,
    /// `net.core.somaxconn`: the cap on any listen backlog.
    pub somaxconn: u64,
    /// `net.ipv4.tcp_max_syn_backlog`.
    pub tcp_max_syn_backlog: u64,
    /// Local ports for new connections (`None`: the range could not be read).
    pub port_budget: Option<PortBudget>,
    /// Sockets in TIME_WAIT now; each may hold a local port.
    pub time_wait_now: u64,
    /// The relevant sysctls as the kernel prints them (see [`procfs::SYSCTLS`]); a name is
    /// absent when this network namespace does not show it.
    pub sysctls: BTreeMap<String, String>,
    /// How late this machine woke a sleeping thread (`None`: not measured).
    pub wakeups: Option<Wakeups>,
    /// The share of the machine's CPU time since boot its hypervisor took (steal; 0 on bare
    /// metal; `None`: not read).
    pub steal_share: Option<f64>,
}

impl Facts {
    /// Reads this process's limits and this network namespace's settings, for a target on
    /// loopback or not and connections spread over `source_addrs` local addresses.
    ///
    /// A backlog sysctl that cannot be read is taken at the kernel default
    /// (`somaxconn` 4096, `tcp_max_syn_backlog` 1024). Measures the wake-ups on the calling
    /// thread (its CPUs are the process's): about 0.4 s.
    pub fn read(loopback: bool, source_addrs: usize) -> Facts {
        let (nofile_soft, nofile_hard) = os::nofile_limits();
        let num = |name: &str, default: u64| {
            procfs::sysctl(name)
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        Facts {
            nofile_soft,
            nofile_hard,
            somaxconn: num("net.core.somaxconn", 4096),
            tcp_max_syn_backlog: num("net.ipv4.tcp_max_syn_backlog", 1024),
            port_budget: PortBudget::read(loopback, source_addrs),
            time_wait_now: procfs::time_wait(),
            sysctls: procfs::sysctls(),
            wakeups: Wakeups::measure(),
            steal_share: procfs::steal_ticks()
                .and_then(|(steal, total)| (total > 0).then(|| steal as f64 / total as f64)),
        }
    }
}

/// How bad a finding is. Ordered: `Ok < Warn < Fail`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Checked and fine.
    Ok,
    /// The run works, but a result may mislead or a setting is silently capped.
    Warn,
    /// The run will fail because of the machine.
    Fail,
}

impl Severity {
    /// `ok`, `warn` or `fail`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Warn => "warn",
            Severity::Fail => "fail",
        }
    }
}

/// What the doctor checks, one [`Finding`] each. Serialized by name (`nofile`,
/// `ephemeral_ports`), which is also how [`render`] shows it and how it compares with a
/// string.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// File descriptors for every client connection.
    Nofile,
    /// `net.core.somaxconn`, the cap on any listen backlog.
    Somaxconn,
    /// `net.ipv4.tcp_max_syn_backlog`, the cap on half-open connections.
    TcpMaxSynBacklog,
    /// Local ports for the connections, and for TIME_WAIT when keep-alive is off.
    EphemeralPorts,
    /// The rest of the kernel settings of the actix-web backlog/workers tuning.
    Tuning,
    /// How late this machine wakes a sleeping thread.
    Wakeups,
}

impl Check {
    /// The check's name: `nofile`, `somaxconn`, `tcp_max_syn_backlog`, `ephemeral_ports`,
    /// `tuning` or `wakeups`.
    pub fn as_str(self) -> &'static str {
        match self {
            Check::Nofile => "nofile",
            Check::Somaxconn => "somaxconn",
            Check::TcpMaxSynBacklog => "tcp_max_syn_backlog",
            Check::EphemeralPorts => "ephemeral_ports",
            Check::Tuning => "tuning",
            Check::Wakeups => "wakeups",
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for Check {
    fn eq(&self, name: &&str) -> bool {
        self.as_str() == *name
    }
}

/// The outcome of one check. Serialized into the bundle's `doctor.json`, which the report
/// reads back.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Finding {
    /// Which check.
    pub check: Check,
    /// How bad it is.
    pub severity: Severity,
    /// What was found, with the numbers; may span lines.
    pub message: String,
    /// Commands (or loadlab options) that fix it, in order of preference.
    pub fix: Vec<String>,
}

impl Finding {
    fn new(check: Check, severity: Severity, message: String, fix: Vec<String>) -> Self {
        Finding {
            check,
            severity,
            message,
            fix,
        }
    }
}

/// Runs every check of `d` against `f`; one finding per check, in a fixed order.
pub fn diagnose(d: &Demand, f: &Facts) -> Vec<Finding> {
    vec![
        nofile(d, f),
        somaxconn(d, f),
        syn_backlog(d, f),
        ephemeral_ports(d, f),
        tuning(f),
        wakeups(f),
    ]
}

/// The worst severity among `findings` (`Ok` when there are none).
pub fn worst(findings: &[Finding]) -> Severity {
    findings
        .iter()
        .map(|f| f.severity)
        .max()
        .unwrap_or(Severity::Ok)
}

impl Finding {
    /// The finding's first line as [`render`] shows it: severity tag, check, and the
    /// message's first line (`[WARN] somaxconn: the planned listen backlog ...`).
    pub fn headline(&self) -> String {
        let tag = format!("[{}]", self.severity.as_str().to_uppercase());
        format!(
            "{tag:<7}{}: {}",
            self.check,
            self.message.lines().next().unwrap_or_default()
        )
    }
}

/// Human text: one block per finding with its fixes as commands, then a tally.
pub fn render(findings: &[Finding]) -> String {
    let mut out = String::new();
    for f in findings {
        let _ = writeln!(out, "{}", f.headline());
        for l in f.message.lines().skip(1) {
            let _ = writeln!(out, "       {l}");
        }
        if !f.fix.is_empty() {
            let _ = writeln!(out, "       fix:");
            for c in &f.fix {
                let _ = writeln!(out, "         {c}");
            }
        }
    }
    let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
    let _ = writeln!(
        out,
        "doctor: {} fail, {} warn, {} ok",
        count(Severity::Fail),
        count(Severity::Warn),
        count(Severity::Ok)
    );
    out
}

/// `16384` → `16,384`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn nofile(d: &Demand, f: &Facts) -> Finding {
    let need = ports::fds_needed(d.connections);
    let have = format!(
        "soft limit {}, hard {}",
        thousands(f.nofile_soft),
        thousands(f.nofile_hard)
    );
    if f.nofile_hard < need {
        let target = need.max(65_536);
        Finding::new(
            Check::Nofile,
            Severity::Fail,
            format!(
                "{} connections need {} file descriptors ({} + {FD_RESERVE} spare), but the \
                 hard nofile limit is {}: sockets past it fail with EMFILE ({have})",
                thousands(d.connections),
                thousands(need),
                thousands(d.connections),
                thousands(f.nofile_hard),
            ),
            vec![
                format!(
                    "echo '* - nofile {target}' >> /etc/security/limits.conf   # then log in again"
                ),
                format!("LimitNOFILE={target}   # in the [Service] of a systemd unit instead"),
                format!("ulimit -n {need}"),
            ],
        )
    } else if f.nofile_soft < need {
        Finding::new(
            Check::Nofile,
            Severity::Warn,
            format!(
                "{} file descriptors needed, above the soft limit ({have}); loadlab raises its \
                 soft limit to {} at start and a server it starts inherits that, but a server \
                 started elsewhere keeps its own limit",
                thousands(need),
                thousands(need),
            ),
            vec![format!("ulimit -n {need}")],
        )
    } else {
        Finding::new(
            Check::Nofile,
            Severity::Ok,
            format!("{} file descriptors needed; {have}", thousands(need)),
            vec![],
        )
    }
}

fn somaxconn(d: &Demand, f: &Facts) -> Finding {
    let s = f.somaxconn;
    match d.backlog {
        Some(b) if b > s => Finding::new(
            Check::Somaxconn,
            Severity::Warn,
            format!(
                "the planned listen backlog {} exceeds net.core.somaxconn = {}: the kernel \
                 silently caps the accept queue at {}, so backlog settings above it measure \
                 nothing",
                thousands(b),
                thousands(s),
                thousands(s),
            ),
            vec![format!("sysctl -w net.core.somaxconn={}", b.max(65_535))],
        ),
        Some(b) => Finding::new(
            Check::Somaxconn,
            Severity::Ok,
            format!(
                "listen backlog {} fits under net.core.somaxconn = {}",
                thousands(b),
                thousands(s)
            ),
            vec![],
        ),
        None => Finding::new(
            Check::Somaxconn,
            Severity::Ok,
            format!(
                "no backlog planned; net.core.somaxconn = {} caps whatever the server asks for",
                thousands(s)
            ),
            vec![],
        ),
    }
}

fn syn_backlog(d: &Demand, f: &Facts) -> Finding {
    let m = f.tcp_max_syn_backlog;
    let cookies = f
        .sysctls
        .get("net.ipv4.tcp_syncookies")
        .map(String::as_str)
        .unwrap_or("?");
    match d.backlog {
        Some(b) if b > m => Finding::new(
            Check::TcpMaxSynBacklog,
            Severity::Warn,
            format!(
                "the planned listen backlog {} exceeds net.ipv4.tcp_max_syn_backlog = {}: \
                 under a burst of new connections, half-open ones past it are dropped or \
                 answered with SYN cookies (net.ipv4.tcp_syncookies = {cookies})",
                thousands(b),
                thousands(m),
            ),
            vec![format!(
                "sysctl -w net.ipv4.tcp_max_syn_backlog={}",
                b.max(8_192)
            )],
        ),
        Some(b) => Finding::new(
            Check::TcpMaxSynBacklog,
            Severity::Ok,
            format!(
                "listen backlog {} fits under net.ipv4.tcp_max_syn_backlog = {}",
                thousands(b),
                thousands(m)
            ),
            vec![],
        ),
        None => Finding::new(
            Check::TcpMaxSynBacklog,
            Severity::Ok,
            format!(
                "no backlog planned; net.ipv4.tcp_max_syn_backlog = {}",
                thousands(m)
            ),
            vec![],
        ),
    }
}

fn ephemeral_ports(d: &Demand, f: &Facts) -> Finding {
    const CHECK: Check = Check::EphemeralPorts;
    let Some(budget) = f.port_budget else {
        return Finding::new(
            CHECK,
            Severity::Warn,
            "could not read net.ipv4.ip_local_port_range; local ports were not checked".into(),
            vec![],
        );
    };
    // The plan's source addresses decide the budget, whatever Facts were read with.
    let budget = PortBudget {
        source_addrs: d.source_addrs.max(1),
        ..budget
    };
    let per_addr = budget.per_address();
    let ports = budget.ports();
    let free = budget.free(f.time_wait_now);
    let range = format!(
        "{} ports ({}–{} × {} source address{}; {} sockets in TIME_WAIT now)",
        thousands(ports),
        budget.low,
        budget.high,
        budget.source_addrs,
        if budget.source_addrs == 1 { "" } else { "es" },
        thousands(f.time_wait_now),
    );
    let more_addrs = |need_ports: u64| -> String {
        let n = need_ports.div_ceil(per_addr).max(budget.source_addrs + 1);
        if d.loopback {
            format!("--source-addrs {n}   # 127.0.0.2 onwards")
        } else {
            format!("--source-addrs A,B,...   # {n} local addresses of this host")
        }
    };
    let wide_range = r#"sysctl -w net.ipv4.ip_local_port_range="1024 65535""#.to_string();

    let Some(rate) = d.new_connections_per_s.filter(|r| *r > 0.0) else {
        // Keep-alive: each connection holds one port for the whole run.
        if d.connections > free {
            return Finding::new(
                CHECK,
                Severity::Fail,
                format!(
                    "{} concurrent connections need as many local ports, but only {} of {range} \
                     are free: connect() fails with EADDRNOTAVAIL",
                    thousands(d.connections),
                    thousands(free),
                ),
                vec![more_addrs(d.connections + f.time_wait_now), wide_range],
            );
        }
        return Finding::new(
            CHECK,
            Severity::Ok,
            format!(
                "keep-alive on: {} connections are reused, holding {} of {range}",
                thousands(d.connections),
                thousands(d.connections)
            ),
            vec![],
        );
    };

    let tw = TIME_WAIT_SECONDS;
    if d.server_closes {
        return Finding::new(
            CHECK,
            Severity::Ok,
            format!(
                "keep-alive off at {rate:.0} new connections/s, each closed by the server \
                 (loadlab sends `Connection: close`): the TIME_WAIT ({tw} s) stays on the \
                 server's side and holds none of loadlab's {range}; with close_by = \"client\" \
                 (--close-by client) loadlab would close and hold ~{} ports",
                thousands(ports::ports_in_time_wait(rate))
            ),
            vec![],
        );
    }
    let peak = ports::ports_in_time_wait(rate);
    if budget.tw_reuse_effective {
        return Finding::new(
            CHECK,
            Severity::Ok,
            format!(
                "keep-alive off at {rate:.0} new connections/s: net.ipv4.tcp_tw_reuse lets \
                 connect() reuse ports in TIME_WAIT; {range}"
            ),
            vec![],
        );
    }
    let reuse_note = match f.sysctls.get("net.ipv4.tcp_tw_reuse").map(String::as_str) {
        Some("2") if !d.loopback => {
            " (net.ipv4.tcp_tw_reuse = 2 only reuses ports for loopback targets)"
        }
        _ => "",
    };
    match budget.seconds_until_exhausted_holding(rate, f.time_wait_now) {
        Some(secs) if secs < d.duration_s => Finding::new(
            CHECK,
            Severity::Fail,
            format!(
                "keep-alive off: at {rate:.0} new connections/s, each closed connection holds \
                 its port in TIME_WAIT for {tw} s, so ~{} ports are needed, but only {} of \
                 {range} are free{reuse_note}\n\
                 connect() will fail with EADDRNOTAVAIL after ~{secs:.0} s (~{} requests) of \
                 the planned {:.0} s; ab without keep-alive hangs the same way, at ~16k requests \
                 with 16,383 ports",
                thousands(peak),
                thousands(free),
                thousands((rate * secs).round() as u64),
                d.duration_s,
            ),
            vec![
                "--keep-alive on   # reuse connections, as wrk and `ab -k` do".into(),
                more_addrs(peak + f.time_wait_now),
                "sysctl -w net.ipv4.tcp_tw_reuse=1".into(),
                wide_range,
            ],
        ),
        Some(secs) => Finding::new(
            CHECK,
            Severity::Ok,
            format!(
                "keep-alive off at {rate:.0} new connections/s: {range} would run out after \
                 ~{secs:.0} s, past the planned {:.0} s{reuse_note}",
                d.duration_s
            ),
            vec![],
        ),
        None => Finding::new(
            CHECK,
            Severity::Ok,
            format!(
                "keep-alive off at {rate:.0} new connections/s: at most ~{} ports in TIME_WAIT \
                 ({tw} s each), within {range}",
                thousands(peak)
            ),
            vec![],
        ),
    }
}

fn tuning(f: &Facts) -> Finding {
    let mut notes = Vec::new();
    let mut fix = Vec::new();
    let get = |name: &str| f.sysctls.get(name).map(String::as_str);
    let hidden = |name: &str| {
        format!("{name}: not visible in this network namespace (a host-wide setting; check it on the host)")
    };

    const NETDEV: &str = "net.core.netdev_max_backlog";
    match get(NETDEV).and_then(|v| v.parse::<u64>().ok()) {
        Some(v) if v < 8_192 => {
            notes.push(format!(
                "{NETDEV} = {v}: packets queued per CPU before the stack takes them; bursts \
                 past it are dropped (the actix-web backlog/workers tuning used 8192)"
            ));
            fix.push(format!("sysctl -w {NETDEV}=8192"));
        }
        Some(v) => notes.push(format!("{NETDEV} = {v}")),
        None => notes.push(hidden(NETDEV)),
    }

    const SLOW_START: &str = "net.ipv4.tcp_slow_start_after_idle";
    match get(SLOW_START) {
        Some("0") => notes.push(format!("{SLOW_START} = 0")),
        Some(v) => {
            notes.push(format!(
                "{SLOW_START} = {v}: a keep-alive connection idle for longer than its \
                 retransmission timeout starts again from a small congestion window"
            ));
            fix.push(format!("sysctl -w {SLOW_START}=0"));
        }
        None => notes.push(hidden(SLOW_START)),
    }

    const ABORT: &str = "net.ipv4.tcp_abort_on_overflow";
    match get(ABORT) {
        Some(v) => notes.push(format!(
            "{ABORT} = {v} (not changed by the doctor): 1 answers a full accept queue with \
             RST, so clients see resets at once instead of the kernel dropping the handshake's \
             last ACK and the client retrying; the actix-web backlog/workers tuning set 1, which \
             turns a silent queue into visible errors"
        )),
        None => notes.push(hidden(ABORT)),
    }

    const FIN: &str = "net.ipv4.tcp_fin_timeout";
    match get(FIN) {
        Some(v) => notes.push(format!(
            "{FIN} = {v} s: how long an orphaned connection may wait in FIN_WAIT2; it does not \
             shorten TIME_WAIT, which Linux holds for {TIME_WAIT_SECONDS} s"
        )),
        None => notes.push(hidden(FIN)),
    }

    let severity = if fix.is_empty() {
        Severity::Ok
    } else {
        Severity::Warn
    };
    Finding::new(Check::Tuning, severity, notes.join("\n"), fix)
}

/// Steal time above this share since boot is named with the wake-ups: a busy host.
const STEAL_NOTED: f64 = 0.005;

fn wakeups(f: &Facts) -> Finding {
    let Some(w) = &f.wakeups else {
        return Finding::new(
            Check::Wakeups,
            Severity::Ok,
            "not measured".into(),
            Vec::new(),
        );
    };
    let measured = format!(
        "{} sleeps {:.0} ms apart: median {:.2} ms, worst {:.2} ms",
        w.samples, w.gap_ms, w.p50_ms, w.max_ms
    );
    let steal = match f.steal_share {
        Some(s) if s >= STEAL_NOTED => Some(format!(
            "steal time: {:.1} % of this machine's CPU time since boot; its hypervisor ran \
             something else while its CPUs were ready (a busy host), which delays wake-ups",
            s * 100.0
        )),
        _ => None,
    };
    if w.p99_ms <= LAG_LIMIT_MS {
        let mut message = format!(
            "this machine woke a sleeping thread {:.2} ms late at p99 ({measured}), within the \
             {LAG_LIMIT_MS} ms of schedule lag that marks a run generator-limited",
            w.p99_ms
        );
        if let Some(s) = steal {
            message.push('\n');
            message.push_str(&s);
        }
        return Finding::new(Check::Wakeups, Severity::Ok, message, Vec::new());
    }
    let mut message = format!(
        "this machine woke a sleeping thread {:.2} ms late at p99 ({measured}): loadlab's \
         workers sleep to each send time and wake as late, so steps whose schedule lag p99 \
         passes {LAG_LIMIT_MS} ms are noted generator-limited\n\
         the verdict still judges the server when the lateness cannot have changed it (a \
         step far past its knee fails on latency whatever the lag), but a step it could have \
         changed stays generator-limited and a knee search stops there",
        w.p99_ms
    );
    if let Some(s) = steal {
        message.push('\n');
        message.push_str(&s);
    }
    Finding::new(
        Check::Wakeups,
        Severity::Warn,
        message,
        vec![
            "give loadlab CPUs nothing else runs on: load.cpus in a plan (apart from the \
             target's cpus), taskset -c for loadlab run"
                .into(),
            "on a virtual machine: a host with idle CPUs (no steal time), or bare metal".into(),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A well-tuned machine: the actix-web backlog/workers tuning's settings.
    fn tuned() -> Facts {
        let sysctls = [
            ("net.core.somaxconn", "65535"),
            ("net.core.netdev_max_backlog", "8192"),
            ("net.ipv4.tcp_max_syn_backlog", "8192"),
            ("net.ipv4.ip_local_port_range", "1024 65535"),
            ("net.ipv4.tcp_tw_reuse", "1"),
            ("net.ipv4.tcp_fin_timeout", "60"),
            ("net.ipv4.tcp_syncookies", "1"),
            ("net.ipv4.tcp_abort_on_overflow", "1"),
            ("net.ipv4.tcp_slow_start_after_idle", "0"),
        ];
        Facts {
            nofile_soft: 65_536,
            nofile_hard: 65_536,
            somaxconn: 65_535,
            tcp_max_syn_backlog: 8_192,
            port_budget: Some(PortBudget {
                low: 1024,
                high: 65535,
                source_addrs: 1,
                tw_reuse_effective: true,
            }),
            time_wait_now: 0,
            sysctls: sysctls
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            wakeups: Some(Wakeups {
                samples: 200,
                gap_ms: 2.0,
                p50_ms: 0.06,
                p99_ms: 0.2,
                max_ms: 0.4,
            }),
            steal_share: Some(0.0),
        }
    }

    fn demand() -> Demand {
        Demand {
            connections: 1_000,
            backlog: Some(2_048),
            new_connections_per_s: None,
            server_closes: false,
            duration_s: 60.0,
            loopback: true,
            source_addrs: 1,
        }
    }

    fn find<'a>(fs: &'a [Finding], check: &str) -> &'a Finding {
        fs.iter().find(|f| f.check == check).unwrap()
    }

    /// Document 002's machine: 49152–65535, no tw_reuse, otherwise untouched.
    fn doc002() -> Facts {
        let mut f = tuned();
        f.port_budget = Some(PortBudget {
            low: 49152,
            high: 65535,
            source_addrs: 1,
            tw_reuse_effective: false,
        });
        f.sysctls.insert("net.ipv4.tcp_tw_reuse".into(), "0".into());
        f
    }

    #[test]
    fn tuned_machine_passes_everything() {
        let fs = diagnose(&demand(), &tuned());
        let checks: Vec<_> = fs.iter().map(|f| f.check).collect();
        assert_eq!(
            checks,
            [
                "nofile",
                "somaxconn",
                "tcp_max_syn_backlog",
                "ephemeral_ports",
                "tuning",
                "wakeups"
            ]
        );
        for f in &fs {
            assert_eq!(f.severity, Severity::Ok, "{f:?}");
            assert!(f.fix.is_empty(), "{f:?}");
        }
        assert_eq!(worst(&fs), Severity::Ok);
    }

    #[test]
    fn nofile_branches() {
        let d = Demand {
            connections: 10_000,
            ..demand()
        };
        let mut f = tuned();
        assert_eq!(find(&diagnose(&d, &f), "nofile").severity, Severity::Ok);

        // Exactly connections + 32 is enough.
        f.nofile_soft = 10_032;
        assert_eq!(find(&diagnose(&d, &f), "nofile").severity, Severity::Ok);

        f.nofile_soft = 1_024;
        let w = diagnose(&d, &f);
        let w = find(&w, "nofile");
        assert_eq!(w.severity, Severity::Warn);
        assert!(w.message.contains("10,032"), "{}", w.message);
        assert_eq!(w.fix, ["ulimit -n 10032"]);

        f.nofile_hard = 4_096;
        let fs = diagnose(&d, &f);
        let x = find(&fs, "nofile");
        assert_eq!(x.severity, Severity::Fail);
        assert!(x.message.contains("EMFILE") && x.message.contains("4,096"));
        assert!(x
            .fix
            .iter()
            .any(|c| c.contains("* - nofile 65536") && c.contains("/etc/security/limits.conf")));
        assert!(x.fix.iter().any(|c| c.starts_with("LimitNOFILE=65536")));
        assert!(x.fix.iter().any(|c| c == "ulimit -n 10032"));
        assert_eq!(worst(&fs), Severity::Fail);

        // Beyond 65536 the suggested limit grows with the need.
        let big = Demand {
            connections: 100_000,
            ..demand()
        };
        let fs = diagnose(&big, &tuned());
        assert!(find(&fs, "nofile")
            .fix
            .iter()
            .any(|c| c.contains("nofile 100032")));
    }

    #[test]
    fn somaxconn_branches() {
        let mut f = tuned();
        f.somaxconn = 4_096;
        let no_backlog = Demand {
            backlog: None,
            ..demand()
        };
        assert_eq!(
            find(&diagnose(&no_backlog, &f), "somaxconn").severity,
            Severity::Ok
        );
        assert_eq!(
            find(&diagnose(&demand(), &f), "somaxconn").severity,
            Severity::Ok
        );
        // Document 004's backlog 7168 on a default kernel.
        let d = Demand {
            backlog: Some(7_168),
            ..demand()
        };
        let fs = diagnose(&d, &f);
        let w = find(&fs, "somaxconn");
        assert_eq!(w.severity, Severity::Warn);
        assert!(w.message.contains("7,168") && w.message.contains("4,096"));
        assert_eq!(w.fix, ["sysctl -w net.core.somaxconn=65535"]);
        assert_eq!(worst(&fs), Severity::Warn);
    }

    #[test]
    fn syn_backlog_branches() {
        let mut f = tuned();
        f.tcp_max_syn_backlog = 1_024;
        let small = Demand {
            backlog: Some(256),
            ..demand()
        };
        assert_eq!(
            find(&diagnose(&small, &f), "tcp_max_syn_backlog").severity,
            Severity::Ok
        );
        let none = Demand {
            backlog: None,
            ..demand()
        };
        assert_eq!(
            find(&diagnose(&none, &f), "tcp_max_syn_backlog").severity,
            Severity::Ok
        );
        let fs = diagnose(&demand(), &f);
        let w = find(&fs, "tcp_max_syn_backlog");
        assert_eq!(w.severity, Severity::Warn);
        assert!(w.message.contains("2,048") && w.message.contains("1,024"));
        assert_eq!(w.fix, ["sysctl -w net.ipv4.tcp_max_syn_backlog=8192"]);
        // somaxconn is fine on this machine.
        assert_eq!(find(&fs, "somaxconn").severity, Severity::Ok);
    }

    #[test]
    fn document_002_runs_out_of_ports() {
        let d = Demand {
            connections: 100,
            backlog: None,
            new_connections_per_s: Some(1_000.0),
            server_closes: false,
            duration_s: 60.0,
            loopback: true,
            source_addrs: 1,
        };
        let fs = diagnose(&d, &doc002());
        let x = find(&fs, "ephemeral_ports");
        assert_eq!(x.severity, Severity::Fail, "{}", x.message);
        // 16,384 ports at 1,000/s: ~16 s, ~16,384 requests.
        assert!(x.message.contains("~16 s"), "{}", x.message);
        assert!(x.message.contains("~16,384 requests"), "{}", x.message);
        assert!(x.message.contains("EADDRNOTAVAIL"));
        assert!(x.fix.iter().any(|c| c.starts_with("--keep-alive on")));
        // The same load with the server closing each connection holds none of loadlab's
        // ports: its TIME_WAIT is on the server's side.
        let server = diagnose(
            &Demand {
                server_closes: true,
                ..d.clone()
            },
            &doc002(),
        );
        let y = find(&server, "ephemeral_ports");
        assert_eq!(y.severity, Severity::Ok, "{}", y.message);
        assert!(
            y.message.contains("stays on the server's side"),
            "{}",
            y.message
        );
        assert!(y.message.contains("~60,000 ports"), "{}", y.message);
        // 60,000 ports needed, 16,384 per address: 4 addresses.
        assert!(
            x.fix.iter().any(|c| c.starts_with("--source-addrs 4 ")),
            "{:?}",
            x.fix
        );
        assert!(x
            .fix
            .contains(&"sysctl -w net.ipv4.tcp_tw_reuse=1".to_string()));
        assert!(x
            .fix
            .contains(&r#"sysctl -w net.ipv4.ip_local_port_range="1024 65535""#.to_string()));
        assert_eq!(worst(&fs), Severity::Fail);

        // With tcp_tw_reuse in effect the same plan is fine.
        let mut reuse = doc002();
        reuse.port_budget.as_mut().unwrap().tw_reuse_effective = true;
        let x = diagnose(&d, &reuse);
        assert_eq!(find(&x, "ephemeral_ports").severity, Severity::Ok);

        // So is keep-alive.
        let ka = Demand {
            new_connections_per_s: None,
            server_closes: false,
            ..d.clone()
        };
        let x = diagnose(&ka, &doc002());
        let x = find(&x, "ephemeral_ports");
        assert_eq!(x.severity, Severity::Ok);
        assert!(x.message.contains("keep-alive on"));

        // And 4 source addresses, as the fix says.
        let spread = Demand {
            source_addrs: 4,
            ..d.clone()
        };
        assert_eq!(
            find(&diagnose(&spread, &doc002()), "ephemeral_ports").severity,
            Severity::Ok
        );

        // A run shorter than the exhaustion time is fine, but says when it would run out.
        let short = Demand {
            duration_s: 10.0,
            ..d.clone()
        };
        let x = diagnose(&short, &doc002());
        let x = find(&x, "ephemeral_ports");
        assert_eq!(x.severity, Severity::Ok);
        assert!(x.message.contains("~16 s"), "{}", x.message);
    }

    #[test]
    fn ports_already_in_time_wait_shorten_the_budget() {
        // 200/s holds 12,000 ports at most: fine with 16,384 free...
        let d = Demand {
            new_connections_per_s: Some(200.0),
            server_closes: false,
            backlog: None,
            ..demand()
        };
        let mut f = doc002();
        assert_eq!(
            find(&diagnose(&d, &f), "ephemeral_ports").severity,
            Severity::Ok
        );
        // ...but not with 8,384 of them already in TIME_WAIT: 8,000 free, gone in 40 s.
        f.time_wait_now = 8_384;
        let fs = diagnose(&d, &f);
        let x = find(&fs, "ephemeral_ports");
        assert_eq!(x.severity, Severity::Fail);
        assert!(x.message.contains("~40 s"), "{}", x.message);
        assert!(x.message.contains("~8,000 requests"), "{}", x.message);
    }

    #[test]
    fn keep_alive_with_more_connections_than_ports_fails() {
        let d = Demand {
            connections: 20_000,
            new_connections_per_s: None,
            server_closes: false,
            ..demand()
        };
        let fs = diagnose(&d, &doc002());
        let x = find(&fs, "ephemeral_ports");
        assert_eq!(x.severity, Severity::Fail, "{}", x.message);
        assert!(
            x.fix.iter().any(|c| c.starts_with("--source-addrs 2 ")),
            "{:?}",
            x.fix
        );

        // Off loopback the fix names addresses, not a count.
        let remote = Demand {
            loopback: false,
            ..d
        };
        let fs = diagnose(&remote, &doc002());
        assert!(find(&fs, "ephemeral_ports")
            .fix
            .iter()
            .any(|c| c.starts_with("--source-addrs A,B")));
    }

    #[test]
    fn tw_reuse_2_off_loopback_is_explained() {
        let mut f = doc002();
        f.sysctls.insert("net.ipv4.tcp_tw_reuse".into(), "2".into());
        let d = Demand {
            new_connections_per_s: Some(1_000.0),
            server_closes: false,
            loopback: false,
            ..demand()
        };
        let fs = diagnose(&d, &f);
        let x = find(&fs, "ephemeral_ports");
        assert_eq!(x.severity, Severity::Fail);
        assert!(x.message.contains("only reuses ports for loopback"));
    }

    #[test]
    fn unknown_port_range_warns() {
        let mut f = tuned();
        f.port_budget = None;
        let fs = diagnose(&demand(), &f);
        assert_eq!(find(&fs, "ephemeral_ports").severity, Severity::Warn);
    }

    #[test]
    fn tuning_lists_exact_commands() {
        let mut f = tuned();
        f.sysctls
            .insert("net.core.netdev_max_backlog".into(), "1000".into());
        f.sysctls
            .insert("net.ipv4.tcp_slow_start_after_idle".into(), "1".into());
        f.sysctls
            .insert("net.ipv4.tcp_abort_on_overflow".into(), "0".into());
        let fs = diagnose(&demand(), &f);
        let t = find(&fs, "tuning");
        assert_eq!(t.severity, Severity::Warn);
        assert_eq!(
            t.fix,
            [
                "sysctl -w net.core.netdev_max_backlog=8192",
                "sysctl -w net.ipv4.tcp_slow_start_after_idle=0"
            ]
        );
        // abort_on_overflow is reported, never recommended.
        assert!(t.message.contains("net.ipv4.tcp_abort_on_overflow = 0"));
        assert!(!t.fix.iter().any(|c| c.contains("abort_on_overflow")));
        assert!(t.message.contains("does not shorten TIME_WAIT"));

        // In a network namespace the host-wide ones are missing: reported, not failed.
        let mut ns = tuned();
        ns.sysctls.remove("net.core.netdev_max_backlog");
        let fs = diagnose(&demand(), &ns);
        let t = find(&fs, "tuning");
        assert_eq!(t.severity, Severity::Ok);
        assert!(t.message.contains("not visible in this network namespace"));
    }

    /// One finding of each severity: ab's port exhaustion at 1,000 new connections/s with
    /// the actix-web benchmark's backlog (7168) on a default somaxconn.
    fn fail_warn_ok() -> Vec<Finding> {
        let d = Demand {
            new_connections_per_s: Some(1_000.0),
            server_closes: false,
            backlog: Some(7_168),
            ..demand()
        };
        let mut f = doc002();
        f.somaxconn = 4_096;
        diagnose(&d, &f)
    }

    #[test]
    fn render_shows_every_block_and_its_fixes() {
        let fs = fail_warn_ok();
        let text = render(&fs);
        assert!(text.contains("[FAIL] ephemeral_ports: "), "{text}");
        assert!(text.contains("[WARN] somaxconn: "), "{text}");
        assert!(text.contains("[OK]   nofile: "), "{text}");
        assert!(
            text.contains("\n         sysctl -w net.core.somaxconn=65535\n"),
            "{text}"
        );
        assert!(
            text.contains("\n         sysctl -w net.ipv4.tcp_tw_reuse=1\n"),
            "{text}"
        );
        // The two-line ephemeral message keeps its second line indented under the block.
        assert!(text.contains("\n       connect() will fail"), "{text}");
        assert!(text.ends_with("doctor: 1 fail, 1 warn, 4 ok\n"), "{text}");
    }

    #[test]
    fn findings_round_trip_and_headlines_are_the_rendered_first_lines() {
        let fs = fail_warn_ok();
        let json = serde_json::to_string(&fs).unwrap();
        let back: Vec<Finding> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, fs);
        // The lines of the text that start with a tag are exactly the headlines.
        let text = render(&fs);
        let tagged: Vec<&str> = text.lines().filter(|l| l.starts_with('[')).collect();
        let headlines: Vec<String> = fs.iter().map(Finding::headline).collect();
        assert_eq!(tagged, headlines);
        assert_eq!(
            headlines[0],
            "[OK]   nofile: 1,032 file descriptors needed; soft limit 65,536, hard 65,536"
        );
        // Checks are stored and shown by their names.
        assert!(json.contains(r#""check":"tcp_max_syn_backlog""#), "{json}");
        assert_eq!(Check::EphemeralPorts.to_string(), "ephemeral_ports");
        // An unknown check does not pass for a known one.
        assert!(serde_json::from_str::<Check>("\"swap\"").is_err());
    }

    #[test]
    fn severity_orders_and_serializes() {
        assert!(Severity::Ok < Severity::Warn && Severity::Warn < Severity::Fail);
        assert_eq!(worst(&[]), Severity::Ok);
        let f = Finding::new(Check::Nofile, Severity::Warn, "m".into(), vec!["c".into()]);
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"check": "nofile", "severity": "warn", "message": "m", "fix": ["c"]})
        );
    }

    #[test]
    fn thousands_groups() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(16_384), "16,384");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn wakeups_warn_past_the_lag_limit_and_name_a_busy_host() {
        let mut f = tuned();
        let ok = find(&diagnose(&demand(), &f), "wakeups").clone();
        assert_eq!(ok.severity, Severity::Ok);
        assert!(
            ok.message.starts_with(
                "this machine woke a sleeping thread 0.20 ms late at p99 (200 sleeps 2 ms apart: median 0.06 ms, worst 0.40 ms), within the 1 ms"
            ),
            "{}",
            ok.message
        );
        assert!(!ok.message.contains("steal"), "{}", ok.message);
        // Late at p99, on a busy host.
        f.wakeups = Some(Wakeups {
            samples: 200,
            gap_ms: 2.0,
            p50_ms: 0.12,
            p99_ms: 2.89,
            max_ms: 8.63,
        });
        f.steal_share = Some(0.032);
        let w = find(&diagnose(&demand(), &f), "wakeups").clone();
        assert_eq!(w.severity, Severity::Warn);
        assert!(
            w.message.starts_with("this machine woke a sleeping thread 2.89 ms late at p99 (200 sleeps 2 ms apart: median 0.12 ms, worst 8.63 ms): loadlab's workers sleep to each send time"),
            "{}",
            w.message
        );
        assert!(
            w.message
                .contains("steal time: 3.2 % of this machine's CPU time since boot"),
            "{}",
            w.message
        );
        assert!(w.fix[0].contains("load.cpus"), "{:?}", w.fix);
        // Exactly at the limit: still within it.
        f.wakeups.as_mut().unwrap().p99_ms = LAG_LIMIT_MS;
        assert_eq!(
            find(&diagnose(&demand(), &f), "wakeups").severity,
            Severity::Ok
        );
        // Not measured: nothing claimed.
        f.wakeups = None;
        let n = find(&diagnose(&demand(), &f), "wakeups").clone();
        assert_eq!(
            (n.severity, n.message.as_str()),
            (Severity::Ok, "not measured")
        );
    }

    #[test]
    fn wakeup_percentiles_are_nearest_rank() {
        // 100 sleeps, one 9 ms late, one 5 ms, the rest 0.1 ms: p99 is the second worst.
        let mut late = vec![100_000u64; 98];
        late.extend([5_000_000, 9_000_000]);
        let w = Wakeups::of(&late, 2_000_000).unwrap();
        assert_eq!(
            (w.samples, w.p50_ms, w.p99_ms, w.max_ms),
            (100, 0.1, 5.0, 9.0)
        );
        assert_eq!(Wakeups::of(&[], 2_000_000), None);
    }

    #[test]
    fn facts_read_from_this_machine() {
        let f = Facts::read(true, 1);
        let (soft, hard) = os::nofile_limits();
        assert_eq!((f.nofile_soft, f.nofile_hard), (soft, hard));
        let b = f.port_budget.expect("this machine has a port range");
        assert_eq!(Some((b.low, b.high)), procfs::ephemeral_port_range());
        assert_eq!(
            f.sysctls.get("net.core.somaxconn").map(String::as_str),
            Some(f.somaxconn.to_string().as_str())
        );
        let w = f.wakeups.expect("the wake-ups were measured");
        assert_eq!(w.samples, WAKEUP_SAMPLES);
        assert!(w.p50_ms <= w.p99_ms && w.p99_ms <= w.max_ms, "{w:?}");
        let steal = f.steal_share.expect("/proc/stat read");
        assert!((0.0..1.0).contains(&steal), "{steal}");
    }
}

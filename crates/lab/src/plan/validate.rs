//! Checks a [`PlanFile`] field by field and converts it into a [`Plan`]: one function per
//! table, every error naming the dotted field.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use loadlab_engine::config::{
    parse_duration, CpuList, SourceAddrs, MAX_DURATION, MAX_TIMEOUT, MAX_WARMUP,
};
use loadlab_engine::{Arrival, CloseBy, GrpcCall, Protocol};
use loadlab_grpc::CallInput;

use super::file::{KneeFile, LoadFile, ProbeFile, SloFile, TargetFile};
use super::{
    BuildSpec, LoadSpec, Model, NamedSlo, PercentileBound, Plan, PlanError, PlanFile, ProbeSpec,
    Ready, ScenarioFile, ScenarioSpec, ScenarioTraffic, Slo, Steps, TargetSpec, BUILD_PLACEHOLDERS,
    BUILTINS, DEFAULT_BUILD_TIMEOUT, MAX_CONFIGURATIONS,
};
use crate::gate::{Gate, Metric, Op};
use crate::template;

/// The longest a target may take to become ready.
const MAX_READY_TIMEOUT: Duration = Duration::from_secs(3600);
/// The longest a target is given to stop after SIGTERM.
const MAX_STOP_GRACE: Duration = Duration::from_secs(600);
/// The longest pause between steps.
const MAX_PAUSE: Duration = Duration::from_secs(3600);
/// The longest a target's build may be given.
pub const MAX_BUILD_TIMEOUT: Duration = Duration::from_secs(6 * 3600);
/// The most steps a knee search may climb before it reaches `max`: a growth factor barely
/// above 1 would otherwise plan millions of steps.
pub const MAX_KNEE_CLIMB: f64 = 100.0;

/// Builds errors that name the plan file.
struct Checker<'a> {
    origin: &'a str,
}

impl Checker<'_> {
    fn err(
        &self,
        field: impl Into<String>,
        value: impl Into<String>,
        allowed: impl Into<String>,
    ) -> PlanError {
        PlanError::Field {
            path: self.origin.into(),
            field: field.into(),
            value: value.into(),
            allowed: allowed.into(),
        }
    }

    fn duration(&self, field: &str, v: &str) -> Result<Duration, PlanError> {
        parse_duration(v).map_err(|_| {
            self.err(
                field,
                format!("{v:?}"),
                "a duration such as \"10s\", \"500ms\", \"2m\"",
            )
        })
    }

    /// A duration no longer than `max`: every wait a plan sets is bounded, whatever it says.
    fn duration_at_most(&self, field: &str, v: &str, max: Duration) -> Result<Duration, PlanError> {
        let d = self.duration(field, v)?;
        if d > max {
            return Err(self.err(
                field,
                format!("{v:?}"),
                format!("at most {}", humantime::format_duration(max)),
            ));
        }
        Ok(d)
    }

    fn parsed<T: std::str::FromStr<Err = String>>(
        &self,
        field: &str,
        v: &str,
    ) -> Result<T, PlanError> {
        v.parse()
            .map_err(|allowed: String| self.err(field, format!("{v:?}"), allowed))
    }

    fn cpu_list(&self, field: &str, v: Option<&str>) -> Result<Vec<usize>, PlanError> {
        match v {
            None => Ok(Vec::new()),
            Some(list) => Ok(self.parsed::<CpuList>(field, list)?.as_slice().to_vec()),
        }
    }
}

/// The validated plan of `file` (after `--quick`); `source` is the text it came from.
pub(super) fn plan(
    file: &PlanFile,
    source: &str,
    origin: &str,
    dir: &Path,
    quick: bool,
) -> Result<Plan, PlanError> {
    let c = Checker { origin };
    if file.name.trim().is_empty()
        || !file
            .name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
    {
        return Err(c.err(
            "name",
            format!("{:?}", file.name),
            "letters, digits, '-', '_' and '.'",
        ));
    }
    let matrix = matrix(&c, file)?;
    let exclude = exclude(&c, file)?;
    let known = placeholders(&c, file, &matrix)?;
    let targets = file
        .target
        .iter()
        .enumerate()
        .map(|(i, t)| target(&c, &known, dir, i, t))
        .collect::<Result<Vec<_>, _>>()?;
    let scenarios = scenarios(&c, &known, dir, &file.scenario)?;
    let load = load(&c, &file.load, &scenarios)?;
    let slo = slo(&c, &file.slo)?;
    let probe = probe(&c, dir, file.probe.as_ref())?;
    let tune = file
        .tune
        .as_ref()
        .map(|t| tune(&c, t, &matrix, &scenarios))
        .transpose()?;
    Ok(Plan {
        name: file.name.clone(),
        description: file.description.clone(),
        dir: dir.to_path_buf(),
        source: source.to_string(),
        targets,
        matrix,
        exclude,
        scenarios,
        load,
        slo,
        quick,
        matrix_set: Vec::new(),
        probe,
        tune,
    })
}

/// `[tune]`.
fn tune(
    c: &Checker<'_>,
    t: &super::file::TuneFile,
    matrix: &[(String, Vec<String>)],
    scenarios: &[ScenarioSpec],
) -> Result<super::TuneSpec, PlanError> {
    use crate::diagnosis::bottleneck::Bottleneck;
    if let Some(s) = &t.scenario {
        if !scenarios.iter().any(|x| &x.name == s) {
            return Err(c.err(
                "tune.scenario",
                format!("{s:?}"),
                format!(
                    "one of the plan's scenarios: {}",
                    scenarios
                        .iter()
                        .map(|x| x.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    let knee = t
        .knee
        .as_ref()
        .map(|k| knee(c, k).map_err(|e| rename_field(e, "load.knee", "tune.knee")))
        .transpose()?;
    let budget = match &t.budget {
        None => None,
        Some(toml::Value::Integer(n)) if *n > 0 => Some(super::Budget::Configs(*n as usize)),
        Some(toml::Value::String(s)) => Some(
            super::Budget::parse(s).map_err(|why| c.err("tune.budget", format!("{s:?}"), why))?,
        ),
        Some(v) => {
            return Err(c.err(
                "tune.budget",
                v.to_string(),
                "a number of configurations above 0 (12) or a time of load (\"30m\")",
            ))
        }
    };
    // Read as `load.step_duration` is: a bare number is seconds, and the same bound holds.
    let step_duration = match &t.step_duration {
        None => None,
        Some(d) => {
            let v = c.duration_at_most("tune.step_duration", d, MAX_DURATION)?;
            if v.is_zero() {
                return Err(c.err("tune.step_duration", format!("{d:?}"), "above 0"));
            }
            Some(v)
        }
    };
    let mut knobs = BTreeMap::new();
    for (name, k) in &t.knobs {
        let field = format!("tune.knobs.{name}");
        if !matrix.iter().any(|(m, _)| m == name) {
            return Err(c.err(&field, name.clone(), "a parameter that [matrix] defines"));
        }
        let names: Vec<String> = match &k.relieves {
            None => Vec::new(),
            Some(toml::Value::String(s)) => vec![s.clone()],
            Some(toml::Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    c.err(
                        format!("{field}.relieves"),
                        format!("{a:?}"),
                        "bottleneck names",
                    )
                })?,
            Some(v) => {
                return Err(c.err(
                    format!("{field}.relieves"),
                    v.to_string(),
                    "a bottleneck name or a list of them",
                ))
            }
        };
        let mut relieved = Vec::new();
        for n in names {
            let found = Bottleneck::from_relief(&n).ok_or_else(|| {
                c.err(
                    format!("{field}.relieves"),
                    format!("{n:?}"),
                    Bottleneck::RELIEF_WORDS,
                )
            })?;
            relieved.extend(found);
        }
        knobs.insert(name.clone(), relieved);
    }
    Ok(super::TuneSpec {
        scenario: t.scenario.clone(),
        knee,
        budget,
        step_duration,
        knobs,
    })
}

/// The same error, about `to` instead of `from` (a check shared by two tables).
fn rename_field(e: PlanError, from: &str, to: &str) -> PlanError {
    match e {
        PlanError::Field {
            path,
            field,
            value,
            allowed,
        } => PlanError::Field {
            path,
            field: field.replacen(from, to, 1),
            value,
            allowed,
        },
        other => other,
    }
}

/// `[probe]`: one key at most.
fn probe(c: &Checker<'_>, dir: &Path, p: Option<&ProbeFile>) -> Result<ProbeSpec, PlanError> {
    let Some(p) = p else {
        return Ok(ProbeSpec::Auto);
    };
    let mut given = Vec::new();
    if let Some(pid) = p.pid {
        if pid == 0 {
            return Err(c.err("probe.pid", "0", "a process id above 0"));
        }
        given.push(ProbeSpec::Pid(pid));
    }
    let nonempty = |field: &str, v: &Option<String>| -> Result<Option<String>, PlanError> {
        match v {
            Some(s) if s.trim().is_empty() => Err(c.err(field, "\"\"", "a non-empty string")),
            other => Ok(other.clone()),
        }
    };
    if let Some(f) = nonempty("probe.pidfile", &p.pidfile)? {
        given.push(ProbeSpec::Pidfile(dir.join(f)));
    }
    if let Some(g) = nonempty("probe.cgroup", &p.cgroup)? {
        given.push(ProbeSpec::Cgroup(g));
    }
    if let Some(n) = nonempty("probe.container", &p.container)? {
        given.push(ProbeSpec::Container(n));
    }
    if let Some(port) = p.listen {
        if port == 0 {
            return Err(c.err("probe.listen", "0", "a TCP port from 1 to 65535"));
        }
        given.push(ProbeSpec::Listen(port));
    }
    if p.off {
        given.push(ProbeSpec::Off);
    }
    match given.len() {
        0 | 1 => Ok(given.pop().unwrap_or_default()),
        n => Err(c.err(
            "probe",
            format!("{n} keys"),
            "one of pid, pidfile, cgroup, container, listen or off = true",
        )),
    }
}

/// `[matrix]`: parameters in name order, each with its values as text.
fn matrix(c: &Checker<'_>, file: &PlanFile) -> Result<Vec<(String, Vec<String>)>, PlanError> {
    let mut matrix = Vec::new();
    for (k, values) in &file.matrix {
        if BUILTINS.contains(&k.as_str()) || k.ends_with("_port") {
            return Err(c.err(
                format!("matrix.{k}"),
                k.clone(),
                "a name that is not a built-in placeholder",
            ));
        }
        if values.is_empty() {
            return Err(c.err(format!("matrix.{k}"), "[]", "at least one value"));
        }
        let vals = values
            .iter()
            .map(|v| {
                value_string(v).ok_or_else(|| {
                    c.err(
                        format!("matrix.{k}"),
                        v.to_string(),
                        "strings, numbers or booleans",
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        matrix.push((k.clone(), vals));
    }
    // Counted before anything is expanded: a typo of a few zeros must not take the machine.
    let configs = matrix
        .iter()
        .fold(1u64, |n, (_, v)| n.saturating_mul(v.len() as u64));
    if configs > MAX_CONFIGURATIONS as u64 {
        let sizes: Vec<String> = matrix
            .iter()
            .map(|(k, v)| format!("{k}: {}", v.len()))
            .collect();
        return Err(c.err(
            "matrix",
            format!("{configs} configurations ({})", sizes.join(", ")),
            format!(
                "at most {MAX_CONFIGURATIONS} configurations (the product of the value counts, \
                 before [[exclude]]): shorten the lists or split the plan"
            ),
        ));
    }
    Ok(matrix)
}

/// `[[exclude]]`: combinations left out, each key a matrix parameter.
fn exclude(c: &Checker<'_>, file: &PlanFile) -> Result<Vec<BTreeMap<String, String>>, PlanError> {
    let mut exclude = Vec::new();
    for (i, ex) in file.exclude.iter().enumerate() {
        let mut m = BTreeMap::new();
        for (k, v) in ex {
            if !file.matrix.contains_key(k) {
                return Err(c.err(
                    format!("exclude[{i}].{k}"),
                    v.to_string(),
                    "a parameter that [matrix] defines",
                ));
            }
            m.insert(k.clone(), value_string(v).unwrap_or_default());
        }
        exclude.push(m);
    }
    Ok(exclude)
}

/// The placeholders every template may use: the built-ins, the matrix parameters and
/// `{NAME_port}` of every target (whose names must be unique).
fn placeholders(
    c: &Checker<'_>,
    file: &PlanFile,
    matrix: &[(String, Vec<String>)],
) -> Result<BTreeSet<String>, PlanError> {
    let mut known: BTreeSet<String> = BUILTINS.iter().map(|s| s.to_string()).collect();
    known.extend(matrix.iter().map(|(k, _)| k.clone()));
    let mut names = BTreeSet::new();
    for t in &file.target {
        // The name makes a log file's name and a `{name_port}` placeholder: no paths.
        if t.name.is_empty()
            || t.name.starts_with('.')
            || !t
                .name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
        {
            return Err(c.err(
                "target.name",
                format!("{:?}", t.name),
                "letters, digits, '-', '_' and '.' (not first): it names the target's log file",
            ));
        }
        if !names.insert(t.name.clone()) {
            return Err(c.err("target.name", t.name.clone(), "unique target names"));
        }
        known.insert(format!("{}_port", t.name));
    }
    Ok(known)
}

/// Checks that `text` uses only `known` placeholders.
fn template(
    c: &Checker<'_>,
    known: &BTreeSet<String>,
    field: String,
    text: &str,
) -> Result<(), PlanError> {
    template::check(text, known).map_err(|e| {
        c.err(
            field,
            format!("{text:?}"),
            format!(
                "{e}; known placeholders: {}",
                known.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        )
    })
}

/// `[[target]]` number `i`.
fn target(
    c: &Checker<'_>,
    known: &BTreeSet<String>,
    dir: &Path,
    i: usize,
    t: &TargetFile,
) -> Result<TargetSpec, PlanError> {
    let f = |s: &str| format!("target[{i}].{s}");
    if t.command.is_empty() {
        return Err(c.err(f("command"), "[]", "a program and its arguments"));
    }
    if t.shell && t.command.len() != 1 {
        return Err(c.err(
            f("command"),
            format!("{:?}", t.command),
            "one string when shell = true",
        ));
    }
    for (j, a) in t.command.iter().enumerate() {
        template(c, known, f(&format!("command[{j}]")), a)?;
    }
    for (k, v) in &t.env {
        template(c, known, f(&format!("env.{k}")), v)?;
    }
    for (k, v) in &t.files {
        if k.is_empty() || k.contains('/') || k.starts_with('.') {
            return Err(c.err(f(&format!("files.{k}")), k.clone(), "a plain file name"));
        }
        template(c, known, f(&format!("files.{k}")), v)?;
    }
    let ready = match (&t.ready.http, &t.ready.tcp) {
        (Some(u), None) => {
            template(c, known, f("ready.http"), u)?;
            Ready::Http {
                url: u.clone(),
                status: t.ready.status,
            }
        }
        (None, Some(a)) => {
            template(c, known, f("ready.tcp"), a)?;
            Ready::Tcp { addr: a.clone() }
        }
        _ => {
            return Err(c.err(
                f("ready"),
                "…",
                "exactly one of { http = URL, status = N } or { tcp = \"host:port\" }",
            ))
        }
    };
    Ok(TargetSpec {
        name: t.name.clone(),
        command: t.command.clone(),
        shell: t.shell,
        env: t.env.clone(),
        cwd: t
            .cwd
            .as_ref()
            .map_or_else(|| dir.to_path_buf(), |d| dir.join(d)),
        ready,
        ready_timeout: c.duration_at_most(
            &f("ready_timeout"),
            &t.ready_timeout,
            MAX_READY_TIMEOUT,
        )?,
        stop_grace: c.duration_at_most(&f("stop_grace"), &t.stop_grace, MAX_STOP_GRACE)?,
        files: t.files.clone(),
        cpus: c.cpu_list(&f("cpus"), t.cpus.as_deref())?,
        unavailable_exit: t.unavailable_exit,
        build: build(c, known, i, t)?,
    })
}

/// `build`, `build_shell` and `build_timeout` of `[[target]]` number `i`: a non-empty list
/// of strings (exactly one with `build_shell`) using only [`BUILD_PLACEHOLDERS`].
fn build(
    c: &Checker<'_>,
    known: &BTreeSet<String>,
    i: usize,
    t: &TargetFile,
) -> Result<Option<BuildSpec>, PlanError> {
    let f = |s: &str| format!("target[{i}].{s}");
    let list = "a program and its arguments, e.g. [\"cargo\", \"build\", \"--release\"] \
                (or, with build_shell = true, one string for sh -c, e.g. [\"npm ci && npm run build\"])";
    let Some(value) = &t.build else {
        if t.build_shell {
            return Err(c.err(f("build_shell"), "true", "only with build = [...]"));
        }
        if let Some(timeout) = &t.build_timeout {
            return Err(c.err(
                f("build_timeout"),
                format!("{timeout:?}"),
                "only with build = [...]",
            ));
        }
        return Ok(None);
    };
    let toml::Value::Array(items) = value else {
        return Err(c.err(f("build"), value.to_string(), list));
    };
    if items.is_empty() {
        return Err(c.err(f("build"), "[]", list));
    }
    let mut command = Vec::with_capacity(items.len());
    for (j, item) in items.iter().enumerate() {
        let toml::Value::String(arg) = item else {
            return Err(c.err(
                f(&format!("build[{j}]")),
                item.to_string(),
                format!("a string: {list}"),
            ));
        };
        build_placeholders(c, known, f(&format!("build[{j}]")), arg)?;
        command.push(arg.clone());
    }
    if command[0].trim().is_empty() {
        return Err(c.err(f("build[0]"), format!("{:?}", command[0]), list));
    }
    if t.build_shell && command.len() != 1 {
        return Err(c.err(
            f("build"),
            format!("{command:?}"),
            "one string when build_shell = true",
        ));
    }
    let timeout = match &t.build_timeout {
        Some(v) => {
            let d = c.duration_at_most(&f("build_timeout"), v, MAX_BUILD_TIMEOUT)?;
            if d.is_zero() {
                return Err(c.err(f("build_timeout"), format!("{v:?}"), "above 0"));
            }
            d
        }
        None => DEFAULT_BUILD_TIMEOUT,
    };
    Ok(Some(BuildSpec {
        command,
        shell: t.build_shell,
        timeout,
    }))
}

/// Checks that a build argument uses only the placeholders a build has: one value for the
/// whole run; a matrix parameter, a port or `{files}` (`known`) is set per configuration.
fn build_placeholders(
    c: &Checker<'_>,
    known: &BTreeSet<String>,
    field: String,
    text: &str,
) -> Result<(), PlanError> {
    let allowed = BUILD_PLACEHOLDERS
        .iter()
        .map(|p| format!("{{{p}}}"))
        .collect::<Vec<_>>()
        .join(", ");
    for p in template::placeholders(text) {
        if BUILD_PLACEHOLDERS.contains(&p.as_str()) {
            continue;
        }
        let why = if known.contains(&p) {
            format!("{{{p}}} is set per configuration, and a build runs once, before the first")
        } else {
            format!("unknown placeholder {{{p}}}")
        };
        return Err(c.err(
            field,
            format!("{text:?}"),
            format!("{why}; a build may use {allowed}"),
        ));
    }
    Ok(())
}

/// `[[scenario]]`: at least one, unique names.
fn scenarios(
    c: &Checker<'_>,
    known: &BTreeSet<String>,
    dir: &Path,
    files: &[ScenarioFile],
) -> Result<Vec<ScenarioSpec>, PlanError> {
    if files.is_empty() {
        return Err(c.err("scenario", "[]", "at least one [[scenario]]"));
    }
    let mut names = BTreeSet::new();
    let mut scenarios = Vec::new();
    for (i, s) in files.iter().enumerate() {
        let f = |x: &str| format!("scenario[{i}].{x}");
        if !names.insert(s.name.clone()) {
            return Err(c.err(f("name"), s.name.clone(), "unique scenario names"));
        }
        template(c, known, f("url"), &s.url)?;
        let probe = template::render(&s.url, &mut |_| Some("1".into()));
        if url::Url::parse(&probe)
            .map(|u| !matches!(u.scheme(), "http" | "https" | "ws" | "wss"))
            .unwrap_or(true)
        {
            return Err(c.err(
                f("url"),
                s.url.clone(),
                "an http://, https://, ws:// or wss:// URL",
            ));
        }
        if let Some(r) = s.rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(c.err(f("rate"), r.to_string(), "requests per second above 0"));
            }
        }
        if s.requests == Some(0) {
            return Err(c.err(f("requests"), "0", "at least 1"));
        }
        let timeout = c.duration_at_most(&f("timeout"), &s.timeout, MAX_TIMEOUT)?;
        if timeout.is_zero() {
            return Err(c.err(f("timeout"), s.timeout.clone(), "above 0"));
        }
        let (protocol, grpc) = scenario_protocol(c, dir, i, s)?;
        let ping_every = match &s.ping_every {
            Some(text) => {
                let d = c.duration_at_most(&f("ping_every"), text, MAX_DURATION)?;
                if d.is_zero() || protocol != Protocol::Ws {
                    return Err(c.err(
                        f("ping_every"),
                        text.clone(),
                        "a duration above 0, in a WebSocket scenario (a ws:// or wss:// URL)",
                    ));
                }
                Some(d)
            }
            None => None,
        };
        if let Some(pointer) = s.sent_at.as_ref().filter(|_| grpc.is_none()) {
            if !matches!(protocol, Protocol::Ws | Protocol::Sse) || ping_every.is_some() {
                return Err(c.err(
                    f("sent_at"),
                    pointer.clone(),
                    "a WebSocket scenario's (a ws:// or wss:// URL) without ping_every, an event stream's (protocol = \"sse\"), or a server-streaming gRPC method's: the replies that carry the server's time",
                ));
            }
            loadlab_engine::config::check_pointer(pointer)
                .map_err(|why| c.err(f("sent_at"), pointer.clone(), why))?;
        }
        let close_by: CloseBy = c.parsed(&f("close_by"), &s.close_by)?;
        if close_by == CloseBy::Client && s.keep_alive {
            return Err(c.err(
                f("close_by"),
                "\"client\"",
                "\"server\" with keep_alive = true (a reused connection is closed by neither side); set keep_alive = false",
            ));
        }
        let traffic = scenario_traffic(c, known, dir, i, s)?;
        let ca_pem = match &s.cacert {
            Some(file) => Some(std::fs::read_to_string(dir.join(file)).map_err(|e| {
                c.err(
                    f("cacert"),
                    file.clone(),
                    format!("a readable PEM file, relative to the plan ({e})"),
                )
            })?),
            None => None,
        };
        let client_cert = scenario_client_cert(c, dir, i, s)?;
        scenarios.push(ScenarioSpec {
            insecure: s.insecure,
            ca_pem,
            client_cert,
            protocol,
            call: s.call.clone(),
            grpc,
            name: s.name.clone(),
            url: s.url.clone(),
            method: s.method.clone(),
            headers: s.headers.clone(),
            body: s.body.clone(),
            keep_alive: s.keep_alive,
            close_by,
            timeout,
            rate: s.rate,
            requests: s.requests,
            traffic,
            ping_every,
            reply_contains: s.reply_contains.clone(),
            sent_at: s.sent_at.clone(),
            push: s.push,
        });
    }
    Ok(scenarios)
}

/// A scenario's client certificate: `cert` and `key` read (relative to the plan), both or
/// neither. Whether they are PEM and belong together is checked with the rest of the
/// scenario ([`super::workload`]), as the engine will see them.
fn scenario_client_cert(
    c: &Checker<'_>,
    dir: &Path,
    i: usize,
    s: &ScenarioFile,
) -> Result<Option<loadlab_engine::config::ClientCertPem>, PlanError> {
    let f = |x: &str| format!("scenario[{i}].{x}");
    let read = |key: &str, file: &String| {
        std::fs::read_to_string(dir.join(file)).map_err(|e| {
            c.err(
                f(key),
                file.clone(),
                format!("a readable PEM file, relative to the plan ({e})"),
            )
        })
    };
    match (&s.cert, &s.key) {
        (None, None) => Ok(None),
        (Some(cert), Some(key)) => Ok(Some(loadlab_engine::config::ClientCertPem {
            cert_file: cert.clone(),
            cert_pem: read("cert", cert)?,
            key_file: key.clone(),
            key_pem: read("key", key)?,
        })),
        (Some(cert), None) => Err(c.err(
            f("key"),
            "missing",
            format!(
                "the private key (PEM) of {} = {cert:?}: a client certificate needs its key",
                f("cert")
            ),
        )),
        (None, Some(key)) => Err(c.err(
            f("cert"),
            "missing",
            format!(
                "the client certificate (PEM) whose key is {} = {key:?}",
                f("key")
            ),
        )),
    }
}

/// A scenario's requests that vary: its `[[scenario.request]]`s and `targets` file, its
/// `data` file loaded (every mistake in them named with its file, line and column before
/// any load), `data_order` and `request_order`.
fn scenario_traffic(
    c: &Checker<'_>,
    known: &BTreeSet<String>,
    dir: &Path,
    i: usize,
    s: &ScenarioFile,
) -> Result<ScenarioTraffic, PlanError> {
    use loadlab_engine::config::traffic::{DataOrder, MixOrder, NamedRequest};
    let f = |x: &str| format!("scenario[{i}].{x}");
    let mut requests = Vec::new();
    for (j, r) in s.request.iter().enumerate() {
        let fr = |x: &str| format!("scenario[{i}].request[{j}].{x}");
        template(c, known, fr("url"), &r.url)?;
        for h in &r.headers {
            template(c, known, fr("headers"), h)?;
        }
        template(c, known, fr("body"), &r.body)?;
        requests.push(NamedRequest {
            name: r.name.clone(),
            weight: r.weight,
            method: r.method.clone(),
            url: r.url.clone(),
            headers: s.headers.iter().chain(&r.headers).cloned().collect(),
            body: r.body.clone(),
            origin: format!(
                "{} scenario {} request {}",
                c.origin,
                s.name,
                r.name.as_deref().unwrap_or(&r.url)
            ),
            line: 0,
            body_origin: None,
            url_col: 0,
            header_at: Vec::new(),
        });
    }
    if let Some(file) = &s.targets {
        let targets = loadlab_template::parse_targets(&dir.join(file))
            .map_err(|e| c.err(f("targets"), file.clone(), e.to_string()))?;
        requests.extend(
            targets
                .into_iter()
                .map(|t| NamedRequest::from_target(t, &s.headers)),
        );
    }
    let mut replay = None;
    let mut timed = None;
    let log = match (&s.replay, &s.replay_mix) {
        (Some(file), Some(_)) => {
            return Err(c.err(
                f("replay"),
                file.clone(),
                "a log at its times (replay) or its mix at a rate (replay_mix), not both",
            ))
        }
        (Some(file), None) => Some((file, "replay")),
        (None, Some(file)) => Some((file, "replay_mix")),
        (None, None) => None,
    };
    if let Some((file, key)) = log {
        if !requests.is_empty() {
            return Err(c.err(
                f(key),
                file.clone(),
                "a log or requests ([[scenario.request]], targets), not both",
            ));
        }
        let format = s
            .log_format
            .as_deref()
            .map(|x| {
                x.parse::<loadlab_replay::Format>()
                    .map_err(|e| c.err(f("log_format"), format!("{x:?}"), e.to_string()))
            })
            .transpose()?;
        let rules = crate::replay::name_rules(&s.name_rules)
            .map_err(|e| c.err(f("name_rules"), format!("{:?}", s.name_rules), e))?;
        let mut policy = crate::replay::policy(&s.replay_methods, &s.keep_headers);
        policy.from_ns = crate::replay::window_end(s.replay_from.as_deref())
            .map_err(|e| c.err(f("replay_from"), format!("{:?}", s.replay_from), e))?;
        policy.to_ns = crate::replay::window_end(s.replay_to.as_deref())
            .map_err(|e| c.err(f("replay_to"), format!("{:?}", s.replay_to), e))?;
        let path = dir.join(file);
        let loaded = crate::replay::load(
            &path,
            format.as_ref(),
            &policy,
            &rules,
            &s.headers,
            key == "replay",
        )
        .map_err(|e| c.err(f(key), file.clone(), e))?;
        if key == "replay" {
            crate::replay::timed(&loaded, &path, 1.0)
                .map_err(|e| c.err(f(key), file.clone(), e))?;
            if s.flow.is_some() || !matches!(s.protocol.as_str(), "http1" | "http2") {
                return Err(c.err(
                    f(key),
                    file.clone(),
                    "HTTP requests only (protocol http1 or http2, no flow): a log replayed at its times sends its own requests",
                ));
            }
            timed = Some(std::sync::Arc::new(crate::replay::TimedLog {
                shape: loaded.shape.clone(),
                timeline: loaded.timeline.clone(),
            }));
        }
        requests = loaded.requests;
        replay = Some(loaded.report);
    } else if let Some((key, _)) = [
        ("log_format", s.log_format.is_some()),
        ("replay_methods", !s.replay_methods.is_empty()),
        ("keep_headers", !s.keep_headers.is_empty()),
        ("name_rules", !s.name_rules.is_empty()),
        ("replay_from", s.replay_from.is_some()),
        ("replay_to", s.replay_to.is_some()),
    ]
    .into_iter()
    .find(|(_, set)| *set)
    {
        return Err(c.err(f(key), "set", "only with replay or replay_mix = \"LOG\""));
    }
    if !requests.is_empty() {
        let own = [("method", s.method != "GET"), ("body", !s.body.is_empty())];
        if let Some((name, _)) = own.iter().find(|(_, set)| *set) {
            return Err(c.err(
                f(name),
                "set",
                "per request when the scenario has [[scenario.request]] or targets (the scenario's headers are sent with every request)",
            ));
        }
        if s.protocol == "grpc" {
            return Err(c.err(
                f("request"),
                "set",
                "HTTP only: a gRPC scenario calls one method (templates go in its message)",
            ));
        }
    }
    let order: MixOrder = match &s.request_order {
        Some(o) => c.parsed(&f("request_order"), o)?,
        None => MixOrder::default(),
    };
    let data_order: DataOrder = match &s.data_order {
        Some(o) => o
            .parse()
            .map_err(|e| c.err(f("data_order"), format!("{o:?}"), format!("{e}")))?,
        None => DataOrder::default(),
    };
    let data = match &s.data {
        Some(file) if s.protocol == "grpc" && file.trim_start().starts_with('{') => {
            return Err(c.err(
                f("data"),
                file.clone(),
                "a data file (CSV or JSON Lines); the gRPC message is `message` now",
            ))
        }
        Some(file) => Some(std::sync::Arc::new(
            loadlab_template::Data::load(&dir.join(file))
                .map_err(|e| c.err(f("data"), file.clone(), e.to_string()))?,
        )),
        None => None,
    };
    if data.is_none() && s.data_order.is_some() {
        return Err(c.err(f("data_order"), "set", "only with data = \"FILE\""));
    }
    let (flow, flow_file) = match &s.flow {
        None => (None, None),
        Some(toml::Value::String(file)) => {
            let text = std::fs::read_to_string(dir.join(file)).map_err(|e| {
                c.err(
                    f("flow"),
                    file.clone(),
                    format!("a readable flow file: {e}"),
                )
            })?;
            let flow: loadlab_session::Flow = toml::from_str(&text)
                .map_err(|e| c.err(f("flow"), file.clone(), format!("a valid flow: {e}")))?;
            (Some(flow), Some(file.clone()))
        }
        Some(v @ toml::Value::Table(_)) => {
            let flow: loadlab_session::Flow = v
                .clone()
                .try_into()
                .map_err(|e| c.err(f("flow"), "the table", format!("a valid flow: {e}")))?;
            (Some(flow), None)
        }
        Some(other) => {
            return Err(c.err(
                f("flow"),
                other.to_string(),
                "a flow file (flow = \"flows/login.toml\") or a table ([scenario.flow])",
            ))
        }
    };
    if flow.is_some() {
        if !requests.is_empty() {
            return Err(c.err(
                f("flow"),
                "set",
                "a flow or requests ([[scenario.request]], targets), not both",
            ));
        }
        if s.protocol != "http1" {
            return Err(c.err(
                f("flow"),
                "set",
                "HTTP/1.1 scenarios (protocol = \"http1\")",
            ));
        }
    }
    Ok(ScenarioTraffic {
        requests,
        order,
        data_file: s.data.clone(),
        data,
        data_order,
        flow,
        flow_file,
        replay,
        at_its_times: timed.is_some(),
        timed,
    })
}

/// A scenario's protocol and, for gRPC, its call resolved from the proto (so a malformed
/// proto or an unknown method stops the plan before any load).
fn scenario_protocol(
    c: &Checker<'_>,
    dir: &Path,
    i: usize,
    s: &ScenarioFile,
) -> Result<(Protocol, Option<GrpcCall>), PlanError> {
    let field = |x: &str| format!("scenario[{i}].{x}");
    let mut protocol: Protocol = c.parsed(&field("protocol"), &s.protocol)?;
    // A ws:// or wss:// URL under the default protocol is a WebSocket scenario.
    let ws_url = ["ws://", "wss://"].iter().any(|p| {
        s.url
            .get(..p.len())
            .is_some_and(|u| u.eq_ignore_ascii_case(p))
    });
    if ws_url && protocol == Protocol::Http1 {
        protocol = Protocol::Ws;
    }
    if protocol == Protocol::Ws && !s.keep_alive {
        return Err(c.err(
            field("keep_alive"),
            "false",
            "true for WebSocket (each connection is upgraded once and kept)",
        ));
    }
    if protocol.multiplexed() && !s.keep_alive {
        return Err(c.err(
            field("keep_alive"),
            "false",
            "true for HTTP/2 and gRPC (streams share kept connections)",
        ));
    }
    if protocol != Protocol::Grpc {
        let given = [
            ("proto", s.proto.is_some()),
            ("protoset", s.protoset.is_some()),
            ("call", s.call.is_some()),
            ("message", s.message.is_some()),
            ("metadata", !s.metadata.is_empty()),
            ("import_paths", !s.import_paths.is_empty()),
            ("messages_per_call", s.messages_per_call.is_some()),
            ("match_field", s.match_field.is_some()),
            ("stream_lifetime", s.stream_lifetime.is_some()),
        ];
        if let Some((name, _)) = given.iter().find(|(_, g)| *g) {
            return Err(c.err(
                field(name),
                "set",
                format!(
                    "only with protocol = \"grpc\" (this scenario is {:?})",
                    s.protocol
                ),
            ));
        }
        return Ok((protocol, None));
    }
    let (Some(proto), Some(call)) = (s.proto.as_ref().or(s.protoset.as_ref()), &s.call) else {
        let missing = if s.call.is_some() { "proto" } else { "call" };
        return Err(c.err(
            field(missing),
            "missing",
            "protocol = \"grpc\" needs proto = \"FILE.proto\" (or protoset = \"FILE.protoset\", a compiled descriptor set) and call = \"package.Service/Method\"",
        ));
    };
    if s.protoset.is_some() && !s.import_paths.is_empty() {
        return Err(c.err(
            field("import_paths"),
            format!("{:?}", s.import_paths),
            "only with proto (a descriptor set holds its imports)",
        ));
    }
    if s.proto.is_some() && s.protoset.is_some() {
        return Err(c.err(
            field("protoset"),
            "set",
            "proto or protoset, not both: each describes the service",
        ));
    }
    let includes: Vec<PathBuf> = s.import_paths.iter().map(|p| dir.join(p)).collect();
    let data = s.message.as_deref().unwrap_or("{}");
    let set = match &s.protoset {
        Some(p) => Some(std::fs::read(dir.join(p)).map_err(|e| {
            c.err(
                field("protoset"),
                format!("{p:?}"),
                format!("cannot read: {e}"),
            )
        })?),
        None => None,
    };
    let path = dir.join(proto);
    let from = path.display().to_string();
    let schema = match &set {
        Some(bytes) => loadlab_grpc::Schema::Set { bytes, from: &from },
        None => loadlab_grpc::Schema::Proto {
            file: &path,
            include_dirs: &includes,
        },
    };
    let reads = loadlab_grpc::Reads {
        sent_at: s.sent_at.as_deref(),
        match_field: s.match_field.as_deref(),
    };
    let mut resolved =
        GrpcCall::resolve_from(schema, call, data, &s.metadata, reads).map_err(|(input, e)| {
            match input {
                CallInput::SentAt => c.err(
                    field("sent_at"),
                    format!("{:?}", s.sent_at.as_deref().unwrap_or_default()),
                    e.to_string(),
                ),
                CallInput::MatchField => c.err(
                    field("match_field"),
                    format!("{:?}", s.match_field.as_deref().unwrap_or_default()),
                    e.to_string(),
                ),
                CallInput::Call => c.err(
                    field("call"),
                    format!("{call:?} in {proto:?}"),
                    e.to_string(),
                ),
                CallInput::Metadata => c.err(
                    field("metadata"),
                    format!("{:?}", s.metadata),
                    e.to_string(),
                ),
            }
        })?;
    if let Some(n) = s.messages_per_call {
        if !resolved.client_streaming {
            return Err(c.err(
                field("messages_per_call"),
                n.to_string(),
                format!("only with a client-streaming method ({call} is not one)"),
            ));
        }
        if n == 0 {
            return Err(c.err(
                field("messages_per_call"),
                "0",
                "at least 1: the messages each call sends before its side ends",
            ));
        }
        resolved.messages_per_call = n;
    }
    if let Some(text) = &s.stream_lifetime {
        let d = c.duration_at_most(&field("stream_lifetime"), text, MAX_DURATION)?;
        if !resolved.server_streaming || resolved.bidirectional || resolved.client_streaming {
            return Err(c.err(
                field("stream_lifetime"),
                format!("{text:?}"),
                format!("only with a server-streaming method ({call} is not one)"),
            ));
        }
        if d < Duration::from_millis(1) {
            return Err(c.err(
                field("stream_lifetime"),
                format!("{text:?}"),
                "at least 1ms",
            ));
        }
        resolved.lifetime_ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    }
    // The method says whether the server streams its answer: a step is then streams held.
    // A bidirectional one is messages sent on streams held, at a rate or one at a time; a
    // client-streaming one too, its calls of messages_per_call messages each.
    let protocol = if resolved.bidirectional {
        Protocol::GrpcBidi
    } else if resolved.client_streaming {
        Protocol::GrpcClientStream
    } else if resolved.server_streaming && resolved.lifetime_ms > 0 {
        Protocol::GrpcStreamOpens
    } else if resolved.server_streaming {
        Protocol::GrpcServerStream
    } else {
        protocol
    };
    Ok((protocol, Some(resolved)))
}

/// `[load]`, given the validated scenarios (together mode needs each one's rate).
fn load(c: &Checker<'_>, l: &LoadFile, scenarios: &[ScenarioSpec]) -> Result<LoadSpec, PlanError> {
    let model: Model = c.parsed("load.model", &l.model)?;
    let timed = scenarios
        .iter()
        .filter(|s| s.traffic.timed.is_some())
        .count();
    if let Some((i, _)) = scenarios
        .iter()
        .enumerate()
        .find(|(_, s)| s.traffic.timed.is_some())
    {
        let why = if model != Model::Open {
            Some("load.model = \"open\": a step replays the log at a multiple of its speed")
        } else if timed != scenarios.len() {
            Some("every scenario of the plan, or none: a step's load is then a multiple of each log's speed, not a rate")
        } else if l.arrival != "constant" {
            Some("no load.arrival: a log replayed at its times keeps its own arrivals")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(c.err(format!("scenario[{i}].replay"), "set", why));
        }
    }
    if let Some((i, _)) = scenarios
        .iter()
        .enumerate()
        .find(|(_, s)| s.ping_every.is_some() && model != Model::Closed)
    {
        return Err(c.err(
            format!("scenario[{i}].ping_every"),
            "set",
            "load.model = \"closed\": a step of pings is a number of connections held, each pinging every interval",
        ));
    }
    if let Some((i, s)) = scenarios
        .iter()
        .enumerate()
        .find(|(_, s)| s.push && (s.protocol != Protocol::Ws || model != Model::Closed))
    {
        return Err(c.err(
            format!("scenario[{i}].push"),
            "true",
            if s.protocol != Protocol::Ws {
                "a WebSocket scenario (a ws:// or wss:// url)"
            } else {
                "load.model = \"closed\": pushed messages come over connections held, a step's connections of them"
            },
        ));
    }
    if let Some((i, _)) = scenarios
        .iter()
        .enumerate()
        .find(|(_, s)| s.protocol == Protocol::Sse && (model != Model::Closed || l.together))
    {
        return Err(c.err(
            format!("scenario[{i}].protocol"),
            "\"sse\"",
            "load.model = \"closed\" with steps: event streams are held, a step's connections of them",
        ));
    }
    if let Some((i, _)) = scenarios.iter().enumerate().find(|(_, s)| {
        s.protocol == Protocol::GrpcServerStream && (model != Model::Closed || l.together)
    }) {
        return Err(c.err(
            format!("scenario[{i}].call"),
            "a server-streaming method",
            "load.model = \"closed\" with steps: its streams are held, a step's streams of them, and each message the server sends is a reply",
        ));
    }
    if let Some((i, _)) = scenarios
        .iter()
        .enumerate()
        .find(|(_, s)| s.protocol == Protocol::GrpcStreamOpens && model != Model::Open)
    {
        return Err(c.err(
            format!("scenario[{i}].stream_lifetime"),
            "set",
            "load.model = \"open\" with rates: streams opened at a step's rate, each held this long (without stream_lifetime, a closed step holds its count of streams)",
        ));
    }
    let steps = steps(c, l, model, scenarios)?;
    let arrival: Arrival = c.parsed("load.arrival", &l.arrival)?;
    let step_duration = c.duration_at_most("load.step_duration", &l.step_duration, MAX_DURATION)?;
    if step_duration.is_zero() {
        return Err(c.err("load.step_duration", l.step_duration.clone(), "above 0"));
    }
    if l.connections == 0 {
        return Err(c.err("load.connections", "0", "at least 1"));
    }
    let source_addrs = l
        .source_addrs
        .as_deref()
        .map(|s| c.parsed::<SourceAddrs>("load.source_addrs", s))
        .transpose()?;
    Ok(LoadSpec {
        model,
        steps,
        step_duration,
        warmup: c.duration_at_most("load.warmup", &l.warmup, MAX_WARMUP)?,
        pause: c.duration_at_most("load.pause", &l.pause, MAX_PAUSE)?,
        connections: l.connections,
        max_connections: l.max_connections,
        concurrency: l.concurrency,
        threads: l.threads,
        arrival,
        source_addrs,
        cpus: c.cpu_list("load.cpus", l.cpus.as_deref())?,
        io: match l.io.as_deref() {
            None => loadlab_engine::config::IoMode::Auto,
            Some(s) => s
                .parse()
                .map_err(|_| c.err("load.io", s, "auto, epoll or uring"))?,
        },
    })
}

/// Exactly one of `steps`, `knee` or `together`.
fn steps(
    c: &Checker<'_>,
    l: &LoadFile,
    model: Model,
    scenarios: &[ScenarioSpec],
) -> Result<Steps, PlanError> {
    match (&l.steps, &l.knee, l.together) {
        (None, None, true) => {
            if model != Model::Open {
                return Err(c.err(
                    "load.together",
                    "true",
                    "model = \"open\" (each scenario has a rate)",
                ));
            }
            if let Some(i) = scenarios.iter().position(|s| s.rate.is_none()) {
                return Err(c.err(
                    format!("scenario[{i}].rate"),
                    "missing",
                    "a rate for every scenario when load.together = true",
                ));
            }
            Ok(Steps::Together)
        }
        (Some(steps), None, false) => {
            if steps.is_empty() || steps.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
                return Err(c.err(
                    "load.steps",
                    format!("{steps:?}"),
                    "a non-empty list of values above 0",
                ));
            }
            if model == Model::Closed && steps.iter().any(|v| v.fract() != 0.0) {
                return Err(c.err(
                    "load.steps",
                    format!("{steps:?}"),
                    "whole connection counts in closed loop",
                ));
            }
            Ok(Steps::Fixed(steps.clone()))
        }
        (None, Some(k), false) => knee(c, k),
        _ => Err(c.err(
            "load",
            "steps/knee/together",
            "exactly one of `steps = [...]`, `knee = { start, max }`, or `together = true`",
        )),
    }
}

/// `load.knee`.
fn knee(c: &Checker<'_>, k: &KneeFile) -> Result<Steps, PlanError> {
    if !(k.start > 0.0 && k.max >= k.start) {
        return Err(c.err(
            "load.knee",
            format!("start = {}, max = {}", k.start, k.max),
            "0 < start <= max",
        ));
    }
    if !(k.precision > 0.0 && k.precision < 1.0) {
        return Err(c.err(
            "load.knee.precision",
            k.precision.to_string(),
            "a fraction between 0 and 1, e.g. 0.05",
        ));
    }
    if k.growth.is_nan() || k.growth <= 1.0 {
        return Err(c.err(
            "load.knee.growth",
            k.growth.to_string(),
            "a factor above 1, e.g. 2",
        ));
    }
    // Steps from start to max at this growth (the search climbs by it until a step fails).
    let climb = (k.max / k.start).ln() / k.growth.ln();
    if climb > MAX_KNEE_CLIMB {
        return Err(c.err(
            "load.knee.growth",
            k.growth.to_string(),
            format!(
                "a factor that reaches max from start in at most {MAX_KNEE_CLIMB:.0} steps \
                 (here {climb:.0}): at least {:.4}",
                (k.max / k.start).powf(1.0 / MAX_KNEE_CLIMB)
            ),
        ));
    }
    if k.confirm > 10 {
        return Err(c.err(
            "load.knee.confirm",
            k.confirm.to_string(),
            "repeats of each end of the boundary, 0 to 10",
        ));
    }
    Ok(Steps::Knee {
        start: k.start,
        max: k.max,
        precision: k.precision,
        growth: k.growth,
        confirm: k.confirm,
    })
}

/// `[slo]`.
fn slo(c: &Checker<'_>, slo: &SloFile) -> Result<Slo, PlanError> {
    if let Some(p) = slo.p99_ms {
        if p.is_nan() || p <= 0.0 {
            return Err(c.err("slo.p99_ms", p.to_string(), "milliseconds above 0"));
        }
    }
    if !(0.0..=1.0).contains(&slo.max_error_rate) {
        return Err(c.err(
            "slo.max_error_rate",
            slo.max_error_rate.to_string(),
            "a fraction from 0 to 1",
        ));
    }
    if !(slo.min_achieved_ratio > 0.0 && slo.min_achieved_ratio <= 1.0) {
        return Err(c.err(
            "slo.min_achieved_ratio",
            slo.min_achieved_ratio.to_string(),
            "a fraction above 0, at most 1",
        ));
    }
    let mut out = Slo {
        p99_ms: slo.p99_ms,
        percentiles: Vec::new(),
        max_error_rate: slo.max_error_rate,
        min_achieved_ratio: slo.min_achieved_ratio,
        names: Vec::new(),
    };
    let mut named: Vec<(usize, Gate)> = Vec::new();
    for (i, text) in slo.gates.iter().enumerate() {
        let g: Gate = text.parse().map_err(|e: crate::gate::GateError| {
            c.err(format!("slo.gates[{i}]"), format!("{text:?}"), e.reason)
        })?;
        if g.name.is_some() {
            named.push((i, g));
        } else {
            tighten(c, &mut out, i, text, &g)?;
        }
    }
    // A name's bounds: the plan's (unnamed gates included), tightened by its own.
    for (i, g) in named {
        let name = g.name.clone().expect("named");
        let at = match out.names.iter().position(|n| n.name == name) {
            Some(at) => at,
            None => {
                let base = Slo {
                    names: Vec::new(),
                    ..out.clone()
                };
                out.names.push(NamedSlo {
                    name: name.clone(),
                    slo: base,
                });
                out.names.len() - 1
            }
        };
        tighten(c, &mut out.names[at].slo, i, &slo.gates[i], &g)?;
    }
    Ok(out)
}

/// Tightens `out` by gate number `i`.
fn tighten(
    c: &Checker<'_>,
    out: &mut Slo,
    i: usize,
    text: &str,
    g: &Gate,
) -> Result<(), PlanError> {
    let field = format!("slo.gates[{i}]");
    let quoted = format!("{text:?}");
    let below = matches!(g.op, Op::Lt | Op::Le);
    match (g.metric, below) {
        (Metric::Percentile(99.0), true) => {
            out.p99_ms = Some(out.p99_ms.map_or(g.bound, |b| b.min(g.bound)));
        }
        (Metric::Percentile(q), true) => {
            match out.percentiles.iter_mut().find(|b| b.percentile == q) {
                Some(b) => b.ms = b.ms.min(g.bound),
                None => out.percentiles.push(PercentileBound {
                    percentile: q,
                    ms: g.bound,
                }),
            }
            out.percentiles
                .sort_by(|a, b| a.percentile.total_cmp(&b.percentile));
        }
        (Metric::Errors, true) => out.max_error_rate = out.max_error_rate.min(g.bound),
        (Metric::AchievedRatio, false) if g.bound > 0.0 && g.bound <= 1.0 => {
            out.min_achieved_ratio = out.min_achieved_ratio.max(g.bound)
        }
        _ => {
            return Err(c.err(
                field,
                quoted,
                "a bound a step can be judged on: a latency percentile from above \
                 (`p99<200ms`, `p95<=100ms`), `errors<1%`, or `achieved>=0.95` (a fraction of \
                 the offered rate), optionally for one request name (`checkout:p99<300ms`); \
                 mean, max and req/s bounds are for `loadlab run`",
            ))
        }
    }
    Ok(())
}

/// A matrix value as the text placeholders take.
fn value_string(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

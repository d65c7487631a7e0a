//! `loadlab knee URL`: the knee search of `loadlab lab` against a server loadlab did not
//! start. The flags become a plan (written into the bundle as `plan.toml`, so the same
//! search can be re-run with `loadlab lab`), run by the same experiment runner; the
//! terminal gets the knee range and its why, the bundle the full report.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use loadlab_engine::config::workload::MAX_CONNECTIONS;
use loadlab_engine::CancellationToken;
use loadlab_lab::plan::{KneeFile, LoadFile, PlanFile, ProbeFile, ScenarioFile, SloFile};
use loadlab_lab::{Plan, PlanError};

use crate::args::{ArrivalArg, CloseByArg, KneeArgs, ModelArg, OnOff};
use crate::{cancel_on_signal, BadInput, EXIT_ALL_FAILED};

/// Literal text in a plan template (`{` and `}` doubled; request templates `${...}`
/// kept as they are).
fn literal(s: &str) -> String {
    loadlab_lab::template::escape(s)
}

/// A duration as plans write it.
fn duration(d: std::time::Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// Whether `url` is a WebSocket target (`ws://` or `wss://`).
pub(crate) fn is_websocket(url: &str) -> bool {
    url.split_once("://")
        .is_some_and(|(s, _)| s.eq_ignore_ascii_case("ws") || s.eq_ignore_ascii_case("wss"))
}

/// The plan these flags describe.
pub(crate) fn plan_file(a: &KneeArgs) -> anyhow::Result<PlanFile> {
    if a.traffic.speed.is_some() {
        return Err(BadInput(
            "--speed: a knee search with --replay tries the log's speeds itself, from --start (×1 by default) up"
                .into(),
        )
        .into());
    }
    // Pings on held connections: the steps are connections.
    let closed = a.model == ModelArg::Closed || a.ping_every.is_some() || a.sse || a.push;
    // A log at its times: the steps are multiples of its speed.
    let replay = a.traffic.replay.is_some();
    // A plan holds its body as text.
    let body = String::from_utf8(a.request.body()?).map_err(|_| {
        BadInput("--body-file: the body must be UTF-8 text for `loadlab knee`".into())
    })?;
    let absolute = |p: &Path| {
        std::path::absolute(p)
            .unwrap_or_else(|_| p.to_path_buf())
            .display()
            .to_string()
    };
    // The server: the URL, or the targets file's first server.
    let given = match &a.url {
        Some(u) => u.clone(),
        None => {
            let t = a
                .traffic
                .traffic()
                .map_err(|e| BadInput(format!("{e:#}")))?;
            crate::args::TrafficArgs::first_target_server(&t).ok_or_else(|| {
                BadInput("--targets: give a URL argument for targets written as paths".into())
            })?
        }
    };
    let (url, protocol) = match &a.call {
        Some(_) => (
            crate::args::grpc_url(&given).map_err(|e| BadInput(e.to_string()))?,
            "grpc",
        ),
        None if a.http2 => (given.clone(), "http2"),
        None if a.sse => (given.clone(), "sse"),
        None if is_websocket(&given) => (given.clone(), "ws"),
        None => (given.clone(), "http1"),
    };
    let message =
        match &a.message_file {
            Some(p) => Some(std::fs::read_to_string(p).map_err(|e| {
                BadInput(format!("--message-file {}: cannot read: {e}", p.display()))
            })?),
            None => a
                .message
                .clone()
                .or(a.call.as_ref().map(|_| "{}".to_string())),
        };
    let cacert = a.tls.cacert.as_deref().map(absolute);
    let cert = a.tls.cert.as_deref().map(absolute);
    let key = a.tls.key.as_deref().map(absolute);
    let scenario = ScenarioFile {
        name: "knee".into(),
        url: literal(&url),
        method: a.request.method.clone(),
        headers: a.request.headers.iter().map(|h| literal(h)).collect(),
        body: literal(&body),
        keep_alive: a.keep_alive == OnOff::On,
        close_by: match a.close_by {
            CloseByArg::Server => "server",
            CloseByArg::Client => "client",
        }
        .into(),
        timeout: duration(a.timeout),
        rate: None,
        ping_every: a.ping_every.map(duration),
        reply_contains: a.reply_contains.as_deref().map(literal),
        sent_at: a.sent_at.clone(),
        push: a.push,
        requests: None,
        protocol: protocol.into(),
        proto: a.proto.as_deref().map(absolute),
        protoset: a.protoset.as_deref().map(absolute),
        import_paths: a.import_paths.iter().map(|p| absolute(p)).collect(),
        call: a.call.clone(),
        messages_per_call: a.messages_per_call,
        stream_lifetime: a.stream_lifetime.map(duration),
        match_field: a.match_field.clone(),
        message,
        metadata: a.metadata.clone(),
        insecure: a.tls.insecure,
        cacert,
        cert,
        key,
        data: a.traffic.data.as_deref().map(absolute),
        data_order: a
            .traffic
            .data
            .is_some()
            .then(|| a.traffic.data_order.name().to_string()),
        targets: a.traffic.targets.as_deref().map(absolute),
        request_order: a
            .traffic
            .targets
            .is_some()
            .then(|| a.traffic.targets_order.name().to_string()),
        request: Vec::new(),
        replay_mix: a.traffic.replay_mix.as_deref().map(absolute),
        replay: a.traffic.replay.as_deref().map(absolute),
        log_format: a.traffic.log_format.clone(),
        replay_methods: a.traffic.methods.clone(),
        keep_headers: a.traffic.keep_header.clone(),
        name_rules: a.traffic.name_rule.clone(),
        replay_from: a.traffic.from.clone(),
        replay_to: a.traffic.to.clone(),
        flow: a
            .traffic
            .flow
            .as_deref()
            .map(|p| toml::Value::String(absolute(p))),
    };
    let probe = if a.no_probe {
        Some(ProbeFile {
            off: true,
            ..ProbeFile::default()
        })
    } else if a.probe_pid.is_some()
        || a.probe_pidfile.is_some()
        || a.probe_cgroup.is_some()
        || a.probe_container.is_some()
    {
        Some(ProbeFile {
            pid: a.probe_pid,
            pidfile: a.probe_pidfile.as_deref().map(absolute),
            cgroup: a.probe_cgroup.clone(),
            container: a.probe_container.clone(),
            ..ProbeFile::default()
        })
    } else {
        None
    };
    Ok(PlanFile {
        name: "knee".into(),
        description: format!("`loadlab knee` of {given} (a server loadlab did not start)."),
        target: Vec::new(),
        matrix: BTreeMap::new(),
        exclude: Vec::new(),
        scenario: vec![scenario],
        load: LoadFile {
            model: if closed { "closed" } else { "open" }.into(),
            steps: None,
            knee: Some(KneeFile {
                start: a.start.unwrap_or(if closed || replay { 1.0 } else { 10.0 }),
                max: a.max.unwrap_or(match (closed, replay, a.stream_lifetime) {
                    (_, true, _) => 1000.0,
                    (true, false, _) => 4096.0,
                    // Streams opened at a rate: as many as the streams in flight hold.
                    (false, false, Some(life)) => (MAX_CONNECTIONS as f64
                        / life.as_secs_f64().max(0.001))
                    .floor()
                    .min(100_000.0),
                    (false, false, None) => 100_000.0,
                }),
                precision: a.precision,
                growth: a.growth,
                confirm: a.confirm,
            }),
            together: false,
            step_duration: duration(a.step),
            warmup: duration(a.warmup),
            pause: duration(a.pause),
            connections: a.connections,
            max_connections: a.max_connections,
            concurrency: a.concurrency,
            threads: a.threads,
            arrival: match a.arrival {
                ArrivalArg::Constant => "constant",
                ArrivalArg::Poisson => "poisson",
            }
            .into(),
            source_addrs: a.source_addrs.clone(),
            cpus: a.cpus.clone(),
            io: a.io.clone(),
        },
        slo: SloFile {
            gates: a.slo.clone(),
            ..SloFile::default()
        },
        quick: None,
        probe,
        tune: None,
    })
}

/// A plan error in the words of the flags that made the plan.
fn flag_error(e: PlanError) -> BadInput {
    let PlanError::Field {
        field,
        value,
        allowed,
        ..
    } = &e
    else {
        return BadInput(e.to_string());
    };
    let flag = match field.as_str() {
        "load.knee.start" => "--start",
        "load.knee.max" => "--max",
        "load.knee.precision" => "--precision",
        "load.knee.growth" => "--growth",
        "load.knee.confirm" => "--confirm",
        "load.step_duration" => "--step",
        "load.warmup" => "--warmup",
        "load.connections" => "--connections",
        "load.max_connections" => "--max-connections",
        "load.concurrency" => "--concurrency",
        "load.threads" => "--threads",
        "load.cpus" => "--cpus",
        "load.io" => "--io",
        "load.source_addrs" => "--source-addrs",
        f if f.starts_with("slo.gates") => "--slo",
        f if f.starts_with("scenario[0].url") => "URL",
        f if f.starts_with("scenario[0].headers") => "--header",
        f if f.starts_with("scenario[0].method") => "--method",
        f if f.starts_with("scenario[0].timeout") => "--timeout",
        f if f.starts_with("scenario[0].stream_lifetime") => "--stream-lifetime",
        f if f.starts_with("scenario[0].data_order") => "--data-order",
        f if f.starts_with("scenario[0].data") => "--data",
        f if f.starts_with("scenario[0].targets") => "--targets",
        f if f.starts_with("scenario[0].request") => "--targets",
        f if f.starts_with("scenario[0].replay_mix") => "--replay-mix",
        f if f.starts_with("scenario[0].replay") => "--replay",
        f if f.starts_with("scenario[0].log_format") => "--log-format",
        f if f.starts_with("scenario[0].replay_methods") => "--methods",
        f if f.starts_with("scenario[0].keep_headers") => "--keep-header",
        f if f.starts_with("scenario[0].name_rules") => "--name-rule",
        f if f.starts_with("scenario[0].replay_from") => "--from",
        f if f.starts_with("scenario[0].replay_to") => "--to",
        f if f.starts_with("scenario[0].message") => "--message",
        f if f.starts_with("scenario[0].cacert") => "--cacert",
        f if f.starts_with("scenario[0].cert") => "--cert",
        f if f.starts_with("scenario[0].key") => "--key",
        f if f.starts_with("scenario[0].") => {
            return BadInput(format!(
                "{} {value} is not allowed: {allowed}",
                f.trim_start_matches("scenario[0].")
            ))
        }
        f if f.starts_with("probe") => "--probe-*",
        _ => return BadInput(e.to_string()),
    };
    // What is allowed may name the client certificate's other half by its plan key.
    let allowed = allowed
        .replace("scenario[0].cert", "--cert")
        .replace("scenario[0].key", "--key");
    BadInput(format!("{flag} {value} is not allowed: {allowed}"))
}

pub fn cmd_knee(a: &KneeArgs) -> anyhow::Result<ExitCode> {
    let mut file = plan_file(a)?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| crate::lab::default_out("knee"));
    if let (Some(call), None, None) = (&a.call, &a.proto, &a.protoset) {
        // The service as the server's reflection describes it, kept in the bundle for
        // plan.toml (which names it) to re-run with.
        let url = crate::args::grpc_url(a.url.as_deref().unwrap_or_default())
            .map_err(|e| BadInput(e.to_string()))?;
        let set = crate::reflect::for_call(&url, &a.tls, &a.metadata, call)
            .map_err(|e| BadInput(format!("{e:#}")))?;
        std::fs::create_dir_all(&out)
            .map_err(|e| BadInput(format!("--out {}: cannot create: {e}", out.display())))?;
        let kept = std::path::absolute(out.join("reflected.protoset"))?;
        std::fs::write(&kept, set)
            .map_err(|e| BadInput(format!("{}: cannot write: {e}", kept.display())))?;
        file.scenario[0].protoset = Some(kept.display().to_string());
    }
    let text = toml::to_string(&file)?;
    let cwd = std::env::current_dir()?;
    let plan = Plan::parse(&text, "loadlab knee", &cwd, false).map_err(flag_error)?;
    if let Some(p) = &a.junit {
        crate::outputs::check_dir("--junit", p)?;
    }
    let stop = CancellationToken::new();
    cancel_on_signal(stop.clone());
    let fleet = crate::fleet::coordinator(&a.distributed, &stop, a.quiet)?;
    let settings = crate::lab::RunSettings {
        quiet: a.quiet,
        // A knee starts no target, so there is nothing to build.
        skip_builds: false,
        brief_preflight: false,
        remote_probe: crate::fleet::remote_sources(&a.distributed, fleet.as_ref()),
        prometheus: a.prometheus.prometheus_rw.clone(),
    };
    let (summary, _report) =
        crate::lab::run_lab(&plan, out, settings, stop.clone(), fleet.clone())?;
    if let Some(c) = fleet {
        c.finish(if stop.is_cancelled() {
            "the coordinator was interrupted"
        } else {
            "the run is over"
        });
    }
    let closing = crate::closing::knees(&summary.bundle, true)?;
    // `--junit -` has standard output: the closing lines go to standard error.
    match &a.junit {
        Some(p) if crate::outputs::is_stdout(p) => eprint!("{closing}"),
        _ => print!("{closing}"),
    }
    eprintln!(
        "loadlab: {} step{}; bundle {} (report.md, report.html; plan.toml re-runs this search with `loadlab lab`)",
        summary.steps,
        if summary.steps == 1 { "" } else { "s" },
        summary.bundle.display(),
    );
    if let Some(p) = &a.junit {
        let mut suite = crate::lab::lab_junit("knee", &summary, None);
        if summary.steps == 0 {
            suite.cases.push(loadlab_lab::junit::Case {
                name: "knee".into(),
                classname: "loadlab.knee".into(),
                failure: Some("no knee measured: no step ran".into()),
                skipped: None,
                output: String::new(),
            });
        }
        crate::outputs::emit("--junit", p, suite.to_xml().as_bytes())?;
    }
    if let Some(code) = crate::interrupted_exit() {
        return Ok(code);
    }
    Ok(
        if summary.steps == 0 || crate::closing::not_measured(&summary.bundle) {
            ExitCode::from(EXIT_ALL_FAILED)
        } else {
            ExitCode::SUCCESS
        },
    )
}

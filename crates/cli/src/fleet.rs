//! `loadlab agent`, `loadlab probe`, and the coordinator that `--agents N` starts inside
//! `run`, `grpc`, `lab` and `knee` (and `--remote-probe` inside `lab` and `knee`).

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use loadlab_engine::CancellationToken;
use loadlab_fleet::{
    AgentError, AgentOptions, Coordinator, CoordinatorOptions, OnAgentLoss, ProbeError,
    ProbeOptions,
};
use loadlab_lab::plan::ProbeSpec;
use loadlab_lab::watch::RemoteSources;

use crate::args::{AgentArgs, AgentLoss, DialArgs, DistributedArgs, ProbeArgs};
use crate::BadInput;

/// Exit status of an agent the coordinator refused (token, version, run full).
const EXIT_REFUSED: u8 = 3;

/// Reads a token file: surrounding whitespace is dropped; empty is an error.
fn read_token(path: &Path, flag: &str) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        BadInput(format!(
            "{flag} {}: {e} (create one with `head -c 32 /dev/urandom | base64 > {}`)",
            path.display(),
            path.display()
        ))
    })?;
    let token = text.trim().to_string();
    if token.is_empty() {
        return Err(BadInput(format!("{flag} {}: the file is empty", path.display())).into());
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(BadInput(format!(
            "{flag} {}: the token must be printable ASCII without spaces (base64 is)",
            path.display()
        ))
        .into());
    }
    Ok(token)
}

fn read_file(path: &Path, flag: &str) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| BadInput(format!("{flag} {}: {e}", path.display())).into())
}

/// Starts the coordinator when `--agents` or `--remote-probe` is given, and waits for the
/// agents and the probe to join.
pub fn coordinator(
    d: &DistributedArgs,
    stop: &CancellationToken,
    quiet: bool,
) -> anyhow::Result<Option<Arc<Coordinator>>> {
    if d.agents.is_none() && !d.remote_probe {
        return Ok(None);
    }
    if d.agents == Some(0) {
        return Err(BadInput(
            "--agents 0: give at least one agent (or leave --agents out to run the load here)"
                .into(),
        )
        .into());
    }
    let flag = if d.agents.is_some() {
        "--agents"
    } else {
        "--remote-probe"
    };
    let token_path = d.token_file.as_deref().ok_or_else(|| {
        BadInput(format!("{flag} needs --token-file PATH: the secret agents and probes must present (create one with `head -c 32 /dev/urandom | base64 > token`)"))
    })?;
    let token = read_token(token_path, "--token-file")?;
    let tls = match (&d.tls_cert, &d.tls_key) {
        (Some(c), Some(k)) => Some((read_file(c, "--tls-cert")?, read_file(k, "--tls-key")?)),
        _ => None,
    };
    let opts = CoordinatorOptions {
        listen: d.listen,
        token,
        agents: d.agents.unwrap_or(0),
        probes: usize::from(d.remote_probe),
        wait: d.agent_wait,
        tls,
        on_loss: match d.on_agent_loss {
            AgentLoss::Continue => OnAgentLoss::Continue,
            AgentLoss::Stop => OnAgentLoss::Stop,
        },
        run_stop: stop.clone(),
        log: !quiet,
        version: loadlab_fleet::version(),
    };
    let c = Coordinator::start(opts)?;
    c.wait_for_agents(stop)?;
    Ok(Some(Arc::new(c)))
}

/// The lab's remote probe: a fresh source over the coordinator's probe stream for each
/// step, when `--remote-probe` was given.
pub fn remote_sources(
    d: &DistributedArgs,
    coordinator: Option<&Arc<Coordinator>>,
) -> Option<RemoteSources> {
    let c = coordinator.filter(|_| d.remote_probe)?.clone();
    Some(Arc::new(move || c.probe_source()))
}

/// What `loadlab agent` and `loadlab probe` read before dialing: the token, the TLS CA,
/// and the name (`--name`, or the host name) with the host name.
struct Dial {
    token: String,
    tls_ca: Option<Vec<u8>>,
    name: String,
    host: String,
}

fn dial(d: &DialArgs) -> anyhow::Result<Dial> {
    let token = read_token(&d.token_file, "--token-file")?;
    let tls_ca = d
        .tls_ca
        .as_deref()
        .map(|p| read_file(p, "--tls-ca"))
        .transpose()?;
    let host = loadlab_engine::env::Environment::capture(Vec::new()).hostname;
    Ok(Dial {
        token,
        tls_ca,
        name: d.name.clone().unwrap_or_else(|| host.clone()),
        host,
    })
}

/// `loadlab agent`.
pub fn cmd_agent(a: &AgentArgs) -> anyhow::Result<ExitCode> {
    if a.threads == Some(0) {
        return Err(BadInput("--threads 0: give at least one".into()).into());
    }
    let d = &a.dial;
    let Dial {
        token,
        tls_ca,
        name,
        host: _,
    } = dial(d)?;
    let opts = AgentOptions {
        coordinator: d.coordinator.clone(),
        token,
        name,
        threads: a
            .threads
            .unwrap_or_else(loadlab_engine::config::available_cores),
        tls_ca,
        tls_domain: d.tls_domain.clone(),
        version: loadlab_fleet::version(),
        wait: d.wait,
        log: !d.quiet,
    };
    match loadlab_fleet::run_agent(&opts) {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e @ AgentError::Refused { .. }) => {
            eprintln!("loadlab: error: {e}");
            Ok(ExitCode::from(EXIT_REFUSED))
        }
        Err(AgentError::Setup(msg)) => Err(BadInput(msg).into()),
        Err(e) => Err(e).context("loadlab agent"),
    }
}

/// The target `loadlab probe` names, as the lab's probe spec, with the flag that named it
/// (`None` without a target flag).
fn probe_target(a: &ProbeArgs) -> Option<(String, ProbeSpec)> {
    Some(if let Some(pid) = a.pid {
        (format!("--pid {pid}"), ProbeSpec::Pid(pid))
    } else if let Some(f) = &a.pidfile {
        (
            format!("--pidfile {}", f.display()),
            ProbeSpec::Pidfile(f.clone()),
        )
    } else if let Some(c) = &a.cgroup {
        (format!("--cgroup {c}"), ProbeSpec::Cgroup(c.clone()))
    } else if let Some(c) = &a.container {
        (format!("--container {c}"), ProbeSpec::Container(c.clone()))
    } else if let Some(port) = a.listen {
        (format!("--listen {port}"), ProbeSpec::Listen(port))
    } else {
        return None;
    })
}

/// `loadlab probe`.
pub fn cmd_probe(a: &ProbeArgs) -> anyhow::Result<ExitCode> {
    // The target first: one that does not exist is said before anything is dialed.
    let (flag, spec) = probe_target(a).ok_or_else(|| {
        BadInput(
            "give what to probe: one of --pid, --pidfile, --cgroup, --container, --listen".into(),
        )
    })?;
    let source =
        loadlab_lab::watch::local_source(&spec).map_err(|e| BadInput(format!("{flag}: {e}")))?;
    let d = &a.dial;
    let Dial {
        token,
        tls_ca,
        name,
        host,
    } = dial(d)?;
    let opts = ProbeOptions {
        coordinator: d.coordinator.clone(),
        token,
        name,
        host,
        tls_ca,
        tls_domain: d.tls_domain.clone(),
        version: loadlab_fleet::version(),
        wait: d.wait,
        log: !d.quiet,
        source,
    };
    match loadlab_fleet::run_probe(opts) {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e @ ProbeError::Refused { .. }) => {
            eprintln!("loadlab: error: {e}");
            Ok(ExitCode::from(EXIT_REFUSED))
        }
        Err(ProbeError::Setup(msg)) => Err(BadInput(msg).into()),
        Err(e) => Err(e).context("loadlab probe"),
    }
}

//! What the probes of each step watch: the targets a plan starts, or a server loadlab did
//! not start (a pid, a pid file, a cgroup, a container, the process listening on a port),
//! or, on another host, the samples of `loadlab probe` (a source the caller provides).
//!
//! A [`Watch`] is resolved once, before any load, so that a probe named by the user that
//! does not exist stops the run at once with the reason; then each step asks it for a fresh
//! [`ProbeSource`] (a server restarted between steps is found again by its pid file, port,
//! cgroup or container).

use std::net::{IpAddr, ToSocketAddrs};
use std::sync::Arc;

use loadlab_system::probe::{CgroupSource, ProbeSource, ProcessSource, SourceError};

use crate::plan::{Plan, ProbeSpec};
use crate::template;

/// Makes a fresh probe source of a server on another host (`loadlab probe`) for each step.
pub type RemoteSources = Arc<dyn Fn() -> Option<Box<dyn ProbeSource>> + Send + Sync>;

/// A probe named by the user that cannot be found.
#[derive(Debug, thiserror::Error)]
#[error("probe {what}: {source}")]
pub struct WatchError {
    /// What the plan or the flags named (`pid 1234`, `container web`).
    pub what: String,
    /// Why it cannot be probed.
    pub source: SourceError,
}

/// What the probes watch, resolved.
pub enum Watch {
    /// The processes the plan starts (their trees and the first one's cgroup).
    Targets,
    /// A server loadlab did not start, found again at each step.
    Local(ProbeSpec),
    /// The samples `loadlab probe` sends from the server's host.
    Remote(RemoteSources),
    /// Only this machine's kernel counters (the server is here but was not found, or
    /// `probe.off`).
    KernelOnly,
    /// Nothing: the server is on another host and no probe runs there; this machine's
    /// counters are not the server's.
    Nothing,
}

/// The host of the plan's first scenario, when it is this machine: a loopback address,
/// `localhost`, or an address a socket can bind here.
fn local_port(plan: &Plan) -> Option<u16> {
    let s = plan.scenarios.first()?;
    let url = template::render(&s.url, &mut |_| Some("0".into()));
    let u = url::Url::parse(&url).ok()?;
    let port = u.port_or_known_default()?;
    let host = u.host_str()?.trim_matches(['[', ']']).to_string();
    let ips: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => (host.as_str(), port)
            .to_socket_addrs()
            .ok()?
            .map(|a| a.ip())
            .collect(),
    };
    ips.iter()
        .any(|ip| ip.is_loopback() || std::net::UdpSocket::bind((*ip, 0)).is_ok())
        .then_some(port)
}

impl Watch {
    /// Resolves what the plan asks to probe; `remote` is the source of a `loadlab probe`
    /// that joined the run, which wins over everything else. Returns the watch and one
    /// sentence for the user on what will be probed (or why nothing is).
    pub fn resolve(
        plan: &Plan,
        remote: Option<RemoteSources>,
    ) -> Result<(Watch, String), WatchError> {
        if let Some(r) = remote {
            let said = match r() {
                Some(s) => s
                    .info()
                    .map_or("the server's host, by `loadlab probe`".into(), |i| i.found),
                None => "the server's host, by `loadlab probe` (no sample yet)".into(),
            };
            return Ok((Watch::Remote(r), format!("probing {said}")));
        }
        let spec = match &plan.probe {
            ProbeSpec::Auto if !plan.targets.is_empty() => {
                return Ok((Watch::Targets, "probing the targets the plan starts".into()))
            }
            ProbeSpec::Auto => match local_port(plan) {
                None => {
                    return Ok((
                        Watch::Nothing,
                        "not probing the server: it is not on this machine (run `loadlab probe` on its host \
                         and give --remote-probe here, to see its CPU, memory and listen queue)"
                            .into(),
                    ))
                }
                Some(port) => match ProcessSource::for_listener(port) {
                    Ok(_) => ProbeSpec::Listen(port),
                    Err(e) => {
                        return Ok((
                            Watch::KernelOnly,
                            format!(
                                "not probing the server's processes: {e}; only this machine's TCP counters are read"
                            ),
                        ))
                    }
                },
            },
            ProbeSpec::Off => {
                return Ok((
                    Watch::KernelOnly,
                    "not probing the server (probe off): only this machine's TCP counters are read".into(),
                ))
            }
            other => other.clone(),
        };
        let source = local_source(&spec).map_err(|source| WatchError {
            what: describe(&spec),
            source,
        })?;
        let found = source.info().map_or_else(|| describe(&spec), |i| i.found);
        Ok((Watch::Local(spec), format!("probing {found}")))
    }

    /// A fresh source for one step (`None`: nothing to probe). `pids` are the plan's
    /// targets now. A server that cannot be found at this step is said in the result: the
    /// step is probed for the kernel's counters only.
    pub fn source(&self, pids: Vec<u32>) -> Result<Option<Box<dyn ProbeSource>>, String> {
        match self {
            Watch::Targets => {
                let named: Vec<String> = pids
                    .iter()
                    .map(|&p| match loadlab_system::procfs::comm(p) {
                        Some(c) => format!("{p} ({c})"),
                        None => p.to_string(),
                    })
                    .collect();
                let found = format!(
                    "pid{} {}, started by the plan",
                    if named.len() == 1 { "" } else { "s" },
                    named.join(", ")
                );
                Ok(Some(Box::new(ProcessSource::new(pids).found(found))))
            }
            Watch::Local(spec) => match local_source(spec) {
                Ok(s) => Ok(Some(s)),
                Err(e) => Err(format!("probe {}: {e}", describe(spec))),
            },
            Watch::Remote(r) => Ok(r()),
            Watch::KernelOnly => Ok(Some(Box::new(
                ProcessSource::new(Vec::new())
                    .found("this machine's TCP counters only (no process of the server found)"),
            ))),
            Watch::Nothing => Ok(None),
        }
    }
}

/// `pid 1234`, `cgroup /a/b`, `container web`.
fn describe(spec: &ProbeSpec) -> String {
    match spec {
        ProbeSpec::Pid(p) => format!("pid {p}"),
        ProbeSpec::Pidfile(f) => format!("pid file {}", f.display()),
        ProbeSpec::Cgroup(c) => format!("cgroup {c}"),
        ProbeSpec::Container(c) => format!("container {c}"),
        ProbeSpec::Listen(p) => format!("listener on :{p}"),
        ProbeSpec::Auto => "auto".into(),
        ProbeSpec::Off => "off".into(),
    }
}

/// A source for a server on this machine, found now (`loadlab probe` uses it too).
pub fn local_source(spec: &ProbeSpec) -> Result<Box<dyn ProbeSource>, SourceError> {
    Ok(match spec {
        ProbeSpec::Pid(p) => Box::new(ProcessSource::for_pid(*p)?),
        ProbeSpec::Pidfile(f) => Box::new(ProcessSource::for_pidfile(f)?),
        ProbeSpec::Listen(port) => Box::new(ProcessSource::for_listener(*port)?),
        ProbeSpec::Cgroup(c) => Box::new(CgroupSource::for_path(c)?),
        ProbeSpec::Container(c) => Box::new(CgroupSource::for_container(c)?),
        ProbeSpec::Auto | ProbeSpec::Off => Box::new(ProcessSource::new(Vec::new())),
    })
}

//! A scenario at one step as the engine's [`Workload`]: the one translation from plan to
//! engine, used to run every step and, when the plan loads, to check every scenario with
//! sample values so that a mistake the engine would find names its plan field before any
//! target starts.

use std::collections::BTreeMap;

use loadlab_engine::config::traffic::{NamedRequest, Traffic};
use loadlab_engine::config::{ConfigError, CpuList, Field, Request, Transport};
use loadlab_engine::{LoadModel, Protocol, Workload};

use super::{Model, Plan, PlanError, ScenarioSpec, Steps};
use crate::template;

impl Plan {
    /// The workload of scenario `s` at step `value` (a rate in open loop, connections or
    /// streams in closed loop; `None` in together mode, where the scenario's own rate
    /// applies), its templates rendered with `vars`; loadlab's workers pinned to `cpus`.
    pub fn workload(
        &self,
        s: &ScenarioSpec,
        vars: &BTreeMap<String, String>,
        value: Option<f64>,
        cpus: Option<CpuList>,
    ) -> Workload {
        let l = &self.load;
        let mut lookup = |k: &str| vars.get(k).cloned();
        let multiplexed = s.protocol.multiplexed();
        // Over HTTP/2 a closed-loop step is a number of streams over `load.connections`.
        let (load, connections, concurrency) = match (l.model, value) {
            (Model::Open, v) => (
                LoadModel::Open {
                    rate: v.or(s.rate).unwrap_or(0.0),
                    arrival: l.arrival,
                },
                l.connections,
                l.concurrency,
            ),
            (Model::Closed, Some(c)) if multiplexed => (
                LoadModel::Closed,
                l.connections.min(c as u64),
                Some(c as u64),
            ),
            (Model::Closed, Some(c)) => (LoadModel::Closed, c as u64, None),
            (Model::Closed, None) => (LoadModel::Closed, l.connections, l.concurrency),
        };
        let transport = match (s.protocol, &s.grpc) {
            (p, Some(call)) if p.grpc() => Transport::Grpc {
                call: call.clone(),
                concurrency,
            },
            (
                Protocol::Http2
                | Protocol::Grpc
                | Protocol::GrpcServerStream
                | Protocol::GrpcStreamOpens
                | Protocol::GrpcBidi
                | Protocol::GrpcClientStream,
                _,
            ) => Transport::Http2 { concurrency },
            (Protocol::Ws, _) => Transport::WebSocket {
                max_connections: match l.model {
                    Model::Open => l.max_connections,
                    Model::Closed => None,
                },
                binary: false,
                ping: s.ping_every.is_some(),
                push: s.push,
                reply_contains: s
                    .reply_contains
                    .as_ref()
                    .map(|r| template::render(r, &mut lookup)),
                sent_at: s.sent_at.clone(),
            },
            (Protocol::Sse, _) => Transport::Sse {
                sent_at: s.sent_at.clone(),
            },
            (Protocol::Http1, _) => Transport::Http1 {
                keep_alive: s.keep_alive,
                close_by: s.close_by,
                pipeline: 1,
                max_connections: match l.model {
                    Model::Open => l.max_connections,
                    Model::Closed => None,
                },
                retry_unprocessed: false,
            },
        };
        let mut w = Workload {
            url: template::render(&s.url, &mut lookup),
            load,
            transport,
            connections,
            duration: Some(l.step_duration),
            requests: s.requests,
            warmup: l.warmup,
            timeout: s.timeout,
            threads: l.threads,
            request: Request {
                method: s.method.clone(),
                headers: s
                    .headers
                    .iter()
                    .map(|h| template::render(h, &mut lookup))
                    .collect(),
                body: template::render(&s.body, &mut lookup).into_bytes(),
            },
            // Verified unless the scenario says `insecure = true` (the report says so).
            insecure: s.insecure,
            ca_pem: s.ca_pem.clone(),
            client_cert: s.client_cert.clone(),
            source_addrs: l.source_addrs.clone(),
            seed: None,
            cpus,
            io: l.io,
            traffic: Traffic {
                requests: s
                    .traffic
                    .requests
                    .iter()
                    .map(|r| NamedRequest {
                        url: template::render(&r.url, &mut lookup),
                        headers: r
                            .headers
                            .iter()
                            .map(|h| template::render(h, &mut lookup))
                            .collect(),
                        body: template::render(&r.body, &mut lookup),
                        ..r.clone()
                    })
                    .collect(),
                order: s.traffic.order,
                data: s.traffic.data.clone(),
                data_order: s.traffic.data_order,
                flow: s.traffic.flow.clone(),
                ..Traffic::default()
            },
        };
        // Pings on held connections: the step's connections each ping every interval
        // (checked with the plan: a closed model, a WebSocket scenario).
        if let (Some(every), LoadModel::Closed) = (s.ping_every, w.load) {
            w.hold_with_pings(every)
                .expect("the plan checked ping_every: a WebSocket scenario, a closed model");
        }
        w
    }

    /// The step values worth checking: every fixed step, a knee's first and last, or the
    /// scenario's own rate in together mode.
    fn sample_steps(&self) -> Vec<Option<f64>> {
        match &self.load.steps {
            Steps::Fixed(v) => v.iter().map(|&x| Some(x)).collect(),
            Steps::Knee { start, max, .. } => vec![Some(*start), Some(*max)],
            Steps::Together => vec![None],
        }
    }

    /// Where the plan sets `field` for scenario `i` at a step.
    fn plan_field(&self, field: Field, i: usize, s: &ScenarioSpec) -> String {
        let steps = match self.load.steps {
            Steps::Knee { .. } => "load.knee",
            _ => "load.steps",
        };
        let closed_steps =
            self.load.model == Model::Closed && !matches!(self.load.steps, Steps::Together);
        match field {
            Field::Url => format!("scenario[{i}].url"),
            Field::Rate if matches!(self.load.steps, Steps::Together) => {
                format!("scenario[{i}].rate")
            }
            Field::Rate => steps.into(),
            Field::Connections if closed_steps && !s.protocol.multiplexed() => steps.into(),
            Field::Connections => "load.connections".into(),
            Field::MaxConnections => "load.max_connections".into(),
            Field::Concurrency if closed_steps => steps.into(),
            Field::Concurrency => "load.concurrency".into(),
            Field::Duration => "load.step_duration".into(),
            Field::Requests => format!("scenario[{i}].requests"),
            Field::Warmup => "load.warmup".into(),
            Field::Timeout => format!("scenario[{i}].timeout"),
            Field::Threads => "load.threads".into(),
            Field::Pipeline => "load".into(),
            Field::KeepAlive => format!("scenario[{i}].keep_alive"),
            Field::CloseBy => format!("scenario[{i}].close_by"),
            Field::Method => format!("scenario[{i}].method"),
            Field::Header => format!("scenario[{i}].headers"),
            Field::SourceAddrs => "load.source_addrs".into(),
            Field::Cpus => "load.cpus".into(),
            Field::CaCert => format!("scenario[{i}].cacert"),
            Field::ClientCert => format!("scenario[{i}].cert"),
            Field::ClientKey => format!("scenario[{i}].key"),
            Field::Targets => format!("scenario[{i}].request"),
            Field::Data => format!("scenario[{i}].data"),
            Field::Flow => format!("scenario[{i}].flow"),
            Field::Http2 => format!("scenario[{i}].protocol"),
            Field::RetryUnprocessed => format!("scenario[{i}]"),
            Field::Binary => format!("scenario[{i}].binary"),
            Field::Ping => format!("scenario[{i}].ping_every"),
            Field::ReplyContains => format!("scenario[{i}].reply_contains"),
            Field::SentAt => format!("scenario[{i}].sent_at"),
            Field::StreamLifetime => format!("scenario[{i}].stream_lifetime"),
            Field::Push => format!("scenario[{i}].push"),
        }
    }
}

/// Checks every scenario as the engine will run it, at each sample step, with every
/// placeholder filled by a sample (a matrix parameter's first value, port 1).
pub(super) fn check_scenarios(plan: &Plan, origin: &str) -> Result<(), PlanError> {
    let mut vars: BTreeMap<String, String> = plan
        .matrix
        .iter()
        .map(|(k, v)| (k.clone(), v.first().cloned().unwrap_or_default()))
        .collect();
    for builtin in super::BUILTINS {
        vars.insert(builtin.into(), "1".into());
    }
    for t in &plan.targets {
        vars.insert(format!("{}_port", t.name), "1".into());
    }
    let cpus = (!plan.load.cpus.is_empty()).then(|| CpuList::new(plan.load.cpus.clone()));
    let mut names: Vec<String> = Vec::new();
    for (i, s) in plan.scenarios.iter().enumerate() {
        for value in plan.sample_steps() {
            let w = plan.workload(s, &vars, value, cpus.clone());
            let of_scenario = w.check().map_err(|e: ConfigError| PlanError::Field {
                path: origin.into(),
                field: plan.plan_field(e.field(), i, s),
                value: match &e {
                    ConfigError::Value { value, .. } => value.clone(),
                    _ => format!("{:?}", s.url),
                },
                allowed: e.allowed_as(|f| plan.plan_field(f, i, s)),
            })?;
            for n in of_scenario {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
    }
    // A gate on a request name needs a request of that name.
    for named in &plan.slo.names {
        if !names.contains(&named.name) {
            return Err(PlanError::Field {
                path: origin.into(),
                field: "slo.gates".into(),
                value: format!("{:?}", named.name),
                allowed: if names.is_empty() {
                    "a request name, and no scenario names its requests ([[scenario.request]] name, or `# @name` in a targets file)".into()
                } else {
                    format!("a request name: {}", names.join(", "))
                },
            });
        }
    }
    Ok(())
}

//! What a plan asks of the machine, for the pre-flight checks of `loadlab doctor` and
//! `loadlab lab` (the checks themselves live in `loadlab_system::doctor`).

use std::net::{IpAddr, Ipv4Addr};

use loadlab_system::doctor::Demand;

use crate::plan::{Model, Plan, Steps};
use crate::template;

/// The engine's default pool ceiling in open loop (see `RunSpec::validate`).
// TODO(issue10-workload): take this from the one set of workload defaults
// (`crates/engine/src/config.rs`, `crates/lab/src/plan.rs`) instead of repeating it.
const DEFAULT_MAX_CONNECTIONS: u64 = 1024;

/// The most the plan will ask of the machine at any step.
pub fn demand(plan: &Plan) -> Demand {
    let l = &plan.load;
    let largest_step = match &l.steps {
        Steps::Fixed(v) => v.iter().cloned().fold(0.0, f64::max),
        Steps::Knee { max, .. } => *max,
        Steps::Together => plan.scenarios.iter().filter_map(|s| s.rate).sum(),
    };
    let parallel = match l.steps {
        Steps::Together => plan.scenarios.len() as u64,
        _ => 1,
    };
    // Over HTTP/2 (and gRPC) the steps are streams; the connections stay `load.connections`.
    let multiplexed = plan.scenarios.iter().all(|s| s.protocol.multiplexed());
    let per_run = match l.model {
        _ if multiplexed => l.connections,
        Model::Open => l
            .max_connections
            .unwrap_or_else(|| l.connections.max(DEFAULT_MAX_CONNECTIONS)),
        Model::Closed => largest_step as u64,
    };
    let keep_alive_off = plan.scenarios.iter().any(|s| !s.keep_alive);
    let new_connections_per_s = (keep_alive_off && l.model == Model::Open).then_some(largest_step);
    let backlog = plan
        .matrix
        .iter()
        .find(|(k, _)| k == "backlog")
        .and_then(|(_, vals)| vals.iter().filter_map(|v| v.parse::<u64>().ok()).max());
    let loopback = plan.scenarios.iter().all(|s| {
        let url = template::render(&s.url, &mut |k| {
            (k.ends_with("port")).then(|| "1".to_string())
        });
        url::Url::parse(&url)
            .ok()
            .and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_string()))
            .is_some_and(|h| {
                h == "localhost" || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
            })
    });
    let source_addrs = l
        .source_addrs
        .as_deref()
        .and_then(|s| {
            loadlab_engine::config::parse_source_addrs(s, IpAddr::V4(Ipv4Addr::LOCALHOST)).ok()
        })
        .map_or(1, |v| v.len() as u64);
    Demand {
        connections: per_run * parallel,
        backlog,
        new_connections_per_s,
        duration_s: (l.step_duration + l.warmup).as_secs_f64(),
        loopback,
        source_addrs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(scenario: &str) -> Plan {
        let text = format!(
            "name = \"d\"\n[[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:1\"\n{scenario}\n[load]\nmodel = \"closed\"\nsteps = [256, 2048]\nconnections = 64\n"
        );
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        Plan::parse(&text, "d.toml", dir, false).unwrap()
    }

    #[test]
    fn closed_steps_are_connections_over_http1_and_streams_over_http2() {
        assert_eq!(demand(&plan("")).connections, 2048);
        assert_eq!(demand(&plan("protocol = \"http2\"")).connections, 64);
        let grpc = "protocol = \"grpc\"\nproto = \"../../proto/helloworld.proto\"\ncall = \"helloworld.Greeter/SayHello\"";
        assert_eq!(demand(&plan(grpc)).connections, 64);
    }
}

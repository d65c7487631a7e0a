//! What a plan asks of the machine, for the pre-flight checks of `loadlab doctor` and
//! `loadlab lab` (the checks themselves live in `loadlab_system::doctor`).

use std::net::IpAddr;

use loadlab_system::doctor::Demand;

use crate::plan::{Model, Plan, Steps};
use crate::template;

use loadlab_engine::config::workload::DEFAULT_MAX_CONNECTIONS;
use loadlab_engine::CloseBy;

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
    // Only connections loadlab closes hold its ports in TIME_WAIT.
    let server_closes = !plan
        .scenarios
        .iter()
        .any(|s| !s.keep_alive && s.close_by == CloseBy::Client);
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
    let source_addrs = l.source_addrs.as_ref().map_or(1, |s| s.len() as u64);
    Demand {
        connections: per_run * parallel,
        backlog,
        new_connections_per_s,
        server_closes,
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

    #[test]
    fn only_connections_loadlab_closes_hold_its_ports() {
        let open = |s: &str| {
            let mut p = plan(s);
            p.load.model = Model::Open;
            demand(&p)
        };
        assert!(open("keep_alive = false").server_closes);
        let d = open("keep_alive = false\nclose_by = \"client\"");
        assert!(!d.server_closes);
        assert_eq!(d.new_connections_per_s, Some(2048.0));
        let text = "name = \"d\"\n[[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:1\"\nkeep_alive = false\nclose_by = \"sometimes\"\n[load]\nsteps = [1]\n";
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let e = Plan::parse(text, "d.toml", dir, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("scenario[0].close_by"), "{e}");
        assert!(e.contains("\"server\" or \"client\""), "{e}");
    }
}

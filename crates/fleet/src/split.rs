//! How a step is split between agents.
//!
//! The rule (also in docs/src/distributed.md, "What happens, step by step"):
//! - each agent's **weight** is the number of worker threads it announced (`--threads`,
//!   by default its cores);
//! - the **rate** is split in proportion to the weights; the last agent takes what is left,
//!   so the shares add up to the step's rate;
//! - **connections**, the connection ceiling, **streams** (HTTP/2, gRPC) and the **request
//!   count** are whole numbers: every agent first gets one (an agent with no connection
//!   could send nothing), then the rest is shared in proportion to the weights by largest
//!   remainder (ties to the agent that joined first), so they add up exactly; a step with
//!   fewer of any of them than agents is refused;
//! - each agent's **seed** is the step's seed mixed with the agent's position, so Poisson
//!   arrivals are independent across agents (the same seed everywhere would send in step);
//! - the agents run their own thread count; `load.cpus` and `--source-addrs`, which name
//!   the coordinator's CPUs and addresses, are not passed on;
//! - **data rows** are dealt out: agent `i` of `n` gets rows `i`, `i + n`, `i + 2n`, …, so
//!   no row goes to two agents and `unique` stays unique; `${seq}` hands agent `i` the
//!   values `k n + i + 1`, so no two agents send the same number;
//! - a log replayed at its times is **dealt out** request by request in proportion to the
//!   weights ([`loadlab_engine::replay::Replay::deal`]), each with its logged time.

use loadlab_engine::{LoadModel, RunConfig, Workload};

/// One agent's part of a step.
#[derive(Clone, Debug, PartialEq)]
pub struct Share {
    /// Offered rate (open loop).
    pub rate: Option<f64>,
    /// Connections.
    pub connections: u64,
    /// Connection ceiling (open loop, HTTP/1.1).
    pub max_connections: u64,
    /// Streams in flight, or their ceiling (HTTP/2, gRPC).
    pub concurrency: u64,
    /// Request count, if the step has one.
    pub requests: Option<u64>,
    /// Arrival seed.
    pub seed: u64,
    /// Worker threads.
    pub threads: usize,
    /// This agent's position, and how many agents share the step (its rows and `${seq}`).
    pub part: usize,
    /// Agents sharing the step.
    pub parts: usize,
}

/// A step that cannot be split over this many agents.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
#[error("the step has {have} {what} for {agents} agents: every agent needs at least one (raise {what} or run fewer agents)")]
pub struct SplitError {
    /// What there is too little of.
    pub what: &'static str,
    /// How many the step has.
    pub have: u64,
    /// Agents.
    pub agents: usize,
}

/// `total` in whole parts, one each first, the rest by `weights` (largest remainder).
pub fn apportion(
    total: u64,
    weights: &[usize],
    what: &'static str,
) -> Result<Vec<u64>, SplitError> {
    let n = weights.len();
    if total < n as u64 {
        return Err(SplitError {
            what,
            have: total,
            agents: n,
        });
    }
    let rest = total - n as u64;
    let sum: u128 = weights.iter().map(|&w| w.max(1) as u128).sum();
    let mut parts: Vec<u64> = Vec::with_capacity(n);
    let mut remainders: Vec<(u128, usize)> = Vec::with_capacity(n);
    for (i, &w) in weights.iter().enumerate() {
        let exact = rest as u128 * w.max(1) as u128;
        parts.push(1 + (exact / sum) as u64);
        remainders.push((exact % sum, i));
    }
    let mut left = total - parts.iter().sum::<u64>();
    // Largest remainder first; the earlier agent on ties.
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, i) in remainders {
        if left == 0 {
            break;
        }
        parts[i] += 1;
        left -= 1;
    }
    Ok(parts)
}

/// The seed of agent `i`'s arrivals.
pub fn agent_seed(seed: u64, i: usize) -> u64 {
    // splitmix64 of the pair: neighbouring agents get unrelated streams.
    let mut z = seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Splits a validated step over agents with these thread counts.
pub fn split(cfg: &RunConfig, threads: &[usize]) -> Result<Vec<Share>, SplitError> {
    let n = threads.len();
    let connections = apportion(cfg.connections, threads, "connections")?;
    let max_connections = apportion(
        cfg.max_connections.max(cfg.connections),
        threads,
        "max_connections",
    )?;
    let concurrency = if cfg.transport.protocol().multiplexed() {
        apportion(cfg.concurrency, threads, "streams (concurrency)")?
    } else {
        vec![0; n]
    };
    let requests = match cfg.requests {
        Some(r) => apportion(r, threads, "requests")?
            .into_iter()
            .map(Some)
            .collect(),
        None => vec![None; n],
    };
    let rates: Vec<Option<f64>> = match cfg.model {
        LoadModel::Open { rate, .. } => {
            let sum: f64 = threads.iter().map(|&t| t.max(1) as f64).sum();
            let mut given = 0.0;
            (0..n)
                .map(|i| {
                    let r = if i + 1 == n {
                        rate - given
                    } else {
                        rate * threads[i].max(1) as f64 / sum
                    };
                    given += r;
                    Some(r)
                })
                .collect()
        }
        LoadModel::Closed => vec![None; n],
    };
    Ok((0..n)
        .map(|i| Share {
            rate: rates[i],
            connections: connections[i],
            max_connections: max_connections[i].max(connections[i]),
            concurrency: concurrency[i],
            requests: requests[i],
            seed: agent_seed(cfg.seed, i),
            threads: threads[i].max(1),
            part: i,
            parts: n,
        })
        .collect())
}

/// The workload an agent runs for its share.
pub fn share_workload(w: &Workload, s: &Share) -> Workload {
    let mut out = w.clone();
    if let (LoadModel::Open { arrival, .. }, Some(rate)) = (w.load, s.rate) {
        out.load = LoadModel::Open { rate, arrival };
    }
    out.connections = s.connections;
    out.transport = w.transport.sized(s.max_connections, s.concurrency);
    out.requests = s.requests;
    out.seed = Some(s.seed);
    out.threads = Some(s.threads);
    out.cpus = None;
    out.source_addrs = None;
    if !w.traffic.is_default() {
        out.traffic = w.traffic.share(s.part, s.parts);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_engine::Arrival;
    use proptest::prelude::*;

    fn cfg(w: &Workload) -> RunConfig {
        w.validate().expect("valid")
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(11), ..ProptestConfig::default() })]
        #[test]
        fn whole_parts_add_up_and_follow_the_weights(
            weights in proptest::collection::vec(1usize..16, 1..12),
            extra in 0u64..100_000,
        ) {
            let total = weights.len() as u64 + extra;
            let parts = apportion(total, &weights, "connections").unwrap();
            prop_assert_eq!(parts.iter().sum::<u64>(), total);
            let sum: usize = weights.iter().sum();
            for (p, w) in parts.iter().zip(&weights) {
                prop_assert!(*p >= 1);
                // One each, then within one of the exact proportional part of the rest.
                let exact = extra as f64 * *w as f64 / sum as f64;
                prop_assert!((*p as f64 - 1.0 - exact).abs() < 1.0 + 1e-9, "{} vs {}", p, exact);
            }
        }
    }

    #[test]
    fn too_few_to_share_is_refused_by_name() {
        let e = apportion(2, &[1, 1, 1], "connections").unwrap_err();
        assert_eq!(e.to_string(), "the step has 2 connections for 3 agents: every agent needs at least one (raise connections or run fewer agents)");
    }

    #[test]
    fn an_open_step_splits_by_threads_and_adds_up() {
        let w = Workload {
            url: "http://127.0.0.1:9/".into(),
            load: LoadModel::Open {
                rate: 1000.0,
                arrival: Arrival::Poisson,
            },
            connections: 10,
            requests: Some(1001),
            seed: Some(5),
            ..Workload::default()
        };
        let c = cfg(&w);
        let shares = split(&c, &[1, 2, 1]).unwrap();
        let rates: Vec<f64> = shares.iter().map(|s| s.rate.unwrap()).collect();
        assert_eq!(rates, vec![250.0, 500.0, 250.0]);
        assert_eq!(
            shares.iter().map(|s| s.connections).collect::<Vec<_>>(),
            vec![3, 4, 3]
        );
        assert_eq!(
            shares.iter().map(|s| s.requests.unwrap()).sum::<u64>(),
            1001
        );
        assert_eq!(
            shares.iter().map(|s| s.max_connections).sum::<u64>(),
            c.max_connections
        );
        let seeds: std::collections::BTreeSet<u64> = shares.iter().map(|s| s.seed).collect();
        assert_eq!(seeds.len(), 3, "every agent its own arrivals");
        // Each share is itself a valid workload with its own part.
        let a = share_workload(&w, &shares[1]);
        let ac = cfg(&a);
        assert_eq!(ac.connections, 4);
        assert_eq!(ac.threads, 2);
        assert!(matches!(ac.model, LoadModel::Open { rate, .. } if rate == 500.0));
    }

    #[test]
    fn uneven_rates_still_add_up_exactly() {
        let w = Workload {
            url: "http://127.0.0.1:9/".into(),
            load: LoadModel::Open {
                rate: 1000.0 / 3.0,
                arrival: Arrival::Constant,
            },
            connections: 7,
            ..Workload::default()
        };
        let shares = split(&cfg(&w), &[3, 1, 2]).unwrap();
        let sum: f64 = shares.iter().map(|s| s.rate.unwrap()).sum();
        assert_eq!(sum, 1000.0 / 3.0);
    }
}

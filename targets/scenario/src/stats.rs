//! The server's own counters and the `/stats` document.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::actor::ActorStats;
use crate::grpc::GrpcStats;
use crate::pool::PoolStats;
use crate::routes::Endpoint;

/// The body of `/stats`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// Requests received per endpoint path, `/stats` included; anything else is `other`.
    pub requests: BTreeMap<String, u64>,
    /// The current value of the `/count` counter.
    pub count: u64,
    /// The actor behind the `/send_*` endpoints.
    pub actor: ActorStats,
    /// The gRPC clients behind the `/grpc_*` endpoints.
    pub grpc: GrpcStats,
    /// The blocking pool behind `/page`.
    pub blocking_pool: PoolStats,
}

/// Requests per endpoint, counted by a middleware before the handler runs.
#[derive(Debug, Default)]
pub(crate) struct RequestCounters {
    by_endpoint: [AtomicU64; Endpoint::ALL.len()],
    other: AtomicU64,
}

impl RequestCounters {
    pub(crate) fn hit(&self, path: &str) {
        let counter = match Endpoint::from_path(path) {
            Some(endpoint) => &self.by_endpoint[endpoint as usize],
            None => &self.other,
        };
        counter.fetch_add(1, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> BTreeMap<String, u64> {
        let known = Endpoint::ALL
            .iter()
            .map(|&endpoint| (endpoint.path(), &self.by_endpoint[endpoint as usize]));
        known
            .chain([("other", &self.other)])
            .map(|(name, counter)| (name.to_owned(), counter.load(Relaxed)))
            .collect()
    }
}

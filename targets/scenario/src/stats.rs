//! The `/stats` document (the requests per endpoint are counted in [`crate::routes`]).

use std::collections::BTreeMap;

use crate::actor::ActorStats;
use crate::grpc::GrpcStats;
use crate::pool::PoolStats;

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

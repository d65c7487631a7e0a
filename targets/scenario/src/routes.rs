//! The endpoints: one handler per behaviour, with the blocking and awaiting variants of the
//! same call sharing one handler through [`Wait`].

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse, ResponseError, Route};

use crate::actor::SendError;
use crate::grpc::{Client, GrpcError};
use crate::pool::{PoolStopped, Work};
use crate::stats::Stats;
use crate::AppState;

type State = web::Data<AppState>;

/// Longest `work_ms` a `/page` request may ask for.
const MAX_PAGE_WORK: Duration = Duration::from_secs(60);

/// Every endpoint of the server, all `GET`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Health,
    Sleep,
    FSleep,
    Count,
    SendWait,
    FSendWait,
    SendNowait,
    GrpcWait,
    FGrpcWait,
    GrpcPer,
    Page,
    Stats,
}

impl Endpoint {
    pub(crate) const ALL: [Endpoint; 12] = [
        Endpoint::Health,
        Endpoint::Sleep,
        Endpoint::FSleep,
        Endpoint::Count,
        Endpoint::SendWait,
        Endpoint::FSendWait,
        Endpoint::SendNowait,
        Endpoint::GrpcWait,
        Endpoint::FGrpcWait,
        Endpoint::GrpcPer,
        Endpoint::Page,
        Endpoint::Stats,
    ];

    pub(crate) fn path(self) -> &'static str {
        match self {
            Endpoint::Health => "/health",
            Endpoint::Sleep => "/sleep",
            Endpoint::FSleep => "/f_sleep",
            Endpoint::Count => "/count",
            Endpoint::SendWait => "/send_wait",
            Endpoint::FSendWait => "/fsend_wait",
            Endpoint::SendNowait => "/send_nowait",
            Endpoint::GrpcWait => "/grpc_wait",
            Endpoint::FGrpcWait => "/fgrpc_wait",
            Endpoint::GrpcPer => "/grpc_per",
            Endpoint::Page => "/page",
            Endpoint::Stats => "/stats",
        }
    }

    pub(crate) fn from_path(path: &str) -> Option<Self> {
        Endpoint::ALL.into_iter().find(|e| e.path() == path)
    }

    fn route(self) -> Route {
        let get = web::get();
        match self {
            Endpoint::Health => get.to(|| async { "ok" }),
            Endpoint::Sleep => get.to(sleep),
            Endpoint::FSleep => get.to(f_sleep),
            Endpoint::Count => get.to(count),
            Endpoint::SendWait => get.to(|s: State| send_wait(s, Wait::Block)),
            Endpoint::FSendWait => get.to(|s: State| send_wait(s, Wait::Await)),
            Endpoint::SendNowait => get.to(send_nowait),
            Endpoint::GrpcWait => get.to(|s: State| grpc(s, Client::Shared, Wait::Block)),
            Endpoint::FGrpcWait => get.to(|s: State| grpc(s, Client::Shared, Wait::Await)),
            // Blocking, like the source's, so that it differs from /grpc_wait only by the
            // new connection per request.
            Endpoint::GrpcPer => get.to(|s: State| grpc(s, Client::PerRequest, Wait::Block)),
            Endpoint::Page => get.to(page),
            Endpoint::Stats => get.to(stats),
        }
    }
}

/// Registers every endpoint.
pub(crate) fn configure(config: &mut web::ServiceConfig) {
    for endpoint in Endpoint::ALL {
        config.route(endpoint.path(), endpoint.route());
    }
}

/// How a handler waits for a reply: the one difference between `/send_wait` and
/// `/fsend_wait`, and between `/grpc_wait` and `/fgrpc_wait`.
#[derive(Debug, Clone, Copy)]
enum Wait {
    /// Block the worker thread until the reply comes: the worker serves nothing else
    /// meanwhile.
    Block,
    /// Await the reply: the worker serves other requests meanwhile.
    Await,
}

impl Wait {
    /// `future` must not need the worker's own runtime to make progress (its work runs on
    /// another thread), or blocking on it would deadlock.
    async fn on<F: Future>(self, future: F) -> F::Output {
        match self {
            Wait::Block => futures_executor::block_on(future),
            Wait::Await => future.await,
        }
    }
}

/// Why an endpoint could not do its work.
#[derive(Debug, thiserror::Error)]
enum EndpointError {
    #[error(transparent)]
    Actor(#[from] SendError),
    #[error(transparent)]
    Grpc(#[from] GrpcError),
    #[error(transparent)]
    Pool(#[from] PoolStopped),
    #[error("work_ms must be at most {} ms", MAX_PAGE_WORK.as_millis())]
    PageTooLong,
}

impl ResponseError for EndpointError {
    fn status_code(&self) -> StatusCode {
        match self {
            EndpointError::Grpc(_) => StatusCode::BAD_GATEWAY,
            EndpointError::PageTooLong => StatusCode::BAD_REQUEST,
            EndpointError::Actor(_) | EndpointError::Pool(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The body is the whole error chain, for example
    /// `cannot connect to the gRPC backend: transport error: …: Connection refused`.
    fn error_response(&self) -> HttpResponse {
        let mut body = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(error) = cause {
            body = format!("{body}: {error}");
            cause = error.source();
        }
        HttpResponse::build(self.status_code()).body(body)
    }
}

/// Blocks the worker thread: with N workers, at most N `/sleep` calls progress at once.
async fn sleep(state: State) -> &'static str {
    std::thread::sleep(state.config.sleep);
    "done"
}

/// Waits on an async timer: the worker serves other requests meanwhile. (The source's
/// `/f_sleep` slept before building its future, so it blocked like `/sleep`.)
async fn f_sleep(state: State) -> &'static str {
    actix_rt::time::sleep(state.config.sleep).await;
    "done"
}

async fn count(state: State) -> String {
    (state.count.fetch_add(1, SeqCst) + 1).to_string()
}

async fn send_wait(state: State, wait: Wait) -> Result<&'static str, EndpointError> {
    wait.on(state.mailbox.ask()).await?;
    Ok("done")
}

async fn send_nowait(state: State) -> Result<&'static str, EndpointError> {
    state.mailbox.tell()?;
    Ok("queued")
}

async fn grpc(state: State, client: Client, wait: Wait) -> Result<String, EndpointError> {
    Ok(wait.on(state.grpc.say(client)).await?)
}

#[derive(Debug, serde::Deserialize)]
struct PageQuery {
    work_ms: u64,
    #[serde(default)]
    kind: Work,
}

async fn page(state: State, query: web::Query<PageQuery>) -> Result<String, EndpointError> {
    let work = Duration::from_millis(query.work_ms);
    if work > MAX_PAGE_WORK {
        return Err(EndpointError::PageTooLong);
    }
    state.pool.run(query.kind, work).await?;
    Ok(format!("page: {} {} ms", query.kind.name(), query.work_ms))
}

async fn stats(state: State) -> web::Json<Stats> {
    web::Json(state.stats())
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

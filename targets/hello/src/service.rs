//! `hello.HelloService`: answers `Say` after a delay drawn from the latency model; and
//! `ticker.Ticker`: `Subscribe` streams a tick every `tick_every`, until the client goes.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use loadlab_target_common::proto::hello::hello_service_server::HelloService;
use loadlab_target_common::proto::hello::{HelloRequest, HelloResponse};
use loadlab_target_common::proto::ticker::ticker_server::Ticker;
use loadlab_target_common::proto::ticker::{SubscribeRequest, Tick};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use crate::{Counters, LatencyModel};

/// The answer to one `Say` call, without the delay: the same `id`, and `hello, <message>`.
pub fn answer(request: &HelloRequest) -> HelloResponse {
    HelloResponse {
        id: request.id.clone(),
        message: format!("hello, {}", request.message),
    }
}

pub(crate) struct Hello {
    pub(crate) latency: LatencyModel,
    pub(crate) counters: Arc<Counters>,
}

#[tonic::async_trait]
impl HelloService for Hello {
    async fn say(&self, request: Request<HelloRequest>) -> Result<Response<HelloResponse>, Status> {
        self.counters.say_calls.fetch_add(1, Relaxed);
        let delay = self.latency.sample(&mut rand::thread_rng());
        tokio::time::sleep(delay).await;
        Ok(Response::new(answer(request.get_ref())))
    }
}

/// `ticker.Ticker`: each `Subscribe` call is a stream of ticks `every` apart (the first
/// `every` after the call), numbered from 1 and stamped with the time each was sent.
pub(crate) struct Ticks {
    pub(crate) every: Duration,
    pub(crate) counters: Arc<Counters>,
}

#[tonic::async_trait]
impl Ticker for Ticks {
    type SubscribeStream = Pin<Box<dyn Stream<Item = Result<Tick, Status>> + Send>>;

    async fn subscribe(
        &self,
        _request: Request<SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        self.counters.subscribe_calls.fetch_add(1, Relaxed);
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let every = self.every;
        let counters = Arc::clone(&self.counters);
        tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            for seq in 1u64.. {
                // On schedule: a late tick does not push the next ones later.
                let due = start + every.saturating_mul(u32::try_from(seq).unwrap_or(u32::MAX));
                tokio::time::sleep_until(due).await;
                let sent_at_us = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_micros() as u64);
                // The client went away: the stream ends.
                if tx.send(Ok(Tick { seq, sent_at_us })).await.is_err() {
                    return;
                }
                counters.ticks.fetch_add(1, Relaxed);
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}

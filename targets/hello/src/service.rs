//! `hello.HelloService`: answers `Say` after a delay drawn from the latency model; and
//! `ticker.Ticker`: `Subscribe` streams a tick every `tick_every`, until the client goes;
//! `Chat` answers each note after `chat_delay`, holding one of `chat_pool` workers while
//! it does (a known capacity: pool ÷ delay notes a second); `Upload` takes each note in the
//! same way and answers the call with a receipt once the client's side ends.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use loadlab_target_common::proto::hello::hello_service_server::HelloService;
use loadlab_target_common::proto::hello::{HelloRequest, HelloResponse};
use loadlab_target_common::proto::ticker::ticker_server::Ticker;
use loadlab_target_common::proto::ticker::{Note, Receipt, SubscribeRequest, Tick};
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

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
    /// How long each `Chat` note takes to answer.
    pub(crate) chat_delay: Duration,
    /// The workers every `Chat` stream's notes share (`None`: each note its own).
    pub(crate) chat_pool: Option<Arc<tokio::sync::Semaphore>>,
}

/// Microseconds since the Unix epoch, now.
fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
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
                let sent_at_us = now_us();
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

    type ChatStream = Pin<Box<dyn Stream<Item = Result<Note, Status>> + Send>>;

    /// Answers each note in turn, after `chat_delay` with a worker of the pool held: the
    /// same `seq` and text, stamped with the time it was sent. The stream ends when the
    /// client's does.
    async fn chat(
        &self,
        request: Request<Streaming<Note>>,
    ) -> Result<Response<Self::ChatStream>, Status> {
        self.counters.chat_calls.fetch_add(1, Relaxed);
        let mut inbound = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let (delay, pool) = (self.chat_delay, self.chat_pool.clone());
        let counters = Arc::clone(&self.counters);
        tokio::spawn(async move {
            while let Ok(Some(mut note)) = inbound.message().await {
                counters.notes_in.fetch_add(1, Relaxed);
                let permit = match &pool {
                    Some(pool) => match pool.acquire().await {
                        Ok(p) => Some(p),
                        Err(_) => return,
                    },
                    None => None,
                };
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                drop(permit);
                note.sent_at_us = now_us();
                if tx.send(Ok(note)).await.is_err() {
                    return;
                }
                counters.notes_out.fetch_add(1, Relaxed);
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    /// Takes each note in after `chat_delay` with a worker of the pool held (as `Chat`
    /// answers one), then answers the call once the client's side ends: the notes counted
    /// and the last one's `seq`, stamped with the time it was sent.
    async fn upload(&self, request: Request<Streaming<Note>>) -> Result<Response<Receipt>, Status> {
        self.counters.upload_calls.fetch_add(1, Relaxed);
        let mut inbound = request.into_inner();
        let mut receipt = Receipt::default();
        while let Some(note) = inbound.message().await? {
            self.counters.upload_notes.fetch_add(1, Relaxed);
            let permit = match &self.chat_pool {
                Some(pool) => Some(
                    pool.acquire()
                        .await
                        .map_err(|_| Status::unavailable("shutting down"))?,
                ),
                None => None,
            };
            if !self.chat_delay.is_zero() {
                tokio::time::sleep(self.chat_delay).await;
            }
            drop(permit);
            receipt.notes += 1;
            receipt.last_seq = note.seq;
        }
        receipt.sent_at_us = now_us();
        self.counters.receipts.fetch_add(1, Relaxed);
        Ok(Response::new(receipt))
    }
}

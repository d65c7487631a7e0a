//! One worker thread: a single-threaded tokio runtime running connection tasks.
//!
//! There is one request loop ([`conn_task`]) for every load model. It asks the worker's
//! [`Source`] for the intended send time of its next request (or batch, when pipelining):
//! - closed loop: "now", as soon as the previous response ended;
//! - open loop: the next arrival released by the dispatcher, which follows the
//!   [`WorkerSchedule`] with a precise timer and grows the pool up to its ceiling when every
//!   connection is busy. Arrivals that find no free connection wait in a queue and are
//!   still charged from their intended time.
//!
//! Every request has one deadline: its intended send time plus the timeout. An arrival
//! that waits in the queue past its deadline counts as a timeout without being sent.
//!
//! The transport sits behind [`Ctx::exchange`]: over HTTP/1.1 a request loop owns its
//! connection; over HTTP/2 (and gRPC) a request loop is a stream slot on a connection it
//! shares with other slots ([`crate::http2`]).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, PreciseTimer};
use bytes::Bytes;
use loadlab_grpc::GrpcStatus;

use crate::config::{LoadModel, Protocol, RunConfig};
use crate::conn::{Conn, Connector};
use crate::error::{from_h2, ErrorClass};
use crate::http1::ResponseReader;
use crate::http2::{self, ConnState, GoAwayWatch, H2Conn, Live, Slot, Template};
use crate::recorder::{IntervalReport, Recorder, WorkerTotals};
use crate::schedule::{Window, WorkerSchedule};

/// Everything a worker thread needs; built by the runner.
pub struct WorkerPlan {
    /// This worker's index.
    pub index: usize,
    /// Number of workers.
    pub threads: usize,
    /// The run.
    pub cfg: Arc<RunConfig>,
    /// The request.
    pub request: Request,
    /// TLS client configuration for https targets.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Shared clock.
    pub clock: Clock,
    /// Timing window and request limit.
    pub window: Window,
    /// Request loops this worker starts with (HTTP/1.1: connections; HTTP/2: streams).
    pub tasks: usize,
    /// Request loops this worker may grow to (open loop).
    pub max_tasks: usize,
    /// HTTP/2: connections this worker's stream slots share (0 over HTTP/1.1).
    pub h2_connections: usize,
    /// Closed loop: measured requests left to claim, shared by all workers.
    pub tickets: Arc<AtomicU64>,
    /// Cancelled on Ctrl-C: stop at once.
    pub stop: CancellationToken,
    /// Per-second reports to the collector.
    pub tx: Sender<IntervalReport>,
}

/// What every request of a run sends.
#[derive(Clone)]
pub enum Request {
    /// HTTP/1.1: the encoded request, repeated `pipeline` times.
    Http1(Arc<Vec<u8>>),
    /// HTTP/2 and gRPC.
    Http2(Arc<Template>),
}

/// A request loop's transport state.
enum Link {
    /// HTTP/1.1: the loop's own connection (opened on demand) and its response parser.
    Http1 {
        conn: Option<Conn>,
        reader: ResponseReader,
        /// Responses read on `conn` so far.
        served: u64,
    },
    /// HTTP/2: a stream slot on a shared connection.
    Http2(Slot),
}

struct Ctx {
    cfg: Arc<RunConfig>,
    request: Request,
    request_len: usize,
    /// HTTP/2 connections; slot `i` sends on `h2_pool[i % len]`.
    h2_pool: Vec<Rc<H2Conn>>,
    /// What every HTTP/2 connection opened learnt from its server (its graceful close is
    /// counted once, at the end).
    h2_states: RefCell<Vec<Rc<ConnState>>>,
    /// Request loops started so far (numbers the slots).
    spawned: Cell<usize>,
    clock: Clock,
    window: Window,
    timeout_ns: u64,
    recorder: RefCell<Recorder>,
    connector: Connector,
    tickets: Arc<AtomicU64>,
    /// Open loop: released arrivals waiting for a connection.
    queue: RefCell<VecDeque<u64>>,
    /// Open loop: connection tasks waiting for an arrival.
    idle: Cell<usize>,
    wake: Notify,
    dispatch_done: Cell<bool>,
    /// Live connection tasks, and the pool ceiling.
    live: Cell<usize>,
    max_live: usize,
    finished: Notify,
}

/// Runs one worker to completion (or until `stop`) and returns what it measured.
pub fn run_worker(plan: WorkerPlan) -> std::io::Result<WorkerTotals> {
    request_short_slice();
    if !plan.cfg.cpus.is_empty() {
        let cpu = plan.cfg.cpus[plan.index % plan.cfg.cpus.len()];
        loadlab_system::os::pin_current_thread(&[cpu]).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("--cpus: cannot pin worker {} to CPU {cpu}: {e}", plan.index),
            )
        })?;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let cpu_start = thread_cpu_seconds();
    let recorder = Recorder::new(plan.index, plan.window.measure_start_ns, plan.tx);
    let ctx = Rc::new(Ctx {
        request_len: match &plan.request {
            Request::Http1(r) => r.len() / plan.cfg.pipeline as usize,
            Request::Http2(_) => 0,
        },
        h2_pool: (0..plan.h2_connections)
            .map(|_| Rc::new(H2Conn::default()))
            .collect(),
        h2_states: RefCell::new(Vec::new()),
        spawned: Cell::new(0),
        connector: Connector::new(&plan.cfg, plan.tls, plan.index, plan.threads),
        timeout_ns: plan.cfg.timeout.as_nanos() as u64,
        cfg: plan.cfg,
        request: plan.request,
        clock: plan.clock,
        window: plan.window,
        recorder: RefCell::new(recorder),
        tickets: plan.tickets,
        queue: RefCell::new(VecDeque::new()),
        idle: Cell::new(0),
        wake: Notify::new(),
        dispatch_done: Cell::new(false),
        live: Cell::new(0),
        max_live: plan.max_tasks.max(plan.tasks).max(1),
        finished: Notify::new(),
    });
    let stop = plan.stop;
    let wall_start = plan.clock.now();
    let result = local.block_on(&rt, {
        let ctx = ctx.clone();
        async move {
            for _ in 0..plan.tasks {
                spawn_conn(&ctx);
            }
            if let LoadModel::Open { rate, arrival } = ctx.cfg.model {
                let sched = WorkerSchedule::new(
                    arrival,
                    rate,
                    plan.index,
                    plan.threads,
                    ctx.window,
                    ctx.cfg.seed,
                );
                let timer = PreciseTimer::new(ctx.clock)?;
                tokio::task::spawn_local(dispatch(ctx.clone(), sched, timer));
            }
            tokio::task::spawn_local(tick(ctx.clone()));
            tokio::select! {
                _ = all_finished(&ctx) => {}
                _ = stop.cancelled() => {}
            }
            Ok::<(), std::io::Error>(())
        }
    });
    // Dropping the set cancels what is still running (after Ctrl-C, or the ticker).
    drop(local);
    drop(rt);
    result?;
    let ctx = Rc::try_unwrap(ctx).unwrap_or_else(|_| panic!("worker tasks outlived their runtime"));
    let mut recorder = ctx.recorder.into_inner();
    for state in ctx.h2_states.into_inner() {
        if let Some(requests) = state.take_close() {
            recorder.server_close(requests);
        }
    }
    let mut totals = recorder.finish();
    totals.thread_cpu_seconds = thread_cpu_seconds() - cpu_start;
    totals.thread_wall_seconds = (plan.clock.now() - wall_start) as f64 / 1e9;
    Ok(totals)
}

/// Asks the scheduler for a short time slice for this thread (Linux 6.12+, EEVDF), so that a
/// worker waking for its next send is more likely to preempt a busy neighbour on its CPU
/// than to wait out the neighbour's slice (about 3 ms, recorded as schedule lag). Measured
/// here it helps only partly: a generator needs a CPU of its own (`--cpus`). Best effort:
/// older kernels ignore or refuse it, and nothing else changes.
fn request_short_slice() {
    loadlab_system::os::request_short_slice(SHORT_SLICE_NS);
}

/// The time slice worker threads ask for (the kernel's minimum is 0.1 ms).
const SHORT_SLICE_NS: u64 = 100_000;

/// CPU time of the calling thread (user + system), seconds.
fn thread_cpu_seconds() -> f64 {
    loadlab_system::os::thread_cpu_seconds()
}

async fn all_finished(ctx: &Ctx) {
    while ctx.live.get() > 0 {
        ctx.finished.notified().await;
    }
}

fn spawn_conn(ctx: &Rc<Ctx>) {
    ctx.live.set(ctx.live.get() + 1);
    let n = ctx.spawned.get();
    ctx.spawned.set(n + 1);
    let link = if ctx.h2_pool.is_empty() {
        Link::Http1 {
            conn: None,
            reader: ResponseReader::new(&ctx.cfg.method),
            served: 0,
        }
    } else {
        Link::Http2(Slot {
            conn: ctx.h2_pool[n % ctx.h2_pool.len()].clone(),
            cached: None,
        })
    };
    tokio::task::spawn_local(conn_task(ctx.clone(), link));
}

async fn tick(ctx: Rc<Ctx>) {
    let mut every = tokio::time::interval(Duration::from_millis(200));
    loop {
        every.tick().await;
        ctx.recorder.borrow_mut().tick(ctx.clock.now());
    }
}

/// How often one request may be re-sent after its server closed without processing it
/// (a server that closes every connection before answering is failing, not closing).
const MAX_RESENDS: u32 = 8;

/// Why an HTTP/2 stream attempt ended without a reply.
enum StreamFailure {
    /// The server never processed it: send it again.
    Unprocessed,
    /// A failure to count.
    Failed(ErrorClass),
}

/// The dispatcher wakes at most this often. Below `1 / MIN_WAKE_GAP` arrivals per second
/// per worker every arrival gets its own wake-up; above, the arrivals due within one gap
/// are released together. Each wake-up re-arms a timer and wakes the server: per arrival,
/// at tens of thousands per second, that costs more CPU than the requests themselves.
/// The lateness this adds (at most the gap) is recorded as schedule lag and charged to
/// latency like any other.
pub const MIN_WAKE_GAP_NS: u64 = 200_000;

/// Open loop: releases each arrival at its intended time.
async fn dispatch(ctx: Rc<Ctx>, sched: WorkerSchedule, timer: PreciseTimer) {
    let mut behind = 0u32;
    let mut last_wake = 0u64;
    for intended in sched {
        if ctx.clock.now() < intended {
            behind = 0;
            let wake_at = intended.max(last_wake + MIN_WAKE_GAP_NS);
            if timer.sleep_until(wake_at).await.is_err() {
                tokio::time::sleep_until(ctx.clock.instant(wake_at).into()).await;
            }
            last_wake = ctx.clock.now();
        } else {
            // Catching up: let connection tasks run now and then.
            behind += 1;
            if behind.is_multiple_of(64) {
                tokio::task::yield_now().await;
            }
        }
        ctx.recorder.borrow_mut().lag(intended, ctx.clock.now());
        ctx.queue.borrow_mut().push_back(intended);
        if ctx.idle.get() > 0 {
            ctx.idle.set(ctx.idle.get() - 1);
            ctx.wake.notify_one();
        } else if ctx.live.get() < ctx.max_live {
            spawn_conn(&ctx);
        }
    }
    ctx.dispatch_done.set(true);
    ctx.wake.notify_waiters();
}

impl Ctx {
    /// Fills `batch` with the intended send times of the next request(s); `false` when the
    /// run is over for this connection.
    async fn next_batch(&self, batch: &mut Vec<u64>) -> bool {
        match self.cfg.model {
            LoadModel::Closed => {
                let mut now = self.clock.now();
                if now < self.window.start_ns {
                    tokio::time::sleep_until(self.clock.instant(self.window.start_ns).into()).await;
                    now = self.clock.now();
                }
                if now >= self.window.end_ns {
                    return false;
                }
                let mut n = self.cfg.pipeline as u64;
                if now >= self.window.measure_start_ns {
                    let claimed =
                        self.tickets
                            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                                (left > 0).then(|| left - left.min(n))
                            });
                    match claimed {
                        Ok(left) => n = n.min(left),
                        Err(_) => return false,
                    }
                }
                batch.extend(std::iter::repeat_n(now, n as usize));
                true
            }
            LoadModel::Open { .. } => loop {
                if let Some(t) = self.queue.borrow_mut().pop_front() {
                    batch.push(t);
                    return true;
                }
                if self.dispatch_done.get() {
                    return false;
                }
                self.idle.set(self.idle.get() + 1);
                self.wake.notified().await;
            },
        }
    }

    /// Sends the batch on the loop's transport (connecting first if needed), reads the
    /// responses and records everything. Returns `false` if the exchange failed.
    async fn exchange(&self, link: &mut Link, batch: &[u64]) -> bool {
        let deadline = batch[0] + self.timeout_ns;
        let now = self.clock.now();
        if now >= deadline {
            for &t in batch {
                self.record_failure(t, now, ErrorClass::RequestTimeout);
            }
            return false;
        }
        let connecting = Cell::new(false);
        let done = Cell::new(0usize);
        let work = async {
            match link {
                Link::Http1 {
                    conn,
                    reader,
                    served,
                } => {
                    self.http1(conn, reader, served, batch, &connecting, &done)
                        .await
                }
                Link::Http2(slot) => {
                    self.http2(slot, batch[0], deadline, &connecting).await?;
                    done.set(1);
                    Ok(())
                }
            }
        };
        let outcome = tokio::time::timeout_at(self.clock.instant(deadline).into(), work).await;
        let failure = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(class)) => Some(class),
            Err(_elapsed) if connecting.get() => Some(ErrorClass::ConnectTimeout),
            Err(_elapsed) => Some(ErrorClass::RequestTimeout),
        };
        if let Some(class) = failure {
            if let Link::Http1 { conn, .. } = link {
                *conn = None;
            }
            let now = self.clock.now();
            for &t in &batch[done.get()..] {
                self.record_failure(t, now, class);
            }
            return false;
        }
        if let Link::Http1 { conn, .. } = link {
            if !self.cfg.keep_alive {
                *conn = None;
            }
        }
        true
    }

    /// Records a request that got no reply. A gRPC client reports a passed deadline as
    /// DEADLINE_EXCEEDED, and so does loadlab.
    fn record_failure(&self, intended: u64, now: u64, class: ErrorClass) {
        let mut rec = self.recorder.borrow_mut();
        if class == ErrorClass::RequestTimeout && self.cfg.protocol == Protocol::Grpc {
            rec.grpc_error(intended, now, GrpcStatus::DeadlineExceeded);
        } else {
            rec.error(intended, now, class);
        }
    }

    /// HTTP/1.1: writes the batch on the loop's connection and reads its responses.
    ///
    /// A server may close a keep-alive connection gracefully: a response with
    /// `Connection: close`, or a clean close right after a complete response. Requests
    /// written behind it were never read (RFC 9112 §9.3), so they are sent again on a new
    /// connection, latency still charged from their intended send time, if their method
    /// allows it ([`RunConfig::resend_unprocessed`]). A close in the middle of a response,
    /// or before a connection answered anything, is an error.
    async fn http1(
        &self,
        conn: &mut Option<Conn>,
        reader: &mut ResponseReader,
        served: &mut u64,
        batch: &[u64],
        connecting: &Cell<bool>,
        done: &Cell<usize>,
    ) -> Result<(), ErrorClass> {
        let Request::Http1(request) = &self.request else {
            unreachable!("HTTP/1.1 loops are only built for HTTP/1.1 requests");
        };
        let mut resends = 0;
        'connection: loop {
            if conn.is_none() {
                connecting.set(true);
                let c0 = self.clock.now();
                let c = self.connector.connect().await?;
                self.recorder.borrow_mut().connect(self.clock.now() - c0);
                reader.reset();
                *served = 0;
                connecting.set(false);
                *conn = Some(c);
            }
            let c = conn.as_mut().expect("connected above");
            let rest = &batch[done.get()..];
            let sent = self.clock.now();
            c.write_all(&request[..self.request_len * rest.len()])
                .await
                .map_err(|e| ErrorClass::from_io(&e, false))?;
            for &t in rest {
                match reader.read(c).await {
                    Ok(meta) => {
                        self.recorder
                            .borrow_mut()
                            .response(t, sent, self.clock.now(), meta.status);
                        done.set(done.get() + 1);
                        *served += 1;
                        if !meta.close {
                            continue;
                        }
                        // With keep-alive off loadlab asked for the close itself.
                        if !self.cfg.keep_alive {
                            *conn = None;
                            return Ok(());
                        }
                    }
                    // A clean close before any byte of this response, on a connection that
                    // has answered before: an idle keep-alive connection the server closed.
                    Err(ErrorClass::ConnectionClosed) if *served > 0 && !reader.began() => {}
                    Err(class) => return Err(class),
                }
                *conn = None;
                self.recorder.borrow_mut().server_close(*served);
                if done.get() == batch.len() {
                    return Ok(());
                }
                if !self.cfg.resend_unprocessed || resends >= MAX_RESENDS {
                    return Err(ErrorClass::ConnectionClosed);
                }
                resends += 1;
                let mut rec = self.recorder.borrow_mut();
                for &t in &batch[done.get()..] {
                    rec.resent(t);
                }
                continue 'connection;
            }
            return Ok(());
        }
    }

    /// HTTP/2: sends one request as a stream on the slot's connection, reads the response
    /// (and for gRPC its trailers) and records it. A stream the server never processed
    /// (refused, or above the `last_stream_id` of its `GOAWAY`) is sent again on a new
    /// connection, whatever the method (RFC 9113 §8.7), latency charged from its intended
    /// send time; the connection that sent `GOAWAY` takes no new streams.
    async fn http2(
        &self,
        slot: &mut Slot,
        intended: u64,
        deadline: u64,
        connecting: &Cell<bool>,
    ) -> Result<(), ErrorClass> {
        let mut resends = 0;
        loop {
            let live = match slot.cached.take() {
                Some(live) if slot.conn.is_current(live.0) => live,
                _ => self.h2_connection(&slot.conn, connecting).await?,
            };
            let (generation, state) = (live.0, live.2.clone());
            match self.h2_stream(slot, live, intended, deadline).await {
                Ok(()) => return Ok(()),
                Err(StreamFailure::Unprocessed) if resends < MAX_RESENDS => {
                    slot.conn.invalidate(generation);
                    resends += 1;
                    self.recorder.borrow_mut().resent(intended);
                }
                Err(StreamFailure::Unprocessed) => return Err(ErrorClass::StreamReset),
                Err(StreamFailure::Failed(class)) => {
                    if state.goaway().is_some() {
                        slot.conn.invalidate(generation);
                    }
                    return Err(class);
                }
            }
        }
    }

    /// One attempt of [`Ctx::http2`] on the live connection `live`.
    async fn h2_stream(
        &self,
        slot: &mut Slot,
        live: Live,
        intended: u64,
        deadline: u64,
    ) -> Result<(), StreamFailure> {
        let Request::Http2(template) = &self.request else {
            unreachable!("HTTP/2 slots are only built for HTTP/2 requests");
        };
        let (generation, send, state) = live;
        // Not sent: on a connection its server is closing, that is "never processed".
        let not_sent = |e: h2::Error| {
            slot.conn.invalidate(generation);
            if state.goaway().is_some() {
                StreamFailure::Unprocessed
            } else {
                StreamFailure::Failed(from_h2(&e, false))
            }
        };
        let mut send = send.ready().await.map_err(&not_sent)?;
        let sent = self.clock.now();
        let request = template.request(deadline.saturating_sub(sent));
        let body = template.body();
        let (response, mut stream) = send
            .send_request(request, body.is_none())
            .map_err(&not_sent)?;
        let id = u32::from(response.stream_id());
        let failed = |e: h2::Error| {
            if state.unprocessed(&e, id) {
                StreamFailure::Unprocessed
            } else {
                StreamFailure::Failed(from_h2(&e, false))
            }
        };
        slot.cached = Some((generation, send, state.clone()));
        if let Some(body) = body {
            stream.send_data(body.clone(), true).map_err(&failed)?;
        }
        let response = response.await.map_err(&failed)?;
        let status = response.status().as_u16();
        let mut grpc = http2::grpc_status(response.headers());
        let mut body = response.into_body();
        let after_headers = |e: h2::Error| StreamFailure::Failed(from_h2(&e, false));
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(after_headers)?;
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        if template.is_grpc() && grpc.is_none() {
            if let Some(trailers) = body.trailers().await.map_err(after_headers)? {
                grpc = http2::grpc_status(&trailers);
            }
        }
        let now = self.clock.now();
        let mut rec = self.recorder.borrow_mut();
        match (template.is_grpc(), status, grpc) {
            (true, 200, Some(code)) => rec.grpc_reply(intended, sent, now, code),
            // A 200 without grpc-status is not a gRPC reply.
            (true, 200, None) => return Err(StreamFailure::Failed(ErrorClass::MalformedResponse)),
            // A proxy's error page, or a plain HTTP/2 reply.
            _ => rec.response(intended, sent, now, status),
        }
        Ok(())
    }

    /// The live connection of `conn`, opening it if no slot has (the other slots bound to
    /// it wait for that attempt instead of opening their own).
    async fn h2_connection(
        &self,
        conn: &Rc<H2Conn>,
        connecting: &Cell<bool>,
    ) -> Result<Live, ErrorClass> {
        loop {
            let changed = conn.changed();
            if let Some(live) = conn.current() {
                return Ok(live);
            }
            let Some(_guard) = conn.begin_connect() else {
                changed.await;
                continue;
            };
            connecting.set(true);
            let c0 = self.clock.now();
            let io = self.connector.connect().await?;
            self.recorder.borrow_mut().connect(self.clock.now() - c0);
            let state = Rc::new(ConnState::default());
            self.h2_states.borrow_mut().push(state.clone());
            let io = GoAwayWatch::new(io, state.clone());
            let (send, driver) = h2::client::Builder::new()
                .initial_window_size(http2::STREAM_WINDOW)
                .initial_connection_window_size(http2::CONNECTION_WINDOW)
                .enable_push(false)
                .handshake::<_, Bytes>(io)
                .await
                .map_err(|e| from_h2(&e, true))?;
            connecting.set(false);
            let generation = conn.install(send.clone(), state.clone());
            let owner = conn.clone();
            tokio::task::spawn_local(async move {
                let _ = driver.await;
                owner.invalidate(generation);
            });
            return Ok((generation, send, state));
        }
    }

    /// Closed loop: opens the loop's connection before the window starts, as wrk does.
    async fn preconnect(&self, link: &mut Link) {
        let c0 = self.clock.now();
        let deadline = self
            .clock
            .instant(self.window.start_ns.max(c0) + self.timeout_ns);
        match link {
            Link::Http1 { conn, .. } => {
                if let Ok(Ok(c)) =
                    tokio::time::timeout_at(deadline.into(), self.connector.connect()).await
                {
                    self.recorder.borrow_mut().connect(self.clock.now() - c0);
                    *conn = Some(c);
                }
            }
            Link::Http2(slot) => {
                let unused = Cell::new(false);
                let attempt = self.h2_connection(&slot.conn, &unused);
                if let Ok(Ok(live)) = tokio::time::timeout_at(deadline.into(), attempt).await {
                    slot.cached = Some(live);
                }
            }
        }
    }
}

/// The request loop of one connection (HTTP/1.1; with keep-alive off, one concurrency
/// slot) or one stream slot (HTTP/2).
async fn conn_task(ctx: Rc<Ctx>, mut link: Link) {
    // Closed loop connects every connection up front (as wrk does). Open loop connects on
    // first use, as clients arrive: a burst of pre-connects would overflow a small listen
    // queue and be measured as the server's problem.
    if ctx.cfg.keep_alive && ctx.cfg.model == LoadModel::Closed {
        ctx.preconnect(&mut link).await;
    }
    let mut batch = Vec::with_capacity(ctx.cfg.pipeline as usize);
    while ctx.next_batch(&mut batch).await {
        if !ctx.exchange(&mut link, &batch).await {
            // A failure can be synchronous (EMFILE, EADDRNOTAVAIL, a refused connect on
            // loopback): yield, or this task would starve the others on its thread.
            tokio::task::yield_now().await;
        }
        batch.clear();
    }
    ctx.live.set(ctx.live.get() - 1);
    if ctx.live.get() == 0 {
        ctx.finished.notify_one();
    }
}

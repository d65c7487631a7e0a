//! One worker thread: a single-threaded tokio runtime running connection tasks.
//!
//! There is one request loop (`conn_task`) for every load model. It asks the worker
//! (`Ctx::next_batch`) for the intended send time of its next request (or batch, when pipelining):
//! - closed loop: "now", as soon as the previous response ended;
//! - open loop: the next arrival released by the dispatcher, which follows the
//!   [`WorkerSchedule`] with a precise timer and grows the pool up to its ceiling when every
//!   connection is busy. Arrivals that find no free connection wait in a queue and are
//!   still charged from their intended time.
//!
//! Every request has one deadline: its intended send time plus the timeout. An arrival
//! that waits in the queue past its deadline counts as a timeout without being sent.
//!
//! The transport sits behind a `Link` ([`crate::transport`]): over HTTP/1.1 a request
//! loop owns its connection (`crate::transport::http1::link`); over HTTP/2 (and gRPC) it is a stream
//! slot on a connection it shares with other slots (`crate::transport::http2::link`). This module
//! keeps the loop, the dispatcher, deadlines and the recording of failures.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;

use loadlab_grpc::GrpcStatus;

use crate::clock::{Clock, PreciseTimer, MIN_WAKE_GAP_NS};
use crate::config::{Arrival, LoadModel, Protocol, RunConfig};
use crate::conn::Connector;
use crate::error::ErrorClass;
use crate::recorder::{IntervalReport, Planned, Recorder, WorkerTotals};
use crate::schedule::{Window, WorkerSchedule};
use crate::transport::http2::link::LifeEnd;
use crate::transport::io::Io;
use crate::transport::{Link, Links, Request};

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
    /// The interface plain HTTP/1.1 connections use.
    pub io: crate::config::IoUsed,
    /// A timed replay: this worker's arrivals, and where it adds the ones it released per
    /// second of the measured window.
    pub replay: Option<crate::replay::WorkerFeed>,
}

/// A held connection's request loop: the arrivals released to it alone, and where it
/// waits for the next.
#[derive(Default)]
struct HeldLoop {
    queue: RefCell<VecDeque<u64>>,
    idle: crate::idle::IdleLoops,
}

struct Ctx {
    /// What the transports share: the run, the clock, the connector, the recorder.
    io: Io,
    /// What every request sends, and the HTTP/2 connections: each request loop's link.
    links: Links,
    /// Request loops started so far (numbers the slots).
    spawned: Cell<usize>,
    window: Window,
    timeout_ns: u64,
    tickets: Arc<AtomicU64>,
    /// Open loop: released arrivals waiting for a connection.
    queue: RefCell<VecDeque<u64>>,
    /// Open loop: the most arrivals `queue` may hold.
    queue_cap: usize,
    /// Open loop: request loops waiting for an arrival.
    idle: crate::idle::IdleLoops,
    /// Held connections ([`crate::config::Transport::held`]): each request loop's own
    /// arrivals, every `connections / rate` apart; empty otherwise.
    held: Vec<HeldLoop>,
    /// Held connections: arrivals released so far (the next goes to loop
    /// `released / turn % n`).
    released: Cell<usize>,
    /// Held connections: the arrivals each loop takes in a row (a client-streaming call's
    /// messages, so that a call's messages are consecutive arrivals and it lasts about
    /// `messages / rate`, not `messages × streams / rate`; 1 otherwise).
    turn: usize,
    dispatch_done: Cell<bool>,
    /// Live connection tasks, and the pool ceiling.
    live: Cell<usize>,
    max_live: usize,
    finished: Notify,
    /// Requests that vary: what they are and how they are drawn (`None`: one fixed request).
    traffic: Option<Arc<crate::traffic::Traffic>>,
    /// The run ends when the data rows are used up (`unique`): the dispatcher checks.
    rows_end_run: bool,
    /// A flow: every request loop runs sessions of it ([`crate::session`]).
    flow: Option<Arc<crate::transport::io::Varying<crate::transport::http1::H1Request>>>,
    /// A flow: wakes sessions after their think times.
    wakeups: crate::session::Wakeups,
    /// A timed replay: the request of each arrival released and not yet planned, in
    /// order (`None` otherwise: the traffic draws each request).
    replay_kinds: Option<RefCell<VecDeque<(u64, u32)>>>,
    /// A timed replay: where the arrivals released per second are added at the end.
    replay_released: Option<Arc<std::sync::Mutex<crate::replay::Tally>>>,
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
    let uring = plan.io == crate::config::IoUsed::Uring;
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    if uring {
        crate::transport::uring::install()?;
        // What the request loops queued goes to the kernel in one system call per turn.
        builder.on_thread_park(crate::transport::uring::flush);
    }
    let rt = builder.build()?;
    let local = tokio::task::LocalSet::new();
    let cpu_start = thread_cpu_seconds();
    let traffic = plan.cfg.traffic.clone();
    let seed = plan.cfg.seed;
    let names = traffic.as_ref().map(|t| t.name_map()).unwrap_or_default();
    let mut recorder = Recorder::new(plan.index, plan.window.measure_start_ns, plan.tx, names);
    recorder.set_window_end(plan.window.end_ns);
    let replay = plan.replay;
    let flow = match &plan.request {
        Request::Http1Varying(v) if v.traffic.flow.is_some() => Some(v.clone()),
        _ => None,
    };
    if let Some(v) = &flow {
        recorder.count_sessions(v.kinds.len());
    }
    let held = if plan.cfg.transport.held() {
        (0..plan.tasks).map(|_| HeldLoop::default()).collect()
    } else {
        Vec::new()
    };
    let turn = plan
        .cfg
        .transport
        .grpc()
        .filter(|c| c.client_streaming)
        .map_or(1, |c| c.messages_per_call.max(1) as usize);
    let ctx = Rc::new(Ctx {
        spawned: Cell::new(0),
        timeout_ns: plan.cfg.timeout.as_nanos() as u64,
        io: Io {
            connector: Connector::new(&plan.cfg, plan.tls, plan.index, plan.threads, plan.io),
            cfg: plan.cfg,
            clock: plan.clock,
            recorder: RefCell::new(recorder),
            traffic: traffic
                .as_ref()
                .map(|t| RefCell::new(t.worker(seed, plan.index))),
            held: Default::default(),
        },
        links: Links::new(plan.request, plan.h2_connections),
        window: plan.window,
        tickets: plan.tickets,
        queue: RefCell::new(VecDeque::new()),
        queue_cap: (QUEUE_CAP_TOTAL / plan.threads.max(1)).max(MIN_QUEUE_CAP),
        idle: crate::idle::IdleLoops::default(),
        held,
        released: Cell::new(0),
        turn,
        dispatch_done: Cell::new(false),
        live: Cell::new(0),
        max_live: plan.max_tasks.max(plan.tasks).max(1),
        finished: Notify::new(),
        rows_end_run: traffic.as_ref().is_some_and(|t| t.unique_rows().is_some()),
        traffic,
        flow,
        wakeups: crate::session::Wakeups::new(plan.clock),
        replay_kinds: replay.is_some().then(Default::default),
        replay_released: replay.as_ref().map(|(_, r)| r.clone()),
    });
    let stop = plan.stop;
    let wall_start = plan.clock.now();
    let result = local.block_on(&rt, {
        let ctx = ctx.clone();
        async move {
            if uring {
                tokio::task::spawn_local(crate::transport::uring::drive());
            }
            for _ in 0..plan.tasks {
                spawn_conn(&ctx);
            }
            if let LoadModel::Open { rate, arrival } = ctx.io.cfg.model {
                let sched = if let Some((rx, _)) = replay {
                    WorkerSchedule::replay(rx, ctx.window)
                } else if ctx.held.is_empty() {
                    WorkerSchedule::new(
                        arrival,
                        rate,
                        plan.index,
                        plan.threads,
                        ctx.window,
                        ctx.io.cfg.seed,
                    )
                } else {
                    // Held connections: this worker's own schedule, its connections' share
                    // of the rate, so that each of them sends once per interval.
                    let loops = if ctx.io.cfg.transport.protocol().multiplexed() {
                        ctx.io.cfg.concurrency
                    } else {
                        ctx.io.cfg.connections
                    };
                    let share = ctx.held.len() as f64 / loops.max(1) as f64;
                    // Pings keep a steady beat; a bidirectional call's messages arrive as
                    // the run says (each worker drawing its own).
                    let (arrival, seed) = if ctx.io.cfg.transport.protocol() == Protocol::Ws {
                        (Arrival::Constant, ctx.io.cfg.seed)
                    } else {
                        (arrival, ctx.io.cfg.seed.wrapping_add(plan.index as u64))
                    };
                    WorkerSchedule::new(arrival, rate * share, 0, 1, ctx.window, seed)
                };
                let timer = PreciseTimer::new(ctx.io.clock)?;
                // A flow's arrivals and its sessions' steps share one timer loop: one
                // wake-up serves every arrival and step due within a gap, where two loops
                // woke the worker twice as often.
                if ctx.flow.is_some() {
                    spawn_wakeups(&ctx, Some(timer));
                    tokio::task::spawn_local(dispatch(ctx.clone(), sched, None));
                } else {
                    tokio::task::spawn_local(dispatch(ctx.clone(), sched, Some(timer)));
                }
            } else if ctx.flow.is_some() {
                spawn_wakeups(&ctx, PreciseTimer::new(ctx.io.clock).ok());
            }
            tokio::task::spawn_local(tick(ctx.clone()));
            tokio::select! {
                _ = all_finished(&ctx) => {}
                _ = stop.cancelled() => {}
            }
            // HTTP/2: each connection tells its server it is done (GOAWAY) before it closes,
            // where dropping it cut it; bounded, for a server that stops reading.
            if !stop.is_cancelled() {
                ctx.links.close_h2();
                let closed = async {
                    while ctx.links.h2_open() {
                        tokio::task::yield_now().await;
                    }
                };
                let _ = tokio::time::timeout(H2_CLOSE_WAIT, closed).await;
            }
            Ok::<(), std::io::Error>(())
        }
    });
    // Dropping the set cancels what is still running (after Ctrl-C, or the ticker).
    drop(local);
    drop(rt);
    if uring {
        // After the connections: their closes go to the kernel before the ring ends.
        let mut rec = ctx.io.recorder.borrow_mut();
        crate::transport::uring::uninstall()
            .into_iter()
            .for_each(|ns| rec.connect(ns));
    }
    result?;
    let ctx = Rc::try_unwrap(ctx).unwrap_or_else(|_| panic!("worker tasks outlived their runtime"));
    let mut recorder = ctx.io.recorder.into_inner();
    ctx.links.count_closes(&mut recorder);
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

/// Every request loop has ended and, in open loop, so has the dispatcher: a worker that
/// starts with no connection (fewer connections than threads) still releases its share of
/// the arrivals, opening connections as they come.
async fn all_finished(ctx: &Ctx) {
    let open = matches!(ctx.io.cfg.model, LoadModel::Open { .. });
    while ctx.live.get() > 0 || (open && !ctx.dispatch_done.get()) {
        ctx.finished.notified().await;
    }
}

/// Starts the worker's session wake-ups ([`crate::session::Wakeups`]) on `timer`.
fn spawn_wakeups(ctx: &Rc<Ctx>, timer: Option<PreciseTimer>) {
    let ctx = ctx.clone();
    tokio::task::spawn_local(async move { ctx.wakeups.run(timer).await });
}

fn spawn_conn(ctx: &Rc<Ctx>) {
    ctx.live.set(ctx.live.get() + 1);
    let n = ctx.spawned.get();
    ctx.spawned.set(n + 1);
    if let Some(v) = &ctx.flow {
        let conn = crate::session::SessionConn::new(v.clone());
        tokio::task::spawn_local(session_task(ctx.clone(), conn));
        return;
    }
    let mut link = ctx.links.link(&ctx.io.cfg, n);
    if link.duplex().is_some() && !ctx.held.is_empty() && ctx.io.cfg.model != LoadModel::Closed {
        tokio::task::spawn_local(duplex_task(ctx.clone(), link, n));
        return;
    }
    tokio::task::spawn_local(conn_task(ctx.clone(), link, n));
}

async fn tick(ctx: Rc<Ctx>) {
    let mut every = tokio::time::interval(Duration::from_millis(200));
    loop {
        every.tick().await;
        let mut rec = ctx.io.recorder.borrow_mut();
        crate::transport::uring::take_connects(|ns| rec.connect(ns));
        rec.tick(ctx.io.clock.now());
    }
}

/// The longest a worker waits, at the end of a run, for its HTTP/2 connections to write
/// their `GOAWAY` and close.
const H2_CLOSE_WAIT: Duration = Duration::from_millis(200);

/// Over io_uring the dispatcher takes the responses in at its wake-ups while it sleeps no
/// longer than this ([`crate::transport::uring::pace`]); beyond, each response wakes the worker.
const PACE_MAX_GAP_NS: u64 = 1_000_000;

/// A dispatcher sleeping in the ring lets tokio's event loop turn at least this often, so
/// that tokio's timers fire no later than its own resolution (1 ms) allows.
const TOKIO_TURN_NS: u64 = 1_000_000;

/// The most arrivals waiting for a free connection, all workers together (8 bytes each):
/// the queue's memory is bounded whatever the rate and the timeout. An arrival released
/// when its worker's share is full is never sent and counted as such.
pub const QUEUE_CAP_TOTAL: usize = 1 << 22;
/// The smallest share of [`QUEUE_CAP_TOTAL`] a worker gets.
const MIN_QUEUE_CAP: usize = 1 << 12;

/// Open loop: releases each arrival at its intended time.
///
/// Its work is bounded by the run's time, not by the rate: arrivals it could not release
/// before their deadline (it fell more than the timeout behind, at a rate the machine
/// cannot generate) are skipped all at once and counted as never sent, so it ends at the
/// latest one timeout after the window, and the queue it fills is capped.
///
/// `timer`: its own timer; `None` for a flow, whose arrivals wait in the sessions' wake-ups
/// ([`crate::session::Wakeups`], which space wake-ups as this loop does).
async fn dispatch(ctx: Rc<Ctx>, mut sched: WorkerSchedule, timer: Option<PreciseTimer>) {
    let mut behind = 0u32;
    let mut last_wake = 0u64;
    let mut last_turn = 0u64;
    // A timed replay: what this worker released in the measured window, and the intended
    // and release times of its last one there.
    let mut released = ctx
        .replay_released
        .as_ref()
        .map(|_| crate::replay::Tally::new());
    let mut last_released: Option<(u64, u64)> = None;
    while let Some(intended) = sched.next() {
        if let (Some(q), Some(kind)) = (&ctx.replay_kinds, sched.replay_kind()) {
            q.borrow_mut().push_back((intended, kind));
        }
        if ctx.rows_end_run && ctx.traffic.as_ref().is_some_and(|t| t.used_up()) {
            break;
        }
        let mut now = ctx.io.clock.now();
        if now < intended {
            behind = 0;
            now = match &timer {
                Some(timer) => {
                    let wake_at = intended.max(last_wake + MIN_WAKE_GAP_NS);
                    // Over io_uring, at short gaps, responses wait for this loop's wake-up,
                    // and it sleeps in the ring: the loops it woke run first, so that their
                    // sends go in with the sleep.
                    let paced = crate::transport::uring::pace(wake_at - now <= PACE_MAX_GAP_NS);
                    let slept = paced && sleep_in_ring(&ctx, now, &mut last_turn, wake_at).await;
                    if !slept && timer.sleep_until(wake_at).await.is_err() {
                        tokio::time::sleep_until(ctx.io.clock.instant(wake_at).into()).await;
                    }
                    crate::transport::uring::reap_now();
                    last_wake = ctx.io.clock.now();
                    last_wake
                }
                None => ctx.wakeups.at(intended).await,
            };
        } else if now >= intended + ctx.timeout_ns {
            // This arrival, and every one after it whose deadline has passed too, could only
            // be counted as timeouts it was loadlab's fault to miss.
            let skipped = sched.skip_before(now + 1 - ctx.timeout_ns);
            let mut rec = ctx.io.recorder.borrow_mut();
            rec.lag(intended, now);
            let this = u64::from(rec.measured(intended));
            rec.unsent_late(skipped.measured + this);
            last_released = None;
            continue;
        } else {
            // Catching up: let connection tasks run now and then.
            behind += 1;
            if behind.is_multiple_of(64) {
                // Over io_uring: the requests queued since go out now, and the responses in
                // free their connections.
                crate::transport::uring::reap_now();
                tokio::task::yield_now().await;
            }
        }
        ctx.io.recorder.borrow_mut().lag(intended, now);
        if let Some(t) = released
            .as_mut()
            .filter(|_| intended >= ctx.window.measure_start_ns)
        {
            t.release(
                now.saturating_sub(ctx.window.measure_start_ns),
                intended,
                now,
                last_released,
            );
            last_released = Some((intended, now));
        }
        if !ctx.held.is_empty() {
            // Held connections: each arrival to the next loop in turn (a client-streaming
            // call's messages to one loop), which sends it when its previous exchange is
            // done (late, then, and charged from now).
            let n = ctx.released.get();
            ctx.released.set(n + 1);
            let held = &ctx.held[n / ctx.turn % ctx.held.len()];
            held.queue.borrow_mut().push_back(intended);
            held.idle.wake_one();
            continue;
        }
        if !ctx.enqueue(intended, now) {
            continue;
        }
        if ctx.idle.wake_one() {
            continue;
        }
        if ctx.live.get() < ctx.max_live {
            // Over a paced ring a loop whose response came in is busy until it is reaped:
            // reap, and let such loops take this arrival, before opening a connection.
            if crate::transport::uring::paced() && {
                crate::transport::uring::reap_now();
                yield_local().await;
                ctx.queue.borrow().is_empty()
            } {
                continue;
            }
            spawn_conn(&ctx);
        } else if ctx.flow.is_some() {
            // Every session loop is busy (sending, or thinking): this user waits for one,
            // loadlab's ceiling and not the server's doing.
            ctx.io.recorder.borrow_mut().session_waited(intended);
        }
    }
    crate::transport::uring::pace(false);
    if let (Some(all), Some(mine)) = (&ctx.replay_released, &released) {
        all.lock().expect("not poisoned").absorb(mine);
    }
    ctx.dispatch_done.set(true);
    ctx.idle.wake_all();
    for held in &ctx.held {
        held.idle.wake_all();
    }
    ctx.finished.notify_one();
}

/// The paced dispatcher's sleep until `wake_at` in the worker's ring
/// ([`crate::transport::uring::sleep_until`]), after the loops it woke have run (so that their sends go
/// in with the sleep); `false` if the ring did not sleep (not paced).
///
/// tokio's own timers (the loops' deadlines, the worker's tick) are served only when its
/// event loop turns, which a thread sleeping in the ring seldom lets it do: it is let turn
/// (a zero-timeout `epoll_wait`) at least once per [`TOKIO_TURN_NS`] (`last_turn`).
async fn sleep_in_ring(ctx: &Ctx, now: u64, last_turn: &mut u64, wake_at: u64) -> bool {
    if now >= *last_turn + TOKIO_TURN_NS {
        tokio::task::yield_now().await;
        *last_turn = ctx.io.clock.now();
    } else {
        yield_local().await;
    }
    crate::transport::uring::sleep_until(&ctx.io.clock, wake_at)
}

/// Lets the worker's other ready tasks run, once: this task goes to the back of the
/// worker's run queue (`tokio::task::yield_now` waits for tokio's next event-loop turn, a
/// system call).
async fn yield_local() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await;
}

impl Ctx {
    /// Fills `batch` with the next request(s) to send: their intended send times, and for
    /// requests that vary, their kind and row. `false` when the run is over for this loop
    /// (its window ended, its count was claimed, or `unique` used every row).
    async fn next_batch(
        &self,
        me: &Rc<crate::idle::Idler>,
        slot: usize,
        batch: &mut Vec<Planned>,
    ) -> bool {
        match self.io.cfg.model {
            LoadModel::Closed => {
                let mut now = self.io.clock.now();
                if now < self.window.start_ns {
                    tokio::time::sleep_until(self.io.clock.instant(self.window.start_ns).into())
                        .await;
                    now = self.io.clock.now();
                }
                if now >= self.window.end_ns {
                    return false;
                }
                let mut n = self.io.cfg.transport.pipeline() as u64;
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
                for _ in 0..n {
                    match self.plan(now) {
                        Some(p) => batch.push(p),
                        None => break,
                    }
                }
                !batch.is_empty()
            }
            LoadModel::Open { .. } => loop {
                let (queue, idle) = match self.held.get(slot) {
                    Some(held) => (&held.queue, &held.idle),
                    None => (&self.queue, &self.idle),
                };
                let next = queue.borrow_mut().pop_front();
                if let Some(t) = next {
                    return match self.plan(t) {
                        Some(p) => {
                            batch.push(p);
                            true
                        }
                        None => false,
                    };
                }
                if self.dispatch_done.get() {
                    return false;
                }
                idle.wait(me).await;
            },
        }
    }

    /// The request intended at `intended`: its kind and row drawn (`None`: the rows are
    /// used up).
    #[inline]
    fn plan(&self, intended: u64) -> Option<Planned> {
        if let Some(kind) = self.replayed(intended) {
            return Some(Planned {
                intended,
                kind,
                row: Planned::NO_ROW,
            });
        }
        match (&self.traffic, &self.io.traffic) {
            (Some(t), Some(w)) => t.plan(&mut w.borrow_mut(), intended),
            _ => Some(Planned::at(intended)),
        }
    }

    /// A request intended at `intended` that fails before it is sent: its kind drawn, so
    /// that it counts under a name.
    fn plan_unsent(&self, intended: u64) -> Planned {
        if let Some(kind) = self.replayed(intended) {
            return Planned {
                intended,
                kind,
                row: Planned::NO_ROW,
            };
        }
        match (&self.traffic, &self.io.traffic) {
            (Some(t), Some(w)) => t.plan_unsent(&mut w.borrow_mut(), intended),
            _ => Planned::at(intended),
        }
    }

    /// A timed replay: the log's request of the arrival intended at `intended` (released
    /// arrivals are planned in the order they were released; those passed over, never
    /// queued, are dropped on the way).
    #[inline]
    fn replayed(&self, intended: u64) -> Option<u32> {
        let mut q = self.replay_kinds.as_ref()?.borrow_mut();
        while let Some(&(t, kind)) = q.front() {
            if t > intended {
                break;
            }
            q.pop_front();
            if t == intended {
                return Some(kind);
            }
        }
        None
    }

    /// Counts every queued arrival whose deadline has passed as a timeout.
    fn expire_queued(&self, now: u64) {
        let mut queue = self.queue.borrow_mut();
        while let Some(&t) = queue.front() {
            if t + self.timeout_ns > now {
                break;
            }
            queue.pop_front();
            self.record_failure(self.plan_unsent(t), now, ErrorClass::RequestTimeout);
        }
    }

    /// Queues a released arrival for the next free connection; `false` if the queue is full
    /// even after the arrivals whose deadline has passed are counted as timeouts.
    fn enqueue(&self, intended: u64, now: u64) -> bool {
        if self.queue.borrow().len() >= self.queue_cap {
            self.expire_queued(now);
            if self.queue.borrow().len() >= self.queue_cap {
                self.io.recorder.borrow_mut().unsent_queue_full(intended);
                return false;
            }
        }
        self.queue.borrow_mut().push_back(intended);
        true
    }

    /// Sends the batch on the loop's transport (connecting first if needed), reads the
    /// responses and records everything. Returns `false` if the exchange failed.
    ///
    /// `timer` is the request loop's own deadline timer, moved to this batch's deadline:
    /// deadlines only move later on one loop, and tokio moves a registered timer later
    /// without touching its wheel, where a new `timeout_at` per request registered and
    /// removed an entry every time (about 2 % of a closed-loop worker's CPU in `perf`).
    async fn exchange(
        &self,
        link: &mut Link,
        batch: &[Planned],
        mut timer: Pin<&mut Sleep>,
    ) -> bool {
        let deadline = batch[0].intended + self.timeout_ns;
        let now = self.io.clock.now();
        if now >= deadline {
            for &t in batch {
                self.record_failure(t, now, ErrorClass::RequestTimeout);
            }
            // The arrivals queued behind it are older than the next ones released: those
            // whose deadline has passed too are counted now, not one wake-up each.
            self.expire_queued(now);
            return false;
        }
        let connecting = Cell::new(false);
        let done = Cell::new(0usize);
        let outcome = {
            let mut work =
                std::pin::pin!(link.exchange(&self.io, batch, deadline, &connecting, &done));
            timer.as_mut().reset(self.io.clock.instant(deadline).into());
            match tokio::select! {
                biased;
                done = &mut work => Some(done),
                () = timer => None,
            } {
                Some(done) => Some(done),
                None => {
                    // A paced ring's response may be in, not yet taken: look once more.
                    crate::transport::uring::reap_now();
                    std::future::poll_fn(|cx| match std::future::Future::poll(work.as_mut(), cx) {
                        Poll::Ready(done) => Poll::Ready(Some(done)),
                        Poll::Pending => Poll::Ready(None),
                    })
                    .await
                }
            }
        };
        let failure = match outcome {
            Some(Ok(())) => None,
            Some(Err(class)) => Some(class),
            None if connecting.get() || link.connecting() => Some(ErrorClass::ConnectTimeout),
            None => Some(ErrorClass::RequestTimeout),
        };
        link.settle(failure.is_some(), self.io.cfg.transport.keep_alive());
        if let Some(class) = failure {
            let now = self.io.clock.now();
            for &t in &batch[done.get()..] {
                self.record_failure(t, now, class);
            }
            // The messages sent earlier on a client-streaming call it cut off fail with it.
            if let Some(stream) = link.duplex() {
                for p in stream.take_cut(batch[0]) {
                    self.record_failure(p, now, class);
                }
            }
            return false;
        }
        true
    }

    /// The end of a closed loop's client-streaming calls: the call being sent ends with
    /// the messages it has, and every call ended waits for its reply, each within its
    /// deadline (the open loop's duplex loop does the same itself).
    async fn end_calls(&self, link: &mut Link) {
        let Some(stream) = link.duplex() else {
            return;
        };
        stream.end_call();
        while let Some(last) = stream.oldest_waiting() {
            let due = self.io.clock.instant(last + self.timeout_ns);
            match tokio::time::timeout_at(due.into(), stream.next_duplex()).await {
                Ok(event) => {
                    let connecting = Cell::new(false);
                    stream.take_duplex(&self.io, event, &connecting).await;
                }
                Err(_) => {
                    let now = self.io.clock.now();
                    stream.expire_waiting(now, self.timeout_ns, |p| {
                        self.record_failure(p, now, ErrorClass::RequestTimeout)
                    });
                }
            }
        }
    }

    /// A server stream opened at a rate for `lifetime_ns` (arrival `p`), after the exchange
    /// that waited for its first message (`ok`: it did not fail): takes its messages until
    /// its lifetime, counted from that first message, ends (at most a timeout after the
    /// window's end), then counts how it ended and its stream-seconds, from its intended
    /// open to its end (a broken stream's: to when it was to be reset).
    async fn live_on(&self, link: &mut Link, p: Planned, lifetime_ns: u64, ok: bool) {
        let Link::Http2(l) = link else {
            return;
        };
        let w = self.window;
        let mut seconds = crate::recorder::StreamSeconds::default();
        let first_failed = !ok || self.io.recorder.borrow().failed_last(p.intended);
        // A stream that broke is charged its whole lifetime: the seconds from its last
        // message to when it was to be reset failed, as a held stream that starved fails
        // every second it is held. One that never sent its first message lost all of it.
        let cap = w.end_ns.saturating_add(self.timeout_ns);
        let end = match (first_failed, l.holds_stream()) {
            (false, true) => {
                // Its lifetime counts from its first message, which came in this turn: a
                // stream that waited at the server is still held as long once it flows, so
                // a server short of streams falls behind rather than serving shorter ones.
                // Past the window's end it is held at most a timeout longer, as a first wait
                // is: cut at the window's end, every stream freed the server at once, and the
                // ones still waiting for it got their first message sooner than they would.
                let first = self.io.clock.now();
                let end = first.saturating_add(lifetime_ns).min(cap);
                let ended = l.follow_for_life(&self.io, p, end, self.timeout_ns).await;
                let early = match ended {
                    LifeEnd::Lived => None,
                    LifeEnd::Ended => Some(true),
                    LifeEnd::Broken(last) => {
                        seconds.fail(last, end, w.measure_start_ns, w.end_ns);
                        Some(false)
                    }
                };
                self.io.recorder.borrow_mut().stream_ended(p, early);
                match ended {
                    LifeEnd::Broken(_) => end,
                    LifeEnd::Lived | LifeEnd::Ended => self.io.clock.now(),
                }
            }
            // Answered by an end without a message: the stream is over.
            (false, false) => self.io.clock.now(),
            (true, _) => {
                l.close();
                let now = self.io.clock.now();
                let end = now.max(p.intended.saturating_add(lifetime_ns)).min(cap);
                seconds.fail(p.intended, end, w.measure_start_ns, w.end_ns);
                end
            }
        };
        let mut rec = self.io.recorder.borrow_mut();
        if rec.measured(p.intended) {
            let (held, failed) = seconds.span(p.intended, end, w.measure_start_ns, w.end_ns);
            rec.stream_seconds(held, failed);
        }
    }

    /// Records a request that got no reply. A gRPC client reports a passed deadline as
    /// DEADLINE_EXCEEDED, and so does loadlab.
    fn record_failure(&self, p: Planned, now: u64, class: ErrorClass) {
        let mut rec = self.io.recorder.borrow_mut();
        if class == ErrorClass::RequestTimeout && self.io.cfg.transport.protocol() == Protocol::Grpc
        {
            rec.grpc_error(p, now, GrpcStatus::DeadlineExceeded);
        } else {
            rec.error(p, now, class);
        }
    }
}

/// The request loop of a flow: one session after another (open loop: each arrival released
/// to it; closed loop: a user that starts again as soon as its session ends).
async fn session_task(ctx: Rc<Ctx>, mut conn: crate::session::SessionConn) {
    let mut batch = Vec::with_capacity(1);
    let me = Rc::new(crate::idle::Idler::default());
    while ctx.next_batch(&me, usize::MAX, &mut batch).await {
        let p = batch[0];
        batch.clear();
        let ended = crate::session::run(
            &ctx.io,
            &ctx.wakeups,
            &mut conn,
            p.intended,
            p.row,
            ctx.window.end_ns,
            ctx.timeout_ns,
        )
        .await;
        if matches!(ended, crate::records::Ended::Aborted(_)) {
            // A failure can be synchronous (a refused connect on loopback): let the other
            // tasks of this thread run (over io_uring, with what they queued submitted).
            crate::transport::uring::reap_now();
            tokio::task::yield_now().await;
        }
    }
    ctx.live.set(ctx.live.get() - 1);
    if ctx.live.get() == 0 {
        ctx.finished.notify_one();
    }
}

/// The loop of one bidirectional gRPC stream in open loop: each arrival released to it is
/// sent at once on its stream, whatever is still waiting for a reply (the server sees the
/// rate offered, not one message per round trip), and each message the server sends is
/// the reply to the oldest one waiting, timed from that one's intended send. A message
/// whose deadline passes is counted as timed out where it stands (its reply, if it comes,
/// is passed over, so that the replies after it still go to their own messages). A
/// client-streaming call's loop is the same, its messages sent as they arrive on the call
/// being sent; a call whose last message is sent waits for its reply beside the next one.
async fn duplex_task(ctx: Rc<Ctx>, mut link: Link, slot: usize) {
    let held = &ctx.held[slot];
    let me = Rc::new(crate::idle::Idler::default());
    let stream = link.duplex().expect("spawned for a bidirectional call");
    let mut deadline = std::pin::pin!(tokio::time::sleep_until(
        ctx.io.clock.instant(ctx.window.end_ns).into()
    ));
    // The oldest message's deadline the timer is set to (moved only when that changes).
    let mut armed = None;
    /// What woke the loop.
    enum Woke {
        Reply(crate::transport::http2::link::DuplexEvent),
        Deadline,
        Arrival,
    }
    loop {
        // Every arrival released to this stream goes now.
        loop {
            let next = held.queue.borrow_mut().pop_front();
            let Some(intended) = next else {
                break;
            };
            let Some(p) = ctx.plan(intended) else {
                continue;
            };
            let now = ctx.io.clock.now();
            let due = p.intended + ctx.timeout_ns;
            if now >= due {
                ctx.record_failure(p, now, ErrorClass::RequestTimeout);
                continue;
            }
            // Opening the stream may wait (a connect, the server's stream limit): for this
            // message's deadline at most.
            let connecting = Cell::new(false);
            let sent = tokio::time::timeout_at(
                ctx.io.clock.instant(due).into(),
                stream.send_message(&ctx.io, p, &connecting),
            )
            .await;
            let failure = match sent {
                Ok(Ok(())) => None,
                Ok(Err(class)) => Some(class),
                Err(_) if connecting.get() => Some(ErrorClass::ConnectTimeout),
                Err(_) => Some(ErrorClass::RequestTimeout),
            };
            if let Some(class) = failure {
                ctx.record_failure(p, ctx.io.clock.now(), class);
                crate::transport::uring::reap_now();
                tokio::task::yield_now().await;
            }
        }
        let done = ctx.dispatch_done.get();
        if done {
            // A client-streaming call being sent ends with the run's arrivals.
            stream.end_call();
        }
        if done && !stream.awaiting() {
            break;
        }
        let oldest = stream.oldest_waiting();
        if let Some(t) = oldest.filter(|&t| armed != Some(t)) {
            deadline
                .as_mut()
                .reset(ctx.io.clock.instant(t + ctx.timeout_ns).into());
            armed = Some(t);
        }
        let reply = stream.next_duplex();
        let woke = tokio::select! {
            biased;
            event = reply => Woke::Reply(event),
            () = deadline.as_mut(), if oldest.is_some() => Woke::Deadline,
            () = held.idle.wait(&me), if !done => Woke::Arrival,
        };
        match woke {
            Woke::Reply(event) => {
                let connecting = Cell::new(false);
                stream.take_duplex(&ctx.io, event, &connecting).await;
            }
            Woke::Deadline => {
                let now = ctx.io.clock.now();
                stream.expire_waiting(now, ctx.timeout_ns, |p| {
                    ctx.record_failure(p, now, ErrorClass::RequestTimeout)
                });
            }
            Woke::Arrival => {}
        }
    }
    loop_ended(&ctx, &mut link).await;
}

/// The request loop of one connection (HTTP/1.1; with keep-alive off, one concurrency
/// slot) or one stream slot (HTTP/2).
async fn conn_task(ctx: Rc<Ctx>, mut link: Link, slot: usize) {
    // Closed loop connects every connection up front (as wrk does). Open loop connects on
    // first use, as clients arrive: a burst of pre-connects would overflow a small listen
    // queue and be measured as the server's problem.
    if ctx.io.cfg.transport.keep_alive() && ctx.io.cfg.model == LoadModel::Closed {
        let c0 = ctx.io.clock.now();
        let first = ctx.window.start_ns.max(c0);
        let deadline = ctx.io.clock.instant(first + ctx.timeout_ns);
        if link.preconnect(&ctx.io, deadline.into()).await {
            // The first request waited for this connection past its deadline (a handshake
            // that never completes): without this, a run whose every connection stalls
            // would report nothing attempted.
            let now = ctx.io.clock.now();
            ctx.record_failure(ctx.plan_unsent(first), now, ErrorClass::ConnectTimeout);
        }
    }
    let mut batch = Vec::with_capacity(ctx.io.cfg.transport.pipeline() as usize);
    // Armed for each batch's deadline by `exchange`; never polled before that.
    let mut timer = std::pin::pin!(tokio::time::sleep_until(
        ctx.io.clock.instant(ctx.window.end_ns).into()
    ));
    let me = Rc::new(crate::idle::Idler::default());
    // Server streams opened at a rate: each arrival's stream lives this long.
    let lifetime_ns = ctx
        .io
        .cfg
        .transport
        .stream_lifetime()
        .map_or(0, |d| d.as_nanos() as u64);
    // A held server stream: the seconds in which its waits failed (a starved stream).
    // Streams opened at a rate count their own ([`Ctx::live_on`]).
    let mut starved = (ctx.io.cfg.transport.server_streams() && lifetime_ns == 0)
        .then(crate::recorder::StreamSeconds::default);
    let w = ctx.window;
    while ctx.next_batch(&me, slot, &mut batch).await {
        let ok = ctx.exchange(&mut link, &batch, timer.as_mut()).await;
        if lifetime_ns > 0 {
            ctx.live_on(&mut link, batch[0], lifetime_ns, ok).await;
        }
        if let Some(s) = starved.as_mut() {
            let wait = batch[0].intended;
            if !ok || ctx.io.recorder.borrow().failed_last(wait) {
                s.fail(wait, ctx.io.clock.now(), w.measure_start_ns, w.end_ns);
            }
        }
        if !ok {
            // A failure can be synchronous (EMFILE, EADDRNOTAVAIL, a refused connect on
            // loopback): yield, or this task would starve the others on its thread. Over
            // io_uring, what the others queued goes to the kernel first: a thread kept busy
            // by failing loops never parks, where the ring is otherwise submitted.
            crate::transport::uring::reap_now();
            tokio::task::yield_now().await;
        }
        batch.clear();
    }
    ctx.end_calls(&mut link).await;
    if let Some(s) = starved {
        let (held, failed) = s.counts(ctx.io.clock.now(), w.measure_start_ns, w.end_ns);
        ctx.io.recorder.borrow_mut().stream_seconds(held, failed);
    }
    loop_ended(&ctx, &mut link).await;
}

/// A request loop's end: the first to end with the run counts the held connections
/// (WebSocket, event streams, gRPC streams) open and answering then (those the run held to
/// its end, before the closes at the end free the server for late ones); then its link says
/// goodbye, and the last loop tells the worker.
async fn loop_ended(ctx: &Ctx, link: &mut Link) {
    ctx.io.recorder.borrow_mut().held_at_end(ctx.io.held.get());
    link.finish().await;
    ctx.live.set(ctx.live.get() - 1);
    if ctx.live.get() == 0 {
        ctx.finished.notify_one();
    }
}

//! What a protocol's link needs from its worker ([`Io`]), and requests that vary compiled
//! for one protocol ([`Varying`]): the part of the seam both links and sessions stand on.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use crate::clock::Clock;
use crate::config::RunConfig;
use crate::conn::Connector;
use crate::recorder::{Planned, Recorder};
use crate::traffic::{Traffic, TrafficWorker};

/// How often one request may be re-sent after its server closed without processing it
/// (a server that closes every connection before answering is failing, not closing).
pub(crate) const MAX_RESENDS: u32 = 8;

/// What a worker lends its transports: the run, the clock, the connector and the
/// recorder every reply goes to.
pub(crate) struct Io {
    /// The validated run, shared by every worker.
    pub(crate) cfg: Arc<RunConfig>,
    /// The worker's clock (nanoseconds since the run's epoch).
    pub(crate) clock: Clock,
    /// This worker's recorder.
    pub(crate) recorder: RefCell<Recorder>,
    /// Opens connections (TCP or TLS, from the run's source addresses).
    pub(crate) connector: Connector,
    /// Requests that vary: this worker's drawing state (`None`: one fixed request).
    pub(crate) traffic: Option<RefCell<TrafficWorker>>,
    /// Held connections (WebSocket, event streams) open and answering now.
    pub(crate) held: Rc<Cell<u64>>,
}

impl Io {
    /// This worker's drawing state for requests that vary (a run of one fixed request has
    /// none, and never asks).
    pub(crate) fn drawing(&self) -> std::cell::RefMut<'_, TrafficWorker> {
        self.traffic
            .as_ref()
            .expect("a worker of varying traffic has its drawing state")
            .borrow_mut()
    }
}

/// Whether a reply's `data` holds `expected` (`None` or empty: any reply does).
pub(crate) fn holds(data: &[u8], expected: Option<&[u8]>) -> bool {
    expected.is_none_or(|e| e.is_empty() || data.windows(e.len()).any(|w| w == e))
}

/// How a flow's WebSocket or event-stream step went ([`crate::session`]).
pub(crate) struct FlowReply {
    /// The reply's status (101 for a WebSocket's message, 200 for an event), or the one a
    /// refused upgrade or stream was answered with (4xx, 5xx).
    pub(crate) status: u16,
    /// When the message was sent (or the wait for the server's began).
    pub(crate) sent: u64,
    /// When the reply (or the refusal) arrived.
    pub(crate) done: u64,
    /// This step opened the socket: its upgrade's response headers are new.
    pub(crate) opened: bool,
}

/// One held connection counted in its worker's [`Io::held`] while it lives: made when the
/// connection first answers, dropped with it.
pub(crate) struct HeldMark(Rc<Cell<u64>>);

impl HeldMark {
    /// Counts a connection as held.
    pub(crate) fn new(io: &Io) -> HeldMark {
        io.held.set(io.held.get() + 1);
        HeldMark(io.held.clone())
    }
}

impl Drop for HeldMark {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// Requests that vary, compiled for one protocol: the run's [`Traffic`] and each of its
/// kinds of request in that protocol's form.
pub struct Varying<K> {
    /// What the kinds are and how requests are drawn.
    pub traffic: Arc<Traffic>,
    /// Kind `i` of `traffic`, ready to render.
    pub kinds: Vec<K>,
}

impl<K> Varying<K> {
    /// The compiled kind of request `p`.
    #[inline]
    pub(crate) fn kind(&self, p: Planned) -> &K {
        &self.kinds[p.kind as usize]
    }
}

/// The time a reply's bytes say the server sent it (`CLOCK_REALTIME` ns): the number at
/// `pointer` in their JSON, since the Unix epoch in seconds, milliseconds, microseconds or
/// nanoseconds, told by its magnitude ([`epoch_ns`]); `None` when they are not JSON, have
/// no number there, or a number no such time (`--sent-at`).
pub(crate) fn sent_at_in(data: &[u8], pointer: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_slice(data).ok()?;
    epoch_ns(v.pointer(pointer)?.as_f64()?)
}

/// A time since the Unix epoch in seconds, ms, µs or ns as nanoseconds, its unit told by
/// magnitude: from 1e9 (2001 in seconds) to 1e11 seconds, 1e12 to 1e14 ms, 1e15 to 1e17 µs,
/// 1e18 to 1e20 ns. `None` outside (not a time of this century in any unit).
pub fn epoch_ns(v: f64) -> Option<u64> {
    let ns = match v {
        v if (1e9..1e11).contains(&v) => v * 1e9,
        v if (1e12..1e14).contains(&v) => v * 1e6,
        v if (1e15..1e17).contains(&v) => v * 1e3,
        v if (1e18..1e20).contains(&v) => v,
        _ => return None,
    };
    Some(ns as u64)
}

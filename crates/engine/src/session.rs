//! User sessions ([`crate::traffic::FlowPlan`]): a session sends its flow's steps in order
//! on a connection of its own, each step's request intended at the end of the previous
//! response plus the step's think time, latency counted from that intended time as for
//! independent requests. A session keeps a cookie jar and the variables its extract rules
//! set; a request that fails (no response, a 4xx or 5xx status, or an extract rule that
//! finds nothing) ends its session, counted as aborted by that step. A WebSocket step
//! (`websocket = true`) sends its message on the session's WebSocket
//! ([`crate::transport::ws::flow`]) instead, its reply counted under status 101.
//!
//! The request loop ([`crate::worker`]) hands a session its start (an open-loop arrival, or
//! "now" for a closed-loop user) and its data row; [`run`] does the rest and records every
//! request under its step's name and the session itself in [`crate::records::SessionTotals`].

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::task::{Context, Poll, Waker};

use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;

use loadlab_session::{CookieJar, Vars};

use crate::clock::{PreciseTimer, MIN_WAKE_GAP_NS};
use crate::conn::Conn;
use crate::error::ErrorClass;
use crate::recorder::Planned;
use crate::records::Ended;
use crate::traffic::FlowPlan;
use crate::transport::http1::{Capture, H1Request, ResponseReader, MAX_CAPTURED_BODY};
use crate::transport::io::{FlowReply, Io, Varying, MAX_RESENDS};
use crate::transport::sse::flow::FlowStream;
use crate::transport::ws::flow::{FlowMessage, FlowSocket};

/// Wakes sessions at their steps' intended send times with the precision of the open-loop
/// dispatcher: one timer per worker ([`PreciseTimer`], a timerfd), not tokio's millisecond
/// wheel, whose rounding would be charged to every step's latency. Wake-ups closer than
/// [`MIN_WAKE_GAP_NS`] are served together, as the dispatcher's are. A wait ends with the
/// clock's reading when the timer loop released it, so that a step's schedule lag is
/// measured where an arrival's is: at release, not when its task next runs.
pub(crate) struct Wakeups {
    clock: crate::clock::Clock,
    due: RefCell<BinaryHeap<Reverse<(u64, u64)>>>,
    waits: RefCell<HashMap<u64, Wait>>,
    next_id: Cell<u64>,
    /// The deadline the timer loop sleeps to (`u64::MAX`: none).
    sleeping_to: Cell<u64>,
    kick: Notify,
}

impl Wakeups {
    /// Wake-ups on `clock`.
    pub(crate) fn new(clock: crate::clock::Clock) -> Wakeups {
        Wakeups {
            clock,
            due: RefCell::new(BinaryHeap::new()),
            waits: RefCell::new(HashMap::new()),
            next_id: Cell::new(0),
            sleeping_to: Cell::new(u64::MAX),
            kick: Notify::new(),
        }
    }

    /// Waits until the clock reads `at` (never earlier); ends with the time it was
    /// released.
    pub(crate) fn at(&self, at: u64) -> WakeAt<'_> {
        WakeAt {
            w: self,
            at,
            id: None,
        }
    }

    /// The timer loop: runs for the worker's life (a spawned task, cancelled with it).
    pub(crate) async fn run(&self, timer: Option<PreciseTimer>) {
        let mut last_wake = 0u64;
        loop {
            let next = loop {
                let top = self.due.borrow().peek().map(|r| r.0);
                match top {
                    // An entry whose session stopped waiting: skip it.
                    Some((_, id)) if !self.waits.borrow().contains_key(&id) => {
                        self.due.borrow_mut().pop();
                    }
                    Some((t, _)) => break Some(t),
                    None => break None,
                }
            };
            let Some(t) = next else {
                self.sleeping_to.set(u64::MAX);
                self.kick.notified().await;
                continue;
            };
            let wake_at = t.max(last_wake + MIN_WAKE_GAP_NS);
            self.sleeping_to.set(wake_at);
            if self.clock.now() < wake_at {
                let kicked = async {
                    self.kick.notified().await;
                    true
                };
                let slept = async {
                    match &timer {
                        Some(timer) if timer.sleep_until(wake_at).await.is_ok() => {}
                        _ => {
                            tokio::time::sleep_until(self.clock.instant(wake_at).into()).await;
                        }
                    }
                    false
                };
                tokio::pin!(kicked, slept);
                if tokio::select! { k = &mut kicked => k, k = &mut slept => k } {
                    continue;
                }
                last_wake = self.clock.now();
            }
            let now = self.clock.now();
            let mut due = self.due.borrow_mut();
            let mut waits = self.waits.borrow_mut();
            while let Some(&Reverse((t, id))) = due.peek() {
                if t > now {
                    break;
                }
                due.pop();
                if let Some(wait) = waits.get_mut(&id) {
                    if let Wait::Waiting(w) = std::mem::replace(wait, Wait::Released(now)) {
                        w.wake();
                    }
                }
            }
        }
    }
}

/// A wait's state in [`Wakeups`].
enum Wait {
    Waiting(Waker),
    /// Released by the timer loop at this clock reading.
    Released(u64),
}

/// A wait for [`Wakeups::at`].
pub(crate) struct WakeAt<'a> {
    w: &'a Wakeups,
    at: u64,
    id: Option<u64>,
}

impl std::future::Future for WakeAt<'_> {
    type Output = u64;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
        let w = self.w;
        match self.id {
            Some(id) => {
                let mut waits = w.waits.borrow_mut();
                match waits.get_mut(&id) {
                    Some(Wait::Released(t)) => {
                        let t = *t;
                        waits.remove(&id);
                        self.id = None;
                        return Poll::Ready(t);
                    }
                    Some(Wait::Waiting(waker)) => waker.clone_from(cx.waker()),
                    None => unreachable!("a wait is removed only when it ends"),
                }
            }
            None => {
                let now = w.clock.now();
                if now >= self.at {
                    return Poll::Ready(now);
                }
                let id = w.next_id.get();
                w.next_id.set(id + 1);
                self.id = Some(id);
                w.waits
                    .borrow_mut()
                    .insert(id, Wait::Waiting(cx.waker().clone()));
                w.due.borrow_mut().push(Reverse((self.at, id)));
                if self.at < w.sleeping_to.get() {
                    w.kick.notify_one();
                }
            }
        }
        Poll::Pending
    }
}

impl Drop for WakeAt<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.w.waits.borrow_mut().remove(&id);
        }
    }
}

/// A session request loop's state, reused from one session to the next: its connection,
/// response reader and capture, request buffers, the session's variables and cookies.
pub(crate) struct SessionConn {
    v: std::sync::Arc<Varying<H1Request>>,
    conn: Option<Conn>,
    reader: ResponseReader,
    capture: Capture,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    cookie: Vec<u8>,
    /// A WebSocket step's path, rendered.
    path: String,
    vars: Vars,
    jar: CookieJar,
    /// The session's WebSocket (its WebSocket steps').
    ws: FlowSocket,
    /// The session's event stream (its event-stream steps').
    sse: FlowStream,
}

impl SessionConn {
    /// A loop that sends the flow of `v` (its traffic has a [`FlowPlan`]).
    pub(crate) fn new(v: std::sync::Arc<Varying<H1Request>>) -> SessionConn {
        let vars = Vars::with_names(&flow_of(&v).vars);
        SessionConn {
            v,
            conn: None,
            reader: ResponseReader::new("GET"),
            capture: Capture::new(0),
            buf: Vec::with_capacity(1024),
            scratch: Vec::new(),
            cookie: Vec::new(),
            path: String::new(),
            vars,
            jar: CookieJar::new(),
            ws: FlowSocket::default(),
            sse: FlowStream::default(),
        }
    }
}

fn plan_of(s: &SessionConn) -> &FlowPlan {
    flow_of(&s.v)
}

fn flow_of(v: &Varying<H1Request>) -> &FlowPlan {
    v.traffic
        .flow
        .as_ref()
        .expect("a session loop runs a flow's traffic")
}

/// The request line's target (`/path?query`) in rendered request bytes.
fn request_path(request: &[u8]) -> &str {
    let line = request.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.splitn(3, |&b| b == b' ');
    parts.next();
    parts
        .next()
        .and_then(|p| std::str::from_utf8(p).ok())
        .unwrap_or("/")
}

fn unix_secs() -> u64 {
    loadlab_session::cookie::unix_secs(std::time::SystemTime::now())
}

/// Runs one session from `start` (its first request's intended send time) with data row
/// `row`, until it completes, fails, or its next step is due at or after `window_end`.
/// Records each request and the session.
pub(crate) async fn run(
    io: &Io,
    wakeups: &Wakeups,
    s: &mut SessionConn,
    start: u64,
    row: u32,
    window_end: u64,
    timeout_ns: u64,
) -> Ended {
    let measured = io.recorder.borrow().measured(start);
    if measured {
        io.recorder.borrow_mut().session_started();
    }
    let ended = walk(io, wakeups, s, start, row, window_end, timeout_ns).await;
    // A user leaves: the next session is another user, with cookies and variables of its
    // own, and (unless the flow reuses connections) a connection of its own.
    if plan_of(s).flow.connection() == loadlab_session::Connection::PerSession {
        s.conn = None;
    }
    s.ws.finish().await;
    s.sse.close();
    s.jar.clear();
    s.vars.clear();
    if measured {
        io.recorder.borrow_mut().session_ended(ended);
    }
    ended
}

async fn walk(
    io: &Io,
    wakeups: &Wakeups,
    s: &mut SessionConn,
    start: u64,
    row: u32,
    window_end: u64,
    timeout_ns: u64,
) -> Ended {
    let v = s.v.clone();
    let plan = flow_of(&v);
    let flow = &plan.flow;
    let secure = io.cfg.target.scheme == crate::config::Scheme::Https;
    let mut position = loadlab_session::Position::default();
    let mut intended = start;
    let mut active_ns = 0u64;
    let mut last_done = start;
    let w = io
        .traffic
        .as_ref()
        .expect("a worker of a flow has its drawing state");
    loop {
        let Some(step) = flow.at(position) else {
            return Ended::Completed {
                duration_ns: last_done.saturating_sub(start),
                active_ns,
            };
        };
        if intended >= window_end {
            // The user is still thinking when the window ends: the session is running then
            // (and a closed-loop user starts no new one before the end).
            if io.clock.now() < window_end {
                wakeups.at(window_end).await;
            }
            return Ended::Running;
        }
        let mut now = io.clock.now();
        if now < intended {
            now = wakeups.at(intended).await;
        }
        if position != loadlab_session::Position::default() {
            // A step after think time: how late it is released is schedule lag, measured
            // as an arrival's is by the dispatcher (the first step's was, when the
            // dispatcher released it).
            io.recorder.borrow_mut().lag(intended, now);
        }
        let p = Planned {
            intended,
            kind: step.id as u32,
            row,
        };
        let deadline = intended + timeout_ns;
        if now >= deadline {
            // An arrival that waited for a free loop past its deadline.
            io.recorder
                .borrow_mut()
                .error(p, now, ErrorClass::RequestTimeout);
            return Ended::Aborted(step.id);
        }
        if step.step.websocket || step.step.sse {
            let reply = plan.replies[step.id].as_ref();
            let sse = step.step.sse;
            let outcome = match tokio::time::timeout_at(
                io.clock.instant(deadline).into(),
                stream_step(io, s, p, reply, secure, sse),
            )
            .await
            {
                Ok(r) => r,
                Err(_) => Err(if s.ws.is_open() || s.sse.is_open() {
                    ErrorClass::RequestTimeout
                } else {
                    ErrorClass::ConnectTimeout
                }),
            };
            let x = match outcome {
                Ok(x) => x,
                Err(class) => {
                    s.ws.drop_socket();
                    s.sse.close();
                    io.recorder.borrow_mut().error(p, io.clock.now(), class);
                    return Ended::Aborted(step.id);
                }
            };
            let mut rec = io.recorder.borrow_mut();
            if x.status >= 400 {
                rec.response(p, x.sent, x.done, x.status);
                return Ended::Aborted(step.id);
            }
            if x.opened {
                let now_s = unix_secs();
                for (name, value) in s.ws.headers() {
                    if name.eq_ignore_ascii_case("set-cookie") {
                        // A cookie the jar refuses is dropped, as a browser drops it.
                        let _ = s.jar.store(value, &io.cfg.target.host, &s.path, now_s);
                    }
                }
            }
            let (headers, reply) = if sse {
                (&[][..], s.sse.reply())
            } else {
                (s.ws.headers(), s.ws.reply())
            };
            if !step.step.extract.is_empty()
                && loadlab_session::apply_all(&step.step.extract, headers, reply, &mut s.vars)
                    .is_err()
            {
                rec.failed_response(p, x.sent, x.done, x.status, ErrorClass::ExtractFailed);
                return Ended::Aborted(step.id);
            }
            rec.response(p, x.sent, x.done, x.status);
            drop(rec);
            active_ns += x.done.saturating_sub(intended);
            last_done = x.done;
            let think = flow.think_after(step.step).sample(w.borrow_mut().gen.rng());
            intended = x.done + think;
            position = flow.advance(position);
            continue;
        }
        let kind = v.kind(p);
        // The request: its templates with this session's row and variables, and the jar's
        // cookies for its path.
        s.buf.clear();
        {
            let draw = v.traffic.draw(p).with_vars(s.vars.values());
            let mut tw = w.borrow_mut();
            kind.render(&draw, &mut tw.gen, &mut s.buf, &mut s.scratch);
        }
        if !s.jar.is_empty() {
            s.cookie.clear();
            s.cookie.extend_from_slice(b"Cookie: ");
            let path = request_path(&s.buf);
            if s.jar.write_header(
                &io.cfg.target.host,
                path,
                secure,
                unix_secs(),
                &mut s.cookie,
            ) > 0
            {
                s.cookie.extend_from_slice(b"\r\n");
                kind.insert_header(&mut s.buf, &s.scratch, &s.cookie);
            }
        }
        let capture_body = plan.captures[step.id];
        s.capture
            .keep_body(if capture_body { MAX_CAPTURED_BODY } else { 0 });
        s.reader.expect_head(kind.head_request);
        let idempotent = crate::config::values::idempotent(&v.traffic.kind(p).method);
        let exchange = exchange(io, s, p, idempotent);
        let outcome =
            match tokio::time::timeout_at(io.clock.instant(deadline).into(), exchange).await {
                Ok(r) => r,
                Err(_) => Err(if s.conn.is_none() {
                    ErrorClass::ConnectTimeout
                } else {
                    ErrorClass::RequestTimeout
                }),
            };
        let (status, sent, done) = match outcome {
            Ok(x) => x,
            Err(class) => {
                s.conn = None;
                io.recorder.borrow_mut().error(p, io.clock.now(), class);
                return Ended::Aborted(step.id);
            }
        };
        let mut rec = io.recorder.borrow_mut();
        if status >= 400 {
            rec.response(p, sent, done, status);
            return Ended::Aborted(step.id);
        }
        let now_s = if s.capture.all("set-cookie").next().is_some() {
            unix_secs()
        } else {
            0
        };
        if now_s > 0 {
            let path = request_path(&s.buf);
            for value in s.capture.all("set-cookie") {
                // A cookie the jar refuses (too large, another domain) is dropped, as a
                // browser drops it.
                let _ = s.jar.store(value, &io.cfg.target.host, path, now_s);
            }
        }
        if !step.step.extract.is_empty() {
            let body = s.capture.body();
            if loadlab_session::apply_all(&step.step.extract, &s.capture, body, &mut s.vars)
                .is_err()
            {
                rec.failed_response(p, sent, done, status, ErrorClass::ExtractFailed);
                return Ended::Aborted(step.id);
            }
        }
        rec.response(p, sent, done, status);
        drop(rec);
        active_ns += done.saturating_sub(intended);
        last_done = done;
        let think = flow.think_after(step.step).sample(w.borrow_mut().gen.rng());
        intended = done + think;
        position = flow.advance(position);
    }
}

/// A WebSocket or event-stream step: its path, headers, message (or request) and reply
/// text rendered with this session's row and variables, the jar's cookies for its path,
/// then the exchange on the session's socket or stream.
async fn stream_step(
    io: &Io,
    s: &mut SessionConn,
    p: Planned,
    reply: Option<&loadlab_template::Template>,
    secure: bool,
    sse: bool,
) -> Result<FlowReply, ErrorClass> {
    if sse {
        sse_step(io, s, p, reply, secure).await
    } else {
        ws_step(io, s, p, reply, secure).await
    }
}

/// An event-stream step: the request rendered as an HTTP step's is (with the jar's
/// cookies, and `Accept: text/event-stream` unless the step names an `Accept`), the reply's
/// text into `scratch`, then the wait on the session's stream.
async fn sse_step(
    io: &Io,
    s: &mut SessionConn,
    p: Planned,
    reply: Option<&loadlab_template::Template>,
    secure: bool,
) -> Result<FlowReply, ErrorClass> {
    let v = s.v.clone();
    let kind = v.kind(p);
    s.buf.clear();
    s.scratch.clear();
    let mut expected = Vec::new();
    {
        let w = io
            .traffic
            .as_ref()
            .expect("a worker of a flow has its drawing state");
        let mut tw = w.borrow_mut();
        let draw = v.traffic.draw(p).with_vars(s.vars.values());
        kind.render(&draw, &mut tw.gen, &mut s.buf, &mut s.scratch);
        if let Some(r) = reply {
            r.render(&draw, &mut tw.gen, &mut expected);
        }
    }
    s.path.clear();
    s.path.push_str(request_path(&s.buf));
    let cookie = !s.jar.is_empty() && {
        s.cookie.clear();
        s.cookie.extend_from_slice(b"Cookie: ");
        s.jar.write_header(
            &io.cfg.target.host,
            &s.path,
            secure,
            unix_secs(),
            &mut s.cookie,
        ) > 0
    };
    if cookie {
        s.cookie.extend_from_slice(b"\r\n");
        kind.insert_header(&mut s.buf, &s.scratch, &s.cookie);
    }
    let accept = v
        .traffic
        .kind(p)
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("accept"));
    if !accept {
        kind.insert_header(&mut s.buf, &s.scratch, b"Accept: text/event-stream\r\n");
    }
    let expected = reply.map(|_| expected.as_slice());
    s.sse.exchange(io, &s.path, &s.buf, expected).await
}

/// A WebSocket step: its path, headers, message and reply text rendered with this
/// session's row and variables (into the session's buffers: `path`, `buf` the message,
/// `scratch` the reply's text), the jar's cookies for its path, then the exchange on the
/// session's socket.
async fn ws_step(
    io: &Io,
    s: &mut SessionConn,
    p: Planned,
    reply: Option<&loadlab_template::Template>,
    secure: bool,
) -> Result<FlowReply, ErrorClass> {
    let v = s.v.clone();
    let kind = v.traffic.kind(p);
    let mut headers = Vec::with_capacity(kind.headers.len());
    let mut path = Vec::new();
    s.buf.clear();
    s.scratch.clear();
    {
        let w = io
            .traffic
            .as_ref()
            .expect("a worker of a flow has its drawing state");
        let mut tw = w.borrow_mut();
        let draw = v.traffic.draw(p).with_vars(s.vars.values());
        kind.path.render(&draw, &mut tw.gen, &mut path);
        for (name, value) in &kind.headers {
            let mut out = Vec::new();
            value.render(&draw, &mut tw.gen, &mut out);
            headers.push((name.clone(), out));
        }
        kind.body.render(&draw, &mut tw.gen, &mut s.buf);
        if let Some(r) = reply {
            r.render(&draw, &mut tw.gen, &mut s.scratch);
        }
    }
    s.path.clear();
    s.path.push_str(&String::from_utf8_lossy(&path));
    s.cookie.clear();
    let cookie = !s.jar.is_empty()
        && s.jar.write_header(
            &io.cfg.target.host,
            &s.path,
            secure,
            unix_secs(),
            &mut s.cookie,
        ) > 0;
    let m = FlowMessage {
        path: &s.path,
        headers: &headers,
        cookie: cookie.then_some(s.cookie.as_slice()),
        message: &s.buf,
        expected: reply.map(|_| s.scratch.as_slice()),
    };
    s.ws.exchange(io, p, m).await
}

/// Sends the session's rendered request (connecting first if its connection is gone) and
/// reads its response into the capture: (status, sent, done). A kept-alive connection
/// the server closed while the session thought is reopened and the request sent again
/// (idempotent methods only, at most [`MAX_RESENDS`] times).
async fn exchange(
    io: &Io,
    s: &mut SessionConn,
    p: Planned,
    idempotent: bool,
) -> Result<(u16, u64, u64), ErrorClass> {
    let mut resends = 0;
    loop {
        let reused = s.conn.is_some();
        if s.conn.is_none() {
            let c0 = io.clock.now();
            let c = io.connector.connect().await?;
            io.recorder.borrow_mut().connect(io.clock.now() - c0);
            s.reader.reset();
            s.conn = Some(c);
        }
        let c = s.conn.as_mut().expect("connected above");
        if reused && s.reader.unsolicited(c, false) {
            s.conn = None;
            return Err(ErrorClass::MalformedResponse);
        }
        let sent = io.clock.now();
        let written = c.write_all(&s.buf).await;
        let read = match written {
            Ok(()) => s.reader.read_captured(c, &mut s.capture).await,
            Err(e) => Err(ErrorClass::from_io(&e, false)),
        };
        match read {
            Ok(meta) => {
                let now = io.clock.now();
                let done = c
                    .received_at()
                    .map_or(now, |at| io.clock.from_realtime(at, sent, now));
                if meta.close || !io.cfg.transport.keep_alive() {
                    s.conn = None;
                }
                return Ok((meta.status, sent, done));
            }
            // An idle kept-alive connection the server closed (or reset) before any byte of
            // the response: the request was never processed.
            Err(ErrorClass::ConnectionClosed | ErrorClass::ConnectionReset)
                if reused && !s.reader.began() && idempotent && resends < MAX_RESENDS =>
            {
                s.conn = None;
                resends += 1;
                io.recorder.borrow_mut().resent(p.intended);
            }
            Err(class) => {
                s.conn = None;
                return Err(class);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use std::rc::Rc;

    /// Waits end no earlier than asked, in order, each with the time the timer loop
    /// released it (the lag the session records), and a wait given up does not hold
    /// back the others.
    #[test]
    fn waits_end_at_their_time_with_the_time_they_were_released() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let clock = Clock::new();
            let w = Rc::new(Wakeups::new(clock));
            let timer = PreciseTimer::new(clock).ok();
            let looped = w.clone();
            let timer_loop = tokio::task::spawn_local(async move { looped.run(timer).await });
            let ms = 1_000_000;
            let t0 = clock.now();
            let mut ends = Vec::new();
            for (i, after) in [(0u64, 3 * ms), (1, ms), (2, 5 * ms)] {
                let w = w.clone();
                ends.push(tokio::task::spawn_local(async move {
                    let at = t0 + after;
                    let released = w.at(at).await;
                    (i, at, released, clock.now())
                }));
            }
            // A wait given up before it is due.
            {
                let gone = w.at(t0 + 2 * ms);
                let _ = tokio::time::timeout(std::time::Duration::from_micros(100), gone).await;
            }
            // A wait already due ends at once, with the time it was asked.
            let before = clock.now();
            let past = w.at(t0).await;
            assert!(past >= before && past <= clock.now());
            for e in ends {
                let (i, at, released, after) = e.await.unwrap();
                assert!(released >= at, "wait {i} released {released} before {at}");
                assert!(released <= after, "wait {i}: released after it ran");
            }
            assert!(w.waits.borrow().is_empty(), "every wait removed");
            timer_loop.abort();
        });
    }
}

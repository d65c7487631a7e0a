//! An HTTP/2 stream slot: one request at a time as a stream on the connection the slot is
//! bound to, opened by the first slot that needs it and shared with the others; streams
//! the server never processed are sent again on a new connection.

use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use loadlab_grpc::GrpcStatus;
use tokio::time::Instant;

use super::client::{self, Client, Next, StreamFailure};
use super::{H2Conn, H2Request, Live, Template, TimeoutCache};
use crate::error::ErrorClass;
use crate::recorder::Planned;
use crate::transport::io::{epoch_ns, HeldMark, Io, Varying, MAX_RESENDS};

/// What a stream slot sends.
pub(crate) enum H2Source {
    /// The same request every time.
    Fixed(Arc<Template>),
    /// Requests that vary, rendered per request.
    Varying(Arc<Varying<H2Request>>),
    /// A streaming call whose request message varies: the call as the template says, each
    /// message (a server stream's one request) rendered as it is sent.
    Stream(Arc<Template>, Arc<Varying<H2Request>>),
}

/// One request loop's stream slot and what its streams send.
pub(crate) struct Http2Link {
    source: H2Source,
    /// The connection this slot sends on, and the live one it last used.
    conn: Rc<H2Conn>,
    cached: Option<Live>,
    timeouts: TimeoutCache,
    /// A rendered value before it becomes the request's (varying requests).
    scratch: Vec<u8>,
    /// The stream whose response came before its body was all sent: the slot waits for
    /// that body before its next request ([`Http2Link::finish_body`]).
    sending: Option<(Rc<Client>, u32)>,
    /// A server-streaming or bidirectional call's stream, held open across exchanges.
    held: Option<HeldStream>,
    /// A bidirectional call: the messages sent on the held stream and not answered yet,
    /// oldest first (each message the server sends answers the oldest). A client-streaming
    /// call: the messages sent on the call being sent.
    waiting: VecDeque<Waiting>,
    /// Client-streaming calls whose messages are all sent, waiting for the server's reply.
    calls: Vec<Call>,
    /// Client-streaming messages a failure cut off, for the request loop to count
    /// ([`Http2Link::take_cut`]).
    cut: Vec<Planned>,
}

/// A client-streaming call whose request side has ended, waiting for its one reply.
struct Call {
    stream: HeldStream,
    /// Its messages, in the order sent.
    messages: Vec<Waiting>,
    /// The intended send of its last message: the reply is timed from it.
    last: u64,
    /// When the reply message came (the trailers that follow say its status).
    answered: Option<u64>,
    /// Times its messages were sent again on a new stream.
    resends: u32,
}

/// A message sent on a bidirectional stream, waiting for its reply.
#[derive(Clone)]
struct Waiting {
    p: Planned,
    /// Its frame as sent (sent again as it was if the server never processed its stream).
    body: Bytes,
    /// The number its request holds at `--match-field` (a reply echoing it answers it).
    key: Option<f64>,
    /// When it was sent (queued to the connection).
    sent: u64,
    /// Its deadline passed and it was counted as timed out: its reply, if it comes, is
    /// only passed over (so that the next reply goes to the next message).
    expired: bool,
    /// Times it was sent again after a stream the server never processed.
    resends: u32,
}

/// What a bidirectional stream, or one of a client-streaming call, did next
/// ([`Http2Link::next_duplex`]).
pub(crate) struct DuplexEvent {
    client: Rc<Client>,
    id: u32,
    event: Result<Next, StreamFailure>,
}

impl DuplexEvent {
    /// Whether it happened on `stream`.
    fn on(&self, stream: &HeldStream) -> bool {
        self.id == stream.id && Rc::ptr_eq(&self.client, &stream.client)
    }
}

/// How a stream opened at a rate ended after its first message
/// ([`Http2Link::follow_for_life`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LifeEnd {
    /// Held to its end (its lifetime, or the window's end) and reset.
    Lived,
    /// The server ended it with OK before then.
    Ended,
    /// It broke before then: no message for the timeout since the last one (at `.0`), an
    /// error status, a reset or a lost connection.
    Broken(u64),
}

/// A server stream a slot holds: each exchange takes its next message.
struct HeldStream {
    client: Rc<Client>,
    /// The connection's generation it was opened on.
    generation: u64,
    id: u32,
    /// Messages taken on it.
    messages: u64,
    /// When loadlab began to open it (its time to first message counts from here).
    opening: u64,
    /// Messages sent on it (a client-streaming call's).
    sent: u32,
    /// Counts the stream as held once a message came on it.
    mark: Option<HeldMark>,
}

impl Drop for HeldStream {
    /// A stream let go before its end (a message's deadline passed, the run is over) is
    /// reset; one that ended is forgotten already.
    fn drop(&mut self) {
        self.client.cancel(self.id);
    }
}

/// One request's parts, rendered once so that a stream sent again is the same request.
struct Rendered {
    /// The header block (a gRPC call's `grpc-timeout` is added per attempt).
    head: Vec<u8>,
    body: Option<Bytes>,
    /// A gRPC call: `grpc-timeout` is added as it is sent, the reply read as gRPC.
    grpc: bool,
}

impl Http2Link {
    /// A slot on `conn` that sends what `source` holds.
    pub(crate) fn new(source: H2Source, conn: Rc<H2Conn>) -> Http2Link {
        Http2Link {
            source,
            conn,
            cached: None,
            timeouts: TimeoutCache::default(),
            scratch: Vec::new(),
            sending: None,
            held: None,
            waiting: VecDeque::new(),
            calls: Vec::new(),
            cut: Vec::new(),
        }
    }

    /// Lets a server stream go (after a failure: its next message would be charged to the
    /// wrong wait). The messages of client-streaming calls it cuts off are kept for
    /// [`Http2Link::take_cut`].
    pub(crate) fn close(&mut self) {
        self.held = None;
        if self.messages_per_call().is_some() {
            let calls = std::mem::take(&mut self.calls);
            let cut = calls.iter().flat_map(|c| c.messages.iter());
            self.cut.extend(
                self.waiting
                    .iter()
                    .chain(cut)
                    .filter(|w| !w.expired)
                    .map(|w| w.p),
            );
        }
        self.waiting.clear();
    }

    /// The messages of client-streaming calls [`Http2Link::close`] cut off, but for
    /// `except` (the request whose failure closed it, counted by its loop).
    pub(crate) fn take_cut(&mut self, except: Planned) -> Vec<Planned> {
        let mut cut = std::mem::take(&mut self.cut);
        cut.retain(|p| *p != except);
        cut
    }

    /// The call every stream makes (`None`: requests that vary, each its own).
    fn template(&self) -> Option<&Arc<Template>> {
        match &self.source {
            H2Source::Fixed(t) | H2Source::Stream(t, _) => Some(t),
            H2Source::Varying(_) => None,
        }
    }

    /// A client-streaming call's messages ([`Template::messages_per_call`]).
    fn messages_per_call(&self) -> Option<u32> {
        self.template().and_then(|t| t.messages_per_call())
    }

    /// Whether the slot sends a server-streaming call.
    fn streaming(&self) -> bool {
        self.template().is_some_and(|t| t.is_streaming())
    }

    /// The request message `p` sends on a stream: the call's own, or rendered for `p`
    /// from the request's templates and data.
    fn message(&mut self, io: &Io, p: Planned) -> Bytes {
        match &self.source {
            H2Source::Stream(_, v) => {
                let mut w = io.drawing();
                let draw = v.traffic.draw(p);
                v.kind(p).render_body(&draw, &mut w.gen, &mut self.scratch)
            }
            H2Source::Fixed(t) => t.body().cloned().unwrap_or_default(),
            H2Source::Varying(_) => unreachable!("a stream's call is fixed"),
        }
    }

    /// A server-streaming call: waits for the held stream's next message (opening the
    /// stream first if none is held, and again when the server ends it with `OK`) and
    /// records it as a reply whose latency is the wait: the first message's is the time to
    /// first message (connection, stream and message), every later one's the gap since the
    /// message before. A stream the server ends with another status ends this wait with
    /// that status; one it never processed is opened again.
    async fn next_message(
        &mut self,
        io: &Io,
        p: Planned,
        connecting: &Cell<bool>,
    ) -> Result<(), ErrorClass> {
        let template = self.template().expect("a streaming call").clone();
        let sent = io.clock.now();
        let mut reopened = 0;
        loop {
            if self.held.is_none() {
                let request = self.message(io, p);
                self.held = Some(self.open_held(io, &template, &request, connecting).await?);
            }
            let h = self.held.as_mut().expect("held above");
            // A message that answers the wait: the stream's first, or a gap after the last.
            let (first, since) = if h.messages == 0 {
                (true, h.opening)
            } else {
                (false, sent)
            };
            let client = h.client.clone();
            let id = h.id;
            let next = std::future::poll_fn(|cx| client.poll_message(id, cx)).await;
            let now = io.clock.now();
            match next {
                Ok(Next::Message) => {
                    h.messages += 1;
                    if h.mark.is_none() {
                        h.mark = Some(HeldMark::new(io));
                    }
                    let mut rec = io.recorder.borrow_mut();
                    rec.grpc_reply(p, sent, now, GrpcStatus::Ok);
                    rec.stream_message(p, now.saturating_sub(since), first);
                    if template.sent_at().is_some() {
                        // When the message says the server sent it (`--sent-at`).
                        let at = client.take_value(id)[0].and_then(epoch_ns);
                        rec.server_delay(p, io.clock.realtime_ns(now), at);
                    }
                    return Ok(());
                }
                Ok(Next::End(reply)) => {
                    let messages = h.messages;
                    self.held = None;
                    let mut rec = io.recorder.borrow_mut();
                    match (reply.status, reply.grpc_status()) {
                        // A stream opened at a rate that the server ended before its first
                        // message: answered, empty.
                        (200, Some(code)) if code.is_ok() && template.lifetime_ns() > 0 => {
                            rec.grpc_reply(p, sent, now, code);
                            rec.server_close(0);
                            return Ok(());
                        }
                        // The server ended the stream: open it again, within this wait.
                        (200, Some(code)) if code.is_ok() => {
                            rec.server_close(messages);
                            drop(rec);
                            reopened += 1;
                            if reopened > MAX_RESENDS {
                                return Err(ErrorClass::ConnectionClosed);
                            }
                        }
                        (200, Some(code)) => {
                            rec.grpc_reply(p, sent, now, code);
                            return Ok(());
                        }
                        (200, None) => return Err(ErrorClass::MalformedResponse),
                        (status, _) => {
                            rec.response(p, sent, now, status);
                            return Ok(());
                        }
                    }
                }
                Err(StreamFailure::Unprocessed) if reopened < MAX_RESENDS => {
                    self.conn.invalidate(h.generation);
                    self.held = None;
                    reopened += 1;
                    io.recorder.borrow_mut().resent(p.intended);
                }
                Err(StreamFailure::Unprocessed) => {
                    self.held = None;
                    return Err(ErrorClass::StreamReset);
                }
                Err(StreamFailure::Failed(class)) => {
                    self.held = None;
                    return Err(class);
                }
            }
        }
    }

    /// Whether the slot holds a server stream.
    pub(crate) fn holds_stream(&self) -> bool {
        self.held.is_some()
    }

    /// A stream opened at a rate, after its first message (taken by
    /// [`Http2Link::exchange`]): takes every message that follows until `end` (its
    /// lifetime's end, or the window's), each recorded as a gap of `p`'s stream, then
    /// resets it. The wait in flight at `end` is cut, not counted; a wait longer than
    /// `timeout_ns` breaks the stream (starved). The slot holds no stream afterwards.
    pub(crate) async fn follow_for_life(
        &mut self,
        io: &Io,
        p: Planned,
        end: u64,
        timeout_ns: u64,
    ) -> LifeEnd {
        let Some(h) = self.held.take() else {
            return LifeEnd::Ended;
        };
        let reads_sent_at = self.template().is_some_and(|t| t.sent_at().is_some());
        let (client, id) = (h.client.clone(), h.id);
        let mut messages = h.messages;
        let mut last = io.clock.now();
        // Dropping `h` at the end resets a stream still open.
        let _held = h;
        loop {
            let due = last.saturating_add(timeout_ns).min(end);
            let next = tokio::time::timeout_at(
                io.clock.instant(due).into(),
                std::future::poll_fn(|cx| client.poll_message(id, cx)),
            )
            .await;
            let now = io.clock.now();
            match next {
                Err(_elapsed) if due == end => return LifeEnd::Lived,
                Err(_elapsed) => return LifeEnd::Broken(last),
                Ok(Ok(Next::Message)) => {
                    messages += 1;
                    let mut rec = io.recorder.borrow_mut();
                    rec.stream_message(p, now.saturating_sub(last), false);
                    if reads_sent_at {
                        let at = client.take_value(id)[0].and_then(epoch_ns);
                        rec.server_delay(p, io.clock.realtime_ns(now), at);
                    }
                    last = now;
                }
                Ok(Ok(Next::End(reply))) => {
                    return match (reply.status, reply.grpc_status()) {
                        (200, Some(code)) if code.is_ok() => {
                            io.recorder.borrow_mut().server_close(messages);
                            LifeEnd::Ended
                        }
                        _ => LifeEnd::Broken(last),
                    };
                }
                Ok(Err(_failure)) => return LifeEnd::Broken(last),
            }
        }
    }

    /// Opens the stream a streaming call holds (on the slot's live connection, once the
    /// server's stream limit allows), with no `grpc-timeout`: the call lasts as long as the
    /// stream, each message has the run's timeout. A server-streaming call sends `request`
    /// on it and ends its side; the others send their messages as they come.
    async fn open_held(
        &mut self,
        io: &Io,
        template: &Template,
        request: &Bytes,
        connecting: &Cell<bool>,
    ) -> Result<HeldStream, ErrorClass> {
        let opening = io.clock.now();
        let (generation, client) = self.live(io, connecting).await?;
        std::future::poll_fn(|cx| client.poll_capacity(cx))
            .await
            .map_err(|f| {
                self.conn.invalidate(generation);
                match f {
                    StreamFailure::Failed(class) => class,
                    StreamFailure::Unprocessed => ErrorClass::StreamReset,
                }
            })?;
        let id = if template.sends_messages() {
            client.open_duplex(template.head())
        } else {
            let id = client.open(template.head(), |_| {}, Some(request), true);
            client.follow_messages(id);
            id
        };
        if let Some(fields) = template.taps() {
            client.tap_messages(id, fields);
        }
        self.cached = Some((generation, client.clone()));
        Ok(HeldStream {
            client,
            generation,
            id,
            messages: 0,
            opening,
            sent: 0,
            mark: None,
        })
    }

    /// Whether the slot sends a bidirectional or client-streaming call (messages sent as
    /// they come on a stream held).
    pub(crate) fn duplex(&self) -> bool {
        self.template().is_some_and(|t| t.sends_messages())
    }

    /// A bidirectional or client-streaming call: sends message `p` on the held stream
    /// (opening it first if none is held); its reply is the one
    /// [`Http2Link::take_duplex`] matches to it (a client-streaming call's, once its last
    /// message is sent and its side ended). A message the server's window holds back goes
    /// as the window opens: its wait is in its latency, and it is counted as a stall.
    pub(crate) async fn send_message(
        &mut self,
        io: &Io,
        p: Planned,
        connecting: &Cell<bool>,
    ) -> Result<(), ErrorClass> {
        let body = self.message(io, p);
        self.send_again(io, p, body, 0, connecting).await
    }

    /// [`Http2Link::send_message`] of a message (its frame `body`) already sent `resends`
    /// times.
    async fn send_again(
        &mut self,
        io: &Io,
        p: Planned,
        body: Bytes,
        resends: u32,
        connecting: &Cell<bool>,
    ) -> Result<(), ErrorClass> {
        let template = self.template().expect("a streaming call").clone();
        let per_call = template.messages_per_call();
        // The number a reply will echo (the frame's 5-byte prefix, then the message).
        let key = template
            .match_field()
            .and_then(|m| m.request.read(body.get(5..)?));
        for _ in 0..2 {
            if self.held.is_none() {
                let none = Bytes::new();
                self.held = Some(self.open_held(io, &template, &none, connecting).await?);
            }
            let h = self.held.as_mut().expect("held above");
            match h.client.send(h.id, &body) {
                Ok(held_back) => {
                    if held_back {
                        io.recorder.borrow_mut().window_stall(p.intended);
                    }
                    self.waiting.push_back(Waiting {
                        p,
                        body,
                        key,
                        sent: io.clock.now(),
                        expired: false,
                        resends,
                    });
                    if let Some(per_call) = per_call {
                        h.sent += 1;
                        if h.sent >= per_call {
                            self.end_call();
                        }
                    }
                    return Ok(());
                }
                // The stream ended: take its end (what the messages waiting on it get),
                // then send this one on a new stream.
                Err(_) => {
                    let h = self.held.as_ref().expect("held above");
                    let (client, id) = (h.client.clone(), h.id);
                    let waker = std::task::Waker::noop();
                    let cx = std::task::Context::from_waker(waker);
                    // The messages it sent before its end, then the end itself.
                    while let std::task::Poll::Ready(event) = client.poll_message(id, &cx) {
                        let ended = !matches!(event, Ok(Next::Message));
                        let event = DuplexEvent {
                            client: client.clone(),
                            id,
                            event,
                        };
                        Box::pin(self.take_duplex(io, event, connecting)).await;
                        if ended {
                            break;
                        }
                    }
                    // A client-streaming call's end went to its call; a reply that ended
                    // nothing leaves the stream to let go.
                    if self.held.as_ref().is_some_and(|h| h.id == id) {
                        self.held = None;
                    }
                }
            }
        }
        Err(ErrorClass::StreamReset)
    }

    /// The next thing the held stream, or a client-streaming call waiting for its reply,
    /// does (pending forever when there is none): for [`Http2Link::take_duplex`].
    pub(crate) fn next_duplex(&self) -> impl std::future::Future<Output = DuplexEvent> + use<> {
        let held = self.held.as_ref().map(|h| (h.client.clone(), h.id));
        // Empty (no allocation) but for client-streaming calls.
        let calls: Vec<(Rc<Client>, u32)> = self
            .calls
            .iter()
            .map(|c| (c.stream.client.clone(), c.stream.id))
            .collect();
        async move {
            if held.is_none() && calls.is_empty() {
                return std::future::pending().await;
            }
            std::future::poll_fn(|cx| {
                for (client, id) in held.iter().chain(calls.iter()) {
                    if let std::task::Poll::Ready(event) = client.poll_message(*id, cx) {
                        return std::task::Poll::Ready(DuplexEvent {
                            client: client.clone(),
                            id: *id,
                            event,
                        });
                    }
                }
                std::task::Poll::Pending
            })
            .await
        }
    }

    /// Whether a message sent still waits, in time, for its reply (an expired one's reply
    /// is only passed over if it comes); a client-streaming call being sent, or ended and
    /// not answered yet, waits.
    pub(crate) fn awaiting(&self) -> bool {
        if self.messages_per_call().is_some() {
            return !self.waiting.is_empty() || !self.calls.is_empty();
        }
        self.waiting.iter().any(|w| !w.expired)
    }

    /// The intended send time of the oldest message still waiting in time for its reply
    /// (of client-streaming calls, the last message of the oldest call ended: a call being
    /// sent has no deadline yet).
    pub(crate) fn oldest_waiting(&self) -> Option<u64> {
        if self.messages_per_call().is_some() {
            return self.calls.iter().map(|c| c.last).min();
        }
        self.waiting
            .iter()
            .find(|w| !w.expired)
            .map(|w| w.p.intended)
    }

    /// A client-streaming call being sent ends here: its side is ended after the messages
    /// sent (its last message sent, or the run is over), and it waits for its reply.
    pub(crate) fn end_call(&mut self) {
        if self.messages_per_call().is_none() || self.waiting.is_empty() {
            return;
        }
        let Some(stream) = self.held.take() else {
            return;
        };
        stream.client.finish(stream.id);
        let messages: Vec<Waiting> = self.waiting.drain(..).collect();
        let last = messages.last().expect("not empty").p.intended;
        self.calls.push(Call {
            stream,
            messages,
            last,
            answered: None,
            resends: 0,
        });
    }

    /// Counts every message waiting whose deadline (`timeout_ns` after its intended send;
    /// of a client-streaming call, after its last message's) has passed by `now` as timed
    /// out, through `expire`; their replies, if they come, are passed over (a call's stream
    /// is reset).
    pub(crate) fn expire_waiting(
        &mut self,
        now: u64,
        timeout_ns: u64,
        mut expire: impl FnMut(Planned),
    ) {
        if self.messages_per_call().is_some() {
            self.calls.retain(|c| {
                let due = c.last + timeout_ns <= now;
                if due {
                    c.messages.iter().for_each(|w| expire(w.p));
                }
                !due
            });
            return;
        }
        for w in self.waiting.iter_mut().filter(|w| !w.expired) {
            if w.p.intended + timeout_ns > now {
                break;
            }
            w.expired = true;
            expire(w.p);
        }
        // With no stream held no reply can come: the expired ones have nothing to skip.
        if self.held.is_none() {
            self.waiting.retain(|w| !w.expired);
        }
        // Matched by a field, an expired message whose reply never comes is popped by no
        // other reply: forgotten four timeouts after its send (a reply later than that
        // counts as unmatched).
        if self.template().is_some_and(|t| t.match_field().is_some()) {
            let forgotten = now.saturating_sub(4 * timeout_ns);
            self.waiting
                .retain(|w| !(w.expired && w.p.intended <= forgotten));
        }
    }

    /// Takes what the held bidirectional stream did: a message is the reply to the oldest
    /// message waiting, or with `--match-field` to the oldest whose request held the number
    /// it echoes (recorded, timed from its send; passed over if it had expired); the
    /// stream's end ends the wait of every message on it: with its status (an `OK` end
    /// counts as the server closing the stream, and the messages it left unanswered as
    /// cut), as a failure, or, if the server never processed the stream, by sending them
    /// again on a new one.
    pub(crate) async fn take_duplex(
        &mut self,
        io: &Io,
        event: DuplexEvent,
        connecting: &Cell<bool>,
    ) {
        if self.messages_per_call().is_some() {
            return self.take_call(io, event, connecting).await;
        }
        let now = io.clock.now();
        let Some(h) = self.held.as_mut().filter(|h| event.on(h)) else {
            return;
        };
        match event.event {
            Ok(Next::Message) => {
                h.messages += 1;
                if h.mark.is_none() {
                    h.mark = Some(HeldMark::new(io));
                }
                // What it says (`--sent-at`, `--match-field`): read for every message, in
                // order, whichever it answers.
                let template = self.template().expect("a streaming call");
                let (stamped, matched) = (
                    template.sent_at().is_some(),
                    template.match_field().is_some(),
                );
                let [at, key] = if stamped || matched {
                    event.client.take_value(event.id)
                } else {
                    [None, None]
                };
                // The oldest message waiting; with `--match-field`, the oldest whose request
                // held the number the reply echoes.
                let answered = if matched {
                    key.and_then(|k| self.waiting.iter().position(|w| w.key == Some(k)))
                } else {
                    (!self.waiting.is_empty()).then_some(0)
                };
                match answered.and_then(|k| self.waiting.remove(k)) {
                    Some(w) if !w.expired => {
                        let mut rec = io.recorder.borrow_mut();
                        rec.grpc_reply(w.p, w.sent, now, GrpcStatus::Ok);
                        if stamped {
                            rec.server_delay(w.p, io.clock.realtime_ns(now), at.and_then(epoch_ns));
                        }
                    }
                    // Its message had timed out: its reply is passed over.
                    Some(_) => {}
                    // A reply that answers no message waiting (a server that sends more
                    // than it was asked, or echoes a number loadlab did not send): passed
                    // over, and with `--match-field` counted.
                    None => {
                        if matched {
                            io.recorder.borrow_mut().unmatched_reply();
                        }
                    }
                }
            }
            Ok(Next::End(reply)) => {
                let messages = h.messages;
                self.held = None;
                let left = std::mem::take(&mut self.waiting);
                let mut rec = io.recorder.borrow_mut();
                let code = reply.grpc_status();
                if reply.status == 200 && code.is_some_and(|c| c.is_ok()) {
                    rec.server_close(messages);
                }
                for w in left.iter().filter(|w| !w.expired) {
                    match (reply.status, code) {
                        (200, Some(c)) if c.is_ok() => {
                            rec.error(w.p, now, ErrorClass::ConnectionClosed)
                        }
                        (200, Some(c)) => rec.grpc_reply(w.p, w.sent, now, c),
                        (200, None) => rec.error(w.p, now, ErrorClass::MalformedResponse),
                        (status, _) => rec.response(w.p, w.sent, now, status),
                    }
                }
            }
            Err(StreamFailure::Unprocessed) => {
                self.conn.invalidate(h.generation);
                self.held = None;
                let left = std::mem::take(&mut self.waiting);
                for w in left.into_iter().filter(|w| !w.expired) {
                    if w.resends >= MAX_RESENDS {
                        io.recorder
                            .borrow_mut()
                            .error(w.p, now, ErrorClass::StreamReset);
                        continue;
                    }
                    io.recorder.borrow_mut().resent(w.p.intended);
                    let again = self.send_again(io, w.p, w.body, w.resends + 1, connecting);
                    if let Err(class) = Box::pin(again).await {
                        io.recorder.borrow_mut().error(w.p, io.clock.now(), class);
                    }
                }
            }
            Err(StreamFailure::Failed(class)) => {
                self.held = None;
                let left = std::mem::take(&mut self.waiting);
                let mut rec = io.recorder.borrow_mut();
                for w in left.iter().filter(|w| !w.expired) {
                    rec.error(w.p, now, class);
                }
            }
        }
    }

    /// Takes what a client-streaming call's stream did. The reply message is noted (a
    /// second one is passed over); the stream's end answers every message of the call with
    /// its status, timed from the call's last message's intended send (an `OK` end with no
    /// reply message is malformed); a stream the server never processed is sent again,
    /// whole, on a new one. An event on the call being sent (the server answered before
    /// its side ended) ends that call first.
    async fn take_call(&mut self, io: &Io, event: DuplexEvent, connecting: &Cell<bool>) {
        let now = io.clock.now();
        if self.held.as_ref().is_some_and(|h| event.on(h)) {
            if self.waiting.is_empty() {
                self.held = None;
                return;
            }
            self.end_call();
        }
        let Some(k) = self.calls.iter().position(|c| event.on(&c.stream)) else {
            return;
        };
        let call = match event.event {
            Ok(Next::Message) => {
                let c = &mut self.calls[k];
                c.stream.messages += 1;
                c.answered.get_or_insert(now);
                return;
            }
            Ok(Next::End(reply)) => {
                let call = self.calls.swap_remove(k);
                let code = reply.grpc_status();
                let sent = call.messages.last().map_or(now, |w| w.sent);
                let mut rec = io.recorder.borrow_mut();
                for w in &call.messages {
                    // Counted as its own intended send says (warm-up or not), timed from
                    // the call's last.
                    if !rec.measured(w.p.intended) {
                        continue;
                    }
                    let p = Planned {
                        intended: call.last,
                        ..w.p
                    };
                    match (reply.status, code, call.answered) {
                        (200, Some(c), Some(at)) if c.is_ok() => rec.grpc_reply(p, sent, at, c),
                        (200, Some(c), None) if c.is_ok() => {
                            rec.error(p, now, ErrorClass::MalformedResponse)
                        }
                        (200, Some(c), _) => rec.grpc_reply(p, sent, now, c),
                        (200, None, _) => rec.error(p, now, ErrorClass::MalformedResponse),
                        (status, _, _) => rec.response(p, sent, now, status),
                    }
                }
                return;
            }
            Err(StreamFailure::Unprocessed) => {
                let call = self.calls.swap_remove(k);
                self.conn.invalidate(call.stream.generation);
                call
            }
            Err(StreamFailure::Failed(class)) => {
                let call = self.calls.swap_remove(k);
                let mut rec = io.recorder.borrow_mut();
                for w in &call.messages {
                    rec.error(w.p, now, class);
                }
                return;
            }
        };
        self.resend_call(io, call, connecting).await;
    }

    /// Sends a client-streaming call the server never processed again, whole, on a new
    /// stream (its messages counted as failed once sent [`MAX_RESENDS`] times, or if no
    /// stream opens).
    async fn resend_call(&mut self, io: &Io, mut call: Call, connecting: &Cell<bool>) {
        let template = self.template().expect("a streaming call").clone();
        let failed = if call.resends >= MAX_RESENDS {
            Some(ErrorClass::StreamReset)
        } else {
            let none = Bytes::new();
            match self.open_held(io, &template, &none, connecting).await {
                Ok(stream) => {
                    let mut rec = io.recorder.borrow_mut();
                    for w in &call.messages {
                        rec.resent(w.p.intended);
                        // A stream that ends at once takes the rest as cut by its end.
                        let _ = stream.client.send(stream.id, &w.body);
                    }
                    stream.client.finish(stream.id);
                    call.stream = stream;
                    call.resends += 1;
                    call.answered = None;
                    self.calls.push(call);
                    return;
                }
                Err(class) => Some(class),
            }
        };
        if let Some(class) = failed {
            let now = io.clock.now();
            let mut rec = io.recorder.borrow_mut();
            for w in &call.messages {
                rec.error(w.p, now, class);
            }
        }
    }

    /// Waits until the body of the last stream, answered before it was all sent, is sent
    /// or stopped by the server (RFC 9113 §8.1), so that the slot never has more than one
    /// stream open on the server. Given up on (its deadline passed: this future is
    /// dropped), the stream is reset.
    pub(crate) async fn finish_body(&mut self) {
        let Some((client, id)) = self.sending.take() else {
            return;
        };
        // Once the body is done the stream is forgotten: nothing is reset then.
        let _stop = StopBodyOnDrop(&client, id);
        std::future::poll_fn(|cx| client.poll_sent(id, cx)).await;
    }

    /// The connection to send on: the one last used while it is current, else the live
    /// one (opened if no slot has).
    async fn live(&mut self, io: &Io, connecting: &Cell<bool>) -> Result<Live, ErrorClass> {
        match self.cached.take() {
            Some(live) if self.conn.is_current(live.0) => Ok(live),
            _ => connection(io, &self.conn, connecting).await,
        }
    }

    /// Opens the slot's connection (if no other slot has) before the window starts.
    pub(crate) async fn preconnect(&mut self, io: &Io, deadline: Instant) -> bool {
        let unused = Cell::new(false);
        let attempt = connection(io, &self.conn, &unused);
        match tokio::time::timeout_at(deadline, attempt).await {
            Ok(Ok(live)) => {
                self.cached = Some(live);
                false
            }
            Ok(Err(_)) => false,
            Err(_elapsed) => true,
        }
    }

    /// Sends one request as a stream, reads the response (and for gRPC its trailers) and
    /// records it. A stream the server never processed (refused, or above the
    /// `last_stream_id` of its `GOAWAY`) is sent again on a new connection, whatever the
    /// method (RFC 9113 §8.7), latency charged from its intended send time; the
    /// connection that sent `GOAWAY` takes no new streams.
    pub(crate) async fn exchange(
        &mut self,
        io: &Io,
        p: Planned,
        deadline: u64,
        connecting: &Cell<bool>,
    ) -> Result<(), ErrorClass> {
        if self.streaming() {
            return self.next_message(io, p, connecting).await;
        }
        if self.duplex() {
            // Closed loop: the message, then its reply (the only one waiting); a
            // client-streaming call's messages go one after another, and its last one waits
            // for the call's reply.
            self.send_message(io, p, connecting).await?;
            let client_streaming = self.messages_per_call().is_some();
            while (client_streaming && !self.calls.is_empty())
                || (!client_streaming && !self.waiting.is_empty())
            {
                let event = self.next_duplex().await;
                self.take_duplex(io, event, connecting).await;
            }
            return Ok(());
        }
        let rendered = match &self.source {
            H2Source::Fixed(_) => None,
            H2Source::Stream(..) => unreachable!("a streaming call's exchanges are above"),
            H2Source::Varying(v) => {
                let mut w = io.drawing();
                let draw = v.traffic.draw(p);
                let kind = v.kind(p);
                let mut head = Vec::with_capacity(256);
                let body = kind
                    .render(&draw, &mut w.gen, &mut self.scratch, &mut head)
                    .map_err(|()| ErrorClass::Other)?;
                Some(Rendered {
                    head,
                    body,
                    grpc: kind.is_grpc(),
                })
            }
        };
        let mut resends = 0;
        loop {
            let live = self.live(io, connecting).await?;
            let (generation, client) = (live.0, live.1.clone());
            match self.stream(io, live, p, rendered.as_ref(), deadline).await {
                Ok(()) => return Ok(()),
                Err(StreamFailure::Unprocessed) if resends < MAX_RESENDS => {
                    self.conn.invalidate(generation);
                    resends += 1;
                    io.recorder.borrow_mut().resent(p.intended);
                }
                Err(StreamFailure::Unprocessed) => return Err(ErrorClass::StreamReset),
                Err(StreamFailure::Failed(class)) => {
                    if client.goaway().is_some() {
                        self.conn.invalidate(generation);
                    }
                    return Err(class);
                }
            }
        }
    }

    /// One attempt of [`Http2Link::exchange`] on the live connection `live`.
    async fn stream(
        &mut self,
        io: &Io,
        live: Live,
        p: Planned,
        rendered: Option<&Rendered>,
        deadline: u64,
    ) -> Result<(), StreamFailure> {
        let (generation, client) = live;
        std::future::poll_fn(|cx| client.poll_capacity(cx))
            .await
            .inspect_err(|_| self.conn.invalidate(generation))?;
        let sent = io.clock.now();
        let timeouts = &mut self.timeouts;
        let remaining = deadline.saturating_sub(sent);
        let (head, body, grpc_call) = match (&self.source, rendered) {
            (_, Some(r)) => (&r.head[..], r.body.as_ref(), r.grpc),
            (H2Source::Fixed(template), None) => {
                (template.head(), template.body(), template.is_grpc())
            }
            (H2Source::Varying(_) | H2Source::Stream(..), None) => {
                unreachable!("varying requests are rendered first")
            }
        };
        let id = client.open(
            head,
            |out| {
                if grpc_call {
                    timeouts.encode(out, remaining);
                }
            },
            body,
            grpc_call,
        );
        self.cached = Some((generation, client.clone()));
        // A stream given up on (its deadline passed: this future is dropped) is reset; one
        // whose result was taken is forgotten already.
        let _cancel = CancelOnDrop(&client, id);
        let reply = std::future::poll_fn(|cx| client.poll_stream(id, cx)).await?;
        let grpc = reply.grpc_status();
        let now = io.clock.now();
        let mut rec = io.recorder.borrow_mut();
        match (grpc_call, reply.status, grpc) {
            (true, 200, Some(code)) => rec.grpc_reply(p, sent, now, code),
            // A 200 with no grpc-status and no trailers at all is not a gRPC reply.
            (true, 200, None) => {
                client.stop_body(id);
                return Err(StreamFailure::Failed(ErrorClass::MalformedResponse));
            }
            // A proxy's error page, or a plain HTTP/2 reply.
            _ => rec.response(p, sent, now, reply.status),
        }
        if client.sending(id) {
            self.sending = Some((client.clone(), id));
        }
        Ok(())
    }
}

/// Resets a stream whose slot stopped waiting for it.
struct CancelOnDrop<'a>(&'a Client, u32);

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        self.0.cancel(self.1);
    }
}

/// Resets a stream whose slot stopped waiting for the rest of its body.
struct StopBodyOnDrop<'a>(&'a Client, u32);

impl Drop for StopBodyOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop_body(self.1);
    }
}

/// The live connection of `conn`, opening it if no slot has (the other slots bound to it
/// wait for that attempt instead of opening their own).
async fn connection(
    io: &Io,
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
        let c0 = io.clock.now();
        let tcp = io.connector.connect().await?;
        io.recorder.borrow_mut().connect(io.clock.now() - c0);
        connecting.set(false);
        let client = Rc::new(Client::new(
            super::STREAM_WINDOW,
            super::CONNECTION_WINDOW,
            super::MAX_HEADER_LIST,
        ));
        let generation = conn.install(client.clone());
        let owner = conn.clone();
        let driven = client.clone();
        tokio::task::spawn_local(async move {
            client::drive(driven, tcp).await;
            owner.invalidate(generation);
        });
        return Ok((generation, client));
    }
}

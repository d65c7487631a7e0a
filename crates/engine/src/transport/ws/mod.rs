//! WebSocket (RFC 6455): a request loop's connection, opened with an HTTP/1.1 upgrade over
//! loadlab's own connection (TCP or TLS, from [`crate::conn`]) and kept; each message sent
//! is the run's body, and its reply is the next data message the server sends on that
//! connection (one message in flight per connection, so replies match by order).
//!
//! The handshake and the frames are tokio-tungstenite's (over any stream, with no connect
//! or TLS of its own): pings are answered and a close handshake is honoured by it. A
//! reply's latency runs from the message's intended send time, as a request's does.

pub(crate) mod flow;

use std::cell::Cell;
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Bytes, Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

use loadlab_template::{Origin, Slot, Template};

use crate::config::error::{value_err, ConfigError, Field};
use crate::config::{RunConfig, Transport};
use crate::conn::Conn;
use crate::error::ErrorClass;
use crate::recorder::Planned;
use crate::traffic::Traffic;
use crate::transport::io::{holds, sent_at_in, HeldMark, Io};

/// The status a reply is counted under: that of the upgrade its connection made (101
/// Switching Protocols). A message has no status of its own.
pub const REPLY_STATUS: u16 = 101;

/// What every connection of a run sends: the opening handshake's request and the message.
pub struct WsMessage {
    /// The URL and the run's headers (the key and version are added per connection).
    request: tungstenite::handshake::client::Request,
    /// The message sent, as a text or a binary frame (the fixed one, or how the varying
    /// ones go).
    payload: Payload,
    /// Messages that vary: their body rendered per message from the run's traffic.
    traffic: Option<Arc<Traffic>>,
    /// What a reply must contain, rendered with its message's draw.
    reply: Option<Template>,
    /// Server push: the message is sent once per connection, and every data message the
    /// server sends is a reply.
    push: bool,
    /// Where a reply says when the server sent it (`--sent-at`, a JSON pointer).
    sent_at: Option<String>,
}

/// A message's payload, shared by every send (a clone is a reference count).
#[derive(Clone)]
enum Payload {
    Text(Utf8Bytes),
    Binary(Bytes),
    /// Connection load: a ping frame, answered by a pong.
    Ping(Bytes),
}

/// The longest a connection waits for the server's answer to its close frame at the end.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// The largest payload of a control frame (RFC 6455 §5.5): a ping's.
pub const MAX_PING_PAYLOAD: usize = 125;

/// A message's text that is not UTF-8.
const NOT_UTF8: &str =
    "a text message is UTF-8: this body is not (send it as binary frames: --binary)";

impl WsMessage {
    /// The handshake, the message and the reply's template of `cfg` (a WebSocket run);
    /// each mistake names its field.
    pub fn new(cfg: &RunConfig) -> Result<WsMessage, ConfigError> {
        let (binary, ping, push, reply) = match &cfg.transport {
            Transport::WebSocket {
                binary,
                ping,
                push,
                reply_contains,
                ..
            } => (*binary, *ping, *push, reply_contains.clone()),
            _ => (false, false, false, None),
        };
        let sent_at = cfg.transport.sent_at().map(str::to_string);
        let mut request = cfg
            .target
            .url
            .as_str()
            .into_client_request()
            .map_err(|e| value_err(Field::Url, &cfg.target.url, e.to_string()))?;
        for (name, value) in &cfg.headers {
            let bad = |e: String| value_err(Field::Header, name, e);
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| bad(e.to_string()))?;
            let value = HeaderValue::from_str(value).map_err(|e| bad(e.to_string()))?;
            request.headers_mut().append(name, value);
        }
        let body = Bytes::from(cfg.body.clone());
        let payload = if ping {
            if body.len() > MAX_PING_PAYLOAD {
                return Err(value_err(
                    Field::Ping,
                    format!("a body of {} bytes", body.len()),
                    format!("a ping carries at most {MAX_PING_PAYLOAD} bytes (RFC 6455 §5.5)"),
                ));
            }
            Payload::Ping(body)
        } else if binary {
            Payload::Binary(body)
        } else {
            Payload::Text(
                Utf8Bytes::try_from(body).map_err(|_| value_err(Field::Binary, "off", NOT_UTF8))?,
            )
        };
        let traffic = cfg.traffic.clone();
        let reply = match reply {
            Some(text) => {
                if traffic.is_none() && Template::has_expressions(&text) {
                    return Err(value_err(
                        Field::ReplyContains,
                        &text,
                        "its ${...} are the message's: give them in the body too (--body '{\"id\":${seq}}')",
                    ));
                }
                let columns = traffic.as_ref().map(|t| t.columns()).unwrap_or_default();
                let origin = Origin::flag("--reply-contains");
                Some(
                    Template::parse(&text, Slot::Body, &origin, &columns)
                        .map_err(|e| value_err(Field::ReplyContains, &text, e.to_string()))?,
                )
            }
            None => None,
        };
        Ok(WsMessage {
            request,
            payload,
            traffic,
            reply,
            push,
            sent_at,
        })
    }

    /// The message of `p`, and what its reply must contain.
    fn message(&self, io: &Io, p: Planned) -> Result<(Message, Option<Vec<u8>>), ErrorClass> {
        let Some(t) = &self.traffic else {
            let message = match &self.payload {
                Payload::Text(t) => Message::Text(t.clone()),
                Payload::Binary(b) => Message::Binary(b.clone()),
                Payload::Ping(b) => Message::Ping(b.clone()),
            };
            let expected = self
                .reply
                .as_ref()
                .and_then(|r| r.as_literal().map(<[u8]>::to_vec));
            return Ok((message, expected));
        };
        let mut w = io.drawing();
        let draw = t.draw(p);
        let mut body = Vec::new();
        t.kinds[p.kind as usize]
            .body
            .render(&draw, &mut w.gen, &mut body);
        let expected = self.reply.as_ref().map(|r| {
            let mut out = Vec::new();
            r.render(&draw, &mut w.gen, &mut out);
            out
        });
        let body = Bytes::from(body);
        let message = match &self.payload {
            Payload::Text(_) => {
                Message::Text(Utf8Bytes::try_from(body).map_err(|_| ErrorClass::Other)?)
            }
            Payload::Binary(_) => Message::Binary(body),
            Payload::Ping(_) => Message::Ping(body),
        };
        Ok((message, expected))
    }

    /// Whether `m` is the reply this run waits for: a data message (containing `expected`
    /// if given), or a pong to a ping.
    fn is_reply(&self, m: &Message, expected: Option<&[u8]>) -> bool {
        let data: &[u8] = match (&self.payload, m) {
            (Payload::Ping(_), m) => return matches!(m, Message::Pong(_)),
            (_, Message::Text(t)) => t.as_bytes(),
            (_, Message::Binary(b)) => b,
            _ => return false,
        };
        holds(data, expected)
    }
}

/// One request loop's WebSocket connection.
pub(crate) struct WsLink {
    message: Arc<WsMessage>,
    ws: Option<WebSocketStream<Conn>>,
    /// Server push: the subscribe message went on this connection.
    subscribed: bool,
    /// Counts the connection as held once it has answered (`None`: not yet, or closed).
    held: Option<HeldMark>,
}

impl WsLink {
    /// A link that sends `message`, connecting on first use.
    pub(crate) fn new(message: Arc<WsMessage>) -> WsLink {
        WsLink {
            message,
            ws: None,
            subscribed: false,
            held: None,
        }
    }

    /// Drops the connection (after a failure: a reply arriving late would be taken for
    /// the next message's).
    pub(crate) fn close(&mut self) {
        self.ws = None;
        self.subscribed = false;
        self.held = None;
    }

    /// The run is over for this connection: the close handshake (RFC 6455 §7), waited for
    /// at most `CLOSE_WAIT`, then the connection dropped.
    pub(crate) async fn finish(&mut self) {
        self.held = None;
        if let Some(mut ws) = self.ws.take() {
            let _ = tokio::time::timeout(CLOSE_WAIT, ws.close(Some(normal_close()))).await;
        }
    }

    /// Connects and upgrades before the window starts, if both are done by `deadline`;
    /// `true` if the deadline passed first.
    pub(crate) async fn preconnect(&mut self, io: &Io, deadline: Instant) -> bool {
        match tokio::time::timeout_at(deadline, self.open(io)).await {
            Ok(Ok(ws)) => {
                self.ws = Some(ws);
                self.subscribed = false;
                self.held = None;
                false
            }
            Ok(Err(_)) => false,
            Err(_elapsed) => true,
        }
    }

    /// A new connection, upgraded. The TCP (or TLS) connect is recorded as the connect
    /// time; the upgrade is part of the first message's latency.
    async fn open(&self, io: &Io) -> Result<WebSocketStream<Conn>, ErrorClass> {
        let (ws, _response) = upgrade(io, self.message.request.clone())
            .await?
            .map_err(|e| classify(&e))?;
        Ok(ws)
    }

    /// Sends the message of each planned request of the batch (one: a message in flight
    /// per connection) and records its reply.
    pub(crate) async fn exchange(
        &mut self,
        io: &Io,
        batch: &[Planned],
        connecting: &Cell<bool>,
        done: &Cell<usize>,
    ) -> Result<(), ErrorClass> {
        if self.ws.is_none() {
            connecting.set(true);
            let ws = self.open(io).await;
            connecting.set(false);
            self.ws = Some(ws?);
            self.subscribed = false;
            self.held = None;
        }
        let ws = self.ws.as_mut().expect("connected above");
        let mut stamp = None;
        for &p in batch {
            let sent = io.clock.now();
            // Server push: the subscribe message goes once, on a new connection; then each
            // exchange waits for the next message the server sends (the first after the
            // subscription, then the gaps).
            let first_pushed = self.message.push && !self.subscribed;
            let expected = if !self.message.push || !self.subscribed {
                let (message, expected) = self.message.message(io, p)?;
                ws.send(message).await.map_err(|e| classify(&e))?;
                self.subscribed = true;
                expected
            } else {
                None
            };
            loop {
                match ws.next().await {
                    Some(Ok(m)) if self.message.is_reply(&m, expected.as_deref()) => {
                        if let Some(pointer) = &self.message.sent_at {
                            stamp = Some(sent_at(&m, pointer));
                        }
                        break;
                    }
                    // Not a reply: a ping of the server's (answered by the library with a
                    // pong on the next write), an unasked pong, or a data message sent
                    // while pings are timed.
                    Some(Ok(
                        Message::Ping(_)
                        | Message::Pong(_)
                        | Message::Frame(_)
                        | Message::Text(_)
                        | Message::Binary(_),
                    )) => {}
                    ended => return Err(wait_ended(io, p, ended)),
                }
            }
            // When the reply's last bytes arrived, if the kernel stamped them (plain
            // connections in open loop): a worker that reads late (a paced ring takes the
            // replies in at its own wake-ups) must not charge its delay to the server.
            let now = io.clock.now();
            let received = ws.get_ref().received_at();
            let at = received.map_or(now, |at| io.clock.from_realtime(at, sent, now));
            let mut rec = io.recorder.borrow_mut();
            rec.response(p, sent, at, REPLY_STATUS);
            if self.message.push {
                rec.stream_message(p, at.saturating_sub(sent), first_pushed);
            }
            if self.held.is_none() {
                self.held = Some(HeldMark::new(io));
            }
            if let Some(server) = stamp.take() {
                let arrived = received.unwrap_or_else(|| io.clock.realtime_ns(now));
                rec.server_delay(p, arrived, server);
            }
            drop(rec);
            done.set(done.get() + 1);
        }
        Ok(())
    }
}

/// A new connection to the target, upgraded with `request`: the TCP (or TLS) connect
/// recorded as the connect time (the upgrade is part of the first message's latency); the
/// upgrade's outcome as tungstenite gives it.
async fn upgrade(
    io: &Io,
    request: tungstenite::handshake::client::Request,
) -> Result<
    tungstenite::Result<(
        WebSocketStream<Conn>,
        tungstenite::handshake::client::Response,
    )>,
    ErrorClass,
> {
    let c0 = io.clock.now();
    let conn = io.connector.connect().await?;
    io.recorder.borrow_mut().connect(io.clock.now() - c0);
    // A connection's read buffer starts at 4 KiB (tungstenite's default is 128 KiB, a cost
    // per connection when thousands are held) and grows for a larger frame; a frame is
    // written at once (the send flushes it anyway).
    let config = WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(0);
    Ok(tokio_tungstenite::client_async_with_config(request, conn, Some(config)).await)
}

/// Why a wait for `p`'s reply ended with `next` (what the stream gave that is not a
/// message): the server closed, its close frame answered by the library and its code
/// counted (1005: none given; 1006: no close frame, RFC 6455 §7.4), or a broken frame.
fn wait_ended(io: &Io, p: Planned, next: Option<tungstenite::Result<Message>>) -> ErrorClass {
    let code = match next {
        Some(Ok(Message::Close(frame))) => frame.map_or(1005, |f| u16::from(f.code)),
        None => 1006,
        Some(Err(e)) => return classify(&e),
        // A message: the callers match those first.
        Some(Ok(_)) => return ErrorClass::Other,
    };
    io.recorder.borrow_mut().ws_closed(p, code);
    ErrorClass::ConnectionClosed
}

/// The close frame loadlab ends a connection with: 1000, a normal closure (a frame without
/// a code reads as 1005, which servers such as Python's websockets report as an abnormal end).
fn normal_close() -> tungstenite::protocol::CloseFrame {
    tungstenite::protocol::CloseFrame {
        code: tungstenite::protocol::frame::coding::CloseCode::Normal,
        reason: "".into(),
    }
}

/// The time reply `m` says the server sent it (`CLOCK_REALTIME` ns), read at `pointer`
/// ([`crate::transport::io::sent_at_in`]); `None` for a control frame.
fn sent_at(m: &Message, pointer: &str) -> Option<u64> {
    match m {
        Message::Text(t) => sent_at_in(t.as_bytes(), pointer),
        Message::Binary(b) => sent_at_in(b, pointer),
        _ => None,
    }
}

/// The error class of a WebSocket failure: an upgrade answered with another status is a
/// refused handshake (4xx and 5xx as their HTTP class), a broken frame a malformed
/// response, an I/O error as for HTTP.
fn classify(e: &tungstenite::Error) -> ErrorClass {
    use tungstenite::Error;
    match e {
        Error::Io(e) => ErrorClass::from_io(e, false),
        Error::ConnectionClosed | Error::AlreadyClosed => ErrorClass::ConnectionClosed,
        Error::Http(response) => match response.status().as_u16() {
            400..=499 => ErrorClass::Http4xx,
            500..=599 => ErrorClass::Http5xx,
            _ => ErrorClass::WsHandshake,
        },
        Error::Tls(_) => ErrorClass::TlsHandshake,
        Error::HttpFormat(_) | Error::Url(_) => ErrorClass::WsHandshake,
        Error::Protocol(p) if is_handshake(p) => ErrorClass::WsHandshake,
        Error::Protocol(_)
        | Error::Capacity(_)
        | Error::Utf8(_)
        | Error::AttackAttempt
        | Error::WriteBufferFull(_) => ErrorClass::MalformedResponse,
    }
}

/// Whether a protocol error is the upgrade's (a response that is not a WebSocket
/// server's), not a frame's.
fn is_handshake(p: &tungstenite::error::ProtocolError) -> bool {
    use tungstenite::error::ProtocolError as P;
    matches!(
        p,
        P::WrongHttpMethod
            | P::WrongHttpVersion
            | P::MissingConnectionUpgradeHeader
            | P::MissingUpgradeWebSocketHeader
            | P::MissingSecWebSocketVersionHeader
            | P::MissingSecWebSocketKey
            | P::SecWebSocketAcceptKeyMismatch
            | P::JunkAfterRequest
            | P::CustomResponseSuccessful
            | P::InvalidHeader(_)
            | P::HandshakeIncomplete
            | P::HttparseError(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::io::epoch_ns;

    #[test]
    fn a_time_since_the_epoch_is_read_in_any_unit_by_its_magnitude() {
        // 2026-12-06T13:00:00Z in seconds, ms, µs and ns, and a fraction of a second.
        let ns = 1_796_562_000_000_000_000u64;
        assert_eq!(epoch_ns(1_796_562_000.0), Some(ns));
        assert_eq!(epoch_ns(1_796_562_000_000.0), Some(ns));
        assert_eq!(epoch_ns(1_796_562_000_000_000.0), Some(ns));
        assert_eq!(epoch_ns(1_796_562_000_000_000_000.0), Some(ns));
        // A fraction, to well within the microsecond the delay is recorded in (a double
        // holds a time in nanoseconds to 256 ns).
        let quarter = epoch_ns(1_796_562_000.25).unwrap();
        assert!(quarter.abs_diff(ns + 250_000_000) < 1_000, "{quarter}");
        // Not a time of this century in any unit: a counter, a duration, a negative.
        for v in [0.0, 42.0, 5e10 * 10.0, 5e13 * 10.0, -1.0, 1e21] {
            assert_eq!(epoch_ns(v), None, "{v}");
        }
    }

    #[test]
    fn the_time_is_read_at_the_pointer_of_a_text_or_binary_reply() {
        let text = Message::text(r#"{"data":{"ts":1796562000000}}"#);
        assert_eq!(sent_at(&text, "/data/ts"), Some(1_796_562_000_000_000_000));
        let binary = Message::binary(br#"{"ts":1796562000}"#.to_vec());
        assert_eq!(sent_at(&binary, "/ts"), Some(1_796_562_000_000_000_000));
        // No such field, not a number, not JSON, a pong: no time.
        assert_eq!(sent_at(&text, "/ts"), None);
        assert_eq!(sent_at(&Message::text(r#"{"ts":"noon"}"#), "/ts"), None);
        assert_eq!(sent_at(&Message::text("tick 4"), "/ts"), None);
        assert_eq!(sent_at(&Message::Pong(Bytes::new()), "/ts"), None);
    }
}

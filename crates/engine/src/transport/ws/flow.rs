//! A flow's WebSocket steps (`websocket = true` in a flow): each session's WebSocket,
//! opened at a step's path by the first step that names it (the upgrade, a GET, carrying
//! the step's headers and the session's cookies), kept for the next steps at that path,
//! and closed with 1000 when the session ends. A step sends its message (text if it is
//! UTF-8, else binary; none if it is empty) and waits for its reply: the next data message
//! the server sends that holds the step's `reply_contains`, the others passed over.

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::{Bytes, Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

use super::{classify, normal_close, upgrade, wait_ended, CLOSE_WAIT, REPLY_STATUS};
use crate::config::Scheme;
use crate::conn::Conn;
use crate::error::ErrorClass;
use crate::recorder::Planned;
use crate::transport::io::{holds, FlowReply, Io};

/// What one step sends, rendered for this session.
pub(crate) struct FlowMessage<'a> {
    /// Path and query on the target.
    pub(crate) path: &'a str,
    /// The step's headers, for the upgrade if this step opens the socket.
    pub(crate) headers: &'a [(String, Vec<u8>)],
    /// The session's cookies for the path (a `Cookie` header's value), if any.
    pub(crate) cookie: Option<&'a [u8]>,
    /// The message (empty: none is sent).
    pub(crate) message: &'a [u8],
    /// What the reply must contain (`None`: any data message).
    pub(crate) expected: Option<&'a [u8]>,
}

/// One session's WebSocket, if it has one open.
#[derive(Default)]
pub(crate) struct FlowSocket {
    open: Option<Open>,
    /// The last reply's payload: what the step's extract rules read.
    reply: Vec<u8>,
}

struct Open {
    path: String,
    ws: WebSocketStream<Conn>,
    /// The upgrade's response headers (its Set-Cookie for the session's jar; `header`
    /// extract rules read them).
    headers: Vec<(String, Vec<u8>)>,
}

impl FlowSocket {
    /// The last reply's payload.
    pub(crate) fn reply(&self) -> &[u8] {
        &self.reply
    }

    /// The response headers of the open socket's upgrade (none if it is closed).
    pub(crate) fn headers(&self) -> &[(String, Vec<u8>)] {
        self.open.as_ref().map_or(&[], |o| &o.headers)
    }

    /// Whether a socket is open.
    pub(crate) fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Drops the socket without a close frame: after a failure, a reply arriving late
    /// would be taken for the next step's.
    pub(crate) fn drop_socket(&mut self) {
        self.open = None;
    }

    /// The session is over: the close handshake (RFC 6455 §7), waited for at most
    /// [`CLOSE_WAIT`], then the connection dropped.
    pub(crate) async fn finish(&mut self) {
        if let Some(mut o) = self.open.take() {
            let _ = tokio::time::timeout(CLOSE_WAIT, o.ws.close(Some(normal_close()))).await;
        }
    }

    /// Sends the step's message (opening the socket at its path first if the session has
    /// none there; one at another path is closed) and waits for its reply.
    pub(crate) async fn exchange(
        &mut self,
        io: &Io,
        p: Planned,
        m: FlowMessage<'_>,
    ) -> Result<FlowReply, ErrorClass> {
        if self.open.as_ref().is_some_and(|o| o.path != m.path) {
            self.finish().await;
        }
        let opened = self.open.is_none();
        if opened {
            match open(io, &m).await? {
                Ok(o) => self.open = Some(o),
                Err(status) => {
                    return Ok(FlowReply {
                        status,
                        sent: io.clock.now(),
                        done: io.clock.now(),
                        opened,
                    })
                }
            }
        }
        let o = self.open.as_mut().expect("opened above");
        let sent = io.clock.now();
        if !m.message.is_empty() {
            let bytes = Bytes::copy_from_slice(m.message);
            let message = match Utf8Bytes::try_from(bytes.clone()) {
                Ok(text) => Message::Text(text),
                Err(_) => Message::Binary(bytes),
            };
            o.ws.send(message).await.map_err(|e| classify(&e))?;
        }
        loop {
            let data: &[u8] = match o.ws.next().await {
                Some(Ok(Message::Text(ref t))) => {
                    self.reply.clear();
                    self.reply.extend_from_slice(t.as_bytes());
                    &self.reply
                }
                Some(Ok(Message::Binary(ref b))) => {
                    self.reply.clear();
                    self.reply.extend_from_slice(b);
                    &self.reply
                }
                // A ping of the server's (answered by the library), a pong, a raw frame.
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
                ended => return Err(wait_ended(io, p, ended)),
            };
            if holds(data, m.expected) {
                break;
            }
        }
        let now = io.clock.now();
        let done =
            o.ws.get_ref()
                .received_at()
                .map_or(now, |at| io.clock.from_realtime(at, sent, now));
        Ok(FlowReply {
            status: REPLY_STATUS,
            sent,
            done,
            opened,
        })
    }
}

/// The socket at `m`'s path, upgraded; `Ok(Err(status))` if the server answered the
/// upgrade with a 4xx or 5xx (the step's response, as an HTTP step's would be).
async fn open(io: &Io, m: &FlowMessage<'_>) -> Result<Result<Open, u16>, ErrorClass> {
    let t = &io.cfg.target;
    let scheme = match t.scheme {
        Scheme::Https => "wss",
        Scheme::Http => "ws",
    };
    let host = if t.host.contains(':') && !t.host.starts_with('[') {
        format!("[{}]", t.host)
    } else {
        t.host.clone()
    };
    let url = format!("{scheme}://{host}:{}{}", t.port, m.path);
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|_| ErrorClass::WsHandshake)?;
    let bad = |_| ErrorClass::WsHandshake;
    for (name, value) in m.headers {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| ErrorClass::WsHandshake)?;
        request
            .headers_mut()
            .append(name, HeaderValue::from_bytes(value).map_err(bad)?);
    }
    if let Some(cookie) = m.cookie {
        request.headers_mut().append(
            tokio_tungstenite::tungstenite::http::header::COOKIE,
            HeaderValue::from_bytes(cookie).map_err(bad)?,
        );
    }
    match upgrade(io, request).await? {
        Ok((ws, response)) => Ok(Ok(Open {
            path: m.path.to_string(),
            ws,
            headers: response
                .headers()
                .iter()
                .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
                .collect(),
        })),
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) if r.status().as_u16() >= 400 => {
            Ok(Err(r.status().as_u16()))
        }
        Err(e) => Err(classify(&e)),
    }
}

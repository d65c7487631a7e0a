//! The seam between the request loop ([`crate::worker`]) and the protocols: a request
//! loop holds a `Link` and asks it to pre-connect and to exchange a batch; everything
//! a protocol does on the wire (connect, write, read, re-send what the server never
//! processed, record each reply) lives in `crate::transport::http1::link` and
//! `crate::transport::http2::link`. What both need from their worker is an `Io` ([`io`]).

pub mod http1;
pub mod http2;
pub mod io;
pub mod sse;
pub mod uring;
pub mod ws;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use tokio::time::Instant;

use crate::config::{Protocol, RunConfig};
use crate::error::ErrorClass;
use crate::recorder::{Planned, Recorder};
use crate::transport::http1::link::Http1Link;
use crate::transport::http2::link::Http2Link;
use crate::transport::http2::{H2Conn, Template};

use io::{Io, Varying};

/// What the requests of a run send, encoded once by the runner; it decides which `Link` a
/// request loop gets.
#[derive(Clone)]
pub enum Request {
    /// HTTP/1.1: the encoded request, repeated `pipeline` times.
    Http1(Arc<Vec<u8>>),
    /// HTTP/1.1 requests that vary: each kind compiled, rendered per request.
    Http1Varying(Arc<Varying<crate::transport::http1::H1Request>>),
    /// HTTP/2 and gRPC: the header block and body every stream sends.
    Http2(Arc<Template>),
    /// HTTP/2 requests that vary.
    Http2Varying(Arc<Varying<crate::transport::http2::H2Request>>),
    /// A streaming gRPC call whose request message varies: the call as the template says
    /// (its header block sent on every stream), each message rendered from the kinds.
    Http2Stream(
        Arc<Template>,
        Arc<Varying<crate::transport::http2::H2Request>>,
    ),
    /// WebSocket: the upgrade request and the message.
    Ws(Arc<ws::WsMessage>),
    /// Server-sent events: the GET of every stream.
    Sse(Arc<sse::SseRequest>),
}

impl Request {
    /// The request of `cfg`'s protocol; an HTTP/2 header value HTTP/2 refuses is an error
    /// (validation has already built the template once).
    pub fn encode(cfg: &RunConfig) -> Result<Request, String> {
        Ok(match (cfg.transport.protocol(), &cfg.traffic) {
            (Protocol::Http1, None) => Request::Http1(Arc::new(
                crate::transport::http1::encode_request(cfg)
                    .repeat(cfg.transport.pipeline() as usize),
            )),
            (Protocol::Http1, Some(t)) => Request::Http1Varying(Arc::new(Varying {
                kinds: t
                    .kinds
                    .iter()
                    .map(|k| {
                        crate::transport::http1::H1Request::new(
                            cfg,
                            &k.method,
                            k.path.clone(),
                            &k.headers,
                            k.body.clone(),
                        )
                    })
                    .collect(),
                traffic: t.clone(),
            })),
            (Protocol::Ws, _) => Request::Ws(Arc::new(
                ws::WsMessage::new(cfg).map_err(|e| e.to_string())?,
            )),
            (Protocol::Sse, _) => Request::Sse(Arc::new(sse::SseRequest::new(cfg))),
            // Every other protocol is carried by HTTP/2.
            (_, None) => Request::Http2(Arc::new(crate::transport::http2::Template::new(cfg)?)),
            (protocol, Some(t)) => {
                let varying = Arc::new(Varying {
                    kinds: t
                        .kinds
                        .iter()
                        .map(|k| crate::transport::http2::H2Request::new(cfg, k))
                        .collect::<Result<_, _>>()?,
                    traffic: t.clone(),
                });
                if protocol.grpc_stream() {
                    let call = crate::transport::http2::Template::new(cfg)?;
                    Request::Http2Stream(Arc::new(call), varying)
                } else {
                    Request::Http2Varying(varying)
                }
            }
        })
    }
}

/// What gives a worker's request loops their links: the run's request and, over HTTP/2,
/// the worker's connections whose streams the loops share.
pub(crate) struct Links {
    request: Request,
    /// HTTP/2: the worker's connections; request loop `n` sends on `h2[n % len]`.
    h2: Vec<Rc<H2Conn>>,
}

impl Links {
    /// Links sending `request`, over `h2_connections` HTTP/2 connections (0 over HTTP/1.1).
    pub(crate) fn new(request: Request, h2_connections: usize) -> Links {
        Links {
            request,
            h2: (0..h2_connections)
                .map(|_| Rc::new(H2Conn::default()))
                .collect(),
        }
    }

    /// Request loop `n`'s link: its own HTTP/1.1 connection, or a stream slot on HTTP/2
    /// connection `n` (round robin).
    pub(crate) fn link(&self, cfg: &RunConfig, n: usize) -> Link {
        use crate::transport::http1::link::H1Source;
        use crate::transport::http2::link::H2Source;
        match &self.request {
            Request::Http1(bytes) => Link::Http1(Http1Link::new(H1Source::fixed(bytes, cfg), cfg)),
            Request::Http1Varying(v) => {
                Link::Http1(Http1Link::new(H1Source::varying(v.clone()), cfg))
            }
            Request::Http2(template) => Link::Http2(Http2Link::new(
                H2Source::Fixed(template.clone()),
                self.h2[n % self.h2.len()].clone(),
            )),
            Request::Http2Varying(v) => Link::Http2(Http2Link::new(
                H2Source::Varying(v.clone()),
                self.h2[n % self.h2.len()].clone(),
            )),
            Request::Http2Stream(t, v) => Link::Http2(Http2Link::new(
                H2Source::Stream(t.clone(), v.clone()),
                self.h2[n % self.h2.len()].clone(),
            )),
            Request::Ws(message) => Link::Ws(ws::WsLink::new(message.clone())),
            Request::Sse(request) => Link::Sse(sse::SseLink::new(request.clone())),
        }
    }

    /// The run is over: every HTTP/2 connection closes once its streams are done, with a
    /// `GOAWAY` first.
    pub(crate) fn close_h2(&self) {
        for conn in &self.h2 {
            conn.retire();
        }
    }

    /// Whether an HTTP/2 connection is still open (its driver has yet to end).
    pub(crate) fn h2_open(&self) -> bool {
        self.h2.iter().any(|c| c.any_open())
    }

    /// Counts, once each, the graceful closes of the HTTP/2 connections opened.
    pub(crate) fn count_closes(&self, recorder: &mut Recorder) {
        for conn in &self.h2 {
            for requests in conn.take_closes() {
                recorder.server_close(requests);
            }
        }
    }
}

/// A request loop's transport.
pub(crate) enum Link {
    /// Its own HTTP/1.1 connection, opened on demand.
    Http1(Http1Link),
    /// A stream slot on a shared HTTP/2 connection.
    Http2(Http2Link),
    /// Its own WebSocket connection, upgraded on demand.
    Ws(ws::WsLink),
    /// Its own event stream, opened on demand.
    Sse(sse::SseLink),
}

impl Link {
    /// Opens the connection before the window starts (closed loop, as wrk does); a failure
    /// is left for the first exchange to meet and count, except a connection still not up
    /// at `deadline`: `true` then, and that attempt is the first request's.
    pub(crate) async fn preconnect(&mut self, io: &Io, deadline: Instant) -> bool {
        match self {
            Link::Http1(l) => l.preconnect(io, deadline).await,
            Link::Http2(l) => l.preconnect(io, deadline).await,
            Link::Ws(l) => l.preconnect(io, deadline).await,
            Link::Sse(l) => l.preconnect(io, deadline).await,
        }
    }

    /// Sends the batch (one request over HTTP/2) and records every reply. `connecting` is
    /// set while a connection is being opened (a deadline then is a connect timeout);
    /// `done` counts the requests of the batch already recorded.
    pub(crate) async fn exchange(
        &mut self,
        io: &Io,
        batch: &[Planned],
        deadline: u64,
        connecting: &Cell<bool>,
        done: &Cell<usize>,
    ) -> Result<(), ErrorClass> {
        match self {
            Link::Http1(l) => l.exchange(io, batch, connecting, done).await,
            Link::Http2(l) => {
                l.exchange(io, batch[0], deadline, connecting).await?;
                done.set(1);
                l.finish_body().await;
                Ok(())
            }
            Link::Ws(l) => l.exchange(io, batch, connecting, done).await,
            Link::Sse(l) => l.exchange(io, batch, connecting, done).await,
        }
    }

    /// The run is over for this loop: a WebSocket says goodbye with a close frame (the
    /// other transports just drop their connection, or, over HTTP/2, reset a server stream
    /// held and let [`Links`] close the connection with a `GOAWAY`).
    pub(crate) async fn finish(&mut self) {
        match self {
            Link::Ws(l) => l.finish().await,
            // A server stream held is reset, so that its connection can close.
            Link::Http2(l) => l.close(),
            Link::Http1(_) | Link::Sse(_) => {}
        }
    }

    /// A bidirectional gRPC call's stream slot (its messages sent open loop, replies taken
    /// as they come: [`crate::worker`]'s duplex loop), else `None`.
    pub(crate) fn duplex(&mut self) -> Option<&mut Http2Link> {
        match self {
            Link::Http2(l) if l.duplex() => Some(l),
            _ => None,
        }
    }

    /// Whether its connection is still coming up after the exchange was cut short (over
    /// io_uring a connect goes in with the first request: the exchange's `connecting` cannot
    /// see it end).
    pub(crate) fn connecting(&self) -> bool {
        matches!(self, Link::Http1(l) if l.connecting())
    }

    /// After an exchange: a failed one leaves no HTTP/1.1 connection to reuse, and with
    /// keep-alive off none is reused either.
    pub(crate) fn settle(&mut self, failed: bool, keep_alive: bool) {
        match self {
            Link::Http1(l) if failed || !keep_alive => l.close(),
            // A reply arriving after its message failed would be taken for the next one's.
            Link::Ws(l) if failed => l.close(),
            Link::Sse(l) if failed => l.close(),
            Link::Http2(l) if failed => l.close(),
            Link::Http1(_) | Link::Http2(_) | Link::Ws(_) | Link::Sse(_) => {}
        }
    }
}

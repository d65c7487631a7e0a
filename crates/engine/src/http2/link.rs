//! An HTTP/2 stream slot: one request at a time as a stream on the connection the slot is
//! bound to, opened by the first slot that needs it and shared with the others; streams
//! the server never processed are sent again on a new connection.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use loadlab_grpc::frame::FrameScan;
use loadlab_grpc::GrpcStatus;
use tokio::time::Instant;

use super::{
    from_h2, ConnState, GoAwayWatch, H2Conn, H2Request, Live, Slot, Template, TimeoutCache,
};
use crate::error::ErrorClass;
use crate::recorder::Planned;
use crate::transport::{Io, Varying, MAX_RESENDS};

/// What a stream slot sends.
pub(crate) enum H2Source {
    /// The same request every time.
    Fixed(Arc<Template>),
    /// Requests that vary, rendered per request.
    Varying(Arc<Varying<H2Request>>),
}

/// Why a stream attempt ended without a reply.
enum StreamFailure {
    /// The server never processed it: send it again.
    Unprocessed,
    /// A failure to count.
    Failed(ErrorClass),
}

/// One request loop's stream slot and what its streams send.
pub(crate) struct Http2Link {
    source: H2Source,
    slot: Slot,
    timeouts: TimeoutCache,
    /// A rendered value before it becomes the request's (varying requests).
    scratch: Vec<u8>,
}

/// One request's parts, rendered once so that a stream sent again is the same request.
struct Rendered {
    /// Method, URI and headers (cloned into each attempt's request).
    head: http::request::Parts,
    body: Option<Bytes>,
    /// A gRPC call: `grpc-timeout` is added as it is sent, the reply read as gRPC.
    grpc: bool,
}

impl Http2Link {
    /// A slot on `conn` that sends what `source` holds.
    pub(crate) fn new(source: H2Source, conn: Rc<H2Conn>) -> Http2Link {
        Http2Link {
            source,
            slot: Slot { conn, cached: None },
            timeouts: TimeoutCache::default(),
            scratch: Vec::new(),
        }
    }

    /// Opens the slot's connection (if no other slot has) before the window starts.
    pub(crate) async fn preconnect(&mut self, io: &Io, deadline: Instant) -> bool {
        let unused = Cell::new(false);
        let attempt = connection(io, &self.slot.conn, &unused);
        match tokio::time::timeout_at(deadline, attempt).await {
            Ok(Ok(live)) => {
                self.slot.cached = Some(live);
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
        let rendered = match &self.source {
            H2Source::Fixed(_) => None,
            H2Source::Varying(v) => {
                let mut w = io
                    .traffic
                    .as_ref()
                    .expect("a worker of varying traffic has its drawing state")
                    .borrow_mut();
                let draw = v.traffic.draw(p);
                let kind = v.kind(p);
                let (request, body) = kind
                    .render(&draw, &mut w.gen, &mut self.scratch)
                    .map_err(|()| ErrorClass::Other)?;
                Some(Rendered {
                    head: request.into_parts().0,
                    body,
                    grpc: kind.is_grpc(),
                })
            }
        };
        let mut resends = 0;
        loop {
            let live = match self.slot.cached.take() {
                Some(live) if self.slot.conn.is_current(live.0) => live,
                _ => connection(io, &self.slot.conn, connecting).await?,
            };
            let (generation, state) = (live.0, live.2.clone());
            match self.stream(io, live, p, rendered.as_ref(), deadline).await {
                Ok(()) => return Ok(()),
                Err(StreamFailure::Unprocessed) if resends < MAX_RESENDS => {
                    self.slot.conn.invalidate(generation);
                    resends += 1;
                    io.recorder.borrow_mut().resent(p.intended);
                }
                Err(StreamFailure::Unprocessed) => return Err(ErrorClass::StreamReset),
                Err(StreamFailure::Failed(class)) => {
                    if state.goaway().is_some() {
                        self.slot.conn.invalidate(generation);
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
        let slot = &mut self.slot;
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
        let sent = io.clock.now();
        let (request, body, grpc_call) = match (&self.source, rendered) {
            (_, Some(r)) => {
                let mut request = http::Request::new(());
                *request.method_mut() = r.head.method.clone();
                *request.uri_mut() = r.head.uri.clone();
                *request.headers_mut() = r.head.headers.clone();
                if r.grpc {
                    request.headers_mut().insert(
                        super::GRPC_TIMEOUT,
                        self.timeouts.value(deadline.saturating_sub(sent)),
                    );
                }
                (request, r.body.as_ref(), r.grpc)
            }
            (H2Source::Fixed(template), None) => (
                template.request(deadline.saturating_sub(sent), &mut self.timeouts),
                template.body(),
                template.is_grpc(),
            ),
            (H2Source::Varying(_), None) => unreachable!("varying requests are rendered first"),
        };
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
        let mut grpc = super::grpc_status(response.headers());
        let encoded = response.headers().contains_key(super::GRPC_ENCODING);
        let mut body = response.into_body();
        let after_headers = |e: h2::Error| StreamFailure::Failed(from_h2(&e, false));
        // gRPC: the messages are not decoded, but their framing is checked as they pass.
        let mut frames = grpc_call.then(FrameScan::default);
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(after_headers)?;
            if let Some(f) = frames.as_mut() {
                f.feed(&chunk);
            }
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        if grpc_call && grpc.is_none() {
            if let Some(trailers) = body.trailers().await.map_err(after_headers)? {
                // Trailers without `grpc-status` end the call as UNKNOWN (gRPC over HTTP/2).
                grpc = Some(super::grpc_status(&trailers).unwrap_or(GrpcStatus::Unknown));
            }
        }
        // A reply whose messages are cut short or compressed with no encoding named is an
        // INTERNAL error for a gRPC client, whatever its status says.
        if grpc.is_some_and(GrpcStatus::is_ok) && frames.is_some_and(|f| f.finish(encoded).is_err())
        {
            grpc = Some(GrpcStatus::Internal);
        }
        let now = io.clock.now();
        let mut rec = io.recorder.borrow_mut();
        match (grpc_call, status, grpc) {
            (true, 200, Some(code)) => rec.grpc_reply(p, sent, now, code),
            // A 200 with no grpc-status and no trailers at all is not a gRPC reply.
            (true, 200, None) => return Err(StreamFailure::Failed(ErrorClass::MalformedResponse)),
            // A proxy's error page, or a plain HTTP/2 reply.
            _ => rec.response(p, sent, now, status),
        }
        Ok(())
    }
}

/// The live connection of `conn`, opening it if no slot has (the other slots bound to it
/// wait for that attempt instead of opening their own).
async fn connection(
    io: &Io,
    conn: &Rc<H2Conn>,
    connecting: &Cell<bool>,
) -> Result<Live, ErrorClass> {
    super::quiet_tracing();
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
        let state = Rc::new(ConnState::default());
        conn.opened(state.clone());
        let watched = GoAwayWatch::new(tcp, state.clone());
        let (send, driver) = h2::client::Builder::new()
            .initial_window_size(super::STREAM_WINDOW)
            .initial_connection_window_size(super::CONNECTION_WINDOW)
            .enable_push(false)
            // A server's header block is refused past this (and a CONTINUATION flood with
            // it), so a response's headers cost bounded memory.
            .max_header_list_size(super::MAX_HEADER_LIST)
            .handshake::<_, Bytes>(watched)
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

//! An in-process HTTP/2 (h2c, prior knowledge) server built on the `h2` crate, answering
//! plain requests or gRPC unary calls in one chosen way, and counting what it saw.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response};

use super::{accept_loop, Background, Stall};

/// How the server answers.
#[derive(Clone, Copy, Debug)]
pub enum H2Behavior {
    /// `200`, body `ok`.
    Ok,
    /// gRPC: an empty reply message, then `grpc-status` = `status(n)` for the n-th call
    /// (from 0), after `delay`.
    Grpc {
        status: fn(u64) -> u32,
        delay: Duration,
    },
    /// `200` `ok`, but once, `after` the first request, every answer is held for `hold`.
    StallOnce { after: Duration, hold: Duration },
    /// gRPC: `content-type: application/grpc`, this body as it is, then these trailers
    /// (hostile framings and statuses).
    GrpcRaw {
        body: &'static [u8],
        trailers: &'static [(&'static str, &'static str)],
    },
}

/// What the server saw.
#[derive(Default, Debug)]
pub struct H2Counters {
    /// TCP connections accepted.
    pub accepts: AtomicU64,
    /// Requests (streams) received.
    pub requests: AtomicU64,
    /// Replies sent per gRPC status code.
    pub grpc: Mutex<BTreeMap<u32, u64>>,
    /// The last `grpc-timeout` header received.
    pub last_grpc_timeout: Mutex<Option<String>>,
    /// The most streams open at once on one connection.
    pub max_streams: AtomicU64,
    /// Every request's path and body, in the order they ended.
    pub seen: Mutex<Vec<(String, Vec<u8>)>>,
}

/// A server on 127.0.0.1 with an OS-chosen port, running until dropped.
pub struct H2Server {
    pub addr: SocketAddr,
    pub counters: Arc<H2Counters>,
    _rt: Background,
}

impl H2Server {
    pub fn start(behavior: H2Behavior) -> H2Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let counters = Arc::new(H2Counters::default());
        let c = counters.clone();
        let stall = Arc::new(Mutex::new(Stall::default()));
        let (addr, rt) = accept_loop(listener, move |sock| {
            c.accepts.fetch_add(1, Ordering::Relaxed);
            connection(sock, behavior, c.clone(), stall.clone())
        });
        H2Server {
            addr,
            counters,
            _rt: rt,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn accepts(&self) -> u64 {
        self.counters.accepts.load(Ordering::Relaxed)
    }

    pub fn requests(&self) -> u64 {
        self.counters.requests.load(Ordering::Relaxed)
    }

    /// Replies sent per gRPC status code.
    pub fn grpc(&self) -> BTreeMap<u32, u64> {
        self.counters.grpc.lock().unwrap().clone()
    }

    /// Every request's path and body so far.
    pub fn seen(&self) -> Vec<(String, Vec<u8>)> {
        self.counters.seen.lock().unwrap().clone()
    }
}

async fn connection(
    sock: tokio::net::TcpStream,
    behavior: H2Behavior,
    c: Arc<H2Counters>,
    stall: Arc<Mutex<Stall>>,
) {
    let Ok(mut conn) = h2::server::handshake(sock).await else {
        return;
    };
    let open = Arc::new(AtomicU64::new(0));
    while let Some(Ok((request, respond))) = conn.accept().await {
        let n = c.requests.fetch_add(1, Ordering::Relaxed);
        let now_open = open.fetch_add(1, Ordering::Relaxed) + 1;
        c.max_streams.fetch_max(now_open, Ordering::Relaxed);
        if let Some(t) = request.headers().get("grpc-timeout") {
            *c.last_grpc_timeout.lock().unwrap() = t.to_str().ok().map(String::from);
        }
        let c = c.clone();
        let stall = stall.clone();
        let open = open.clone();
        let path = request
            .uri()
            .path_and_query()
            .map_or_else(String::new, |p| p.to_string());
        tokio::spawn(async move {
            let mut body = request.into_body();
            let mut bytes = Vec::new();
            while let Some(Ok(chunk)) = body.data().await {
                bytes.extend_from_slice(&chunk);
                let _ = body.flow_control().release_capacity(chunk.len());
            }
            c.seen.lock().unwrap().push((path, bytes));
            answer(respond, behavior, n, &c, &stall).await;
            open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

async fn answer(
    mut respond: h2::server::SendResponse<Bytes>,
    behavior: H2Behavior,
    n: u64,
    c: &H2Counters,
    stall: &Mutex<Stall>,
) {
    match behavior {
        H2Behavior::Ok => {
            let Ok(mut s) = respond.send_response(Response::new(()), false) else {
                return;
            };
            let _ = s.send_data(Bytes::from_static(b"ok"), true);
        }
        H2Behavior::StallOnce { after, hold } => {
            if let Some(until) = Stall::hold_until(stall, after, hold) {
                tokio::time::sleep_until(until.into()).await;
            }
            let Ok(mut s) = respond.send_response(Response::new(()), false) else {
                return;
            };
            let _ = s.send_data(Bytes::from_static(b"ok"), true);
        }
        H2Behavior::GrpcRaw { body, trailers } => {
            let mut r = Response::new(());
            r.headers_mut()
                .insert("content-type", HeaderValue::from_static("application/grpc"));
            let Ok(mut s) = respond.send_response(r, false) else {
                return;
            };
            if s.send_data(Bytes::from_static(body), false).is_err() {
                return;
            }
            let mut t = HeaderMap::new();
            for (name, value) in trailers {
                t.insert(*name, HeaderValue::from_static(value));
            }
            let _ = s.send_trailers(t);
        }
        H2Behavior::Grpc { status, delay } => {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let code = status(n);
            let mut r = Response::new(());
            r.headers_mut()
                .insert("content-type", HeaderValue::from_static("application/grpc"));
            let Ok(mut s) = respond.send_response(r, false) else {
                // The client gave up (a deadline): nothing was answered.
                return;
            };
            // An empty message: flag 0, length 0.
            if s.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), false)
                .is_err()
            {
                return;
            }
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", HeaderValue::from(code));
            if s.send_trailers(trailers).is_ok() {
                *c.grpc.lock().unwrap().entry(code).or_insert(0) += 1;
            }
        }
    }
}

//! The gRPC endpoints against the hello backend: replies, shared and per-request
//! connections, and an unreachable backend.

use std::time::Instant;

use crate::util::{concurrently, ms, Backend, Target, BACKEND_MESSAGE, WAIT_LIMIT};

fn target_for(backend: &Backend) -> Target {
    let uri = backend.uri();
    Target::start(|c| {
        c.workers = Some(2);
        c.grpc_backend = uri;
    })
}

#[test]
fn grpc_endpoints_return_the_backend_message() {
    let backend = Backend::start();
    let target = target_for(&backend);
    for path in ["/grpc_wait", "/fgrpc_wait", "/grpc_per"] {
        assert_eq!(target.ok(path), BACKEND_MESSAGE, "{path}");
    }
    assert_eq!(backend.counters.snapshot().say_calls, 3);
}

#[test]
fn grpc_per_opens_and_closes_one_connection_per_request() {
    let backend = Backend::start();
    let target = target_for(&backend);
    for _ in 0..3 {
        target.ok("/grpc_per");
    }
    let grpc = target.stats().grpc;
    assert_eq!(
        (grpc.per_request_connections, grpc.shared_client_connections),
        (3, 0)
    );
    assert_eq!(backend.counters.snapshot().accepted_connections, 3);
    // Each client is dropped after its request, and its connection with it.
    let deadline = Instant::now() + WAIT_LIMIT;
    while backend.counters.snapshot().open_connections > 0 && Instant::now() < deadline {
        std::thread::sleep(ms(20));
    }
    assert_eq!(backend.counters.snapshot().open_connections, 0);
}

#[test]
fn shared_client_reuses_one_connection() {
    let backend = Backend::start();
    let target = target_for(&backend);
    let (bodies, _) = concurrently(8, |i| {
        target.ok(if i % 2 == 0 {
            "/fgrpc_wait"
        } else {
            "/grpc_wait"
        })
    });
    assert!(bodies.iter().all(|b| b == BACKEND_MESSAGE));
    let grpc = target.stats().grpc;
    assert_eq!(
        (grpc.shared_client_connections, grpc.per_request_connections),
        (1, 0)
    );
    assert_eq!(backend.counters.snapshot().accepted_connections, 1);
}

#[test]
fn unreachable_backend_is_a_bad_gateway() {
    // A port that was free a moment ago: connections are refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target = Target::start(|c| {
        c.grpc_backend = format!("http://127.0.0.1:{port}").parse().unwrap();
    });
    let per = target.get("/grpc_per");
    assert_eq!(per.status, 502);
    assert!(
        per.body.starts_with("cannot connect to the gRPC backend"),
        "{}",
        per.body
    );
    assert_eq!(target.get("/fgrpc_wait").status, 502);
    let grpc = target.stats().grpc;
    assert_eq!(grpc.errors, 2);
    assert_eq!(grpc.backend, format!("http://127.0.0.1:{port}/"));
}

//! Hostile gRPC replies: a compressed message with no `grpc-encoding`, a length prefix
//! longer than the body, a message over the 4 MiB a client receives, trailers without
//! `grpc-status`, a `grpc-status` that is not a number. Each is the error a gRPC client reports (gRPC over HTTP/2 spec), never an OK,
//! and the run ends on time.

mod util;

use std::time::{Duration, Instant};

use util::h2::{H2Behavior, H2Server};
use util::RunOutput;

fn call(
    body: &'static [u8],
    trailers: &'static [(&'static str, &'static str)],
    extra: &[&str],
) -> RunOutput {
    let server = H2Server::start(H2Behavior::GrpcRaw { body, trailers });
    let addr = server.addr.to_string();
    let proto = util::helloworld_proto();
    let mut args = vec![
        addr.as_str(),
        "--proto",
        &proto,
        "--call",
        "helloworld.Greeter/SayHello",
        "-D",
        r#"{"name":"x"}"#,
        "-d",
        "1s",
        "--timeout",
        "1s",
        "-c",
        "2",
        "-q",
    ];
    args.extend_from_slice(extra);
    let started = Instant::now();
    let r = util::grpc(&args);
    assert!(started.elapsed() < Duration::from_secs(15));
    r
}

const OK: &[(&str, &str)] = &[("grpc-status", "0")];

fn assert_status(r: &RunOutput, status: &str, what: &str) {
    let j = r.json();
    assert!(
        j["grpc_status"][status].as_u64().unwrap_or(0) > 0,
        "{what}: {}",
        j["grpc_status"]
    );
    assert_eq!(
        j["grpc_status"].get("OK"),
        None,
        "{what}: {}",
        j["grpc_status"]
    );
    assert_eq!(j["successful"], 0, "{what}");
    assert!(r.error_count("grpc_status") > 0, "{what}");
    assert_eq!(r.code(), Some(1), "{what}");
}

#[test]
fn a_well_framed_reply_is_ok() {
    // The control for the cases below: the same server, a correct empty message.
    let r = call(&[0, 0, 0, 0, 0], OK, &[]);
    assert!(r.json()["successful"].as_u64().unwrap() > 0, "{}", r.json());
    assert_eq!(r.json()["errors_total"], 0);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
}

#[test]
fn a_compressed_message_without_grpc_encoding_is_internal() {
    for extra in [&[][..], &["--rate", "50"][..]] {
        assert_status(
            &call(&[1, 0, 0, 0, 1, 7], OK, extra),
            "INTERNAL",
            "compressed",
        );
    }
}

#[test]
fn a_length_prefix_longer_than_the_body_is_internal() {
    for extra in [&[][..], &["--rate", "50"][..]] {
        assert_status(
            &call(&[0, 0, 0, 0, 9, 1, 2], OK, extra),
            "INTERNAL",
            "length 9, 2 bytes",
        );
        assert_status(&call(&[0, 0, 0], OK, extra), "INTERNAL", "a cut header");
    }
}

#[test]
fn a_message_over_4_mib_is_resource_exhausted_and_not_read() {
    // A 16 MiB message, whole behind its header, then OK: a gRPC client refuses it at its
    // header (over the 4 MiB it receives) and the call is RESOURCE_EXHAUSTED. loadlab
    // resets the stream there: the run reads none of it, and its memory stays small.
    const BIG: u32 = 16 << 20;
    let mut body = vec![0u8];
    body.extend_from_slice(&BIG.to_be_bytes());
    body.resize(5 + BIG as usize, 7);
    let body: &'static [u8] = Box::leak(body.into_boxed_slice());
    for extra in [&[][..], &["--rate", "50"][..]] {
        let r = call(body, OK, extra);
        assert_status(&r, "RESOURCE_EXHAUSTED", "16 MiB");
        let rss = r.json()["generator_peak_rss_bytes"].as_u64().unwrap();
        assert!(rss < 256 << 20, "peak RSS {rss} bytes");
    }
    // 4 MiB exactly is a message a client receives.
    let mut body = vec![0u8];
    body.extend_from_slice(&(4u32 << 20).to_be_bytes());
    body.resize(5 + (4 << 20), 7);
    let body: &'static [u8] = Box::leak(body.into_boxed_slice());
    let r = call(body, OK, &["--rate", "20"]);
    assert!(r.json()["successful"].as_u64().unwrap() > 0, "{}", r.json());
    assert_eq!(r.json()["errors_total"], 0, "{}", r.json());
}

#[test]
fn a_status_that_is_not_a_number_is_unknown() {
    const CASES: [&[(&str, &str)]; 4] = [
        &[("grpc-status", "zero")],
        &[("grpc-status", "99")],
        &[("grpc-status", "-1")],
        &[("grpc-status", "")],
    ];
    for trailers in CASES {
        assert_status(
            &call(&[0, 0, 0, 0, 0], trailers, &[]),
            "UNKNOWN",
            &format!("{trailers:?}"),
        );
    }
}

#[test]
fn trailers_without_grpc_status_are_unknown() {
    for extra in [&[][..], &["--rate", "50"][..]] {
        assert_status(
            &call(&[0, 0, 0, 0, 0], &[("x-other", "1")], extra),
            "UNKNOWN",
            "no grpc-status in trailers",
        );
    }
}

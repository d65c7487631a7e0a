//! `--io uring`: plain HTTP/1.1 through io_uring gives the same results as epoll (the same
//! requests, statuses and error classes), in closed and open loop, with keep-alive on and
//! off, from several source addresses; the result says which interface carried the run.
//! The rest of the HTTP/1.1 suite (hostile servers, graceful closes, coordinated omission,
//! open-loop accuracy, sessions) runs a second time with `LOADLAB_IO=uring` in `.ci/run`.
//! What happens where the kernel refuses io_uring is `io_uring_refused.rs`.

mod util;

use util::{Behavior, TestServer};

/// `loadlab run` of `args` against `server` with `--io io`.
fn run(server: &TestServer, io: &str, args: &[&str]) -> util::RunOutput {
    let url = server.url("/");
    let mut argv = vec![url.as_str(), "--io", io, "-q"];
    argv.extend_from_slice(args);
    util::run(&argv)
}

fn count(j: &serde_json::Value, key: &str) -> u64 {
    j[key].as_u64().unwrap_or_else(|| panic!("{key}: {j}"))
}

#[test]
fn a_counted_run_gives_the_same_results_over_uring_and_epoll() {
    let server = TestServer::start(Behavior::Ok);
    for keep_alive in ["on", "off"] {
        let args = ["-c", "4", "-n", "400", "--keep-alive", keep_alive];
        let [epoll, uring] = ["epoll", "uring"].map(|io| run(&server, io, &args));
        let (e, u) = (epoll.json(), uring.json());
        assert_eq!(e["io"], "epoll", "{e}");
        assert_eq!(u["io"], "uring", "{u}");
        for key in ["requests", "successful", "errors_total"] {
            assert_eq!(count(e, key), count(u, key), "{key}: {e}\n{u}");
        }
        assert_eq!(count(u, "requests"), 400, "{u}");
        assert_eq!(u["status_codes"], e["status_codes"], "{e}\n{u}");
        // Keep-alive off: a connection per request, through the ring as well.
        let opened = count(u, "connections_opened");
        if keep_alive == "off" {
            assert_eq!(opened, 400, "{u}");
        } else {
            assert_eq!(opened, 4, "{u}");
        }
        // Each connect timed, also those that went in linked ahead of their request.
        let connect = &u["connect_time_ms"];
        assert_eq!(connect["count"], opened, "{u}");
        assert!(connect["min"].as_f64().unwrap() > 0.0, "{u}");
        assert!(
            connect["max"].as_f64().unwrap() < 2000.0,
            "a connect on loopback timed at seconds: {u}"
        );
        assert_eq!(uring.code(), Some(0), "{}", uring.stderr);
        assert!(u["warnings"].as_array().unwrap().is_empty(), "{u}");
    }
}

#[test]
fn auto_takes_io_uring_where_it_was_measured_better() {
    let server = TestServer::start(Behavior::Ok);
    for (args, io) in [
        (&["-c", "2", "-n", "50", "--keep-alive", "off"][..], "uring"),
        (&["-c", "2", "-n", "50"][..], "epoll"),
        (
            &["--rate", "100", "-n", "20", "--keep-alive", "off"][..],
            "uring",
        ),
        (&["--rate", "100", "-n", "20"][..], "uring"),
    ] {
        let r = run(&server, "auto", args);
        assert_eq!(r.json()["io"], io, "{args:?}: {}", r.json());
        assert!(
            r.json()["warnings"].as_array().unwrap().is_empty(),
            "{}",
            r.json()
        );
    }
}

#[test]
fn error_classes_are_the_same_over_uring() {
    // A refused connection, a reset after the request, a clean close without an answer,
    // bytes that are not HTTP: each under the class epoll gives it.
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        port
    };
    let url = format!("http://127.0.0.1:{refused}/");
    for io in ["epoll", "uring"] {
        for keep_alive in ["on", "off"] {
            let r = util::run(&[
                &url,
                "--io",
                io,
                "-c",
                "1",
                "-n",
                "3",
                "--keep-alive",
                keep_alive,
                "-q",
            ]);
            let j = r.json();
            assert_eq!(
                r.error_count("connect_refused"),
                count(j, "errors_total"),
                "{io} {keep_alive}: {j}"
            );
            assert!(r.error_count("connect_refused") > 0, "{io}: {j}");
            assert_eq!(count(j, "connections_opened"), 0, "{io} {keep_alive}: {j}");
        }
    }
    for (behavior, class) in [
        (Behavior::Reset, "connection_reset"),
        (Behavior::Close, "connection_closed"),
        (Behavior::Malformed, "malformed_response"),
        (Behavior::Status(503), "http_5xx"),
    ] {
        let server = TestServer::start(behavior);
        for io in ["epoll", "uring"] {
            let r = run(&server, io, &["-c", "2", "-n", "20", "--timeout", "2s"]);
            let j = r.json();
            assert_eq!(j["io"], io, "{j}");
            assert_eq!(
                r.error_count(class),
                count(j, "errors_total"),
                "{io} {class}: {j}"
            );
            assert!(r.error_count(class) > 0, "{io} {class}: {j}");
        }
    }
}

/// Over io_uring a connection opened for a request connects linked ahead of it, in the
/// same submission: a connect that never completes (the server's accept queue full, SYNs
/// dropped) is still a connect timeout, not a request timeout.
#[test]
fn a_connect_that_hangs_is_a_connect_timeout_over_uring() {
    let (l, fillers) = util::full_listener();
    let addr = l.local_addr().unwrap();
    let url = format!("http://{addr}/");
    for keep_alive in ["on", "off"] {
        let r = util::run(&[
            &url,
            "--io",
            "uring",
            "-n",
            "6",
            "-c",
            "2",
            "--timeout",
            "300ms",
            "--keep-alive",
            keep_alive,
            "-q",
        ]);
        let j = r.json();
        assert_eq!(j["io"], "uring", "{j}");
        assert_eq!(
            r.error_count("connect_timeout"),
            count(j, "errors_total"),
            "{keep_alive}: {j}"
        );
        assert!(r.error_count("connect_timeout") >= 4, "{keep_alive}: {j}");
        assert_eq!(count(j, "successful"), 0, "{j}");
    }
    drop((fillers, l));
}

#[test]
fn source_addresses_and_a_server_closing_kept_connections_work_over_uring() {
    // Every 5th response says `Connection: close`: the requests written behind it are
    // sent again on a new connection, and no request fails.
    let server = TestServer::start(Behavior::CloseAfter(5));
    let r = run(
        &server,
        "uring",
        &[
            "-c",
            "2",
            "-n",
            "200",
            "--source-addrs",
            "127.0.0.2-127.0.0.3",
        ],
    );
    let j = r.json();
    assert_eq!(j["io"], "uring", "{j}");
    assert_eq!(count(j, "successful"), 200, "{j}");
    assert_eq!(count(j, "errors_total"), 0, "{j}");
    assert!(count(j, "server_closes") >= 39, "{j}");
}

#[test]
fn https_and_http2_say_they_used_epoll() {
    // A plain server, asked for HTTP/2 with --io uring: the run says io_uring carries
    // plain HTTP/1.1 and WebSocket only, once, and ran on epoll.
    let server = TestServer::start(Behavior::Ok);
    let r = run(
        &server,
        "uring",
        &["--http2", "-c", "1", "-n", "1", "--timeout", "1s"],
    );
    let j = r.json();
    assert_eq!(j["io"], "epoll", "{j}");
    let notes = util::warnings_with(j, "--io uring");
    assert_eq!(notes.len(), 1, "{j}");
    assert!(
        notes[0].contains("plain http:// HTTP/1.1 and ws:// WebSocket only"),
        "{j}"
    );
}

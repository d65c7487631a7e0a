//! When io_uring is refused, the io_uring greeters (and `greeter-minimal` in its three
//! io_uring modes) exit with status 3 and a message naming the cause and the fix, before
//! any ready line; the epoll ones (and `greeter-minimal --io epoll`) do not care.

mod harness;

use harness::{limit_memlock, refuse_io_uring, start_with, Started, EXIT_UNAVAILABLE};

const ARGS: [&str; 4] = ["--bind", "127.0.0.1:0", "--threads", "2"];

const MINIMAL: &str = env!("CARGO_BIN_EXE_greeter-minimal");

fn expect_unavailable(program: &str, customize: fn(&mut std::process::Command), cause: &str) {
    expect_unavailable_with(program, &ARGS, customize, cause);
}

fn expect_unavailable_with(
    program: &str,
    args: &[&str],
    customize: fn(&mut std::process::Command),
    cause: &str,
) {
    match start_with(program, args, customize) {
        Started::Ready(_) => panic!("{program}: served although io_uring was refused"),
        Started::Exited { status, stderr } => {
            assert_eq!(status.code(), Some(EXIT_UNAVAILABLE), "{program}: {stderr}");
            assert!(
                stderr.contains("io_uring unavailable") && stderr.contains(cause),
                "{program}: {stderr}"
            );
            assert!(stderr.contains("fix:"), "{program}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{program}: {stderr}");
        }
    }
}

#[test]
fn seccomp_refusal_is_named() {
    for program in [
        env!("CARGO_BIN_EXE_greeter-glommio"),
        env!("CARGO_BIN_EXE_greeter-monoio"),
    ] {
        expect_unavailable(program, refuse_io_uring, "seccomp");
    }
}

#[test]
fn minimal_uring_modes_name_the_seccomp_refusal() {
    for mode in ["uring-poll", "uring", "hybrid"] {
        let args = [&ARGS[..], &["--io", mode]].concat();
        expect_unavailable_with(MINIMAL, &args, refuse_io_uring, "seccomp");
    }
    // The default mode is uring-poll.
    expect_unavailable(MINIMAL, refuse_io_uring, "seccomp");
}

#[test]
fn glommio_memlock_limit_is_named() {
    expect_unavailable(
        env!("CARGO_BIN_EXE_greeter-glommio"),
        |command| limit_memlock(command, 64 * 1024),
        "RLIMIT_MEMLOCK too low (64 KiB",
    );
}

#[test]
fn epoll_runtimes_ignore_io_uring_refusal() {
    let minimal_epoll = [&ARGS[..], &["--io", "epoll"]].concat();
    for (program, args) in [
        (env!("CARGO_BIN_EXE_greeter-smol"), &ARGS[..]),
        (MINIMAL, &minimal_epoll[..]),
    ] {
        match start_with(program, args, refuse_io_uring) {
            Started::Ready(server) => {
                assert_eq!(harness::check_say_hello(server.addr(), 1), 1);
                assert!(server.terminate().0.success());
            }
            Started::Exited { status, stderr } => panic!("{program}: {status}: {stderr}"),
        }
    }
}

//! The command line shared by the greeter binaries: `--bind`, `--threads`, exit statuses,
//! and `--io` for `greeter-minimal`.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::process::ExitCode;

use crate::launch::{self, Options};
use crate::runtimes::{IoMode, Runtime};
use clap::{Arg, CommandFactory, FromArgMatches, Parser};
use loadlab_target_common::net;

/// helloworld.Greeter/SayHello (gRPC) for the async-runtime comparison. Prints
/// `listening on ADDR` once ready; SIGTERM or SIGINT stops it. Exit status: 0 stopped by a
/// signal, 1 failed, 2 bad arguments, 3 io_uring unavailable (the message says why and how
/// to fix it).
#[derive(Debug, Parser)]
struct Args {
    /// Address to listen on; `:PORT` means 127.0.0.1:PORT, port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:50051", value_parser = net::parse_bind_addr)]
    bind: SocketAddr,
    /// Runtime threads (workers, or executors with one listener each); default: one per CPU.
    #[arg(long)]
    threads: Option<NonZeroUsize>,
}

/// Parses `argv` (program name first) and serves on `runtime` until a stop signal. The
/// greeter binaries and `loadlab serve greeter-*` both start here. For
/// [`Runtime::Minimal`], `--io` chooses the mode and the one given is its default.
pub fn main<I, T>(runtime: Runtime, argv: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let mut command = Args::command()
        .name(runtime.binary())
        .version(env!("CARGO_PKG_VERSION"));
    if let Runtime::Minimal(default) = runtime {
        command = command.arg(
            Arg::new("io")
                .long("io")
                .value_name("MODE")
                .value_parser(IoMode::ALL.map(IoMode::name))
                .default_value(default.name())
                .help(
                    "How sockets are read and written: epoll (readiness, no io_uring), \
                     uring-poll (io_uring POLL_ADD readiness, then syscalls), uring \
                     (io_uring ACCEPT/RECV/SEND completions), hybrid (the syscall first, \
                     io_uring when it would block)",
                ),
        );
    }
    let parsed = command.try_get_matches_from(argv).and_then(|matches| {
        let args = Args::from_arg_matches(&matches)?;
        let io = matches.try_get_one::<String>("io").ok().flatten().cloned();
        Ok((args, io))
    });
    let (args, io) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() { 2 } else { 0 });
        }
    };
    let runtime = match (runtime, io.map(|io| io.parse::<IoMode>())) {
        (Runtime::Minimal(_), Some(Ok(mode))) => Runtime::Minimal(mode),
        (runtime, _) => runtime,
    };
    let options = Options {
        bind: args.bind,
        threads: args.threads.unwrap_or_else(Options::default_threads),
    };
    let ready = |addr| println!("listening on {addr}");
    match launch::run(runtime, &options, ready) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let mut message = format!("{runtime}: {error}");
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                message.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            eprintln!("{message}");
            ExitCode::from(error.exit_status())
        }
    }
}

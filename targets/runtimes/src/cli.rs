//! The command line shared by the greeter binaries: `--bind`, `--threads`, exit statuses.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::process::ExitCode;

use crate::launch::{self, Options};
use crate::runtimes::Runtime;
use clap::{CommandFactory, FromArgMatches, Parser};
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
/// greeter binaries and `loadlab serve greeter-*` both start here.
pub fn main<I, T>(runtime: Runtime, argv: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let command = Args::command()
        .name(runtime.binary())
        .version(env!("CARGO_PKG_VERSION"));
    let args = match command
        .try_get_matches_from(argv)
        .and_then(|matches| Args::from_arg_matches(&matches))
    {
        Ok(args) => args,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() { 2 } else { 0 });
        }
    };
    let options = Options {
        bind: args.bind,
        threads: args.threads.unwrap_or_else(Options::default_threads),
    };
    let ready = |addr| println!("listening on {addr}");
    match launch::run(runtime, &options, ready) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let mut message = format!("{}: {error}", runtime.binary());
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

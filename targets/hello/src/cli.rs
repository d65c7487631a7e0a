//! Command line of the server, shared by its own binary and `loadlab serve hello`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::{Config, LatencyModel};
use anyhow::Context;
use clap::Parser;
use loadlab_target_common::{net, signal};

/// gRPC hello backend: hello.HelloService/Say with a latency model,
/// helloworld.Greeter/SayHello, and ticker.Ticker/Subscribe (a server stream of ticks).
/// Prints `listening on ADDR` once ready; SIGTERM stops it.
#[derive(Debug, Parser)]
#[command(name = "loadlab-hello", version)]
struct Args {
    /// Address to listen on; `:PORT` means 127.0.0.1:PORT, port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:50051", value_parser = net::parse_bind_addr)]
    bind: SocketAddr,
    /// Delay of each Say call: fixed:5ms, uniform:2ms..300ms or
    /// lognormal:median=20ms,p99=300ms[,max=600ms].
    #[arg(long, default_value_t = LatencyModel::default())]
    latency: LatencyModel,
    /// HTTP/2 max concurrent streams per connection (default: the server's).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_concurrent_streams: Option<u32>,
    /// Seconds in-flight calls may take to finish after SIGTERM.
    #[arg(long, default_value_t = 10)]
    shutdown_timeout: u64,
    /// The gap between two ticks of each ticker.Ticker/Subscribe stream (e.g. 100ms, 1s).
    #[arg(long, default_value = "100ms", value_parser = parse_gap)]
    tick_every: Duration,
    /// How long each note of a ticker.Ticker/Chat stream takes to answer, and each note of
    /// a ticker.Ticker/Upload stream to take in (e.g. 5ms).
    #[arg(long, default_value = "0ms", value_parser = humantime::parse_duration)]
    chat_delay: Duration,
    /// Workers every Chat and Upload stream's notes share, each held for a note's delay
    /// (default: no limit): a capacity of pool ÷ delay notes a second.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    chat_pool: Option<u32>,
}

/// A gap above zero, as humantime reads it.
fn parse_gap(s: &str) -> Result<Duration, String> {
    match humantime::parse_duration(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("above 0 (e.g. 100ms)".into()),
        Err(e) => Err(format!("{e} (e.g. 100ms)")),
    }
}

/// Parses `args` (the first is the program name) and runs the server until SIGTERM.
pub fn main<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args = match Args::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let listener = net::bind(args.bind, net::DEFAULT_BACKLOG).context("--bind")?;
    let shutdown = signal::shutdown_signal().context("cannot install signal handlers")?;
    println!("{}", net::ready_line(&listener)?);
    let config = Config {
        latency: args.latency,
        max_concurrent_streams: args.max_concurrent_streams,
        shutdown_timeout: Duration::from_secs(args.shutdown_timeout),
        tick_every: args.tick_every,
        chat_delay: args.chat_delay,
        chat_pool: args.chat_pool,
    };
    crate::run(listener, config, Arc::default(), shutdown).await?;
    Ok(())
}

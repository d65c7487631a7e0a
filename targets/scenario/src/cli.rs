//! Command line of the server, shared by its own binary and `loadlab serve scenario`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use crate::{Config, KeepAlive};
use anyhow::Context;
use clap::Parser;
use loadlab_target_common::{net, signal};
use tonic::transport::Uri;

/// actix-web scenario server: the endpoints of the source benchmark. Prints
/// `listening on ADDR` once ready; SIGTERM shuts it down gracefully.
#[derive(Debug, Parser)]
#[command(name = "loadlab-target", version)]
struct Args {
    /// Address to listen on; `:PORT` means 127.0.0.1:PORT, port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080", value_parser = net::parse_bind_addr)]
    bind: SocketAddr,
    /// Worker threads [default: one per physical core].
    #[arg(long)]
    workers: Option<usize>,
    /// Listen backlog (the kernel caps it at net.core.somaxconn).
    #[arg(long, default_value_t = net::DEFAULT_BACKLOG)]
    backlog: u32,
    /// Keep-alive timeout in seconds, or `off`.
    #[arg(long, default_value = "5")]
    keep_alive: KeepAlive,
    /// Connections per worker before it stops accepting.
    #[arg(long, default_value_t = 25_000)]
    max_connections: usize,
    /// Concurrent TLS handshakes per worker (no effect: the server speaks plain HTTP).
    #[arg(long, default_value_t = 256)]
    max_connection_rate: usize,
    /// Seconds in-flight requests may take to finish after SIGTERM.
    #[arg(long, default_value_t = 30)]
    shutdown_timeout: u64,
    /// Milliseconds /sleep blocks and /f_sleep waits.
    #[arg(long, default_value_t = 100)]
    sleep_ms: u64,
    /// Milliseconds the actor spends on each message.
    #[arg(long, default_value_t = 100)]
    actor_delay_ms: u64,
    /// Messages the actor's mailbox holds; /send_nowait drops (and counts) the rest.
    #[arg(long, default_value_t = 16)]
    mailbox: usize,
    /// Threads of the blocking pool behind /page.
    #[arg(long, default_value_t = 4)]
    blocking_threads: usize,
    /// The hello.HelloService backend of the /grpc_* endpoints.
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    grpc_backend: Uri,
    /// Sessions of the /flow endpoints kept for /flow/stats; when full, a login forgets the
    /// session that logged out first, or else the oldest. About 0.6 KiB each, 1.5 KiB at most.
    #[arg(long, default_value_t = 200_000)]
    flow_sessions: usize,
    /// Page requests (/flow/page/N) served at once; the others wait in line (first come,
    /// first served). With --flow-work-ms, pages top out at capacity / work per second: a
    /// knee for load plans [default: no limit].
    #[arg(long)]
    flow_capacity: Option<usize>,
    /// Milliseconds each /flow/page/N request holds its place (an async wait: the worker
    /// stays free).
    #[arg(long, default_value_t = 0)]
    flow_work_ms: u64,
}

impl Args {
    fn config(&self) -> Config {
        Config {
            workers: self.workers,
            max_connections: self.max_connections,
            max_connection_rate: self.max_connection_rate,
            keep_alive: self.keep_alive,
            shutdown_timeout: Duration::from_secs(self.shutdown_timeout),
            sleep: Duration::from_millis(self.sleep_ms),
            actor_delay: Duration::from_millis(self.actor_delay_ms),
            mailbox: self.mailbox,
            blocking_threads: self.blocking_threads,
            grpc_backend: self.grpc_backend.clone(),
            flow_sessions: self.flow_sessions,
            flow_capacity: self.flow_capacity,
            flow_work: Duration::from_millis(self.flow_work_ms),
        }
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
    match actix_web::rt::System::new().block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let config = args.config();
    // Refuse bad settings before binding, naming the flag.
    config.validate().map_err(|e| {
        anyhow::anyhow!(
            "invalid value '{}' for --{}: expected {}",
            e.value,
            e.field,
            e.expected
        )
    })?;
    let listener = net::bind(args.bind, args.backlog).context("--bind")?;
    let shutdown = signal::shutdown_signal().context("cannot install signal handlers")?;
    println!("{}", net::ready_line(&listener)?);
    crate::run(listener, config, shutdown).await?;
    Ok(())
}

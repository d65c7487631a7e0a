//! `greeter-minimal`: the greeter on [`Runtime::Minimal`], `--io epoll|uring-poll|uring|hybrid`.

use loadlab_greeters::{
    cli,
    runtimes::{IoMode, Runtime},
};

fn main() -> std::process::ExitCode {
    cli::main(Runtime::Minimal(IoMode::UringPoll), std::env::args_os())
}

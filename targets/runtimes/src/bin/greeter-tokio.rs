//! `greeter-tokio`: the greeter on [`Runtime::Tokio`].

use loadlab_greeters::{cli, runtimes::Runtime};

fn main() -> std::process::ExitCode {
    cli::main(Runtime::Tokio, std::env::args_os())
}

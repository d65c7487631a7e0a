//! `greeter-tokio-pc`: the greeter on [`Runtime::TokioPerCore`].

use loadlab_greeters::{cli, runtimes::Runtime};

fn main() -> std::process::ExitCode {
    cli::main(Runtime::TokioPerCore, std::env::args_os())
}

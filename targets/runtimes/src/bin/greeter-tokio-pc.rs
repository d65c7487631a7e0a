//! `greeter-tokio-pc`: the greeter on [`Runtime::TokioPerCore`].

mod cli;

use loadlab_greeters::runtimes::Runtime;

fn main() -> std::process::ExitCode {
    cli::main(Runtime::TokioPerCore)
}

//! `greeter-tokio`: the greeter on [`Runtime::Tokio`].

mod cli;

use loadlab_greeters::runtimes::Runtime;

fn main() -> std::process::ExitCode {
    cli::main(Runtime::Tokio)
}

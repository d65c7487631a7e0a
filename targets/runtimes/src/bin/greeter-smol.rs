//! `greeter-smol`: the greeter on [`Runtime::Smol`].

mod cli;

use loadlab_greeters::runtimes::Runtime;

fn main() -> std::process::ExitCode {
    cli::main(Runtime::Smol)
}

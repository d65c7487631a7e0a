//! `greeter-monoio`: the greeter on [`Runtime::Monoio`].

mod cli;

use loadlab_greeters::runtimes::Runtime;

fn main() -> std::process::ExitCode {
    cli::main(Runtime::Monoio)
}

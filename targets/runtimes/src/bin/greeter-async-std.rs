//! `greeter-async-std`: the greeter on [`Runtime::AsyncStd`].

mod cli;

use loadlab_greeters::runtimes::Runtime;

fn main() -> std::process::ExitCode {
    cli::main(Runtime::AsyncStd)
}

//! `greeter-monoio`: the greeter on [`Runtime::Monoio`].

use loadlab_greeters::{cli, runtimes::Runtime};

fn main() -> std::process::ExitCode {
    cli::main(Runtime::Monoio, std::env::args_os())
}

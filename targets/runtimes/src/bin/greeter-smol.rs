//! `greeter-smol`: the greeter on [`Runtime::Smol`].

use loadlab_greeters::{cli, runtimes::Runtime};

fn main() -> std::process::ExitCode {
    cli::main(Runtime::Smol, std::env::args_os())
}

//! `greeter-async-std`: the greeter on [`Runtime::AsyncStd`].

use loadlab_greeters::{cli, runtimes::Runtime};

fn main() -> std::process::ExitCode {
    cli::main(Runtime::AsyncStd, std::env::args_os())
}

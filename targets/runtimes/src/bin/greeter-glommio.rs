//! `greeter-glommio`: the greeter on [`Runtime::Glommio`].

use loadlab_greeters::{cli, runtimes::Runtime};

fn main() -> std::process::ExitCode {
    cli::main(Runtime::Glommio, std::env::args_os())
}

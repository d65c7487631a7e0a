//! `greeter-glommio`: the greeter on [`Runtime::Glommio`].

mod cli;

use loadlab_greeters::runtimes::Runtime;

fn main() -> std::process::ExitCode {
    cli::main(Runtime::Glommio)
}

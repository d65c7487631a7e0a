//! `loadlab-hello`: the command line of [`loadlab_hello::cli`].

fn main() -> std::process::ExitCode {
    loadlab_hello::cli::main(std::env::args_os())
}

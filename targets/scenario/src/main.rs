//! `loadlab-target`: the command line of [`loadlab_target::cli`].

fn main() -> std::process::ExitCode {
    loadlab_target::cli::main(std::env::args_os())
}

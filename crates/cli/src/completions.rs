//! `loadlab completions SHELL`: a completion script written from the clap definitions, so
//! it knows every command, flag and value `--help` does.

use std::io::Write;
use std::process::ExitCode;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::args::{Cli, CompletionsArgs};

/// The completion script for `shell`.
fn script(shell: Shell) -> Vec<u8> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "loadlab", &mut out);
    out
}

/// Prints the script for `a.shell` on standard output.
pub(crate) fn cmd_completions(a: &CompletionsArgs) -> anyhow::Result<ExitCode> {
    std::io::stdout().write_all(&script(a.shell))?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shell_completes_every_command() {
        let commands: Vec<String> = Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        assert!(commands.len() >= 14, "{commands:?}");
        for shell in [
            Shell::Bash,
            Shell::Zsh,
            Shell::Fish,
            Shell::Elvish,
            Shell::PowerShell,
        ] {
            let text = String::from_utf8(script(shell)).unwrap();
            for c in &commands {
                assert!(text.contains(c.as_str()), "{shell}: no `{c}`");
            }
            assert!(text.contains("slo"), "{shell}: no --slo");
        }
    }
}

//! `loadlab man`: the manual page (roff) written from the clap definitions: loadlab.1 on
//! standard output, or one page per command in a directory.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;

use crate::args::{Cli, ManArgs};

/// loadlab.1: every command, flag and exit status.
fn page() -> std::io::Result<Vec<u8>> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut page)?;
    Ok(page)
}

/// Writes loadlab.1 and one page per command (loadlab-run.1, ...) into `dir`; their names.
fn write_pages(dir: &Path) -> anyhow::Result<Vec<String>> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--out {}: cannot create it", dir.display()))?;
    clap_mangen::generate_to(Cli::command(), dir)
        .with_context(|| format!("--out {}: cannot write the pages", dir.display()))?;
    let mut pages: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("loadlab") && n.ends_with(".1"))
        .collect();
    pages.sort();
    Ok(pages)
}

/// Prints loadlab.1, or writes every command's page into `--out`.
pub(crate) fn cmd_man(a: &ManArgs) -> anyhow::Result<ExitCode> {
    match &a.out {
        None => std::io::stdout().write_all(&page()?)?,
        Some(dir) => {
            let pages = write_pages(dir)?;
            eprintln!(
                "loadlab: wrote {} pages in {}: {}",
                pages.len(),
                dir.display(),
                pages.join(", ")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_every_command_and_out_writes_one_each() {
        let text = String::from_utf8(page().unwrap()).unwrap();
        assert!(text.starts_with(".ie"), "{}", &text[..40]);
        let commands: Vec<String> = Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        for c in &commands {
            assert!(
                text.contains(&format!("loadlab\\-{}", c.replace('-', "\\-"))),
                "no {c}"
            );
        }
        let dir = std::env::temp_dir().join(format!("loadlab-man-{}", std::process::id()));
        let pages = write_pages(&dir).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert!(pages.contains(&"loadlab.1".to_string()), "{pages:?}");
        for c in &commands {
            assert!(
                pages.contains(&format!("loadlab-{c}.1")),
                "no page for {c}: {pages:?}"
            );
        }
    }
}

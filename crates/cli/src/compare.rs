//! `loadlab compare`: reads every input (exit 2 naming the one that is neither a bundle nor a
//! run result), compares, prints text or `--json`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use loadlab_report::compare::{self, Input, Method};

use crate::args::CompareArgs;
use crate::BadInput;

pub fn cmd_compare(a: &CompareArgs) -> anyhow::Result<ExitCode> {
    // clap has already required two inputs or more.
    let inputs = a
        .inputs
        .iter()
        .map(|p| Input::load(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| BadInput(e.to_string()))?;
    for torn in a
        .inputs
        .iter()
        .flat_map(|p| loadlab_lab::bundle::torn_lines(p))
    {
        eprintln!("loadlab: warning: {torn}");
    }
    let method = Method {
        noise_threshold: a.noise_threshold,
        ..Method::default()
    };
    let refs: Vec<&Input> = inputs.iter().collect();
    let comparison = compare::compare(&refs, &method);
    if let Some(path) = &a.html {
        std::fs::write(path, loadlab_report::html::render_comparison(&comparison))
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("loadlab: wrote {}", path.display());
    }
    let mut stdout = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut stdout, &comparison).context("writing the comparison")?;
        writeln!(stdout)?;
    } else {
        write!(stdout, "{}", compare::text::render(&comparison))?;
    }
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}

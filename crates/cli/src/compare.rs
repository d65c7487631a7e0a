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
    let html_to_stdout = a.html.as_ref().is_some_and(|p| p.as_os_str() == "-");
    if html_to_stdout && a.json {
        return Err(BadInput(
            "--html - and --json both write to standard output: give --html a file".into(),
        )
        .into());
    }
    if let Some(path) = &a.html {
        let page = loadlab_report::html::render_comparison(&comparison);
        crate::outputs::emit("--html", path, page.as_bytes())?;
        if !html_to_stdout {
            eprintln!("loadlab: wrote {}", path.display());
        }
    }
    if html_to_stdout {
        // The page took standard output: the text goes to standard error.
        eprint!("{}", compare::text::render(&comparison));
        return Ok(ExitCode::SUCCESS);
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

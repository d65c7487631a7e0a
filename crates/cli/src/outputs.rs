//! The outputs of `loadlab run` and `loadlab grpc` besides the summary: JSON, an
//! HdrHistogram interval log, CSV, JUnit XML, each to a file (written whole, then renamed
//! into place) or to standard output (`-`).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use loadlab_engine::RunResult;
use loadlab_lab::gate::GateOutcome;
use loadlab_lab::junit;

use crate::args::OutputArgs;
use crate::BadInput;

/// The output flags given, with their paths.
fn given(out: &OutputArgs) -> Vec<(&'static str, &PathBuf)> {
    [
        ("--json", &out.json),
        ("--hlog", &out.hlog),
        ("--csv", &out.csv),
        ("--junit", &out.junit),
    ]
    .into_iter()
    .filter_map(|(flag, p)| p.as_ref().map(|p| (flag, p)))
    .collect()
}

pub(crate) fn is_stdout(p: &Path) -> bool {
    p.as_os_str() == "-"
}

/// Whether an output goes to standard output: then the summary goes to standard error.
pub(crate) fn stdout_taken(out: &OutputArgs) -> bool {
    given(out).iter().any(|(_, p)| is_stdout(p))
}

/// Refuses, before any load, two outputs on standard output, two outputs to one file, and a
/// file whose directory does not exist.
pub(crate) fn check(out: &OutputArgs) -> Result<(), BadInput> {
    let outs = given(out);
    let to_stdout: Vec<&str> = outs
        .iter()
        .filter(|(_, p)| is_stdout(p))
        .map(|(f, _)| *f)
        .collect();
    if to_stdout.len() > 1 {
        return Err(BadInput(format!(
            "{}: only one output can go to standard output (`-`); give the others a file",
            to_stdout.join(" and ")
        )));
    }
    for (i, (flag, p)) in outs.iter().enumerate() {
        if is_stdout(p) {
            continue;
        }
        if let Some((other, _)) = outs[..i].iter().find(|(_, q)| q == p) {
            return Err(BadInput(format!(
                "{other} and {flag} both write {}: give each its own file",
                p.display()
            )));
        }
        check_dir(flag, p)?;
    }
    Ok(())
}

/// Refuses, before any load, an output file whose directory does not exist.
pub(crate) fn check_dir(flag: &str, p: &Path) -> Result<(), BadInput> {
    if is_stdout(p) {
        return Ok(());
    }
    match p.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) if !dir.is_dir() => Err(BadInput(format!(
            "{flag} {}: the directory {} does not exist",
            p.display(),
            dir.display()
        ))),
        _ => Ok(()),
    }
}

/// Writes `text` to `path` (whole, renamed into place) or to standard output.
pub(crate) fn emit(flag: &str, path: &Path, text: &[u8]) -> anyhow::Result<()> {
    if is_stdout(path) {
        let mut o = std::io::stdout().lock();
        o.write_all(text)
            .and_then(|()| o.flush())
            .with_context(|| format!("{flag} -: cannot write to standard output"))?;
        return Ok(());
    }
    // A path that exists and is not a regular file (`/dev/null`, `/dev/stderr`, a FIFO) is
    // written in place: a temporary file renamed onto it would replace the device itself (as
    // root, `--json /dev/null` once turned the machine's /dev/null into a regular file).
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        std::fs::write(path, text)
            .with_context(|| format!("{flag}: cannot write {}", path.display()))?;
        return Ok(());
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text)
        .with_context(|| format!("{flag}: cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("{flag}: cannot write {}", path.display()))?;
    Ok(())
}

/// Writes every output asked for. Each is attempted even when one before it failed (a
/// result already measured is not lost to a full disk for one of them); returns the lines
/// that say where each went, and the first error.
pub(crate) fn write_all(
    out: &OutputArgs,
    result: &RunResult,
    gates: &[GateOutcome],
) -> (Vec<String>, Option<anyhow::Error>) {
    let mut said = Vec::new();
    let mut first_err = None;
    for (flag, path) in given(out) {
        let text: anyhow::Result<Vec<u8>> = match flag {
            "--json" => serde_json::to_string_pretty(result)
                .map(|t| (t + "\n").into_bytes())
                .context("serializing the result"),
            "--hlog" => {
                let mut buf = Vec::new();
                loadlab_engine::export::write_hlog(result, None, &mut buf)
                    .map(|()| buf)
                    .context("--hlog: the per-second histograms")
            }
            "--csv" => {
                let mut buf = Vec::new();
                loadlab_engine::export::write_csv(result, &mut buf)
                    .map(|()| buf)
                    .context("--csv: the per-second histograms")
            }
            _ => Ok(junit_suite(result, gates).to_xml().into_bytes()),
        };
        match text.and_then(|t| emit(flag, path, &t)) {
            Ok(()) if is_stdout(path) => {}
            Ok(()) => said.push(format!("{flag}: {}", path.display())),
            // The first error is the command's; any later one is said here.
            Err(e) if first_err.is_some() => eprintln!("loadlab: error: {e:#}"),
            Err(e) => first_err = Some(e),
        }
    }
    (said, first_err)
}

/// The run's gates as a JUnit suite: one test case for the run itself, one per gate.
fn junit_suite(r: &RunResult, gates: &[GateOutcome]) -> junit::Suite {
    let mut properties = vec![
        ("url".to_string(), r.url.clone()),
        (
            "protocol".to_string(),
            format!("{:?}", r.protocol).to_lowercase(),
        ),
        ("requests".to_string(), r.requests.to_string()),
        ("achieved_rps".to_string(), format!("{:.1}", r.achieved_rps)),
        ("errors_total".to_string(), r.errors_total.to_string()),
    ];
    if let Some(o) = r.offered_rps {
        // A flow's rate counts sessions.
        let key = if r.sessions.is_some() {
            "offered_sessions_per_s"
        } else {
            "offered_rps"
        };
        properties.insert(1, (key.to_string(), format!("{o}")));
    }
    if r.generator_limited {
        properties.push((
            "generator_limited".to_string(),
            r.generator_notes.join("; "),
        ));
    }
    junit::Suite {
        name: format!("loadlab {} {}", r.method, r.url),
        time_s: r.warmup_s + r.duration_s,
        timestamp: r.environment.started_at.clone(),
        properties,
        cases: std::iter::once(junit::Case {
            // The run itself: it fails as the exit status does when no request succeeded.
            name: "some requests succeeded".into(),
            classname: "loadlab.run".into(),
            skipped: None,
            failure: r.all_failed().then(|| {
                format!(
                    "no request succeeded: {} errors over {} requests",
                    r.errors_total, r.requests
                )
            }),
            output: format!(
                "{} successful of {} responses, {} errors, achieved {:.1}/s",
                r.successful, r.requests, r.errors_total, r.achieved_rps
            ),
        })
        .chain(gates.iter().map(|g| junit::Case {
            name: g.gate.clone(),
            classname: "loadlab.slo".into(),
            failure: (!g.passed).then(|| format!("{} failed: {}", g.gate, g.shown)),
            skipped: None,
            output: g.shown.clone(),
        }))
        .collect(),
    }
}

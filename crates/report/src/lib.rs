//! Reports rendered from a result bundle on disk (never from a run's memory), so a run can
//! be re-rendered, compared or merged later.
//!
//! # Layout
//! - [`answer`]: what both reports open with: each knee, its why, the SLO clauses around
//!   it, the best configuration and the warnings.
//! - [`markdown`]: `report.md`, tables in the shape of the source experiments.
//! - [`html`]: `report.html`, the same with charts, one self-contained file.
//! - [`svg`]: the line charts `report.html` draws.
//! - [`compare`]: `loadlab compare`, bundles or run results side by side, each difference
//!   tested against the noise.
//! - [`baseline`]: `loadlab lab --baseline`: the gate on regressions, and its report section.

pub mod answer;
pub mod baseline;
pub mod compare;
pub mod format;
pub mod html;
pub mod knee;
pub mod markdown;
pub mod svg;
pub mod tune;

pub use html::{html_path, write_html};
pub use markdown::{knee_lines, render_bundle};

use std::path::{Path, PathBuf};

/// Renders the report and writes it to `DIR/report.md`, and its charted twin to
/// `DIR/report.html` ([`crate::html`]); returns the path of `report.md`.
pub fn write_report(dir: &Path) -> std::io::Result<PathBuf> {
    let text = markdown::render_bundle(dir)?;
    let path = dir.join("report.md");
    std::fs::write(&path, text)?;
    html::write_html(dir)?;
    Ok(path)
}

//! Reports rendered from a result bundle on disk (never from a run's memory), so a run can
//! be re-rendered, compared or merged later.
//!
//! # Layout
//! - [`answer`]: what both reports open with: each knee, its why, the SLO clauses around
//!   it, the best configuration and the warnings.
//! - [`markdown`]: `report.md`, tables in the shape of the source experiments.
//! - [`html`]: `report.html`, the same with charts, one self-contained file.
//! - [`view`]: a bundle loaded once, the typed view every renderer reads.
//! - [`format`](mod@format) and [`knee`]: how numbers and knees are printed, one place for all.
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
pub mod view;

pub use html::{html_path, write_html};
pub use markdown::{knee_lines, render_bundle};

use std::path::{Path, PathBuf};

/// Renders the report and writes it to `DIR/report.md`, and its charted twin to
/// `DIR/report.html` ([`crate::html`]); returns the path of `report.md`.
pub fn write_report(dir: &Path) -> std::io::Result<PathBuf> {
    let bundle = view::Bundle::load(dir)?;
    let path = dir.join("report.md");
    std::fs::write(&path, markdown::render_view(&bundle).0)?;
    std::fs::write(html_path(dir), html::render_view(&bundle))?;
    Ok(path)
}

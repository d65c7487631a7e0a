//! Reports rendered from a result bundle on disk (never from a run's memory), so a run can
//! be re-rendered, compared or merged later.
//!
//! # Layout
//! - [`markdown`]: `report.md`, tables in the shape of the source experiments.

pub mod markdown;

pub use markdown::{knee_lines, render_bundle, write_report};

//! How the reports print numbers: the engine's [`loadlab_engine::format`], one definition
//! each for the terminal, the lab and the reports.

pub use loadlab_engine::format::*;

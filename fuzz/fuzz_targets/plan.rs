//! Plan text -> validated plan: a plan whose matrix is within the bound, or a typed error.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use loadlab_lab::plan::MAX_CONFIGURATIONS;
use loadlab_lab::{Plan, PlanError};

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    for quick in [false, true] {
        match Plan::parse(text, "fuzz.toml", Path::new("."), quick) {
            Ok(plan) => assert!(plan.configs().len() <= MAX_CONFIGURATIONS),
            Err(PlanError::Field { field, .. }) => assert!(!field.is_empty()),
            Err(PlanError::Parse { .. }) => {}
            Err(e @ PlanError::Read { .. }) => panic!("text cannot fail to be read: {e}"),
        }
    }
});

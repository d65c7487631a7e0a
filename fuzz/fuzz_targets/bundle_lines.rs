//! A bundle's `steps.jsonl` and `configs.jsonl` from any bytes: records, a torn last line
//! skipped, or an error naming the file and line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadlab_lab::bundle::{read_configs, read_steps, torn_lines};

fuzz_target!(|input: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("steps.jsonl"), input).unwrap();
    std::fs::write(dir.path().join("configs.jsonl"), input).unwrap();
    for e in [read_steps(dir.path()).err(), read_configs(dir.path()).err()]
        .into_iter()
        .flatten()
    {
        assert!(e.to_string().contains(".jsonl line "), "{e}");
    }
    for torn in torn_lines(dir.path()) {
        assert!(torn.line >= 1);
    }
});

//! `--header`, `--source-addrs`, `--cpus` and durations from any text: a value that prints
//! back to itself, or an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadlab_engine::config::values::parse_header;
use loadlab_engine::config::{parse_duration, CpuList, SourceAddrs};
use loadlab_engine::records::decode_histogram;

fuzz_target!(|text: &str| {
    let _ = parse_duration(text);
    if let Ok(l) = text.parse::<CpuList>() {
        assert_eq!(l.to_string().parse::<CpuList>(), Ok(l));
    }
    if let Ok(a) = text.parse::<SourceAddrs>() {
        assert!((1..=65_000).contains(&a.len()));
        assert_eq!(a.to_string().parse::<SourceAddrs>(), Ok(a));
    }
    if let Ok((name, value)) = parse_header(text) {
        assert_eq!(parse_header(&format!("{name}: {value}")), Ok((name, value)));
    }
    let _ = decode_histogram(text);
});

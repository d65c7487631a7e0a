//! Damaged bundles read by `loadlab report` and `compare`: `steps.jsonl` built from real
//! step lines, then torn, corrupted, or given another bundle version. Reading gives the
//! intact steps (a torn last line is skipped and reported) or an error naming the file and
//! the line; it never panics and never hangs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use loadlab_lab::bundle::{read_steps, torn_lines};
use proptest::prelude::*;

/// A generous hang bound for one read, not a performance threshold.
const HANG_BOUND: Duration = Duration::from_secs(10);

/// Real `steps.jsonl` lines of a committed bundle (the report's fixture).
fn real_lines() -> Vec<String> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/fixtures/queue/steps.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// How the file is damaged.
#[derive(Debug, Clone)]
enum Damage {
    /// The last line cut after this fraction of its bytes.
    TornLast(f64),
    /// Line `.0` (modulo the count) replaced by these bytes.
    Garbage(usize, Vec<u8>),
    /// Line `.0` (modulo the count) written by bundle version `.1`.
    OtherVersion(usize, u32),
    /// The byte at this fraction of the file set to `.1`.
    Flip(f64, u8),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (0.0..1.0f64).prop_map(Damage::TornLast),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 1..200)
        )
            .prop_map(|(i, b)| Damage::Garbage(i, b)),
        (any::<usize>(), 2u32..u32::MAX).prop_map(|(i, v)| Damage::OtherVersion(i, v)),
        (0.0..1.0f64, any::<u8>()).prop_map(|(f, b)| Damage::Flip(f, b)),
    ]
}

fn bundle_dir(case: u64) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("loadlab-bundle-prop-{}-{case}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, rng_seed: proptest::test_runner::RngSeed::Fixed(11), ..ProptestConfig::default() })]

    #[test]
    fn a_damaged_steps_file_reads_its_intact_steps_or_names_the_line(
        picks in proptest::collection::vec(0usize..4, 1..8),
        how in damage(),
        case in any::<u64>(),
    ) {
        let real = real_lines();
        let mut lines: Vec<Vec<u8>> = picks.iter().map(|&i| real[i % real.len()].clone().into_bytes()).collect();
        let n = lines.len();
        match &how {
            Damage::TornLast(f) => {
                let last = lines.last_mut().unwrap();
                let keep = ((last.len() as f64) * f) as usize;
                last.truncate(keep.min(last.len() - 1));
            }
            Damage::Garbage(i, b) => lines[i % n] = b.iter().map(|&c| if c == b'\n' { b' ' } else { c }).collect(),
            Damage::OtherVersion(i, v) => {
                let text = String::from_utf8(lines[i % n].clone()).unwrap();
                lines[i % n] = text.replacen("\"bundle_version\":1", &format!("\"bundle_version\":{v}"), 1).into_bytes();
            }
            Damage::Flip(..) => {}
        }
        let mut bytes = lines.join(&b'\n');
        bytes.push(b'\n');
        if let Damage::Flip(f, b) = how {
            let len = bytes.len();
            bytes[(((len as f64) * f) as usize).min(len - 1)] = b;
        }
        let dir = bundle_dir(case);
        std::fs::write(dir.join("steps.jsonl"), &bytes).unwrap();
        let start = Instant::now();
        let read = read_steps(&dir);
        let torn = torn_lines(&dir);
        prop_assert!(start.elapsed() < HANG_BOUND);
        let _ = std::fs::remove_dir_all(&dir);
        match (&how, read) {
            // Every line before the torn one is intact and read; the torn one is reported
            // unless nothing of it was written.
            (Damage::TornLast(_), Ok(steps)) => {
                prop_assert_eq!(steps.len(), n - 1);
                let blank = lines[n - 1].trim_ascii().is_empty();
                prop_assert_eq!(torn.len(), usize::from(!blank), "{:?}", torn);
                if let Some(t) = torn.first() {
                    prop_assert_eq!(t.line, n);
                }
            }
            (Damage::TornLast(_), Err(e)) => prop_assert!(false, "a torn last line is an error: {e}"),
            // Another version is refused, naming the line and both versions.
            (Damage::OtherVersion(i, v), r) => {
                let e = r.expect_err("another bundle version read as this one");
                let msg = e.to_string();
                prop_assert!(msg.contains(&format!("line {}", i % n + 1)), "{}", msg);
                prop_assert!(msg.contains(&format!("bundle version {v}")), "{}", msg);
            }
            // Garbage is an error naming its line, unless it reads as nothing (blank) or as
            // a torn last line.
            (Damage::Garbage(i, b), r) => {
                let blank = b.trim_ascii().is_empty();
                match r {
                    Ok(steps) => prop_assert!(
                        blank || (i % n == n - 1 && steps.len() == n - 1),
                        "garbage read as {} steps", steps.len()
                    ),
                    Err(e) => {
                        let msg = e.to_string();
                        prop_assert!(msg.contains(&format!("steps.jsonl line {}", i % n + 1)), "{}", msg);
                    }
                }
            }
            // One byte changed: at most every step, or an error naming a line.
            (Damage::Flip(..), Ok(steps)) => prop_assert!(steps.len() <= n),
            (Damage::Flip(..), Err(e)) => prop_assert!(e.to_string().contains("steps.jsonl line "), "{}", e),
        }
    }
}

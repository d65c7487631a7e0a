//! Traffic to replay on any bytes (`loadlab_replay`): read as nginx's combined format, an
//! nginx `log_format` with `$msec` and `$request_time`, JSON Lines and a HAR, each line is a
//! request or a counted bad line (never a panic); a request has a method and a target, and
//! the tally adds up to the lines read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadlab_replay::{name, Format, Traffic};

fuzz_target!(|input: &[u8]| {
    for f in [
        "combined",
        "nginx:$msec $request_time \"$request_method $uri?$args\" $status \"$http_user_agent\"",
        "jsonl",
        "har",
    ] {
        let format: Format = f.parse().expect("a known format");
        let Ok(mut t) = Traffic::new(input, &format) else {
            continue;
        };
        let mut n = 0u64;
        for r in t.by_ref() {
            n += 1;
            if let Ok(e) = r {
                assert!(!e.method.is_empty() && !e.target.is_empty(), "{e:?}");
                let _ = name::fold(&e.target);
            }
        }
        let tally = t.tally();
        assert_eq!(tally.entries + tally.bad, n);
    }
});

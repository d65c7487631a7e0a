//! A result in the formats other tools read: an HdrHistogram interval log (HistogramLogAnalyzer
//! and every HdrHistogram library), one CSV row per second, and wrk2's percentile spectrum.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;

use crate::error::ErrorClass;
use crate::records::decode_histogram;
use crate::result::RunResult;

/// When the measured window of `r` started, as the engine recorded it; for an older result,
/// the run's start (whole seconds) plus its warm-up.
pub fn window_start(r: &RunResult) -> SystemTime {
    match r.window_start_unix_ms {
        Some(ms) if ms.is_finite() && ms > 0.0 => UNIX_EPOCH + Duration::from_secs_f64(ms / 1e3),
        // An older result: the run's start, to the second, plus its warm-up.
        _ => {
            humantime::parse_rfc3339(&r.environment.started_at).unwrap_or(UNIX_EPOCH)
                + Duration::from_secs_f64(r.warmup_s.max(0.0))
        }
    }
}

/// Writes `r`'s latency as an HdrHistogram interval log (format version 1.3, as Java's
/// `HistogramLogWriter` writes it): one histogram per second of the measured window, values
/// in microseconds from each request's intended send time (coordinated omission corrected),
/// the Interval_Max column in milliseconds. `what` is one more comment line (the step of a
/// bundle, say).
pub fn write_hlog(r: &RunResult, what: Option<&str>, w: &mut dyn Write) -> io::Result<()> {
    let started = window_start(r);
    let start = started
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    writeln!(w, "#[Logged with loadlab {}]", env!("CARGO_PKG_VERSION"))?;
    writeln!(
        w,
        "#[Latency from the intended send time, one histogram per second of the measured window; \
         values in microseconds (HdrHistogram value unit ratio 1000 for milliseconds); \
         Interval_Max in milliseconds]"
    )?;
    writeln!(
        w,
        "#[{} {} {}]",
        r.method,
        r.url,
        match (r.offered_rps, &r.sessions) {
            (None, _) => "closed loop".to_string(),
            (Some(o), None) => format!("offered {o} req/s"),
            (Some(o), Some(s)) => format!(
                "offered {o} sessions/s of {} requests",
                s.requests_per_session
            ),
        }
    )?;
    if let Some(what) = what {
        writeln!(w, "#[{}]", what.replace(['\n', ']'], " "))?;
    }
    writeln!(w, "#[Histogram log format version 1.3]")?;
    writeln!(
        w,
        "#[StartTime: {start:.3} (seconds since epoch), {}]",
        humantime::format_rfc3339_millis(started)
    )?;
    writeln!(
        w,
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
    )?;
    for (s, encoded) in r.per_second.iter().zip(&r.histograms.per_second_latency) {
        let max_ms = decode_histogram(encoded)
            .map(|h| h.max() as f64 / 1000.0)
            .map_err(io::Error::other)?;
        writeln!(w, "{:.3},{:.3},{max_ms:.3},{encoded}", s.second as f64, 1.0)?;
    }
    Ok(())
}

/// The columns of [`csv_rows`], after the `prefix` columns a caller adds (a bundle's config,
/// scenario and step).
pub fn csv_header(prefix: &[&str]) -> String {
    let mut cols: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
    cols.extend(
        [
            "second",
            "offered_rps",
            "completed",
            "successful",
            "achieved_rps",
            "errors",
        ]
        .map(String::from),
    );
    cols.extend(
        ErrorClass::ALL
            .iter()
            .map(|c| format!("errors_{}", c.name())),
    );
    cols.extend(["p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms"].map(String::from));
    cols.join(",")
}

/// One CSV line per second of `r` (no header): offered rate (empty in closed loop), the
/// second's responses, successes (achieved_rps: successes in that second), errors in total
/// and by class, and latency percentiles from the intended send time in milliseconds (empty
/// for a second without responses). Each line starts with `prefix`'s fields, quoted.
pub fn csv_rows(r: &RunResult, prefix: &[&str]) -> io::Result<Vec<String>> {
    let pre: String = prefix.iter().map(|p| csv_field(p) + ",").collect();
    let mut rows = Vec::with_capacity(r.per_second.len());
    for (s, encoded) in r.per_second.iter().zip(&r.histograms.per_second_latency) {
        let h = decode_histogram(encoded).map_err(io::Error::other)?;
        let mut line = pre.clone();
        // Requests per second, as the row's other figures (a flow's rate counts sessions).
        let offered = r
            .offered_requests_rps()
            .map(|o| format!("{o}"))
            .unwrap_or_default();
        let _ = write!(
            line,
            "{},{offered},{},{},{},{}",
            s.second, s.completed, s.successful, s.successful, s.errors
        );
        for (_, n) in s.errors_by_class.iter() {
            let _ = write!(line, ",{n}");
        }
        for q in [0.5, 0.9, 0.95, 0.99] {
            let _ = write!(line, ",{}", quantile_ms(&h, q));
        }
        let _ = write!(
            line,
            ",{}",
            if h.is_empty() {
                String::new()
            } else {
                ms(h.max())
            }
        );
        rows.push(line);
    }
    Ok(rows)
}

/// Writes `r` as CSV: the header and one line per second.
pub fn write_csv(r: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "{}", csv_header(&[]))?;
    for line in csv_rows(r, &[])? {
        writeln!(w, "{line}")?;
    }
    Ok(())
}

fn quantile_ms(h: &Histogram<u64>, q: f64) -> String {
    if h.is_empty() {
        String::new()
    } else {
        ms(h.value_at_quantile(q))
    }
}

fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

/// Quotes a CSV field when it holds a comma, a quote or a line break (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The latency distribution and its detailed percentile spectrum as wrk2 prints them with
/// `--latency` (`hdr_percentiles_print` with 5 ticks per half distance, milliseconds).
pub fn latency_spectrum(r: &RunResult) -> io::Result<String> {
    let h = decode_histogram(&r.histograms.latency).map_err(io::Error::other)?;
    let mut out = String::new();
    let v = |us: u64| us as f64 / 1000.0;
    let _ = writeln!(
        out,
        "  Latency Distribution (HdrHistogram - Recorded Latency, from the intended send time)"
    );
    for q in [50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 99.999, 100.0] {
        let value = if h.is_empty() {
            0.0
        } else {
            v(h.value_at_quantile(q / 100.0))
        };
        let _ = writeln!(out, "{q:7.3}%  {value:8.2}ms");
    }
    let _ = writeln!(out, "\n  Detailed Percentile spectrum:");
    let _ = writeln!(
        out,
        "       Value   Percentile   TotalCount 1/(1-Percentile)\n"
    );
    if !h.is_empty() {
        let mut total = 0u64;
        for it in h.iter_quantiles(5) {
            total += it.count_since_last_iteration();
            let p = it.quantile_iterated_to();
            let value = v(h.highest_equivalent(it.value_iterated_to()));
            if p < 1.0 {
                let _ = writeln!(
                    out,
                    "{value:12.3} {p:12.6} {total:12} {:12.2}",
                    1.0 / (1.0 - p)
                );
            } else {
                let _ = writeln!(out, "{value:12.3} {p:12.6} {total:12}");
            }
        }
    }
    let _ = writeln!(
        out,
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]",
        h.mean() / 1000.0,
        h.stdev() / 1000.0
    );
    let _ = writeln!(
        out,
        "#[Max     = {:12.3}, Total count    = {:12}]",
        v(h.max()),
        h.len()
    );
    Ok(out)
}

//! Gates for CI: thresholds on one run's final result, k6-style (`--slo 'p99<50ms'`).
//!
//! A gate is `METRIC OP VALUE`, with `OP` one of `<`, `<=`, `>`, `>=`:
//! - latency: `p50`, `p75`, `p90`, `p95`, `p99`, `p99.9` (or `p999`), `p99.99`, `p99.999`
//!   (read from the run's latency HdrHistogram, so from the intended send time), `mean`,
//!   `max`; the value has a unit: `us`, `ms` or `s` (`p99<50ms`);
//! - `errors`: the failed requests as a fraction of those attempted, `0.1%` or `0.001`;
//! - `achieved`: open loop, achieved over offered as a ratio (`achieved>=0.98`), or in
//!   requests per second with `/s` or `rps` (`achieved>=5000/s`, either model);
//! - `connections`: WebSocket and server-sent events, the connections (streams) still open
//!   when the run ended (`connections>=10000`: the server held them all to the end).
//!
//! `NAME:GATE` gates one request name of a run of named requests (a targets file, a plan
//! scenario's requests): `checkout:p99<300ms` reads the figures of the requests named
//! `checkout` alone.
//!
//! A gate is a plain comparison of the run's figure, as k6 thresholds are; each outcome
//! carries the count the figure rests on, so a reader can tell a p99 of 40 responses from
//! one of 40,000. Parsing refuses what it cannot read, naming the gate and the forms it
//! accepts, before any load is sent.

use std::fmt;
use std::str::FromStr;

use loadlab_engine::RunResult;
use loadlab_system::doctor::thousands;
use serde::Serialize;

/// What a gate measures.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// A latency percentile, 0 < q < 100.
    Percentile(f64),
    /// Mean latency.
    Mean,
    /// Largest latency.
    Max,
    /// Failed requests over attempted ones.
    Errors,
    /// Achieved over offered (open loop).
    AchievedRatio,
    /// Achieved requests per second.
    AchievedRps,
    /// Held connections still open at the end (WebSocket, server-sent events).
    Connections,
}

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Op {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Op {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Gt => a > b,
            Op::Ge => a >= b,
        }
    }
}

/// One gate, as parsed from `--slo`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Gate {
    /// The text the user gave, for messages.
    pub text: String,
    /// The request name it gates (`NAME:...`); `None`: the whole run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it measures.
    pub metric: Metric,
    /// How it compares.
    pub op: Op,
    /// The bound: ms for latency, a fraction for errors and ratios, req/s for rates.
    pub bound: f64,
}

/// A gate that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("--slo `{text}`: {reason}")]
pub struct GateError {
    /// The gate as given.
    pub text: String,
    /// What is wrong and what would be right.
    pub reason: String,
}

/// The percentiles a gate takes: the conventional ones, so that a typo (`p42`, `p9`) is
/// refused rather than gated on.
const PERCENTILES: [f64; 8] = [50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 99.999];

const FORMS: &str = "give METRIC OP VALUE with OP one of < <= > >=, e.g. `p99<50ms`, \
                     `p99.9<=1s`, `mean<20ms`, `errors<0.1%`, `achieved>=0.98`, `achieved>=5000/s`, \
                     `connections>=10000`";

impl FromStr for Gate {
    type Err = GateError;

    fn from_str(text: &str) -> Result<Gate, GateError> {
        let err = |reason: String| GateError {
            text: text.to_string(),
            reason,
        };
        // `NAME:GATE`: the last `:` before the comparison ends the name.
        let (name_part, gate_text) = match text.find(['<', '>']) {
            Some(op) => match text[..op].rfind(':') {
                Some(colon) => (Some(text[..colon].trim()), &text[colon + 1..]),
                None => (None, text),
            },
            None => (None, text),
        };
        if name_part == Some("") {
            return Err(err(format!(
                "no request name before `:` (NAME:{}): {FORMS}",
                gate_text.trim()
            )));
        }
        let compact: String = gate_text.chars().filter(|c| !c.is_whitespace()).collect();
        let at = compact
            .find(['<', '>'])
            .ok_or_else(|| err(format!("no comparison: {FORMS}")))?;
        let (name, rest) = compact.split_at(at);
        let (op, value) = if let Some(v) = rest.strip_prefix("<=") {
            (Op::Le, v)
        } else if let Some(v) = rest.strip_prefix(">=") {
            (Op::Ge, v)
        } else if let Some(v) = rest.strip_prefix('<') {
            (Op::Lt, v)
        } else {
            (Op::Gt, &rest[1..])
        };
        if value.is_empty() {
            return Err(err(format!("no value after the comparison: {FORMS}")));
        }
        let number = |v: &str| -> Result<f64, GateError> {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| err(format!("`{v}` is not a number of 0 or more")))
        };
        let name = name.to_ascii_lowercase();
        let (metric, bound) = match name.as_str() {
            "errors" => {
                let f = match value.strip_suffix('%') {
                    Some(p) => number(p)? / 100.0,
                    // `errors<1`: 1 %, or the fraction 1 (every request may fail)? Both
                    // readings are given; a number below 1 is a fraction.
                    None => match number(value)? {
                        f if f >= 1.0 => {
                            let op = &rest[..rest.len() - value.len()];
                            return Err(err(format!(
                                "`errors{op}{value}` has no `%`: {value} % is `errors{op}{value}%`; \
                                 a number alone is a fraction of the requests, below 1 \
                                 (`errors{op}{}` is {value} %)",
                                f / 100.0
                            )));
                        }
                        f => f,
                    },
                };
                if f > 1.0 {
                    return Err(err(format!(
                        "an error rate is at most 100 % (`{value}`): write `0.1%` or `0.001`"
                    )));
                }
                (Metric::Errors, f)
            }
            "achieved" => match value
                .strip_suffix("/s")
                .or_else(|| value.strip_suffix("rps"))
            {
                Some(rate) => (Metric::AchievedRps, number(rate)?),
                None => (Metric::AchievedRatio, number(value)?),
            },
            "connections" => (Metric::Connections, number(value)?.floor()),
            "mean" | "max" | "min" => {
                let metric = match name.as_str() {
                    "mean" => Metric::Mean,
                    "max" => Metric::Max,
                    _ => Metric::Percentile(0.0),
                };
                if metric == Metric::Percentile(0.0) {
                    return Err(err("`min` cannot fail a server; use a percentile".into()));
                }
                (metric, latency_ms(value).map_err(err)?)
            }
            p if p.starts_with('p') => {
                let digits = &p[1..];
                // `p999` is 99.9, `p9999` 99.99, as the result's fields spell them.
                let q = match digits {
                    "999" => Some(99.9),
                    "9999" => Some(99.99),
                    "99999" => Some(99.999),
                    d => d.parse::<f64>().ok(),
                }
                .filter(|q| PERCENTILES.contains(q))
                .ok_or_else(|| {
                    err(format!(
                        "`{p}` is not a percentile a gate takes: p50, p75, p90, p95, p99, p99.9 \
                         (or p999), p99.99, p99.999"
                    ))
                })?;
                (Metric::Percentile(q), latency_ms(value).map_err(err)?)
            }
            "" => return Err(err(format!("no metric before the comparison: {FORMS}"))),
            other => {
                return Err(err(format!(
                    "unknown metric `{other}`: pN (a latency percentile), mean, max, errors or achieved"
                )))
            }
        };
        Ok(Gate {
            text: text.trim().to_string(),
            name: name_part.map(str::to_string),
            metric,
            op,
            bound,
        })
    }
}

/// A latency with its unit, in ms.
fn latency_ms(v: &str) -> Result<f64, String> {
    let (num, scale) = if let Some(n) = v.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix("us").or_else(|| v.strip_suffix("µs")) {
        (n, 0.001)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1000.0)
    } else {
        return Err(format!(
            "a latency needs its unit: `{v}ms`, `{v}s` or `{v}us`"
        ));
    };
    num.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .map(|x| x * scale)
        .ok_or_else(|| format!("`{num}` is not a number of 0 or more"))
}

impl Gate {
    /// Refuses a gate this kind of run cannot have (an achieved ratio in closed loop, which
    /// offers no rate).
    pub fn applies_to(&self, open_loop: bool) -> Result<(), GateError> {
        if self.metric == Metric::AchievedRatio && !open_loop {
            return Err(GateError {
                text: self.text.clone(),
                reason: "achieved as a ratio needs an offered rate (--rate); in closed loop \
                         give requests per second, e.g. `achieved>=5000/s`"
                    .into(),
            });
        }
        Ok(())
    }

    /// Checks the gate against a run's result (a named gate, against that name's figures;
    /// a name the run does not have fails, saying which names it has).
    pub fn check(&self, r: &RunResult) -> GateOutcome {
        let figures = match &self.name {
            None => Figures::of_run(r),
            Some(name) => match r.by_name.iter().find(|n| &n.name == name) {
                Some(n) => Figures::of_name(n),
                None => {
                    return GateOutcome {
                        gate: self.text.clone(),
                        passed: false,
                        actual: None,
                        shown: no_such_name(name, r),
                    }
                }
            },
        };
        self.check_figures(&figures)
    }

    fn check_figures(&self, r: &Figures<'_>) -> GateOutcome {
        let responses = r.latency.count;
        let (actual, basis) = match self.metric {
            Metric::Percentile(q) => (
                loadlab_engine::records::decode_histogram(r.histogram)
                    .ok()
                    .filter(|h| !h.is_empty())
                    .map(|h| h.value_at_quantile(q / 100.0) as f64 / 1000.0),
                format!("{} responses", thousands(responses)),
            ),
            Metric::Mean => (
                r.latency.mean,
                format!("{} responses", thousands(responses)),
            ),
            Metric::Max => (r.latency.max, format!("{} responses", thousands(responses))),
            Metric::Errors => (
                (r.attempts > 0).then(|| r.errors_total as f64 / r.attempts as f64),
                format!(
                    "{} failed of {} attempted",
                    thousands(r.errors_total),
                    thousands(r.attempts)
                ),
            ),
            Metric::AchievedRatio => (
                r.offered_rps
                    .filter(|o| *o > 0.0)
                    .map(|o| r.achieved_rps / o),
                format!(
                    "{:.0} of {:.0} req/s offered",
                    r.achieved_rps,
                    r.offered_rps.unwrap_or(0.0)
                ),
            ),
            Metric::AchievedRps => (
                Some(r.achieved_rps),
                format!("{} successful", thousands(r.successful)),
            ),
            Metric::Connections => (
                r.held.map(|(held, _)| held as f64),
                match r.held {
                    Some((_, of)) => format!("{} held", thousands(of)),
                    None => {
                        "held connections are counted for WebSocket and server-sent events runs"
                            .into()
                    }
                },
            ),
        };
        let passed = actual.is_some_and(|a| self.op.holds(a, self.bound));
        GateOutcome {
            gate: self.text.clone(),
            passed,
            actual,
            shown: match actual {
                Some(a) => format!("{} ({basis})", self.show(a)),
                None => format!("nothing to measure ({basis})"),
            },
        }
    }

    /// Refuses a named gate for a name the run does not count (checked before any load).
    pub fn names_one_of(&self, names: &[String]) -> Result<(), GateError> {
        match &self.name {
            Some(n) if !names.contains(n) => Err(GateError {
                text: self.text.clone(),
                reason: if names.is_empty() {
                    format!("`{n}:` gates a request name, and this run's requests have none (a targets file or a plan's [[scenario.request]] names them)")
                } else {
                    format!(
                        "no request is named `{n}`; the names are {}",
                        names.join(", ")
                    )
                },
            }),
            _ => Ok(()),
        }
    }

    /// A value of this gate's metric, with its unit.
    fn show(&self, v: f64) -> String {
        let name = match self.metric {
            Metric::Percentile(q) => format!("p{q}"),
            Metric::Mean => "mean".into(),
            Metric::Max => "max".into(),
            Metric::Errors => return format!("errors {}", pct(v)),
            Metric::AchievedRatio => return format!("achieved {v:.3} of offered"),
            Metric::AchievedRps => return format!("achieved {v:.1} req/s"),
            Metric::Connections => return format!("{v:.0} still open at the end"),
        };
        format!("{name} {}", ms(v))
    }
}

use loadlab_engine::format::{ms_precise as ms, pct_precise as pct};

/// What a gate or a verdict reads of a run, or of one request name's part of it.
pub struct Figures<'a> {
    /// Latency from the intended send time.
    pub latency: &'a loadlab_engine::result::LatencyStats,
    /// Its histogram, encoded.
    pub histogram: &'a str,
    /// Failed requests.
    pub errors_total: u64,
    /// Requests attempted.
    pub attempts: u64,
    /// Offered rate (open loop).
    pub offered_rps: Option<f64>,
    /// Achieved rate.
    pub achieved_rps: f64,
    /// Successful responses.
    pub successful: u64,
    /// The latency trend (whether the server kept pace).
    pub trend: Option<&'a loadlab_engine::stats::LatencyTrend>,
    /// WebSocket and server-sent events: the connections still open at the end, of those
    /// held (`None`: not counted, another protocol or one request name's figures).
    pub held: Option<(u64, u64)>,
    /// Held server streams (gRPC server streaming, event streams, WebSocket push): the
    /// stream-seconds in which a stream missed a message, of those held (`None`: another
    /// protocol, one request name's figures, or a result that did not count them).
    pub starved: Option<(u64, u64)>,
}

impl Figures<'_> {
    /// The whole run's figures.
    pub fn of_run(r: &RunResult) -> Figures<'_> {
        Figures {
            latency: &r.latency_ms,
            histogram: &r.histograms.latency,
            errors_total: r.errors_total,
            attempts: r.attempts(),
            // A flow's offered rate counts sessions; achieved counts requests.
            offered_rps: r.offered_requests_rps(),
            achieved_rps: r.achieved_rps,
            successful: r.successful,
            trend: r.latency_trend.as_ref(),
            held: r.connections_held.map(|h| (h, r.connections)),
            starved: r.stream_timing.as_ref().and_then(|t| t.starved()),
        }
    }

    /// One request name's figures.
    pub fn of_name(n: &loadlab_engine::result::NameResult) -> Figures<'_> {
        Figures {
            latency: &n.latency_ms,
            histogram: &n.latency_histogram,
            errors_total: n.errors_total,
            attempts: n.attempts(),
            offered_rps: n.offered_rps,
            achieved_rps: n.achieved_rps,
            successful: n.successful,
            trend: n.latency_trend.as_ref(),
            held: None,
            starved: None,
        }
    }
}

/// A named gate's name is not among the run's.
fn no_such_name(name: &str, r: &RunResult) -> String {
    let names: Vec<&str> = r.by_name.iter().map(|n| n.name.as_str()).collect();
    if names.is_empty() {
        format!("no request is named `{name}`: this run's requests have no names")
    } else {
        format!(
            "no request is named `{name}` (the names are {})",
            names.join(", ")
        )
    }
}

/// One gate checked.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GateOutcome {
    /// The gate as given.
    pub gate: String,
    /// The figure held.
    pub passed: bool,
    /// The run's figure (ms, fraction or req/s); `None` when there was nothing to measure,
    /// which fails the gate.
    pub actual: Option<f64>,
    /// The figure with its unit and the count it rests on.
    pub shown: String,
}

impl fmt::Display for GateOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] {}: {}",
            if self.passed { "PASS" } else { "FAIL" },
            self.gate,
            self.shown
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(s: &str) -> Gate {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn every_form_parses() {
        assert_eq!(gate("p99<50ms").metric, Metric::Percentile(99.0));
        assert_eq!(gate("p99<50ms").bound, 50.0);
        assert_eq!(gate("p99<50ms").op, Op::Lt);
        assert_eq!(gate("p99.9 <= 1s").bound, 1000.0);
        assert_eq!(gate("p99.9 <= 1s").op, Op::Le);
        assert_eq!(gate("p999<1s").metric, Metric::Percentile(99.9));
        assert_eq!(gate("p50<800us").bound, 0.8);
        assert_eq!(gate("mean<20ms").metric, Metric::Mean);
        assert_eq!(gate("max<2s").metric, Metric::Max);
        let e = gate("errors<0.1%");
        assert_eq!((e.metric, e.op), (Metric::Errors, Op::Lt));
        assert!((e.bound - 0.001).abs() < 1e-12);
        assert_eq!(gate("errors<=0.001").bound, 0.001);
        // A number alone below 1 is a fraction.
        assert_eq!(gate("errors<0.5").bound, 0.5);
        assert_eq!(gate("errors<0").bound, 0.0);
        assert_eq!(gate("achieved>=0.98").metric, Metric::AchievedRatio);
        assert_eq!(gate("achieved>=0.98").op, Op::Ge);
        assert_eq!(gate("achieved>5000/s").metric, Metric::AchievedRps);
        assert_eq!(gate("achieved>5000rps").bound, 5000.0);
        assert_eq!(gate("connections>=10000").metric, Metric::Connections);
        assert_eq!(gate("connections>=10000").bound, 10000.0);
        assert_eq!(gate("  P99 < 50ms ").text, "P99 < 50ms");
        assert_eq!(gate("p99<50ms").name, None);
        let named = gate("checkout:p99<300ms");
        assert_eq!(named.name.as_deref(), Some("checkout"));
        assert_eq!(
            (named.metric, named.bound),
            (Metric::Percentile(99.0), 300.0)
        );
        let spaced = gate("GET /users/${id} : errors < 1%");
        assert_eq!(spaced.name.as_deref(), Some("GET /users/${id}"));
        assert_eq!(spaced.metric, Metric::Errors);
        assert!(":p99<1ms"
            .parse::<Gate>()
            .unwrap_err()
            .reason
            .contains("no request name"));
        let names = vec!["a".to_string(), "b".to_string()];
        assert!(gate("a:p99<1ms").names_one_of(&names).is_ok());
        let e = gate("c:p99<1ms").names_one_of(&names).unwrap_err();
        assert!(e.reason.contains("the names are a, b"), "{e}");
        assert!(gate("p99<1ms").names_one_of(&[]).is_ok());
    }

    #[test]
    fn malformed_gates_say_what_is_wrong() {
        for (text, needle) in [
            ("p99<", "no value"),
            ("p42<1ms", "not a percentile"),
            ("p42x<1ms", "not a percentile"),
            ("p100<1ms", "not a percentile"),
            ("p0<1ms", "not a percentile"),
            ("errors<abc", "`abc` is not a number"),
            ("errors<150%", "at most 100 %"),
            ("errors<1", "`errors<1%`"),
            ("errors<1", "`errors<0.01` is 1 %"),
            ("errors<=5", "5 % is `errors<=5%`"),
            ("errors<1.0", "has no `%`"),
            ("p99<50", "needs its unit"),
            ("p99=50ms", "no comparison"),
            ("<50ms", "no metric"),
            ("latency<50ms", "unknown metric `latency`"),
            ("p99<-5ms", "not a number of 0 or more"),
            ("min<1ms", "cannot fail"),
        ] {
            let e = text.parse::<Gate>().unwrap_err();
            assert!(e.to_string().starts_with(&format!("--slo `{text}`")), "{e}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
        let closed = gate("achieved>=0.98").applies_to(false).unwrap_err();
        assert!(closed.to_string().contains("achieved>=5000/s"), "{closed}");
        assert!(gate("achieved>=10/s").applies_to(false).is_ok());
    }
}

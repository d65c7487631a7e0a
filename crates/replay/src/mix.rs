//! A log's mix: the requests an access log (or a HAR, or JSON Lines) holds, as a weighted
//! list to send in the log's proportions without its timing. Each distinct request is one
//! entry, weighted by how often the log has it, named by its endpoint (its path with
//! identifiers folded, `GET /users/{id}`); what a replay leaves out by default (methods
//! other than GET and HEAD, cookies and credentials: [`Policy`]) is counted, and the whole
//! is said in one paragraph ([`Mix::report`]).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::{name, Entry, Format, Policy, Traffic};

/// One distinct request of the mix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MixRequest {
    /// Its endpoint (`GET /users/{id}`), or `other` past the names kept.
    pub name: String,
    /// How many times the log has it.
    pub weight: u64,
    /// The method.
    pub method: String,
    /// The target as logged (a path and its query).
    pub target: String,
    /// Its headers as logged, less those the policy drops.
    pub headers: Vec<(String, String)>,
    /// Its body (text), if recorded.
    pub body: String,
    /// The first line that has it.
    pub line: u64,
}

/// How much a load may hold, and how its requests are named.
#[derive(Clone, Copy, Debug)]
pub struct Limits<'a> {
    /// Rules that name requests before the folding ([`name::NameRule`]).
    pub rules: &'a [name::NameRule],
    /// Names results are kept for: past it, the busiest `names - 1` keep theirs and the
    /// rest are `other`.
    pub names: usize,
    /// Distinct requests: a log with more is refused.
    pub requests: usize,
    /// The requests are sent at their logged times (a timed replay), not as a mix.
    pub timed: bool,
}

/// Why a log gives no mix.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MixError(String);

/// A log's requests as a load's weighted list, and what reading it found.
#[derive(Debug)]
pub struct Mix {
    /// One per distinct request, weighted by its count, in the order the log first has them.
    pub requests: Vec<MixRequest>,
    /// One paragraph for the terminal: what was read, replayed and left out.
    pub report: String,
    /// When the replayed requests were made.
    pub shape: Shape,
}

/// When a log's replayed requests were made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// The earliest, ns since the epoch (0 when none had a time).
    pub first_ns: u64,
    /// The end of the tick the latest was made in (its time plus its resolution).
    pub end_ns: u64,
    /// The second (since the epoch) `per_second` starts at.
    pub first_second: u64,
    /// Requests made in each second since the epoch from `first_second` on.
    pub per_second: Vec<u64>,
    /// Requests with no time (a timed replay refuses a log that has them).
    pub untimed: u64,
}

impl Default for Shape {
    fn default() -> Shape {
        Shape {
            first_ns: u64::MAX,
            end_ns: 0,
            first_second: 0,
            per_second: Vec::new(),
            untimed: 0,
        }
    }
}

impl Shape {
    /// Requests with a time.
    pub fn timed(&self) -> u64 {
        self.per_second.iter().sum()
    }
    /// From the earliest request to the end of the latest's tick, s.
    pub fn span_s(&self) -> f64 {
        self.end_ns.saturating_sub(self.first_ns) as f64 / 1e9
    }
    /// Requests per second over the span.
    pub fn mean_rate(&self) -> f64 {
        self.timed() as f64 / self.span_s().max(1e-9)
    }
    /// The most requests made in one second since the epoch.
    pub fn peak_rate(&self) -> u64 {
        self.per_second.iter().copied().max().unwrap_or(0)
    }

    /// The busiest stretch of `seconds` whole seconds (the first of the busiest when
    /// several tie): where it starts, ns since the earliest request, and the requests made
    /// in it; the whole log when it is no longer.
    pub fn busiest(&self, seconds: usize) -> (u64, u64) {
        let v = &self.per_second;
        if seconds >= v.len() {
            return (0, self.timed());
        }
        let seconds = seconds.max(1);
        let mut sum: u64 = v[..seconds].iter().sum();
        let (mut best, mut at) = (sum, 0);
        for i in seconds..v.len() {
            sum = sum + v[i] - v[i - seconds];
            if sum > best {
                (best, at) = (sum, i + 1 - seconds);
            }
        }
        let start = ((self.first_second + at as u64) * 1_000_000_000).saturating_sub(self.first_ns);
        (start, best)
    }
}

/// Why a request is not replayed.
pub(crate) enum Left {
    /// Outside the policy's time window.
    Outside,
    /// A window was given and it has no time.
    Untimed,
    /// Its method is not replayed.
    Method,
    /// Its body is not text.
    Binary,
}

/// Whether `policy` replays `e`: its body as text (taken out of `e`), or why not.
pub(crate) fn admit(policy: &Policy, e: &mut Entry) -> Result<String, Left> {
    match policy.in_window(e) {
        crate::InWindow::Yes => {}
        crate::InWindow::Outside => return Err(Left::Outside),
        crate::InWindow::Untimed => return Err(Left::Untimed),
    }
    if !policy.admits(e) {
        return Err(Left::Method);
    }
    match e.body.take().map(String::from_utf8) {
        None => Ok(String::new()),
        Some(Ok(text)) => Ok(text),
        Some(Err(_)) => Err(Left::Binary),
    }
}

/// One request as the mix counts it: the same method, target and body are the same request,
/// whatever headers each occurrence had (a log's User-Agent and Referer vary from one user
/// to the next: counted apart, they would make a day's log millions of distinct requests);
/// the first occurrence's headers are sent.
#[derive(Debug, Hash, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) body: String,
}

/// A distinct request's count, first line and first headers.
type Seen = (u64, u64, Vec<(String, String)>);

/// Reads `path` (in `format`, or the format its first line says) into a mix of the
/// requests `policy` replays, within `limits`.
pub fn mix(
    path: &Path,
    format: Option<&Format>,
    policy: &Policy,
    limits: Limits<'_>,
) -> Result<Mix, MixError> {
    let shown = path.display();
    let mut traffic = Traffic::open(path, format).map_err(|e| MixError(e.to_string()))?;
    let mut seen: HashMap<Key, Seen> = HashMap::new();
    let mut skipped: BTreeMap<String, u64> = BTreeMap::new();
    let (mut stripped, mut binary) = (0u64, 0u64);
    let (mut outside, mut untimed) = (0u64, 0u64);
    let mut shape = Shape::default();
    let mut seconds: BTreeMap<u64, u64> = BTreeMap::new();
    for e in traffic.by_ref() {
        let Ok(mut e) = e else { continue };
        let body = match admit(policy, &mut e) {
            Ok(body) => body,
            Err(Left::Outside) => {
                outside += 1;
                continue;
            }
            Err(Left::Untimed) => {
                untimed += 1;
                continue;
            }
            Err(Left::Method) => {
                *skipped.entry(e.method).or_default() += 1;
                continue;
            }
            Err(Left::Binary) => {
                binary += 1;
                continue;
            }
        };
        stripped += policy.strip(&mut e) as u64;
        match e.at_ns {
            Some(t) => {
                *seconds.entry(t / 1_000_000_000).or_default() += 1;
                shape.first_ns = shape.first_ns.min(t);
                shape.end_ns = shape.end_ns.max(t + e.resolution_ns.max(1));
            }
            None => shape.untimed += 1,
        }
        let key = Key {
            method: e.method,
            target: e.target,
            body,
        };
        seen.entry(key).or_insert((0, e.line, e.headers)).0 += 1;
    }
    if let (Some(&first), Some(&last)) = (seconds.keys().next(), seconds.keys().next_back()) {
        shape.first_second = first;
        shape.per_second = vec![0; (last - first + 1) as usize];
        for (s, n) in seconds {
            shape.per_second[(s - first) as usize] = n;
        }
    } else {
        shape.first_ns = 0;
    }
    let tally = traffic.tally().clone();
    let first_bad = || {
        tally
            .first_bad
            .iter()
            .map(|b| format!("\n  {b}"))
            .collect::<String>()
    };
    if tally.entries == 0 {
        return Err(MixError(format!(
            "{shown}: no request in it ({} line{} that are not requests){}\nname its format (--log-format, or log_format in a plan): combined, common, 'nginx:$msec \"$request\" …', jsonl or har",
            tally.bad,
            if tally.bad == 1 { "" } else { "s" },
            first_bad()
        )));
    }
    let replayed: u64 = seen.values().map(|(n, ..)| n).sum();
    let skipped_words = skipped
        .iter()
        .map(|(m, n)| format!("{n} {m}"))
        .collect::<Vec<_>>()
        .join(", ");
    if replayed == 0 && outside + untimed == tally.entries {
        return Err(MixError(format!(
            "{shown}: none of its {} requests is within the window given (--from/--to, or replay_from/replay_to in a plan): {outside} outside it{}",
            tally.entries,
            if untimed > 0 {
                format!(", {untimed} with no time in the log")
            } else {
                String::new()
            }
        )));
    }
    if replayed == 0 {
        return Err(MixError(format!(
            "{shown}: none of its {} requests is one loadlab replays by default ({skipped_words}{}): name the methods to replay (--methods, or replay_methods in a plan; a replayed POST repeats its side effects)",
            tally.entries,
            if binary > 0 { format!(", {binary} with a binary body") } else { String::new() }
        )));
    }
    if seen.len() > limits.requests {
        return Err(MixError(format!(
            "{shown}: {} distinct requests, more than the {} one load may hold: replay part of the log",
            seen.len(),
            limits.requests
        )));
    }
    // Endpoints by count; past the most names results keep, the rest count as `other`.
    let endpoint = |k: &Key| format!("{} {}", k.method, name::name(&k.target, limits.rules));
    let mut by_endpoint: HashMap<String, u64> = HashMap::new();
    for (k, (n, ..)) in &seen {
        *by_endpoint.entry(endpoint(k)).or_default() += n;
    }
    let mut ranked: Vec<(String, u64)> = by_endpoint.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let named: Vec<&str> = if ranked.len() > limits.names {
        ranked[..limits.names - 1]
            .iter()
            .map(|(e, _)| e.as_str())
            .collect()
    } else {
        ranked.iter().map(|(e, _)| e.as_str()).collect()
    };
    let mut entries: Vec<(Key, Seen)> = seen.into_iter().collect();
    entries.sort_by_key(|(_, (_, line, _))| *line);
    let requests = entries
        .into_iter()
        .map(|(k, (n, line, headers))| {
            let e = endpoint(&k);
            MixRequest {
                name: if named.contains(&e.as_str()) {
                    e
                } else {
                    "other".to_string()
                },
                weight: n,
                method: k.method,
                target: k.target,
                headers,
                body: k.body,
                line,
            }
        })
        .collect::<Vec<_>>();
    let pct = |n: u64| 100.0 * n as f64 / replayed as f64;
    let busiest = ranked
        .iter()
        .take(3)
        .map(|(e, n)| format!("{e} {:.0} %", pct(*n)))
        .collect::<Vec<_>>()
        .join(", ");
    let mut report = format!(
        "{} of {shown}: {} requests read; {replayed} replayed as {} distinct requests over {} endpoint{}, {} (the busiest: {busiest}){}",
        if limits.timed { "replay" } else { "replay mix" },
        tally.entries,
        requests.len(),
        ranked.len(),
        if ranked.len() == 1 { "" } else { "s" },
        if limits.timed {
            "at the log's times"
        } else {
            "in the log's proportions without its timing"
        },
        if limits.timed {
            format!(
                "; the log spans {:.1} s, {:.1} req/s on average, at most {} in one second",
                shape.span_s(),
                shape.mean_rate(),
                shape.peak_rate()
            )
        } else {
            String::new()
        }
    );
    if ranked.len() > limits.names {
        report.push_str(&format!(
            "; results per endpoint for the {} busiest, the other {} as `other`",
            limits.names - 1,
            ranked.len() - (limits.names - 1)
        ));
    }
    if !skipped.is_empty() {
        report.push_str(&format!(
            "; not replayed: {skipped_words} (--methods, or replay_methods in a plan, to replay them)"
        ));
    }
    if outside > 0 || untimed > 0 {
        report.push_str(&format!(
            "; {outside} outside the window given{}",
            if untimed > 0 {
                format!(" and {untimed} with no time")
            } else {
                String::new()
            }
        ));
    }
    if binary > 0 {
        report.push_str(&format!("; {binary} with a binary body left out"));
    }
    if stripped > 0 {
        report.push_str(&format!(
            "; {stripped} cookie or credential headers dropped (--keep-header NAME, or keep_headers in a plan, to send them)"
        ));
    }
    if tally.bad > 0 {
        report.push_str(&format!(
            "; {} {}:{}",
            tally.bad,
            if tally.bad == 1 {
                "line was not a request"
            } else {
                "lines were not requests"
            },
            first_bad()
        ));
    }
    Ok(Mix {
        requests,
        report,
        shape,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits<'static> = Limits {
        rules: &[],
        names: 32,
        requests: 100_000,
        timed: false,
    };

    fn log(lines: &[&str]) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!(
            "loadlab-replay-mix-{}-{}.log",
            std::process::id(),
            lines.len()
        ));
        std::fs::write(&p, lines.join("\n")).unwrap();
        p
    }

    const L: &str = "10.0.0.1 - - [14/Nov/2023:22:13:20 +0000]";

    #[test]
    fn a_logs_requests_become_a_weighted_list_named_by_endpoint() {
        let lines: Vec<String> = vec![
            format!("{L} \"GET /users/1 HTTP/1.1\" 200 5 \"-\" \"curl\""),
            format!("{L} \"GET /users/2 HTTP/1.1\" 200 5 \"-\" \"curl\""),
            format!("{L} \"GET /users/1 HTTP/1.1\" 200 5 \"-\" \"another browser\""),
            format!("{L} \"POST /cart HTTP/1.1\" 201 5 \"-\" \"curl\""),
            format!("{L} \"GET /a?x=${{seq}} HTTP/1.1\" 200 5 \"-\" \"curl\""),
            "garbage".into(),
        ];
        let path = log(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        let m = mix(&path, None, &Policy::default(), LIMITS).unwrap();
        let got: Vec<(&str, u64, &str, u64)> = m
            .requests
            .iter()
            .map(|r| (r.name.as_str(), r.weight, r.target.as_str(), r.line))
            .collect();
        assert_eq!(
            got,
            [
                ("GET /users/{id}", 2, "/users/1", 1),
                ("GET /users/{id}", 1, "/users/2", 2),
                ("GET /a", 1, "/a?x=${seq}", 5),
            ]
        );
        assert_eq!(
            m.requests[0].headers,
            [("User-Agent".to_string(), "curl".to_string())]
        );
        assert!(
            m.report
                .contains("5 requests read; 4 replayed as 3 distinct requests over 2 endpoints"),
            "{}",
            m.report
        );
        assert!(m.report.contains("GET /users/{id} 75 %"), "{}", m.report);
        assert!(
            m.report.contains("not replayed: 1 POST (--methods"),
            "{}",
            m.report
        );
        assert!(
            m.report.contains("1 line was not a request:\n  line 6:"),
            "{}",
            m.report
        );
        let all = Policy {
            methods: vec!["GET".into(), "POST".into()],
            ..Policy::default()
        };
        assert_eq!(
            mix(&path, Some(&"combined".parse().unwrap()), &all, LIMITS)
                .unwrap()
                .requests
                .len(),
            4
        );
    }

    #[test]
    fn a_window_keeps_the_requests_made_within_it() {
        let at = |s: u32| {
            format!("10.0.0.1 - - [14/Nov/2023:22:13:{s:02} +0000] \"GET /{s} HTTP/1.1\" 200 5")
        };
        let lines: Vec<String> = (10..20).map(at).collect();
        let path = log(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        let policy = Policy {
            from_ns: crate::time::any("2023-11-14T22:13:12Z"),
            to_ns: crate::time::any("14/Nov/2023:22:13:15 +0000"),
            ..Policy::default()
        };
        let m = mix(&path, None, &policy, LIMITS).unwrap();
        assert_eq!(
            m.requests
                .iter()
                .map(|r| r.target.as_str())
                .collect::<Vec<_>>(),
            ["/12", "/13", "/14"]
        );
        assert!(
            m.report.contains("; 7 outside the window given"),
            "{}",
            m.report
        );
        let none = Policy {
            from_ns: crate::time::any("1800000000"),
            ..Policy::default()
        };
        let e = mix(&path, None, &none, LIMITS).unwrap_err().to_string();
        assert!(
            e.contains("none of its 10 requests is within the window given"),
            "{e}"
        );
    }

    #[test]
    fn a_log_with_nothing_to_replay_is_refused_before_any_load() {
        let path = log(&["garbage", "more garbage", ""]);
        let e = mix(&path, None, &Policy::default(), LIMITS)
            .unwrap_err()
            .to_string();
        assert!(e.contains("its format is not one loadlab knows"), "{e}");
        let e = mix(
            &path,
            Some(&"common".parse().unwrap()),
            &Policy::default(),
            LIMITS,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("no request in it (2 lines that are not requests)"),
            "{e}"
        );
        assert!(e.contains("line 1:"), "{e}");
        let only_posts = format!("{L} \"POST /cart HTTP/1.1\" 201 5");
        let path = log(&[&only_posts, &only_posts, &only_posts, &only_posts]);
        let e = mix(&path, None, &Policy::default(), LIMITS)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("none of its 4 requests is one loadlab replays by default (4 POST)"),
            "{e}"
        );
    }
}

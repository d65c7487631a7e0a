//! `--replay-mix LOG`: the requests an access log (or a HAR, or JSON Lines) holds, sent in
//! the log's proportions at the run's rate, without its timing: each distinct request is
//! one of the load's requests, weighted by how often the log has it, named by its endpoint
//! (its path with identifiers folded, `GET /users/{id}`) so that results, SLOs and the why
//! are per endpoint. What is not replayed by default (methods other than GET and HEAD,
//! cookies and credentials) is counted and said.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use loadlab_engine::config::traffic::{NamedRequest, MAX_NAMES, MAX_REQUESTS};
use loadlab_replay::{name, Format, Policy, Traffic};
use loadlab_template::Template;

/// A log's requests as a load's weighted list, and what reading it found.
#[derive(Debug)]
pub struct Mix {
    /// One per distinct request, weighted by its count, in the order the log first has them.
    pub requests: Vec<NamedRequest>,
    /// One paragraph for the terminal: what was read, replayed and left out.
    pub report: String,
}

/// One request as the mix counts it: the same method, target, headers and body are the same
/// request.
#[derive(Hash, PartialEq, Eq)]
struct Key {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: String,
}

/// Reads `path` (in `format`, or the format its first line says) into a mix of the
/// requests `policy` replays.
pub fn mix(path: &Path, format: Option<&str>, policy: &Policy) -> anyhow::Result<Mix> {
    let shown = path.display();
    let format: Option<Format> = format
        .map(str::parse)
        .transpose()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut traffic =
        Traffic::open(path, format.as_ref()).map_err(|e| anyhow::anyhow!("--replay-mix {e}"))?;
    let mut seen: HashMap<Key, (u64, u64)> = HashMap::new();
    let mut skipped: BTreeMap<String, u64> = BTreeMap::new();
    let (mut stripped, mut binary) = (0u64, 0u64);
    for e in traffic.by_ref() {
        let Ok(mut e) = e else { continue };
        if !policy.admits(&e) {
            *skipped.entry(e.method).or_default() += 1;
            continue;
        }
        stripped += policy.strip(&mut e) as u64;
        let body = match e.body.take().map(String::from_utf8) {
            None => String::new(),
            Some(Ok(text)) => text,
            Some(Err(_)) => {
                binary += 1;
                continue;
            }
        };
        let key = Key {
            method: e.method,
            target: e.target,
            headers: e.headers,
            body,
        };
        seen.entry(key).or_insert((0, e.line)).0 += 1;
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
        anyhow::bail!(
            "--replay-mix {shown}: no request in it ({} line{} that are not requests){}\nname its format with --log-format (combined, common, 'nginx:$msec \"$request\" …', jsonl or har)",
            tally.bad,
            if tally.bad == 1 { "" } else { "s" },
            first_bad()
        );
    }
    let replayed: u64 = seen.values().map(|(n, _)| n).sum();
    let skipped_words = skipped
        .iter()
        .map(|(m, n)| format!("{n} {m}"))
        .collect::<Vec<_>>()
        .join(", ");
    if replayed == 0 {
        anyhow::bail!(
            "--replay-mix {shown}: none of its {} requests is one loadlab replays by default ({skipped_words}{}): name the methods to replay with --methods (a replayed POST repeats its side effects)",
            tally.entries,
            if binary > 0 { format!(", {binary} with a binary body") } else { String::new() }
        );
    }
    if seen.len() > MAX_REQUESTS {
        anyhow::bail!(
            "--replay-mix {shown}: {} distinct requests, more than the {MAX_REQUESTS} one load may hold: replay part of the log",
            seen.len()
        );
    }
    // Endpoints by count; past the most names results keep, the rest count as `other`.
    let endpoint = |k: &Key| format!("{} {}", k.method, name::fold(&k.target));
    let mut by_endpoint: HashMap<String, u64> = HashMap::new();
    for (k, (n, _)) in &seen {
        *by_endpoint.entry(endpoint(k)).or_default() += n;
    }
    let mut ranked: Vec<(String, u64)> = by_endpoint.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let named: Vec<&str> = if ranked.len() > MAX_NAMES {
        ranked[..MAX_NAMES - 1]
            .iter()
            .map(|(e, _)| e.as_str())
            .collect()
    } else {
        ranked.iter().map(|(e, _)| e.as_str()).collect()
    };
    let mut entries: Vec<(Key, (u64, u64))> = seen.into_iter().collect();
    entries.sort_by_key(|(_, (_, line))| *line);
    let origin = shown.to_string();
    let requests = entries
        .into_iter()
        .map(|(k, (n, line))| {
            let e = endpoint(&k);
            NamedRequest {
                name: Some(if named.contains(&e.as_str()) {
                    e
                } else {
                    "other".to_string()
                }),
                weight: u32::try_from(n).unwrap_or(u32::MAX),
                url: Template::escape(&k.target),
                headers: k
                    .headers
                    .iter()
                    .map(|(h, v)| format!("{h}: {}", Template::escape(v)))
                    .collect(),
                body: Template::escape(&k.body),
                method: k.method,
                origin: origin.clone(),
                line: line as usize,
                body_origin: None,
                url_col: 0,
                header_at: Vec::new(),
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
        "replay mix of {shown}: {} requests read; {replayed} replayed as {} distinct requests over {} endpoints, in the log's proportions without its timing (the busiest: {busiest})",
        tally.entries,
        requests.len(),
        ranked.len()
    );
    if ranked.len() > MAX_NAMES {
        report.push_str(&format!(
            "; results per endpoint for the {} busiest, the other {} as `other`",
            MAX_NAMES - 1,
            ranked.len() - (MAX_NAMES - 1)
        ));
    }
    if !skipped.is_empty() {
        report.push_str(&format!(
            "; not replayed: {skipped_words} (--methods to replay them)"
        ));
    }
    if binary > 0 {
        report.push_str(&format!("; {binary} with a binary body left out"));
    }
    if stripped > 0 {
        report.push_str(&format!(
            "; {stripped} cookie or credential headers dropped (--keep-header NAME to send them)"
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
    Ok(Mix { requests, report })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(lines: &[&str]) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!(
            "loadlab-mix-{}-{}.log",
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
            format!("{L} \"GET /users/1 HTTP/1.1\" 200 5 \"-\" \"curl\""),
            format!("{L} \"POST /cart HTTP/1.1\" 201 5 \"-\" \"curl\""),
            format!("{L} \"GET /a?x=${{seq}} HTTP/1.1\" 200 5 \"-\" \"curl\""),
            "garbage".into(),
        ];
        let path = log(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        let m = mix(&path, None, &Policy::default()).unwrap();
        let got: Vec<(Option<&str>, u32, &str, usize)> = m
            .requests
            .iter()
            .map(|r| (r.name.as_deref(), r.weight, r.url.as_str(), r.line))
            .collect();
        assert_eq!(
            got,
            [
                (Some("GET /users/{id}"), 2, "/users/1", 1),
                (Some("GET /users/{id}"), 1, "/users/2", 2),
                // A `${` in a logged URL is text, not a template.
                (Some("GET /a"), 1, "/a?x=$${seq}", 5),
            ]
        );
        assert_eq!(m.requests[0].headers, ["User-Agent: curl"]);
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
            mix(&path, Some("combined"), &all).unwrap().requests.len(),
            4
        );
    }

    #[test]
    fn a_log_with_nothing_to_replay_is_refused_before_any_load() {
        let path = log(&["garbage", "more garbage", ""]);
        let e = mix(&path, None, &Policy::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("its format is not one loadlab knows"), "{e}");
        let e = mix(&path, Some("common"), &Policy::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no request in it (2 lines that are not requests)"),
            "{e}"
        );
        assert!(e.contains("line 1:"), "{e}");
        let only_posts = format!("{L} \"POST /cart HTTP/1.1\" 201 5");
        let path = log(&[&only_posts, &only_posts, &only_posts, &only_posts]);
        let e = mix(&path, None, &Policy::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("none of its 4 requests is one loadlab replays by default (4 POST)"),
            "{e}"
        );
        let e = mix(&path, Some("xml"), &Policy::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--log-format \"xml\""), "{e}");
    }
}

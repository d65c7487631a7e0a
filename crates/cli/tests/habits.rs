//! docs/src/habits.md against the binary: every flag of a peer the page lists is typed to
//! the real `loadlab`, which must either take it as the page says (the same figures in its
//! `--json` result as the equivalent the page gives, a run against 127.0.0.1:1 where
//! nothing listens) or refuse it, or warn about it, naming that equivalent. A row added to
//! the page that the binary does not handle so fails here.

use std::path::Path;
use std::process::{Command, Output};

/// The page.
fn page() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/habits.md");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The peers' sections, by the first word of their heading.
const PEERS: [&str; 8] = ["wrk", "wrk2", "hey", "oha", "vegeta", "ab", "ghz", "k6"];

/// Nothing listens there: a run ends at its first refused connection.
const URL: &str = "http://127.0.0.1:1/";

/// One table row of a peer's section.
#[derive(Debug)]
struct Row {
    peer: String,
    theirs: String,
    ours: String,
}

/// The cells of a Markdown table row (`\|` is a pipe inside a cell).
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    let mut out = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                out.last_mut().unwrap().push(chars.next().unwrap())
            }
            '|' => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    out.into_iter().map(|c| c.trim().to_string()).collect()
}

/// Every row of the peers' tables.
fn rows() -> Vec<Row> {
    let mut rows = Vec::new();
    let mut peer: Option<String> = None;
    for line in page().lines() {
        if let Some(h) = line.strip_prefix("## ") {
            let first = h.split_whitespace().next().unwrap_or_default().to_string();
            peer = PEERS.contains(&first.as_str()).then_some(first);
            continue;
        }
        let Some(p) = &peer else { continue };
        if !line.starts_with('|') || line.starts_with("|---") {
            continue;
        }
        let c = cells(line);
        if c[0] == *p {
            continue; // the header row
        }
        rows.push(Row {
            peer: p.clone(),
            theirs: c[0].clone(),
            ours: c.get(1).cloned().unwrap_or_default(),
        });
    }
    rows
}

/// The code spans of a cell.
fn spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Words as a shell splits them (single and double quotes).
fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.get_or_insert_with(String::new).push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                cur.get_or_insert_with(String::new);
            }
            (None, c) if c.is_whitespace() => out.extend(cur.take()),
            (None, c) => cur.get_or_insert_with(String::new).push(c),
        }
    }
    out.extend(cur);
    out
}

/// The command lines a code span holds: its words from the first flag on, one line per
/// spelling where the span gives several (`-c, --connections N`, `-i/--import-paths DIR`).
/// `N` stands for 1.
fn invocations(span: &str) -> Vec<Vec<String>> {
    let w: Vec<String> = words(span)
        .into_iter()
        .skip_while(|w| !w.starts_with('-'))
        .map(|w| if w == "N" { "1".into() } else { w })
        .collect();
    if w.is_empty() {
        return Vec::new();
    }
    let mut spellings = Vec::new();
    let mut rest = &w[..];
    while let Some((first, tail)) = rest.split_first() {
        let alternatives = first.ends_with(',') || (first.contains('/') && first.starts_with('-'));
        if first.starts_with('-') && alternatives {
            spellings.extend(
                first
                    .trim_end_matches(',')
                    .split('/')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            );
            rest = tail;
        } else {
            break;
        }
    }
    if spellings.is_empty() {
        return vec![w];
    }
    match rest.split_first() {
        Some((f, tail)) if f.starts_with('-') => {
            spellings.push(f.clone());
            rest = tail;
        }
        _ => {}
    }
    spellings
        .into_iter()
        .map(|s| std::iter::once(s).chain(rest.iter().cloned()).collect())
        .collect()
}

/// The CPUs this test (and the loadlab it starts) may run on.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `loadlab COMMAND` with `extra` after a base that ends the run at once, in `dir`.
fn loadlab(command: &str, extra: &[String], dir: &Path) -> Output {
    let proto = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto/helloworld.proto");
    let has = |f: &[&str]| {
        extra
            .iter()
            .any(|e| f.iter().any(|f| e == f || e.starts_with(&format!("{f}="))))
    };
    let mut args: Vec<String> = vec![command.into()];
    if command == "grpc" {
        args.push("127.0.0.1:1".into());
        if !has(&["--proto"]) {
            args.extend(["--proto".into(), proto.display().to_string()]);
        }
        if !has(&["--call"]) {
            args.extend(["--call".into(), "helloworld.Greeter/SayHello".into()]);
        }
    } else {
        args.push(URL.into());
    }
    if !has(&["-n", "--requests"]) {
        args.extend(["-n".into(), "1".into()]);
    }
    if !has(&["--json", "-j"]) {
        args.extend(["--json".into(), "-".into()]);
    }
    args.extend(extra.iter().cloned());
    Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(&args)
        .current_dir(dir)
        .env_remove("LOADLAB_IO")
        .output()
        .expect("running loadlab")
}

/// The configuration figures of a run's JSON result (what a flag can change).
fn figures(out: &Output) -> Option<Vec<(String, serde_json::Value)>> {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let keys = [
        "method",
        "protocol",
        "model",
        "arrival",
        "offered_rps",
        "connections",
        "max_connections",
        "concurrency",
        "threads",
        "keep_alive",
        "close_by",
        "pipeline",
        "timeout_ms",
        "warmup_s",
    ];
    Some(
        keys.iter()
            .map(|k| (k.to_string(), v.get(k).cloned().unwrap_or_default()))
            .collect(),
    )
}

/// How a run ended: its status, and its figures or else its stderr.
fn outcome(out: &Output) -> (Option<i32>, String) {
    let what = match figures(out) {
        Some(f) => format!("{f:?}"),
        None => String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    (out.status.code(), what)
}

/// Whether `stderr` names loadlab's equivalent in `ours` (a flag it gives, a span, or
/// its `none` / `nothing to do` / `always`).
fn names_ours(stderr: &str, ours: &str) -> bool {
    let lead = ours.trim_start().to_ascii_lowercase();
    for word in ["none", "nothing to do", "always"] {
        if lead.starts_with(word) && stderr.contains(word) {
            return true;
        }
    }
    spans(ours).iter().any(|s| {
        stderr.contains(s.as_str())
            || invocations(s).iter().any(|inv| {
                stderr.contains(&format!("`{}", inv[0])) || stderr.contains(&format!("{} ", inv[0]))
            })
    })
}

/// What the binary's help says, every command's, to look loadlab's flags up in.
fn all_help() -> String {
    let mut text = String::new();
    for c in [
        "run", "grpc", "knee", "lab", "tune", "compare", "report", "doctor", "demo", "agent",
        "probe",
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_loadlab"))
            .args([c, "--help"])
            .output()
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    text
}

#[test]
fn every_peer_flag_on_the_page_is_taken_as_it_says_or_refused_naming_loadlabs() {
    let dir = std::env::temp_dir().join(format!("loadlab-habits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rows = rows();
    assert!(rows.len() > 100, "{} rows read from habits.md", rows.len());
    for p in PEERS {
        assert!(
            rows.iter().any(|r| r.peer == p),
            "habits.md has no table for {p}"
        );
    }
    let mut checked = 0;
    let mut failures = Vec::new();
    for row in &rows {
        let command = if row.peer == "ghz" { "grpc" } else { "run" };
        let ours_spans = spans(&row.ours);
        let theirs_spans = spans(&row.theirs);
        for (i, span) in theirs_spans.iter().enumerate() {
            for mut inv in invocations(span) {
                // `-t N` where the page means a timeout or a time limit: a value above the
                // CPUs, the shape the binary warns about (below them it is wrk's threads).
                if inv[0] == "-t" && !row.ours.trim_start().starts_with("`-t") {
                    if let Some(n) = inv.get(1).and_then(|v| v.parse::<usize>().ok()) {
                        inv[1] = n.max(cores() + 1).to_string();
                    }
                }
                checked += 1;
                let theirs = loadlab(command, &inv, &dir);
                let stderr = String::from_utf8_lossy(&theirs.stderr).into_owned();
                let warned = stderr
                    .lines()
                    .any(|l| l.starts_with("loadlab: warning:") && names_ours(l, &row.ours));
                if theirs.status.code() == Some(2) && names_ours(&stderr, &row.ours) || warned {
                    continue;
                }
                // Taken: it must do what loadlab's equivalent does.
                let lead = row.ours.trim_start();
                let equivalent: Vec<String> = if ["none", "nothing to do", "always"]
                    .iter()
                    .any(|w| lead.starts_with(w))
                {
                    Vec::new()
                } else {
                    let s = if ours_spans.len() == theirs_spans.len() {
                        &ours_spans[i]
                    } else {
                        &ours_spans[0]
                    };
                    invocations(s).into_iter().next().unwrap_or_default()
                };
                let ours = loadlab(command, &equivalent, &dir);
                if outcome(&theirs) != outcome(&ours) {
                    failures.push(format!(
                        "{}: `{}` (loadlab {command}) neither refused naming {} nor the same as {equivalent:?}:\n  theirs {:?}\n  ours   {:?}",
                        row.peer,
                        inv.join(" "),
                        row.ours,
                        outcome(&theirs),
                        outcome(&ours)
                    ));
                }
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(checked > 120, "only {checked} flags checked");
    assert!(
        failures.is_empty(),
        "{} of {checked}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_loadlab_flag_the_page_names_exists() {
    let help = all_help();
    let page = page();
    let mut missing = Vec::new();
    for line in page
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
    {
        let c = cells(line);
        let Some(ours) = c.get(1) else { continue };
        for s in spans(ours) {
            for inv in invocations(&s) {
                let flag = inv[0].split('=').next().unwrap_or_default().to_string();
                let word = |t: &str| {
                    help.match_indices(&flag).any(|(i, _)| {
                        let next = t[i + flag.len()..].chars().next();
                        !next.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
                    })
                };
                if !word(&help) {
                    missing.push(flag);
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "habits.md names flags no --help has: {missing:?}"
    );
}

#[test]
fn the_page_is_read_as_written() {
    assert_eq!(
        invocations("-c, --connections N"),
        [vec!["-c", "1"], vec!["--connections", "1"]]
    );
    assert_eq!(
        invocations("-i/--import-paths DIR"),
        [vec!["-i", "DIR"], vec!["--import-paths", "DIR"]]
    );
    assert_eq!(
        invocations("vegeta attack -targets t.txt"),
        [vec!["-targets", "t.txt"]]
    );
    assert_eq!(invocations("-H 'K: v'"), [vec!["-H", "K: v"]]);
    assert_eq!(
        invocations("--cert c.pem --key k.pem"),
        [vec!["--cert", "c.pem", "--key", "k.pem"]]
    );
    assert!(invocations("vegeta plot").is_empty());
    assert_eq!(cells("| `a \\| b` | c |"), ["`a | b`", "c"]);
}

#[test]
fn completions_and_the_man_page_name_every_command() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_loadlab"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let commands = [
        "run",
        "grpc",
        "knee",
        "lab",
        "tune",
        "compare",
        "report",
        "doctor",
        "demo",
        "agent",
        "probe",
        "serve",
        "completions",
        "man",
    ];
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = run(&["completions", shell]);
        for c in commands {
            assert!(script.contains(c), "{shell} completions: no `{c}`");
        }
    }
    let page = run(&["man"]);
    for c in commands {
        assert!(
            page.contains(&format!("loadlab\\-{c}(1)")),
            "man page: no loadlab-{c}"
        );
    }
}

//! The flags of other load tools (wrk, wrk2, hey, oha, vegeta, ab, ghz, k6) and what to
//! type in loadlab instead: the table behind docs/src/habits.md.
//!
//! [`crate::habits`] reads it twice: before parsing, for the flags that are valid here but
//! mean something else in a peer ([`Fit::Clash`]), and when clap refuses an argument, to
//! say loadlab's equivalent instead of clap's guess. A unit test holds it and habits.md
//! together: every flag here is in the page, in its peer's section.

/// A load tool whose users bring its flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Peer {
    /// wrk (`-c -d -t`, Lua scripts).
    Wrk,
    /// wrk2 (wrk with `-R`, a rate).
    Wrk2,
    /// hey (Go: one-dash flags, `-z`, `-q` per worker).
    Hey,
    /// oha (hey's letters, GNU style).
    Oha,
    /// vegeta (`vegeta attack`, one-dash long flags).
    Vegeta,
    /// ApacheBench.
    Ab,
    /// ghz (gRPC): `loadlab grpc`.
    Ghz,
    /// k6 (JavaScript; its command-line flags).
    K6,
}

impl Peer {
    /// The tool's name, as its users write it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Peer::Wrk => "wrk",
            Peer::Wrk2 => "wrk2",
            Peer::Hey => "hey",
            Peer::Oha => "oha",
            Peer::Vegeta => "vegeta",
            Peer::Ab => "ab",
            Peer::Ghz => "ghz",
            Peer::K6 => "k6",
        }
    }

    /// The loadlab command its users come to: `grpc` for ghz's, `run` for the others.
    pub(crate) fn command(self) -> &'static str {
        match self {
            Peer::Ghz => "grpc",
            _ => "run",
        }
    }
}

/// How loadlab takes a peer's flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fit {
    /// Accepted, meaning the same.
    Same,
    /// Accepted here with another meaning: [`crate::habits`] refuses or warns where the
    /// value has the peer's shape.
    Clash,
    /// Not a flag of loadlab's: clap refuses it, and the row says what to type.
    Absent,
}

/// One flag of one or more peers, and loadlab's equivalent.
#[derive(Debug)]
pub(crate) struct Habit {
    /// The tools that spell and mean it so.
    pub(crate) peers: &'static [Peer],
    /// Its spellings there (`-s`, `--script`).
    pub(crate) flags: &'static [&'static str],
    /// What it does there.
    pub(crate) meaning: &'static str,
    /// What to type here, or `none: ` or `nothing to do: ` and the nearest thing.
    pub(crate) here: &'static str,
    /// Whether loadlab takes it.
    pub(crate) fit: Fit,
}

use Fit::{Absent, Clash, Same};
use Peer::{Ab, Ghz, Hey, Oha, Vegeta, Wrk, Wrk2, K6};

const WRK: &[Peer] = &[Wrk, Wrk2];
const HEY_OHA: &[Peer] = &[Hey, Oha];

/// The table: each peer's flags as docs/src/habits.md lists them.
#[rustfmt::skip]
pub(crate) const HABITS: &[Habit] = &[
    // wrk, wrk2
    Habit { peers: WRK, flags: &["-c", "--connections"], meaning: "connections", here: "`-c N`", fit: Same },
    Habit { peers: WRK, flags: &["-d", "--duration"], meaning: "duration", here: "`-d 30s`", fit: Same },
    Habit { peers: WRK, flags: &["-t", "--threads"], meaning: "threads", here: "`-t N`", fit: Same },
    Habit { peers: WRK, flags: &["-H", "--header"], meaning: "header", here: "`-H 'K: v'`", fit: Same },
    Habit { peers: WRK, flags: &["--latency"], meaning: "percentile spectrum", here: "`--latency`", fit: Same },
    Habit { peers: WRK, flags: &["--timeout"], meaning: "timeout", here: "`--timeout 2s`", fit: Same },
    Habit {
        peers: WRK,
        flags: &["-s", "--script"],
        meaning: "Lua script",
        here: "none: loadlab runs no scripts; vary requests with templates, `--data` or `--targets` \
               (docs/src/templates.md); a method or a body: `-X`, `--body`, `--body-file`",
        fit: Absent,
    },
    Habit { peers: &[Wrk2], flags: &["-R", "--rate"], meaning: "rate", here: "`-R N` (or `--rate N`, `-r N`)", fit: Same },
    Habit {
        peers: &[Wrk2],
        flags: &["--u_latency"],
        meaning: "uncorrected latency spectrum",
        here: "none: the summary's service time line is the uncorrected figure closest to it",
        fit: Absent,
    },
    // hey
    Habit { peers: &[Hey, Oha, Ab, Ghz], flags: &["-n"], meaning: "request count", here: "`-n 200`", fit: Same },
    Habit { peers: &[Hey, Oha, Ab], flags: &["-c"], meaning: "workers", here: "`-c 50`", fit: Same },
    Habit { peers: &[Hey, Oha, Ghz], flags: &["-z"], meaning: "duration", here: "`-z 10s` (or `-d 10s`)", fit: Same },
    Habit {
        peers: &[Hey],
        flags: &["-q"],
        meaning: "rate per worker",
        here: "use `--rate` (loadlab's rate is the total: hey's `-q` × `-c`); here `-q` is quiet",
        fit: Clash,
    },
    Habit {
        peers: &[Oha],
        flags: &["-q"],
        meaning: "rate (the total)",
        here: "use `--rate 1000` (or `-R 1000`); here `-q` is quiet",
        fit: Clash,
    },
    Habit { peers: HEY_OHA, flags: &["-m"], meaning: "method", here: "use `-X POST`", fit: Absent },
    Habit { peers: &[Hey, Oha, Ab], flags: &["-H"], meaning: "header", here: "`-H 'K: v'`", fit: Same },
    Habit {
        peers: &[Hey],
        flags: &["-t"],
        meaning: "timeout in seconds",
        here: "use `--timeout 20s`; here `-t` is worker threads",
        fit: Clash,
    },
    Habit { peers: &[Hey], flags: &["-A"], meaning: "Accept header", here: "use `-H 'Accept: …'`", fit: Absent },
    Habit { peers: &[Hey, Ab], flags: &["-T"], meaning: "Content-Type header", here: "use `-H 'Content-Type: …'`", fit: Absent },
    Habit {
        peers: &[Hey],
        flags: &["-a"],
        meaning: "basic authentication (user:pass)",
        here: "use `-H 'Authorization: Basic …'` (user:pass in base64)",
        fit: Absent,
    },
    Habit { peers: &[Hey], flags: &["-host"], meaning: "Host header", here: "use `-H 'Host: …'`", fit: Absent },
    Habit { peers: &[Hey], flags: &["-U"], meaning: "User-Agent header", here: "use `-H 'User-Agent: …'`", fit: Absent },
    Habit {
        peers: HEY_OHA,
        flags: &["-d"],
        meaning: "body",
        here: "use `--body 'text'`; `-d` is the duration here",
        fit: Clash,
    },
    Habit { peers: HEY_OHA, flags: &["-D"], meaning: "body file", here: "use `--body-file FILE`", fit: Absent },
    Habit { peers: &[Hey], flags: &["-h2"], meaning: "HTTP/2 flag", here: "use `--http2`", fit: Clash },
    Habit { peers: &[Hey], flags: &["-disable-keepalive"], meaning: "no keep-alive", here: "use `--keep-alive off`", fit: Absent },
    Habit {
        peers: &[Hey],
        flags: &["-disable-redirects"],
        meaning: "no redirects",
        here: "nothing to do: loadlab never follows redirects (a 3xx is a response, counted as a success)",
        fit: Absent,
    },
    Habit {
        peers: &[Hey],
        flags: &["-o"],
        meaning: "output type (`-o csv`)",
        here: "use `--csv -` (one row per second)",
        fit: Absent,
    },
    Habit {
        peers: &[Hey],
        flags: &["-cpus"],
        meaning: "CPU count",
        here: "use `-t N` (`--cpus LIST` pins them)",
        fit: Absent,
    },
    Habit { peers: &[Hey], flags: &["-x"], meaning: "HTTP proxy", here: "none: loadlab connects to the URL's host", fit: Absent },
    // oha
    Habit {
        peers: &[Oha],
        flags: &["--latency-correction"],
        meaning: "latency from the intended send time",
        here: "nothing to do: always on in open loop (`--rate`)",
        fit: Absent,
    },
    Habit {
        peers: &[Oha, Ghz],
        flags: &["-t"],
        meaning: "timeout",
        here: "use `--timeout 20s`; here `-t` is worker threads",
        fit: Clash,
    },
    Habit { peers: &[Oha], flags: &["--http2"], meaning: "HTTP/2 flag", here: "`--http2`", fit: Same },
    Habit { peers: &[Vegeta], flags: &["-http2"], meaning: "HTTP/2 flag", here: "use `--http2`", fit: Absent },
    Habit { peers: &[Oha, Ghz], flags: &["--insecure"], meaning: "no certificate checks", here: "`-k` / `--insecure`", fit: Same },
    Habit { peers: &[Oha], flags: &["--disable-keepalive"], meaning: "no keep-alive", here: "use `--keep-alive off`", fit: Absent },
    Habit {
        peers: &[Oha],
        flags: &["--rand-regex-url"],
        meaning: "random URLs from a regex",
        here: "use templates in the URL: `${randstr:3}`, `${rand:1-1000}`, `${pick:a,b}` (docs/src/templates.md)",
        fit: Absent,
    },
    Habit {
        peers: &[Oha],
        flags: &["-j", "--json"],
        meaning: "JSON output",
        here: "use `--json -` (here `--json` takes a path; `-` is standard output)",
        fit: Clash,
    },
    Habit {
        peers: &[Oha],
        flags: &["--no-tui"],
        meaning: "plain output",
        here: "nothing to do: loadlab's live view is one status area on stderr, silenced by `-q`, \
               absent without a terminal",
        fit: Absent,
    },
    Habit {
        peers: &[Oha],
        flags: &["-w", "--wait-ongoing-requests-after-deadline"],
        meaning: "wait for requests in flight at the end",
        here: "nothing to do: always (each gets at most its `--timeout`)",
        fit: Absent,
    },
    Habit {
        peers: &[Oha],
        flags: &["--burst-delay", "--burst-rate"],
        meaning: "bursts",
        here: "none: `--arrival poisson` for irregular arrivals",
        fit: Absent,
    },
    Habit {
        peers: &[Oha],
        flags: &["--connect-to", "--ipv4", "--ipv6", "--unix-socket"],
        meaning: "address choice",
        here: "none: loadlab connects to the address the URL's host resolves to",
        fit: Absent,
    },
    // vegeta: one-dash long flags
    Habit { peers: &[Vegeta], flags: &["-targets"], meaning: "targets file", here: "use `--targets FILE`", fit: Absent },
    Habit {
        peers: &[Vegeta],
        flags: &["-rate"],
        meaning: "rate",
        here: "use `--rate 100/s` (the same syntax); `-rate 0` (as fast as possible): leave out \
               `--rate` and give `-c`",
        fit: Absent,
    },
    Habit { peers: &[Vegeta], flags: &["-duration"], meaning: "duration", here: "use `-d 30s`", fit: Absent },
    Habit { peers: &[Vegeta], flags: &["-workers"], meaning: "workers", here: "use `-c N`", fit: Absent },
    Habit { peers: &[Vegeta], flags: &["-max-workers"], meaning: "worker ceiling", here: "use `--max-connections N`", fit: Absent },
    Habit { peers: &[Vegeta], flags: &["-timeout"], meaning: "timeout", here: "use `--timeout 2s`", fit: Absent },
    Habit { peers: &[Vegeta], flags: &["-header"], meaning: "header", here: "use `-H 'K: v'`", fit: Absent },
    Habit { peers: &[Vegeta], flags: &["-body"], meaning: "body file", here: "use `--body-file FILE`", fit: Absent },
    Habit { peers: &[Vegeta], flags: &["-insecure"], meaning: "no certificate checks", here: "use `-k`", fit: Absent },
    Habit { peers: &[Vegeta], flags: &["-root-certs"], meaning: "trusted CAs", here: "use `--cacert FILE`", fit: Absent },
    Habit { peers: &[Vegeta], flags: &["-h2c"], meaning: "HTTP/2 without TLS", here: "use `--http2` (h2c on http://)", fit: Absent },
    Habit { peers: &[Vegeta], flags: &["-keepalive"], meaning: "keep-alive switch", here: "use `--keep-alive off`", fit: Absent },
    Habit { peers: &[Vegeta], flags: &["-laddr"], meaning: "local address", here: "use `--source-addrs ADDRS`", fit: Absent },
    Habit {
        peers: &[Vegeta],
        flags: &["-redirects"],
        meaning: "redirects to follow",
        here: "none: loadlab never follows redirects",
        fit: Absent,
    },
    Habit { peers: &[Vegeta], flags: &["-format"], meaning: "targets format", here: "none: the http targets format only", fit: Absent },
    Habit { peers: &[Vegeta], flags: &["-lazy"], meaning: "lazy targets", here: "none: the targets are read before the load", fit: Absent },
    Habit {
        peers: &[Vegeta],
        flags: &["-output"],
        meaning: "results file",
        here: "use the summary, `--json FILE`, `--csv FILE` or `--hlog FILE`",
        fit: Absent,
    },
    Habit {
        peers: &[Vegeta],
        flags: &["-type"],
        meaning: "report type (`vegeta report -type=hist`)",
        here: "use `--latency` (a percentile spectrum)",
        fit: Absent,
    },
    Habit {
        peers: &[Vegeta],
        flags: &["-prometheus-addr"],
        meaning: "Prometheus endpoint (scraped)",
        here: "use `--prometheus-rw URL` (pushed)",
        fit: Absent,
    },
    Habit {
        peers: &[Vegeta],
        flags: &["-dns-ttl", "-resolvers", "-chunked", "-max-body", "-unix-socket"],
        meaning: "option",
        here: "none",
        fit: Absent,
    },
    // ab
    Habit {
        peers: &[Ab],
        flags: &["-k"],
        meaning: "keep-alive",
        here: "nothing to do: keep-alive is loadlab's default (here `-k` is `--insecure`, which \
               changes nothing on http://); ab without `-k` is `--keep-alive off --close-by client`",
        fit: Clash,
    },
    Habit {
        peers: &[Ab],
        flags: &["-t"],
        meaning: "time limit in seconds",
        here: "use `-d 30s`; here `-t` is worker threads",
        fit: Clash,
    },
    Habit { peers: &[Ab], flags: &["-s"], meaning: "timeout in seconds", here: "use `--timeout 30s`", fit: Absent },
    Habit {
        peers: &[Ab],
        flags: &["-p"],
        meaning: "POST body file",
        here: "use `-X POST --body-file FILE`",
        fit: Absent,
    },
    Habit { peers: &[Ab], flags: &["-C"], meaning: "cookie", here: "use `-H 'Cookie: name=value'`", fit: Absent },
    Habit {
        peers: &[Ab],
        flags: &["-A"],
        meaning: "basic authentication (user:pass)",
        here: "use `-H 'Authorization: Basic …'` (user:pass in base64)",
        fit: Absent,
    },
    Habit {
        peers: &[Ab],
        flags: &["-g"],
        meaning: "gnuplot file",
        here: "use `--csv FILE` (one row per second) or `--hlog FILE`",
        fit: Absent,
    },
    Habit {
        peers: &[Ab],
        flags: &["-e"],
        meaning: "percentiles as CSV",
        here: "use `--latency` (the percentile spectrum) or `--json FILE`",
        fit: Absent,
    },
    Habit { peers: &[Ab, K6], flags: &["-q"], meaning: "quiet", here: "`-q`", fit: Same },
    Habit {
        peers: &[Ab],
        flags: &["-r"],
        meaning: "no exit on receive errors",
        here: "nothing to do: loadlab never stops on an error, it counts it; here `-r` is the rate",
        fit: Clash,
    },
    Habit {
        peers: &[Ab],
        flags: &["-v"],
        meaning: "verbosity",
        here: "none: the summary; `--json -` for every figure",
        fit: Absent,
    },
    Habit {
        peers: &[Ab],
        flags: &["-l"],
        meaning: "variable response lengths",
        here: "nothing to do: loadlab never compares response lengths",
        fit: Absent,
    },
    // ghz
    Habit { peers: &[Ghz], flags: &["--proto"], meaning: "proto file", here: "`--proto`", fit: Same },
    Habit { peers: &[Ghz], flags: &["--call"], meaning: "method", here: "`--call`", fit: Same },
    Habit { peers: &[Ghz], flags: &["-i", "--import-paths"], meaning: "import paths", here: "`-I/--import-path`", fit: Same },
    Habit {
        peers: &[Ghz],
        flags: &["-d"],
        meaning: "request as JSON",
        here: "use `-D '{\"name\":\"x\"}'`; `-d` is the duration here",
        fit: Clash,
    },
    Habit { peers: &[Ghz], flags: &["-D"], meaning: "data file", here: "`-D data.json`", fit: Same },
    Habit {
        peers: &[Ghz],
        flags: &["-c"],
        meaning: "calls in flight",
        here: "use `--concurrency 50`; here `-c` is the HTTP/2 connections",
        fit: Clash,
    },
    Habit { peers: &[Ghz], flags: &["--connections"], meaning: "connections", here: "`-c 8`", fit: Same },
    Habit { peers: &[Ghz], flags: &["-x"], meaning: "maximum duration", here: "use `-z 30s` or `-d 30s`", fit: Absent },
    Habit { peers: &[Ghz], flags: &["-r", "--rps"], meaning: "rate", here: "`-r 500`, `--rps 500` or `--rate 500`", fit: Same },
    Habit { peers: &[Ghz], flags: &["-m"], meaning: "metadata", here: "`-m '{\"k\":\"v\"}'`", fit: Same },
    Habit { peers: &[Ghz], flags: &["--skipTLS"], meaning: "no certificate checks", here: "use `https://HOST:PORT -k`", fit: Absent },
    Habit { peers: &[Ghz], flags: &["--cacert", "--cert", "--key"], meaning: "TLS files", here: "`--cacert`", fit: Same },
    Habit {
        peers: &[Ghz],
        flags: &["-O", "-o"],
        meaning: "output format and file",
        here: "use `--json FILE` or `--csv FILE` (`-` for stdout)",
        fit: Absent,
    },
    Habit {
        peers: &[Ghz],
        flags: &["--load-schedule", "--load-start", "--load-step"],
        meaning: "rate schedule",
        here: "use `loadlab knee ADDR --proto … --call …` (the knee search), or a plan's `steps`",
        fit: Absent,
    },
    Habit {
        peers: &[Ghz],
        flags: &["--concurrency-schedule"],
        meaning: "concurrency schedule",
        here: "use `loadlab knee --model closed`",
        fit: Absent,
    },
    Habit { peers: &[Ghz], flags: &["--skipFirst"], meaning: "calls left out", here: "use `--warmup 2s` (a time)", fit: Absent },
    Habit {
        peers: &[Ghz],
        flags: &["--cpus"],
        meaning: "CPU count",
        here: "use `-t N`; here `--cpus LIST` pins the workers to those CPUs",
        fit: Clash,
    },
    Habit { peers: &[Ghz], flags: &["--async"], meaning: "calls on schedule", here: "use `--rate` (open loop)", fit: Absent },
    Habit {
        peers: &[Ghz],
        flags: &["--stream-call-duration", "--stream-interval"],
        meaning: "streaming call option",
        here: "none: streams are held for the run, their messages sent at the run's rate (`--rate`)",
        fit: Absent,
    },
    Habit {
        peers: &[Ghz],
        flags: &["--protoset"],
        meaning: "compiled descriptor set",
        here: "`--protoset FILE`; with neither it nor `--proto`, the server's reflection describes the service, as in ghz",
        fit: Same,
    },
    Habit {
        peers: &[Ghz],
        flags: &["-b", "--binary"],
        meaning: "binary message",
        here: "none: the message is JSON (`-D`), which may hold templates",
        fit: Absent,
    },
    Habit {
        peers: &[Ghz],
        flags: &["-e", "--enable-compression", "--lb-strategy", "--cname", "--authority"],
        meaning: "option",
        here: "none",
        fit: Absent,
    },
    // k6
    Habit { peers: &[K6], flags: &["--vus", "-u"], meaning: "virtual users", here: "use `-c 50` (closed loop)", fit: Absent },
    Habit { peers: &[K6], flags: &["--duration"], meaning: "duration", here: "`-d`", fit: Same },
    Habit { peers: &[K6], flags: &["--iterations", "-i"], meaning: "iterations", here: "use `-n`", fit: Absent },
    Habit {
        peers: &[K6],
        flags: &["-o", "--out"],
        meaning: "output (`--out json=file`)",
        here: "use `--json FILE`, `--csv FILE` or `--prometheus-rw URL`",
        fit: Absent,
    },
    Habit { peers: &[K6], flags: &["--insecure-skip-tls-verify"], meaning: "no certificate checks", here: "use `-k`", fit: Absent },
    Habit { peers: &[K6], flags: &["--no-connection-reuse"], meaning: "no keep-alive", here: "use `--keep-alive off`", fit: Absent },
    Habit {
        peers: &[K6],
        flags: &["--summary-trend-stats"],
        meaning: "summary percentiles",
        here: "use `--latency` (the percentile spectrum)",
        fit: Absent,
    },
    Habit {
        peers: &[K6],
        flags: &["--stage", "-s"],
        meaning: "ramping stages",
        here: "use `loadlab knee` (it finds where the server breaks) or a plan's `[load] steps`",
        fit: Absent,
    },
];

/// Whether `token` (an argument as typed, `--out=x` included) is one of `flags`.
fn spells(flags: &[&str], token: &str) -> bool {
    let name = match token.split_once('=') {
        Some((n, _)) if n.starts_with('-') => n,
        _ => token,
    };
    flags.contains(&name)
}

/// The rows for `token` typed to `loadlab COMMAND`: those of the peers that come to that
/// command, else those of any peer.
pub(crate) fn lookup(command: &str, token: &str) -> Vec<&'static Habit> {
    let rows: Vec<&Habit> = HABITS
        .iter()
        .filter(|h| h.fit != Fit::Same && spells(h.flags, token))
        .collect();
    let theirs: Vec<&Habit> = rows
        .iter()
        .copied()
        .filter(|h| h.peers.iter().any(|p| p.command() == command))
        .collect();
    if theirs.is_empty() {
        rows
    } else {
        theirs
    }
}

/// `hey's and oha's`.
fn owners(peers: &[Peer]) -> String {
    let names: Vec<String> = peers.iter().map(|p| format!("{}'s", p.name())).collect();
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// What the rows say of `token`, one line each: "`-m` is hey's and oha's method: use `-X
/// POST`".
pub(crate) fn explain(rows: &[&Habit], token: &str) -> Vec<String> {
    let name = match token.split_once('=') {
        Some((n, _)) if n.starts_with('-') => n,
        _ => token,
    };
    rows.iter()
        .map(|h| format!("`{name}` is {} {}: {}", owners(h.peers), h.meaning, h.here))
        .collect()
}

/// Whether `flag` is a one-dash long flag of a peer (`-rate`, `-h2`), never a cluster of
/// loadlab's short flags.
pub(crate) fn one_dash_long(flag: &str) -> bool {
    flag.len() > 2 && flag.starts_with('-') && !flag.starts_with("--")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page users read.
    const PAGE: &str = include_str!("../../../docs/src/habits.md");

    /// The text of `## PEER` in habits.md, up to the next section.
    fn section(peer: Peer) -> &'static str {
        let head = PAGE
            .lines()
            .find(|l| {
                l.strip_prefix("## ")
                    .is_some_and(|h| h.split_whitespace().next() == Some(peer.name()))
            })
            .unwrap_or_else(|| panic!("habits.md has no section for {}", peer.name()));
        let start = PAGE.find(head).unwrap() + head.len();
        let rest = &PAGE[start..];
        &rest[..rest.find("\n## ").unwrap_or(rest.len())]
    }

    #[test]
    fn every_flag_of_the_table_is_in_its_peers_section_of_habits_md() {
        for h in HABITS {
            for &p in h.peers {
                // wrk2's section says "everything of wrk above".
                let text = if p == Peer::Wrk2 {
                    format!("{}{}", section(Peer::Wrk), section(Peer::Wrk2))
                } else {
                    section(p).to_string()
                };
                for f in h.flags {
                    let written = text.match_indices(f).any(|(i, _)| {
                        let after = text[i + f.len()..].chars().next();
                        let before = text[..i].chars().next_back();
                        !after.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
                            && !before.is_some_and(|c| c == '-' || c.is_alphanumeric())
                    });
                    assert!(
                        written,
                        "{}'s `{f}` is not in its section of habits.md",
                        p.name()
                    );
                }
            }
        }
    }

    #[test]
    fn a_refused_flag_is_explained_for_the_command_its_users_come_to() {
        let m = explain(&lookup("run", "-m"), "-m");
        assert_eq!(m, ["`-m` is hey's and oha's method: use `-X POST`"]);
        let s = explain(&lookup("run", "-s"), "-s");
        assert_eq!(s.len(), 3, "{s:?}");
        assert!(
            s[0].starts_with("`-s` is wrk's and wrk2's Lua script: none: loadlab runs no scripts")
        );
        // ghz's `-x` for `loadlab grpc`; hey's for `loadlab run`.
        assert!(explain(&lookup("grpc", "-x"), "-x")[0].contains("ghz's maximum duration"));
        assert!(explain(&lookup("run", "-x"), "-x")[0].contains("hey's HTTP proxy"));
        assert!(explain(&lookup("run", "--out=json=a"), "--out=json=a")[0]
            .starts_with("`--out` is k6's"));
        // Flags loadlab takes as they are have no explanation.
        assert!(lookup("run", "--latency").is_empty());
        assert!(lookup("run", "--nonsense").is_empty());
        assert!(one_dash_long("-h2") && one_dash_long("-rate"));
        assert!(!one_dash_long("-t") && !one_dash_long("--rate"));
    }
}

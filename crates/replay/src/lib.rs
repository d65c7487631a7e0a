//! Real traffic to replay: the requests an access log or a recording holds, with the time
//! each was made.
//!
//! # Layout
//! - [`Format`]: which reader (`combined`, `common`, `nginx:FORMAT`, `jsonl[:MAPPING]`,
//!   `har`), named on a command line or told from a file's first line ([`Format::detect`]).
//! - [`Traffic`]: a file read as a stream of [`Entry`]s, one line at a time (a log of any
//!   size in little memory; a HAR, one JSON document, whole), each line that is not a
//!   request a [`LineError`] with its number and why; [`Tally`] counts both and keeps the
//!   first few errors to show.
//! - [`nginx`]: format strings (nginx's `log_format`; `combined` and `common` are two).
//! - [`jsonl`]: JSON Lines and the [`jsonl::Mapping`] of their fields.
//! - [`har`]: HAR 1.2.
//! - [`time`]: the times logs write.
//! - [`name`]: request names with identifiers folded (`/users/{id}`).
//! - [`mix`]: a log's requests as a weighted list, in its proportions without its timing.
//! - [`timeline`]: a log's requests at the times it logged them (a timed replay).
//! - [`Policy`]: what a replay sends by default (GET and HEAD; no cookies, no credentials).
//!
//! # Use
//! ```
//! use loadlab_replay::{Format, Traffic};
//!
//! let log = "::1 - - [10/Oct/2000:13:55:36 -0700] \"GET /users/42 HTTP/1.1\" 200 5\n\
//!            not a request\n";
//! let format: Format = "common".parse()?;
//! let mut traffic = Traffic::new(log.as_bytes(), &format)?;
//! let entries: Vec<_> = traffic.by_ref().filter_map(Result::ok).collect();
//! assert_eq!(entries.len(), 1);
//! assert_eq!(loadlab_replay::name::fold(&entries[0].target), "/users/{id}");
//! assert_eq!((traffic.tally().entries, traffic.tally().bad), (1, 1));
//! # Ok::<(), loadlab_replay::ReplayError>(())
//! ```

pub mod har;
pub mod jsonl;
pub mod mix;
pub mod name;
pub mod nginx;
pub mod time;
pub mod timeline;

use std::io::BufRead;
use std::path::Path;

/// One request of the traffic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// Its line in the file (1 for the first; a HAR's entry number).
    pub line: u64,
    /// When it was made, ns since the Unix epoch (its start: a log written at the end with
    /// the request's duration is moved back by it); `None` when the format has no time.
    pub at_ns: Option<u64>,
    /// How finely `at_ns` resolves (1 s for `$time_local`, 1 ms for `$msec`): a replay
    /// spreads the requests of one such tick across it rather than sending them at once.
    pub resolution_ns: u64,
    /// The method, upper case.
    pub method: String,
    /// The target as sent: a path and its query (`/a?b=1`).
    pub target: String,
    /// The host it was sent to, if logged.
    pub host: Option<String>,
    /// The status it had, if logged.
    pub status: Option<u16>,
    /// Request headers logged with it, names as sent.
    pub headers: Vec<(String, String)>,
    /// Its body, if recorded (HAR).
    pub body: Option<Vec<u8>>,
}

impl Entry {
    /// An empty entry of line `line`.
    pub(crate) fn at_line(line: u64) -> Entry {
        Entry {
            line,
            ..Entry::default()
        }
    }
}

/// A line that is not a request: where, what it held (the first 200 characters), and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {why}: {text}")]
pub struct LineError {
    /// Its number (1 for the first).
    pub line: u64,
    /// Its beginning.
    pub text: String,
    /// Why it is not a request.
    pub why: String,
}

impl LineError {
    pub(crate) fn new(line: u64, text: &str, why: String) -> LineError {
        let text = match text.char_indices().nth(200) {
            Some((i, _)) => format!("{}…", &text[..i]),
            None => text.to_string(),
        };
        LineError { line, text, why }
    }
}

/// Which reader a file needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// A format string: nginx's `log_format` (`combined` and `common` are two).
    Log(nginx::LogFormat),
    /// JSON Lines, their fields found by a mapping.
    JsonLines(jsonl::Mapping),
    /// HAR 1.2.
    Har,
}

/// Why traffic cannot be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A format named that does not exist, or whose format string or mapping is wrong.
    #[error("--log-format {given:?}: {why}")]
    Format {
        /// As given.
        given: String,
        /// Why.
        why: String,
    },
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A HAR that is not one.
    #[error(transparent)]
    Har(#[from] har::HarError),
    /// The format could not be told from the file's first line.
    #[error("{path}: its format is not one loadlab knows from its first line ({first:?}): name it with --log-format (combined, common, 'nginx:$msec \"$request\" …', jsonl or har)")]
    Unknown {
        /// The file.
        path: String,
        /// Its first line (its beginning).
        first: String,
    },
}

impl std::str::FromStr for Format {
    type Err = ReplayError;

    /// `combined`, `common`, `nginx:FORMAT` (or a format string with a `$` in it), `jsonl`
    /// or `jsonl:FIELD=PATH,…`, `har`.
    fn from_str(s: &str) -> Result<Format, ReplayError> {
        let err = |why: String| ReplayError::Format {
            given: s.to_string(),
            why,
        };
        let log = |f: &str| {
            nginx::LogFormat::compile(f)
                .map(Format::Log)
                .map_err(|e| err(e.to_string()))
        };
        match s {
            "combined" => log(nginx::COMBINED),
            "common" => log(nginx::COMMON),
            "har" => Ok(Format::Har),
            "jsonl" | "json" => Ok(Format::JsonLines(jsonl::Mapping::default())),
            _ => {
                if let Some(f) = s.strip_prefix("nginx:") {
                    log(f)
                } else if let Some(m) = s.strip_prefix("jsonl:") {
                    m.parse()
                        .map(Format::JsonLines)
                        .map_err(|e: jsonl::MappingError| err(e.to_string()))
                } else if s.contains('$') {
                    log(s)
                } else {
                    Err(err(
                        "not a format: combined, common, nginx:FORMAT, jsonl[:FIELD=PATH,…] or har"
                            .into(),
                    ))
                }
            }
        }
    }
}

impl Format {
    /// The format a file's first line says: a HAR's `{` with `"log"`, a JSON line, or a
    /// line the combined (else the common) format reads; `None` otherwise.
    pub fn detect(first: &str) -> Option<Format> {
        let t = first.trim_start();
        if t.starts_with('{') {
            // A line that is not a whole JSON object opens a document: a HAR.
            return match serde_json::from_str::<serde_json::Value>(t) {
                Ok(v) if v.get("log").is_some() => Some(Format::Har),
                Ok(_) => Some(Format::JsonLines(jsonl::Mapping::default())),
                Err(_) => Some(Format::Har),
            };
        }
        [nginx::COMBINED, nginx::COMMON].into_iter().find_map(|f| {
            let f = nginx::LogFormat::compile(f).expect("a known format");
            f.parse(first.trim_end_matches(['\r', '\n']), 1)
                .is_ok()
                .then_some(Format::Log(f))
        })
    }
}

/// What a read has counted so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Requests read.
    pub entries: u64,
    /// Lines that were not requests (blank lines are not counted).
    pub bad: u64,
    /// The first [`Tally::KEPT`] of those, to show.
    pub first_bad: Vec<LineError>,
}

impl Tally {
    /// Bad lines kept to show.
    pub const KEPT: usize = 5;

    fn count(&mut self, r: &Result<Entry, LineError>) {
        match r {
            Ok(_) => self.entries += 1,
            Err(e) => {
                self.bad += 1;
                if self.first_bad.len() < Tally::KEPT {
                    self.first_bad.push(e.clone());
                }
            }
        }
    }
}

enum Source<R> {
    Lines { input: R, buf: Vec<u8>, line: u64 },
    Har(std::vec::IntoIter<Result<Entry, LineError>>),
}

/// Traffic read from a file, one request at a time.
pub struct Traffic<R> {
    source: Source<R>,
    format: Format,
    tally: Tally,
}

impl<R: BufRead> Traffic<R> {
    /// Reads `input` in `format` (a HAR is read whole here).
    pub fn new(mut input: R, format: &Format) -> Result<Traffic<R>, ReplayError> {
        let source = match format {
            Format::Har => {
                let mut text = String::new();
                input
                    .read_to_string(&mut text)
                    .map_err(|source| ReplayError::Io {
                        path: "the HAR".into(),
                        source,
                    })?;
                Source::Har(har::read(&text)?.into_iter())
            }
            _ => Source::Lines {
                input,
                buf: Vec::with_capacity(512),
                line: 0,
            },
        };
        Ok(Traffic {
            source,
            format: format.clone(),
            tally: Tally::default(),
        })
    }

    /// What was read so far.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }
}

impl Traffic<std::io::BufReader<std::fs::File>> {
    /// Opens `path`, its format named or (`None`) told from its first line.
    pub fn open(path: &Path, format: Option<&Format>) -> Result<Self, ReplayError> {
        let io = |source| ReplayError::Io {
            path: path.display().to_string(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let mut input = std::io::BufReader::with_capacity(1 << 20, file);
        let format = match format {
            Some(f) => f.clone(),
            None => {
                // The first line that is not blank, without consuming it.
                let first = {
                    let buf = input.fill_buf().map_err(io)?;
                    let head =
                        String::from_utf8_lossy(&buf[..buf.len().min(64 << 10)]).into_owned();
                    head.lines()
                        .find(|l| !l.trim().is_empty())
                        .unwrap_or("")
                        .to_string()
                };
                Format::detect(&first).ok_or_else(|| ReplayError::Unknown {
                    path: path.display().to_string(),
                    first: first.chars().take(120).collect(),
                })?
            }
        };
        Traffic::new(input, &format)
    }
}

impl<R: BufRead> Iterator for Traffic<R> {
    type Item = Result<Entry, LineError>;

    fn next(&mut self) -> Option<Self::Item> {
        let r = match &mut self.source {
            Source::Har(entries) => entries.next()?,
            Source::Lines { input, buf, line } => loop {
                buf.clear();
                match input.read_until(b'\n', buf) {
                    Ok(0) => return None,
                    Ok(_) => {}
                    Err(e) => {
                        *line += 1;
                        break Err(LineError::new(*line, "", format!("unreadable: {e}")));
                    }
                }
                *line += 1;
                let text = String::from_utf8_lossy(buf);
                let text = text.trim_end_matches(['\r', '\n']);
                if text.trim().is_empty() {
                    continue;
                }
                break match &self.format {
                    Format::Log(f) => f.parse(text, *line),
                    Format::JsonLines(m) => jsonl::parse(text, *line, m),
                    Format::Har => unreachable!("a HAR is read whole"),
                };
            },
        };
        self.tally.count(&r);
        Some(r)
    }
}

/// What a replay sends: the methods it replays (GET and HEAD unless others are named: a
/// replayed POST repeats its side effects) and the headers it keeps (none that carry a
/// session or credentials unless named).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Methods replayed, upper case.
    pub methods: Vec<String>,
    /// Headers of [`Policy::SECRET`] kept anyway (lower case).
    pub keep: Vec<String>,
    /// Only the requests made at or after this time (ns since the epoch): `--from`.
    pub from_ns: Option<u64>,
    /// Only the requests made before this time: `--to`.
    pub to_ns: Option<u64>,
}

/// Where a request stands against a [`Policy`]'s time window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InWindow {
    /// Within it (or no window).
    Yes,
    /// Outside it.
    Outside,
    /// A window was given and the request has no time.
    Untimed,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            from_ns: None,
            to_ns: None,
            methods: vec!["GET".into(), "HEAD".into()],
            keep: Vec::new(),
        }
    }
}

impl Policy {
    /// Headers dropped unless kept: they carry a user's session or credentials.
    pub const SECRET: [&'static str; 4] = [
        "cookie",
        "authorization",
        "proxy-authorization",
        "x-api-key",
    ];

    /// Whether `e` is replayed.
    pub fn admits(&self, e: &Entry) -> bool {
        self.methods.contains(&e.method)
    }

    /// Whether `e` was made within the window (`from_ns` to `to_ns`).
    pub fn in_window(&self, e: &Entry) -> InWindow {
        if self.from_ns.is_none() && self.to_ns.is_none() {
            return InWindow::Yes;
        }
        match e.at_ns {
            None => InWindow::Untimed,
            Some(t)
                if self.from_ns.is_some_and(|f| t < f) || self.to_ns.is_some_and(|x| t >= x) =>
            {
                InWindow::Outside
            }
            Some(_) => InWindow::Yes,
        }
    }

    /// `e` with the headers it may not send removed; the number removed.
    pub fn strip(&self, e: &mut Entry) -> usize {
        let before = e.headers.len();
        e.headers.retain(|(n, _)| {
            let n = n.to_ascii_lowercase();
            !Policy::SECRET.contains(&n.as_str()) || self.keep.contains(&n)
        });
        before - e.headers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str =
        "127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET /a HTTP/1.1\" 200 1 \"-\" \"curl\"\n\
        \n\
        bad line one\n\
        127.0.0.1 - - [10/Oct/2000:13:55:37 -0700] \"POST /b HTTP/1.1\" 201 1 \"-\" \"curl\"\r\n\
        \u{fffd}\u{fffd}\n";

    #[test]
    fn a_log_is_read_line_by_line_and_its_bad_lines_counted_with_their_numbers() {
        let format: Format = "combined".parse().unwrap();
        let mut t = Traffic::new(LOG.as_bytes(), &format).unwrap();
        let got: Vec<_> = t.by_ref().collect();
        assert_eq!(got.len(), 4, "{got:?}");
        let ok: Vec<&Entry> = got.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(
            ok.iter()
                .map(|e| (e.line, e.method.as_str()))
                .collect::<Vec<_>>(),
            [(1, "GET"), (4, "POST")]
        );
        assert_eq!(ok[1].at_ns.unwrap() - ok[0].at_ns.unwrap(), 1_000_000_000);
        let tally = t.tally();
        assert_eq!((tally.entries, tally.bad), (2, 2));
        assert_eq!(
            tally.first_bad.iter().map(|e| e.line).collect::<Vec<_>>(),
            [3, 5]
        );
    }

    #[test]
    fn formats_are_named_or_told_from_the_first_line() {
        assert!(matches!(
            Format::detect("{\"ts\": 1, \"url\": \"/\"}"),
            Some(Format::JsonLines(_))
        ));
        assert!(matches!(
            Format::detect("{\"log\": {\"version\": \"1.2\","),
            Some(Format::Har)
        ));
        assert!(matches!(Format::detect("{"), Some(Format::Har)));
        let combined = LOG.lines().next().unwrap();
        assert_eq!(Format::detect(combined), "combined".parse().ok());
        let common = "::1 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.1\" 200 5";
        assert_eq!(Format::detect(common), "common".parse().ok());
        assert_eq!(Format::detect("hello"), None);
        assert!(matches!(
            "$msec \"$request\"".parse::<Format>(),
            Ok(Format::Log(_))
        ));
        let err = "xml".parse::<Format>().unwrap_err().to_string();
        assert!(err.contains("combined, common, nginx:FORMAT"), "{err}");
        let err = "nginx:$status".parse::<Format>().unwrap_err().to_string();
        assert!(err.contains("logs no request"), "{err}");
    }

    #[test]
    fn a_replay_sends_reads_only_and_no_credentials_unless_told() {
        let mut e = Entry {
            method: "POST".into(),
            headers: vec![
                ("Cookie".into(), "s=1".into()),
                ("Authorization".into(), "Bearer x".into()),
                ("Accept".into(), "*/*".into()),
            ],
            ..Entry::default()
        };
        let p = Policy::default();
        assert!(!p.admits(&e));
        e.method = "HEAD".into();
        assert!(p.admits(&e));
        let mut kept = e.clone();
        assert_eq!(p.strip(&mut e), 2);
        assert_eq!(e.headers, vec![("Accept".into(), "*/*".into())]);
        let p = Policy {
            keep: vec!["cookie".into()],
            ..Policy::default()
        };
        assert_eq!(p.strip(&mut kept), 1);
        assert_eq!(kept.headers.len(), 2);
    }
}

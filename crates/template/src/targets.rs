//! Targets files in vegeta's `http` format: many requests, each with its own method, URL,
//! headers and body, read once before the run (templates are compiled by the caller).
//!
//! ```text
//! # @name list
//! GET http://goku:9090/path/to/dragon?item=ball
//! X-Account-ID: 8675309
//!
//! POST http://goku:9090/things
//! Content-Type: application/json
//! @/path/to/newthing.json
//! ```
//!
//! # Rules
//! As vegeta's `NewHTTPTargeter` (`lib/targets.go`) reads them:
//! - Lines are trimmed of surrounding whitespace (a trailing CR too). Blank lines and
//!   lines starting with `#` (comments) are skipped between requests; comments are
//!   skipped inside a request's header lines too.
//! - A request starts with a `METHOD URL` line: the method, one space, the URL. The method
//!   is uppercase ASCII letters (`GET`, `POST`, `SUBSCRIBE`: vegeta's `^[A-Z]+\s`); the URL
//!   is absolute (`http://host/path`) or a path (`/path`) with no whitespace in it (vegeta
//!   checks it with Go's `url.ParseRequestURI`; here a URL starting with `${` is taken
//!   as is).
//! - Then `Name: value` header lines: split at the first `:`, name and value trimmed,
//!   neither empty (vegeta's "bad header"), in order, repeats kept, the name's case kept.
//! - Then, optionally, one `@path` line: the body is that file's content (the path is
//!   everything after `@`). A body line ends the request.
//! - A blank line ends a request. Without one, a `METHOD URL` line right after a request
//!   line starts the next request (vegeta peeks at that one line); after header lines,
//!   vegeta would read a request line as a header (named `GET http`): here that is an
//!   error asking for the blank line. After a body line the next request may start at
//!   once.
//! - Body paths: vegeta opens them relative to the current directory. Here an absolute
//!   path is used as is; a relative path is looked up in the current directory first
//!   (vegeta's behaviour) and, when no such file exists there, in the targets file's
//!   directory.
//!
//! # Additions
//! - A comment line `# @name NAME` names the next request (1–64 characters, no control
//!   characters; names are unique within the file).
//! - Header names must be HTTP tokens (vegeta takes any text before the `:`).
//! - Bodies must be UTF-8 text (they may hold `${...}` expressions).
//! - At most 100,000 requests and 256 MiB of bodies (counted per request that uses them);
//!   the targets file itself is at most 256 MiB.
//!
//! Every error names the targets file, a line and a column.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Origin, TemplateError};

/// The most requests a targets file may hold.
pub const MAX_TARGETS: usize = 100_000;
/// The most body bytes a targets file's requests may hold together.
pub const MAX_BODY_BYTES: u64 = 256 << 20;
/// The largest targets file, in bytes.
pub const MAX_TARGETS_FILE_BYTES: u64 = 256 << 20;
/// The longest `# @name`, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// One request of a targets file, as text (templates not yet compiled).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetSpec {
    /// From a `# @name NAME` comment line before the request line.
    pub name: Option<String>,
    /// The method, as written.
    pub method: String,
    /// The URL, as written (may contain `${...}`).
    pub url: String,
    /// The `Name: value` lines as written (trimmed), in order.
    pub headers: Vec<String>,
    /// The `@file`'s content, read at parse time.
    pub body: Option<String>,
    /// The `@path` as written, for messages.
    pub body_file: Option<String>,
    /// The line of the `METHOD URL` line.
    pub line: usize,
    /// The targets file as given.
    pub file: String,
    /// The column (in characters) where the URL starts on line `line`.
    #[serde(default = "one")]
    pub url_col: usize,
    /// Where each header's value starts, (line, column), parallel to `headers`.
    #[serde(default)]
    pub header_at: Vec<(usize, usize)>,
    /// The path the body was read from (`body_file` resolved), for messages about the
    /// body's own text.
    #[serde(default)]
    pub body_path: Option<String>,
}

fn one() -> usize {
    1
}

impl TargetSpec {
    /// Header `i` split into its name and value, both trimmed. Panics if `i` is out of
    /// range.
    pub fn header(&self, i: usize) -> (&str, &str) {
        split_header(&self.headers[i]).unwrap_or((self.headers[i].as_str(), ""))
    }

    /// Where the URL starts, for [`crate::Template::parse`].
    pub fn url_origin(&self) -> Origin {
        Origin::new(self.file.as_str(), self.line, self.url_col)
    }

    /// Where header `i`'s value starts, for [`crate::Template::parse`] (the request
    /// line's start when `header_at` does not say, as in a spec built by hand).
    pub fn header_origin(&self, i: usize) -> Origin {
        let (line, col) = self.header_at.get(i).copied().unwrap_or((self.line, 1));
        Origin::new(self.file.as_str(), line, col)
    }

    /// Where the body's text starts: line 1, column 1 of the body file.
    pub fn body_origin(&self) -> Option<Origin> {
        let path = self.body_path.as_ref().or(self.body_file.as_ref())?;
        Some(Origin::new(path.as_str(), 1, 1))
    }
}

/// A header line's name and value, both trimmed (`None` without a `:`).
pub fn split_header(line: &str) -> Option<(&str, &str)> {
    let (name, value) = line.split_once(':')?;
    Some((name.trim(), value.trim()))
}

/// Reads the targets file at `path`; relative body paths are looked up in the current
/// directory, then beside `path`.
pub fn parse_targets(path: &Path) -> Result<Vec<TargetSpec>, TemplateError> {
    let file = path.display().to_string();
    let at = Origin::new(file.as_str(), 1, 1);
    let size = std::fs::metadata(path)
        .map_err(|e| at.error(format!("cannot read: {e}")))?
        .len();
    if size > MAX_TARGETS_FILE_BYTES {
        return Err(at.error(format!(
            "the targets file has {size} bytes; targets files are limited to 256 MiB"
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| at.error(format!("cannot read: {e}")))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        let before = &bytes[..e.valid_up_to()];
        let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        let col = 1 + String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count();
        Origin::new(file.as_str(), line, col).error("not valid UTF-8")
    })?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    parse_targets_str(text, &file, dir)
}

/// Parses targets file text; `file` is the name errors use and `base_dir` the
/// directory relative body paths fall back to when they do not exist relative to the
/// current directory.
pub fn parse_targets_str(
    text: &str,
    file: &str,
    base_dir: &Path,
) -> Result<Vec<TargetSpec>, TemplateError> {
    Reader {
        file,
        base_dir,
        lines: text.split('\n').enumerate().collect(),
        next: 0,
        pending_name: None,
        names: HashMap::new(),
        bodies: HashMap::new(),
        body_bytes: 0,
    }
    .run()
}

/// A line of the file: its 0-based index and text.
type Line<'a> = (usize, &'a str);

struct Reader<'a> {
    file: &'a str,
    base_dir: &'a Path,
    lines: Vec<Line<'a>>,
    next: usize,
    /// A `# @name` waiting for its request, and its line.
    pending_name: Option<(String, usize)>,
    /// Names given so far, and their request's line.
    names: HashMap<String, usize>,
    /// Body files read so far, by resolved path.
    bodies: HashMap<PathBuf, String>,
    body_bytes: u64,
}

/// A trimmed line and where it starts: (line number, column of its first character).
struct Trimmed<'a> {
    text: &'a str,
    line: usize,
    col: usize,
}

impl<'a> Trimmed<'a> {
    fn new((index, raw): Line<'a>) -> Trimmed<'a> {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let text = raw.trim();
        let lead = raw.len() - raw.trim_start().len();
        Trimmed {
            text,
            line: index + 1,
            col: 1 + raw[..lead].chars().count(),
        }
    }

    /// The column of byte `offset` of the trimmed text.
    fn col_at(&self, offset: usize) -> usize {
        self.col + self.text[..offset].chars().count()
    }
}

/// vegeta's test for a request line: `^[A-Z]+\s`.
fn starts_with_method(line: &str) -> bool {
    let b = line.as_bytes();
    let letters = b.iter().take_while(|c| c.is_ascii_uppercase()).count();
    letters > 0
        && b.get(letters)
            .is_some_and(|&c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b'\x0c'))
}

/// An HTTP token (RFC 9110 `tchar`s).
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
}

/// What a URL in a request line may look like.
fn url_problem(url: &str) -> Option<&'static str> {
    if url.chars().any(char::is_whitespace) {
        return Some("a request line is `METHOD URL`, with one space and no space in the URL");
    }
    if url.chars().any(char::is_control) {
        return Some("a URL cannot hold control characters");
    }
    if url.starts_with('/') || url.starts_with("${") {
        return None;
    }
    let scheme = url.split_once(':').map_or("", |(s, _)| s);
    let b = scheme.as_bytes();
    let scheme_ok = !b.is_empty()
        && b[0].is_ascii_alphabetic()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'));
    (!scheme_ok).then_some("a URL is absolute (`http://host/path`) or a path (`/path`)")
}

impl<'a> Reader<'a> {
    fn at(&self, line: usize, col: usize) -> Origin {
        Origin::new(self.file, line, col)
    }

    fn next_line(&mut self) -> Option<Trimmed<'a>> {
        let line = self.lines.get(self.next).copied()?;
        self.next += 1;
        Some(Trimmed::new(line))
    }

    fn peek_line(&self) -> Option<Trimmed<'a>> {
        self.lines.get(self.next).copied().map(Trimmed::new)
    }

    fn run(mut self) -> Result<Vec<TargetSpec>, TemplateError> {
        let mut targets: Vec<TargetSpec> = Vec::new();
        while let Some(line) = self.next_line() {
            if line.text.is_empty() {
                continue;
            }
            if line.text.starts_with('#') {
                self.comment(&line)?;
                continue;
            }
            if targets.len() == MAX_TARGETS {
                return Err(self.at(line.line, line.col).error(format!(
                    "more than {MAX_TARGETS} requests: a targets file holds at most 100,000"
                )));
            }
            let mut target = self.request_line(&line)?;
            // vegeta peeks at the next line: a blank line or another request line ends
            // this request at once.
            let ends = self
                .peek_line()
                .is_none_or(|next| next.text.is_empty() || starts_with_method(next.text));
            if !ends {
                self.headers_and_body(&mut target)?;
            }
            targets.push(target);
        }
        if let Some((name, line)) = self.pending_name.take() {
            return Err(self.at(line, 1).error(format!(
                "`# @name {name}` is not followed by a request line"
            )));
        }
        if targets.is_empty() {
            return Err(self.at(1, 1).error(format!(
                "no request in {}: each starts with a `METHOD URL` line",
                self.file
            )));
        }
        Ok(targets)
    }

    /// A comment: a `# @name` is kept for the next request.
    fn comment(&mut self, line: &Trimmed<'a>) -> Result<(), TemplateError> {
        let rest = line.text[1..].trim_start();
        let Some(after) = rest.strip_prefix("@name") else {
            return Ok(());
        };
        if !after.is_empty() && !after.starts_with(char::is_whitespace) {
            return Ok(()); // `# @names…`: a plain comment.
        }
        let name = after.trim();
        let name_col = line.col_at(line.text.len() - after.trim_start().len());
        let at = self.at(line.line, name_col);
        if name.is_empty() {
            return Err(self
                .at(line.line, line.col)
                .error("`# @name` without a name: write `# @name NAME`"));
        }
        if name.chars().count() > MAX_NAME_CHARS {
            return Err(at.error(format!(
                "the name is {} characters long; names are 1 to {MAX_NAME_CHARS}",
                name.chars().count()
            )));
        }
        if name.chars().any(char::is_control) {
            return Err(at.error("a name cannot hold control characters"));
        }
        if let Some((first, first_line)) = &self.pending_name {
            return Err(at.error(format!(
                "a second `# @name` before a request: `{first}` (line {first_line}) names \
                 no request"
            )));
        }
        if let Some(used) = self.names.get(name) {
            return Err(at.error(format!(
                "the name `{name}` is already the request's on line {used}"
            )));
        }
        self.pending_name = Some((name.to_owned(), line.line));
        Ok(())
    }

    fn request_line(&mut self, line: &Trimmed<'a>) -> Result<TargetSpec, TemplateError> {
        let at = self.at(line.line, line.col);
        let text = line.text;
        if text.starts_with('@') {
            return Err(at.error(format!(
                "body line `{text}` does not follow a request: a request starts with a \
                 `METHOD URL` line, then its headers, then its `@body` line"
            )));
        }
        if !starts_with_method(text) && split_header(text).is_some_and(|(name, _)| is_token(name)) {
            return Err(at.error(format!(
                "header line `{text}` does not follow a request: a request starts with a \
                 `METHOD URL` line, then its headers (a body line ends its request)"
            )));
        }
        let Some((method, url)) = text.split_once(' ') else {
            return Err(at.error(format!(
                "request line `{text}` has no URL: write `METHOD URL`, like `GET http://host/path`"
            )));
        };
        if method.is_empty() || !method.bytes().all(|c| c.is_ascii_uppercase()) {
            return Err(at.error(format!(
                "bad method `{method}`: a request line starts with a method in uppercase \
                 letters A-Z, like GET or POST"
            )));
        }
        let url_col = line.col_at(method.len() + 1);
        if let Some(why) = url_problem(url) {
            return Err(self
                .at(line.line, url_col)
                .error(format!("bad URL `{url}`: {why}")));
        }
        let name = self.pending_name.take().map(|(name, _)| {
            self.names.insert(name.clone(), line.line);
            name
        });
        Ok(TargetSpec {
            name,
            method: method.to_owned(),
            url: url.to_owned(),
            headers: Vec::new(),
            body: None,
            body_file: None,
            line: line.line,
            file: self.file.to_owned(),
            url_col,
            header_at: Vec::new(),
            body_path: None,
        })
    }

    /// The header lines and the optional body line after a request line.
    fn headers_and_body(&mut self, target: &mut TargetSpec) -> Result<(), TemplateError> {
        while let Some(line) = self.next_line() {
            let text = line.text;
            if text.is_empty() {
                break;
            }
            if text.starts_with('#') {
                self.comment(&line)?;
                continue;
            }
            if let Some(path) = text.strip_prefix('@') {
                self.body(target, path, &line)?;
                break;
            }
            let at = self.at(line.line, line.col);
            let looks_like_request = || {
                if starts_with_method(text) {
                    " (to start a new request here, put a blank line before it)"
                } else {
                    ""
                }
            };
            let Some((raw_name, raw_value)) = text.split_once(':') else {
                return Err(at.error(format!(
                    "bad header `{text}`: a header line is `Name: value`{}",
                    looks_like_request()
                )));
            };
            let (name, value) = (raw_name.trim(), raw_value.trim());
            if name.is_empty() || value.is_empty() {
                return Err(at.error(format!(
                    "bad header `{text}`: a header line is `Name: value`, neither empty"
                )));
            }
            if !is_token(name) {
                return Err(at.error(format!(
                    "bad header name `{name}`: a header name is letters, digits and \
                     !#$%&'*+-.^_`|~ only{}",
                    looks_like_request()
                )));
            }
            let value_offset =
                raw_name.len() + 1 + (raw_value.len() - raw_value.trim_start().len());
            target.headers.push(text.to_owned());
            target
                .header_at
                .push((line.line, line.col_at(value_offset)));
        }
        Ok(())
    }

    /// Reads the body file `path` (as written after `@` on `line`).
    fn body(
        &mut self,
        target: &mut TargetSpec,
        path: &str,
        line: &Trimmed<'a>,
    ) -> Result<(), TemplateError> {
        let at = self.at(line.line, line.col);
        if path.is_empty() {
            return Err(at.error("body line `@` has no path: write `@path/to/body`"));
        }
        let written = Path::new(path);
        let resolved = if written.is_absolute() || written.exists() {
            written.to_path_buf()
        } else {
            self.base_dir.join(written)
        };
        let shown = resolved.display();
        let unreadable = |e: std::io::Error| {
            if e.kind() != std::io::ErrorKind::NotFound {
                at.error(format!("cannot read the body file `{shown}`: {e}"))
            } else if written.is_absolute() {
                at.error(format!("cannot read the body file `{shown}`: no such file"))
            } else {
                at.error(format!(
                    "cannot read the body file `{shown}`: no such file (looked for `{path}` in \
                     the current directory, then beside {})",
                    self.file
                ))
            }
        };
        let too_big = || {
            at.error("the bodies of this file's requests add up to more than 256 MiB, the limit")
        };
        let body = match self.bodies.get(&resolved) {
            Some(body) => body.clone(),
            None => {
                // The size first: a huge file is refused before it is read.
                let size = std::fs::metadata(&resolved).map_err(unreadable)?.len();
                if self.body_bytes.saturating_add(size) > MAX_BODY_BYTES {
                    return Err(too_big());
                }
                let bytes = std::fs::read(&resolved).map_err(unreadable)?;
                let body = String::from_utf8(bytes).map_err(|e| {
                    at.error(format!(
                        "the body file `{shown}` is not UTF-8 text (at byte {})",
                        e.utf8_error().valid_up_to()
                    ))
                })?;
                self.bodies.insert(resolved.clone(), body.clone());
                body
            }
        };
        self.body_bytes += body.len() as u64;
        if self.body_bytes > MAX_BODY_BYTES {
            return Err(too_big());
        }
        target.body = Some(body);
        target.body_file = Some(path.to_owned());
        target.body_path = Some(resolved.display().to_string());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<TargetSpec>, TemplateError> {
        parse_targets_str(text, "targets.txt", Path::new("/nonexistent"))
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    /// (method, url, headers) of each target.
    fn summary(targets: &[TargetSpec]) -> Vec<(&str, &str, Vec<&str>)> {
        targets
            .iter()
            .map(|t| {
                let headers = t.headers.iter().map(String::as_str).collect();
                (t.method.as_str(), t.url.as_str(), headers)
            })
            .collect()
    }

    /// A directory of its own under the temporary directory.
    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("loadlab-targets-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn vegeta_readme_simple_targets_and_headers() {
        let simple = parse(
            "GET http://goku:9090/path/to/dragon?item=ball\n\
             GET http://user:password@goku:9090/path/to\n\
             HEAD http://goku:9090/path/to/success\n",
        )
        .unwrap();
        assert_eq!(
            summary(&simple),
            vec![
                ("GET", "http://goku:9090/path/to/dragon?item=ball", vec![]),
                ("GET", "http://user:password@goku:9090/path/to", vec![]),
                ("HEAD", "http://goku:9090/path/to/success", vec![]),
            ]
        );
        assert_eq!(
            simple.iter().map(|t| t.line).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        let headers = parse(
            "GET http://user:password@goku:9090/path/to\n\
             X-Account-ID: 8675309\n\
             \n\
             DELETE http://goku:9090/path/to/remove\n\
             Confirmation-Token: 90215\n\
             Authorization: Token DEADBEEF\n",
        )
        .unwrap();
        assert_eq!(
            summary(&headers),
            vec![
                (
                    "GET",
                    "http://user:password@goku:9090/path/to",
                    vec!["X-Account-ID: 8675309"]
                ),
                (
                    "DELETE",
                    "http://goku:9090/path/to/remove",
                    vec!["Confirmation-Token: 90215", "Authorization: Token DEADBEEF"]
                ),
            ]
        );
        assert_eq!(headers[1].header(1), ("Authorization", "Token DEADBEEF"));
        assert_eq!(
            headers[1].header_origin(1),
            Origin::new("targets.txt", 6, 16)
        );
        assert_eq!(headers[1].url_origin(), Origin::new("targets.txt", 4, 8));
        assert!(headers.iter().all(|t| t.body.is_none() && t.name.is_none()));
        // Comments, also between a request line and its headers.
        let comments = parse(
            "# get a dragon ball\n\
             GET http://goku:9090/path/to/dragon?item=ball\n\
             # specify a test account\n\
             X-Account-ID: 99\n",
        )
        .unwrap();
        assert_eq!(
            summary(&comments),
            vec![(
                "GET",
                "http://goku:9090/path/to/dragon?item=ball",
                vec!["X-Account-ID: 99"]
            )]
        );
        assert_eq!(comments[0].line, 2);
    }

    #[test]
    fn vegeta_readme_bodies() {
        let dir = temp_dir("readme");
        std::fs::write(dir.join("newthing.json"), "{\"new\": true}").unwrap();
        std::fs::write(dir.join("thing-71988591.json"), "{\"id\": 71988591}").unwrap();
        let new = dir.join("newthing.json").display().to_string();
        let thing = dir.join("thing-71988591.json").display().to_string();
        let bodies = parse(&format!(
            "POST http://goku:9090/things\n@{new}\n\nPATCH http://goku:9090/thing/71988591\n@{thing}\n"
        ))
        .unwrap();
        assert_eq!(
            summary(&bodies),
            vec![
                ("POST", "http://goku:9090/things", vec![]),
                ("PATCH", "http://goku:9090/thing/71988591", vec![])
            ]
        );
        assert_eq!(bodies[0].body.as_deref(), Some("{\"new\": true}"));
        assert_eq!(bodies[0].body_file.as_deref(), Some(new.as_str()));
        assert_eq!(bodies[1].body.as_deref(), Some("{\"id\": 71988591}"));
        let both = parse(&format!(
            "POST http://goku:9090/things\nX-Account-ID: 99\n@{new}\n"
        ))
        .unwrap();
        assert_eq!(
            summary(&both),
            vec![("POST", "http://goku:9090/things", vec!["X-Account-ID: 99"])]
        );
        assert_eq!(both[0].body.as_deref(), Some("{\"new\": true}"));
        assert_eq!(both[0].body_origin(), Some(Origin::new(new.as_str(), 1, 1)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn vegeta_test_suite_targets() {
        // lib/targets_test.go's TestNewHTTPTargeter, indentation and all.
        let dir = temp_dir("suite");
        let body = dir.join("body.txt");
        std::fs::write(&body, "Hello world!").unwrap();
        let body = body.display().to_string();
        let text = format!(
            "
		GET http://:6060/
		X-Header: 1
		X-Header: 2

		PUT https://:6060/123

		DELETE http://moo:443/boo

		POST http://foobar.org/fnord
		Authorization: x12345
		@{body}


		POST http://foobar.org/fnord/2
		Authorization: x67890
		@{body}

		SUBSCRIBE http://foobar.org/sub

		# This is a comment. Lines starting with hash pound are ignored.
		GET http://:6060/
		X-Header: 1
		X-Header: 2

		GET http://:8000/
		# This is a comment. Lines starting with hash pound are ignored even inside the target.
		X-Header: 1
		# Another comment.
		X-Header: 2"
        );
        let targets = parse(text.trim()).unwrap();
        assert_eq!(
            summary(&targets),
            vec![
                ("GET", "http://:6060/", vec!["X-Header: 1", "X-Header: 2"]),
                ("PUT", "https://:6060/123", vec![]),
                ("DELETE", "http://moo:443/boo", vec![]),
                (
                    "POST",
                    "http://foobar.org/fnord",
                    vec!["Authorization: x12345"]
                ),
                (
                    "POST",
                    "http://foobar.org/fnord/2",
                    vec!["Authorization: x67890"]
                ),
                ("SUBSCRIBE", "http://foobar.org/sub", vec![]),
                ("GET", "http://:6060/", vec!["X-Header: 1", "X-Header: 2"]),
                ("GET", "http://:8000/", vec!["X-Header: 1", "X-Header: 2"]),
            ]
        );
        let bodies: Vec<Option<&str>> = targets.iter().map(|t| t.body.as_deref()).collect();
        let hello = Some("Hello world!");
        assert_eq!(
            bodies,
            vec![None, None, None, hello, hello, None, None, None]
        );
        assert_eq!(targets[1].url_origin(), Origin::new("targets.txt", 5, 7));
        std::fs::remove_dir_all(&dir).unwrap();
        // Its error cases.
        assert!(err("DO_WORK http://:6000").contains("bad method `DO_WORK`"));
        assert!(err("DOwork http://:6000").contains("bad method `DOwork`"));
        assert!(err("GET").contains("request line `GET` has no URL"));
        assert!(err("GET foobar").contains("bad URL `foobar`"));
        assert!(
            err("GET http://:6060\n@238hhqwjhd8hhw3r.txt").contains("cannot read the body file")
        );
        assert!(err("GET http://:6060\nAuthorization").contains("bad header `Authorization`"));
        assert!(err("GET http://:6060\nAuthorization:").contains("bad header `Authorization:`"));
        assert!(err("GET http://:6060\n: 1234").contains("bad header `: 1234`"));
    }

    #[test]
    fn blank_lines_between_requests() {
        // A request line right after a request line starts a new request.
        let t = parse("GET /a\nPOST /b\nX: 1\n\n\n\nPUT /c\n").unwrap();
        assert_eq!(
            summary(&t),
            vec![
                ("GET", "/a", vec![]),
                ("POST", "/b", vec!["X: 1"]),
                ("PUT", "/c", vec![])
            ]
        );
        assert_eq!(t.iter().map(|t| t.line).collect::<Vec<_>>(), vec![1, 2, 7]);
        // After headers, vegeta would read the line as a header `GET http`: an error here.
        assert_eq!(
            err("GET /a\nX: 1\nGET http://b/"),
            "targets.txt:3:1: bad header name `GET http`: a header name is letters, digits and \
             !#$%&'*+-.^_`|~ only (to start a new request here, put a blank line before it)"
        );
        // After a body line the next request may start at once.
        let dir = temp_dir("blank");
        std::fs::write(dir.join("b"), "B").unwrap();
        let b = dir.join("b").display().to_string();
        let t = parse(&format!("POST /a\n@{b}\nGET /c\n")).unwrap();
        assert_eq!(
            summary(&t),
            vec![("POST", "/a", vec![]), ("GET", "/c", vec![])]
        );
        assert!(err(&format!("POST /a\n@{b}\nX: 1\n"))
            .contains("header line `X: 1` does not follow a request"));
        std::fs::remove_dir_all(&dir).unwrap();
        // CRLF and surrounding whitespace.
        let t = parse("  GET http://h/a  \r\n\tX:  y \r\n\r\n").unwrap();
        assert_eq!(summary(&t), vec![("GET", "http://h/a", vec!["X:  y"])]);
        assert_eq!(t[0].header(0), ("X", "y"));
        assert_eq!(t[0].header_origin(0), Origin::new("targets.txt", 2, 6));
        assert_eq!(t[0].url_origin(), Origin::new("targets.txt", 1, 7));
    }

    #[test]
    fn names_from_comments() {
        let t = parse(
            "# @name list users\nGET /users\n\n#@name  one\t\nGET /users/1\n# @names are just comments\nX: 1\n# @name last\n\nDELETE /x\n",
        )
        .unwrap();
        let names: Vec<Option<&str>> = t.iter().map(|t| t.name.as_deref()).collect();
        assert_eq!(names, vec![Some("list users"), Some("one"), Some("last")]);
        assert_eq!(
            err("# @name\nGET /"),
            "targets.txt:1:1: `# @name` without a name: write `# @name NAME`"
        );
        assert_eq!(
            err(&format!("# @name {}\nGET /", "n".repeat(65))),
            "targets.txt:1:9: the name is 65 characters long; names are 1 to 64"
        );
        parse(&format!("# @name {}\nGET /", "n".repeat(64))).unwrap();
        assert_eq!(
            err("# @name a\x07b\nGET /"),
            "targets.txt:1:9: a name cannot hold control characters"
        );
        assert_eq!(
            err("# @name a\nGET /\n\n# @name a\nGET /b"),
            "targets.txt:4:9: the name `a` is already the request's on line 2"
        );
        assert_eq!(
            err("# @name a\n# @name b\nGET /"),
            "targets.txt:2:9: a second `# @name` before a request: `a` (line 1) names no request"
        );
        assert_eq!(
            err("GET /\n\n# @name a\n"),
            "targets.txt:3:1: `# @name a` is not followed by a request line"
        );
    }

    #[test]
    fn body_paths_resolve_beside_the_targets_file() {
        let dir = temp_dir("rel");
        std::fs::create_dir_all(dir.join("bodies")).unwrap();
        std::fs::write(dir.join("bodies/new.json"), "{\"n\": ${seq}}").unwrap();
        std::fs::write(
            dir.join("targets.txt"),
            "POST http://h/things\n@bodies/new.json\n\nPOST http://h/again\n@bodies/new.json\n",
        )
        .unwrap();
        let t = parse_targets(&dir.join("targets.txt")).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].body.as_deref(), Some("{\"n\": ${seq}}"));
        assert_eq!(t[0].body_file.as_deref(), Some("bodies/new.json"));
        let resolved = dir.join("bodies/new.json").display().to_string();
        assert_eq!(
            t[0].body_origin(),
            Some(Origin::new(resolved.as_str(), 1, 1))
        );
        assert_eq!(t[1].body, t[0].body);
        assert_eq!(t[0].file, dir.join("targets.txt").display().to_string());
        // Missing: the message says where it looked.
        let e = parse_targets_str("POST /\n  @nope.json\n", "t.txt", &dir).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "t.txt:2:3: cannot read the body file `{}`: no such file (looked for `nope.json` \
                 in the current directory, then beside t.txt)",
                dir.join("nope.json").display()
            )
        );
        std::fs::write(dir.join("bin"), b"\xff\xfe").unwrap();
        let e = parse_targets_str("POST /\n@bin\n", "t.txt", &dir).unwrap_err();
        assert!(e.message.contains("is not UTF-8 text"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn errors_have_positions() {
        assert_eq!(
            err(""),
            "targets.txt:1:1: no request in targets.txt: each starts with a `METHOD URL` line"
        );
        assert_eq!(
            err("# only\n\n  \n"),
            "targets.txt:1:1: no request in targets.txt: each starts with a `METHOD URL` line"
        );
        assert_eq!(
            err("\n  @body.json\nGET /"),
            "targets.txt:2:3: body line `@body.json` does not follow a request: a request starts \
             with a `METHOD URL` line, then its headers, then its `@body` line"
        );
        assert_eq!(
            err("GET /\n\nget /x"),
            "targets.txt:3:1: bad method `get`: a request line starts with a method in uppercase \
             letters A-Z, like GET or POST"
        );
        assert_eq!(
            err("GET"),
            "targets.txt:1:1: request line `GET` has no URL: write `METHOD URL`, like `GET http://host/path`"
        );
        assert_eq!(
            err("Host: x\nGET /"),
            "targets.txt:1:1: header line `Host: x` does not follow a request: a request starts \
             with a `METHOD URL` line, then its headers (a body line ends its request)"
        );
        assert_eq!(
            err("GET  /a"),
            "targets.txt:1:5: bad URL ` /a`: a request line is `METHOD URL`, with one space and no \
             space in the URL"
        );
        assert!(err("GET /a HTTP/1.1").starts_with("targets.txt:1:5: bad URL `/a HTTP/1.1`"));
        assert_eq!(
            err(" GET x/y"),
            "targets.txt:1:6: bad URL `x/y`: a URL is absolute (`http://host/path`) or a path (`/path`)"
        );
        assert_eq!(
            err("GET /\nX-Ok: 1\nbad header\n"),
            "targets.txt:3:1: bad header `bad header`: a header line is `Name: value`"
        );
        assert_eq!(
            err("GET /\nA: 1\n  x y: 1\n"),
            "targets.txt:3:3: bad header name `x y`: a header name is letters, digits and \
             !#$%&'*+-.^_`|~ only"
        );
        // vegeta's peek: right after a request line, `X Y: 1` starts a request.
        assert!(err("GET /\n  X Y: 1\n").starts_with("targets.txt:2:5: bad URL `Y: 1`"));
        assert_eq!(
            err("GET /\n@\n"),
            "targets.txt:2:1: body line `@` has no path: write `@path/to/body`"
        );
        // Templates are taken as written.
        let t = parse("GET ${base}/u/${id}\nX-Id: ${uuid}\n").unwrap();
        assert_eq!(
            summary(&t),
            vec![("GET", "${base}/u/${id}", vec!["X-Id: ${uuid}"])]
        );
    }

    #[test]
    fn body_limit_is_checked_before_reading() {
        let dir = temp_dir("limit");
        let big = std::fs::File::create(dir.join("big")).unwrap();
        big.set_len(MAX_BODY_BYTES + 1).unwrap(); // sparse: nothing is written
        let e = parse_targets_str("POST /\n@big\n", "t.txt", &dir).unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.txt:2:1: the bodies of this file's requests add up to more than 256 MiB, the limit"
        );
        let huge = std::fs::File::create(dir.join("targets.txt")).unwrap();
        huge.set_len(MAX_TARGETS_FILE_BYTES + 1).unwrap();
        let e = parse_targets(&dir.join("targets.txt")).unwrap_err();
        assert!(e.message.contains("limited to 256 MiB"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn limits() {
        let many = "GET /\n".repeat(MAX_TARGETS);
        assert_eq!(parse(&many).unwrap().len(), MAX_TARGETS);
        let e = parse(&format!("{many}  GET /\n")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "targets.txt:100001:3: more than 100000 requests: a targets file holds at most 100,000"
        );
    }
}

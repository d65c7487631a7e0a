//! Where template text came from ([`Origin`]) and the one error type ([`TemplateError`]),
//! displayed compiler style: `SOURCE:LINE:COL: MESSAGE`.

use std::fmt;

/// Where a piece of template text came from, for error messages.
///
/// `source` is a file path (`targets.txt`, `ids.csv`) or a description of a flag or a
/// plan key (`--header 2`, `-X`, `URL`, `plan.toml scenario api request checkout body`);
/// `line` and `col` are the 1-based position where the text starts in that source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The file or flag the text came from.
    pub source: String,
    /// The 1-based line where the text starts.
    pub line: usize,
    /// The 1-based column (in characters) where the text starts.
    pub col: usize,
}

impl Origin {
    /// An origin at `line`, `col` of `source`.
    pub fn new(source: impl Into<String>, line: usize, col: usize) -> Origin {
        Origin {
            source: source.into(),
            line,
            col,
        }
    }

    /// A flag's (or any single-line value's) origin: line 1, column 1 of `name`.
    pub fn flag(name: &str) -> Origin {
        Origin::new(name, 1, 1)
    }

    /// The position `offset` bytes into `text`, where `text` starts at this origin: each
    /// newline before `offset` advances the line and restarts the column at 1; columns
    /// count characters. `offset` is clamped to `text`'s length (and to a character
    /// boundary at or before it).
    #[must_use]
    pub fn at(&self, text: &str, offset: usize) -> Origin {
        let mut end = offset.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let before = &text[..end];
        match before.rfind('\n') {
            None => Origin::new(
                self.source.clone(),
                self.line,
                self.col + before.chars().count(),
            ),
            Some(nl) => Origin::new(
                self.source.clone(),
                self.line + before.bytes().filter(|&b| b == b'\n').count(),
                1 + before[nl + 1..].chars().count(),
            ),
        }
    }

    /// An error at this position.
    pub fn error(&self, message: impl Into<String>) -> TemplateError {
        TemplateError {
            source: self.source.clone(),
            line: self.line,
            col: self.col,
            message: message.into(),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.source, self.line, self.col)
    }
}

/// The one error type of this crate: what is wrong, and where.
///
/// Display is `SOURCE:LINE:COL: MESSAGE` (compiler style), e.g.
/// `targets.txt:5:12: unknown name `${usr}`: the data file ids.csv has columns id, name;
/// built-ins: seq, rand:LO-HI, uuid, pick:A,B,…, randstr:N, hex:N, now, now_ms`.
///
/// `std::error::Error` is implemented by hand, not derived with `thiserror`: the derive
/// takes a field named `source` for the error's cause, and here it is the file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    /// The file or flag the error is in.
    pub source: String,
    /// The 1-based line.
    pub line: usize,
    /// The 1-based column, in characters.
    pub col: usize,
    /// What is wrong, without the position.
    pub message: String,
}

impl TemplateError {
    /// The error's position as an [`Origin`].
    pub fn origin(&self) -> Origin {
        Origin::new(self.source.clone(), self.line, self.col)
    }
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.source, self.line, self.col, self.message
        )
    }
}

impl std::error::Error for TemplateError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_compiler_style() {
        let e = Origin::new("targets.txt", 5, 12).error("unknown name `${usr}`");
        assert_eq!(e.to_string(), "targets.txt:5:12: unknown name `${usr}`");
        assert_eq!(Origin::flag("-X").to_string(), "-X:1:1");
    }

    #[test]
    fn positions_inside_text_count_lines_and_characters() {
        let o = Origin::new("plan.toml", 10, 8);
        let text = "é${a}\nxy\n  ${b}";
        assert_eq!(o.at(text, 0), Origin::new("plan.toml", 10, 8));
        // 'é' is two bytes and one character.
        assert_eq!(o.at(text, 2), Origin::new("plan.toml", 10, 9));
        let b = text.rfind("${").unwrap();
        assert_eq!(o.at(text, b), Origin::new("plan.toml", 12, 3));
        assert_eq!(o.at(text, 1000), Origin::new("plan.toml", 12, 7));
    }
}

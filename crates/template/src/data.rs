//! Data files: rows of named string values, loaded once (CSV or JSON Lines), and how each
//! request draws its row ([`Order`], [`Cursor`]).
//!
//! # CSV
//! The first row is the header: the column names, trimmed of surrounding whitespace, each
//! a NAME (`[A-Za-z_][A-Za-z0-9_.-]*`), unique, and not a built-in's name (`seq`, `uuid`,
//! `now`, `now_ms`, `rand`, `pick`, `randstr`, `hex`). Fields are quoted as RFC 4180 says
//! (a field in double quotes may hold commas, newlines and `""` for a quote). Every row
//! has as many fields as the header. Values are UTF-8; a UTF-8 byte-order mark at the
//! start is skipped; blank lines are skipped (at the end, whitespace-only lines too; an
//! empty value in a one-column file is written `""`).
//!
//! # JSON Lines
//! A file whose name ends in `.jsonl` or `.ndjson`, or whose first non-blank byte is `{`:
//! one JSON object per non-blank line. The columns are the keys of the first object, in
//! order (the same rules as a CSV header); every other line has exactly the same keys,
//! in any order. Values: a string as it is; numbers and booleans as their JSON text;
//! `null` as the empty string; arrays and objects as their compact JSON text (keys in
//! the order written).
//!
//! # Limits and errors
//! At most 256 MiB and 10 million rows. Every error names the file as given, a line and
//! a column (`ids.csv:7:5: line 7 has 3 fields, the header has 2`).
//!
//! # Drawing rows
//! Each request draws one row ([`Data::pick`]) by the run's [`Order`], from the run's one
//! [`Cursor`], which also hands out `${seq}` values.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::Rng;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

use crate::error::{Origin, TemplateError};
use crate::generator::Generator;
use crate::names::{is_name, BUILTIN_NAMES};

/// The largest data file, in bytes.
pub const MAX_DATA_BYTES: u64 = 256 << 20;
/// The most rows a data file may have.
pub const MAX_DATA_ROWS: usize = 10_000_000;

/// A value holding a CR, LF or NUL byte, which no header may carry: where it is in the
/// file, so that a header template using its column can say (see
/// [`crate::Template::check_data`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlValue {
    /// The row index.
    pub row: usize,
    /// The column index.
    pub column: usize,
    /// The line of the value in the file.
    pub line: usize,
    /// The column (in characters) where the value starts on that line.
    pub col: usize,
    /// The first such byte in the value: `\r`, `\n` or `\0`.
    pub byte: u8,
}

/// A data file's rows, loaded once: column names and string values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Data {
    /// The file as given, for messages.
    file: String,
    columns: Vec<String>,
    rows: Vec<Box<[Box<str>]>>,
    /// Each row's line in the file.
    lines: Vec<u32>,
    /// Each column's longest value, in bytes.
    widths: Vec<usize>,
    /// The values with a CR, LF or NUL, in row order.
    control: Vec<ControlValue>,
}

impl Data {
    /// Loads a CSV file with a header row, or JSON Lines (extension `.jsonl` or
    /// `.ndjson`, or a file whose first non-blank byte is `{`). Errors name `path` as
    /// given.
    pub fn load(path: &Path) -> Result<Data, TemplateError> {
        let file = path.display().to_string();
        let at = Origin::new(file.as_str(), 1, 1);
        let size = std::fs::metadata(path)
            .map_err(|e| at.error(format!("cannot read the data file: {e}")))?
            .len();
        if size > MAX_DATA_BYTES {
            return Err(at.error(format!(
                "the data file has {size} bytes; data files are limited to 256 MiB"
            )));
        }
        let bytes =
            std::fs::read(path).map_err(|e| at.error(format!("cannot read the data file: {e}")))?;
        if bytes.len() as u64 > MAX_DATA_BYTES {
            return Err(at.error("the data file is larger than the limit of 256 MiB"));
        }
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        let first = strip_bom(&bytes).iter().find(|b| !b.is_ascii_whitespace());
        if matches!(ext.as_deref(), Some("jsonl" | "ndjson")) || first == Some(&b'{') {
            Data::from_jsonl(&file, &bytes)
        } else {
            Data::from_csv(&file, &bytes)
        }
    }

    /// Rows built in memory (tests, and the engine's own use): `file` is the name errors
    /// use. Row `i` counts as line `i + 2` of the file (the header is line 1). The same
    /// checks as a CSV file: valid, unique column names, every row as long as the header,
    /// at least one row, at most 10 million.
    pub fn from_rows(
        file: &str,
        columns: Vec<String>,
        rows: Vec<Vec<String>>,
    ) -> Result<Data, TemplateError> {
        let mut names = Vec::with_capacity(columns.len());
        for (j, name) in columns.into_iter().enumerate() {
            check_column_name(&name, j, &names, Origin::new(file, 1, 1), "the header")?;
            names.push(name);
        }
        if names.is_empty() {
            return Err(Origin::new(file, 1, 1).error("no columns"));
        }
        if rows.is_empty() {
            return Err(Origin::new(file, 1, 1).error("no rows after the header"));
        }
        let mut data = Data::empty(file, names);
        for (i, row) in rows.into_iter().enumerate() {
            let line = i + 2;
            if row.len() != data.columns.len() {
                return Err(Origin::new(file, line, 1).error(format!(
                    "line {line} has {} fields, the header has {}",
                    row.len(),
                    data.columns.len()
                )));
            }
            data.push(
                line,
                row.into_iter().map(String::into_boxed_str).collect(),
                |_| (line, 1),
            )?;
        }
        Ok(data)
    }

    /// Parses CSV `bytes` (see the module doc); `file` is the name errors use.
    pub fn from_csv(file: &str, bytes: &[u8]) -> Result<Data, TemplateError> {
        let bytes = strip_bom(bytes);
        let bytes = &bytes[..content_end(bytes)];
        let at = |line: usize, col: usize| Origin::new(file, line, col);
        if bytes.is_empty() {
            return Err(at(1, 1).error("no header row: the file is empty"));
        }
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(bytes);
        let mut record = csv::ByteRecord::new();
        let read = |reader: &mut csv::Reader<&[u8]>, record: &mut csv::ByteRecord| {
            reader.read_byte_record(record).map_err(|e| {
                let (line, col) = e.position().map_or((1, 1), |p| (p.line() as usize, 1));
                at(line, col).error(format!("cannot read the CSV: {e}"))
            })
        };
        if !read(&mut reader, &mut record)? {
            return Err(at(1, 1).error("no header row: the file is empty"));
        }
        let (header_line, header_byte) = record_position(bytes, &record);
        let starts = field_starts(bytes, header_byte, header_line);
        let start = |j: usize| starts.get(j).copied().unwrap_or((header_line, 1));
        let mut columns: Vec<String> = Vec::with_capacity(record.len());
        for (j, field) in record.iter().enumerate() {
            let (line, col) = start(j);
            let name = std::str::from_utf8(field).map_err(|_| {
                at(line, col).error(format!("column {} of the header is not valid UTF-8", j + 1))
            })?;
            let name = name.trim();
            check_column_name(name, j, &columns, at(line, col), "the header")?;
            columns.push(name.to_owned());
        }
        let mut data = Data::empty(file, columns);
        let width = data.columns.len();
        while read(&mut reader, &mut record)? {
            let (line, byte) = record_position(bytes, &record);
            if record.len() != width {
                let starts = field_starts(bytes, byte, line);
                let (l, c) = if record.len() > width {
                    starts.get(width).copied().unwrap_or((line, 1))
                } else {
                    (line, 1)
                };
                return Err(at(l, c).error(format!(
                    "line {line} has {} fields, the header has {width}",
                    record.len()
                )));
            }
            let mut row = Vec::with_capacity(width);
            for (j, field) in record.iter().enumerate() {
                match std::str::from_utf8(field) {
                    Ok(value) => row.push(Box::<str>::from(value)),
                    Err(e) => {
                        let (l, c) = field_starts(bytes, byte, line)
                            .get(j)
                            .copied()
                            .unwrap_or((line, 1));
                        let bad = field.get(e.valid_up_to()).copied().unwrap_or(0);
                        return Err(at(l, c).error(format!(
                            "the value of column `{}` is not valid UTF-8 (byte 0x{bad:02x})",
                            data.columns[j]
                        )));
                    }
                }
            }
            data.push(line, row.into_boxed_slice(), |j| {
                field_starts(bytes, byte, line)
                    .get(j)
                    .copied()
                    .unwrap_or((line, 1))
            })?;
        }
        if data.rows.is_empty() {
            return Err(at(header_line, 1).error("no rows after the header"));
        }
        Ok(data)
    }

    /// Parses JSON Lines `bytes` (see the module doc); `file` is the name errors use.
    pub fn from_jsonl(file: &str, bytes: &[u8]) -> Result<Data, TemplateError> {
        let bytes = strip_bom(bytes);
        let at = |line: usize, col: usize| Origin::new(file, line, col);
        let mut data: Option<Data> = None;
        for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
            let n = i + 1;
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            let line = std::str::from_utf8(raw).map_err(|e| {
                let col = 1 + String::from_utf8_lossy(&raw[..e.valid_up_to()])
                    .chars()
                    .count();
                at(n, col).error(format!("line {n} is not valid UTF-8"))
            })?;
            if line.trim().is_empty() {
                continue;
            }
            let object: Object<'_> = serde_json::from_str(line).map_err(|e| {
                let col = char_col(line, e.column().saturating_sub(1));
                let full = e.to_string();
                let suffix = format!(" at line {} column {}", e.line(), e.column());
                let why = full.strip_suffix(&suffix).unwrap_or(&full);
                at(n, col).error(format!("line {n} is not a JSON object: {why}"))
            })?;
            let entries = object.0;
            let offsets = entry_offsets(line);
            let key_at = |k: usize| at(n, offsets.get(k).map_or(1, |o| char_col(line, o.0)));
            let value_col = |k: usize| offsets.get(k).map_or(1, |o| char_col(line, o.1));
            for (k, (key, _)) in entries.iter().enumerate() {
                if entries[..k].iter().any(|(other, _)| other == key) {
                    return Err(key_at(k).error(format!("line {n}: key `{key}` appears twice")));
                }
            }
            let data = match &mut data {
                Some(data) => data,
                None => {
                    let mut columns: Vec<String> = Vec::with_capacity(entries.len());
                    for (k, (key, _)) in entries.iter().enumerate() {
                        check_column_name(key, k, &columns, key_at(k), "line 1")?;
                        columns.push(key.clone());
                    }
                    if columns.is_empty() {
                        return Err(at(n, 1).error(format!(
                            "line {n} is an empty object: the first line's keys are the columns"
                        )));
                    }
                    data.insert(Data::empty(file, columns))
                }
            };
            let first_line = data.lines.first().map_or(n, |&l| l as usize);
            if let Some(k) = entries
                .iter()
                .position(|(key, _)| !data.columns.contains(key))
            {
                return Err(key_at(k).error(format!(
                    "line {n}: key `{}` is not in line {first_line}",
                    entries[k].0
                )));
            }
            let mut row = Vec::with_capacity(data.columns.len());
            let mut index = Vec::with_capacity(data.columns.len());
            for column in &data.columns {
                let Some(k) = entries.iter().position(|(key, _)| key == column) else {
                    return Err(at(n, 1).error(format!(
                        "line {n}: no key `{column}`, which line {first_line} has"
                    )));
                };
                row.push(json_text(entries[k].1).into_boxed_str());
                index.push(k);
            }
            data.push(n, row.into_boxed_slice(), |j| (n, value_col(index[j])))?;
        }
        data.ok_or_else(|| at(1, 1).error("no rows: the file is empty"))
    }

    fn empty(file: &str, columns: Vec<String>) -> Data {
        Data {
            file: file.to_owned(),
            widths: vec![0; columns.len()],
            columns,
            rows: Vec::new(),
            lines: Vec::new(),
            control: Vec::new(),
        }
    }

    /// Appends a row read at `line`; `start(j)` is where field `j` starts (line, col),
    /// asked only for a value with a control character.
    fn push(
        &mut self,
        line: usize,
        row: Box<[Box<str>]>,
        start: impl Fn(usize) -> (usize, usize),
    ) -> Result<(), TemplateError> {
        if self.rows.len() == MAX_DATA_ROWS {
            return Err(Origin::new(self.file.as_str(), line, 1).error(format!(
                "more than {MAX_DATA_ROWS} rows: data files are limited to 10 million rows"
            )));
        }
        for (j, value) in row.iter().enumerate() {
            self.widths[j] = self.widths[j].max(value.len());
            if let Some(&byte) = value
                .as_bytes()
                .iter()
                .find(|b| matches!(b, b'\r' | b'\n' | 0))
            {
                let (line, col) = start(j);
                self.control.push(ControlValue {
                    row: self.rows.len(),
                    column: j,
                    line,
                    col,
                    byte,
                });
            }
        }
        self.rows.push(row);
        self.lines.push(u32::try_from(line).unwrap_or(u32::MAX));
        Ok(())
    }

    /// The file as given, for messages.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The column names, in order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are no rows (only a [`Data::share`] can have none).
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Row `i`'s values, one per column. Panics if `i >= len()`.
    pub fn row(&self, i: usize) -> &[Box<str>] {
        &self.rows[i]
    }

    /// The line in the file where row `i` starts. Panics if `i >= len()`.
    pub fn line(&self, i: usize) -> usize {
        self.lines[i] as usize
    }

    /// The longest value of column `column`, in bytes (0 for a column that does not
    /// exist).
    pub fn max_value_len(&self, column: usize) -> usize {
        self.widths.get(column).copied().unwrap_or(0)
    }

    /// The values holding a CR, LF or NUL byte, in row order.
    pub fn control_values(&self) -> &[ControlValue] {
        &self.control
    }

    /// Rows `i` with `i % parts == part`, in order: a distributed run's share for agent
    /// `part` of `parts` (disjoint, together all rows). Keeps the original line numbers.
    /// The share may be empty (fewer rows than parts). Panics if `part >= parts`.
    #[must_use]
    pub fn share(&self, part: usize, parts: usize) -> Data {
        assert!(part < parts, "share {part} of {parts}");
        let mut share = Data::empty(&self.file, self.columns.clone());
        for i in (part..self.rows.len()).step_by(parts) {
            for (j, value) in self.rows[i].iter().enumerate() {
                share.widths[j] = share.widths[j].max(value.len());
            }
            share.rows.push(self.rows[i].clone());
            share.lines.push(self.lines[i]);
        }
        share.control = self
            .control
            .iter()
            .filter(|c| c.row % parts == part)
            .map(|c| ControlValue {
                row: c.row / parts,
                ..*c
            })
            .collect();
        share
    }

    /// Picks the row of the next request by `order`: `Sequential` takes the cursor's
    /// next index modulo the row count (wrapping around), `Random` a uniform row from
    /// `gen` (the cursor does not move), `Unique` the cursor's next index until every row
    /// was used, then `None` (for good: the cursor stops at the row count). `None` for
    /// data with no rows.
    pub fn pick(&self, order: Order, cursor: &Cursor, gen: &mut Generator) -> Option<usize> {
        let len = self.rows.len();
        if len == 0 {
            return None;
        }
        match order {
            Order::Sequential => {
                Some((cursor.rows.fetch_add(1, Ordering::Relaxed) % len as u64) as usize)
            }
            Order::Random => Some(gen.rng().gen_range(0..len)),
            Order::Unique => cursor
                .rows
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |taken| {
                    (taken < len as u64).then_some(taken + 1)
                })
                .ok()
                .map(|taken| taken as usize),
        }
    }
}

/// How each request draws its data row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Row after row, in file order, starting over after the last.
    #[default]
    Sequential,
    /// A uniformly random row for each request.
    Random,
    /// Each row once, in file order; the run stops drawing once all are used.
    Unique,
}

impl Order {
    /// The three orders.
    pub const ALL: [Order; 3] = [Order::Sequential, Order::Random, Order::Unique];

    /// The order's name: `sequential`, `random`, `unique`.
    pub fn name(self) -> &'static str {
        match self {
            Order::Sequential => "sequential",
            Order::Random => "random",
            Order::Unique => "unique",
        }
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not an [`Order`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown order `{0}`: expected sequential, random or unique")]
pub struct UnknownOrder(pub String);

impl FromStr for Order {
    type Err = UnknownOrder;

    fn from_str(s: &str) -> Result<Order, UnknownOrder> {
        Order::ALL
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| UnknownOrder(s.to_owned()))
    }
}

/// The shared position in the rows and the `${seq}` counter: one per run, shared by
/// every worker thread (through an `Arc`) and kept across the steps of an experiment, so
/// that `unique` stays unique and `${seq}` keeps counting.
///
/// Distributed runs number `${seq}` with [`Cursor::next_seq_strided`]: agent `part` of
/// `parts` gets `part + 1`, `part + 1 + parts`, …, so agents never collide.
#[derive(Debug, Default)]
pub struct Cursor {
    /// Rows taken: the next row index (before the modulo of `Sequential`).
    rows: AtomicU64,
    /// `${seq}` values handed out.
    seqs: AtomicU64,
}

impl Cursor {
    /// A cursor at the first row, whose first `${seq}` is 1.
    pub fn new() -> Cursor {
        Cursor::default()
    }

    /// A cursor resuming where another left off: `next_row` is the next row index
    /// (another cursor's [`Cursor::rows_taken`]) and `next_seq` the next `${seq}`
    /// [`Cursor::next_seq`] returns (another cursor's [`Cursor::seqs_taken`] + 1; 0
    /// counts as 1). With [`Cursor::next_seq_strided`], the calls already made are
    /// `next_seq - 1`.
    pub fn starting_at(next_row: u64, next_seq: u64) -> Cursor {
        Cursor {
            rows: AtomicU64::new(next_row),
            seqs: AtomicU64::new(next_seq.saturating_sub(1)),
        }
    }

    /// The next `${seq}` (1, 2, 3… from a new cursor): one `fetch_add`.
    pub fn next_seq(&self) -> u64 {
        self.seqs.fetch_add(1, Ordering::Relaxed).wrapping_add(1)
    }

    /// The next `${seq}` of agent `part` of `parts` in a distributed run: the k-th call
    /// (k from 0, counting calls on this cursor) returns `k * parts + part + 1`, so
    /// agents' values never collide and together count 1, 2, 3…. `parts` 0 counts as 1.
    pub fn next_seq_strided(&self, parts: u64, part: u64) -> u64 {
        let k = self.seqs.fetch_add(1, Ordering::Relaxed);
        k.wrapping_mul(parts.max(1))
            .wrapping_add(part)
            .wrapping_add(1)
    }

    /// Rows taken so far: the next row index (for `Sequential`, before wrapping around;
    /// for `Unique`, at most the row count).
    pub fn rows_taken(&self) -> u64 {
        self.rows.load(Ordering::Relaxed)
    }

    /// `${seq}` values handed out so far.
    pub fn seqs_taken(&self) -> u64 {
        self.seqs.load(Ordering::Relaxed)
    }
}

/// Checks column `index`'s `name` against the names before it (`seen`); `fix_in` says
/// where to rename it ("the header", "line 1").
fn check_column_name(
    name: &str,
    index: usize,
    seen: &[String],
    at: Origin,
    fix_in: &str,
) -> Result<(), TemplateError> {
    if name.is_empty() {
        return Err(at.error(format!("column {} of {fix_in} has no name", index + 1)));
    }
    if let Some((_, syntax)) = BUILTIN_NAMES.iter().find(|(n, _)| *n == name) {
        return Err(at.error(format!(
            "column `{name}` has the name of a built-in ({syntax}): rename it in {fix_in}"
        )));
    }
    if !is_name(name) {
        return Err(at.error(format!(
            "column name `{name}` is not a NAME ([A-Za-z_][A-Za-z0-9_.-]*): rename it in \
             {fix_in}"
        )));
    }
    if let Some(first) = seen.iter().position(|s| s == name) {
        return Err(at.error(format!(
            "duplicate column `{name}`: columns {} and {} of {fix_in} have that name",
            first + 1,
            index + 1
        )));
    }
    Ok(())
}

fn strip_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}

/// The end of `bytes` less its trailing blank (whitespace-only) lines: just past the
/// newline that ends the last line with other content.
fn content_end(bytes: &[u8]) -> usize {
    let Some(last) = bytes.iter().rposition(|b| !b.is_ascii_whitespace()) else {
        return 0;
    };
    match bytes[last..].iter().position(|&b| b == b'\n') {
        Some(nl) => last + nl + 1,
        None => bytes.len(),
    }
}

/// A CSV record's starting line and byte. The reader's position can be that of blank
/// lines it skipped before the record: those are skipped here too.
fn record_position(bytes: &[u8], record: &csv::ByteRecord) -> (usize, usize) {
    let (mut line, mut i) = record
        .position()
        .map_or((1, 0), |p| (p.line() as usize, p.byte() as usize));
    while i < bytes.len() && matches!(bytes[i], b'\r' | b'\n') {
        if bytes[i] == b'\n' {
            line += 1;
        }
        i += 1;
    }
    (line, i)
}

/// The (line, col) where each field of the CSV record at byte `start` (line `line`)
/// begins (see [`record_position`]): a scan of RFC 4180 quoting, for messages only.
fn field_starts(bytes: &[u8], start: usize, line: usize) -> Vec<(usize, usize)> {
    let (mut i, mut line, mut col) = (start, line, 1);
    let mut starts = vec![(line, col)];
    let advance = |i: &mut usize, line: &mut usize, col: &mut usize| {
        if bytes[*i] == b'\n' {
            *line += 1;
            *col = 1;
        } else if bytes[*i] & 0xC0 != 0x80 {
            *col += 1;
        }
        *i += 1;
    };
    while i < bytes.len() {
        if bytes[i] == b'"' {
            advance(&mut i, &mut line, &mut col);
            while i < bytes.len() {
                if bytes[i] == b'"' {
                    advance(&mut i, &mut line, &mut col);
                    if bytes.get(i) == Some(&b'"') {
                        advance(&mut i, &mut line, &mut col);
                        continue;
                    }
                    break;
                }
                advance(&mut i, &mut line, &mut col);
            }
        }
        while i < bytes.len() && !matches!(bytes[i], b',' | b'\n' | b'\r') {
            advance(&mut i, &mut line, &mut col);
        }
        if bytes.get(i) != Some(&b',') {
            break;
        }
        advance(&mut i, &mut line, &mut col);
        starts.push((line, col));
    }
    starts
}

/// The 1-based character column of byte `offset` in `line`.
fn char_col(line: &str, offset: usize) -> usize {
    let mut end = offset.min(line.len());
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    1 + line[..end].chars().count()
}

/// A JSON object's entries in the order written.
struct Object<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Object<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = Object<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Object<'de>, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                    entries.push(entry);
                }
                Ok(Object(entries))
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

/// A JSON value as a data value: a string as it is, `null` as empty, anything else as
/// its compact JSON text.
fn json_text(value: &RawValue) -> String {
    let raw = value.get();
    match raw.as_bytes().first() {
        Some(b'"') => serde_json::from_str::<String>(raw).unwrap_or_else(|_| raw.to_owned()),
        Some(b'n') => String::new(),
        Some(b'[' | b'{') => compact(raw),
        _ => raw.to_owned(),
    }
}

/// `json` without the whitespace outside its strings.
fn compact(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_ascii_whitespace() {
            out.push(c);
        }
    }
    out
}

/// Where each entry of the (valid) JSON object on `line` starts: the byte offsets of its
/// key's opening quote and of its value, in order. For messages only.
fn entry_offsets(line: &str) -> Vec<(usize, usize)> {
    let b = line.as_bytes();
    let skip_ws = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    // Past the string whose opening quote is at `i`.
    let skip_string = |mut i: usize| {
        i += 1;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'"' => return i + 1,
                _ => i += 1,
            }
        }
        i
    };
    let skip_value = |mut i: usize| {
        let mut depth = 0usize;
        while i < b.len() {
            match b[i] {
                b'"' => {
                    i = skip_string(i);
                    if depth == 0 {
                        return i;
                    }
                    continue;
                }
                b'[' | b'{' => depth += 1,
                b']' | b'}' if depth > 0 => {
                    depth -= 1;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                b',' | b']' | b'}' => return i,
                c if depth == 0 && c.is_ascii_whitespace() => return i,
                _ => {}
            }
            i += 1;
        }
        i
    };
    let mut entries = Vec::new();
    let mut i = skip_ws(0);
    if b.get(i) != Some(&b'{') {
        return entries;
    }
    i += 1;
    loop {
        i = skip_ws(i);
        if b.get(i) != Some(&b'"') {
            return entries;
        }
        let key = i;
        i = skip_ws(skip_string(i));
        if b.get(i) != Some(&b':') {
            return entries;
        }
        let value = skip_ws(i + 1);
        entries.push((key, value));
        i = skip_ws(skip_value(value));
        if b.get(i) != Some(&b',') {
            return entries;
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn csv(text: &str) -> Result<Data, TemplateError> {
        Data::from_csv("ids.csv", text.as_bytes())
    }

    fn jsonl(text: &str) -> Result<Data, TemplateError> {
        Data::from_jsonl("ids.jsonl", text.as_bytes())
    }

    fn rows(data: &Data) -> Vec<Vec<&str>> {
        (0..data.len())
            .map(|i| data.row(i).iter().map(|v| &**v).collect())
            .collect()
    }

    #[test]
    fn csv_quoting_bom_and_trailing_blank_lines() {
        let data = csv(
            "\u{feff} id , name\n1,\"a, b\"\n2,\"say \"\"hi\"\"\"\n3,\"two\nlines\"\n\n4,é\n\n  \n",
        )
        .unwrap();
        assert_eq!(data.columns(), ["id", "name"]);
        assert_eq!(
            rows(&data),
            vec![
                vec!["1", "a, b"],
                vec!["2", "say \"hi\""],
                vec!["3", "two\nlines"],
                vec!["4", "é"],
            ]
        );
        assert_eq!(
            (0..4).map(|i| data.line(i)).collect::<Vec<_>>(),
            vec![2, 3, 4, 7]
        );
        assert_eq!(
            data.control_values(),
            [ControlValue {
                row: 2,
                column: 1,
                line: 4,
                col: 3,
                byte: b'\n'
            }]
        );
        assert_eq!(data.max_value_len(1), "two\nlines".len());
        // CRLF line ends.
        let data = csv("a,b\r\n1,2\r\n\r\n3,4\r\n").unwrap();
        assert_eq!(rows(&data), vec![vec!["1", "2"], vec!["3", "4"]]);
        assert_eq!((data.line(0), data.line(1)), (2, 4));
    }

    #[test]
    fn csv_errors_say_where() {
        let e = |text: &str| csv(text).unwrap_err().to_string();
        assert_eq!(e(""), "ids.csv:1:1: no header row: the file is empty");
        assert_eq!(e("\n \n"), "ids.csv:1:1: no header row: the file is empty");
        assert_eq!(e("id,name\n\n"), "ids.csv:1:1: no rows after the header");
        assert_eq!(
            e("id,name\n1,a\n\n\"x\ny\",b\n2,b,c\n"),
            "ids.csv:6:5: line 6 has 3 fields, the header has 2"
        );
        assert_eq!(
            e("id,name\n1,a\n2\n"),
            "ids.csv:3:1: line 3 has 1 fields, the header has 2"
        );
        assert_eq!(
            e("id,é1,id\n"),
            "ids.csv:1:4: column name `é1` is not a NAME ([A-Za-z_][A-Za-z0-9_.-]*): rename it in \
             the header"
        );
        assert_eq!(
            e("id,name, id\n1,2,3\n"),
            "ids.csv:1:9: duplicate column `id`: columns 1 and 3 of the header have that name"
        );
        assert_eq!(
            e("id,uuid\n1,2\n"),
            "ids.csv:1:4: column `uuid` has the name of a built-in (${uuid}): rename it in the header"
        );
        assert!(e("rand\n1\n").contains("column `rand` has the name of a built-in (${rand:LO-HI})"));
        assert_eq!(
            e("id,,x\n1,2,3\n"),
            "ids.csv:1:4: column 2 of the header has no name"
        );
        assert_eq!(
            Data::from_csv("ids.csv", b"id,name\n1,\"\xe9t\xe9\"\n")
                .unwrap_err()
                .to_string(),
            "ids.csv:2:3: the value of column `name` is not valid UTF-8 (byte 0xe9)"
        );
    }

    #[test]
    fn jsonl_values_and_key_order() {
        let data = jsonl(
            "{\"id\": 1, \"name\": \"ann\", \"tags\": [1, \"a b\"], \"o\": {\"z\": 1, \"a\": null}, \"n\": null, \"ok\": true, \"f\": 1.50}\n\
             \n\
             {\"ok\": false, \"f\": -2e3, \"n\": \"x\", \"o\": {}, \"tags\": [], \"name\": \"b\\nc\", \"id\": \"7\"}\n",
        )
        .unwrap();
        assert_eq!(data.columns(), ["id", "name", "tags", "o", "n", "ok", "f"]);
        assert_eq!(
            rows(&data),
            vec![
                vec![
                    "1",
                    "ann",
                    "[1,\"a b\"]",
                    "{\"z\":1,\"a\":null}",
                    "",
                    "true",
                    "1.50"
                ],
                vec!["7", "b\nc", "[]", "{}", "x", "false", "-2e3"],
            ]
        );
        assert_eq!((data.line(0), data.line(1)), (1, 3));
        assert_eq!(
            data.control_values(),
            [ControlValue {
                row: 1,
                column: 1,
                line: 3,
                col: 65,
                byte: b'\n'
            }]
        );
        // A file starting with `{` is JSON Lines whatever its name.
        let dir = std::env::temp_dir().join(format!("loadlab-template-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rows.txt");
        std::fs::write(&path, "\n  {\"a\":1}\n").unwrap();
        assert_eq!(rows(&Data::load(&path).unwrap()), vec![vec!["1"]]);
        let path = dir.join("rows.ndjson");
        std::fs::write(&path, "\u{feff}{\"a\":1}\r\n").unwrap();
        assert_eq!(rows(&Data::load(&path).unwrap()), vec![vec!["1"]]);
        let path = dir.join("rows.csv");
        std::fs::write(&path, "a\n1\n").unwrap();
        let data = Data::load(&path).unwrap();
        assert_eq!(data.file(), path.display().to_string());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn jsonl_errors_say_where() {
        let e = |text: &str| jsonl(text).unwrap_err().to_string();
        assert_eq!(e(""), "ids.jsonl:1:1: no rows: the file is empty");
        assert_eq!(e("\n  \n"), "ids.jsonl:1:1: no rows: the file is empty");
        assert_eq!(
            e("{\"id\":1,\"name\":\"a\"}\n{\"id\":2}\n"),
            "ids.jsonl:2:1: line 2: no key `name`, which line 1 has"
        );
        assert_eq!(
            e("\n{\"id\":1}\n{\"id\":2, \"extra\": 3}\n"),
            "ids.jsonl:3:10: line 3: key `extra` is not in line 2"
        );
        assert_eq!(
            e("{\"id\":1}\n[1,2]\n"),
            "ids.jsonl:2:1: line 2 is not a JSON object: invalid type: sequence, expected a JSON object"
        );
        assert_eq!(
            e("{\"id\":1}\n{\"id\": 1,}\n"),
            "ids.jsonl:2:10: line 2 is not a JSON object: trailing comma"
        );
        assert_eq!(
            e("{\"id\":1, \"id\":2}\n"),
            "ids.jsonl:1:10: line 1: key `id` appears twice"
        );
        assert_eq!(
            e("{\"id\":1, \"seq\":2}\n"),
            "ids.jsonl:1:10: column `seq` has the name of a built-in (${seq}): rename it in line 1"
        );
        assert_eq!(
            e("{}\n"),
            "ids.jsonl:1:1: line 1 is an empty object: the first line's keys are the columns"
        );
        assert_eq!(
            Data::from_jsonl("ids.jsonl", b"{\"a\":1}\n{\"a\":\"\xff\"}")
                .unwrap_err()
                .to_string(),
            "ids.jsonl:2:7: line 2 is not valid UTF-8"
        );
    }

    #[test]
    fn size_limit_is_checked_before_reading() {
        let dir = std::env::temp_dir().join(format!("loadlab-data-big-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("big.csv");
        let big = std::fs::File::create(&path).unwrap();
        big.set_len(MAX_DATA_BYTES + 1).unwrap(); // sparse: nothing is written
        let e = Data::load(&path).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}:1:1: the data file has 268435457 bytes; data files are limited to 256 MiB",
                path.display()
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn csv_blank_lines_are_skipped_and_quotes_keep_empty_values() {
        let data = csv("v\na\n\n\"\"\nb\n").unwrap();
        assert_eq!(rows(&data), vec![vec!["a"], vec![""], vec!["b"]]);
        assert_eq!((data.line(0), data.line(1), data.line(2)), (2, 4, 5));
    }

    #[test]
    fn load_errors_name_the_file() {
        let e = Data::load(Path::new("/nonexistent/ids.csv")).unwrap_err();
        assert_eq!(
            (e.source.as_str(), e.line, e.col),
            ("/nonexistent/ids.csv", 1, 1)
        );
        assert!(e.message.starts_with("cannot read the data file: "), "{e}");
    }

    #[test]
    fn from_rows_checks_like_a_file() {
        let r = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let e =
            Data::from_rows("mem", r(&["a", "b"]), vec![r(&["1", "2"]), r(&["3"])]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "mem:3:1: line 3 has 1 fields, the header has 2"
        );
        let e = Data::from_rows("mem", r(&["a", "now"]), vec![r(&["1", "2"])]).unwrap_err();
        assert!(e.message.contains("built-in (${now})"));
        let e = Data::from_rows("mem", r(&["a"]), vec![]).unwrap_err();
        assert_eq!(e.to_string(), "mem:1:1: no rows after the header");
    }

    fn numbered(n: usize) -> Data {
        Data::from_rows(
            "n.csv",
            vec!["n".into()],
            (0..n).map(|i| vec![i.to_string()]).collect(),
        )
        .unwrap()
    }

    #[test]
    fn sequential_wraps_in_order_across_threads() {
        let data = Arc::new(numbered(100));
        let cursor = Arc::new(Cursor::new());
        let mut gen = Generator::new(0, 0);
        // In order from one thread.
        let first: Vec<usize> = (0..250)
            .map(|_| data.pick(Order::Sequential, &cursor, &mut gen).unwrap())
            .collect();
        assert_eq!(first, (0..250).map(|i| i % 100).collect::<Vec<_>>());
        let cursor = Arc::new(Cursor::new());
        let threads: Vec<_> = (0..4)
            .map(|w| {
                let (data, cursor) = (Arc::clone(&data), Arc::clone(&cursor));
                std::thread::spawn(move || {
                    let mut gen = Generator::new(0, w);
                    (0..2_500)
                        .map(|_| data.pick(Order::Sequential, &cursor, &mut gen).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut counts = [0usize; 100];
        for t in threads {
            for p in t.join().unwrap() {
                counts[p] += 1;
            }
        }
        // 10,000 picks over 100 rows: each row exactly 100 times.
        assert!(counts.iter().all(|&c| c == 100), "{counts:?}");
        assert_eq!(cursor.rows_taken(), 10_000);
    }

    #[test]
    fn unique_gives_each_row_once_then_none() {
        let data = Arc::new(numbered(10_000));
        let cursor = Arc::new(Cursor::new());
        let threads: Vec<_> = (0..4)
            .map(|w| {
                let (data, cursor) = (Arc::clone(&data), Arc::clone(&cursor));
                std::thread::spawn(move || {
                    let mut gen = Generator::new(0, w);
                    let mut got = Vec::new();
                    while let Some(i) = data.pick(Order::Unique, &cursor, &mut gen) {
                        got.push(i);
                    }
                    got
                })
            })
            .collect();
        let mut all: Vec<usize> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..10_000).collect::<Vec<_>>());
        let mut gen = Generator::new(0, 9);
        for _ in 0..10 {
            assert_eq!(data.pick(Order::Unique, &cursor, &mut gen), None);
        }
        assert_eq!(cursor.rows_taken(), 10_000);
        // A resumed cursor carries on.
        let resumed = Cursor::starting_at(9_998, 1);
        assert_eq!(data.pick(Order::Unique, &resumed, &mut gen), Some(9_998));
        assert_eq!(data.pick(Order::Unique, &resumed, &mut gen), Some(9_999));
        assert_eq!(data.pick(Order::Unique, &resumed, &mut gen), None);
    }

    #[test]
    fn random_stays_in_range_and_covers_rows() {
        let data = numbered(10);
        let cursor = Cursor::new();
        let mut gen = Generator::new(3, 1);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let i = data.pick(Order::Random, &cursor, &mut gen).unwrap();
            seen[i] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(cursor.rows_taken(), 0);
    }

    #[test]
    fn share_splits_disjointly_and_completely() {
        let data = Data::from_rows(
            "n.csv",
            vec!["n".into()],
            (0..10)
                .map(|i| vec![if i == 7 { "a\nb".into() } else { i.to_string() }])
                .collect(),
        )
        .unwrap();
        let mut all = Vec::new();
        for part in 0..3 {
            let share = data.share(part, 3);
            for i in 0..share.len() {
                assert_eq!(share.line(i), (part + 3 * i) + 2);
                all.push(share.row(i)[0].to_string());
            }
            if part == 1 {
                assert_eq!(share.control_values().len(), 1);
                let c = share.control_values()[0];
                assert_eq!((c.row, c.line), (2, 9));
                assert_eq!(&*share.row(c.row)[0], "a\nb");
            } else {
                assert!(share.control_values().is_empty());
            }
        }
        all.sort();
        let mut want: Vec<String> = (0..10)
            .map(|i| if i == 7 { "a\nb".into() } else { i.to_string() })
            .collect();
        want.sort();
        assert_eq!(all, want);
        assert_eq!(data.share(0, 1), data);
        let empty = numbered(2).share(4, 5);
        assert!(empty.is_empty());
        assert_eq!(
            empty.pick(Order::Sequential, &Cursor::new(), &mut Generator::new(0, 0)),
            None
        );
    }

    #[test]
    fn seq_counts_and_strides() {
        let cursor = Cursor::new();
        assert_eq!(
            (cursor.next_seq(), cursor.next_seq(), cursor.seqs_taken()),
            (1, 2, 2)
        );
        let resumed = Cursor::starting_at(0, cursor.seqs_taken() + 1);
        assert_eq!(resumed.next_seq(), 3);
        let mut all = std::collections::HashSet::new();
        for part in 0..3 {
            let c = Cursor::new();
            for _ in 0..100 {
                assert!(all.insert(c.next_seq_strided(3, part)));
            }
        }
        assert_eq!(all, (1..=300).collect());
    }

    #[test]
    fn order_names() {
        for o in Order::ALL {
            assert_eq!(o.name().parse::<Order>(), Ok(o));
            assert_eq!(
                serde_json::to_string(&o).unwrap(),
                format!("\"{}\"", o.name())
            );
        }
        assert_eq!(
            "rand".parse::<Order>().unwrap_err().to_string(),
            "unknown order `rand`: expected sequential, random or unique"
        );
        assert_eq!(Order::default(), Order::Sequential);
    }
}

//! HPACK (RFC 7541), the header compression of HTTP/2, for the hand-written client.
//!
//! The client reads a response for a few values only (`:status`, `grpc-status`,
//! `grpc-encoding`), so [`Decoder::decode`] reports the fields it is asked for and only
//! walks the others: their values are skipped, not Huffman-decoded nor copied. It still
//! has to keep the dynamic table in step with the server's encoder, so a literal the
//! server asks to index is decoded (name and value) and stored whatever its name. The
//! scratch buffers live in the decoder, so a block that stores nothing allocates nothing
//! once they have grown; a stored entry reuses the buffer of an evicted one when it can.
//!
//! The request side is simpler: the `encode_*` functions write static-table indices and
//! plain (non-Huffman) literals without indexing, so the server's table holds nothing of
//! the client's and the same fields encode to the same bytes on every request.
//!
//! The dynamic table's limit is HTTP/2's default (4096), which the client never changes:
//! the server may resize its table within it, with a size update at the start of a block.

use std::collections::VecDeque;
use std::fmt;
use std::sync::OnceLock;

/// The dynamic table's size limit: HTTP/2's default `SETTINGS_HEADER_TABLE_SIZE`, which
/// the client never changes.
const TABLE_SIZE: usize = 4096;
/// What an entry costs in the table beyond its name and value (RFC 7541 §4.1).
const ENTRY_OVERHEAD: usize = 32;
/// The longest string accepted: far above any real header, it only bounds what a broken
/// or hostile peer can make the decoder work on.
const MAX_STRING: usize = 256 << 10;

/// HPACK errors (a `COMPRESSION_ERROR` for the connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HpackError {
    /// The block ends inside an integer or a string.
    Truncated,
    /// An integer above `u32::MAX` (or encoded in more bytes than one needs).
    IntegerOverflow,
    /// Index 0, or an index past the static and dynamic tables.
    BadIndex,
    /// A Huffman string holding EOS, or badly padded.
    BadHuffman,
    /// A dynamic table size update after a field, or above the limit.
    BadSizeUpdate,
    /// A string longer than 256 KiB.
    StringTooLong,
}

impl fmt::Display for HpackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HpackError::Truncated => "a header block cut short",
            HpackError::IntegerOverflow => "an integer too large",
            HpackError::BadIndex => "an index outside both tables",
            HpackError::BadHuffman => "a Huffman string with EOS or bad padding",
            HpackError::BadSizeUpdate => "a table size update after a field or above the limit",
            HpackError::StringTooLong => "a string longer than 256 KiB",
        })
    }
}

impl std::error::Error for HpackError {}

/// A dynamic table entry: its name and value in one buffer (one allocation, reused).
#[derive(Debug)]
struct Entry {
    bytes: Vec<u8>,
    name_len: usize,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }

    fn value(&self) -> &[u8] {
        &self.bytes[self.name_len..]
    }

    /// Its size as the table counts it (RFC 7541 §4.1).
    fn size(&self) -> usize {
        self.bytes.len() + ENTRY_OVERHEAD
    }
}

/// The decoding side of one connection: the dynamic table the server's encoder fills,
/// and the buffers a block is decoded with.
#[derive(Debug)]
pub(crate) struct Decoder {
    /// Newest first: dynamic index 62 is `table[0]`.
    table: VecDeque<Entry>,
    /// The sum of the entries' sizes.
    size: usize,
    /// The table's current maximum size, as the server last set it (≤ `limit`).
    max: usize,
    /// The most the server may set it to: `SETTINGS_HEADER_TABLE_SIZE`.
    limit: usize,
    /// A literal name being decoded.
    name: Vec<u8>,
    /// A literal value being decoded.
    value: Vec<u8>,
    /// An evicted entry's buffer (the largest since the last insertion), for the next
    /// entry to reuse.
    spare: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder::new()
    }
}

impl Decoder {
    /// A decoder with an empty table of HTTP/2's default size.
    pub(crate) fn new() -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: TABLE_SIZE,
            limit: TABLE_SIZE,
            name: Vec::new(),
            value: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// Decodes one complete header block (HEADERS + CONTINUATIONs already joined).
    /// For each field whose (decoded, lowercase) name equals one of `wanted`, calls
    /// `field(i, value)` with `i` the index into `wanted` and the decoded value.
    ///
    /// Other fields are only walked (their Huffman strings not decoded) unless the
    /// dynamic table needs them: a literal with incremental indexing has its name and
    /// value decoded and stored; a name given literally is decoded to be compared (names
    /// are short). Names are compared byte for byte: HTTP/2 names are lowercase.
    ///
    /// On `Err` the table may hold part of the block's insertions; the connection is
    /// over (`COMPRESSION_ERROR`), so it does not matter.
    pub(crate) fn decode(
        &mut self,
        block: &[u8],
        wanted: &[&[u8]],
        mut field: impl FnMut(usize, &[u8]),
    ) -> Result<(), HpackError> {
        self.run(
            block,
            |name| wanted.iter().position(|w| *w == name),
            |i, _, value| field(i, value),
        )
    }

    /// The block walk behind [`Decoder::decode`]: `wants` says which field a name is
    /// reported as, `field` gets the reported fields (index, name, value).
    fn run(
        &mut self,
        block: &[u8],
        wants: impl Fn(&[u8]) -> Option<usize>,
        mut field: impl FnMut(usize, &[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let mut pos = 0;
        // A field was seen: a size update is no longer allowed (RFC 7541 §4.2).
        let mut fields = false;
        while let Some(&first) = block.get(pos) {
            if first & 0x80 != 0 {
                // Indexed header field (§6.1).
                let (name, value) = entry(&self.table, integer(block, &mut pos, 7)?)?;
                if let Some(i) = wants(name) {
                    field(i, name, value);
                }
                fields = true;
            } else if first & 0x40 != 0 {
                // Literal with incremental indexing (§6.2.1): decoded and stored. The name
                // is copied out before the insertion evicts anything: it may name the
                // entry evicted to make room (§4.4).
                let index = integer(block, &mut pos, 6)?;
                self.name.clear();
                if index == 0 {
                    string(block, &mut pos)?.append_to(&mut self.name)?;
                } else {
                    let (name, _) = entry(&self.table, index)?;
                    self.name.extend_from_slice(name);
                }
                self.value.clear();
                string(block, &mut pos)?.append_to(&mut self.value)?;
                if let Some(i) = wants(&self.name) {
                    field(i, &self.name, &self.value);
                }
                self.insert();
                fields = true;
            } else if first & 0x20 != 0 {
                // Dynamic table size update (§6.3), only before the first field.
                if fields {
                    return Err(HpackError::BadSizeUpdate);
                }
                let max = integer(block, &mut pos, 5)?;
                if max > self.limit {
                    return Err(HpackError::BadSizeUpdate);
                }
                self.max = max;
                self.evict_to(max);
            } else {
                // Literal without indexing (0000xxxx, §6.2.2) or never indexed (0001xxxx,
                // §6.2.3): the table is untouched, so an unwanted value is skipped as is.
                let index = integer(block, &mut pos, 4)?;
                let name = if index == 0 {
                    string(block, &mut pos)?.text(&mut self.name)?
                } else {
                    entry(&self.table, index)?.0
                };
                let value = string(block, &mut pos)?;
                if let Some(i) = wants(name) {
                    field(i, name, value.text(&mut self.value)?);
                }
                fields = true;
            }
        }
        Ok(())
    }

    /// Inserts `name` and `value` (the buffers) as the newest entry, evicting the oldest
    /// ones to make room; an entry larger than the table empties it and is not stored
    /// (RFC 7541 §4.4).
    fn insert(&mut self) {
        let size = self.name.len() + self.value.len() + ENTRY_OVERHEAD;
        if size > self.max {
            self.evict_to(0);
            return;
        }
        self.evict_to(self.max - size);
        let mut bytes = std::mem::take(&mut self.spare);
        bytes.clear();
        bytes.extend_from_slice(&self.name);
        bytes.extend_from_slice(&self.value);
        self.table.push_front(Entry {
            bytes,
            name_len: self.name.len(),
        });
        self.size += size;
    }

    /// Evicts the oldest entries until the table's size is at most `max`, keeping the
    /// largest evicted buffer for the next insertion.
    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            let Some(old) = self.table.pop_back() else {
                break;
            };
            self.size -= old.size();
            if old.bytes.capacity() > self.spare.capacity() {
                self.spare = old.bytes;
            }
        }
    }
}

/// The name and value at `index`: 1..=61 in the static table, 62.. in the dynamic table
/// (newest first).
fn entry(table: &VecDeque<Entry>, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
    match index {
        0 => Err(HpackError::BadIndex),
        1..=STATIC_LEN => Ok(STATIC[index - 1]),
        _ => table
            .get(index - STATIC_LEN - 1)
            .map(|e| (e.name(), e.value()))
            .ok_or(HpackError::BadIndex),
    }
}

/// Reads the integer at `*pos` with an `prefix`-bit prefix (RFC 7541 §5.1) and moves
/// past it. Values above `u32::MAX`, or more than five continuation bytes, are
/// `IntegerOverflow`.
fn integer(block: &[u8], pos: &mut usize, prefix: u32) -> Result<usize, HpackError> {
    let mask = (1u8 << prefix) - 1;
    let first = block.get(*pos).ok_or(HpackError::Truncated)? & mask;
    *pos += 1;
    if first < mask {
        return Ok(usize::from(first));
    }
    let mut value = u64::from(mask);
    let mut shift = 0;
    loop {
        let b = *block.get(*pos).ok_or(HpackError::Truncated)?;
        *pos += 1;
        value += u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 28 {
            return Err(HpackError::IntegerOverflow);
        }
    }
    match u32::try_from(value) {
        Ok(v) => Ok(v as usize),
        Err(_) => Err(HpackError::IntegerOverflow),
    }
}

/// A string literal as it is in the block.
#[derive(Debug, Clone, Copy)]
struct Str<'a> {
    raw: &'a [u8],
    huffman: bool,
}

impl<'a> Str<'a> {
    /// Its text: the bytes as they are, or decoded into `buf` (cleared first).
    fn text<'b>(self, buf: &'b mut Vec<u8>) -> Result<&'b [u8], HpackError>
    where
        'a: 'b,
    {
        if !self.huffman {
            return Ok(self.raw);
        }
        buf.clear();
        huffman_decode(self.raw, buf)?;
        Ok(buf)
    }

    /// Appends its text to `buf`.
    fn append_to(self, buf: &mut Vec<u8>) -> Result<(), HpackError> {
        if self.huffman {
            huffman_decode(self.raw, buf)
        } else {
            buf.extend_from_slice(self.raw);
            Ok(())
        }
    }
}

/// Reads the string literal at `*pos` (RFC 7541 §5.2) and moves past it, without
/// decoding it.
fn string<'a>(block: &'a [u8], pos: &mut usize) -> Result<Str<'a>, HpackError> {
    let huffman = block.get(*pos).ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = integer(block, pos, 7)?;
    if len > MAX_STRING {
        return Err(HpackError::StringTooLong);
    }
    let raw = block.get(*pos..*pos + len).ok_or(HpackError::Truncated)?;
    *pos += len;
    Ok(Str { raw, huffman })
}

/// Appends a "literal header field without indexing" with an indexed static-table name
/// (`name_index`, 1..=61), value as a plain (non-Huffman) string.
pub(crate) fn encode_indexed_name(out: &mut Vec<u8>, name_index: u8, value: &[u8]) {
    debug_assert!((1..=STATIC_LEN).contains(&usize::from(name_index)));
    encode_integer(out, 0x00, 4, usize::from(name_index));
    encode_string(out, value);
}

/// Appends a "literal header field without indexing — new name", name and value plain
/// strings.
pub(crate) fn encode_literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    encode_string(out, name);
    encode_string(out, value);
}

/// Appends an "indexed header field" (static index 1..=61), e.g. 2 = `:method: GET`.
pub(crate) fn encode_indexed(out: &mut Vec<u8>, index: u8) {
    debug_assert!((1..=STATIC_LEN).contains(&usize::from(index)));
    encode_integer(out, 0x80, 7, usize::from(index));
}

/// The static-table index whose name is `name` (first match), if any.
pub(crate) fn static_name_index(name: &[u8]) -> Option<u8> {
    let i = STATIC.iter().position(|(n, _)| *n == name)?;
    Some(i as u8 + 1)
}

/// The static-table index whose name and value are `name` and `value`, if any.
pub(crate) fn static_index(name: &[u8], value: &[u8]) -> Option<u8> {
    let i = STATIC.iter().position(|(n, v)| *n == name && *v == value)?;
    Some(i as u8 + 1)
}

/// Appends `value` with a `prefix`-bit prefix (RFC 7541 §5.1), the first byte's other
/// bits being `flags`.
fn encode_integer(out: &mut Vec<u8>, flags: u8, prefix: u32, mut value: usize) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max as u8);
    value -= max;
    while value >= 0x80 {
        out.push(0x80 | (value & 0x7f) as u8);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends `s` as a plain (non-Huffman) string literal.
fn encode_string(out: &mut Vec<u8>, s: &[u8]) {
    encode_integer(out, 0x00, 7, s.len());
    out.extend_from_slice(s);
}

/// The number of static table entries.
const STATIC_LEN: usize = 61;

/// The static table (RFC 7541 Appendix A); index `i` is `STATIC[i - 1]`.
const STATIC: [(&[u8], &[u8]); STATIC_LEN] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

// Huffman coding (RFC 7541 §5.2, Appendix B).
//
// The code is canonical: sorted by (length, symbol), each code is the previous one plus
// one, shifted left by the difference in length. So a code's length is found by
// comparing the next 32 bits with the end of each length's codes, and the symbol by its
// rank among the codes of that length. A table of the codes up to `FAST_BITS` bits,
// looked up by the next `FAST_BITS` bits, does it in one step for the common bytes
// (letters, digits and the common punctuation have 5 to 8 bits).

/// Appendix B's codes, right-aligned, by symbol; 256 is EOS.
const HUFFMAN_CODES: [u32; 257] = [
    0x1ff8, 0x7fffd8, 0xfffffe2, 0xfffffe3, 0xfffffe4, 0xfffffe5, 0xfffffe6, 0xfffffe7, 0xfffffe8,
    0xffffea, 0x3ffffffc, 0xfffffe9, 0xfffffea, 0x3ffffffd, 0xfffffeb, 0xfffffec, 0xfffffed,
    0xfffffee, 0xfffffef, 0xffffff0, 0xffffff1, 0xffffff2, 0x3ffffffe, 0xffffff3, 0xffffff4,
    0xffffff5, 0xffffff6, 0xffffff7, 0xffffff8, 0xffffff9, 0xffffffa, 0xffffffb, 0x14, 0x3f8,
    0x3f9, 0xffa, 0x1ff9, 0x15, 0xf8, 0x7fa, 0x3fa, 0x3fb, 0xf9, 0x7fb, 0xfa, 0x16, 0x17, 0x18,
    0x0, 0x1, 0x2, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x5c, 0xfb, 0x7ffc, 0x20, 0xffb,
    0x3fc, 0x1ffa, 0x21, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
    0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f, 0x70, 0x71, 0x72, 0xfc, 0x73, 0xfd, 0x1ffb, 0x7fff0,
    0x1ffc, 0x3ffc, 0x22, 0x7ffd, 0x3, 0x23, 0x4, 0x24, 0x5, 0x25, 0x26, 0x27, 0x6, 0x74, 0x75,
    0x28, 0x29, 0x2a, 0x7, 0x2b, 0x76, 0x2c, 0x8, 0x9, 0x2d, 0x77, 0x78, 0x79, 0x7a, 0x7b, 0x7ffe,
    0x7fc, 0x3ffd, 0x1ffd, 0xffffffc, 0xfffe6, 0x3fffd2, 0xfffe7, 0xfffe8, 0x3fffd3, 0x3fffd4,
    0x3fffd5, 0x7fffd9, 0x3fffd6, 0x7fffda, 0x7fffdb, 0x7fffdc, 0x7fffdd, 0x7fffde, 0xffffeb,
    0x7fffdf, 0xffffec, 0xffffed, 0x3fffd7, 0x7fffe0, 0xffffee, 0x7fffe1, 0x7fffe2, 0x7fffe3,
    0x7fffe4, 0x1fffdc, 0x3fffd8, 0x7fffe5, 0x3fffd9, 0x7fffe6, 0x7fffe7, 0xffffef, 0x3fffda,
    0x1fffdd, 0xfffe9, 0x3fffdb, 0x3fffdc, 0x7fffe8, 0x7fffe9, 0x1fffde, 0x7fffea, 0x3fffdd,
    0x3fffde, 0xfffff0, 0x1fffdf, 0x3fffdf, 0x7fffeb, 0x7fffec, 0x1fffe0, 0x1fffe1, 0x3fffe0,
    0x1fffe2, 0x7fffed, 0x3fffe1, 0x7fffee, 0x7fffef, 0xfffea, 0x3fffe2, 0x3fffe3, 0x3fffe4,
    0x7ffff0, 0x3fffe5, 0x3fffe6, 0x7ffff1, 0x3ffffe0, 0x3ffffe1, 0xfffeb, 0x7fff1, 0x3fffe7,
    0x7ffff2, 0x3fffe8, 0x1ffffec, 0x3ffffe2, 0x3ffffe3, 0x3ffffe4, 0x7ffffde, 0x7ffffdf,
    0x3ffffe5, 0xfffff1, 0x1ffffed, 0x7fff2, 0x1fffe3, 0x3ffffe6, 0x7ffffe0, 0x7ffffe1, 0x3ffffe7,
    0x7ffffe2, 0xfffff2, 0x1fffe4, 0x1fffe5, 0x3ffffe8, 0x3ffffe9, 0xffffffd, 0x7ffffe3, 0x7ffffe4,
    0x7ffffe5, 0xfffec, 0xfffff3, 0xfffed, 0x1fffe6, 0x3fffe9, 0x1fffe7, 0x1fffe8, 0x7ffff3,
    0x3fffea, 0x3fffeb, 0x1ffffee, 0x1ffffef, 0xfffff4, 0xfffff5, 0x3ffffea, 0x7ffff4, 0x3ffffeb,
    0x7ffffe6, 0x3ffffec, 0x3ffffed, 0x7ffffe7, 0x7ffffe8, 0x7ffffe9, 0x7ffffea, 0x7ffffeb,
    0xffffffe, 0x7ffffec, 0x7ffffed, 0x7ffffee, 0x7ffffef, 0x7fffff0, 0x3ffffee, 0x3fffffff,
];

/// Appendix B's code lengths in bits, by symbol; 256 is EOS.
const HUFFMAN_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

/// The end-of-string symbol, which may not appear in a string.
const EOS: u16 = 256;
/// The longest code (EOS and a few control bytes).
const MAX_CODE_LEN: usize = 30;
/// The codes the fast table resolves: up to this many bits.
const FAST_BITS: u32 = 10;

/// The decoding tables, built once from Appendix B.
struct HuffmanTables {
    /// By the next `FAST_BITS` bits: `length << 8 | symbol` of the code they start
    /// with, or 0 when that code is longer.
    fast: [u16; 1 << FAST_BITS],
    /// By length `l`: one past the last code of length `l` or less, left-aligned in 32
    /// bits (a `u64`: the last one is 2^32).
    limit: [u64; MAX_CODE_LEN + 1],
    /// By length: the first code of that length, right-aligned.
    first: [u32; MAX_CODE_LEN + 1],
    /// By length: where that length's symbols start in `symbols`.
    start: [u16; MAX_CODE_LEN + 1],
    /// The symbols in canonical order (by length, then symbol).
    symbols: [u16; 257],
}

impl HuffmanTables {
    fn build() -> HuffmanTables {
        let mut count = [0u32; MAX_CODE_LEN + 1];
        for &len in &HUFFMAN_LENGTHS {
            count[usize::from(len)] += 1;
        }
        let mut t = HuffmanTables {
            fast: [0; 1 << FAST_BITS],
            limit: [0; MAX_CODE_LEN + 1],
            first: [0; MAX_CODE_LEN + 1],
            start: [0; MAX_CODE_LEN + 1],
            symbols: [0; 257],
        };
        let (mut code, mut start) = (0u32, 0u16);
        for (len, &count) in count.iter().enumerate().skip(1) {
            t.first[len] = code;
            t.start[len] = start;
            t.limit[len] = u64::from(code + count) << (32 - len);
            code = (code + count) << 1;
            start += count as u16;
        }
        // Canonical order: by length, then symbol (the sort is stable).
        t.symbols = std::array::from_fn(|sym| sym as u16);
        t.symbols
            .sort_by_key(|&sym| HUFFMAN_LENGTHS[usize::from(sym)]);
        for (sym, (&code, &len)) in HUFFMAN_CODES.iter().zip(&HUFFMAN_LENGTHS).enumerate() {
            let len = u32::from(len);
            if len <= FAST_BITS {
                let base = (code << (FAST_BITS - len)) as usize;
                let entry = (len as u16) << 8 | sym as u16;
                t.fast[base..base + (1 << (FAST_BITS - len))].fill(entry);
            }
        }
        t
    }

    /// The length and symbol of the code `window` (the next 32 bits) starts with.
    fn lookup(&self, window: u32) -> (u32, u16) {
        let fast = self.fast[(window >> (32 - FAST_BITS)) as usize];
        if fast != 0 {
            return (u32::from(fast >> 8), fast & 0xff);
        }
        let w = u64::from(window);
        let len = (FAST_BITS as usize + 1..MAX_CODE_LEN)
            .find(|&len| w < self.limit[len])
            .unwrap_or(MAX_CODE_LEN);
        let rank = (window >> (32 - len)) - self.first[len];
        let sym = self.symbols[usize::from(self.start[len]) + rank as usize];
        (len as u32, sym)
    }
}

/// The decoding tables, built on first use.
fn huffman_tables() -> &'static HuffmanTables {
    static TABLES: OnceLock<HuffmanTables> = OnceLock::new();
    TABLES.get_or_init(HuffmanTables::build)
}

/// Appends the Huffman-decoded `src` to `out`. EOS in the string, padding longer than
/// 7 bits, or padding that is not all ones (EOS's first bits) is `BadHuffman`.
fn huffman_decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    let t = huffman_tables();
    // The unread bits are the low `n` bits of `bits` (those above are stale).
    let mut bits = 0u64;
    let mut n = 0u32;
    let mut rest = src;
    loop {
        // Top up: four bytes at a time, byte by byte at the end.
        if n <= 32 {
            if let Some((four, tail)) = rest.split_first_chunk::<4>() {
                bits = bits << 32 | u64::from(u32::from_be_bytes(*four));
                n += 32;
                rest = tail;
            } else {
                for &b in rest {
                    bits = bits << 8 | u64::from(b);
                    n += 8;
                }
                rest = &[];
            }
        }
        // The next 32 bits, zeros past the end.
        let window = if n >= 32 {
            (bits >> (n - 32)) as u32
        } else {
            (bits << (32 - n)) as u32
        };
        let (len, sym) = t.lookup(window);
        if len > n {
            // Only at the end (with bytes left, `n` ≥ 32, above any code's length): the
            // rest is not a whole code, so it must be padding.
            break;
        }
        if sym == EOS {
            return Err(HpackError::BadHuffman);
        }
        out.push(sym as u8);
        n -= len;
    }
    let ones = (1u64 << n) - 1;
    if n > 7 || bits & ones != ones {
        return Err(HpackError::BadHuffman);
    }
    Ok(())
}

/// Appends the Huffman encoding of `bytes`, padded with ones (the tests' round trips;
/// the client sends plain strings).
#[cfg(test)]
fn huffman_encode(out: &mut Vec<u8>, bytes: &[u8]) {
    // The pending bits are the low `n` bits of `bits` (fewer than 8 between bytes).
    let mut bits = 0u64;
    let mut n = 0u32;
    for &b in bytes {
        let len = u32::from(HUFFMAN_LENGTHS[usize::from(b)]);
        bits = bits << len | u64::from(HUFFMAN_CODES[usize::from(b)]);
        n += len;
        while n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    if n > 0 {
        out.push((bits << (8 - n)) as u8 | 0xff >> n);
    }
}

/// Decoded fields, `(name, value)`, for the tests.
#[cfg(test)]
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

#[cfg(test)]
impl Decoder {
    /// A decoder whose `SETTINGS_HEADER_TABLE_SIZE` is `max` (RFC 7541 C.5 and C.6 use 256).
    fn with_max(max: usize) -> Decoder {
        Decoder {
            max,
            limit: max,
            ..Decoder::new()
        }
    }

    /// Every field of `block`, decoded, in order.
    fn decode_all(&mut self, block: &[u8]) -> Result<Fields, HpackError> {
        let mut fields = Vec::new();
        self.run(
            block,
            |_| Some(0),
            |_, name, value| fields.push((name.to_vec(), value.to_vec())),
        )?;
        Ok(fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of a hex dump (spaces and line breaks ignored).
    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        digits
            .chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    /// `(name, value)` pairs as owned bytes.
    fn fields(list: &[(&str, &str)]) -> Fields {
        list.iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    /// Asserts the dynamic table holds `entries` (newest first) and has size `size`.
    #[track_caller]
    fn assert_table(d: &Decoder, entries: &[(&str, &str)], size: usize) {
        let got: Fields = d
            .table
            .iter()
            .map(|e| (e.name().to_vec(), e.value().to_vec()))
            .collect();
        assert_eq!(got, fields(entries));
        assert_eq!(d.size, size);
        assert_eq!(d.size, d.table.iter().map(Entry::size).sum::<usize>());
    }

    /// Decodes `block` with `d`, asserting its fields are `expected`.
    #[track_caller]
    fn assert_block(d: &mut Decoder, block: &str, expected: &[(&str, &str)]) {
        assert_eq!(d.decode_all(&hex(block)).unwrap(), fields(expected));
    }

    /// A Huffman string literal (H bit, length, code).
    fn huffman_string(out: &mut Vec<u8>, s: &[u8]) {
        let mut code = Vec::new();
        huffman_encode(&mut code, s);
        encode_integer(out, 0x80, 7, code.len());
        out.extend_from_slice(&code);
    }

    /// Huffman-decodes `src` on its own.
    fn huffman(src: &[u8]) -> Result<Vec<u8>, HpackError> {
        let mut out = Vec::new();
        huffman_decode(src, &mut out)?;
        Ok(out)
    }

    #[test]
    fn c1_integers() {
        // C.1.2: 1337 with a 5-bit prefix; C.1.1: 10; and a 0-continuation 31.
        let mut pos = 0;
        assert_eq!(integer(&[0x1f, 0x9a, 0x0a], &mut pos, 5), Ok(1337));
        assert_eq!(pos, 3);
        pos = 0;
        assert_eq!(integer(&[0xea], &mut pos, 5), Ok(10));
        assert_eq!(pos, 1);
        pos = 0;
        assert_eq!(integer(&[0x1f, 0x00], &mut pos, 5), Ok(31));
        let mut out = Vec::new();
        encode_integer(&mut out, 0xe0, 5, 1337);
        assert_eq!(out, [0xff, 0x9a, 0x0a]);
        for prefix in 1..=7 {
            for value in [
                0,
                1,
                126,
                127,
                128,
                255,
                1337,
                65_535,
                1 << 21,
                u32::MAX as usize,
            ] {
                out.clear();
                encode_integer(&mut out, 0, prefix, value);
                let mut pos = 0;
                assert_eq!(
                    integer(&out, &mut pos, prefix),
                    Ok(value),
                    "{value} on {prefix}"
                );
                assert_eq!(pos, out.len());
            }
        }
    }

    #[test]
    fn c2_1_literal_with_indexing() {
        let mut d = Decoder::new();
        assert_block(
            &mut d,
            "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
            &[("custom-key", "custom-header")],
        );
        assert_table(&d, &[("custom-key", "custom-header")], 55);
    }

    #[test]
    fn c2_2_literal_without_indexing() {
        let mut d = Decoder::new();
        assert_block(
            &mut d,
            "040c 2f73 616d 706c 652f 7061 7468",
            &[(":path", "/sample/path")],
        );
        assert_table(&d, &[], 0);
    }

    #[test]
    fn c2_3_literal_never_indexed() {
        let mut d = Decoder::new();
        assert_block(
            &mut d,
            "1008 7061 7373 776f 7264 0673 6563 7265 74",
            &[("password", "secret")],
        );
        assert_table(&d, &[], 0);
    }

    #[test]
    fn c2_4_indexed() {
        let mut d = Decoder::new();
        assert_block(&mut d, "82", &[(":method", "GET")]);
        assert_table(&d, &[], 0);
    }

    const REQUEST_1: &[(&str, &str)] = &[
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        (":authority", "www.example.com"),
    ];
    const REQUEST_2: &[(&str, &str)] = &[
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        (":authority", "www.example.com"),
        ("cache-control", "no-cache"),
    ];
    const REQUEST_3: &[(&str, &str)] = &[
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/index.html"),
        (":authority", "www.example.com"),
        ("custom-key", "custom-value"),
    ];

    /// C.3 and C.4: the three requests' tables.
    fn assert_request_tables(d: &mut Decoder, blocks: [&str; 3]) {
        assert_block(d, blocks[0], REQUEST_1);
        assert_table(d, &[(":authority", "www.example.com")], 57);
        assert_block(d, blocks[1], REQUEST_2);
        assert_table(
            d,
            &[
                ("cache-control", "no-cache"),
                (":authority", "www.example.com"),
            ],
            110,
        );
        assert_block(d, blocks[2], REQUEST_3);
        assert_table(
            d,
            &[
                ("custom-key", "custom-value"),
                ("cache-control", "no-cache"),
                (":authority", "www.example.com"),
            ],
            164,
        );
    }

    #[test]
    fn c3_requests_without_huffman() {
        assert_request_tables(
            &mut Decoder::new(),
            [
                "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                "8286 84be 5808 6e6f 2d63 6163 6865",
                "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
            ],
        );
    }

    #[test]
    fn c4_requests_with_huffman() {
        assert_request_tables(
            &mut Decoder::new(),
            [
                "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
                "8286 84be 5886 a8eb 1064 9cbf",
                "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
            ],
        );
    }

    const RESPONSE_1: &[(&str, &str)] = &[
        (":status", "302"),
        ("cache-control", "private"),
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("location", "https://www.example.com"),
    ];
    const RESPONSE_2: &[(&str, &str)] = &[
        (":status", "307"),
        ("cache-control", "private"),
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("location", "https://www.example.com"),
    ];
    const RESPONSE_3: &[(&str, &str)] = &[
        (":status", "200"),
        ("cache-control", "private"),
        ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
        ("location", "https://www.example.com"),
        ("content-encoding", "gzip"),
        (
            "set-cookie",
            "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
        ),
    ];

    /// C.5 and C.6: the three responses' tables in 256 bytes, with their evictions.
    fn assert_response_tables(blocks: [&str; 3]) {
        let mut d = Decoder::with_max(256);
        assert_block(&mut d, blocks[0], RESPONSE_1);
        assert_table(
            &d,
            &[
                ("location", "https://www.example.com"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("cache-control", "private"),
                (":status", "302"),
            ],
            222,
        );
        // (":status", "302") is evicted for (":status", "307").
        assert_block(&mut d, blocks[1], RESPONSE_2);
        assert_table(
            &d,
            &[
                (":status", "307"),
                ("location", "https://www.example.com"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("cache-control", "private"),
            ],
            222,
        );
        // Four evictions, the block's references coming before them.
        assert_block(&mut d, blocks[2], RESPONSE_3);
        assert_table(
            &d,
            &[
                (
                    "set-cookie",
                    "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
                ),
                ("content-encoding", "gzip"),
                ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
            ],
            215,
        );
    }

    #[test]
    fn c5_responses_without_huffman() {
        assert_response_tables([
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
             2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
             6c65 2e63 6f6d",
            "4803 3330 37c1 c0bf",
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
             54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
             5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
             3d31",
        ]);
    }

    #[test]
    fn c6_responses_with_huffman() {
        assert_response_tables([
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
             2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            "4883 640e ffc1 c0bf",
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
             77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
             9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ]);
    }

    const WANTED: &[&[u8]] = &[b"grpc-status", b":status", b"grpc-encoding"];

    /// The fields `decode` reports for `WANTED`.
    fn wanted(d: &mut Decoder, block: &[u8]) -> Result<Vec<(usize, Vec<u8>)>, HpackError> {
        let mut got = Vec::new();
        d.decode(block, WANTED, |i, v| got.push((i, v.to_vec())))?;
        Ok(got)
    }

    #[test]
    fn decode_reports_only_wanted_fields() {
        let mut d = Decoder::new();
        // :status 200 (indexed), server (literal, static name), date (Huffman, indexed
        // into the table), grpc-status (literal, new name), grpc-encoding (Huffman name
        // and value, indexed into the table).
        let mut block = Vec::new();
        encode_indexed(&mut block, 8);
        encode_indexed_name(&mut block, 54, b"loadlab-test");
        block.push(0x40 | 33);
        huffman_string(&mut block, b"Mon, 21 Oct 2013 20:13:21 GMT");
        encode_literal(&mut block, b"grpc-status", b"0");
        block.push(0x40);
        huffman_string(&mut block, b"grpc-encoding");
        huffman_string(&mut block, b"gzip");
        assert_eq!(
            wanted(&mut d, &block).unwrap(),
            [
                (1, b"200".to_vec()),
                (0, b"0".to_vec()),
                (2, b"gzip".to_vec())
            ]
        );
        assert_table(
            &d,
            &[
                ("grpc-encoding", "gzip"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ],
            49 + 65,
        );
        // The next block refers to the table: grpc-encoding (62) and date (63), and a
        // never-indexed grpc-status with a Huffman value.
        let mut block = vec![0x80 | 63, 0x80 | 62, 0x10];
        encode_string(&mut block, b"grpc-status");
        huffman_string(&mut block, b"14");
        encode_indexed(&mut block, 13);
        assert_eq!(
            wanted(&mut d, &block).unwrap(),
            [
                (2, b"gzip".to_vec()),
                (0, b"14".to_vec()),
                (1, b"404".to_vec())
            ]
        );
        assert!(wanted(&mut d, &[]).unwrap().is_empty());
    }

    #[test]
    fn unwanted_values_are_not_decoded() {
        // A server value with a bad Huffman string: walked over when unwanted, an error
        // when decoded.
        let block = [0x88, 0x0f, 54 - 15, 0x81, 0xff];
        let mut d = Decoder::new();
        assert_eq!(wanted(&mut d, &block).unwrap(), [(1, b"200".to_vec())]);
        assert_eq!(d.decode_all(&block), Err(HpackError::BadHuffman));
        // Not so when it goes into the table.
        let block = [0x88, 0x40 | 54, 0x81, 0xff];
        assert_eq!(wanted(&mut d, &block), Err(HpackError::BadHuffman));
    }

    #[test]
    fn index_zero_is_bad() {
        let mut d = Decoder::new();
        assert_eq!(d.decode_all(&[0x80]), Err(HpackError::BadIndex));
        assert_eq!(
            d.decode(&[0x80], WANTED, |_, _| ()),
            Err(HpackError::BadIndex)
        );
        // A literal's name index 0 is not an index: the name follows.
        assert_eq!(d.decode_all(&[0x00, 0x00, 0x00]), Ok(fields(&[("", "")])));
        assert_eq!(d.decode_all(&[0x40, 0x00, 0x00]), Ok(fields(&[("", "")])));
        assert_table(&d, &[("", "")], 32);
    }

    #[test]
    fn index_past_the_table_is_bad() {
        let mut d = Decoder::new();
        assert_eq!(d.decode_all(&[0x80 | 62]), Err(HpackError::BadIndex));
        assert_eq!(d.decode_all(&[0x0f, 0x2f, 0x00]), Err(HpackError::BadIndex));
        assert_eq!(d.decode_all(&[0x40 | 62, 0x00]), Err(HpackError::BadIndex));
        assert_eq!(
            d.decode_all(&[0x80 | 61]),
            Ok(fields(&[("www-authenticate", "")]))
        );
        // One entry: 62 is it, 63 is past it.
        d.decode_all(&hex(
            "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
        ))
        .unwrap();
        assert_eq!(
            d.decode_all(&[0x80 | 62]),
            Ok(fields(&[("custom-key", "custom-header")]))
        );
        assert_eq!(d.decode_all(&[0x80 | 63]), Err(HpackError::BadIndex));
        assert_eq!(d.decode_all(&[0xff, 0x80, 0x01]), Err(HpackError::BadIndex));
    }

    #[test]
    fn truncated_integers_and_strings() {
        let mut d = Decoder::new();
        for block in [
            &[0xff][..],
            &[0xff, 0x80],
            &[0x7f],
            &[0x0f, 0x80, 0x80],
            &[0x3f],
            &[0x40],
            &[0x40, 0x01],
            &[0x40, 0x01, b'a'],
            &[0x40, 0x01, b'a', 0x02, b'b'],
            &[0x04],
            &[0x04, 0x7f],
            &[0x04, 0x7f, 0xff],
            &[0x04, 0x83, 0x64, 0x0e],
            &[0x00, 0x05, b'a', b'b'],
        ] {
            assert_eq!(
                d.decode_all(block),
                Err(HpackError::Truncated),
                "{block:02x?}"
            );
            assert_eq!(
                d.decode(block, WANTED, |_, _| ()),
                Err(HpackError::Truncated)
            );
        }
    }

    #[test]
    fn integer_overflow() {
        let mut d = Decoder::new();
        // Above u32::MAX, and more continuation bytes than a u32 needs.
        for block in [
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f][..],
            &[0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00],
            &[0x04, 0x7f, 0xff, 0xff, 0xff, 0xff, 0x7f],
        ] {
            assert_eq!(d.decode_all(block), Err(HpackError::IntegerOverflow));
        }
        // u32::MAX itself is an integer (and an index past the table).
        let mut block = Vec::new();
        encode_integer(&mut block, 0x80, 7, u32::MAX as usize);
        assert_eq!(d.decode_all(&block), Err(HpackError::BadIndex));
    }

    #[test]
    fn strings_longer_than_256_kib() {
        let mut d = Decoder::new();
        let mut block = vec![0x04];
        encode_integer(&mut block, 0, 7, MAX_STRING + 1);
        assert_eq!(d.decode_all(&block), Err(HpackError::StringTooLong));
        block.resize(block.len() + MAX_STRING + 1, b'a');
        assert_eq!(d.decode_all(&block), Err(HpackError::StringTooLong));
        let mut block = vec![0x04];
        encode_string(&mut block, &vec![b'a'; MAX_STRING]);
        assert_eq!(d.decode_all(&block).unwrap()[0].1.len(), MAX_STRING);
    }

    #[test]
    fn size_updates() {
        let mut d = Decoder::new();
        d.decode_all(&hex(
            "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
        ))
        .unwrap();
        d.decode_all(&hex("4003 6162 6303 6465 66")).unwrap();
        assert_table(&d, &[("abc", "def"), ("custom-key", "custom-header")], 93);
        // After a field: refused.
        assert_eq!(d.decode_all(&[0x82, 0x20]), Err(HpackError::BadSizeUpdate));
        // Above the limit (4097): refused.
        assert_eq!(
            d.decode_all(&[0x3f, 0xe2, 0x1f]),
            Err(HpackError::BadSizeUpdate)
        );
        // Two updates in a row, at the start: down to 40 evicts the older entry, and
        // the table stays that small.
        assert_eq!(
            d.decode_all(&[0x3f, 0xe1, 0x1f, 0x3f, 0x09, 0x82])
                .unwrap()
                .len(),
            1
        );
        assert_table(&d, &[("abc", "def")], 38);
        assert_eq!(d.max, 40);
        d.decode_all(&hex("4003 6162 6403 6465 66")).unwrap();
        assert_table(&d, &[("abd", "def")], 38);
        // Up to the limit again (4096), and down to 0, which empties it.
        d.decode_all(&[0x3f, 0xe1, 0x1f]).unwrap();
        assert_eq!(d.max, TABLE_SIZE);
        d.decode_all(&[0x20]).unwrap();
        assert_table(&d, &[], 0);
        // An entry larger than the table empties it and is not stored.
        let mut d = Decoder::with_max(100);
        d.decode_all(&hex("4003 6162 6303 6465 66")).unwrap();
        let mut block = vec![0x40];
        encode_string(&mut block, b"big");
        encode_string(&mut block, &[b'x'; 66]);
        assert_eq!(d.decode_all(&block).unwrap()[0].1.len(), 66);
        assert_table(&d, &[], 0);
        // Exactly the table's size fits.
        let mut block = vec![0x40];
        encode_string(&mut block, b"big");
        encode_string(&mut block, &[b'x'; 65]);
        d.decode_all(&block).unwrap();
        assert_eq!(d.size, 100);
    }

    #[test]
    fn an_entry_may_name_the_entry_its_insertion_evicts() {
        // RFC 7541 §4.4: the name is read before the eviction.
        let mut d = Decoder::with_max(70);
        d.decode_all(&hex(
            "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
        ))
        .unwrap();
        assert_eq!(
            d.decode_all(&hex("7e 0161")).unwrap(),
            fields(&[("custom-key", "a")])
        );
        assert_table(&d, &[("custom-key", "a")], 43);
    }

    #[test]
    fn huffman_eos_is_bad() {
        // EOS (30 ones) then two ones of padding.
        assert_eq!(
            huffman(&[0xff, 0xff, 0xff, 0xff]),
            Err(HpackError::BadHuffman)
        );
        // EOS, then '0' (00000) and five ones of padding.
        assert_eq!(
            huffman(&[0xff, 0xff, 0xff, 0xfc, 0x1f]),
            Err(HpackError::BadHuffman)
        );
        // 'a' (00011), then EOS, then five ones of padding.
        assert_eq!(
            huffman(&[0x1f, 0xff, 0xff, 0xff, 0xff]),
            Err(HpackError::BadHuffman)
        );
        let mut d = Decoder::new();
        assert_eq!(
            d.decode_all(&[0x04, 0x84, 0xff, 0xff, 0xff, 0xff]),
            Err(HpackError::BadHuffman)
        );
    }

    #[test]
    fn huffman_padding_of_8_bits_or_more_is_bad() {
        assert_eq!(huffman(&[0xff]), Err(HpackError::BadHuffman));
        // 'a' then 11 ones.
        assert_eq!(huffman(&[0x1f, 0xff]), Err(HpackError::BadHuffman));
        // 7 ones or fewer is fine: '0' (00000) then 3 ones; "00" then 6; "000" then 1.
        assert_eq!(huffman(&[0x07]), Ok(b"0".to_vec()));
        assert_eq!(huffman(&[0x00, 0x3f]), Ok(b"00".to_vec()));
        assert_eq!(huffman(&[0x00, 0x01]), Ok(b"000".to_vec()));
        assert_eq!(huffman(&[]), Ok(Vec::new()));
    }

    #[test]
    fn huffman_padding_not_all_ones_is_bad() {
        // '0' (00000) then 000 is not EOS's start; nor is 011.
        assert_eq!(huffman(&[0x00]), Err(HpackError::BadHuffman));
        assert_eq!(huffman(&[0x03]), Err(HpackError::BadHuffman));
        // '0', '&' (11111000), then 000.
        assert_eq!(huffman(&[0x07, 0xc0]), Err(HpackError::BadHuffman));
        // Without the last byte, '0' and 3 ones: fine.
        assert_eq!(huffman(&[0x07]), Ok(b"0".to_vec()));
        let mut d = Decoder::new();
        assert_eq!(
            d.decode_all(&[0x04, 0x81, 0x00]),
            Err(HpackError::BadHuffman)
        );
    }

    #[test]
    fn huffman_round_trips_every_byte() {
        for b in 0..=255u8 {
            let mut code = Vec::new();
            huffman_encode(&mut code, &[b]);
            assert_eq!(huffman(&code), Ok(vec![b]), "byte {b}");
            // And repeated, so that codes start at every bit position.
            let run = [b; 9];
            code.clear();
            huffman_encode(&mut code, &run);
            assert_eq!(huffman(&code), Ok(run.to_vec()), "byte {b}");
        }
        let all: Vec<u8> = (0..=255).collect();
        let mut code = Vec::new();
        huffman_encode(&mut code, &all);
        assert_eq!(huffman(&code), Ok(all));
    }

    #[test]
    fn huffman_round_trips_random_strings() {
        // A fixed xorshift: strings of 0..=300 bytes, half of them text-like.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut code = Vec::new();
        for round in 0..2000 {
            let len = (next() % 301) as usize;
            let s: Vec<u8> = (0..len)
                .map(|_| {
                    let r = next();
                    if round % 2 == 0 {
                        b"abcdefghijklmnopqrstuvwxyz0123456789-_/.:;=, "[(r % 45) as usize]
                    } else {
                        r as u8
                    }
                })
                .collect();
            code.clear();
            huffman_encode(&mut code, &s);
            assert_eq!(huffman(&code), Ok(s.clone()));
            // Through a block too, as a wanted never-indexed value.
            let mut block = vec![0x10];
            encode_string(&mut block, b"grpc-status");
            huffman_string(&mut block, &s);
            let mut d = Decoder::new();
            assert_eq!(wanted(&mut d, &block), Ok(vec![(0, s)]));
        }
    }

    #[test]
    fn arbitrary_blocks_never_panic() {
        // Random bytes (biased to small indices and lengths so that some decode), on one
        // decoder: any result is fine, but not a panic, and the table stays consistent.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut d = Decoder::with_max(512);
        let (mut ok, mut block) = (0, Vec::new());
        for _ in 0..50_000 {
            block.clear();
            for _ in 0..next() % 48 {
                let r = next();
                block.push(match r % 4 {
                    0 => (r >> 8) as u8,
                    1 => 0x80 | ((r >> 8) % 70) as u8,
                    2 => 0x40 | ((r >> 8) % 4) as u8,
                    _ => ((r >> 8) % 12) as u8,
                });
            }
            ok += usize::from(d.decode_all(&block).is_ok());
            let _ = d.decode(&block, WANTED, |_, _| ());
            assert_eq!(d.size, d.table.iter().map(Entry::size).sum::<usize>());
            assert!(d.size <= d.max && d.max <= d.limit);
        }
        assert!(ok > 1000, "{ok}");
    }

    #[test]
    fn huffman_code_is_canonical() {
        // The slow path rebuilds the codes from their lengths: check it against Appendix
        // B's codes, and that every 30-bit pattern past the fast table resolves.
        let t = huffman_tables();
        for (sym, (&code, &len)) in HUFFMAN_CODES.iter().zip(&HUFFMAN_LENGTHS).enumerate() {
            let len = u32::from(len);
            let window = (u64::from(code) << (32 - len)) as u32;
            assert_eq!(t.lookup(window), (len, sym as u16), "symbol {sym}");
            let window = window | ((1u64 << (32 - len)) - 1) as u32;
            assert_eq!(t.lookup(window), (len, sym as u16), "symbol {sym}");
        }
        assert_eq!(t.limit[MAX_CODE_LEN], 1 << 32);
        assert_eq!(HUFFMAN_CODES[usize::from(EOS)], (1 << 30) - 1);
    }

    #[test]
    fn encoders_round_trip() {
        let mut block = Vec::new();
        encode_indexed(&mut block, 2);
        encode_indexed(&mut block, static_index(b":scheme", b"https").unwrap());
        encode_indexed_name(&mut block, static_name_index(b":path").unwrap(), b"/a?b=c");
        encode_indexed_name(
            &mut block,
            static_name_index(b":authority").unwrap(),
            b"localhost:8080",
        );
        encode_indexed_name(
            &mut block,
            static_name_index(b"user-agent").unwrap(),
            b"loadlab/0.1",
        );
        encode_indexed_name(&mut block, 61, &[b'v'; 300]);
        encode_literal(&mut block, b"te", b"trailers");
        encode_literal(&mut block, b"grpc-timeout", b"100m");
        encode_literal(&mut block, b"x-empty", b"");
        let long_name = vec![b'n'; 200];
        encode_literal(&mut block, &long_name, &[b'w'; 1000]);
        let mut d = Decoder::new();
        let got = d.decode_all(&block).unwrap();
        let mut expected = fields(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/a?b=c"),
            (":authority", "localhost:8080"),
            ("user-agent", "loadlab/0.1"),
            ("www-authenticate", &"v".repeat(300)),
            ("te", "trailers"),
            ("grpc-timeout", "100m"),
            ("x-empty", ""),
        ]);
        expected.push((long_name, vec![b'w'; 1000]));
        assert_eq!(got, expected);
        // Nothing indexed: the server's table stays empty.
        assert_table(&d, &[], 0);
        // Every static index through both encoders.
        for index in 1..=61u8 {
            let (name, value) = STATIC[usize::from(index) - 1];
            let mut block = Vec::new();
            encode_indexed(&mut block, index);
            encode_indexed_name(&mut block, index, b"x");
            let got = d.decode_all(&block).unwrap();
            assert_eq!(got[0], (name.to_vec(), value.to_vec()));
            assert_eq!(got[1], (name.to_vec(), b"x".to_vec()));
        }
    }

    #[test]
    fn static_lookups() {
        assert_eq!(static_name_index(b":authority"), Some(1));
        assert_eq!(static_name_index(b":method"), Some(2));
        assert_eq!(static_name_index(b":status"), Some(8));
        assert_eq!(static_name_index(b"content-type"), Some(31));
        assert_eq!(static_name_index(b"www-authenticate"), Some(61));
        assert_eq!(static_name_index(b"grpc-status"), None);
        assert_eq!(static_name_index(b"Content-Type"), None);
        assert_eq!(static_index(b":method", b"GET"), Some(2));
        assert_eq!(static_index(b":method", b"POST"), Some(3));
        assert_eq!(static_index(b":status", b"404"), Some(13));
        assert_eq!(static_index(b"accept-encoding", b"gzip, deflate"), Some(16));
        assert_eq!(static_index(b":method", b"PUT"), None);
        assert_eq!(static_index(b"content-type", b"application/grpc"), None);
    }

    #[test]
    fn errors_display() {
        assert_eq!(
            HpackError::BadIndex.to_string(),
            "an index outside both tables"
        );
        for e in [
            HpackError::Truncated,
            HpackError::IntegerOverflow,
            HpackError::BadIndex,
            HpackError::BadHuffman,
            HpackError::BadSizeUpdate,
            HpackError::StringTooLong,
        ] {
            let text = e.to_string();
            assert!(!text.is_empty() && !text.ends_with('.'), "{text}");
        }
    }
}

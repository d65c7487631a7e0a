//! The NAME rule of templates and data columns, and the built-ins' names, which no
//! column may take.

/// The names a data column cannot take, each with its expression's syntax.
pub const BUILTIN_NAMES: [(&str, &str); 8] = [
    ("seq", "${seq}"),
    ("uuid", "${uuid}"),
    ("now", "${now}"),
    ("now_ms", "${now_ms}"),
    ("rand", "${rand:LO-HI}"),
    ("pick", "${pick:A,B,…}"),
    ("randstr", "${randstr:N}"),
    ("hex", "${hex:N}"),
];

/// Whether `name` is a valid NAME: `[A-Za-z_][A-Za-z0-9_.-]*`.
pub fn is_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty() && is_name_start(b[0]) && b[1..].iter().all(|&c| is_name_byte(c))
}

pub(crate) fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

pub(crate) fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

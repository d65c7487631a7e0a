//! The times logs write, to nanoseconds since the Unix epoch: the common log format's
//! `10/Oct/2000:13:55:36 -0700`, ISO 8601 (`2000-10-10T13:55:36-07:00`, fractions and `Z`
//! allowed: nginx's `$time_iso8601`, HAR's `startedDateTime`), and numbers of seconds,
//! milliseconds, microseconds or nanoseconds (nginx's `$msec`, JSON logs), told by their
//! magnitude. Hand-written: a replay parses one per request, far ahead of the load.

/// Days from 1970-01-01 to `y-m-d` (proleptic Gregorian; H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The days of month `m` of year `y`.
fn month_days(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// A fixed number of ASCII digits.
fn digits(s: &[u8]) -> Option<u32> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.iter().try_fold(0u32, |n, &c| {
        n.checked_mul(10)?.checked_add(u32::from(c - b'0'))
    })
}

/// Seconds since the epoch of a civil time and an offset east of UTC in seconds; `None`
/// when a field is out of range or the time is before the epoch.
fn epoch_s(y: i64, mo: u32, d: u32, h: u32, mi: u32, s: u32, offset_s: i64) -> Option<u64> {
    if !(1..=12).contains(&mo) || d == 0 || d > month_days(y, mo) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let t = days_from_civil(y, mo, d) * 86_400 + i64::from(h * 3600 + mi * 60 + s) - offset_s;
    u64::try_from(t).ok()
}

/// `+hhmm`, `-hh:mm`, or `Z`: seconds east of UTC.
fn offset(s: &[u8]) -> Option<i64> {
    match s {
        b"Z" | b"z" => Some(0),
        [sign @ (b'+' | b'-'), rest @ ..] => {
            let (h, m) = match rest {
                [a, b, b':', c, d] | [a, b, c, d] => (digits(&[*a, *b])?, digits(&[*c, *d])?),
                [a, b] => (digits(&[*a, *b])?, 0),
                _ => return None,
            };
            if h > 23 || m > 59 {
                return None;
            }
            let v = i64::from(h * 3600 + m * 60);
            Some(if *sign == b'-' { -v } else { v })
        }
        _ => None,
    }
}

/// The common log format's time, `10/Oct/2000:13:55:36 -0700` (with or without its
/// brackets), in ns since the epoch.
pub fn clf(s: &str) -> Option<u64> {
    let b = s.trim_matches(|c| c == '[' || c == ']').as_bytes();
    // dd/Mon/yyyy:hh:mm:ss +zzzz
    if b.len() != 26 || b[2] != b'/' || b[6] != b'/' || b[11] != b':' || b[20] != b' ' {
        return None;
    }
    const MONTHS: [&[u8]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let mo = MONTHS.iter().position(|m| *m == &b[3..6])? as u32 + 1;
    let (h, mi, sec) = (
        digits(&b[12..14])?,
        digits(&b[15..17])?,
        digits(&b[18..20])?,
    );
    if b[14] != b':' || b[17] != b':' {
        return None;
    }
    let s = epoch_s(
        i64::from(digits(&b[7..11])?),
        mo,
        digits(&b[0..2])?,
        h,
        mi,
        sec,
        offset(&b[21..])?,
    )?;
    s.checked_mul(1_000_000_000)
}

/// ISO 8601 / RFC 3339, `2000-10-10T13:55:36.123-07:00` (a space for the `T`, any number
/// of fraction digits, `Z` or an offset; none is UTC), in ns since the epoch.
pub fn iso8601(s: &str) -> Option<u64> {
    let b = s.trim().as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let mut i = 19;
    let mut frac_ns: u64 = 0;
    if b.get(i) == Some(&b'.') || b.get(i) == Some(&b',') {
        i += 1;
        let start = i;
        let mut scale = 100_000_000u64;
        while let Some(c) = b.get(i).filter(|c| c.is_ascii_digit()) {
            frac_ns += u64::from(c - b'0') * scale;
            scale /= 10;
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    let off = if i == b.len() { 0 } else { offset(&b[i..])? };
    let s = epoch_s(
        i64::from(digits(&b[0..4])?),
        digits(&b[5..7])?,
        digits(&b[8..10])?,
        digits(&b[11..13])?,
        digits(&b[14..16])?,
        digits(&b[17..19])?,
        off,
    )?;
    s.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// A time as a person or a log writes it: ISO 8601 (`2023-11-14T08:00:00Z`), the common log
/// format's (`14/Nov/2023:08:00:00 +0000`) or a number since the epoch; ns since the epoch.
pub fn any(s: &str) -> Option<u64> {
    iso8601(s)
        .or_else(|| clf(s))
        .or_else(|| epoch_text(s).map(|(t, _)| t))
}

/// How finely a time written as text resolves: an ISO 8601 time with a fraction to its last
/// digit (`.123`: 1 ms), one without (or a common-log-format time) to the second.
pub fn text_resolution_ns(s: &str) -> u64 {
    let digits = s
        .split_once('.')
        .map_or(0, |(_, f)| f.bytes().take_while(u8::is_ascii_digit).count());
    1_000_000_000 / 10u64.pow(digits.min(9) as u32)
}

/// The ns of one unit of a number since the epoch whose whole part is `whole`: seconds
/// below 10^11 (until the year 5138), else milliseconds below 10^14, microseconds below
/// 10^17, nanoseconds above.
fn unit_ns(whole: u64) -> u64 {
    match whole {
        0..100_000_000_000 => 1_000_000_000,
        100_000_000_000..100_000_000_000_000 => 1_000_000,
        100_000_000_000_000..100_000_000_000_000_000 => 1_000,
        _ => 1,
    }
}

/// A number since the epoch as written (`1700000000.123`: nginx's `$msec`, seconds with a
/// fraction; `1700000000123`: milliseconds), its unit told by its magnitude
/// (see `unit_ns`), read exactly (no floating point, which keeps 16 digits of the 19 a
/// time in ns has): ns since the epoch, and the ns its last digit resolves.
pub fn epoch_text(s: &str) -> Option<(u64, u64)> {
    let s = s.trim();
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty() || !whole.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let w: u64 = whole.parse().ok()?;
    if w == 0 {
        return None;
    }
    let unit = unit_ns(w);
    let mut ns = w.checked_mul(unit)?;
    let mut scale = unit;
    for c in frac.bytes() {
        scale /= 10;
        if scale == 0 {
            break;
        }
        ns = ns.checked_add(u64::from(c - b'0') * scale)?;
    }
    Some((ns, scale.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn the_common_log_formats_time_is_read_with_its_offset() {
        // Apache's documentation example: 10/Oct/2000:13:55:36 -0700 is 20:55:36 UTC.
        assert_eq!(clf("[10/Oct/2000:13:55:36 -0700]"), Some(971_211_336 * S));
        assert_eq!(clf("10/Oct/2000:20:55:36 +0000"), Some(971_211_336 * S));
        assert_eq!(clf("29/Feb/2024:00:00:00 +0000"), Some(1_709_164_800 * S));
        for bad in [
            "29/Feb/2023:00:00:00 +0000",
            "10/Oct/2000:13:55:36",
            "10/Okt/2000:13:55:36 -0700",
            "10/Oct/2000:24:00:00 -0700",
            "",
        ] {
            assert_eq!(clf(bad), None, "{bad}");
        }
    }

    #[test]
    fn iso8601_takes_fractions_offsets_and_z() {
        assert_eq!(iso8601("2000-10-10T13:55:36-07:00"), Some(971_211_336 * S));
        assert_eq!(iso8601("2000-10-10T20:55:36Z"), Some(971_211_336 * S));
        assert_eq!(iso8601("2000-10-10 20:55:36"), Some(971_211_336 * S));
        assert_eq!(
            iso8601("2000-10-10T20:55:36.123456789Z"),
            Some(971_211_336 * S + 123_456_789)
        );
        assert_eq!(
            iso8601("2000-10-10T22:55:36.5+0200"),
            Some(971_211_336 * S + 500_000_000)
        );
        for bad in [
            "2000-10-10",
            "2000-13-10T00:00:00Z",
            "2000-10-10T20:55:36.Z",
            "x",
        ] {
            assert_eq!(iso8601(bad), None, "{bad}");
        }
    }

    #[test]
    fn epoch_numbers_are_told_apart_by_magnitude_and_read_exactly() {
        let t = |s: &str| epoch_text(s);
        assert_eq!(
            t("1700000000.123"),
            Some((1_700_000_000_123_000_000, 1_000_000))
        );
        assert_eq!(
            t("1700000000"),
            Some((1_700_000_000_000_000_000, 1_000_000_000))
        );
        assert_eq!(
            t("1700000000123"),
            Some((1_700_000_000_123_000_000, 1_000_000))
        );
        assert_eq!(
            t("1700000000123456"),
            Some((1_700_000_000_123_456_000, 1_000))
        );
        assert_eq!(
            t("1700000000123456789"),
            Some((1_700_000_000_123_456_789, 1))
        );
        assert_eq!(
            t("1700000000.5"),
            Some((1_700_000_000_500_000_000, 100_000_000))
        );
        for bad in ["", "-1", "0", "1e9", "17.x", ".5"] {
            assert_eq!(t(bad), None, "{bad}");
        }
    }
}

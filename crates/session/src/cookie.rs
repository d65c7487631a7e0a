//! [`CookieJar`]: one session's cookies, kept and sent as RFC 6265 says for the common
//! cases, so a session behaves toward a server as a browser's would.
//!
//! # What is implemented
//! - Parsing `Set-Cookie` (§5.2): name and value (trimmed; no `=`, or an empty name, and
//!   the header is ignored), then the attributes, case-insensitive, the last of each name
//!   winning: `Expires` (a date parsed by the §5.1.1 algorithm, [`parse_cookie_date`]),
//!   `Max-Age` (§5.2.2), `Domain` (§5.2.3: a leading `.` dropped, lowercased; empty:
//!   ignored), `Path` (§5.2.4: empty or not starting with `/`: the default path), `Secure`,
//!   `HttpOnly`; other attributes (`SameSite`, …) are ignored.
//! - Storing (§5.3): `Max-Age` wins over `Expires`; a date in the past (or `Max-Age` ≤ 0)
//!   deletes the cookie of the same name, domain and path; without either, a session
//!   cookie (kept for the jar's life). A `Domain` the request's host does not
//!   domain-match (§5.1.3) is rejected; without `Domain`, the cookie is host-only (sent to
//!   that exact host). The default path is §5.1.4's. A cookie with the name, domain and
//!   path of one in the jar replaces it and keeps its creation time.
//! - Sending (§5.4): the cookies whose domain matches the host (exactly when host-only),
//!   whose path path-matches the request's (§5.1.4), not expired (expired ones are dropped)
//!   and, if `Secure`, only over https; longer paths first, then earlier creation;
//!   `name=value` joined by `; `.
//!
//! # Choices and limits
//! - Times are Unix seconds, given by the caller (`now`), so tests and simulated clocks
//!   need no real time; a cookie expires at its expiry second (`expiry <= now`).
//! - No public suffix list is shipped: a `Domain` with no dot inside (`com`, `localhost`)
//!   is treated as a public suffix: accepted as host-only if it is the request's host
//!   (§5.3 step 5), rejected otherwise. IP addresses match only exactly (§5.1.3).
//! - A name or value with a control character (other than tab) is rejected, as RFC
//!   6265bis §5.6 says: it would go back into a request header.
//! - HttpOnly is kept but changes nothing: a load generator has no script API.
//! - Caps (RFC 6265 §6.1 asks for at least these): a `Set-Cookie` value longer than
//!   [`MAX_COOKIE_BYTES`] is rejected; a jar keeps at most [`MAX_COOKIES`], evicting
//!   expired cookies first, then the least recently used (§5.3's eviction order less the
//!   per-domain rule: one session talks to few domains).
//! - Hosts are given without a port; an IPv6 address may be in brackets; a trailing dot
//!   is ignored. A request path's query (`?…`) and fragment are ignored.
//! - The jar keeps its cookies sorted in sending order, so [`CookieJar::write_header`]
//!   allocates nothing.
//!
//! The `cookie` crate was not used for parsing: it parses `Expires` with fixed formats
//! rather than §5.1.1's algorithm, takes `&str` only, and allocates for each cookie; §5.2
//! is a page of code.

use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

/// The most cookies one jar (one session) keeps.
pub const MAX_COOKIES: usize = 50;
/// The longest `Set-Cookie` value stored (name, value and attributes), in bytes.
pub const MAX_COOKIE_BYTES: usize = 4096;

/// Unix seconds of `t` (0 before 1970).
pub fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// What [`CookieJar::store`] did with a cookie it accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    /// A new cookie.
    Added,
    /// A new cookie; the jar was full, so the least recently used one was evicted.
    Evicted,
    /// It replaced the cookie of the same name, domain and path.
    Replaced,
    /// It was already expired and deleted the cookie of the same name, domain and path.
    Deleted,
    /// It was already expired and there was nothing to delete.
    AlreadyExpired,
}

/// Why [`CookieJar::store`] ignored a `Set-Cookie`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    /// No `=` before the first `;` (§5.2).
    #[error("Set-Cookie has no `=` in its name=value pair")]
    NoEquals,
    /// An empty name (§5.2).
    #[error("Set-Cookie has an empty name")]
    EmptyName,
    /// A control character in the name or value (RFC 6265bis §5.6).
    #[error("Set-Cookie has a control character in its name or value")]
    ControlCharacter,
    /// Longer than [`MAX_COOKIE_BYTES`].
    #[error("Set-Cookie is longer than {MAX_COOKIE_BYTES} bytes")]
    TooLarge,
    /// A `Domain` the request's host does not domain-match (§5.3 step 6).
    #[error("Set-Cookie's Domain does not match the request's host")]
    DomainMismatch,
    /// A `Domain` that is a public suffix (here: has no dot) and not the host (§5.3 step 5).
    #[error("Set-Cookie's Domain is a public suffix")]
    PublicSuffix,
}

/// One stored cookie.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cookie {
    name: Box<[u8]>,
    value: Box<[u8]>,
    /// Lowercase, no leading dot.
    domain: Box<str>,
    path: Box<str>,
    host_only: bool,
    secure: bool,
    http_only: bool,
    /// Unix seconds; `None`: a session cookie.
    expires: Option<u64>,
    /// The jar's clock when first created (kept by replacements).
    created: u64,
    /// The jar's clock when last stored or sent.
    last_access: u64,
}

impl Cookie {
    /// The name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }
    /// The value.
    pub fn value(&self) -> &[u8] {
        &self.value
    }
    /// The domain (lowercase, without a leading dot): the host it came from if host-only.
    pub fn domain(&self) -> &str {
        &self.domain
    }
    /// The path.
    pub fn path(&self) -> &str {
        &self.path
    }
    /// Sent to its domain exactly, not to its subdomains (no `Domain` attribute).
    pub fn host_only(&self) -> bool {
        self.host_only
    }
    /// Sent over https only.
    pub fn secure(&self) -> bool {
        self.secure
    }
    /// Marked HttpOnly (kept; changes nothing here).
    pub fn http_only(&self) -> bool {
        self.http_only
    }
    /// When it expires, Unix seconds; `None`: a session cookie.
    pub fn expires(&self) -> Option<u64> {
        self.expires
    }

    fn expired(&self, now: u64) -> bool {
        self.expires.is_some_and(|e| e <= now)
    }

    /// Whether it goes with a request to `host` (canonical) and `path` (no query).
    fn matches(&self, host: &str, path: &str, secure: bool) -> bool {
        (!self.secure || secure)
            && if self.host_only {
                host.eq_ignore_ascii_case(&self.domain)
            } else {
                domain_match(host, &self.domain)
            }
            && path_match(path, &self.path)
    }

    /// Sending order (§5.4 step 2): longer paths first, then earlier creation.
    fn before(&self, other: &Cookie) -> bool {
        (self.path.len(), other.created) > (other.path.len(), self.created)
    }
}

/// One session's cookies.
#[derive(Clone, Debug, Default)]
pub struct CookieJar {
    /// In sending order: longer paths first, then earlier creation.
    cookies: Vec<Cookie>,
    /// A counter that orders creations and accesses.
    clock: u64,
}

impl CookieJar {
    /// An empty jar.
    pub fn new() -> CookieJar {
        CookieJar::default()
    }

    /// How many cookies it holds (expired ones included until a store or a send drops
    /// them).
    pub fn len(&self) -> usize {
        self.cookies.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.cookies.is_empty()
    }

    /// Empties it (a new session), keeping its memory.
    pub fn clear(&mut self) {
        self.cookies.clear();
    }

    /// The cookies, in sending order.
    pub fn iter(&self) -> impl Iterator<Item = &Cookie> + '_ {
        self.cookies.iter()
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Stores the cookie of one `Set-Cookie` header value received in answer to a request
    /// to `host` (no port) and `path` (the request target's path; a query is ignored), at
    /// `now` (Unix seconds).
    pub fn store(
        &mut self,
        set_cookie: &[u8],
        host: &str,
        path: &str,
        now: u64,
    ) -> Result<Stored, Rejected> {
        if set_cookie.len() > MAX_COOKIE_BYTES {
            return Err(Rejected::TooLarge);
        }
        let parsed = parse_set_cookie(set_cookie)?;
        let host = canonical_host(host);
        // §5.3 step 3: Max-Age wins over Expires.
        let expires = match (parsed.max_age, parsed.expires) {
            (Some(delta), _) if delta <= 0 => Some(0),
            (Some(delta), _) => Some(now.saturating_add(delta.unsigned_abs())),
            (None, Some(t)) => Some(u64::try_from(t).unwrap_or(0)),
            (None, None) => None,
        };
        // §5.3 steps 4 to 6.
        let (domain, host_only) = match parsed.domain {
            Some(d) if !d.contains('.') && !d.eq_ignore_ascii_case(host) => {
                return Err(Rejected::PublicSuffix)
            }
            Some(d) if !d.contains('.') => (host.to_ascii_lowercase(), true),
            Some(d) if !domain_match(host, &d) => return Err(Rejected::DomainMismatch),
            Some(d) => (d, false),
            None => (host.to_ascii_lowercase(), true),
        };
        // §5.3 step 7.
        let path = match parsed.path {
            Some(p) if p.starts_with('/') => p,
            _ => default_path(path).to_string(),
        };
        let now_tick = self.tick();
        let mut cookie = Cookie {
            name: parsed.name.into(),
            value: parsed.value.into(),
            domain: domain.into(),
            path: path.into(),
            host_only,
            secure: parsed.secure,
            http_only: parsed.http_only,
            expires,
            created: now_tick,
            last_access: now_tick,
        };
        // §5.3 step 11: the same name, domain and path is replaced, keeping its creation.
        let old = self.cookies.iter().position(|c| {
            c.name == cookie.name && c.domain == cookie.domain && c.path == cookie.path
        });
        let outcome = if let Some(i) = old {
            cookie.created = self.cookies.remove(i).created;
            if cookie.expired(now) {
                return Ok(Stored::Deleted);
            }
            Stored::Replaced
        } else if cookie.expired(now) {
            return Ok(Stored::AlreadyExpired);
        } else if self.cookies.len() >= MAX_COOKIES {
            self.cookies.retain(|c| !c.expired(now));
            if self.cookies.len() >= MAX_COOKIES {
                let lru = (0..self.cookies.len())
                    .min_by_key(|&i| (self.cookies[i].last_access, self.cookies[i].created))
                    .unwrap_or(0);
                self.cookies.remove(lru);
                Stored::Evicted
            } else {
                Stored::Added
            }
        } else {
            Stored::Added
        };
        let at = self
            .cookies
            .iter()
            .position(|c| cookie.before(c))
            .unwrap_or(self.cookies.len());
        self.cookies.insert(at, cookie);
        Ok(outcome)
    }

    /// Appends the `Cookie` header's value for a request to `host` (no port) and `path`
    /// (a query is ignored), over https if `secure`, at `now` (Unix seconds): `a=1; b=2`,
    /// in §5.4's order. Drops expired cookies; marks those sent as used (for eviction).
    /// Returns how many cookies it wrote (0: send no `Cookie` header). Allocates nothing
    /// when `out` has room.
    pub fn write_header(
        &mut self,
        host: &str,
        path: &str,
        secure: bool,
        now: u64,
        out: &mut Vec<u8>,
    ) -> usize {
        self.cookies.retain(|c| !c.expired(now));
        let host = canonical_host(host);
        let path = request_path(path);
        let tick = self.tick();
        let mut n = 0;
        for c in &mut self.cookies {
            if c.matches(host, path, secure) {
                if n > 0 {
                    out.extend_from_slice(b"; ");
                }
                out.extend_from_slice(&c.name);
                out.push(b'=');
                out.extend_from_slice(&c.value);
                c.last_access = tick;
                n += 1;
            }
        }
        n
    }

    /// The `Cookie` header's value for a request, as [`CookieJar::write_header`] writes it
    /// (bytes that are not UTF-8 replaced), or `None` when no cookie goes with it.
    pub fn header(&mut self, host: &str, path: &str, secure: bool, now: u64) -> Option<String> {
        let mut out = Vec::new();
        if self.write_header(host, path, secure, now, &mut out) == 0 {
            return None;
        }
        Some(match String::from_utf8(out) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }
}

/// A `Set-Cookie` value parsed (§5.2).
#[derive(Debug, PartialEq, Eq)]
struct SetCookie<'a> {
    name: &'a [u8],
    value: &'a [u8],
    /// Unix seconds (may be before 1970).
    expires: Option<i64>,
    max_age: Option<i64>,
    /// Lowercase, leading dot removed, not empty.
    domain: Option<String>,
    /// As written (§5.3 replaces one that does not start with `/` by the default path).
    path: Option<String>,
    secure: bool,
    http_only: bool,
}

fn is_wsp(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn trim_wsp(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if !is_wsp(*first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !is_wsp(*last) {
            break;
        }
        s = rest;
    }
    s
}

fn parse_set_cookie(s: &[u8]) -> Result<SetCookie<'_>, Rejected> {
    let (pair, attrs) = match s.iter().position(|&b| b == b';') {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, &[][..]),
    };
    let eq = pair
        .iter()
        .position(|&b| b == b'=')
        .ok_or(Rejected::NoEquals)?;
    let name = trim_wsp(&pair[..eq]);
    let value = trim_wsp(&pair[eq + 1..]);
    if name.is_empty() {
        return Err(Rejected::EmptyName);
    }
    if name
        .iter()
        .chain(value)
        .any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f)
    {
        return Err(Rejected::ControlCharacter);
    }
    let mut c = SetCookie {
        name,
        value,
        expires: None,
        max_age: None,
        domain: None,
        path: None,
        secure: false,
        http_only: false,
    };
    for av in attrs.split(|&b| b == b';') {
        let (key, val) = match av.iter().position(|&b| b == b'=') {
            Some(i) => (trim_wsp(&av[..i]), trim_wsp(&av[i + 1..])),
            None => (trim_wsp(av), &[][..]),
        };
        let is = |k: &str| key.eq_ignore_ascii_case(k.as_bytes());
        if is("expires") {
            // §5.2.1: a date that does not parse is ignored.
            if let Some(t) = parse_cookie_date(val) {
                c.expires = Some(t);
            }
        } else if is("max-age") {
            if let Some(delta) = parse_max_age(val) {
                c.max_age = Some(delta);
            }
        } else if is("domain") {
            // §5.2.3: empty: ignored; a leading dot dropped; lowercased.
            let d = val.strip_prefix(b".").unwrap_or(val);
            if !val.is_empty() {
                c.domain = Some(String::from_utf8_lossy(d).to_ascii_lowercase());
            }
        } else if is("path") {
            c.path = Some(String::from_utf8_lossy(val).into_owned());
        } else if is("secure") {
            c.secure = true;
        } else if is("httponly") {
            c.http_only = true;
        }
    }
    Ok(c)
}

/// §5.2.2: an optional `-` then digits; anything else is ignored (`None`). Saturates.
fn parse_max_age(v: &[u8]) -> Option<i64> {
    let (negative, digits) = match v.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, v),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if negative {
        return Some(0);
    }
    Some(digits.iter().fold(0i64, |n, &d| {
        n.saturating_mul(10).saturating_add(i64::from(d - b'0'))
    }))
}

/// Parses a cookie date by RFC 6265 §5.1.1's algorithm, which reads every date format
/// servers send (`Wed, 21 Oct 2015 07:28:00 GMT`, `Sunday, 06-Nov-94 08:49:37 GMT`,
/// `Sun Nov  6 08:49:37 1994`, …): the text is cut into tokens at delimiters, and the
/// first token that reads as a time, a day of month, a month and a year fills each (in that
/// order of trial); two-digit years 70–99 are 19xx, 0–69 are 20xx. `None` if a part is
/// missing, out of range (day 1–31, year ≥ 1601, 23:59:59) or the date does not exist
/// (31 April). Returns Unix seconds (UTC; negative before 1970).
pub fn parse_cookie_date(text: &[u8]) -> Option<i64> {
    let mut time = None;
    let mut day = None;
    let mut month = None;
    let mut year = None;
    for token in text.split(|&b| is_date_delimiter(b)) {
        if token.is_empty() {
            continue;
        }
        if time.is_none() {
            if let Some(t) = parse_hms(token) {
                time = Some(t);
                continue;
            }
        }
        if day.is_none() {
            if let Some(d) = leading_number(token, 1, 2) {
                day = Some(d);
                continue;
            }
        }
        if month.is_none() {
            if let Some(m) = parse_month(token) {
                month = Some(m);
                continue;
            }
        }
        if year.is_none() {
            if let Some(y) = leading_number(token, 2, 4) {
                year = Some(y);
            }
        }
    }
    let ((hour, minute, second), day, month, mut year) = (time?, day?, month?, year?);
    if (70..=99).contains(&year) {
        year += 1900;
    } else if year <= 69 {
        year += 2000;
    }
    if !(1..=31).contains(&day) || year < 1601 || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    if day > days_in_month(year, month) {
        return None;
    }
    let days = days_from_civil(i64::from(year), month, day);
    Some(days * 86_400 + i64::from(hour * 3600 + minute * 60 + second))
}

/// §5.1.1's delimiters: %x09 / %x20-2F / %x3B-40 / %x5B-60 / %x7B-7E.
fn is_date_delimiter(b: u8) -> bool {
    matches!(b, 0x09 | 0x20..=0x2f | 0x3b..=0x40 | 0x5b..=0x60 | 0x7b..=0x7e)
}

/// The token's leading digits as a number if there are `min` to `max` of them (what
/// follows, if anything, is then a non-digit: `1*2DIGIT ( non-digit *OCTET )`).
fn leading_number(token: &[u8], min: usize, max: usize) -> Option<u32> {
    let n = token.iter().take_while(|b| b.is_ascii_digit()).count();
    if n < min || n > max {
        return None;
    }
    Some(
        token[..n]
            .iter()
            .fold(0, |acc, &d| acc * 10 + u32::from(d - b'0')),
    )
}

/// `hms-time ( non-digit *OCTET )`, each field one or two digits.
fn parse_hms(token: &[u8]) -> Option<(u32, u32, u32)> {
    let mut rest = token;
    let mut fields = [0u32; 3];
    for (i, field) in fields.iter_mut().enumerate() {
        let n = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if !(1..=2).contains(&n) {
            return None;
        }
        *field = leading_number(rest, 1, 2)?;
        rest = &rest[n..];
        if i < 2 {
            rest = rest.strip_prefix(b":")?;
        }
    }
    Some((fields[0], fields[1], fields[2]))
}

fn parse_month(token: &[u8]) -> Option<u32> {
    const MONTHS: [&[u8; 3]; 12] = [
        b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov",
        b"dec",
    ];
    let prefix = token.get(..3)?;
    (1..=12u32)
        .zip(MONTHS)
        .find(|(_, m)| prefix.eq_ignore_ascii_case(*m))
        .map(|(i, _)| i)
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the given date (proleptic Gregorian; Howard Hinnant's
/// algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A host as compared: brackets of an IPv6 address and a trailing dot removed.
fn canonical_host(host: &str) -> &str {
    let h = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    h.strip_suffix('.').unwrap_or(h)
}

/// §5.1.3: `host` domain-matches `domain` (lowercase) if they are equal, or if `domain` is
/// a suffix of `host` after a `.` and `host` is a name, not an IP address.
fn domain_match(host: &str, domain: &str) -> bool {
    if host.eq_ignore_ascii_case(domain) {
        return true;
    }
    let (h, d) = (host.as_bytes(), domain.as_bytes());
    h.len() > d.len()
        && h[h.len() - d.len()..].eq_ignore_ascii_case(d)
        && h[h.len() - d.len() - 1] == b'.'
        && host.parse::<IpAddr>().is_err()
}

/// A request target's path: up to `?` or `#`; `/` if empty.
fn request_path(path: &str) -> &str {
    let p = path.find(['?', '#']).map_or(path, |i| &path[..i]);
    if p.is_empty() {
        "/"
    } else {
        p
    }
}

/// §5.1.4's default-path: the request path up to, not including, its last `/`; `/` if
/// that would be empty or the path does not start with `/`.
fn default_path(path: &str) -> &str {
    let p = request_path(path);
    if !p.starts_with('/') {
        return "/";
    }
    match p.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &p[..i],
    }
}

/// §5.1.4's path-match: the same path, or `cookie_path` a prefix of `request` that ends
/// with `/` or is followed in `request` by `/`.
fn path_match(request: &str, cookie_path: &str) -> bool {
    request == cookie_path
        || (request.starts_with(cookie_path)
            && (cookie_path.ends_with('/') || request.as_bytes()[cookie_path.len()] == b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000;

    fn jar_with(set: &[&str], host: &str, path: &str) -> CookieJar {
        let mut jar = CookieJar::new();
        for s in set {
            jar.store(s.as_bytes(), host, path, NOW).unwrap();
        }
        jar
    }

    fn send(jar: &mut CookieJar, host: &str, path: &str) -> Option<String> {
        jar.header(host, path, false, NOW)
    }

    // §5.2: the name-value pair is up to the first `;`; name and value are trimmed.
    #[test]
    fn name_and_value_are_parsed_and_trimmed() {
        let c = parse_set_cookie(b" sid = a b=c ; Path=/").unwrap();
        assert_eq!(c.name, b"sid");
        assert_eq!(c.value, b"a b=c");
        let c = parse_set_cookie(b"empty=").unwrap();
        assert_eq!(c.value, b"");
        let c = parse_set_cookie(br#"q="quoted""#).unwrap();
        assert_eq!(c.value, br#""quoted""#);
    }

    // §5.2: no `=` in the pair, or an empty name: the whole header is ignored.
    #[test]
    fn no_equals_or_empty_name_is_rejected() {
        let mut jar = CookieJar::new();
        assert_eq!(
            jar.store(b"justaname", "h", "/", NOW),
            Err(Rejected::NoEquals)
        );
        assert_eq!(jar.store(b"a; b=c", "h", "/", NOW), Err(Rejected::NoEquals));
        assert_eq!(jar.store(b" =v", "h", "/", NOW), Err(Rejected::EmptyName));
        assert!(jar.is_empty());
    }

    // RFC 6265bis §5.6: control characters in the name or value are rejected.
    #[test]
    fn control_characters_are_rejected() {
        let mut jar = CookieJar::new();
        assert_eq!(
            jar.store(b"a=b\x00c", "h", "/", NOW),
            Err(Rejected::ControlCharacter)
        );
        assert_eq!(
            jar.store(b"a\x7f=b", "h", "/", NOW),
            Err(Rejected::ControlCharacter)
        );
        assert_eq!(jar.store(b"a=b\tc", "h", "/", NOW), Ok(Stored::Added));
    }

    // §5.2: attribute names are case-insensitive, unknown ones ignored, the last wins.
    #[test]
    fn attributes_are_case_insensitive_and_the_last_wins() {
        let c = parse_set_cookie(
            b"a=b; SECURE; httponly; SameSite=Lax; path=/x; PATH=/y; Domain=a.com; domain=B.com",
        )
        .unwrap();
        assert!(c.secure && c.http_only);
        assert_eq!(c.path.as_deref(), Some("/y"));
        assert_eq!(c.domain.as_deref(), Some("b.com"));
    }

    // §5.3 step 7 with §5.1.4: without Path, the default path of the request's path.
    #[test]
    fn default_path_follows_5_1_4() {
        assert_eq!(default_path(""), "/");
        assert_eq!(default_path("x/y"), "/");
        assert_eq!(default_path("/"), "/");
        assert_eq!(default_path("/login"), "/");
        assert_eq!(default_path("/app/login"), "/app");
        assert_eq!(default_path("/app/sub/"), "/app/sub");
        assert_eq!(default_path("/app/login?next=/a/b"), "/app");
        let jar = jar_with(&["a=1"], "h.com", "/app/login");
        assert_eq!(jar.iter().next().unwrap().path(), "/app");
    }

    // §5.2.4: a Path that is empty or does not start with `/` means the default path.
    #[test]
    fn bad_path_attribute_means_default_path() {
        let jar = jar_with(&["a=1; Path=", "b=2; Path=rel"], "h.com", "/app/x");
        assert!(jar.iter().all(|c| c.path() == "/app"));
        let jar = jar_with(&["a=1; Path=/other"], "h.com", "/app/x");
        assert_eq!(jar.iter().next().unwrap().path(), "/other");
    }

    // §5.1.4: path-match.
    #[test]
    fn path_match_follows_5_1_4() {
        assert!(path_match("/", "/"));
        assert!(path_match("/app", "/app"));
        assert!(path_match("/app/x", "/app"));
        assert!(path_match("/app/x", "/app/"));
        assert!(path_match("/anything", "/"));
        assert!(!path_match("/application", "/app"));
        assert!(!path_match("/ap", "/app"));
        assert!(!path_match("/", "/app"));
        let mut jar = jar_with(&["a=1; Path=/app"], "h.com", "/");
        assert_eq!(send(&mut jar, "h.com", "/app/page?x=1"), Some("a=1".into()));
        assert_eq!(send(&mut jar, "h.com", "/app"), Some("a=1".into()));
        assert_eq!(send(&mut jar, "h.com", "/apple"), None);
        assert_eq!(send(&mut jar, "h.com", "/"), None);
    }

    // §5.1.3: domain-match; IP addresses only match exactly.
    #[test]
    fn domain_match_follows_5_1_3() {
        assert!(domain_match("example.com", "example.com"));
        assert!(domain_match("WWW.Example.com", "example.com"));
        assert!(domain_match("a.b.example.com", "example.com"));
        assert!(!domain_match("badexample.com", "example.com"));
        assert!(!domain_match("example.com", "www.example.com"));
        assert!(domain_match("10.0.0.1", "10.0.0.1"));
        assert!(!domain_match("10.0.0.1", "0.0.1"));
        assert!(domain_match("::1", "::1"));
    }

    // §5.3 steps 4-6 and §5.2.3: Domain's leading dot ignored; the cookie goes to
    // subdomains; a Domain the host does not domain-match is rejected.
    #[test]
    fn domain_attribute_widens_or_is_rejected() {
        let mut jar = CookieJar::new();
        assert_eq!(
            jar.store(b"a=1; Domain=.Example.com", "www.example.com", "/", NOW),
            Ok(Stored::Added)
        );
        let c = jar.iter().next().unwrap();
        assert_eq!(c.domain(), "example.com");
        assert!(!c.host_only());
        assert_eq!(send(&mut jar, "example.com", "/"), Some("a=1".into()));
        assert_eq!(send(&mut jar, "api.example.com", "/"), Some("a=1".into()));
        assert_eq!(send(&mut jar, "other.com", "/"), None);
        assert_eq!(
            jar.store(b"b=2; Domain=other.com", "www.example.com", "/", NOW),
            Err(Rejected::DomainMismatch)
        );
        assert_eq!(
            jar.store(b"b=2; Domain=api.example.com", "www.example.com", "/", NOW),
            Err(Rejected::DomainMismatch)
        );
        // §5.2.3: an empty Domain is ignored: host-only.
        jar.store(b"c=3; Domain=", "www.example.com", "/", NOW)
            .unwrap();
        assert!(jar.iter().any(|c| c.name() == b"c" && c.host_only()));
    }

    // §5.3 step 5: a public suffix (here: no dot) is host-only if it is the host,
    // rejected otherwise.
    #[test]
    fn public_suffix_domain() {
        let mut jar = CookieJar::new();
        assert_eq!(
            jar.store(b"a=1; Domain=com", "example.com", "/", NOW),
            Err(Rejected::PublicSuffix)
        );
        assert_eq!(
            jar.store(b"a=1; Domain=localhost", "localhost", "/", NOW),
            Ok(Stored::Added)
        );
        assert!(jar.iter().next().unwrap().host_only());
    }

    // §5.3 step 6 and §5.4 step 1: without Domain, host-only: the exact host, not its
    // subdomains; host comparison is case-insensitive.
    #[test]
    fn host_only_cookies_go_to_the_exact_host() {
        let mut jar = jar_with(&["a=1"], "Example.com", "/");
        assert!(jar.iter().next().unwrap().host_only());
        assert_eq!(send(&mut jar, "example.COM", "/"), Some("a=1".into()));
        assert_eq!(send(&mut jar, "www.example.com", "/"), None);
        assert_eq!(send(&mut jar, "example.com.", "/"), Some("a=1".into()));
    }

    // §5.1.3: an IP host matches only exactly; IPv6 brackets are ignored.
    #[test]
    fn ip_hosts_match_exactly() {
        let mut jar = CookieJar::new();
        jar.store(b"a=1; Domain=127.0.0.1", "127.0.0.1", "/", NOW)
            .unwrap();
        assert_eq!(send(&mut jar, "127.0.0.1", "/"), Some("a=1".into()));
        assert_eq!(
            jar.store(b"b=1; Domain=0.0.1", "127.0.0.1", "/", NOW),
            Err(Rejected::DomainMismatch)
        );
        let mut jar = jar_with(&["v6=1"], "[::1]", "/");
        assert_eq!(send(&mut jar, "::1", "/"), Some("v6=1".into()));
        assert_eq!(send(&mut jar, "[::1]", "/"), Some("v6=1".into()));
    }

    // §5.2.2 and §5.3 step 3: Max-Age sets the expiry from now; ≤ 0 deletes; it wins
    // over Expires whatever the order; a malformed Max-Age is ignored.
    #[test]
    fn max_age_wins_over_expires() {
        let c =
            parse_set_cookie(b"a=1; Max-Age=60; Expires=Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        assert_eq!(c.max_age, Some(60));
        let mut jar = CookieJar::new();
        jar.store(
            b"a=1; Expires=Wed, 21 Oct 2015 07:28:00 GMT; Max-Age=60",
            "h",
            "/",
            NOW,
        )
        .unwrap();
        assert_eq!(jar.iter().next().unwrap().expires(), Some(NOW + 60));
        assert_eq!(parse_max_age(b"-5"), Some(0));
        assert_eq!(parse_max_age(b"12a"), None);
        assert_eq!(parse_max_age(b"+5"), None);
        assert_eq!(parse_max_age(b"-"), None);
        assert_eq!(parse_max_age(b""), None);
        assert_eq!(parse_max_age(b"99999999999999999999999"), Some(i64::MAX));
        // Ignored: a session cookie.
        let jar = jar_with(&["b=1; Max-Age=soon"], "h", "/");
        assert_eq!(jar.iter().next().unwrap().expires(), None);
    }

    // §5.3 step 3 and §5.3 step 11: Max-Age=0 (or negative), or an Expires in the past,
    // deletes the cookie of the same name, domain and path.
    #[test]
    fn expired_cookies_delete() {
        let mut jar = jar_with(&["a=1", "b=2"], "h", "/");
        assert_eq!(
            jar.store(b"a=x; Max-Age=0", "h", "/", NOW),
            Ok(Stored::Deleted)
        );
        assert_eq!(
            jar.store(b"b=x; Expires=Thu, 01 Jan 1970 00:00:00 GMT", "h", "/", NOW),
            Ok(Stored::Deleted)
        );
        assert!(jar.is_empty());
        assert_eq!(
            jar.store(b"c=x; Max-Age=-1", "h", "/", NOW),
            Ok(Stored::AlreadyExpired)
        );
        // A different path is another cookie: not deleted.
        let mut jar = jar_with(&["a=1; Path=/x"], "h", "/");
        assert_eq!(
            jar.store(b"a=x; Max-Age=0", "h", "/", NOW),
            Ok(Stored::AlreadyExpired)
        );
        assert_eq!(jar.len(), 1);
    }

    // §5.3 and §5.4 step 1: a cookie past its expiry is not sent, and is dropped.
    #[test]
    fn cookies_expire_with_time() {
        let mut jar = jar_with(&["a=1; Max-Age=10", "b=2"], "h", "/");
        assert_eq!(
            jar.header("h", "/", false, NOW + 9),
            Some("a=1; b=2".into())
        );
        assert_eq!(jar.header("h", "/", false, NOW + 10), Some("b=2".into()));
        assert_eq!(jar.len(), 1);
        // Expires in the future (2099).
        let mut jar = jar_with(&["e=1; Expires=Thu, 01 Jan 2099 00:00:00 GMT"], "h", "/");
        let at = jar.iter().next().unwrap().expires().unwrap();
        assert_eq!(at, 4_070_908_800);
        assert_eq!(jar.header("h", "/", false, at - 1), Some("e=1".into()));
        assert_eq!(jar.header("h", "/", false, at), None);
    }

    // §5.4 step 1: Secure cookies go over https only.
    #[test]
    fn secure_cookies_only_over_https() {
        let mut jar = jar_with(&["s=1; Secure", "p=2"], "h", "/");
        assert_eq!(jar.header("h", "/", false, NOW), Some("p=2".into()));
        assert_eq!(jar.header("h", "/", true, NOW), Some("s=1; p=2".into()));
    }

    // §5.2.6 and §5.4: HttpOnly is kept and changes nothing for sending.
    #[test]
    fn http_only_is_kept_and_sent() {
        let mut jar = jar_with(&["h=1; HttpOnly"], "h", "/");
        assert!(jar.iter().next().unwrap().http_only());
        assert_eq!(send(&mut jar, "h", "/"), Some("h=1".into()));
    }

    // §5.3 step 11: the same (name, domain, path) replaces the old cookie and keeps its
    // creation time, so its place in the order.
    #[test]
    fn same_name_domain_path_replaces_and_keeps_creation() {
        let mut jar = jar_with(&["a=1", "b=2"], "h", "/");
        assert_eq!(jar.store(b"a=3", "h", "/", NOW), Ok(Stored::Replaced));
        assert_eq!(send(&mut jar, "h", "/"), Some("a=3; b=2".into()));
        // Another path or domain: another cookie.
        jar.store(b"a=4; Path=/x", "h", "/", NOW).unwrap();
        jar.store(b"a=5; Domain=h.com", "www.h.com", "/", NOW)
            .unwrap();
        assert_eq!(jar.len(), 4);
        assert_eq!(send(&mut jar, "h", "/x"), Some("a=4; a=3; b=2".into()));
    }

    // §5.4 step 2: longer paths first, then earlier creation.
    #[test]
    fn sending_order_is_longer_path_then_creation() {
        let mut jar = jar_with(
            &[
                "root1=1; Path=/",
                "deep=1; Path=/a/b",
                "mid=1; Path=/a",
                "root2=1; Path=/",
                "mid2=1; Path=/a",
            ],
            "h",
            "/",
        );
        assert_eq!(
            send(&mut jar, "h", "/a/b/c"),
            Some("deep=1; mid=1; mid2=1; root1=1; root2=1".into())
        );
        let mut out = b"Cookie: ".to_vec();
        assert_eq!(jar.write_header("h", "/a", false, NOW, &mut out), 4);
        assert_eq!(out, b"Cookie: mid=1; mid2=1; root1=1; root2=1");
        assert_eq!(jar.write_header("other", "/", false, NOW, &mut out), 0);
    }

    // §6.1: caps: a cookie over 4096 bytes is rejected; the jar keeps 50, evicting
    // expired ones first, then the least recently used (§5.3, eviction).
    #[test]
    fn caps_and_eviction() {
        let mut jar = CookieJar::new();
        let big = format!("a={}", "x".repeat(MAX_COOKIE_BYTES));
        assert_eq!(
            jar.store(big.as_bytes(), "h", "/", NOW),
            Err(Rejected::TooLarge)
        );
        let fits = format!("a={}", "x".repeat(MAX_COOKIE_BYTES - 2));
        assert_eq!(jar.store(fits.as_bytes(), "h", "/", NOW), Ok(Stored::Added));
        jar.clear();

        for i in 0..MAX_COOKIES {
            let s = format!("c{i}=1; Path=/p{i}");
            assert_eq!(jar.store(s.as_bytes(), "h", "/", NOW), Ok(Stored::Added));
        }
        // c0 is used, so c1 is now the least recently used.
        assert_eq!(send(&mut jar, "h", "/p0"), Some("c0=1".into()));
        assert_eq!(jar.store(b"new=1", "h", "/", NOW), Ok(Stored::Evicted));
        assert_eq!(jar.len(), MAX_COOKIES);
        assert!(jar.iter().all(|c| c.name() != b"c1"));
        assert!(jar.iter().any(|c| c.name() == b"c0"));
        // An expired cookie goes before any live one.
        jar.store(b"c5=1; Path=/p5; Max-Age=5", "h", "/", NOW)
            .unwrap();
        assert_eq!(jar.store(b"later=1", "h", "/", NOW + 5), Ok(Stored::Added));
        assert!(jar.iter().all(|c| c.name() != b"c5"));
        assert!(jar.iter().any(|c| c.name() == b"c2"));
    }

    // §5.1.1: the date algorithm reads the three HTTP date forms and more.
    #[test]
    fn cookie_dates_follow_5_1_1() {
        let d = |s: &str| parse_cookie_date(s.as_bytes());
        assert_eq!(d("Wed, 21 Oct 2015 07:28:00 GMT"), Some(1_445_412_480));
        assert_eq!(d("Sunday, 06-Nov-94 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(d("Sun Nov  6 08:49:37 1994"), Some(784_111_777));
        assert_eq!(d("6 november 1994 8:49:37"), Some(784_111_777));
        assert_eq!(d("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(d("Sat, 01 Jan 1601 00:00:00 GMT"), Some(-11_644_473_600));
        // Two-digit years: 70-99 are 19xx, 0-69 are 20xx.
        assert_eq!(d("01 Jan 69 00:00:00"), d("01 Jan 2069 00:00:00"));
        assert_eq!(d("01 Jan 70 00:00:00"), Some(0));
        // Leap days.
        assert!(d("29 Feb 2024 00:00:00").is_some());
        assert_eq!(d("29 Feb 2023 00:00:00"), None);
        assert_eq!(d("31 Apr 2023 00:00:00"), None);
        // Out of range or missing parts.
        assert_eq!(d("32 Jan 2023 00:00:00"), None);
        assert_eq!(d("01 Jan 1600 00:00:00"), None);
        assert_eq!(d("01 Jan 2023 24:00:00"), None);
        assert_eq!(d("01 Jan 2023 23:60:00"), None);
        assert_eq!(d("01 Jan 2023"), None);
        assert_eq!(d("01 2023 00:00:00"), None);
        assert_eq!(d("tomorrow"), None);
        assert_eq!(d(""), None);
        // A three-digit number is neither a day nor a year.
        assert_eq!(d("123 Jan 2023 00:00:00"), None);
    }

    // §5.2.1: an Expires that does not parse is ignored (a session cookie).
    #[test]
    fn unparsable_expires_is_ignored() {
        let jar = jar_with(&["a=1; Expires=someday"], "h", "/");
        assert_eq!(jar.iter().next().unwrap().expires(), None);
    }

    #[test]
    fn unix_secs_of_system_time() {
        assert_eq!(unix_secs(UNIX_EPOCH + std::time::Duration::from_secs(5)), 5);
        assert_eq!(unix_secs(UNIX_EPOCH - std::time::Duration::from_secs(5)), 0);
    }
}

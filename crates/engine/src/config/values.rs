//! The typed values a workload is made of, each with the one parser that the flags, the
//! plan and the wire all use: durations, CPU lists, source addresses, header lines.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Parses `10s`, `500ms`, `2m`, `1h30m` or a bare number of seconds (`3`, `0.5`), the form
/// every duration takes in flags and plans.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!(
            "`{s}` is negative: give a duration above 0, e.g. 10s"
        ));
    }
    if let Ok(secs) = t.parse::<f64>() {
        return Duration::try_from_secs_f64(secs)
            .map_err(|_| format!("`{s}` is not a duration: use e.g. 10s, 500ms, 2m"));
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("`{s}` is not a duration ({e}): use e.g. 10s, 500ms, 2m"))
}

/// Which system interface carries plain HTTP/1.1 connections (`--io`, a plan's `load.io`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoMode {
    /// loadlab's choice: see [`IoMode::resolve`].
    #[default]
    Auto,
    /// Readiness events (epoll, through tokio): every protocol.
    Epoll,
    /// io_uring: plain `http://` HTTP/1.1 and `ws://` WebSocket only; where the kernel
    /// refuses it, epoll is used and the run says so.
    Uring,
}

/// The interface a run's HTTP/1.1 connections used (epoll in results written before it
/// was recorded).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoUsed {
    /// Readiness events (epoll).
    #[default]
    Epoll,
    /// io_uring.
    Uring,
}

impl IoMode {
    /// What a run uses (`plain_http1`: plain `http://` HTTP/1.1; `better`: a run of the
    /// kind where io_uring was measured better), and a note when io_uring was asked for and
    /// not used: the kernel refused it, or the run is https, HTTP/2 or gRPC (io_uring
    /// carries plain HTTP/1.1 only).
    ///
    /// `Auto` takes io_uring where it was measured better here (`bench/peers.sh IO=uring`,
    /// docs/src/benchmarks.md): open loop, where the dispatcher sleeps in the ring and takes
    /// the responses in at its own wake-ups, one system call per release instead of about
    /// three per request (at 20,000 and 50,000 req/s 0.7 to 0.8 times epoll's CPU per
    /// request with as low a schedule lag: 1.3 to 1.5 times oha), and closed loop with
    /// keep-alive off (a connect linked ahead of its request, many connections' connects,
    /// sends, receives and closes in one system call: 1.3 times wrk, epoll 1.0). With
    /// keep-alive in closed loop it was not (0.9 times wrk, epoll 1.0), nor measured for a
    /// flow's sessions (their own timer loop does not pace the ring): epoll; so it is where
    /// io_uring is refused, silently (`--io uring` says so).
    pub fn resolve(self, plain_http1: bool, better: bool) -> (IoUsed, Option<String>) {
        match self {
            IoMode::Auto
                if plain_http1 && better && crate::transport::uring::available().is_ok() =>
            {
                (IoUsed::Uring, None)
            }
            IoMode::Uring if !plain_http1 => (
                IoUsed::Epoll,
                Some(
                    "--io uring: io_uring carries plain http:// HTTP/1.1 and ws:// WebSocket \
                     only; this run (https, wss, HTTP/2, gRPC or server-sent events) used epoll"
                        .into(),
                ),
            ),
            IoMode::Uring => match crate::transport::uring::available() {
                Ok(()) => (IoUsed::Uring, None),
                Err(why) => (
                    IoUsed::Epoll,
                    Some(format!(
                        "--io uring: {why}; the epoll transport was used (same requests, same \
                         measures)"
                    )),
                ),
            },
            _ => (IoUsed::Epoll, None),
        }
    }
}

impl FromStr for IoMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(IoMode::Auto),
            "epoll" => Ok(IoMode::Epoll),
            "uring" | "io_uring" => Ok(IoMode::Uring),
            _ => Err(format!(
                "`{s}` is not an I/O interface: auto, epoll or uring"
            )),
        }
    }
}

/// Serde for a [`Duration`] as the text [`parse_duration`] reads (`"10s"`, `"1m 30s"`).
pub mod duration_text {
    use super::*;

    /// Writes `d` as humantime text.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    /// Reads a duration written by [`serialize`] or by a person.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

/// Serde for an optional [`Duration`] as text, `null` for none.
pub mod opt_duration_text {
    use super::*;

    /// Writes `d` as humantime text or `null`.
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::duration_text::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    /// Reads text or `null`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|t| parse_duration(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// CPUs to pin threads to, as `taskset -c` takes them: `1`, `0,2`, `2-3,6`. Parsed once;
/// serialized as the list of numbers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CpuList(Vec<usize>);

/// What [`CpuList`] accepts, for error messages.
pub const CPU_LIST_FORMS: &str = "CPU numbers such as 1, 0,2 or 2-3,6";

impl CpuList {
    /// A list of CPU numbers as given (the i-th worker takes the i-th CPU, round robin).
    pub fn new(cpus: Vec<usize>) -> CpuList {
        CpuList(cpus)
    }

    /// The CPUs in order.
    pub fn as_slice(&self) -> &[usize] {
        &self.0
    }
}

impl FromStr for CpuList {
    type Err = String;

    fn from_str(s: &str) -> Result<CpuList, String> {
        let mut cpus = Vec::new();
        for part in s.split(',').map(str::trim) {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            match (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
                (Ok(a), Ok(b)) if a <= b && b < 4096 => cpus.extend(a..=b),
                _ => return Err(CPU_LIST_FORMS.into()),
            }
        }
        if cpus.is_empty() {
            return Err(CPU_LIST_FORMS.into());
        }
        Ok(CpuList(cpus))
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text: Vec<String> = self.0.iter().map(usize::to_string).collect();
        f.write_str(&text.join(","))
    }
}

/// Local source addresses for new connections, as `--source-addrs` and `load.source_addrs`
/// take them: a count `N` (`127.0.0.2` onwards, IPv4 loopback targets only), an IPv4 range
/// `A-B`, or a list `A,B,C`. Serialized as that text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceAddrs {
    /// `N` addresses from `127.0.0.2`.
    Count(u32),
    /// Every IPv4 address from the first to the second, both included.
    Range(Ipv4Addr, Ipv4Addr),
    /// These addresses.
    List(Vec<IpAddr>),
}

/// What [`SourceAddrs`] accepts, for error messages.
pub const SOURCE_ADDRS_FORMS: &str =
    "a range 127.0.0.2-127.0.0.17, a list A,B,C, or a count N (loopback targets)";

/// The most source addresses a run may use.
const MAX_SOURCE_ADDRS: u32 = 65_000;

impl SourceAddrs {
    /// How many addresses.
    pub fn len(&self) -> usize {
        match self {
            SourceAddrs::Count(n) => *n as usize,
            SourceAddrs::Range(a, b) => (u32::from(*b) - u32::from(*a)) as usize + 1,
            SourceAddrs::List(v) => v.len(),
        }
    }

    /// True when there are none (never, once parsed).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The addresses for a target at `target_ip`; an error (what is allowed) when a count is
    /// used for a target that is not IPv4 loopback, or an address is of the other family.
    pub fn resolve(&self, target_ip: IpAddr) -> Result<Vec<IpAddr>, String> {
        let addrs: Vec<IpAddr> = match self {
            SourceAddrs::Count(n) => {
                if !target_ip.is_loopback() || !target_ip.is_ipv4() {
                    return Err(
                        "a count only works for an IPv4 loopback target; give addresses".into(),
                    );
                }
                let first = u32::from(Ipv4Addr::new(127, 0, 0, 2));
                (0..*n)
                    .map(|i| IpAddr::V4(Ipv4Addr::from(first + i)))
                    .collect()
            }
            SourceAddrs::Range(a, b) => (u32::from(*a)..=u32::from(*b))
                .map(|x| IpAddr::V4(Ipv4Addr::from(x)))
                .collect(),
            SourceAddrs::List(v) => v.clone(),
        };
        if let Some(bad) = addrs.iter().find(|a| a.is_ipv4() != target_ip.is_ipv4()) {
            return Err(format!(
                "addresses of the target's family ({target_ip}), not {bad}"
            ));
        }
        Ok(addrs)
    }
}

impl FromStr for SourceAddrs {
    type Err = String;

    fn from_str(s: &str) -> Result<SourceAddrs, String> {
        let s = s.trim();
        if let Ok(n) = s.parse::<u32>() {
            if n == 0 || n > MAX_SOURCE_ADDRS {
                return Err(format!("a count from 1 to {MAX_SOURCE_ADDRS}"));
            }
            return Ok(SourceAddrs::Count(n));
        }
        if let Some((a, b)) = s.split_once('-') {
            let a: Ipv4Addr = a.trim().parse().map_err(|_| SOURCE_ADDRS_FORMS)?;
            let b: Ipv4Addr = b.trim().parse().map_err(|_| SOURCE_ADDRS_FORMS)?;
            let (x, y) = (u32::from(a), u32::from(b));
            if y < x || y - x >= MAX_SOURCE_ADDRS {
                return Err(format!(
                    "a range whose end is not before its start, at most {MAX_SOURCE_ADDRS} addresses"
                ));
            }
            return Ok(SourceAddrs::Range(a, b));
        }
        s.split(',')
            .map(|p| {
                p.trim()
                    .parse::<IpAddr>()
                    .map_err(|_| SOURCE_ADDRS_FORMS.into())
            })
            .collect::<Result<Vec<_>, String>>()
            .map(SourceAddrs::List)
    }
}

impl fmt::Display for SourceAddrs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceAddrs::Count(n) => write!(f, "{n}"),
            SourceAddrs::Range(a, b) => write!(f, "{a}-{b}"),
            SourceAddrs::List(v) => {
                let text: Vec<String> = v.iter().map(IpAddr::to_string).collect();
                f.write_str(&text.join(","))
            }
        }
    }
}

impl Serialize for SourceAddrs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SourceAddrs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SourceAddrs, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// Headers HTTP/2 forbids (RFC 9113 §8.2.2), and `host` (the URL's authority is sent).
const CONNECTION_HEADERS: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// RFC 9110 §9.2.2: a client may repeat a request of an idempotent method it got no
/// answer to.
pub(crate) fn idempotent(method: &str) -> bool {
    matches!(
        method,
        "GET" | "HEAD" | "PUT" | "DELETE" | "OPTIONS" | "TRACE"
    )
}

/// Whether `name` is a header HTTP/2 forbids (or `host`, which the URL gives).
pub(crate) fn is_connection_header(name: &str) -> bool {
    CONNECTION_HEADERS
        .iter()
        .any(|c| name.eq_ignore_ascii_case(c))
}

/// Splits a header line `Name: value` (a token name, no CR or LF in the value).
pub fn parse_header(h: &str) -> Result<(String, String), String> {
    let allowed = "`Name: value` with a token name";
    let (name, value) = h.split_once(':').ok_or(allowed)?;
    let name = name.trim();
    let valid_name = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !valid_name || value.contains(['\r', '\n']) {
        return Err(allowed.into());
    }
    Ok((name.to_string(), value.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("-1s").unwrap_err().contains("negative"));
        assert!(parse_duration("soon").is_err());
        // Regression (found by the property tests): a number too large for a Duration
        // panicked in Duration::from_secs_f64; now it is an error.
        for huge in ["1e30", "1e30s", "1e300ms", "inf", "NaN"] {
            assert!(parse_duration(huge).is_err(), "{huge}");
        }
    }

    #[test]
    fn cpu_lists() {
        assert_eq!("1".parse::<CpuList>().unwrap().as_slice(), &[1]);
        let l: CpuList = "0, 2-3,6".parse().unwrap();
        assert_eq!(l.as_slice(), &[0, 2, 3, 6]);
        assert_eq!(l.to_string(), "0,2,3,6");
        assert_eq!(serde_json::to_string(&l).unwrap(), "[0,2,3,6]");
        assert!("3-1".parse::<CpuList>().is_err());
        assert!("x".parse::<CpuList>().is_err());
    }

    #[test]
    fn source_addrs_forms() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let four: SourceAddrs = "4".parse().unwrap();
        assert_eq!(four.len(), 4);
        assert_eq!(four.resolve(lo).unwrap().len(), 4);
        let r: SourceAddrs = "127.0.0.2-127.0.0.17".parse().unwrap();
        assert_eq!(r.len(), 16);
        let v = r.resolve(lo).unwrap();
        assert_eq!(v[15].to_string(), "127.0.0.17");
        assert_eq!(r.to_string(), "127.0.0.2-127.0.0.17");
        assert!("127.0.0.9-127.0.0.2".parse::<SourceAddrs>().is_err());
        assert!("0".parse::<SourceAddrs>().is_err());
        let v6: SourceAddrs = "::1".parse().unwrap();
        assert!(v6.resolve(lo).is_err());
        assert!(four.resolve("::1".parse().unwrap()).is_err());
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(json, "\"127.0.0.2-127.0.0.17\"");
        assert_eq!(serde_json::from_str::<SourceAddrs>(&json).unwrap(), r);
    }

    #[test]
    fn headers() {
        assert_eq!(
            parse_header("X-Ok: yes").unwrap(),
            ("X-Ok".into(), "yes".into())
        );
        assert!(parse_header("no colon").is_err());
        assert!(parse_header("Bad Name: x").is_err());
    }
}

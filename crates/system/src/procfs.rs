//! Hand-written parsers for the few `/proc` files loadlab reads, kept apart from the I/O so
//! they can be tested on fixed text.

use std::collections::BTreeMap;

/// The fields of `/proc/PID/stat` that the probe uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stat {
    /// Parent process id.
    pub ppid: u32,
    /// User CPU, clock ticks.
    pub utime: u64,
    /// System CPU, clock ticks.
    pub stime: u64,
    /// User CPU of reaped children, clock ticks.
    pub cutime: u64,
    /// System CPU of reaped children, clock ticks.
    pub cstime: u64,
    /// Threads.
    pub threads: u64,
    /// Resident set, pages.
    pub rss_pages: u64,
}

/// Parses `/proc/PID/stat`. The command name (field 2) may contain spaces and parentheses,
/// so fields are counted from the *last* `)`.
pub(crate) fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    // After the name: field 3 (state) is index 0, so field n is index n - 3.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |field: usize| -> Option<u64> {
        let s = f.get(field - 3)?;
        // cutime/cstime are signed in the kernel's format; they are never negative in practice.
        s.parse::<u64>()
            .ok()
            .or_else(|| s.parse::<i64>().ok().map(|v| v.max(0) as u64))
    };
    Some(Stat {
        ppid: u32::try_from(num(4)?).ok()?,
        utime: num(14)?,
        stime: num(15)?,
        cutime: num(16)?,
        cstime: num(17)?,
        threads: num(20)?,
        rss_pages: num(24)?,
    })
}

/// Parses the header/value line pairs of `/proc/net/netstat` or `/proc/net/snmp`
/// (`TcpExt: A B C` followed by `TcpExt: 1 2 3`) into `(prefix, name) → value`. Negative
/// values (`MaxConn -1`) are left out.
pub(crate) fn parse_counters(text: &str) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        let (Some((p1, names)), Some((p2, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            break;
        };
        if p1 != p2 {
            // Out of step (should not happen); stop rather than mislabel counters.
            break;
        }
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(v) = v.parse::<u64>() {
                out.insert((p1.to_string(), n.to_string()), v);
            }
        }
    }
    out
}

/// The TIME_WAIT count of `/proc/net/sockstat` (`TCP: inuse 5 orphan 0 tw 7 alloc 9 mem 1`).
pub(crate) fn parse_sockstat_tw(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("TCP:"))?;
    let mut it = line.split_whitespace();
    while let Some(word) = it.next() {
        if word == "tw" {
            return it.next()?.parse().ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_awkward_command_name() {
        // A real line from a process named "a) b (c", with made-up counters.
        let line = "4242 (a) b (c) S 17 4242 4242 0 -1 4194560 100 0 0 0 \
                    250 75 12 3 20 0 7 0 123456 987654321 2048 18446744073709551615 \
                    1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(
            s,
            Stat {
                ppid: 17,
                utime: 250,
                stime: 75,
                cutime: 12,
                cstime: 3,
                threads: 7,
                rss_pages: 2048,
            }
        );
    }

    #[test]
    fn stat_truncated_is_none() {
        assert_eq!(parse_stat("1 (init) S 0 1 1"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn sockstat_time_wait() {
        let text =
            "sockets: used 300\nTCP: inuse 5 orphan 0 tw 7093 alloc 9 mem 1\nUDP: inuse 2 mem 0\n";
        assert_eq!(parse_sockstat_tw(text), Some(7093));
        assert_eq!(parse_sockstat_tw("UDP: inuse 2\n"), None);
    }

    #[test]
    fn counters_pairs() {
        let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\n\
                    TcpExt: 5 117 118\n\
                    IpExt: InNoRoutes\n\
                    IpExt: 3\n";
        let c = parse_counters(text);
        let get = |p: &str, n: &str| c.get(&(p.to_string(), n.to_string())).copied();
        assert_eq!(get("TcpExt", "ListenOverflows"), Some(117));
        assert_eq!(get("TcpExt", "ListenDrops"), Some(118));
        assert_eq!(get("TcpExt", "SyncookiesSent"), Some(5));
        assert_eq!(get("IpExt", "InNoRoutes"), Some(3));
        let snmp = "Tcp: RtoAlgorithm MaxConn OutRsts\nTcp: 1 -1 876139\n";
        let c = parse_counters(snmp);
        assert_eq!(
            c.get(&("Tcp".into(), "OutRsts".into())).copied(),
            Some(876_139)
        );
        assert!(!c.contains_key(&("Tcp".into(), "MaxConn".into())));
    }
}

//! Settings of the scenario server, validated before anything starts.
//!
//! The listen backlog is not here: it is fixed when the listener is bound, before
//! [`run`](crate::run) is called (see `loadlab_target_common::net::bind`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use tonic::transport::Uri;

/// A setting is outside its allowed range. `field` is spelled as the command-line flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field} `{value}`: expected {expected}")]
pub struct ConfigError {
    /// The setting, named like its flag without the dashes (`workers`, `mailbox`…).
    pub field: &'static str,
    /// The value given.
    pub value: String,
    /// The allowed values.
    pub expected: &'static str,
}

/// HTTP keep-alive of the server's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepAlive {
    /// Idle connections are closed after this long.
    Timeout(Duration),
    /// Every connection is closed after one response (the source ran with keep-alive 0).
    Off,
}

impl FromStr for KeepAlive {
    type Err = ConfigError;

    /// `off`, or a whole number of seconds (`0` also means off).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "off" {
            return Ok(KeepAlive::Off);
        }
        match text.parse::<u64>() {
            Ok(0) => Ok(KeepAlive::Off),
            Ok(secs) => Ok(KeepAlive::Timeout(Duration::from_secs(secs))),
            Err(_) => Err(ConfigError {
                field: "keep-alive",
                value: text.to_owned(),
                expected: "a number of seconds or `off`",
            }),
        }
    }
}

impl fmt::Display for KeepAlive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeepAlive::Timeout(timeout) => write!(f, "{}", timeout.as_secs()),
            KeepAlive::Off => f.write_str("off"),
        }
    }
}

/// Everything [`run`](crate::run) needs besides the listener.
#[derive(Debug, Clone)]
pub struct Config {
    /// actix-web worker threads (`None`: one per physical core, actix's default).
    pub workers: Option<usize>,
    /// Connections each worker serves at once before it stops accepting.
    pub max_connections: usize,
    /// Concurrent TLS handshakes per worker. The server speaks plain HTTP, so this knob of
    /// actix-web has no effect here; it is accepted so that plans can name it.
    pub max_connection_rate: usize,
    /// HTTP keep-alive (`--keep-alive`: idle timeout in seconds, or `off`).
    pub keep_alive: KeepAlive,
    /// How long workers may finish in-flight requests after shutdown starts (whole seconds:
    /// actix-web ignores fractions).
    pub shutdown_timeout: Duration,
    /// Time `/sleep` blocks and `/f_sleep` waits.
    pub sleep: Duration,
    /// Time the actor takes per message.
    pub actor_delay: Duration,
    /// Messages the actor's mailbox holds (not counting the one being processed).
    pub mailbox: usize,
    /// Threads of the bounded blocking pool behind `/page`.
    pub blocking_threads: usize,
    /// The `hello.HelloService` backend, `http://HOST:PORT`.
    pub grpc_backend: Uri,
    /// Sessions of the `/flow` endpoints kept for `/flow/stats`; when a login finds them
    /// all taken, the session that logged out first is forgotten (or, if none has, the
    /// oldest). About 0.6 KiB each, 1.5 KiB at most.
    pub flow_sessions: usize,
    /// `/flow/page/{n}` requests served at once (`None`: no limit); the others wait in
    /// line, first come, first served.
    pub flow_capacity: Option<usize>,
    /// How long each `/flow/page/{n}` request holds its place (an async wait).
    pub flow_work: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            workers: None,
            max_connections: 25_000,
            max_connection_rate: 256,
            keep_alive: KeepAlive::Timeout(Duration::from_secs(5)),
            shutdown_timeout: Duration::from_secs(30),
            sleep: Duration::from_millis(100),
            actor_delay: Duration::from_millis(100),
            mailbox: 16,
            blocking_threads: 4,
            grpc_backend: Uri::from_static("http://127.0.0.1:50051"),
            flow_sessions: 200_000,
            flow_capacity: None,
            flow_work: Duration::ZERO,
        }
    }
}

/// Longest `--sleep-ms`, `--actor-delay-ms` and `--flow-work-ms`.
const MAX_DELAY: Duration = Duration::from_secs(600);

fn check<T: fmt::Display>(
    field: &'static str,
    value: T,
    ok: bool,
    expected: &'static str,
) -> Result<(), ConfigError> {
    if ok {
        return Ok(());
    }
    Err(ConfigError {
        field,
        value: value.to_string(),
        expected,
    })
}

impl Config {
    /// Checks every setting; the first one out of range is reported.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(workers) = self.workers {
            check(
                "workers",
                workers,
                (1..=65_536).contains(&workers),
                "1..=65536",
            )?;
        }
        let n = self.max_connections;
        check("max-connections", n, n >= 1, "at least 1")?;
        let n = self.max_connection_rate;
        check("max-connection-rate", n, n >= 1, "at least 1")?;
        let n = self.mailbox;
        check("mailbox", n, (1..=1_000_000).contains(&n), "1..=1000000")?;
        let n = self.blocking_threads;
        check("blocking-threads", n, (1..=4_096).contains(&n), "1..=4096")?;
        let ms = |d: Duration| d.as_millis();
        let d = self.sleep;
        check("sleep-ms", ms(d), d <= MAX_DELAY, "0..=600000")?;
        let d = self.actor_delay;
        check("actor-delay-ms", ms(d), d <= MAX_DELAY, "0..=600000")?;
        let n = self.flow_sessions;
        check(
            "flow-sessions",
            n,
            (1..=10_000_000).contains(&n),
            "1..=10000000",
        )?;
        if let Some(n) = self.flow_capacity {
            check(
                "flow-capacity",
                n,
                (1..=1_000_000).contains(&n),
                "1..=1000000",
            )?;
        }
        let d = self.flow_work;
        check("flow-work-ms", ms(d), d <= MAX_DELAY, "0..=600000")?;
        let uri = &self.grpc_backend;
        let plain_http = uri.scheme_str() == Some("http") && uri.port_u16().is_some();
        check("grpc-backend", uri, plain_http, "http://HOST:PORT")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Config::default().validate().unwrap();
    }

    #[test]
    fn keep_alive_parses() {
        assert_eq!("off".parse::<KeepAlive>().unwrap(), KeepAlive::Off);
        assert_eq!("0".parse::<KeepAlive>().unwrap(), KeepAlive::Off);
        assert_eq!(
            "75".parse::<KeepAlive>().unwrap(),
            KeepAlive::Timeout(Duration::from_secs(75))
        );
        assert_eq!("75".parse::<KeepAlive>().unwrap().to_string(), "75");
        let err = "forever".parse::<KeepAlive>().unwrap_err();
        assert_eq!(err.field, "keep-alive");
    }

    #[test]
    fn out_of_range_settings_name_their_field() {
        type Spoil = fn(&mut Config);
        let cases: [(&str, Spoil); 9] = [
            ("workers", |c| c.workers = Some(0)),
            ("max-connections", |c| c.max_connections = 0),
            ("mailbox", |c| c.mailbox = 0),
            ("blocking-threads", |c| c.blocking_threads = 0),
            ("sleep-ms", |c| c.sleep = Duration::from_secs(3600)),
            ("flow-sessions", |c| c.flow_sessions = 0),
            ("flow-capacity", |c| c.flow_capacity = Some(0)),
            ("flow-work-ms", |c| c.flow_work = Duration::from_secs(3600)),
            ("grpc-backend", |c| {
                c.grpc_backend = Uri::from_static("https://example.test:443")
            }),
        ];
        for (field, spoil) in cases {
            let mut config = Config::default();
            spoil(&mut config);
            let err = config.validate().unwrap_err();
            assert_eq!(err.field, field);
            assert!(err.to_string().starts_with(&format!("invalid {field} ")));
        }
    }
}

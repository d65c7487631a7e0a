//! What can be wrong with a [`Workload`](super::Workload)(super::Workload): the [`Field`] at fault (which the
//! CLI shows as its flag and a plan as its own key) and the [`ConfigError`] naming it.

/// A setting of a [`Workload`](super::Workload), for error messages: [`Field::flag`] is how `loadlab run`
/// spells it; plans map it to their own keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// The target URL.
    Url,
    /// The open-loop rate.
    Rate,
    /// The connection count ([`Workload::connections`](super::Workload::connections)).
    Connections,
    /// The open-loop pool ceiling (HTTP/1.1).
    MaxConnections,
    /// Streams in flight (HTTP/2, gRPC).
    Concurrency,
    /// The measured duration.
    Duration,
    /// The measured request count.
    Requests,
    /// The warm-up.
    Warmup,
    /// The per-request deadline.
    Timeout,
    /// Worker threads.
    Threads,
    /// The HTTP/1.1 pipeline depth.
    Pipeline,
    /// Connection reuse.
    KeepAlive,
    /// Which side closes a connection that is not reused.
    CloseBy,
    /// The HTTP method.
    Method,
    /// A request header.
    Header,
    /// Local source addresses.
    SourceAddrs,
    /// CPUs for the worker threads.
    Cpus,
    /// Certificates trusted besides the system's trust store.
    CaCert,
    /// The client certificate (mTLS).
    ClientCert,
    /// The client certificate's private key.
    ClientKey,
    /// The list of requests (a targets file, or a plan scenario's requests).
    Targets,
    /// The data file.
    Data,
    /// A flow of user sessions.
    Flow,
    /// HTTP/2 (or gRPC) asked for.
    Http2,
    /// Re-sending requests a closing server never read.
    RetryUnprocessed,
    /// WebSocket messages as binary frames.
    Binary,
    /// WebSocket connection load: a ping on every connection each interval.
    Ping,
    /// What a WebSocket reply must contain.
    ReplyContains,
    /// WebSocket server push after a subscribe message.
    Push,
    /// Where a WebSocket reply says when the server sent it.
    SentAt,
    /// A server-streaming gRPC call's streams opened at a rate, each for this long.
    StreamLifetime,
}

impl Field {
    /// Every field (for [`ConfigError::allowed_as`], which respells each flag).
    pub const ALL: [Field; 31] = [
        Field::Url,
        Field::Rate,
        Field::Connections,
        Field::MaxConnections,
        Field::Concurrency,
        Field::Duration,
        Field::Requests,
        Field::Warmup,
        Field::Timeout,
        Field::Threads,
        Field::Pipeline,
        Field::KeepAlive,
        Field::CloseBy,
        Field::Method,
        Field::Header,
        Field::SourceAddrs,
        Field::Cpus,
        Field::CaCert,
        Field::ClientCert,
        Field::ClientKey,
        Field::Targets,
        Field::Data,
        Field::Flow,
        Field::Http2,
        Field::RetryUnprocessed,
        Field::Binary,
        Field::Ping,
        Field::ReplyContains,
        Field::Push,
        Field::SentAt,
        Field::StreamLifetime,
    ];

    /// The `loadlab run` flag that sets it.
    pub fn flag(self) -> &'static str {
        match self {
            Field::Url => "URL",
            Field::Rate => "--rate",
            Field::Connections => "--connections",
            Field::MaxConnections => "--max-connections",
            Field::Concurrency => "--concurrency",
            Field::Duration => "--duration",
            Field::Requests => "--requests",
            Field::Warmup => "--warmup",
            Field::Timeout => "--timeout",
            Field::Threads => "--threads",
            Field::Pipeline => "--pipeline",
            Field::KeepAlive => "--keep-alive",
            Field::CloseBy => "--close-by",
            Field::Method => "-X/--method",
            Field::Header => "-H/--header",
            Field::SourceAddrs => "--source-addrs",
            Field::Cpus => "--cpus",
            Field::CaCert => "--cacert",
            Field::ClientCert => "--cert",
            Field::ClientKey => "--key",
            Field::Targets => "--targets",
            Field::Data => "--data",
            Field::Flow => "--flow",
            Field::Http2 => "--http2",
            Field::RetryUnprocessed => "--retry-unprocessed",
            Field::Binary => "--binary",
            Field::Ping => "--ping-every",
            Field::ReplyContains => "--reply-contains",
            Field::SentAt => "--sent-at",
            Field::Push => "--push",
            Field::StreamLifetime => "--stream-lifetime",
        }
    }
}

/// What is wrong with a [`Workload`](super::Workload).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The URL does not parse.
    #[error("invalid URL `{url}`: {reason}")]
    Url {
        /// The URL given.
        url: String,
        /// What the parser said.
        reason: String,
    },
    /// The URL's scheme has no transport.
    #[error("unsupported scheme `{scheme}` in `{url}`: loadlab run speaks http://, https://, ws:// and wss://")]
    Scheme {
        /// The URL given.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// A value is outside its allowed range.
    #[error("{} = {value} is not allowed: {allowed}", .field.flag())]
    Value {
        /// The setting at fault.
        field: Field,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: String,
    },
    /// A template, a data file or a targets file is wrong: the message names its file (or
    /// flag), line and column.
    #[error(transparent)]
    Template(#[from] loadlab_template::TemplateError),
    /// The host did not resolve.
    #[error("cannot resolve host `{host}` of `{url}`: {reason}")]
    Resolve {
        /// The URL given.
        url: String,
        /// Its host.
        host: String,
        /// The resolver's message.
        reason: String,
    },
}

impl ConfigError {
    /// The setting at fault ([`Field::Url`] for the URL's own errors).
    pub fn field(&self) -> Field {
        match self {
            ConfigError::Value { field, .. } => *field,
            _ => Field::Url,
        }
    }

    /// What is allowed, with every flag it mentions spelled by `spell` instead (a plan
    /// names its own keys).
    pub fn allowed_as(&self, spell: impl Fn(Field) -> String) -> String {
        let ConfigError::Value { allowed, .. } = self else {
            return self.to_string();
        };
        // Longest flags first, so `--connections` is not replaced inside `--max-connections`.
        let mut fields = Field::ALL;
        fields.sort_by_key(|f| std::cmp::Reverse(f.flag().len()));
        fields
            .iter()
            .filter(|f| f.flag().starts_with('-'))
            .fold(allowed.clone(), |text, &f| {
                text.replace(f.flag(), &spell(f))
            })
    }
}

/// A [`ConfigError::Value`].
pub(crate) fn value_err(
    field: Field,
    value: impl ToString,
    allowed: impl Into<String>,
) -> ConfigError {
    ConfigError::Value {
        field,
        value: value.to_string(),
        allowed: allowed.into(),
    }
}

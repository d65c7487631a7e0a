//! Server reflection over the wire: when `loadlab grpc` or `loadlab knee` is given a
//! `--call` and no `--proto` (nor `--protoset`), the service's descriptors are asked of the
//! server itself, as grpcurl and ghz do. [`loadlab_grpc::reflection::Walk`] decides the
//! queries; this sends each on a stream of its own (one query, one answer, the stream
//! ended) over one HTTP/2 connection, plaintext or TLS as the run's, with the run's
//! metadata (a server may want its credentials for reflection too).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use loadlab_engine::config::{RunConfig, Scheme};
use loadlab_grpc::reflection::{self, Answer, Query, Walk};

/// How long the whole exchange may take.
const LIMIT: Duration = Duration::from_secs(10);

/// The descriptor set of the service of `call` (`package.Service/Method`) from the
/// reflection of the gRPC server at `url`, over `tls` and with `metadata` as the run's.
pub(crate) fn for_call(
    url: &str,
    tls: &crate::args::TlsArgs,
    metadata: &[String],
    call: &str,
) -> anyhow::Result<Vec<u8>> {
    let service = loadlab_grpc::call::service_of(call)?;
    // A run configuration whose call is reflection's own: the address resolved, TLS built
    // as the run's.
    let probe = loadlab_grpc::GrpcCall {
        path: reflection::path(reflection::SERVICES[0]),
        frame: loadlab_grpc::frame::encode(&[]),
        template: None,
        metadata: loadlab_grpc::parse_metadata(metadata)?,
        server_streaming: false,
        bidirectional: false,
        client_streaming: false,
        messages_per_call: 0,
        sent_at: None,
        match_field: None,
        lifetime_ms: 0,
    };
    let (ca_pem, client_cert) = tls.pems()?;
    let cfg = loadlab_engine::Workload {
        url: url.to_string(),
        transport: loadlab_engine::config::Transport::Grpc {
            call: probe,
            concurrency: None,
        },
        insecure: tls.insecure,
        ca_pem,
        client_cert,
        ..loadlab_engine::Workload::default()
    }
    .validate()
    .map_err(|e| anyhow!("{e}"))?;
    descriptors(&cfg, service)
}

/// The descriptor set (`FileDescriptorSet`) of `service` (`package.Service`) from the
/// reflection of the server `cfg` targets (its address, TLS and metadata). Errors name the
/// cause and the way around it (`--proto`).
pub(crate) fn descriptors(cfg: &RunConfig, service: &str) -> anyhow::Result<Vec<u8>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let addr = format!("{}:{}", cfg.target.host, cfg.target.port);
    let work = async {
        let conn = connect(cfg).await?;
        walk(conn, cfg, service).await
    };
    let fix = "give the service's .proto with --proto (or a descriptor set with --protoset)";
    match rt.block_on(async { tokio::time::timeout(LIMIT, work).await }) {
        Ok(Ok(set)) => Ok(set),
        Ok(Err(e)) => Err(e.context(format!(
            "no --proto given, so the service was asked of {addr}'s server reflection, which failed; {fix}"
        ))),
        Err(_) => bail!(
            "no --proto given, so the service was asked of {addr}'s server reflection, which did not answer within {} s; {fix}",
            LIMIT.as_secs()
        ),
    }
}

/// An HTTP/2 connection to the server, its driver spawned.
async fn connect(cfg: &RunConfig) -> anyhow::Result<h2::client::SendRequest<Bytes>> {
    let addr = *cfg
        .target
        .addrs
        .first()
        .ok_or_else(|| anyhow!("{} resolves to no address", cfg.target.host))?;
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("cannot connect to {addr}"))?;
    tcp.set_nodelay(true)?;
    let (tls, _warning) = loadlab_engine::conn::tls_config(cfg);
    let send = match (cfg.target.scheme, tls) {
        (Scheme::Https, Some(tls)) => {
            let name = rustls::pki_types::ServerName::try_from(cfg.target.host.clone())
                .map_err(|e| anyhow!("{}: not a TLS server name: {e}", cfg.target.host))?;
            let stream = tokio_rustls::TlsConnector::from(Arc::clone(&tls))
                .connect(name, tcp)
                .await
                .with_context(|| format!("TLS handshake with {addr}"))?;
            let (send, conn) = h2::client::handshake(stream).await?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            send
        }
        _ => {
            let (send, conn) = h2::client::handshake(tcp)
                .await
                .with_context(|| format!("HTTP/2 with {addr}"))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            send
        }
    };
    Ok(send)
}

/// Sends the walk's queries until every file is in.
async fn walk(
    conn: h2::client::SendRequest<Bytes>,
    cfg: &RunConfig,
    service: &str,
) -> anyhow::Result<Vec<u8>> {
    let mut walk = Walk::new(service);
    // v1 first; a server that does not serve it is asked on v1alpha from then on.
    let mut version = 0;
    while let Some(q) = walk.next_query() {
        let answer = loop {
            match ask(&conn, cfg, reflection::SERVICES[version], &q).await? {
                Asked::Answer(a) => break a,
                Asked::Unimplemented(_) if version + 1 < reflection::SERVICES.len() => {
                    version += 1;
                }
                Asked::Unimplemented(why) => bail!(
                    "the server does not serve reflection ({} nor {}: {why})",
                    reflection::SERVICES[0],
                    reflection::SERVICES[1]
                ),
            }
        };
        walk.take(&q, answer)?;
    }
    walk.finish()
        .ok_or_else(|| anyhow!("the server's reflection left imports out"))
}

/// What one query got.
enum Asked {
    Answer(Answer),
    /// `UNIMPLEMENTED` (or a 404): this reflection service is not served.
    Unimplemented(String),
}

/// One query on a stream of its own: the request, its end, the answer and the status.
async fn ask(
    conn: &h2::client::SendRequest<Bytes>,
    cfg: &RunConfig,
    service: &str,
    q: &Query,
) -> anyhow::Result<Asked> {
    let scheme = match cfg.target.scheme {
        Scheme::Https => "https",
        Scheme::Http => "http",
    };
    let uri = format!(
        "{scheme}://{}:{}{}",
        cfg.target.host,
        cfg.target.port,
        reflection::path(service)
    );
    let mut req = http::Request::post(uri)
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(call) = cfg.transport.grpc() {
        for (k, v) in &call.metadata {
            req = req.header(k.as_str(), v.as_str());
        }
    }
    let req = req.body(())?;
    let mut ready = conn.clone().ready().await?;
    let (response, mut stream) = ready.send_request(req, false)?;
    stream.send_data(q.frame(), true)?;
    let response = response.await?;
    let status = response.status();
    let grpc_status = |h: &http::HeaderMap| {
        h.get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u32>().ok())
            .map(|code| {
                let message = h
                    .get("grpc-message")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                (code, message)
            })
    };
    if status == http::StatusCode::NOT_FOUND {
        return Ok(Asked::Unimplemented("HTTP 404".into()));
    }
    if status != http::StatusCode::OK {
        bail!("{service}: HTTP {status}");
    }
    // A status in the headers (a trailers-only answer): no message follows.
    let head_status = grpc_status(response.headers());
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    if head_status.is_none() {
        while let Some(chunk) = body.data().await {
            let chunk = chunk?;
            let _ = body.flow_control().release_capacity(chunk.len());
            bytes.extend_from_slice(&chunk);
        }
    }
    let trailers = match head_status {
        Some(s) => Some(s),
        None => body.trailers().await?.as_ref().and_then(grpc_status),
    };
    match trailers {
        Some((0, _)) => {}
        Some((12, message)) if message.is_empty() => {
            return Ok(Asked::Unimplemented("UNIMPLEMENTED".into()))
        }
        Some((12, message)) => {
            return Ok(Asked::Unimplemented(format!("UNIMPLEMENTED: {message}")))
        }
        Some((code, message)) => bail!(
            "{service} answered {:?} with status {} {message}",
            q,
            loadlab_grpc::GrpcStatus::from_code(code)
                .map_or_else(|| code.to_string(), |s| s.name().to_string())
        ),
        None => bail!("{service}: the stream ended with no grpc-status"),
    }
    let mut answers = reflection::answers(&bytes)?;
    if answers.len() != 1 {
        bail!(
            "{service} answered one query with {} messages",
            answers.len()
        );
    }
    Ok(Asked::Answer(answers.pop().expect("one")))
}

//! gRPC clients of `hello.HelloService`, for `/grpc_wait`, `/fgrpc_wait` and `/grpc_per`.
//!
//! The clients run on a small runtime of their own, so a worker that blocks on a call does
//! not stall the connection it waits on. Every TCP connection a client opens is counted.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use loadlab_target_common::proto::hello::hello_service_client::HelloServiceClient;
use loadlab_target_common::proto::hello::HelloRequest;
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::background::Background;

/// The request every gRPC endpoint sends, as in the source.
const REQUEST_ID: &str = "000001";
const REQUEST_MESSAGE: &str = "rustacean loves rust";

/// Threads of the runtime that drives the clients' connections.
const CLIENT_THREADS: usize = 2;

/// Which client a call uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Client {
    /// The one client created at start and shared by every request (one connection).
    Shared,
    /// A client created for this request (a new connection), dropped afterwards.
    PerRequest,
}

/// A call to the backend failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GrpcError {
    #[error("cannot connect to the gRPC backend")]
    Connect(#[source] tonic::transport::Error),
    #[error("gRPC call failed")]
    Call(#[source] tonic::Status),
    #[error("gRPC client runtime stopped")]
    Stopped,
}

/// The gRPC counters, as reported by `/stats`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GrpcStats {
    /// The backend's URI (`--grpc-backend`).
    pub backend: String,
    /// Connections opened by the shared client (1 unless the backend went away).
    pub shared_client_connections: u64,
    /// Connections opened by per-request clients (one per `/grpc_per` call).
    pub per_request_connections: u64,
    /// Calls that failed.
    pub errors: u64,
}

pub(crate) struct GrpcClients {
    runtime: Background,
    endpoint: Endpoint,
    shared: HelloServiceClient<Channel>,
    shared_connections: Arc<AtomicU64>,
    per_request_connections: Arc<AtomicU64>,
    errors: AtomicU64,
}

/// Connects over TCP to the URI's authority and counts the connection in `opened`.
fn counting_connector(
    opened: Arc<AtomicU64>,
) -> impl tower::Service<
    Uri,
    Response = TokioIo<TcpStream>,
    Error = io::Error,
    Future = impl Future<Output = io::Result<TokioIo<TcpStream>>> + Send,
> + Send
       + Clone
       + 'static {
    tower::service_fn(move |uri: Uri| {
        let opened = Arc::clone(&opened);
        async move {
            let authority = uri.authority().ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "backend URI has no host")
            })?;
            let stream = TcpStream::connect(authority.as_str()).await?;
            stream.set_nodelay(true)?;
            opened.fetch_add(1, Relaxed);
            Ok(TokioIo::new(stream))
        }
    })
}

impl GrpcClients {
    /// Creates the client runtime and the shared client; the shared client connects on its
    /// first call.
    pub(crate) fn new(backend: Uri) -> io::Result<Self> {
        let runtime = Background::new("loadlab-grpc", |b| {
            b.worker_threads(CLIENT_THREADS).enable_all()
        })?;
        let endpoint = Endpoint::from(backend).connect_timeout(Duration::from_secs(1));
        let shared_connections = Arc::new(AtomicU64::new(0));
        let channel = {
            let _inside = runtime.handle().enter(); // the channel's task runs there
            endpoint
                .connect_with_connector_lazy(counting_connector(Arc::clone(&shared_connections)))
        };
        Ok(GrpcClients {
            runtime,
            endpoint,
            shared: HelloServiceClient::new(channel),
            shared_connections,
            per_request_connections: Arc::new(AtomicU64::new(0)),
            errors: AtomicU64::new(0),
        })
    }

    /// Calls `Say` with the given client and returns the backend's message. The call runs
    /// on the client runtime; the caller only waits for its result.
    pub(crate) async fn say(&self, client: Client) -> Result<String, GrpcError> {
        let request = HelloRequest {
            id: REQUEST_ID.into(),
            message: REQUEST_MESSAGE.into(),
        };
        let shared = self.shared.clone();
        let endpoint = self.endpoint.clone();
        let connector = counting_connector(Arc::clone(&self.per_request_connections));
        let call = async move {
            let mut client = match client {
                Client::Shared => shared,
                Client::PerRequest => endpoint
                    .connect_with_connector(connector)
                    .await
                    .map(HelloServiceClient::new)
                    .map_err(GrpcError::Connect)?,
            };
            let response = client.say(request).await.map_err(GrpcError::Call)?;
            Ok(response.into_inner().message)
        };
        let result = self
            .runtime
            .handle()
            .spawn(call)
            .await
            .unwrap_or(Err(GrpcError::Stopped));
        if result.is_err() {
            self.errors.fetch_add(1, Relaxed);
        }
        result
    }

    pub(crate) fn stats(&self) -> GrpcStats {
        GrpcStats {
            backend: self.endpoint.uri().to_string(),
            shared_client_connections: self.shared_connections.load(Relaxed),
            per_request_connections: self.per_request_connections.load(Relaxed),
            errors: self.errors.load(Relaxed),
        }
    }
}

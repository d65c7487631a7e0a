//! `hello.HelloService`: answers `Say` after a delay drawn from the latency model.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use loadlab_target_common::proto::hello::hello_service_server::HelloService;
use loadlab_target_common::proto::hello::{HelloRequest, HelloResponse};
use tonic::{Request, Response, Status};

use crate::{Counters, LatencyModel};

/// The answer to one `Say` call, without the delay: the same `id`, and `hello, <message>`.
pub fn answer(request: &HelloRequest) -> HelloResponse {
    HelloResponse {
        id: request.id.clone(),
        message: format!("hello, {}", request.message),
    }
}

pub(crate) struct Hello {
    pub(crate) latency: LatencyModel,
    pub(crate) counters: Arc<Counters>,
}

#[tonic::async_trait]
impl HelloService for Hello {
    async fn say(&self, request: Request<HelloRequest>) -> Result<Response<HelloResponse>, Status> {
        self.counters.say_calls.fetch_add(1, Relaxed);
        let delay = self.latency.sample(&mut rand::thread_rng());
        tokio::time::sleep(delay).await;
        Ok(Response::new(answer(request.get_ref())))
    }
}

//! The `helloworld.Greeter` service of document 001.
//!
//! [`reply`] holds the whole behaviour and depends on no runtime; [`GreeterService`] serves
//! it with tonic on tokio. Servers built on other runtimes call [`reply`] directly.

use tonic::{Request, Response, Status};

use crate::proto::helloworld::greeter_server::{Greeter, GreeterServer};
use crate::proto::helloworld::{HelloReply, HelloRequest};

/// Answers one `SayHello` call: `Hello <name>!`.
pub fn reply(request: &HelloRequest) -> HelloReply {
    HelloReply {
        message: format!("Hello {}!", request.name),
    }
}

/// The tonic implementation of `helloworld.Greeter`, answering at once.
#[derive(Debug, Default, Clone, Copy)]
pub struct GreeterService;

impl GreeterService {
    /// Wraps the service for `tonic::transport::Server::add_service`.
    pub fn into_server(self) -> GreeterServer<Self> {
        GreeterServer::new(self)
    }
}

#[tonic::async_trait]
impl Greeter for GreeterService {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        Ok(Response::new(reply(request.get_ref())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_greets_by_name() {
        let request = HelloRequest {
            name: "loadlab".into(),
        };
        assert_eq!(reply(&request).message, "Hello loadlab!");
    }

    #[tokio::test]
    async fn service_answers_with_reply() {
        let request = HelloRequest {
            name: "tonic".into(),
        };
        let response = GreeterService
            .say_hello(Request::new(request))
            .await
            .unwrap();
        assert_eq!(response.get_ref().message, "Hello tonic!");
    }
}

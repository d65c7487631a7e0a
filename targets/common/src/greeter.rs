//! The `helloworld.Greeter` service of document 001, and the echo `ticker.Ticker/Chat` and
//! the counting `ticker.Ticker/Upload` the runtimes are compared on streams with.
//!
//! [`reply`] holds the whole behaviour and depends on no runtime; [`GreeterService`] serves
//! it with tonic on tokio. Servers built on other runtimes call [`reply`] directly.
//! [`ChatService`] serves the echo and the upload with tonic (the others echo each frame as
//! it comes, and count each note with [`count_note`]).

use tonic::{Request, Response, Status};

use crate::proto::helloworld::greeter_server::{Greeter, GreeterServer};
use crate::proto::helloworld::{HelloReply, HelloRequest};
use crate::proto::ticker::ticker_server::{Ticker, TickerServer};
use crate::proto::ticker::{Note, Receipt, SubscribeRequest, Tick};

/// Answers one `SayHello` call: `Hello <name>!`.
pub fn reply(request: &HelloRequest) -> HelloReply {
    HelloReply {
        message: format!("Hello {}!", request.name),
    }
}

/// Counts one note of an `Upload` call into its receipt: the notes, and the last one's seq.
pub fn count_note(receipt: &mut Receipt, note: &Note) {
    receipt.notes += 1;
    receipt.last_seq = note.seq;
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

/// The tonic implementation of `ticker.Ticker/Chat` as an echo: each note answered by
/// itself, in order, the call ending when the client's side does; `Upload` counts the
/// notes and answers once the client's side ends (`Subscribe` is not served).
#[derive(Debug, Default, Clone, Copy)]
pub struct ChatService;

impl ChatService {
    /// Wraps the service for `tonic::transport::Server::add_service`.
    pub fn into_server(self) -> TickerServer<Self> {
        TickerServer::new(self)
    }
}

/// The stream of answers of one echo call.
type Echo = tonic::codegen::BoxStream<Note>;

#[tonic::async_trait]
impl Ticker for ChatService {
    type SubscribeStream = tonic::codegen::BoxStream<Tick>;

    async fn subscribe(
        &self,
        _request: Request<SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        Err(Status::unimplemented(
            "the greeters serve Chat and Upload only",
        ))
    }

    type ChatStream = Echo;

    async fn chat(
        &self,
        request: Request<tonic::Streaming<Note>>,
    ) -> Result<Response<Self::ChatStream>, Status> {
        Ok(Response::new(Box::pin(request.into_inner())))
    }

    async fn upload(
        &self,
        request: Request<tonic::Streaming<Note>>,
    ) -> Result<Response<Receipt>, Status> {
        let mut inbound = request.into_inner();
        let mut receipt = Receipt::default();
        while let Some(note) = inbound.message().await? {
            count_note(&mut receipt, &note);
        }
        Ok(Response::new(receipt))
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

//! One HTTP/2 connection serving `helloworld.Greeter/SayHello`, `ticker.Ticker/Chat` (an
//! echo: each message answered by itself, in order) and `ticker.Ticker/Upload` (client
//! streaming: the notes counted, one receipt when the client's side ends) with the `h2`
//! crate, for the runtimes tonic does not run on.
//!
//! `h2` needs only `tokio::io::AsyncRead + AsyncWrite`, not the tokio runtime, so each
//! runtime hands [`serve`] its TCP stream through a compat adapter. All calls of a
//! connection run inside the one future [`serve`] returns (no task per call), so the same
//! code works on work-stealing executors and on thread-per-core ones whose tasks are not
//! `Send`.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::task::Poll;

use bytes::{Bytes, BytesMut};
use futures::stream::{FuturesUnordered, StreamExt};
use h2::server::SendResponse;
use h2::RecvStream;
use http::{Method, Request};
use loadlab_target_common::greeter;
use loadlab_target_common::proto::helloworld::HelloRequest;
use loadlab_target_common::proto::ticker::{Note, Receipt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

use crate::grpc::{self, Failure};

/// The unary method served.
pub const SAY_HELLO_PATH: &str = "/helloworld.Greeter/SayHello";
/// The bidirectional method served: each message echoed as it comes.
pub const CHAT_PATH: &str = "/ticker.Ticker/Chat";
/// The client-streaming method served: the notes counted, one receipt at the end.
pub const UPLOAD_PATH: &str = "/ticker.Ticker/Upload";

/// HTTP/2 settings, matched to hyper's server defaults (what tonic serves with), so that
/// the runtimes differ only in the runtime.
fn builder() -> h2::server::Builder {
    let mut builder = h2::server::Builder::new();
    builder
        .initial_window_size(1024 * 1024)
        .initial_connection_window_size(1024 * 1024)
        .max_frame_size(16 * 1024)
        .max_send_buffer_size(400 * 1024)
        .max_header_list_size(16 * 1024);
    builder
}

/// Serves gRPC calls on `io` until the client closes the connection, or until `stop` is
/// cancelled: then the server sends `GOAWAY`, finishes the calls in flight and returns.
///
/// An error is the connection's (a reset, a protocol violation, an I/O error); calls that
/// fail on their own stream do not end the connection.
pub async fn serve<T>(io: T, stop: CancellationToken) -> Result<(), h2::Error>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let mut stopped = pin!(stop.cancelled_owned());
    let mut connection = tokio::select! {
        // `biased`: no random start, so nothing here needs a tokio runtime.
        biased;
        handshake = builder().handshake::<T, Bytes>(io) => handshake?,
        () = &mut stopped => return Ok(()),
    };
    let mut calls = FuturesUnordered::new();
    let mut draining = false;
    loop {
        let event = poll_fn(|cx| {
            if !draining && stopped.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            // A call's error concerns its own stream only (for example a client reset).
            while let Poll::Ready(Some(_)) = calls.poll_next_unpin(cx) {}
            // Also flushes what the calls above wrote.
            connection.poll_accept(cx).map(Some)
        })
        .await;
        match event {
            None => {
                draining = true;
                connection.graceful_shutdown();
            }
            Some(Some(Ok((request, respond)))) => calls.push(answer(request, respond)),
            // After GOAWAY, a client closing the connection is the expected end.
            Some(Some(Err(_))) if draining => return Ok(()),
            Some(Some(Err(error))) => return Err(error),
            Some(None) => return Ok(()),
        }
    }
}

/// Answers one call: route, read the request message, reply with [`greeter::reply`].
async fn answer(
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
) -> Result<(), h2::Error> {
    let (head, mut body) = request.into_parts();
    if !grpc::is_grpc_content_type(head.headers.get(http::header::CONTENT_TYPE)) {
        respond.send_response(grpc::not_grpc_response(), true)?;
        return Ok(());
    }
    if head.method == Method::POST && head.uri.path() == CHAT_PATH {
        return chat(body, respond).await;
    }
    if head.method == Method::POST && head.uri.path() == UPLOAD_PATH {
        return upload(body, respond).await;
    }
    if head.method != Method::POST || head.uri.path() != SAY_HELLO_PATH {
        respond.send_response(grpc::failure_response(Failure::UNIMPLEMENTED), true)?;
        return Ok(());
    }
    let mut message = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        body.flow_control().release_capacity(chunk.len())?;
        if message.len() + chunk.len() > grpc::MAX_MESSAGE_SIZE + 5 {
            respond.send_response(grpc::failure_response(Failure::TOO_LARGE), true)?;
            return Ok(());
        }
        message.extend_from_slice(&chunk);
    }
    let request = match grpc::decode_unary::<HelloRequest>(&message) {
        Ok(request) => request,
        Err(failure) => {
            respond.send_response(grpc::failure_response(failure), true)?;
            return Ok(());
        }
    };
    let reply = grpc::encode(&greeter::reply(&request));
    let mut stream = respond.send_response(grpc::response_headers(), false)?;
    stream.send_data(reply, false)?;
    stream.send_trailers(grpc::ok_trailers())?;
    Ok(())
}

/// A call's request stream, one length-prefixed message at a time, each as it completes.
struct Messages {
    body: RecvStream,
    /// Bytes read and not yet a whole message.
    pending: BytesMut,
}

impl Messages {
    fn new(body: RecvStream) -> Messages {
        Messages {
            body,
            pending: BytesMut::new(),
        }
    }

    /// The next whole message in its frame; `None` once the client's side ended. A frame
    /// over the size limit or compressed, or a side that ends inside a frame, is that
    /// failure.
    async fn next(&mut self) -> Result<Option<Result<Bytes, Failure>>, h2::Error> {
        loop {
            match grpc::frame_len(&self.pending) {
                Some(Err(failure)) => return Ok(Some(Err(failure))),
                Some(Ok(n)) if self.pending.len() >= n => {
                    return Ok(Some(Ok(self.pending.split_to(n).freeze())));
                }
                _ => {}
            }
            match self.body.data().await {
                Some(chunk) => {
                    let chunk = chunk?;
                    self.body.flow_control().release_capacity(chunk.len())?;
                    self.pending.extend_from_slice(&chunk);
                }
                None if self.pending.is_empty() => return Ok(None),
                None => return Ok(Some(Err(Failure::BAD_FRAME))),
            }
        }
    }
}

/// Answers a `Chat` call: each length-prefixed message of the request stream is sent back
/// as it completes (the echo `greeter::chat` is, without decoding it), and the call ends
/// `OK` when the client's side does. A message over the size limit ends it with
/// `RESOURCE_EXHAUSTED`, a side that ends inside a message with `INTERNAL`.
async fn chat(body: RecvStream, mut respond: SendResponse<Bytes>) -> Result<(), h2::Error> {
    let mut stream = respond.send_response(grpc::response_headers(), false)?;
    let mut messages = Messages::new(body);
    while let Some(message) = messages.next().await? {
        match message {
            Ok(frame) => stream.send_data(frame, false)?,
            Err(failure) => {
                stream.send_trailers(grpc::failure_trailers(failure))?;
                return Ok(());
            }
        }
    }
    stream.send_trailers(grpc::ok_trailers())?;
    Ok(())
}

/// Answers an `Upload` call: each length-prefixed note of the request stream is decoded and
/// counted as it completes ([`greeter::count_note`], as tonic's greeter does), and once the
/// client's side ends the receipt goes, then `OK`. A note that does not decode, or a
/// stream that ends inside one, ends the call with its failure.
async fn upload(body: RecvStream, mut respond: SendResponse<Bytes>) -> Result<(), h2::Error> {
    let mut messages = Messages::new(body);
    let mut receipt = Receipt::default();
    while let Some(message) = messages.next().await? {
        match message.and_then(|frame| grpc::decode_unary::<Note>(&frame)) {
            Ok(note) => greeter::count_note(&mut receipt, &note),
            Err(failure) => {
                respond.send_response(grpc::failure_response(failure), true)?;
                return Ok(());
            }
        }
    }
    let mut stream = respond.send_response(grpc::response_headers(), false)?;
    stream.send_data(grpc::encode(&receipt), false)?;
    stream.send_trailers(grpc::ok_trailers())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_target_common::proto::helloworld::HelloReply;
    use std::time::Duration;

    /// Runs [`serve`] over an in-memory pipe and returns an h2 client for it.
    async fn connect(stop: CancellationToken) -> (h2::client::SendRequest<Bytes>, ServerTask) {
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let server = tokio::spawn(serve(server_io, stop));
        let (client, connection) = h2::client::handshake(client_io).await.unwrap();
        tokio::spawn(async move {
            let _ = connection.await;
        });
        (client, server)
    }

    type ServerTask = tokio::task::JoinHandle<Result<(), h2::Error>>;

    struct Answer {
        status: u16,
        headers: http::HeaderMap,
        body: Bytes,
        trailers: Option<http::HeaderMap>,
    }

    async fn call(
        client: &h2::client::SendRequest<Bytes>,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> Answer {
        let request = Request::post(format!("http://localhost{path}"))
            .header("content-type", content_type)
            .header("te", "trailers")
            .body(())
            .unwrap();
        let mut ready = client.clone().ready().await.unwrap();
        let (response, mut send) = ready.send_request(request, false).unwrap();
        send.send_data(body, true).unwrap();
        let response = response.await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let mut recv = response.into_body();
        let mut collected = BytesMut::new();
        while let Some(chunk) = recv.data().await {
            let chunk = chunk.unwrap();
            recv.flow_control().release_capacity(chunk.len()).unwrap();
            collected.extend_from_slice(&chunk);
        }
        let trailers = recv.trailers().await.unwrap();
        Answer {
            status,
            headers,
            body: collected.freeze(),
            trailers,
        }
    }

    fn hello(name: &str) -> Bytes {
        grpc::encode(&HelloRequest { name: name.into() })
    }

    #[tokio::test]
    async fn say_hello_replies_with_greeter_reply() {
        let (client, _server) = connect(CancellationToken::new()).await;
        let answer = call(&client, SAY_HELLO_PATH, "application/grpc", hello("h2")).await;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.headers["content-type"], "application/grpc");
        let reply: HelloReply = grpc::decode_unary(&answer.body).unwrap();
        let expected = greeter::reply(&HelloRequest { name: "h2".into() });
        assert_eq!(reply, expected);
        assert_eq!(answer.trailers.unwrap()["grpc-status"], "0");
    }

    #[tokio::test]
    async fn chat_echoes_each_message_in_order_and_ends_ok() {
        let (client, _server) = connect(CancellationToken::new()).await;
        let notes: Vec<Bytes> = (1..=3).map(|n| hello(&format!("note {n}"))).collect();
        // The three messages in one body, the second split across two DATA frames' worth.
        let mut body = BytesMut::new();
        for n in &notes {
            body.extend_from_slice(n);
        }
        let answer = call(&client, CHAT_PATH, "application/grpc", body.freeze()).await;
        assert_eq!(answer.status, 200);
        let mut want = BytesMut::new();
        for n in &notes {
            want.extend_from_slice(n);
        }
        assert_eq!(answer.body, want.freeze());
        assert_eq!(answer.trailers.unwrap()["grpc-status"], "0");
    }

    #[tokio::test]
    async fn upload_counts_the_notes_and_answers_once_with_the_last_seq() {
        let (client, _server) = connect(CancellationToken::new()).await;
        let mut body = BytesMut::new();
        for seq in [4, 5, 9] {
            body.extend_from_slice(&grpc::encode(&Note {
                seq,
                text: "n".into(),
                ..Default::default()
            }));
        }
        let answer = call(&client, UPLOAD_PATH, "application/grpc", body.freeze()).await;
        assert_eq!(answer.status, 200);
        let receipt: Receipt = grpc::decode_unary(&answer.body).unwrap();
        assert_eq!((receipt.notes, receipt.last_seq), (3, 9));
        assert_eq!(answer.trailers.unwrap()["grpc-status"], "0");
        // A stream that ends inside a note is a bad frame, not a receipt.
        let half = grpc::encode(&Note::default()).slice(..3);
        let answer = call(&client, UPLOAD_PATH, "application/grpc", half).await;
        assert_eq!(answer.headers["grpc-status"], "13", "{:?}", answer.headers);
        assert!(answer.body.is_empty());
    }

    #[tokio::test]
    async fn unknown_method_is_unimplemented() {
        let (client, _server) = connect(CancellationToken::new()).await;
        let answer = call(
            &client,
            "/helloworld.Greeter/SayGoodbye",
            "application/grpc",
            hello("x"),
        )
        .await;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.headers["grpc-status"], "12");
        assert!(answer.body.is_empty());
    }

    #[tokio::test]
    async fn bad_requests_end_with_a_status() {
        let (client, _server) = connect(CancellationToken::new()).await;
        let answer = call(&client, SAY_HELLO_PATH, "application/json", Bytes::new()).await;
        assert_eq!(answer.status, 415);
        let answer = call(
            &client,
            SAY_HELLO_PATH,
            "application/grpc",
            Bytes::from_static(&[0, 0]),
        )
        .await;
        assert_eq!(answer.headers["grpc-status"], "13");
        // The connection still serves after failed calls.
        let answer = call(&client, SAY_HELLO_PATH, "application/grpc", hello("again")).await;
        assert_eq!(answer.trailers.unwrap()["grpc-status"], "0");
    }

    #[tokio::test]
    async fn stop_ends_an_idle_connection() {
        let stop = CancellationToken::new();
        let (client, server) = connect(stop.clone()).await;
        let answer = call(&client, SAY_HELLO_PATH, "application/grpc", hello("a")).await;
        assert_eq!(answer.trailers.unwrap()["grpc-status"], "0");
        stop.cancel();
        let result = tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("server returns after stop")
            .unwrap();
        assert!(result.is_ok(), "{result:?}");
    }
}

//! A flow's event-stream steps (`sse = true` in a flow): each session's event stream,
//! opened at a step's path by the first step that names it (its request, rendered as an
//! HTTP step's is, on a connection of its own), kept for the next steps at that path, and
//! dropped when the session ends. Each step waits for the stream's next event whose data
//! holds the step's `reply_contains` (the others passed over): the first token of an
//! answer, then its `[DONE]`.

use tokio::io::AsyncWriteExt;

use super::{read_step, Decoder, Step, EVENT_STATUS};
use crate::conn::Conn;
use crate::error::ErrorClass;
use crate::transport::io::{holds, FlowReply, Io};

/// One session's event stream, if it has one open.
#[derive(Default)]
pub(crate) struct FlowStream {
    open: Option<Open>,
    /// The last reply's data (its `data:` lines joined): what extract rules read.
    reply: Vec<u8>,
}

struct Open {
    path: String,
    conn: Conn,
    decoder: Decoder,
    buf: Vec<u8>,
    pos: usize,
}

impl FlowStream {
    /// The last reply's data.
    pub(crate) fn reply(&self) -> &[u8] {
        &self.reply
    }

    /// Whether a stream is open.
    pub(crate) fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Drops the stream (after a failure, or when the session ends).
    pub(crate) fn close(&mut self) {
        self.open = None;
    }

    /// Waits for the next event at `path` that holds `expected`, opening the stream first
    /// with `request` (a whole HTTP/1.1 request) if the session has none there (one at
    /// another path is dropped).
    pub(crate) async fn exchange(
        &mut self,
        io: &Io,
        path: &str,
        request: &[u8],
        expected: Option<&[u8]>,
    ) -> Result<FlowReply, ErrorClass> {
        if self.open.as_ref().is_some_and(|o| o.path != path) {
            self.open = None;
        }
        let opened = self.open.is_none();
        let mut sent = io.clock.now();
        if opened {
            let c0 = io.clock.now();
            let mut conn = io.connector.connect().await?;
            io.recorder.borrow_mut().connect(io.clock.now() - c0);
            sent = io.clock.now();
            conn.write_all(request)
                .await
                .map_err(|e| ErrorClass::from_io(&e, false))?;
            self.open = Some(Open {
                path: path.to_string(),
                conn,
                decoder: Decoder::keeping_data(true),
                buf: Vec::with_capacity(4096),
                pos: 0,
            });
        }
        let o = self.open.as_mut().expect("opened above");
        loop {
            match read_step(&mut o.conn, &mut o.decoder, &mut o.buf, &mut o.pos).await {
                Ok(Step::Event { data, .. }) => {
                    let data = data.unwrap_or_default();
                    if holds(&data, expected) {
                        self.reply = data;
                        return Ok(FlowReply {
                            status: EVENT_STATUS,
                            sent,
                            done: io.clock.now(),
                            opened,
                        });
                    }
                }
                Ok(Step::Retry(_)) => {}
                // 204 No Content ("stop reconnecting"): no event will come.
                Ok(Step::Refused(status)) if status < 400 => {
                    self.open = None;
                    return Err(ErrorClass::ConnectionClosed);
                }
                Ok(Step::Refused(status)) => {
                    self.open = None;
                    return Ok(FlowReply {
                        status,
                        sent,
                        done: io.clock.now(),
                        opened,
                    });
                }
                // The server ended the stream before the event the step waits for.
                Ok(Step::Ended) => {
                    self.open = None;
                    return Err(ErrorClass::ConnectionClosed);
                }
                Err(class) => {
                    self.open = None;
                    return Err(class);
                }
            }
        }
    }
}

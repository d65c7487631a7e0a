//! The HTTP/1.1 response reader on any bytes, split into reads at points the input picks:
//! responses or `malformed_response` / `connection_closed`, never a panic.
#![no_main]

use std::pin::Pin;
use std::task::{Context, Poll};

use libfuzzer_sys::fuzz_target;
use loadlab_engine::transport::http1::ResponseReader;
use loadlab_engine::ErrorClass;
use tokio::io::{AsyncRead, ReadBuf};

/// Hands out `data` in reads of `step` bytes.
struct Pieces<'a> {
    data: &'a [u8],
    step: usize,
}

impl AsyncRead for Pieces<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let n = self.data.len().min(self.step).min(buf.remaining());
        buf.put_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Poll::Ready(Ok(()))
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&first, data)) = input.split_first() else {
        return;
    };
    let step = usize::from(first % 64) + 1;
    let method = if first & 0x80 != 0 { "HEAD" } else { "GET" };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut s = Pieces { data, step };
        let mut r = ResponseReader::new(method);
        for _ in 0..8 {
            match r.read(&mut s).await {
                Ok(_) => {}
                Err(ErrorClass::MalformedResponse | ErrorClass::ConnectionClosed) => break,
                Err(e) => panic!("unexpected error class {e:?} from a stream that just ends"),
            }
        }
    });
});

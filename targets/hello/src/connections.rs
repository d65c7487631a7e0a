//! Accepted connections, counted: how many the backend accepted and how many are open.

use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_stream::wrappers::TcpListenerStream;
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::Counters;

/// The listener's connections as a stream for tonic, each counted on accept and on close.
pub(crate) fn incoming(
    listener: TcpListener,
    counters: Arc<Counters>,
) -> impl Stream<Item = io::Result<CountedStream>> {
    TcpListenerStream::new(listener).map(move |accepted| {
        let stream = accepted?;
        stream.set_nodelay(true)?;
        Ok(CountedStream::new(stream, Arc::clone(&counters)))
    })
}

/// A TCP stream that keeps the open-connection count of [`Counters`] (`open`) up to date.
pub(crate) struct CountedStream {
    inner: TcpStream,
    counters: Arc<Counters>,
}

impl CountedStream {
    fn new(inner: TcpStream, counters: Arc<Counters>) -> Self {
        counters.accepted.fetch_add(1, Relaxed);
        counters.open.fetch_add(1, Relaxed);
        CountedStream { inner, counters }
    }
}

impl Drop for CountedStream {
    fn drop(&mut self) {
        self.counters.open.fetch_sub(1, Relaxed);
    }
}

impl Connected for CountedStream {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

impl AsyncRead for CountedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for CountedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

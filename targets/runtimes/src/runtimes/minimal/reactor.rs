//! The reactor of one thread: epoll or an io_uring ring, the sockets' state, and the
//! socket types h2 reads and writes through ([`TcpStream`], [`TcpListener`]).
//!
//! Every socket has a slot in the reactor. In the io_uring modes an operation's
//! `user_data` is the slot's key and the operation's kind, and the slot holds the buffers
//! the kernel uses and the descriptor; both are released only once the socket's handle is
//! dropped and its last completion reaped.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::net::TcpListener as StdListener;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use io_uring::{opcode, squeue, types, IoUring};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::wakeups::{spend_budget, Wakeups};
use super::IoMode;
use crate::uring;

/// The bytes one `RECV` may bring (an h2 frame is at most 16 KiB plus its header).
const RECV_BUFFER: usize = 16 * 1024;
/// Bytes `poll_write` accepts into a socket's send buffer before it waits for the kernel.
const SEND_BUFFER: usize = 64 * 1024;
/// Events one `epoll_wait` returns.
const EPOLL_EVENTS: usize = 256;

/// The `user_data` (and epoll data) of the executor's eventfd.
const WAKE: u64 = u64::MAX;

/// What an io_uring operation was, in the low bits of its `user_data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Recv = 0,
    Send = 1,
    PollIn = 2,
    PollOut = 3,
    Accept = 4,
    Cancel = 5,
}

const OP_BITS: u32 = 3;

impl Op {
    fn user_data(self, key: usize) -> u64 {
        ((key as u64) << OP_BITS) | self as u64
    }

    fn decode(user_data: u64) -> (usize, Option<Op>) {
        let key = (user_data >> OP_BITS) as usize;
        let op = match user_data & ((1 << OP_BITS) - 1) {
            0 => Some(Op::Recv),
            1 => Some(Op::Send),
            2 => Some(Op::PollIn),
            3 => Some(Op::PollOut),
            4 => Some(Op::Accept),
            _ => None,
        };
        (key, op)
    }
}

/// One socket's state in the reactor.
#[derive(Default)]
struct Socket {
    fd: RawFd,
    /// The [`TcpStream`] or [`TcpListener`] still exists.
    open: bool,
    /// io_uring operations submitted and not yet completed.
    in_flight: u32,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
    /// uring-poll: a `POLL_ADD` for `POLLIN` / `POLLOUT` is armed.
    poll_in: bool,
    poll_out: bool,
    /// uring and hybrid: received bytes not yet read, `recv[start..end]`.
    recv: Vec<u8>,
    start: usize,
    end: usize,
    recv_busy: bool,
    eof: bool,
    /// uring and hybrid: the bytes of the `SEND` in flight (from `sent`), and those
    /// written meanwhile, sent next.
    sending: Vec<u8>,
    sent: usize,
    staged: Vec<u8>,
    send_busy: bool,
    /// The errno a completion reported, returned by the next read or write.
    error: Option<i32>,
    /// A listener's accepted descriptors, and whether an `ACCEPT` is in flight.
    accepted: VecDeque<RawFd>,
    accept_busy: bool,
}

enum Driver {
    Epoll {
        epoll: OwnedFd,
        events: Vec<libc::epoll_event>,
    },
    Uring(Box<IoUring>),
}

struct Inner {
    driver: Driver,
    sockets: Vec<Option<Socket>>,
    free: Vec<usize>,
    /// The completions of one turn (`user_data`, result), reused.
    completions: Vec<(u64, i32)>,
    /// Entries the ring could not take yet (see `Inner::push`).
    backlog: VecDeque<squeue::Entry>,
}

/// One thread's reactor.
pub(super) struct Reactor {
    mode: IoMode,
    wakeups: Arc<Wakeups>,
    inner: RefCell<Inner>,
}

impl Reactor {
    /// Creates the epoll instance, or the io_uring ring (whose refusal is the error), and
    /// watches the executor's eventfd.
    pub(super) fn new(mode: IoMode, wakeups: Arc<Wakeups>) -> io::Result<Self> {
        let driver = if mode.uses_io_uring() {
            // A completion queue four times the submission queue: a turn may reap the
            // completions of several submissions (receives, sends, polls of every socket).
            let ring = IoUring::builder()
                .setup_cqsize(4 * uring::MINIMAL.entries)
                .build(uring::MINIMAL.entries)?;
            Driver::Uring(Box::new(ring))
        } else {
            // SAFETY: epoll_create1(2) with a valid flag; checked below.
            let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            Driver::Epoll {
                // SAFETY: a new descriptor that nothing else owns.
                epoll: unsafe { OwnedFd::from_raw_fd(fd) },
                events: Vec::with_capacity(EPOLL_EVENTS),
            }
        };
        let reactor = Reactor {
            mode,
            wakeups,
            inner: RefCell::new(Inner {
                driver,
                sockets: Vec::new(),
                free: Vec::new(),
                completions: Vec::new(),
                backlog: VecDeque::new(),
            }),
        };
        {
            let mut inner = reactor.inner.borrow_mut();
            let eventfd = reactor.wakeups.eventfd();
            match &mut inner.driver {
                Driver::Epoll { epoll, .. } => {
                    epoll_add(epoll.as_raw_fd(), eventfd, libc::EPOLLIN as u32, WAKE)?;
                }
                Driver::Uring(_) => inner.push(poll_add(eventfd, libc::POLLIN).user_data(WAKE))?,
            }
        }
        Ok(reactor)
    }

    /// One turn: submits what the tasks queued, waits for an event if `idle` (no task is
    /// ready), and wakes the tasks whose I/O is ready or complete.
    pub(super) fn turn(&self, idle: bool) -> io::Result<()> {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        inner.drain_backlog();
        let block = idle && self.wakeups.park();
        let result = match &mut inner.driver {
            Driver::Epoll { epoll, events } => {
                let timeout = if block { -1 } else { 0 };
                // SAFETY: `events` has room for EPOLL_EVENTS entries, which the kernel
                // fills; the length is set to the count it returns.
                let n = unsafe {
                    libc::epoll_wait(
                        epoll.as_raw_fd(),
                        events.as_mut_ptr(),
                        EPOLL_EVENTS as i32,
                        timeout,
                    )
                };
                if n >= 0 {
                    // SAFETY: the kernel initialized the first `n` events.
                    unsafe { events.set_len(n as usize) };
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            }
            Driver::Uring(ring) => {
                // Submit the whole turn's entries in one call, and wait in that same call
                // when idle; then the completion queue is read at once (below), catching
                // the operations that completed during the submission itself.
                if block {
                    ring.submit_and_wait(1).map(drop)
                } else if !ring.submission().is_empty() {
                    ring.submit().map(drop)
                } else {
                    Ok(())
                }
            }
        };
        if block {
            self.wakeups.unpark();
        }
        match result {
            Ok(()) => {}
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::EINTR | libc::EBUSY | libc::EAGAIN)
                ) => {}
            Err(error) => return Err(error),
        }
        if let Driver::Epoll { events, .. } = &mut inner.driver {
            let events = std::mem::take(events);
            for event in &events {
                let (flags, key) = (event.events, event.u64);
                if key == WAKE {
                    self.wakeups.drain_eventfd();
                    continue;
                }
                let Some(socket) = inner.sockets.get_mut(key as usize).and_then(Option::as_mut)
                else {
                    continue;
                };
                let failed = (libc::EPOLLHUP | libc::EPOLLERR) as u32;
                if flags & (libc::EPOLLIN as u32 | libc::EPOLLRDHUP as u32 | failed) != 0 {
                    wake(&mut socket.read_waker);
                }
                if flags & (libc::EPOLLOUT as u32 | failed) != 0 {
                    wake(&mut socket.write_waker);
                }
            }
            if let Driver::Epoll { events: slot, .. } = &mut inner.driver {
                *slot = events;
                slot.clear();
            }
            return Ok(());
        }
        let mut completions = std::mem::take(&mut inner.completions);
        if let Driver::Uring(ring) = &mut inner.driver {
            completions.extend(ring.completion().map(|cqe| (cqe.user_data(), cqe.result())));
        }
        for (user_data, result) in completions.drain(..) {
            self.complete(inner, user_data, result)?;
        }
        inner.completions = completions;
        Ok(())
    }

    /// Handles one completion.
    fn complete(&self, inner: &mut Inner, user_data: u64, result: i32) -> io::Result<()> {
        if user_data == WAKE {
            self.wakeups.drain_eventfd();
            return inner.push(poll_add(self.wakeups.eventfd(), libc::POLLIN).user_data(WAKE));
        }
        let (key, op) = Op::decode(user_data);
        let Some(op) = op else {
            return Ok(()); // An ASYNC_CANCEL's own completion.
        };
        let mut resend = None;
        {
            let Some(socket) = inner.sockets.get_mut(key).and_then(Option::as_mut) else {
                return Ok(());
            };
            socket.in_flight -= 1;
            let error = (result < 0).then_some(-result);
            match op {
                Op::PollIn => {
                    socket.poll_in = false;
                    wake(&mut socket.read_waker);
                }
                Op::PollOut => {
                    socket.poll_out = false;
                    wake(&mut socket.write_waker);
                }
                Op::Recv => {
                    socket.recv_busy = false;
                    match error {
                        None if result == 0 => socket.eof = true,
                        None => (socket.start, socket.end) = (0, result as usize),
                        Some(libc::ECANCELED | libc::EAGAIN | libc::EINTR) => {}
                        Some(errno) => socket.error = Some(errno),
                    }
                    wake(&mut socket.read_waker);
                }
                Op::Send => {
                    socket.send_busy = false;
                    match error {
                        None => {
                            socket.sent += result as usize;
                            if socket.sent >= socket.sending.len() {
                                socket.sending.clear();
                                socket.sent = 0;
                                std::mem::swap(&mut socket.sending, &mut socket.staged);
                            }
                        }
                        Some(libc::EAGAIN | libc::EINTR) => {}
                        Some(errno) => {
                            socket.error = Some(errno);
                            socket.sending.clear();
                            socket.staged.clear();
                            socket.sent = 0;
                        }
                    }
                    if socket.open && socket.sent < socket.sending.len() {
                        resend = Some(start_send(socket, key));
                    }
                    wake(&mut socket.write_waker);
                }
                Op::Accept => {
                    socket.accept_busy = false;
                    match error {
                        None if socket.open => socket.accepted.push_back(result),
                        // SAFETY: a descriptor the kernel just created for us and that
                        // nothing else holds.
                        None => drop(unsafe { OwnedFd::from_raw_fd(result) }),
                        Some(libc::ECANCELED) => {}
                        Some(errno) => socket.error = Some(errno),
                    }
                    wake(&mut socket.read_waker);
                }
                Op::Cancel => {}
            }
        }
        if let Some(entry) = resend {
            inner.push(entry)?;
        }
        inner.release_if_done(key);
        Ok(())
    }

    /// Adds a socket (non-blocking or not as `mode` needs) and returns its key.
    fn register(&self, fd: RawFd, listener: bool) -> io::Result<usize> {
        let mut inner = self.inner.borrow_mut();
        let key = inner.free.pop().unwrap_or_else(|| {
            inner.sockets.push(None);
            inner.sockets.len() - 1
        });
        let socket = Socket {
            fd,
            open: true,
            ..Socket::default()
        };
        if let Driver::Epoll { epoll, .. } = &inner.driver {
            let mut events = libc::EPOLLIN | libc::EPOLLET;
            if !listener {
                events |= libc::EPOLLOUT | libc::EPOLLRDHUP;
            }
            if let Err(error) = epoll_add(epoll.as_raw_fd(), fd, events as u32, key as u64) {
                inner.free.push(key);
                return Err(error);
            }
        }
        inner.sockets[key] = Some(socket);
        Ok(key)
    }

    /// The socket's handle is gone: cancels its operations, then closes the descriptor and
    /// frees the slot once no completion is outstanding. The descriptor stays open until
    /// then, so that its number cannot go to a new connection while an entry naming it
    /// may still be waiting to be submitted.
    fn close(&self, key: usize) {
        let mut inner = self.inner.borrow_mut();
        let Some(socket) = inner.sockets.get_mut(key).and_then(Option::as_mut) else {
            return;
        };
        socket.open = false;
        socket.read_waker = None;
        socket.write_waker = None;
        for fd in socket.accepted.drain(..) {
            // SAFETY: accepted descriptors nobody else has seen.
            unsafe { libc::close(fd) };
        }
        let mut cancels = Vec::new();
        for (busy, op) in [
            (socket.recv_busy, Op::Recv),
            (socket.send_busy, Op::Send),
            (socket.poll_in, Op::PollIn),
            (socket.poll_out, Op::PollOut),
            (socket.accept_busy, Op::Accept),
        ] {
            if busy {
                cancels.push(
                    opcode::AsyncCancel::new(op.user_data(key))
                        .build()
                        .user_data(Op::Cancel.user_data(key)),
                );
            }
        }
        for cancel in cancels {
            // A failed push leaves the operation to complete on its own; the slot (and the
            // descriptor) wait for it either way.
            let _ = inner.push(cancel);
        }
        inner.release_if_done(key);
    }

    /// Waits for `key` to be readable (`read`) or writable: stores the waker and, in
    /// uring-poll, arms a `POLL_ADD`.
    fn wait_ready(
        &self,
        inner: &mut Inner,
        key: usize,
        read: bool,
        waker: &Waker,
    ) -> io::Result<()> {
        let socket = inner.socket(key);
        let (slot, armed) = if read {
            (&mut socket.read_waker, &mut socket.poll_in)
        } else {
            (&mut socket.write_waker, &mut socket.poll_out)
        };
        store(slot, waker);
        if self.mode == IoMode::UringPoll && !*armed {
            *armed = true;
            socket.in_flight += 1;
            let (events, op) = if read {
                (libc::POLLIN, Op::PollIn)
            } else {
                (libc::POLLOUT, Op::PollOut)
            };
            let entry = poll_add(socket.fd, events).user_data(op.user_data(key));
            inner.push(entry)?;
        }
        Ok(())
    }

    fn poll_read(
        &self,
        key: usize,
        cx: &Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !spend_budget(cx) {
            return Poll::Pending;
        }
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let socket = inner.socket(key);
        let fd = socket.fd;
        if self.mode == IoMode::Uring || self.mode == IoMode::Hybrid {
            if socket.start < socket.end {
                let n = (socket.end - socket.start).min(buf.remaining());
                buf.put_slice(&socket.recv[socket.start..socket.start + n]);
                socket.start += n;
                return Poll::Ready(Ok(()));
            }
            if let Some(errno) = socket.error {
                return Poll::Ready(Err(io::Error::from_raw_os_error(errno)));
            }
            if socket.eof {
                return Poll::Ready(Ok(()));
            }
            if socket.recv_busy {
                store(&mut socket.read_waker, cx.waker());
                return Poll::Pending;
            }
        }
        if self.mode != IoMode::Uring {
            let flags = if self.mode == IoMode::Hybrid {
                libc::MSG_DONTWAIT
            } else {
                0
            };
            loop {
                let unfilled = buf.initialize_unfilled();
                // SAFETY: receives at most `unfilled.len()` bytes into that initialized slice.
                let n =
                    unsafe { libc::recv(fd, unfilled.as_mut_ptr().cast(), unfilled.len(), flags) };
                if n >= 0 {
                    buf.advance(n as usize);
                    return Poll::Ready(Ok(()));
                }
                let error = io::Error::last_os_error();
                match error.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => break,
                    _ => return Poll::Ready(Err(error)),
                }
            }
            if self.mode != IoMode::Hybrid {
                return match self.wait_ready(inner, key, true, cx.waker()) {
                    Ok(()) => Poll::Pending,
                    Err(error) => Poll::Ready(Err(error)),
                };
            }
        }
        // uring, or hybrid whose recv would block: a RECV into the socket's buffer.
        let socket = inner.socket(key);
        if socket.recv.is_empty() {
            socket.recv = vec![0; RECV_BUFFER];
        }
        store(&mut socket.read_waker, cx.waker());
        socket.recv_busy = true;
        socket.in_flight += 1;
        let entry = opcode::Recv::new(types::Fd(fd), socket.recv.as_mut_ptr(), RECV_BUFFER as u32)
            .build()
            .user_data(Op::Recv.user_data(key));
        match inner.push(entry) {
            Ok(()) => Poll::Pending,
            Err(error) => Poll::Ready(Err(error)),
        }
    }

    fn poll_write(
        &self,
        key: usize,
        cx: &Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if !spend_budget(cx) {
            return Poll::Pending;
        }
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let socket = inner.socket(key);
        let fd = socket.fd;
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if let Some(errno) = socket.error {
            return Poll::Ready(Err(io::Error::from_raw_os_error(errno)));
        }
        let queued = socket.send_busy || !socket.staged.is_empty();
        if self.mode == IoMode::Epoll
            || self.mode == IoMode::UringPoll
            || (self.mode == IoMode::Hybrid && !queued)
        {
            let flags = if self.mode == IoMode::Hybrid {
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT
            } else {
                libc::MSG_NOSIGNAL
            };
            loop {
                match sendmsg(fd, bufs, flags) {
                    Ok(n) => return Poll::Ready(Ok(n)),
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                    Err(error) => return Poll::Ready(Err(error)),
                }
            }
            if self.mode != IoMode::Hybrid {
                return match self.wait_ready(inner, key, false, cx.waker()) {
                    Ok(()) => Poll::Pending,
                    Err(error) => Poll::Ready(Err(error)),
                };
            }
        }
        // uring, or hybrid whose send would block or is already queued: into the send
        // buffer, which a SEND carries.
        let socket = inner.socket(key);
        if socket.staged.len() + socket.sending.len() - socket.sent >= SEND_BUFFER {
            store(&mut socket.write_waker, cx.waker());
            return Poll::Pending;
        }
        for buf in bufs {
            socket.staged.extend_from_slice(buf);
        }
        if !socket.send_busy {
            std::mem::swap(&mut socket.sending, &mut socket.staged);
            socket.sent = 0;
            let entry = start_send(socket, key);
            if let Err(error) = inner.push(entry) {
                return Poll::Ready(Err(error));
            }
        }
        Poll::Ready(Ok(total))
    }

    fn poll_flush(&self, key: usize, cx: &Context<'_>) -> Poll<io::Result<()>> {
        let mut inner = self.inner.borrow_mut();
        let socket = inner.socket(key);
        if let Some(errno) = socket.error {
            return Poll::Ready(Err(io::Error::from_raw_os_error(errno)));
        }
        if socket.send_busy || !socket.staged.is_empty() {
            store(&mut socket.write_waker, cx.waker());
            return Poll::Pending;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_accept(&self, key: usize, cx: &Context<'_>) -> Poll<io::Result<RawFd>> {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let socket = inner.socket(key);
        let fd = socket.fd;
        if let Some(accepted) = socket.accepted.pop_front() {
            return Poll::Ready(Ok(accepted));
        }
        if let Some(errno) = socket.error.take() {
            return Poll::Ready(Err(io::Error::from_raw_os_error(errno)));
        }
        if socket.accept_busy {
            store(&mut socket.read_waker, cx.waker());
            return Poll::Pending;
        }
        if self.mode != IoMode::Uring {
            // The io_uring completion modes keep their sockets blocking (the ring then
            // waits for them instead of answering EAGAIN); the others are non-blocking.
            let flags = libc::SOCK_CLOEXEC
                | if self.mode == IoMode::Hybrid {
                    0
                } else {
                    libc::SOCK_NONBLOCK
                };
            loop {
                // SAFETY: accept4(2) on our listener, without the peer's address.
                let accepted =
                    unsafe { libc::accept4(fd, std::ptr::null_mut(), std::ptr::null_mut(), flags) };
                if accepted >= 0 {
                    return Poll::Ready(Ok(accepted));
                }
                let error = io::Error::last_os_error();
                match error.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => break,
                    _ => return Poll::Ready(Err(error)),
                }
            }
            if self.mode != IoMode::Hybrid {
                return match self.wait_ready(inner, key, true, cx.waker()) {
                    Ok(()) => Poll::Pending,
                    Err(error) => Poll::Ready(Err(error)),
                };
            }
        }
        let socket = inner.socket(key);
        store(&mut socket.read_waker, cx.waker());
        socket.accept_busy = true;
        socket.in_flight += 1;
        let entry = opcode::Accept::new(types::Fd(fd), std::ptr::null_mut(), std::ptr::null_mut())
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(Op::Accept.user_data(key));
        match inner.push(entry) {
            Ok(()) => Poll::Pending,
            Err(error) => Poll::Ready(Err(error)),
        }
    }
}

impl Inner {
    fn socket(&mut self, key: usize) -> &mut Socket {
        self.sockets[key]
            .as_mut()
            .expect("a socket's slot lives while its handle does")
    }

    /// Queues an entry on the ring, submitting the queue first when it is full. When the
    /// kernel cannot take more (its completion queue overflowing: `EBUSY`), the entry waits
    /// in `backlog` for the next turn, after the completions have been reaped.
    fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        let Driver::Uring(ring) = &mut self.driver else {
            unreachable!("only the io_uring modes queue entries");
        };
        if !self.backlog.is_empty() {
            self.backlog.push_back(entry);
            return Ok(());
        }
        loop {
            // SAFETY: every buffer an entry points to lives in its socket's slot, which is
            // kept until the entry's completion has been reaped (see `release_if_done`).
            if unsafe { ring.submission().push(&entry) }.is_ok() {
                return Ok(());
            }
            match ring.submit() {
                Ok(_) => {}
                Err(error) if error.raw_os_error() == Some(libc::EINTR) => {}
                Err(error) if error.raw_os_error() == Some(libc::EBUSY) => {
                    self.backlog.push_back(entry);
                    return Ok(());
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Moves what `push` could not queue onto the ring, as far as it has room.
    fn drain_backlog(&mut self) {
        let Driver::Uring(ring) = &mut self.driver else {
            return;
        };
        let mut queue = ring.submission();
        while let Some(entry) = self.backlog.front() {
            // SAFETY: as in `push`.
            if unsafe { queue.push(entry) }.is_err() {
                break;
            }
            self.backlog.pop_front();
        }
    }

    /// Closes the descriptor and frees the slot of a socket whose handle is gone and
    /// which has no operation in flight.
    fn release_if_done(&mut self, key: usize) {
        if let Some(Some(socket)) = self.sockets.get(key) {
            if !socket.open && socket.in_flight == 0 {
                // SAFETY: the socket's own descriptor, closed once, here, as its slot goes;
                // no entry names it any more. (Closing removes it from an epoll set too.)
                unsafe { libc::close(socket.fd) };
                self.sockets[key] = None;
                self.free.push(key);
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Buffers the kernel may still write into (operations cancelled but not reaped)
        // are leaked rather than freed under it; the thread is ending.
        for socket in self.sockets.iter_mut().flatten() {
            if socket.in_flight > 0 {
                std::mem::take(&mut socket.recv).leak();
                std::mem::take(&mut socket.sending).leak();
            }
            // SAFETY: every slot still here owns its descriptor; the reactor is going.
            unsafe { libc::close(socket.fd) };
        }
    }
}

/// Builds the `SEND` of the bytes of `socket.sending` not yet sent.
fn start_send(socket: &mut Socket, key: usize) -> squeue::Entry {
    socket.send_busy = true;
    socket.in_flight += 1;
    let rest = &socket.sending[socket.sent..];
    opcode::Send::new(types::Fd(socket.fd), rest.as_ptr(), rest.len() as u32)
        .flags(libc::MSG_NOSIGNAL)
        .build()
        .user_data(Op::Send.user_data(key))
}

fn poll_add(fd: RawFd, events: libc::c_short) -> squeue::Entry {
    opcode::PollAdd::new(types::Fd(fd), events as u32).build()
}

fn wake(slot: &mut Option<Waker>) {
    if let Some(waker) = slot.take() {
        waker.wake();
    }
}

fn store(slot: &mut Option<Waker>, waker: &Waker) {
    match slot {
        Some(old) if old.will_wake(waker) => {}
        _ => *slot = Some(waker.clone()),
    }
}

fn epoll_add(epoll: RawFd, fd: RawFd, events: u32, data: u64) -> io::Result<()> {
    let mut event = libc::epoll_event { events, u64: data };
    // SAFETY: registers `fd` with a valid, initialized event.
    if unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, fd, &mut event) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn sendmsg(fd: RawFd, bufs: &[IoSlice<'_>], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: msghdr is plain old data; zeroed is "no address, no control data".
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is ABI-compatible with iovec on Unix; the kernel only reads them.
    message.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    message.msg_iovlen = bufs.len().min(1024) as _;
    // SAFETY: the message points at `bufs`, valid for the call.
    let n = unsafe { libc::sendmsg(fd, &message, flags) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// A connection served on the minimal runtime; h2 reads and writes it.
pub(super) struct TcpStream {
    reactor: Rc<Reactor>,
    key: usize,
}

impl TcpStream {
    fn new(reactor: Rc<Reactor>, fd: RawFd) -> io::Result<Self> {
        let nodelay: libc::c_int = 1;
        // SAFETY: sets an int option from a local on our own socket.
        unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                (&nodelay as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        let key = match reactor.register(fd, false) {
            Ok(key) => key,
            Err(error) => {
                // SAFETY: the accepted descriptor is ours and registered nowhere.
                unsafe { libc::close(fd) };
                return Err(error);
            }
        };
        Ok(TcpStream { reactor, key })
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        self.reactor.close(self.key);
    }
}

impl AsyncRead for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.reactor.poll_read(self.key, cx, buf)
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.reactor.poll_write(self.key, cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.reactor.poll_write(self.key, cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.reactor.poll_flush(self.key, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.reactor.poll_flush(self.key, cx))?;
        let fd = self.reactor.inner.borrow_mut().socket(self.key).fd;
        // SAFETY: shutdown(2) on our own socket; ENOTCONN (peer gone) is not an error here.
        unsafe { libc::shutdown(fd, libc::SHUT_WR) };
        Poll::Ready(Ok(()))
    }
}

/// One thread's `SO_REUSEPORT` listener on the minimal runtime.
pub(super) struct TcpListener {
    reactor: Rc<Reactor>,
    key: usize,
}

impl TcpListener {
    /// Takes over a bound, listening, non-blocking socket.
    pub(super) fn new(reactor: Rc<Reactor>, listener: StdListener) -> io::Result<Self> {
        let fd = listener.into_raw_fd();
        let key = match reactor.register(fd, true) {
            Ok(key) => key,
            Err(error) => {
                // SAFETY: the listener's descriptor, now ours alone.
                unsafe { libc::close(fd) };
                return Err(error);
            }
        };
        Ok(TcpListener { reactor, key })
    }

    /// The next connection.
    pub(super) async fn accept(&self) -> io::Result<TcpStream> {
        let fd = std::future::poll_fn(|cx| self.reactor.poll_accept(self.key, cx)).await?;
        TcpStream::new(Rc::clone(&self.reactor), fd)
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        self.reactor.close(self.key);
    }
}

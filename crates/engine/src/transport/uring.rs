//! The io_uring transport of plain HTTP/1.1 (`--io uring`): a connection's connect, sends,
//! receives and close go through one ring per worker thread instead of readiness events
//! and a system call each.
//!
//! How it meets the worker's tokio runtime:
//! - a request loop's reads and writes queue submissions in the worker's ring
//!   ([`UringConn`] implements `AsyncRead` and `AsyncWrite`, so the HTTP/1.1 reader and
//!   link are the same for both transports);
//! - just before the worker's thread goes idle (tokio's `on_thread_park`), [`flush`] submits
//!   every queued entry in one `io_uring_enter`;
//! - the ring defers its completion work to the worker's next `io_uring_enter` and signals
//!   an eventfd that sits in tokio's event loop: the [`drive`] task, woken by it, runs that
//!   work, takes the completions and wakes their loops (inside the worker's task set, where a
//!   wake costs no system call);
//! - an open loop's dispatcher releasing arrivals at short gaps sleeps in the ring instead
//!   ([`pace`], [`sleep_until`]): one `io_uring_enter` per wake-up submits the loops' sends,
//!   sleeps to the next release and takes the responses that came in meanwhile.
//!
//! A request is written without waiting for the send to complete: `poll_write` copies it
//! into the connection's buffer and queues the send; the response comes in through the
//! connection's standing multishot receive, armed once the connection is up, into the
//! worker's provided buffers ([`BufRing`]); a connection's first response, and every
//! response of a single-use one, through a single receive queued with the send. One system
//! call carries a wake-up's sends (the epoll transport makes a `sendto`, an `epoll_wait` and a
//! `recvmsg` per request). A send's failure is reported by the next read or write. A
//! buffer the kernel may still use is never touched: a connection dropped with operations
//! in flight hands its buffers to the ring until they complete (cancelled, then closed).

use std::cell::{Cell, RefCell, UnsafeCell};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, IntoRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use io_uring::{opcode, squeue, types, IoUring};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes one receive reads at most (a connection's read buffer).
const READ_BUF: usize = 16 * 1024;
/// Submission queue entries (the completion queue is four times as long; the kernel keeps
/// completions that overflow it).
const ENTRIES: u32 = 1024;
/// `user_data` of entries whose completion nobody waits for (cancels and closes).
const IGNORED: u64 = u64::MAX;
/// `io_uring_enter`'s flag to run deferred completions (and wait for `min_complete`).
const ENTER_GETEVENTS: u32 = 1;
/// A receive's `ioprio` flag: wait for data before the first try (Linux 5.19).
const POLL_FIRST: u16 = 1;
/// The worker's provided buffers for multishot receives ([`BufRing`]): how many, and how
/// large each. The kernel takes one per receive completion whatever its size, and touches
/// only the pages it writes: small responses keep about 4 KiB of each resident (1 MiB per
/// worker), large ones at most the whole 4 MiB.
const MULTI_BUFS: u16 = 256;
const MULTI_BUF: usize = 16 * 1024;
/// With receive timestamps, the room each multishot receive reserves in its buffer for the
/// control messages (one `SCM_TIMESTAMPNS`: 32 bytes on 64-bit Linux, kept ample).
const MULTI_CONTROL: usize = 64;

/// Whether io_uring can carry HTTP/1.1 here: a ring can be created and the kernel has every
/// operation the transport uses. Checked once per process; the error says why not.
pub fn available() -> Result<(), String> {
    static PROBE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    PROBE
        .get_or_init(|| {
            // Set up as a worker's ring is (`install`), so a kernel that has io_uring but
            // not these flags is found here, not in a worker.
            let ring: IoUring = IoUring::builder()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .setup_taskrun_flag()
                .build(8)
                .map_err(|e| match e.raw_os_error() {
                    Some(libc::ENOSYS) => "the kernel has no io_uring (ENOSYS)".to_string(),
                    Some(libc::EPERM) => "io_uring is refused here (EPERM: a seccomp filter, \
                         a container policy or kernel.io_uring_disabled)"
                        .to_string(),
                    Some(libc::EINVAL) => "the kernel's io_uring is older than Linux 6.1 (no \
                         deferred task running, which the transport needs)"
                        .to_string(),
                    _ => format!("io_uring_setup failed: {e}"),
                })?;
            let mut probe = io_uring::Probe::new();
            ring.submitter()
                .register_probe(&mut probe)
                .map_err(|e| format!("cannot probe io_uring's operations: {e}"))?;
            let needed = [
                ("connect", opcode::Connect::CODE),
                ("send", opcode::Send::CODE),
                ("recv", opcode::Recv::CODE),
                ("recvmsg", opcode::RecvMsg::CODE),
                ("close", opcode::Close::CODE),
                ("async_cancel", opcode::AsyncCancel::CODE),
            ];
            for (name, code) in needed {
                if !probe.is_supported(code) {
                    return Err(format!("the kernel's io_uring lacks {name}"));
                }
            }
            Ok(())
        })
        .clone()
}

/// What an operation of a connection is, so that its completion lands in the right state.
#[derive(Clone, Copy)]
enum Kind {
    Connect,
    Send,
    Recv,
    /// The connection's standing multishot receive ([`BufRing`]).
    RecvMulti,
}

/// The state of one of a connection's operations.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    /// None submitted (or its result already taken; for a connect: connected).
    Idle,
    /// A connect not yet queued: it goes in linked ahead of the first request
    /// ([`UringConn::open`]).
    Deferred,
    /// Queued or submitted, in slot `n` of the ring's table.
    InFlight(u32),
    /// Completed with this result (bytes, or `-errno`).
    Done(i32),
}

/// `recvmsg`'s header, its one `iovec` and room for the timestamp's control message.
struct MsgParts {
    hdr: libc::msghdr,
    iov: libc::iovec,
    control: [u64; 8],
}

/// Bytes a multishot receive put in provided buffer `bid`: `start..end` of it are unread;
/// they arrived at `stamp` (`CLOCK_REALTIME` ns; 0: not stamped).
#[derive(Clone, Copy)]
struct Chunk {
    bid: u16,
    start: u32,
    end: u32,
    stamp: u64,
}

/// The worker's provided buffers (an io_uring buffer ring, group 0): a multishot receive
/// takes one per completion, and the connection that reads the bytes hands it back. One
/// standing receive per connection, where a receive per response cost a submission and the
/// arming and disarming of a wait on the socket (`bench/floor --multishot`).
struct BufRing {
    /// `MULTI_BUFS` ring entries, page-aligned, shared with the kernel.
    entries: *mut types::BufRingEntry,
    tail: u16,
    /// `MULTI_BUFS` buffers of `MULTI_BUF` bytes (not initialized: the kernel writes a
    /// buffer between the time it is handed over and its completion; only then is it read,
    /// until it is given back).
    bufs: *mut u8,
    /// Buffers the kernel filled that loadlab has not given back yet.
    held: u16,
    /// The header every stamped multishot receive is submitted with: it says how much room
    /// the control messages take in each buffer.
    msg: Box<libc::msghdr>,
}

impl BufRing {
    const LAYOUT: std::alloc::Layout = match std::alloc::Layout::from_size_align(
        MULTI_BUFS as usize * std::mem::size_of::<types::BufRingEntry>(),
        4096,
    ) {
        Ok(l) => l,
        Err(_) => panic!("buffer ring layout"),
    };
    const BUFS_LAYOUT: std::alloc::Layout =
        match std::alloc::Layout::from_size_align(MULTI_BUFS as usize * MULTI_BUF, 4096) {
            Ok(l) => l,
            Err(_) => panic!("provided buffers layout"),
        };

    /// Registers the buffers with `ring`; `None` where the kernel refuses (before 5.19).
    fn register(ring: &IoUring) -> Option<BufRing> {
        // SAFETY: a non-zero size; freed in `drop` with the same layout.
        let entries =
            unsafe { std::alloc::alloc_zeroed(Self::LAYOUT) }.cast::<types::BufRingEntry>();
        // SAFETY: as above.
        let bufs = unsafe { std::alloc::alloc(Self::BUFS_LAYOUT) };
        if entries.is_null() || bufs.is_null() {
            // SAFETY: what was allocated above, with its layout.
            unsafe {
                if !entries.is_null() {
                    std::alloc::dealloc(entries.cast(), Self::LAYOUT);
                }
                if !bufs.is_null() {
                    std::alloc::dealloc(bufs, Self::BUFS_LAYOUT);
                }
            }
            return None;
        }
        // SAFETY: zeroed msghdr is a valid empty header.
        let mut msg: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        msg.msg_controllen = MULTI_CONTROL as _;
        let mut b = BufRing {
            entries,
            tail: 0,
            bufs,
            held: MULTI_BUFS,
            msg,
        };
        // SAFETY: `entries` holds MULTI_BUFS page-aligned entries that live as long as the
        // registration (the ring is dropped, or the buffers leaked, before them).
        if unsafe {
            ring.submitter()
                .register_buf_ring(entries as u64, MULTI_BUFS, 0)
        }
        .is_err()
        {
            return None;
        }
        for bid in 0..MULTI_BUFS {
            b.give(bid);
        }
        Some(b)
    }

    /// Hands buffer `bid` (back) to the kernel.
    fn give(&mut self, bid: u16) {
        self.held -= 1;
        let at = usize::from(self.tail & (MULTI_BUFS - 1));
        // SAFETY: `at` is inside the ring, and the entry past the tail is loadlab's to fill;
        // the tail is published with release ordering, as the kernel reads it with acquire.
        unsafe {
            let e = &mut *self.entries.add(at);
            e.set_addr(self.bufs.add(usize::from(bid) * MULTI_BUF) as u64);
            e.set_len(MULTI_BUF as u32);
            e.set_bid(bid);
            self.tail = self.tail.wrapping_add(1);
            let tail = types::BufRingEntry::tail(self.entries).cast_mut();
            (*tail.cast::<std::sync::atomic::AtomicU16>())
                .store(self.tail, std::sync::atomic::Ordering::Release);
        }
    }

    /// Buffer `bid`'s bytes `start..end`.
    ///
    /// # Safety
    /// The kernel filled them (a completion reported them) and the buffer is not given back.
    unsafe fn bytes(&self, bid: u16, start: usize, end: usize) -> &[u8] {
        let at = usize::from(bid) * MULTI_BUF;
        // SAFETY: the caller's promise: initialized, and no one writes them meanwhile.
        unsafe { std::slice::from_raw_parts(self.bufs.add(at + start), end - start) }
    }

    /// A completion's bytes in buffer `bid` (`len` of them): where the payload starts and
    /// ends, and its receive timestamp (`stamped`: a `recvmsg` whose header, control
    /// messages and payload share the buffer).
    fn chunk(&self, bid: u16, len: usize, stamped: bool) -> Chunk {
        if !stamped {
            return Chunk {
                bid,
                start: 0,
                end: len as u32,
                stamp: 0,
            };
        }
        // SAFETY: the completion reported `len` bytes written into this buffer.
        let raw = unsafe { self.bytes(bid, 0, len) };
        let Ok(out) = types::RecvMsgOut::parse(raw, &self.msg) else {
            return Chunk {
                bid,
                start: 0,
                end: 0,
                stamp: 0,
            };
        };
        let base = raw.as_ptr() as usize;
        let payload = out.payload_data();
        let control = out.control_data();
        // SAFETY: a header over the control bytes only, inside `raw`.
        let stamp = unsafe {
            let mut m: libc::msghdr = std::mem::zeroed();
            m.msg_control = control.as_ptr().cast_mut().cast();
            m.msg_controllen = control.len() as _;
            loadlab_system::os::receive_timestamp(&m)
        };
        let start = payload.as_ptr() as usize - base;
        Chunk {
            bid,
            start: start as u32,
            end: (start + payload.len()) as u32,
            stamp: stamp.unwrap_or(0),
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `register` with these layouts; the ring that used them is
        // gone.
        unsafe {
            std::alloc::dealloc(self.entries.cast(), Self::LAYOUT);
            std::alloc::dealloc(self.bufs, Self::BUFS_LAYOUT);
        }
    }
}

/// A connection's state, shared between the connection and the ring's table while an
/// operation is in flight: the kernel reads `wbuf` during a send and writes `rbuf` (and
/// `msg`) during a receive, so neither is touched by loadlab until that operation is done.
struct Shared {
    fd: RawFd,
    addr: socket2::SockAddr,
    /// Read with the kernel's receive timestamps (`recvmsg`).
    stamped: bool,
    /// One request, then closed (keep-alive off): no receive is armed once its response
    /// is read.
    single_use: bool,
    /// When a deferred connect was queued: its completion records how long it took.
    connect_queued: Cell<Option<std::time::Instant>>,
    /// Not zeroed (16 KiB per connection, one per request with keep-alive off): only the
    /// bytes a receive filled are read.
    rbuf: UnsafeCell<Box<[std::mem::MaybeUninit<u8>]>>,
    wbuf: UnsafeCell<Vec<u8>>,
    msg: UnsafeCell<MsgParts>,
    connect: Cell<Op>,
    send: Cell<Op>,
    /// A single receive into `rbuf`: the first response of a connection opened with it,
    /// every response of a single-use connection, and a fallback when the worker's provided
    /// buffers ran out (`no_bufs`) or the worker has none.
    recv: Cell<Op>,
    /// The standing multishot receive: armed once a connection is up and kept while it
    /// lives; its completions queue `chunks`. `Done` when it ended on an error or the
    /// server's close (read once every chunk before it is).
    multi: Cell<Op>,
    /// Received bytes in the worker's provided buffers, oldest first, not yet read.
    chunks: RefCell<std::collections::VecDeque<Chunk>>,
    /// The last multishot receive ended because every provided buffer was in use: the next
    /// receive is a single one into `rbuf` (the bytes wait in the socket meanwhile).
    no_bufs: Cell<bool>,
    /// The connection was dropped: chunks its multishot receive still completes go straight
    /// back to the ring.
    dropped: Cell<bool>,
    /// Bytes of the last send (a shorter completion is an error).
    sent_len: Cell<usize>,
    /// Unread bytes of `rbuf`: `rpos..rlen`.
    rpos: Cell<usize>,
    rlen: Cell<usize>,
    /// When the newest bytes arrived (`CLOCK_REALTIME` ns; 0: not stamped).
    stamp: Cell<u64>,
    /// The request loop waiting on this connection.
    waker: Cell<Option<Waker>>,
    /// The loop waits for the send in flight to end (to write again): its completion wakes
    /// it. Otherwise only a failed send does (the loop waits for the response).
    write_waiting: Cell<bool>,
}

/// One worker's ring and the operations in flight on it.
struct Driver {
    ring: IoUring,
    /// Signalled by the kernel when completion work is pending (the ring defers it to
    /// the next `io_uring_enter`): what tokio's event loop watches.
    eventfd: std::os::fd::OwnedFd,
    /// Slot `n`: the connection (and which of its operations) whose entry has
    /// `user_data == n`; holding the `Rc` keeps the buffers alive until completion.
    slots: Vec<Option<(Rc<Shared>, Kind)>>,
    free: Vec<u32>,
    /// Entries queued since the last submission.
    queued: u32,
    /// Slots in use.
    in_flight: u32,
    /// Wakers taken from completions, woken once the driver is no longer borrowed.
    wake: Vec<Waker>,
    /// How long each deferred connect that succeeded took (ns), until the worker's
    /// recorder takes them ([`take_connects`]).
    connects: Vec<u64>,
    /// Completions are taken by the open loop's dispatcher at each of its wake-ups
    /// ([`pace`]), not at the kernel's signal: the eventfd is unregistered.
    paced: bool,
    /// The kernel takes absolute timeouts ([`sleep_until`]); cleared at its first refusal.
    abs_timer: bool,
    /// The provided buffers of multishot receives (`None`: the kernel refused them, and
    /// every receive is a single one).
    bufs: Option<BufRing>,
}

thread_local! {
    static DRIVER: RefCell<Option<Driver>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's ring; `None` if the thread has none.
fn with_driver<R>(f: impl FnOnce(&mut Driver) -> R) -> Option<R> {
    DRIVER.with(|d| d.borrow_mut().as_mut().map(f))
}

/// Gives this thread a ring (a worker of `--io uring`, before its connections open).
pub(crate) fn install() -> io::Result<()> {
    let ring = IoUring::builder()
        .setup_cqsize(ENTRIES * 4)
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_taskrun_flag()
        .build(ENTRIES)?;
    // SAFETY: eventfd(2) with flags only; the descriptor is owned below.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nothing else owns.
    let eventfd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    ring.submitter().register_eventfd(eventfd.as_raw_fd())?;
    let bufs = BufRing::register(&ring);
    DRIVER.with(|d| {
        *d.borrow_mut() = Some(Driver {
            ring,
            eventfd,
            slots: Vec::new(),
            free: Vec::new(),
            queued: 0,
            in_flight: 0,
            wake: Vec::new(),
            connects: Vec::new(),
            paced: false,
            abs_timer: true,
            bufs,
        });
    });
    Ok(())
}

/// Hands `record` how long each deferred connect that completed since the last call took
/// (ns): connections opened linked to their first request are timed by the ring.
pub(crate) fn take_connects(mut record: impl FnMut(u64)) {
    with_driver(|d| d.connects.drain(..).for_each(&mut record));
}

/// Ends this thread's ring once its connections are dropped: what is still in flight is
/// cancelled and waited for (a second at most), so the kernel writes into no buffer freed
/// after it; buffers of operations that outlive the wait are leaked, not freed. Returns the
/// connect times not yet taken ([`take_connects`]).
pub(crate) fn uninstall() -> Vec<u64> {
    let Some(mut d) = DRIVER.with(|d| d.borrow_mut().take()) else {
        return Vec::new();
    };
    let cancel_all = opcode::AsyncCancel2::new(types::CancelBuilder::any())
        .build()
        .user_data(IGNORED);
    d.push_raw(&cancel_all);
    let ts = types::Timespec::new().nsec(100_000_000);
    for _ in 0..10 {
        if d.in_flight == 0 {
            break;
        }
        let args = types::SubmitArgs::new().timespec(&ts);
        let _ = d.ring.submitter().submit_with_args(1, &args);
        d.queued = 0;
        d.reap();
        d.wake.clear();
    }
    if d.in_flight > 0 {
        // The kernel may still write into these buffers: never free them.
        for s in d.slots.drain(..).flatten() {
            Box::leak(Box::new(s));
        }
        if let Some(b) = d.bufs.take() {
            Box::leak(Box::new(b));
        }
    }
    std::mem::take(&mut d.connects)
}

/// Submits what this thread's request loops queued (tokio's `on_thread_park`: once per turn
/// of the event loop, before it waits). Completions are not taken here: a waker woken from
/// outside the worker's task set costs tokio a system call to wake itself, so they are left
/// to [`drive`], which the kernel's signal on the eventfd runs at once.
pub(crate) fn flush() {
    with_driver(|d| {
        if d.queued > 0 {
            d.submit();
        }
    });
}

/// The task that takes completions: the kernel signals the ring's eventfd when completions,
/// or completion work it deferred, are waiting.
pub(crate) async fn drive() {
    struct EventFd(RawFd);
    impl AsRawFd for EventFd {
        fn as_raw_fd(&self) -> RawFd {
            self.0
        }
    }
    let Some(fd) = with_driver(|d| d.eventfd.as_raw_fd()) else {
        return;
    };
    // SAFETY: the eventfd stays open while this task lives: the ring and its eventfd are
    // ended (`uninstall`) only after the worker's tasks are dropped.
    let Ok(afd) =
        (unsafe { AsyncFd::register_with_interest(EventFd(fd), tokio::io::Interest::READABLE) })
    else {
        return;
    };
    loop {
        let Ok(mut ready) = afd.readable().await else {
            return;
        };
        // Cleared before taking the completions: one that lands after is a new edge.
        ready.clear_ready();
        take_completions();
    }
}

/// Takes the completions in and wakes their request loops (from inside the worker's task
/// set: no system call per wake), submitting what is queued. Completion work the kernel
/// deferred runs only in `io_uring_enter`: one is made if the ring flags such work or
/// entries are queued.
fn take_completions() {
    let wake = with_driver(|d| {
        if d.queued > 0 || d.ring.submission().taskrun() {
            d.submit();
        }
        d.reap();
        std::mem::take(&mut d.wake)
    });
    if let Some(mut wake) = wake {
        for w in wake.drain(..) {
            w.wake();
        }
        // Keep the allocation.
        with_driver(|d| d.wake = wake);
    }
}

/// Open loop at short gaps: whether the dispatcher takes the completions at each of its
/// wake-ups ([`reap_now`]) instead of the kernel's signal waking the worker for each response.
///
/// At 20,000 requests per second a response comes back between two releases: woken for
/// it, the worker sleeps and wakes about twice per request, where a paced worker wakes once
/// per release (every 0.2 ms at most, several arrivals each), as `bench/floor` does. What
/// it costs is a connection held until the next wake-up after its response came in (the
/// pool grows by that much); the latency is not touched: open-loop connections read with
/// the kernel's receive timestamps, so a response is charged its arrival, not its reaping.
/// Turned off (`false`) when the dispatcher is about to sleep longer, or is done: the
/// eventfd goes back into the ring and is signalled once, so that what came in meanwhile
/// is taken at once.
///
/// Returns whether this thread's ring is paced now (`false` without a ring).
pub(crate) fn pace(on: bool) -> bool {
    with_driver(|d| {
        if d.paced == on {
            return d.paced;
        }
        let fd = d.eventfd.as_raw_fd();
        let r = if on {
            d.ring.submitter().unregister_eventfd()
        } else {
            d.ring.submitter().register_eventfd(fd)
        };
        if r.is_ok() {
            d.paced = on;
        }
        if !on {
            // SAFETY: eventfd_write(3) on the ring's own eventfd.
            unsafe { libc::eventfd_write(fd, 1) };
        }
        d.paced
    })
    .unwrap_or(false)
}

/// Provided buffers this thread's connections hold (filled, not given back); `None` without
/// a ring or without provided buffers.
#[cfg(test)]
fn held_buffers() -> Option<u16> {
    with_driver(|d| d.bufs.as_ref().map(|b| b.held)).flatten()
}

/// Whether this thread's ring is paced ([`pace`]).
pub(crate) fn paced() -> bool {
    with_driver(|d| d.paced).unwrap_or(false)
}

/// The paced dispatcher's sleep: submits what the request loops queued and sleeps in the
/// ring until `clock` reads `deadline_ns`, then takes the completions in. One
/// `io_uring_enter` per wake-up, as `bench/floor` makes, where a timer in tokio's event loop
/// cost an `epoll_wait`, a `timerfd_settime` and a second `io_uring_enter` (submit, then
/// reap). A completion does not end the sleep (the ring is asked for more than are in
/// flight): a response is charged its receive timestamp, not its reaping ([`pace`]).
///
/// It blocks the worker's thread, so the caller lets the tasks it woke run first, and
/// sleeps no longer than [`pace`]'s gaps: the request loops' deadlines and the worker's
/// other timers are served between two sleeps. `false` (and no sleep) if the thread's ring
/// is not paced.
pub(crate) fn sleep_until(clock: &crate::clock::Clock, deadline_ns: u64) -> bool {
    let slept = with_driver(|d| {
        if !d.paced {
            return false;
        }
        loop {
            let now = clock.now();
            if now >= deadline_ns {
                return true;
            }
            if d.abs_timer {
                // The deadline as such: the sends the call submits first (each runs the
                // TCP stack inline, tens of microseconds on loopback) do not push it later.
                let at = clock.monotonic_ns(deadline_ns);
                match d.wait(&Timespec::at_ns(at), ENTER_ABS_TIMER) {
                    Err(Some(libc::EINVAL)) => d.abs_timer = false,
                    Err(None) => return false,
                    _ => {}
                }
            } else {
                // Linux < 6.12: the timeout runs from after the submission, so submit first.
                if d.queued > 0 {
                    d.submit();
                }
                let wait = deadline_ns.saturating_sub(clock.now());
                if d.wait(&Timespec::at_ns(wait), 0) == Err(None) {
                    return false;
                }
            }
        }
    })
    .unwrap_or(false);
    if slept {
        take_completions();
    }
    slept
}

/// `io_uring_enter`'s flag: an extended argument (the timeout) follows.
const ENTER_EXT_ARG: u32 = 1 << 3;
/// `io_uring_enter`'s flag: the timeout is an absolute `CLOCK_MONOTONIC` time (Linux 6.12).
const ENTER_ABS_TIMER: u32 = 1 << 5;

/// The kernel's `__kernel_timespec`.
#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

impl Timespec {
    fn at_ns(ns: u64) -> Timespec {
        Timespec {
            sec: (ns / 1_000_000_000) as i64,
            nsec: (ns % 1_000_000_000) as i64,
        }
    }
}

/// The kernel's `io_uring_getevents_arg`.
#[repr(C)]
struct GetEventsArg {
    sigmask: u64,
    sigmask_sz: u32,
    min_wait_usec: u32,
    ts: u64,
}

/// Submits what is queued and takes the completions in now: the paced dispatcher at its
/// wake-up, a dispatcher catching up (its thread does not go idle, so what the request loops
/// queued would wait for the end of the catch-up), a request loop about to give up on its
/// deadline. No system call unless entries are queued or the kernel holds completion work
/// for the ring. Nothing without a ring.
pub(crate) fn reap_now() {
    take_completions();
}

impl Driver {
    /// Queues `entry` for `sh`'s operation `kind`; returns its slot.
    fn push(&mut self, entry: squeue::Entry, sh: &Rc<Shared>, kind: Kind) -> u32 {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            (self.slots.len() - 1) as u32
        });
        self.slots[slot as usize] = Some((sh.clone(), kind));
        self.in_flight += 1;
        self.push_raw(&entry.user_data(u64::from(slot)));
        slot
    }

    /// Makes room for `n` entries in the submission queue (submitting what is queued if
    /// need be), so that a linked chain is never split across two submissions: the kernel
    /// would run its head unlinked.
    fn reserve(&mut self, n: usize) {
        let room = |d: &mut Driver| {
            let sq = d.ring.submission();
            sq.capacity() - sq.len()
        };
        while room(self) < n {
            self.submit();
            self.reap();
        }
    }

    /// Queues `entry` (submitting first if the queue is full).
    fn push_raw(&mut self, entry: &squeue::Entry) {
        loop {
            // SAFETY: every buffer an entry points to is owned by a `Shared` its slot
            // holds until the completion (entries with IGNORED point to none).
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                self.queued += 1;
                return;
            }
            self.submit();
            self.reap();
        }
    }

    /// One `io_uring_enter` that submits every queued entry and sleeps until the timeout
    /// `ts` (`flags`: [`ENTER_ABS_TIMER`] or 0, relative) whatever completes meanwhile: it
    /// asks for as many completions as the completion queue holds (a standing multishot
    /// receive completes many times, so the operations in flight are no bound; the kernel
    /// caps the count at the queue's size). `Err(None)`: an error a working ring does not
    /// give; `Err(Some(errno))` otherwise (a timeout or a signal is `Ok`).
    fn wait(&mut self, ts: &Timespec, flags: u32) -> Result<(), Option<i32>> {
        let arg = GetEventsArg {
            sigmask: 0,
            sigmask_sz: 0,
            min_wait_usec: 0,
            ts: ts as *const Timespec as u64,
        };
        let all = self.ring.completion().capacity() as u32;
        // SAFETY: `arg` and the timespec it points to outlive the call; the kernel reads
        // `size_of::<GetEventsArg>()` bytes of it.
        let r = unsafe {
            self.ring.submitter().enter(
                self.queued,
                all,
                ENTER_GETEVENTS | ENTER_EXT_ARG | flags,
                Some(&arg),
            )
        };
        // What the kernel did not take (it refuses to submit while the completion queue
        // overflows) stays queued.
        self.queued = self.ring.submission().len() as u32;
        match r.map_err(|e| e.raw_os_error()) {
            Ok(_) | Err(Some(libc::ETIME | libc::EINTR)) => Ok(()),
            // The completion queue is full: take completions, then sleep on.
            Err(Some(libc::EBUSY)) => {
                self.reap();
                Ok(())
            }
            Err(Some(libc::EINVAL)) if flags != 0 => Err(Some(libc::EINVAL)),
            Err(_) => Err(None),
        }
    }

    /// One `io_uring_enter` for every queued entry.
    fn submit(&mut self) {
        for _ in 0..64 {
            // SAFETY: no argument; GETEVENTS runs the completions the ring deferred.
            let r = unsafe {
                self.ring
                    .submitter()
                    .enter::<libc::sigset_t>(self.queued, 0, ENTER_GETEVENTS, None)
            };
            match r {
                // The kernel runs deferred completions in batches (20 at a time since
                // Linux 6.13) and flags what it left: run them all now, or their loops
                // would wait for the next wake-up, their connections busy.
                Ok(_) if self.ring.submission().taskrun() => {
                    self.queued = 0;
                    continue;
                }
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                // The completion queue is full: take completions, then submit again.
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    self.reap();
                    continue;
                }
                Err(_) => break,
            }
        }
        self.queued = 0;
    }

    /// Takes every completion: the result goes to its operation's state, its loop's waker
    /// to `self.wake`.
    fn reap(&mut self) {
        let mut cq = self.ring.completion();
        cq.sync();
        for cqe in &mut cq {
            let n = cqe.user_data();
            if n == IGNORED {
                continue;
            }
            let Some((sh, kind)) = self.slots.get_mut(n as usize).and_then(Option::take) else {
                continue;
            };
            let res = cqe.result();
            if let Kind::RecvMulti = kind {
                if io_uring::cqueue::more(cqe.flags()) {
                    // Still armed: the slot stays the receive's.
                    self.slots[n as usize] = Some((sh.clone(), kind));
                } else {
                    self.free.push(n as u32);
                    self.in_flight -= 1;
                }
                if multi_completion(&mut self.bufs, &sh, n as u32, res, cqe.flags()) {
                    self.wake.extend(sh.waker.take());
                }
                continue;
            }
            self.free.push(n as u32);
            self.in_flight -= 1;
            match kind {
                Kind::Connect => {
                    if let (0, Some(t0)) = (res, sh.connect_queued.take()) {
                        self.connects.push(t0.elapsed().as_nanos() as u64);
                    }
                    sh.connect.set(Op::Done(res));
                }
                Kind::Send => {
                    sh.send.set(Op::Done(res));
                    // A send that went through is no news to its loop, which waits for the
                    // response (the write returned when the send was queued): waking it
                    // cost a task poll per request for nothing. A failed or short send
                    // wakes it (the read reports it), as does one it waits to write after.
                    let failed = res < 0 || (res as usize) < sh.sent_len.get();
                    if !failed && !sh.write_waiting.replace(false) {
                        continue;
                    }
                }
                Kind::Recv => {
                    if sh.stamped && res > 0 {
                        // SAFETY: the receive is complete: the kernel no longer writes
                        // `msg`, and its control length is what it filled.
                        let stamp =
                            unsafe { loadlab_system::os::receive_timestamp(&(*sh.msg.get()).hdr) };
                        sh.stamp.set(stamp.unwrap_or(0));
                    }
                    sh.recv.set(Op::Done(res));
                }
                Kind::RecvMulti => unreachable!("taken above"),
            }
            if let Some(w) = sh.waker.take() {
                self.wake.push(w);
            }
        }
    }
}

/// A completion of `sh`'s multishot receive (slot `slot`): bytes go to its chunks, the end
/// of the receive to its state. Returns whether its loop is to be woken.
fn multi_completion(
    bufs: &mut Option<BufRing>,
    sh: &Shared,
    slot: u32,
    res: i32,
    flags: u32,
) -> bool {
    let more = io_uring::cqueue::more(flags);
    // Payload bytes this completion brought (a stamped receive's result counts its header
    // and control messages too: at the server's close it brings those and no payload).
    let mut payload = 0;
    if res > 0 {
        let (Some(bufs), Some(bid)) = (bufs.as_mut(), io_uring::cqueue::buffer_select(flags))
        else {
            return false;
        };
        bufs.held += 1;
        let chunk = bufs.chunk(bid, res as usize, sh.stamped);
        payload = chunk.end - chunk.start;
        if sh.dropped.get() || payload == 0 {
            bufs.give(bid);
        } else {
            sh.chunks.borrow_mut().push_back(chunk);
        }
    }
    if more {
        debug_assert_eq!(sh.multi.get(), Op::InFlight(slot));
    } else {
        sh.multi.set(match res {
            // Every buffer was in use: the bytes wait in the socket, and the next receive
            // is a single one.
            _ if res == -libc::ENOBUFS => {
                sh.no_bufs.set(true);
                Op::Idle
            }
            // Stopped with bytes (the kernel may end a multishot receive): armed again
            // once they are read.
            _ if payload > 0 => Op::Idle,
            // The server's close (no payload), or an error.
            _ => Op::Done(res.min(0)),
        });
    }
    !sh.dropped.get()
}

/// A plain TCP connection whose I/O goes through the worker's ring.
pub struct UringConn {
    sh: Rc<Shared>,
}

impl UringConn {
    /// A connection to `addr` (from `source`, if given) whose connect is deferred: it goes
    /// into the ring linked ahead of the first request and its response's receive, in one
    /// submission, so the server finds the request as soon as it accepts (one wake-up of
    /// the server, not two) and the request loop is not woken for the connect. Until it
    /// completes the connection is [`connecting`](UringConn::connecting); a failed connect
    /// is reported by the first read (or write), with the connect's own error. `stamped`
    /// reads with receive timestamps; `single_use` connections carry one request (keep-alive
    /// off).
    pub(crate) fn open(
        addr: SocketAddr,
        source: Option<IpAddr>,
        stamped: bool,
        single_use: bool,
    ) -> io::Result<UringConn> {
        let sock = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            None,
        )?;
        if let Some(src) = source {
            loadlab_system::os::set_bind_address_no_port(sock.as_fd());
            sock.bind(&SocketAddr::new(src, 0).into())?;
        }
        if !single_use {
            // One write per connection needs no Nagle off (nothing unacknowledged precedes it).
            sock.set_nodelay(true)?;
        }
        if stamped {
            loadlab_system::os::enable_rx_timestamps(sock.as_fd())?;
        }
        Ok(UringConn {
            sh: Rc::new(Shared {
                fd: sock.into_raw_fd(),
                addr: addr.into(),
                stamped,
                single_use,
                connect_queued: Cell::new(None),
                rbuf: UnsafeCell::new(Box::new_uninit_slice(READ_BUF)),
                wbuf: UnsafeCell::new(Vec::new()),
                // SAFETY: all-zero is a valid empty msghdr and iovec.
                msg: UnsafeCell::new(unsafe { std::mem::zeroed() }),
                connect: Cell::new(Op::Deferred),
                send: Cell::new(Op::Idle),
                recv: Cell::new(Op::Idle),
                multi: Cell::new(Op::Idle),
                chunks: RefCell::new(std::collections::VecDeque::new()),
                no_bufs: Cell::new(false),
                dropped: Cell::new(false),
                sent_len: Cell::new(0),
                rpos: Cell::new(0),
                rlen: Cell::new(0),
                stamp: Cell::new(0),
                waker: Cell::new(None),
                write_waiting: Cell::new(false),
            }),
        })
    }

    /// Opens a connection to `addr` (from `source`, if given) and waits until it is up;
    /// `stamped` reads with receive timestamps.
    pub(crate) async fn connect(
        addr: SocketAddr,
        source: Option<IpAddr>,
        stamped: bool,
    ) -> io::Result<UringConn> {
        let conn = UringConn::open(addr, source, stamped, false)?;
        let sh = &conn.sh;
        let entry =
            opcode::Connect::new(types::Fd(sh.fd), sh.addr.as_ptr().cast(), sh.addr.len()).build();
        let slot = with_driver(|d| d.push(entry, sh, Kind::Connect))
            .ok_or_else(|| io::Error::other("this thread has no io_uring"))?;
        sh.connect.set(Op::InFlight(slot));
        std::future::poll_fn(|cx| match sh.connect.get() {
            Op::Done(0) => {
                sh.connect.set(Op::Idle);
                Poll::Ready(Ok(()))
            }
            Op::Done(e) => Poll::Ready(Err(io::Error::from_raw_os_error(-e))),
            _ => {
                sh.waker.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        })
        .await?;
        // Armed at once, and submitted: what a server sends before any request (a greeting,
        // an early close) is in when the first request is about to be written. Left queued,
        // the receive would go to the kernel with that request and read the greeting as its
        // answer.
        conn.arm_recv(true)?;
        take_completions();
        Ok(conn)
    }

    /// Whether the connection is not up yet (its deferred connect not queued, or not
    /// completed): a request that times out meanwhile timed out connecting.
    pub(crate) fn connecting(&self) -> bool {
        matches!(self.sh.connect.get(), Op::Deferred | Op::InFlight(_))
    }

    /// Queues the deferred connect, linked to the entries pushed right after it (the
    /// caller has reserved room for the whole chain).
    fn queue_connect(&self, d: &mut Driver) {
        let sh = &self.sh;
        let entry = opcode::Connect::new(types::Fd(sh.fd), sh.addr.as_ptr().cast(), sh.addr.len())
            .build()
            .flags(squeue::Flags::IO_LINK);
        sh.connect_queued.set(Some(std::time::Instant::now()));
        let slot = d.push(entry, sh, Kind::Connect);
        sh.connect.set(Op::InFlight(slot));
    }

    /// The error of a receive or send that failed (`res`, `-errno`): a failed connect or
    /// send ahead of it in its chain is the cause (it was cancelled, `ECANCELED`).
    fn failure(&self, res: i32) -> io::Error {
        if let Op::Done(e) = self.sh.connect.get() {
            if e < 0 {
                return io::Error::from_raw_os_error(-e);
            }
        }
        self.send_error()
            .unwrap_or_else(|| io::Error::from_raw_os_error(-res))
    }

    /// When the newest bytes read arrived (`CLOCK_REALTIME` ns), if the kernel stamped them.
    pub fn received_at(&self) -> Option<u64> {
        match self.sh.stamp.get() {
            0 => None,
            at => Some(at),
        }
    }

    /// Makes sure a receive is armed (nothing if one is): the standing multishot receive
    /// where the worker has provided buffers and the connection is up and carries more than
    /// one request; otherwise a single receive into `rbuf` ([`UringConn::submit_recv`]).
    fn arm_recv(&self, expect_none: bool) -> io::Result<()> {
        let sh = &self.sh;
        if matches!(sh.multi.get(), Op::InFlight(_)) || sh.recv.get() != Op::Idle {
            return Ok(());
        }
        let multi = !sh.single_use
            && !sh.no_bufs.replace(false)
            && matches!(sh.connect.get(), Op::Idle | Op::Done(0))
            && sh.multi.get() == Op::Idle;
        if multi {
            let armed = with_driver(|d| {
                let msg: *const libc::msghdr = match &d.bufs {
                    None => return None,
                    Some(b) => &*b.msg,
                };
                let entry = if sh.stamped {
                    opcode::RecvMsgMulti::new(types::Fd(sh.fd), msg, 0)
                        .ioprio(if expect_none { POLL_FIRST } else { 0 })
                        .build()
                } else {
                    opcode::RecvMulti::new(types::Fd(sh.fd), 0).build()
                };
                Some(d.push(entry, sh, Kind::RecvMulti))
            })
            .ok_or_else(|| io::Error::other("this thread has no io_uring"))?;
            if let Some(slot) = armed {
                sh.multi.set(Op::InFlight(slot));
                return Ok(());
            }
        }
        if sh.rpos.get() < sh.rlen.get() {
            // Unread bytes in `rbuf`: the receive goes in once they are read.
            return Ok(());
        }
        self.submit_recv(expect_none)
    }

    /// Queues a receive into the (fully read, so emptied) read buffer (behind the deferred
    /// connect, linked, if it is not queued yet). `expect_none`: no bytes are expected yet
    /// (the response of a request just queued, or none at all on an idle connection): the
    /// kernel waits for them without trying the socket first (`IORING_RECVSEND_POLL_FIRST`),
    /// where a first try would fail and cost a `recvmsg` for nothing.
    fn submit_recv(&self, expect_none: bool) -> io::Result<()> {
        let sh = &self.sh;
        debug_assert!(sh.rpos.get() == sh.rlen.get() && sh.recv.get() == Op::Idle);
        if sh.connect.get() == Op::Deferred {
            with_driver(|d| {
                d.reserve(2);
                self.queue_connect(d);
            })
            .ok_or_else(|| io::Error::other("this thread has no io_uring"))?;
        }
        sh.rpos.set(0);
        sh.rlen.set(0);
        // SAFETY: no receive is in flight, so the kernel holds no pointer into `rbuf` or
        // `msg`; the pointers set here stay valid while `sh` (held by the slot) lives.
        let entry = unsafe {
            let buf = &mut *sh.rbuf.get();
            if sh.stamped {
                let m = &mut *sh.msg.get();
                m.iov = libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: buf.len(),
                };
                m.hdr = std::mem::zeroed();
                m.hdr.msg_iov = &mut m.iov;
                m.hdr.msg_iovlen = 1;
                m.hdr.msg_control = m.control.as_mut_ptr().cast();
                m.hdr.msg_controllen = std::mem::size_of_val(&m.control) as _;
                opcode::RecvMsg::new(types::Fd(sh.fd), &mut m.hdr)
                    .ioprio(if expect_none { POLL_FIRST } else { 0 })
                    .build()
            } else {
                opcode::Recv::new(types::Fd(sh.fd), buf.as_mut_ptr().cast(), buf.len() as u32)
                    .build()
            }
        };
        let slot = with_driver(|d| d.push(entry, sh, Kind::Recv))
            .ok_or_else(|| io::Error::other("this thread has no io_uring"))?;
        sh.recv.set(Op::InFlight(slot));
        Ok(())
    }

    /// A failed (or short) send, once its completion is in.
    fn send_error(&self) -> Option<io::Error> {
        match self.sh.send.get() {
            Op::Done(e) if e < 0 => Some(io::Error::from_raw_os_error(-e)),
            Op::Done(n) if (n as usize) < self.sh.sent_len.get() => Some(io::Error::new(
                io::ErrorKind::WriteZero,
                "the connection took only part of the request",
            )),
            _ => None,
        }
    }
}

impl UringConn {
    /// Reads from the oldest chunk of the multishot receive into `buf`; `false` if there is
    /// none. A chunk read to its end goes back to the ring.
    fn read_chunk(&self, buf: &mut ReadBuf<'_>) -> bool {
        let sh = &self.sh;
        if sh.chunks.borrow().is_empty() {
            return false;
        }
        with_driver(|d| {
            let bufs = d
                .bufs
                .as_mut()
                .expect("chunks come from the provided buffers");
            let mut chunks = sh.chunks.borrow_mut();
            let c = chunks.front_mut().expect("not empty");
            let n = ((c.end - c.start) as usize).min(buf.remaining());
            // SAFETY: the completion reported these bytes, and the buffer is not given back
            // before they are read.
            buf.put_slice(unsafe { bufs.bytes(c.bid, c.start as usize, c.start as usize + n) });
            c.start += n as u32;
            if c.stamp > 0 {
                sh.stamp.set(c.stamp);
            }
            if c.start == c.end {
                bufs.give(c.bid);
                chunks.pop_front();
            }
        });
        true
    }
}

impl AsyncRead for UringConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let sh = &this.sh;
        loop {
            // The multishot receive's bytes came before any a single receive read after
            // it ended.
            if this.read_chunk(buf) {
                if sh.chunks.borrow().is_empty() && sh.multi.get() == Op::Idle {
                    // Read to the end of a receive that stopped: the next goes in now, as
                    // after a single receive (below).
                    this.arm_recv(true)?;
                }
                return Poll::Ready(Ok(()));
            }
            let (pos, len) = (sh.rpos.get(), sh.rlen.get());
            if pos < len {
                let n = (len - pos).min(buf.remaining());
                // SAFETY: bytes `pos..len` came from a completed receive (the kernel wrote
                // them: initialized), and no receive is in flight while any are unread.
                let filled = unsafe {
                    let rbuf = &*sh.rbuf.get();
                    std::slice::from_raw_parts(rbuf.as_ptr().add(pos).cast::<u8>(), n)
                };
                buf.put_slice(filled);
                sh.rpos.set(pos + n);
                if pos + n == len && !sh.single_use {
                    // Drained: the next receive goes in now, so that bytes the server sends
                    // while the connection is idle (an unasked response, a close) are in
                    // before the next request is written (the link checks every reuse). It is
                    // the one the next response would need anyway. (A receive that filled
                    // the buffer likely left bytes in the socket: it is tried at once.)
                    this.arm_recv(len < READ_BUF)?;
                }
                return Poll::Ready(Ok(()));
            }
            match sh.recv.get() {
                Op::Done(res) => {
                    sh.recv.set(Op::Idle);
                    if res < 0 {
                        return Poll::Ready(Err(this.failure(res)));
                    }
                    if res == 0 {
                        return Poll::Ready(Ok(()));
                    }
                    sh.rpos.set(0);
                    sh.rlen.set(res as usize);
                    continue;
                }
                Op::InFlight(_) => return this.wait_read(cx),
                Op::Idle | Op::Deferred => {}
            }
            match sh.multi.get() {
                Op::Done(res) => {
                    // Every chunk before its end is read: the end is the server's close
                    // (0) or an error. Reported once; a read after that arms again.
                    sh.multi.set(Op::Idle);
                    if res < 0 {
                        return Poll::Ready(Err(this.failure(res)));
                    }
                    return Poll::Ready(Ok(()));
                }
                Op::InFlight(_) => return this.wait_read(cx),
                Op::Idle | Op::Deferred => {
                    if let Some(e) = this.send_error() {
                        return Poll::Ready(Err(e));
                    }
                    this.arm_recv(false)?;
                }
            }
        }
    }
}

impl UringConn {
    /// A read waits for its receive's completion (a failed send ends it first).
    fn wait_read(&self, cx: &Context<'_>) -> Poll<io::Result<()>> {
        if let Some(e) = self.send_error() {
            return Poll::Ready(Err(e));
        }
        self.sh.waker.set(Some(cx.waker().clone()));
        Poll::Pending
    }
}

impl AsyncWrite for UringConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let sh = &this.sh;
        match sh.send.get() {
            Op::InFlight(_) => {
                sh.waker.set(Some(cx.waker().clone()));
                sh.write_waiting.set(true);
                return Poll::Pending;
            }
            Op::Done(_) => {
                if let Some(e) = this.send_error() {
                    return Poll::Ready(Err(e));
                }
            }
            Op::Idle | Op::Deferred => {}
        }
        if let Op::Done(e) = sh.connect.get() {
            if e < 0 {
                return Poll::Ready(Err(io::Error::from_raw_os_error(-e)));
            }
        }
        // SAFETY: no send is in flight: the kernel holds no pointer into `wbuf`, and the
        // one set here stays valid while `sh` (held by the slot) lives.
        let mut entry = unsafe {
            let w = &mut *sh.wbuf.get();
            w.clear();
            w.extend_from_slice(buf);
            opcode::Send::new(types::Fd(sh.fd), w.as_ptr(), w.len() as u32)
                .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
                .build()
        };
        let deferred = sh.connect.get() == Op::Deferred;
        let pushed = with_driver(|d| {
            if deferred {
                // connect -> send -> receive, one chain: each runs when the one before
                // succeeded, and is cancelled if it failed.
                d.reserve(3);
                this.queue_connect(d);
                entry = entry.flags(squeue::Flags::IO_LINK);
            }
            d.push(entry, sh, Kind::Send)
        });
        let Some(slot) = pushed else {
            return Poll::Ready(Err(io::Error::other("this thread has no io_uring")));
        };
        sh.send.set(Op::InFlight(slot));
        sh.sent_len.set(buf.len());
        // The response's receive goes in the same submission (right behind the send: the
        // chain's last link when the connect went in ahead).
        debug_assert!(!deferred || (sh.recv.get() == Op::Idle && sh.rpos.get() == sh.rlen.get()));
        this.arm_recv(true)?;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // SAFETY: shutdown(2) on the connection's own descriptor.
        unsafe { libc::shutdown(self.sh.fd, libc::SHUT_WR) };
        Poll::Ready(Ok(()))
    }
}

impl Drop for UringConn {
    /// Cancels what is in flight and closes the descriptor, both through the ring (queued
    /// with the next submission, no system call of their own).
    fn drop(&mut self) {
        let sh = &self.sh;
        sh.dropped.set(true);
        let queued = with_driver(|d| {
            if let Some(bufs) = d.bufs.as_mut() {
                for c in sh.chunks.borrow_mut().drain(..) {
                    bufs.give(c.bid);
                }
            }
            for op in [&sh.connect, &sh.send, &sh.recv, &sh.multi] {
                if let Op::InFlight(slot) = op.get() {
                    d.push_raw(
                        &opcode::AsyncCancel::new(u64::from(slot))
                            .build()
                            .flags(squeue::Flags::SKIP_SUCCESS)
                            .user_data(IGNORED),
                    );
                }
            }
            d.push_raw(
                &opcode::Close::new(types::Fd(sh.fd))
                    .build()
                    .flags(squeue::Flags::SKIP_SUCCESS)
                    .user_data(IGNORED),
            );
        });
        if queued.is_none() {
            // No ring (its thread is ending): nothing can be in flight on it any more.
            // SAFETY: the connection's own descriptor, closed once.
            unsafe { libc::close(sh.fd) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Reads one request on `s` and answers it with a 2-byte body; returns when the request
    /// was in.
    fn answer_one_request(s: &mut std::net::TcpStream) -> std::time::Instant {
        let received = read_one_request(s);
        answer(s);
        received
    }

    /// Reads one request on `s`; returns when it was in.
    fn read_one_request(s: &mut std::net::TcpStream) -> std::time::Instant {
        let mut buf = [0u8; 1024];
        let mut got = Vec::new();
        while !got.ends_with(b"\r\n\r\n") {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "the client closed before its request ended");
            got.extend_from_slice(&buf[..n]);
        }
        std::time::Instant::now()
    }

    /// Answers a request on `s` with a 2-byte body.
    fn answer(s: &mut std::net::TcpStream) {
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .unwrap();
    }

    /// A runtime as a worker's (what is queued goes in when its event loop parks), with
    /// this thread's ring installed.
    fn ring_runtime() -> tokio::runtime::Runtime {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_park(flush)
            .build()
            .unwrap();
        install().unwrap();
        rt
    }

    /// A server on a thread of its own: one connection accepted on a loopback port and handed
    /// to `serve`; the port, and the thread to join for what `serve` returns.
    fn serve_one_connection<T: Send + 'static>(
        serve: impl FnOnce(std::net::TcpStream) -> T + Send + 'static,
    ) -> (std::net::SocketAddr, std::thread::JoinHandle<T>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || serve(listener.accept().unwrap().0));
        (addr, server)
    }

    /// A paced ring (the open loop's dispatcher takes completions at its own wake-ups) lets
    /// a response wait in the ring, and still charges it its arrival: the read reports the
    /// kernel's receive timestamp, taken before the ring was reaped.
    #[test]
    fn a_paced_ring_charges_a_response_its_arrival_not_its_reaping() {
        available().expect("io_uring must be available to test the io_uring transport");
        let _on = loadlab_system::os::hold_rx_timestamps().unwrap();
        let (written_tx, written_rx) = tokio::sync::oneshot::channel();
        let (addr, server) = serve_one_connection(move |mut s| {
            answer_one_request(&mut s);
            written_tx.send(()).unwrap();
            // Held open until the client is done.
            let _ = s.read(&mut [0u8; 1]);
        });
        let rt = ring_runtime();
        let local = tokio::task::LocalSet::new();
        let (arrived, reaped_after, read) = local.block_on(&rt, async move {
            tokio::task::spawn_local(drive());
            pace(true);
            let mut c = UringConn::open(addr, None, true, false).unwrap();
            c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            // Parked here: the connect, the request and its receive go to the kernel.
            written_rx.await.unwrap();
            // The response is in the socket (loopback delivers during the server's
            // write); the ring is not reaped while paced.
            std::thread::sleep(std::time::Duration::from_millis(20));
            let reaped_after = loadlab_system::os::realtime_ns();
            reap_now();
            let mut buf = [0u8; 64];
            let n = c.read(&mut buf).await.unwrap();
            let arrived = c.received_at();
            pace(false);
            drop(c);
            (arrived, reaped_after, buf[..n].to_vec())
        });
        drop(local);
        drop(rt);
        uninstall();
        server.join().unwrap();
        assert!(
            read.ends_with(b"\r\n\r\nok"),
            "{:?}",
            String::from_utf8_lossy(&read)
        );
        let arrived = arrived.expect("a stamped read carries the arrival time");
        assert!(
            arrived < reaped_after,
            "stamped at the reaping ({arrived}), not at the arrival (before {reaped_after})"
        );
    }

    /// The paced dispatcher's sleep in the ring submits what was queued before it sleeps
    /// (the server has the request long before the sleep ends), never ends before its
    /// deadline though the response completes meanwhile, and takes the response in after:
    /// with absolute timeouts (Linux 6.12) and with the relative ones older kernels take.
    #[test]
    fn a_paced_sleep_in_the_ring_submits_first_and_ends_at_its_deadline() {
        available().expect("io_uring must be available to test the io_uring transport");
        for absolute in [true, false] {
            let (addr, server) = serve_one_connection(move |mut s| {
                let received = answer_one_request(&mut s);
                let _ = s.read(&mut [0u8; 1]);
                received
            });
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            install().unwrap();
            with_driver(|d| d.abs_timer = absolute);
            let clock = crate::clock::Clock::new();
            let local = tokio::task::LocalSet::new();
            let (slept, woke, deadline, read) = local.block_on(&rt, async move {
                assert!(pace(true), "a ring is paced once asked");
                let mut c = UringConn::open(addr, None, true, false).unwrap();
                c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                    .await
                    .unwrap();
                assert!(
                    with_driver(|d| d.queued).unwrap() > 0,
                    "queued, not yet submitted"
                );
                let deadline = clock.now() + 200_000_000;
                let slept = sleep_until(&clock, deadline);
                let woke = clock.now();
                let taken = with_driver(|d| d.in_flight).unwrap();
                assert_eq!(
                    taken, 0,
                    "the connect, send and receive all taken in by the sleep"
                );
                let mut buf = [0u8; 64];
                let n = c.read(&mut buf).await.unwrap();
                pace(false);
                drop(c);
                (slept, woke, deadline, buf[..n].to_vec())
            });
            drop(local);
            drop(rt);
            uninstall();
            let received = server.join().unwrap();
            assert!(slept, "a paced ring sleeps");
            assert!(woke >= deadline, "woke {} ns early", deadline - woke);
            assert!(
                received < clock.instant(deadline),
                "the request reached the server after the sleep (absolute timeout: {absolute})"
            );
            assert!(
                read.ends_with(b"ok"),
                "{:?}",
                String::from_utf8_lossy(&read)
            );
        }
    }

    /// A send that went through wakes no one: the request loop waits for the response, so
    /// the send's completion would cost it a poll for nothing. The response wakes it, once.
    #[test]
    fn a_send_that_went_through_wakes_no_one_and_the_response_does() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        struct Count(AtomicUsize);
        impl std::task::Wake for Count {
            fn wake(self: std::sync::Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        available().expect("io_uring must be available to test the io_uring transport");
        let (got_tx, got_rx) = std::sync::mpsc::channel();
        let (answer_tx, answer_rx) = std::sync::mpsc::channel::<()>();
        let (addr, server) = serve_one_connection(move |mut s| {
            read_one_request(&mut s);
            got_tx.send(()).unwrap();
            answer_rx.recv().unwrap();
            answer(&mut s);
            let _ = s.read(&mut [0u8; 1]);
        });
        let rt = ring_runtime();
        let local = tokio::task::LocalSet::new();
        let (after_send, after_response, read) = local.block_on(&rt, async move {
            tokio::task::spawn_local(drive());
            // Unstamped: a stamped socket's close can turn the kernel's receive timestamps
            // off for a moment, under another test's stamped read.
            let mut c = UringConn::connect(addr, None, false).await.unwrap();
            // From here the test takes the completions in itself.
            assert!(pace(true));
            c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            let count = std::sync::Arc::new(Count(AtomicUsize::new(0)));
            let waker = std::task::Waker::from(count.clone());
            let mut buf = [0u8; 64];
            let mut rb = ReadBuf::new(&mut buf);
            let mut cx = Context::from_waker(&waker);
            assert!(Pin::new(&mut c).poll_read(&mut cx, &mut rb).is_pending());
            flush();
            got_rx.recv().unwrap();
            reap_now();
            assert!(
                matches!(c.sh.send.get(), Op::Done(n) if n > 0),
                "the send's completion is in"
            );
            let after_send = count.0.load(Ordering::SeqCst);
            answer_tx.send(()).unwrap();
            let mut woken = 0;
            for _ in 0..200 {
                std::thread::sleep(std::time::Duration::from_millis(5));
                reap_now();
                woken = count.0.load(Ordering::SeqCst);
                if woken > after_send {
                    break;
                }
            }
            assert!(Pin::new(&mut c).poll_read(&mut cx, &mut rb).is_ready());
            let read = rb.filled().to_vec();
            pace(false);
            drop(c);
            (after_send, woken, read)
        });
        drop(local);
        drop(rt);
        uninstall();
        server.join().unwrap();
        assert_eq!(after_send, 0, "the send's completion woke the loop");
        assert_eq!(after_response, 1, "the response wakes the loop once");
        assert!(
            read.ends_with(b"ok"),
            "{:?}",
            String::from_utf8_lossy(&read)
        );
    }

    /// A connection's standing multishot receive: its bytes are read in the order they came
    /// through running out of provided buffers (the receive ends; the next is a single one
    /// into the connection's own buffer, then a standing one again), every buffer goes back
    /// once read, and a connection dropped with bytes unread gives its buffers back.
    #[test]
    fn a_standing_receive_reads_in_order_through_running_out_of_buffers() {
        available().expect("io_uring must be available to test the io_uring transport");
        let (piece_tx, piece_rx) = std::sync::mpsc::channel::<usize>();
        let (sent_tx, sent_rx) = std::sync::mpsc::channel::<()>();
        let (addr, server) = serve_one_connection(move |mut s| {
            s.set_nodelay(true).unwrap();
            for n in piece_rx {
                s.write_all(format!("{n:04}").as_bytes()).unwrap();
                sent_tx.send(()).unwrap();
            }
        });
        let total = MULTI_BUFS as usize + 40;
        let rt = ring_runtime();
        let local = tokio::task::LocalSet::new();
        let (held_full, no_bufs, read, held_after, held_unread, held_dropped) =
            local.block_on(&rt, async move {
                tokio::task::spawn_local(drive());
                let mut c = UringConn::connect(addr, None, false).await.unwrap();
                flush();
                // Completions are taken here only: one receive per piece, none read.
                assert!(pace(true));
                for n in 0..total {
                    piece_tx.send(n).unwrap();
                    sent_rx.recv().unwrap();
                    for _ in 0..100 {
                        reap_now();
                        if c.sh.chunks.borrow().len() > n.min(MULTI_BUFS as usize - 1)
                            || c.sh.no_bufs.get()
                        {
                            break;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                }
                let held_full = held_buffers().unwrap();
                let no_bufs = c.sh.no_bufs.get();
                pace(false);
                let mut read = Vec::new();
                let mut buf = [0u8; 64];
                while read.len() < total * 4 {
                    let n = c.read(&mut buf).await.unwrap();
                    assert!(n > 0, "closed early");
                    read.extend_from_slice(&buf[..n]);
                }
                let held_after = held_buffers().unwrap();
                // Three more pieces left unread, then the connection dropped.
                assert!(pace(true));
                for n in 0..3 {
                    piece_tx.send(n).unwrap();
                    sent_rx.recv().unwrap();
                }
                for _ in 0..100 {
                    reap_now();
                    if held_buffers().unwrap() > 0 {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                let held_unread = held_buffers().unwrap();
                drop(c);
                let held_dropped = held_buffers().unwrap();
                pace(false);
                drop(piece_tx);
                (
                    held_full,
                    no_bufs,
                    read,
                    held_after,
                    held_unread,
                    held_dropped,
                )
            });
        drop(local);
        drop(rt);
        uninstall();
        server.join().unwrap();
        assert_eq!(
            held_full, MULTI_BUFS,
            "every buffer held before the receive ran out"
        );
        assert!(no_bufs, "the standing receive ended for want of buffers");
        let want: String = (0..total).map(|n| format!("{n:04}")).collect();
        assert_eq!(
            String::from_utf8_lossy(&read),
            want,
            "bytes out of order or lost"
        );
        assert_eq!(held_after, 0, "a buffer read to its end was not given back");
        assert!(held_unread > 0, "the unread pieces hold no buffer");
        assert_eq!(held_dropped, 0, "a dropped connection kept its buffers");
    }

    /// A stamped standing receive (`recvmsg` into provided buffers) reads the bytes with
    /// their arrival time and reports the server's close as the end of the stream (whose
    /// completion carries a header and no payload), once every byte before it is read.
    #[test]
    fn a_stamped_standing_receive_reads_the_arrival_time_and_the_close() {
        available().expect("io_uring must be available to test the io_uring transport");
        let _on = loadlab_system::os::hold_rx_timestamps().unwrap();
        let (addr, server) = serve_one_connection(move |mut s| {
            read_one_request(&mut s);
            answer(&mut s);
        });
        let rt = ring_runtime();
        let local = tokio::task::LocalSet::new();
        let (read, stamp, multi) = local.block_on(&rt, async move {
            tokio::task::spawn_local(drive());
            let mut c = UringConn::connect(addr, None, true).await.unwrap();
            let multi = matches!(c.sh.multi.get(), Op::InFlight(_));
            c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            let mut read = Vec::new();
            let mut buf = [0u8; 64];
            let ended = tokio::time::timeout(std::time::Duration::from_secs(10), async {
                loop {
                    let n = c.read(&mut buf).await.unwrap();
                    if n == 0 {
                        break;
                    }
                    read.extend_from_slice(&buf[..n]);
                }
            })
            .await;
            assert!(ended.is_ok(), "the server's close was never read");
            (read, c.received_at(), multi)
        });
        drop(local);
        drop(rt);
        uninstall();
        server.join().unwrap();
        assert!(
            multi,
            "a connection that is up reads with a standing receive"
        );
        assert!(
            read.ends_with(b"\r\n\r\nok"),
            "{:?}",
            String::from_utf8_lossy(&read)
        );
        assert!(
            stamp.is_some(),
            "no arrival time on a stamped standing receive"
        );
    }
}

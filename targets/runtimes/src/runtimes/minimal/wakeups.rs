//! What the executor shares with the reactor: the queue of woken task ids (with the eventfd
//! that wakes a parked executor) and each task's budget of socket operations per poll.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::task::Context;

/// Socket operations a task may make per poll before it is made to yield (tokio's is 128).
const BUDGET: u32 = 128;

thread_local! {
    /// What is left of the polled task's budget.
    static LEFT: Cell<u32> = const { Cell::new(BUDGET) };
}

/// Gives the task about to be polled its whole budget.
pub(super) fn reset_budget() {
    LEFT.with(|left| left.set(BUDGET));
}

/// Spends one unit of the polled task's budget; once it is spent, wakes the task (to be
/// polled on the next round) and returns false: the operation must answer `Pending`.
pub(super) fn spend_budget(cx: &Context<'_>) -> bool {
    LEFT.with(|left| match left.get() {
        0 => {
            cx.waker().wake_by_ref();
            false
        }
        n => {
            left.set(n - 1);
            true
        }
    })
}

/// The woken task ids, shared with every waker.
pub(super) struct Wakeups {
    /// Ids woken since the executor last took them.
    queue: Mutex<Vec<usize>>,
    /// Set while the executor waits in the kernel: a wake must then signal `eventfd`.
    parked: AtomicBool,
    /// Written by a wake while parked; the reactor watches it.
    eventfd: OwnedFd,
}

impl Wakeups {
    pub(super) fn new() -> io::Result<Self> {
        // SAFETY: eventfd(2) with valid flags; the result is checked below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Wakeups {
            queue: Mutex::new(Vec::new()),
            parked: AtomicBool::new(false),
            // SAFETY: `fd` is a new descriptor owned by nobody else.
            eventfd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Vec<usize>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn push(&self, id: usize) {
        self.queue().push(id);
        // SeqCst pairs with `park`: either the executor sees the id before it blocks, or
        // this sees `parked` and signals the eventfd.
        if self.parked.load(Ordering::SeqCst) {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a local array to our own eventfd. A full counter
            // (EAGAIN) already wakes the reactor, so the result needs no check.
            let _ = unsafe { libc::write(self.eventfd.as_raw_fd(), one.as_ptr().cast(), 8) };
        }
    }

    /// Moves the woken ids into `into`.
    pub(super) fn take(&self, into: &mut Vec<usize>) {
        std::mem::swap(&mut *self.queue(), into);
    }

    /// Whether a task is waiting to be polled.
    pub(super) fn any(&self) -> bool {
        !self.queue().is_empty()
    }

    /// Announces that the executor is about to wait in the kernel; false (and not parked)
    /// if a task was woken meanwhile and it must not wait.
    pub(super) fn park(&self) -> bool {
        self.parked.store(true, Ordering::SeqCst);
        if self.any() {
            self.parked.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// The wait in the kernel is over.
    pub(super) fn unpark(&self) {
        self.parked.store(false, Ordering::SeqCst);
    }

    /// The eventfd a wake writes while parked.
    pub(super) fn eventfd(&self) -> RawFd {
        self.eventfd.as_raw_fd()
    }

    /// Empties the eventfd's counter after it woke the reactor.
    pub(super) fn drain_eventfd(&self) {
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a local array from our own non-blocking fd.
        let _ = unsafe { libc::read(self.eventfd.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
    }
}

//! A single-threaded executor: tasks in a slab, a queue of woken task ids, and one reactor
//! turn between rounds of polling.
//!
//! A task gets a budget of socket operations per poll, as tokio's cooperative scheduling
//! gives one: once it is spent, reads and writes answer `Pending` and wake the task again,
//! so a connection whose client always has the next request ready cannot keep the thread
//! to itself (before it, a quick run of plans/io-modes.toml here measured p99 at 1024
//! streams of 258 ms in the epoll mode, where the hybrid mode, which yields whenever it
//! hands a read to the ring, had 15 ms).
//!
//! Wakers are `Send` (h2 and the cancellation token may be woken from any thread): a wake
//! pushes the task id onto a mutex-guarded queue (uncontended on the executor's own
//! thread) and, when the executor is parked in the kernel, writes an eventfd the reactor
//! watches.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Wake, Waker};

use super::reactor::Reactor;
use super::IoMode;

type LocalFuture = Pin<Box<dyn Future<Output = ()>>>;

/// Socket operations a task may make per poll before it is made to yield (tokio's is 128).
const BUDGET: u32 = 128;

thread_local! {
    /// Futures spawned during a poll, adopted by the executor after it.
    static SPAWNED: RefCell<Vec<LocalFuture>> = const { RefCell::new(Vec::new()) };
    /// What is left of the polled task's budget.
    static LEFT: Cell<u32> = const { Cell::new(BUDGET) };
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

/// Runs `future` as a task of this thread's executor (called from inside one of its tasks).
pub(super) fn spawn(future: impl Future<Output = ()> + 'static) {
    SPAWNED.with(|spawned| spawned.borrow_mut().push(Box::pin(future)));
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
    fn new() -> io::Result<Self> {
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

    fn push(&self, id: usize) {
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
    fn take(&self, into: &mut Vec<usize>) {
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

/// A task's waker: its id and whether it is already queued.
struct TaskWaker {
    id: usize,
    /// Set when queued, cleared just before the task is polled.
    scheduled: AtomicBool,
    wakeups: Arc<Wakeups>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            self.wakeups.push(self.id);
        }
    }
}

struct Task {
    future: LocalFuture,
    handle: Arc<TaskWaker>,
    waker: Waker,
}

/// One thread's executor and its reactor.
pub(super) struct Executor {
    tasks: Vec<Option<Task>>,
    free: Vec<usize>,
    wakeups: Arc<Wakeups>,
    reactor: Rc<Reactor>,
}

impl Executor {
    /// An executor whose reactor does I/O in `mode` (creating its ring or epoll instance;
    /// an io_uring refusal is the error).
    pub(super) fn new(mode: IoMode) -> io::Result<Self> {
        let wakeups = Arc::new(Wakeups::new()?);
        let reactor = Rc::new(Reactor::new(mode, Arc::clone(&wakeups))?);
        Ok(Executor {
            tasks: Vec::new(),
            free: Vec::new(),
            wakeups,
            reactor,
        })
    }

    /// The reactor, for the sockets the tasks create.
    pub(super) fn reactor(&self) -> Rc<Reactor> {
        Rc::clone(&self.reactor)
    }

    /// Runs `main` and every task spawned until `main` returns; the tasks still pending
    /// then are dropped.
    pub(super) fn block_on(
        mut self,
        main: impl Future<Output = io::Result<()>> + 'static,
    ) -> io::Result<()> {
        let outcome: Rc<RefCell<Option<io::Result<()>>>> = Rc::new(RefCell::new(None));
        let slot = Rc::clone(&outcome);
        self.insert(Box::pin(async move {
            let result = main.await;
            *slot.borrow_mut() = Some(result);
        }));
        let mut ready = Vec::new();
        loop {
            self.wakeups.take(&mut ready);
            for id in ready.drain(..) {
                self.poll(id);
            }
            self.adopt_spawned();
            if let Some(result) = outcome.borrow_mut().take() {
                return result;
            }
            let idle = !self.wakeups.any();
            self.reactor.turn(idle)?;
        }
    }

    fn poll(&mut self, id: usize) {
        let Some(Some(task)) = self.tasks.get_mut(id) else {
            return; // Woken after it finished.
        };
        task.handle.scheduled.store(false, Ordering::Release);
        LEFT.with(|left| left.set(BUDGET));
        let mut cx = Context::from_waker(&task.waker);
        if task.future.as_mut().poll(&mut cx).is_ready() {
            self.tasks[id] = None;
            self.free.push(id);
        }
    }

    fn adopt_spawned(&mut self) {
        let spawned = SPAWNED.with(|spawned| std::mem::take(&mut *spawned.borrow_mut()));
        for future in spawned {
            self.insert(future);
        }
    }

    /// Adds a task and queues it for its first poll.
    fn insert(&mut self, future: LocalFuture) {
        let id = self.free.pop().unwrap_or_else(|| {
            self.tasks.push(None);
            self.tasks.len() - 1
        });
        let handle = Arc::new(TaskWaker {
            id,
            scheduled: AtomicBool::new(false),
            wakeups: Arc::clone(&self.wakeups),
        });
        let waker = Waker::from(Arc::clone(&handle));
        waker.wake_by_ref();
        self.tasks[id] = Some(Task {
            future,
            handle,
            waker,
        });
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        // The tasks' sockets go back to the reactor before it is dropped.
        self.tasks.clear();
        SPAWNED.with(|spawned| spawned.borrow_mut().clear());
    }
}

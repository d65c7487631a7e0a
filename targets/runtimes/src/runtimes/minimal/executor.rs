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

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};

use super::reactor::Reactor;
use super::wakeups::{reset_budget, Wakeups};
use super::IoMode;

type LocalFuture = Pin<Box<dyn Future<Output = ()>>>;

thread_local! {
    /// Futures spawned during a poll, adopted by the executor after it.
    static SPAWNED: RefCell<Vec<LocalFuture>> = const { RefCell::new(Vec::new()) };
}

/// Runs `future` as a task of this thread's executor (called from inside one of its tasks).
pub(super) fn spawn(future: impl Future<Output = ()> + 'static) {
    SPAWNED.with(|spawned| spawned.borrow_mut().push(Box::pin(future)));
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
        reset_budget();
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

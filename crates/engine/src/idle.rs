//! Open loop: the request loops of one worker waiting for an arrival, and the dispatcher's
//! hand-off of an arrival to one of them.
//!
//! Everything here lives on the worker's own thread: the loops wait in a plain queue, with
//! no lock and no atomic of its own (a `tokio::sync::Notify` took both on every hand-off:
//! 1.3 % of a worker's `perf` samples at 20,000 requests a second, this queue 0.8 %, most of
//! it the task's wake-up itself). The loop idle the longest is
//! woken first, as `Notify` did: the arrivals go round every connection (`-c` connections
//! carry the load, and HTTP/2's stream slots take turns on its connections).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// One request loop's place among the idle ones: made once per loop, parked each time the
/// loop finds no arrival.
#[derive(Default)]
pub(crate) struct Idler {
    /// Waiting for [`IdleLoops::wake_one`] or [`IdleLoops::wake_all`].
    parked: Cell<bool>,
    /// In the queue (a loop woken by something else stays listed, and is skipped when the
    /// dispatcher comes to it).
    listed: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

/// The idle request loops of one worker, in the order they parked.
#[derive(Default)]
pub(crate) struct IdleLoops {
    queue: RefCell<VecDeque<Rc<Idler>>>,
}

impl IdleLoops {
    /// Parks `me` until the dispatcher wakes it: a wake-up from anything else leaves it
    /// parked. Dropping the future unparks it.
    pub(crate) fn wait<'a>(&'a self, me: &'a Rc<Idler>) -> Wait<'a> {
        Wait {
            loops: self,
            me,
            started: false,
        }
    }

    /// Wakes the loop idle the longest; `false` if none is parked.
    pub(crate) fn wake_one(&self) -> bool {
        loop {
            let next = self.queue.borrow_mut().pop_front();
            let Some(idler) = next else {
                return false;
            };
            idler.listed.set(false);
            if unpark(&idler) {
                return true;
            }
        }
    }

    /// Wakes every parked loop (the dispatcher is done).
    pub(crate) fn wake_all(&self) {
        let all = std::mem::take(&mut *self.queue.borrow_mut());
        for idler in all {
            idler.listed.set(false);
            unpark(&idler);
        }
    }
}

/// Wakes `idler` if it is parked; `false` if it is not (it stopped waiting on its own).
fn unpark(idler: &Idler) -> bool {
    if !idler.parked.replace(false) {
        return false;
    }
    if let Some(w) = idler.waker.borrow_mut().take() {
        w.wake();
    }
    true
}

/// [`IdleLoops::wait`]'s future.
pub(crate) struct Wait<'a> {
    loops: &'a IdleLoops,
    me: &'a Rc<Idler>,
    started: bool,
}

impl Future for Wait<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let me = self.me;
        if self.started && !me.parked.get() {
            return Poll::Ready(());
        }
        {
            let mut waker = me.waker.borrow_mut();
            match waker.as_mut() {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => *waker = Some(cx.waker().clone()),
            }
        }
        if !self.started {
            self.started = true;
            me.parked.set(true);
            if !me.listed.replace(true) {
                self.loops.queue.borrow_mut().push_back(me.clone());
            }
        }
        Poll::Pending
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        if self.started && self.me.parked.replace(false) {
            self.me.waker.borrow_mut().take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn waker() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    fn poll(f: &mut Pin<&mut Wait<'_>>, w: &Waker) -> Poll<()> {
        f.as_mut().poll(&mut Context::from_waker(w))
    }

    #[test]
    fn the_loop_idle_the_longest_is_woken_first_and_once() {
        let loops = IdleLoops::default();
        let (a, b) = (Rc::new(Idler::default()), Rc::new(Idler::default()));
        let ((ca, wa), (cb, wb)) = (waker(), waker());
        let mut fa = std::pin::pin!(loops.wait(&a));
        let mut fb = std::pin::pin!(loops.wait(&b));
        assert!(poll(&mut fa, &wa).is_pending());
        assert!(poll(&mut fb, &wb).is_pending());
        assert!(a.parked.get() && b.parked.get());
        assert!(loops.wake_one());
        assert_eq!(
            (ca.0.load(Ordering::Relaxed), cb.0.load(Ordering::Relaxed)),
            (1, 0)
        );
        assert!(poll(&mut fa, &wa).is_ready());
        assert!(poll(&mut fb, &wb).is_pending());
        // `a` parks again: behind `b`.
        let mut fa = std::pin::pin!(loops.wait(&a));
        assert!(poll(&mut fa, &wa).is_pending());
        assert!(loops.wake_one());
        assert_eq!(
            (ca.0.load(Ordering::Relaxed), cb.0.load(Ordering::Relaxed)),
            (1, 1)
        );
        assert!(poll(&mut fb, &wb).is_ready());
        assert!(loops.wake_one());
        assert_eq!(ca.0.load(Ordering::Relaxed), 2);
        assert!(poll(&mut fa, &wa).is_ready());
        assert!(!loops.wake_one());
        assert!(!a.parked.get() && !b.parked.get());
    }

    #[test]
    fn a_loop_woken_by_anything_else_stays_parked_and_listed_once() {
        let loops = IdleLoops::default();
        let a = Rc::new(Idler::default());
        let (ca, wa) = waker();
        {
            let mut f = std::pin::pin!(loops.wait(&a));
            assert!(poll(&mut f, &wa).is_pending());
            // A stray wake-up: still parked, polled again.
            assert!(poll(&mut f, &wa).is_pending());
            assert!(a.parked.get());
        }
        // The loop stopped waiting on its own (its future dropped): listed, not parked.
        assert!(!a.parked.get() && a.listed.get());
        let mut f = std::pin::pin!(loops.wait(&a));
        assert!(poll(&mut f, &wa).is_pending());
        assert_eq!(loops.queue.borrow().len(), 1, "listed once");
        assert!(loops.wake_one());
        assert_eq!(ca.0.load(Ordering::Relaxed), 1);
        assert!(poll(&mut f, &wa).is_ready());
        assert!(!loops.wake_one(), "no second wake-up for one park");
    }

    #[test]
    fn a_loop_that_left_is_skipped_and_wake_all_wakes_every_parked_loop() {
        let loops = IdleLoops::default();
        let idlers: Vec<_> = (0..3).map(|_| Rc::new(Idler::default())).collect();
        let wakers: Vec<_> = (0..3).map(|_| waker()).collect();
        let mut f0 = Box::pin(loops.wait(&idlers[0]));
        let mut f1 = Box::pin(loops.wait(&idlers[1]));
        let mut f2 = Box::pin(loops.wait(&idlers[2]));
        assert!(poll(&mut f0.as_mut(), &wakers[0].1).is_pending());
        assert!(poll(&mut f1.as_mut(), &wakers[1].1).is_pending());
        assert!(poll(&mut f2.as_mut(), &wakers[2].1).is_pending());
        drop(f0);
        // The oldest loop left: the dispatcher skips it and wakes the next.
        assert!(loops.wake_one());
        assert_eq!(wakers[0].0 .0.load(Ordering::Relaxed), 0);
        assert_eq!(wakers[1].0 .0.load(Ordering::Relaxed), 1);
        assert!(poll(&mut f1.as_mut(), &wakers[1].1).is_ready());
        loops.wake_all();
        assert_eq!(wakers[2].0 .0.load(Ordering::Relaxed), 1);
        assert!(poll(&mut f2.as_mut(), &wakers[2].1).is_ready());
        assert!(idlers.iter().all(|i| !i.parked.get()));
        assert!(loops.queue.borrow().is_empty());
    }
}

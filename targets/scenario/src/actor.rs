//! The single slow actor behind `/send_wait`, `/fsend_wait` and `/send_nowait`.
//!
//! The actor lives on its own arbiter (thread) and spends `--actor-delay-ms` on each message
//! (a blocking sleep, as in the source), so messages are handled strictly one at a time.
//!
//! Its mailbox holds at most `--mailbox` messages, counted by a semaphore: a message takes a
//! slot when it is sent and gives it back when the actor picks it up. Senders that wait for
//! the reply also wait for a free slot (backpressure); `/send_nowait` does not wait, and a
//! message that does not fit is counted as dropped.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use actix::{Actor, Addr, Arbiter, Context, Handler, MailboxError, Message};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

/// A message could not be delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SendError {
    /// The mailbox was full; the message was dropped and counted.
    #[error("mailbox full: message dropped")]
    Full,
    /// The actor or its mailbox has stopped (the server is shutting down).
    #[error("actor stopped")]
    Stopped,
}

impl From<MailboxError> for SendError {
    fn from(_: MailboxError) -> Self {
        SendError::Stopped
    }
}

struct Job {
    /// The mailbox slot this message occupies until the actor picks it up.
    _slot: OwnedSemaphorePermit,
}

impl Message for Job {
    type Result = ();
}

struct SlowActor {
    delay: Duration,
    processed: Arc<AtomicU64>,
}

impl Actor for SlowActor {
    type Context = Context<Self>;
}

impl Handler<Job> for SlowActor {
    type Result = ();

    fn handle(&mut self, job: Job, _: &mut Context<Self>) {
        drop(job); // out of the mailbox: free its slot
        thread::sleep(self.delay);
        self.processed.fetch_add(1, Relaxed);
    }
}

/// The actor's counters, as reported by `/stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ActorStats {
    /// Messages the mailbox holds at most (`--mailbox`).
    pub mailbox_capacity: usize,
    /// Messages waiting in the mailbox now.
    pub mailbox_depth: usize,
    /// Messages the actor has finished.
    pub processed: u64,
    /// `/send_nowait` messages dropped because the mailbox was full.
    pub dropped: u64,
}

/// The address of the actor, with its bounded mailbox.
pub(crate) struct Mailbox {
    addr: Addr<SlowActor>,
    arbiter: Arbiter,
    slots: Arc<Semaphore>,
    capacity: usize,
    processed: Arc<AtomicU64>,
    dropped: AtomicU64,
}

impl Mailbox {
    /// Starts the actor on a new arbiter. Must be called inside an actix `System`.
    pub(crate) fn start(delay: Duration, capacity: usize) -> Self {
        let arbiter = Arbiter::new();
        let processed = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&processed);
        let addr = SlowActor::start_in_arbiter(&arbiter.handle(), move |ctx| {
            // Unbounded at the actix level: the semaphore is the one bound.
            ctx.set_mailbox_capacity(0);
            SlowActor {
                delay,
                processed: counter,
            }
        });
        Mailbox {
            addr,
            arbiter,
            slots: Arc::new(Semaphore::new(capacity)),
            capacity,
            processed,
            dropped: AtomicU64::new(0),
        }
    }

    /// Sends a message and resolves when the actor has processed it, first waiting for a
    /// free mailbox slot.
    pub(crate) async fn ask(&self) -> Result<(), SendError> {
        let slot = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .map_err(|_| SendError::Stopped)?;
        Ok(self.addr.send(Job { _slot: slot }).await?)
    }

    /// Sends a message without waiting; if the mailbox is full it is dropped and counted.
    pub(crate) fn tell(&self) -> Result<(), SendError> {
        match Arc::clone(&self.slots).try_acquire_owned() {
            Ok(slot) => {
                self.addr.do_send(Job { _slot: slot });
                Ok(())
            }
            Err(TryAcquireError::NoPermits) => {
                self.dropped.fetch_add(1, Relaxed);
                Err(SendError::Full)
            }
            Err(TryAcquireError::Closed) => Err(SendError::Stopped),
        }
    }

    pub(crate) fn stats(&self) -> ActorStats {
        ActorStats {
            mailbox_capacity: self.capacity,
            mailbox_depth: self.capacity - self.slots.available_permits(),
            processed: self.processed.load(Relaxed),
            dropped: self.dropped.load(Relaxed),
        }
    }
}

impl Drop for Mailbox {
    /// Stops the actor's arbiter (its thread) with the last reference to the mailbox.
    fn drop(&mut self) {
        self.arbiter.stop();
    }
}

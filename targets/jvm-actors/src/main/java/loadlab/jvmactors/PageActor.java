package loadlab.jvmactors;

import org.apache.pekko.actor.AbstractActor;

/**
 * One routee of the page router: does a page's work on the thread the page dispatcher
 * lends it, one message at a time, then answers. Like a Play action's blocking call, the
 * work holds the thread for its whole duration.
 */
final class PageActor extends AbstractActor {
    /** A page's work: {@code cpu} spins, otherwise sleeps, for {@code millis}. */
    static final class Work {
        final boolean cpu;
        final long millis;
        /** {@link System#nanoTime} after which nobody waits for the answer any more. */
        final long deadline;

        Work(boolean cpu, long millis, long deadline) {
            this.cpu = cpu;
            this.millis = millis;
            this.deadline = deadline;
        }
    }

    /** The answer to a {@link Work}. */
    static final Object DONE = "done";

    private final Stats stats;

    PageActor(Stats stats) {
        this.stats = stats;
    }

    @Override
    public Receive createReceive() {
        return receiveBuilder().match(Work.class, this::work).build();
    }

    private void work(Work w) throws InterruptedException {
        stats.busy.incrementAndGet();
        try {
            perform(w);
        } finally {
            stats.busy.decrementAndGet();
        }
        stats.completed.incrementAndGet();
        if (System.nanoTime() - w.deadline > 0) {
            stats.completedAfterTimeout.incrementAndGet();
        }
        getSender().tell(DONE, getSelf());
    }

    static long sink;

    private static void perform(Work w) throws InterruptedException {
        if (!w.cpu) {
            Thread.sleep(w.millis);
            return;
        }
        long end = System.nanoTime() + w.millis * 1_000_000L;
        long x = 0;
        while (System.nanoTime() - end < 0) {
            for (int i = 0; i < 1_000; i++) {
                x = x * 6_364_136_223_846_793_005L + 1;
            }
        }
        sink = x;
    }
}

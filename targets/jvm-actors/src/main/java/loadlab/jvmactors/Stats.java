package loadlab.jvmactors;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/** The counters behind {@code /stats}: cumulative since start, except the gauges. */
final class Stats {
    /** Distinct pages counted by name; further ones are counted under {@code other}. */
    static final int MAX_PAGES = 1_000;

    final AtomicLong health = new AtomicLong();
    final AtomicLong page = new AtomicLong();
    final AtomicLong stats = new AtomicLong();
    final AtomicLong other = new AtomicLong();
    /** Gauge: asks sent to the router and not yet answered or timed out. */
    final AtomicLong asksInFlight = new AtomicLong();
    /** Asks that timed out (each answered 503). */
    final AtomicLong askTimeouts = new AtomicLong();
    /** Gauge: routees doing a page's work now (each holds a dispatcher thread). */
    final AtomicLong busy = new AtomicLong();
    /** Work items the routees finished. */
    final AtomicLong completed = new AtomicLong();
    /** Of those, the ones finished after their ask had already timed out: wasted work. */
    final AtomicLong completedAfterTimeout = new AtomicLong();

    /** Per page (`kind:work_ms`): requests, answered 200, timed out. */
    static final class Page {
        final AtomicLong requests = new AtomicLong();
        final AtomicLong ok = new AtomicLong();
        final AtomicLong timeouts = new AtomicLong();
    }

    private final Map<String, Page> pages = new ConcurrentHashMap<>();
    private final Page otherPages = new Page();

    Page page(String name) {
        Page p = pages.get(name);
        if (p != null) {
            return p;
        }
        if (pages.size() >= MAX_PAGES) {
            return otherPages;
        }
        return pages.computeIfAbsent(name, k -> new Page());
    }

    /** Back to zero after the warm-up; the gauges are left as they are (zero by then). */
    void reset() {
        for (AtomicLong c : new AtomicLong[] {health, page, stats, other, askTimeouts, completed, completedAfterTimeout}) {
            c.set(0);
        }
        pages.clear();
        otherPages.requests.set(0);
        otherPages.ok.set(0);
        otherPages.timeouts.set(0);
    }

    /** The document of {@code /stats}. */
    String json(Options o, int cpus) {
        StringBuilder b = new StringBuilder(256);
        b.append("{\"requests\":{\"/health\":").append(health.get())
            .append(",\"/page\":").append(page.get())
            .append(",\"/stats\":").append(stats.get())
            .append(",\"other\":").append(other.get()).append("},");
        b.append("\"pages\":{");
        Map<String, Page> sorted = new TreeMap<>(pages);
        if (otherPages.requests.get() > 0) {
            sorted.put("other", otherPages);
        }
        boolean first = true;
        for (Map.Entry<String, Page> e : sorted.entrySet()) {
            if (!first) {
                b.append(',');
            }
            first = false;
            Page p = e.getValue();
            // Page names are made of a kind (a fixed word) and a number: no escaping needed.
            b.append('"').append(e.getKey()).append("\":{\"requests\":").append(p.requests.get())
                .append(",\"ok\":").append(p.ok.get())
                .append(",\"timeouts\":").append(p.timeouts.get()).append('}');
        }
        b.append("},");
        b.append("\"asks_in_flight\":").append(asksInFlight.get())
            .append(",\"ask_timeouts\":").append(askTimeouts.get())
            .append(",\"ask_timeout_ms\":").append(o.askTimeoutMs)
            .append(",\"routees\":").append(o.routees)
            .append(",\"pool_size\":").append(o.poolSize(cpus))
            .append(",\"dispatcher\":{\"cpus\":").append(cpus)
            .append(",\"parallelism_min\":").append(o.parallelismMin)
            .append(",\"parallelism_factor\":").append(o.parallelismFactor)
            .append(",\"parallelism_max\":").append(o.parallelismMax)
            .append(",\"busy\":").append(busy.get())
            .append(",\"completed\":").append(completed.get())
            .append(",\"completed_after_timeout\":").append(completedAfterTimeout.get())
            .append("}}");
        return b.toString();
    }
}

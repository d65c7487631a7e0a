package loadlab.jvmactors;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import java.net.Inet6Address;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.Props;
import org.apache.pekko.http.javadsl.Http;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpMethods;
import org.apache.pekko.http.javadsl.model.HttpRequest;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.pattern.AskTimeoutException;
import org.apache.pekko.pattern.Patterns;
import org.apache.pekko.routing.RoundRobinPool;
import org.apache.pekko.stream.Materializer;

/**
 * Document 003's application on Apache Pekko: {@code /page} asks an actor of a round-robin
 * router and waits for the answer with an ask timeout; the actors do the page's blocking
 * (or CPU) work on a fork-join dispatcher sized by {@code parallelism-min/factor/max}.
 *
 * <p>Edges shared with the other reference servers: {@code --bind} (port 0 picks one), the
 * ready line {@code listening on ADDR} on stdout, SIGTERM finishes in-flight requests within
 * {@code --shutdown-timeout} and exits 0, a bad flag exits 2 naming it.
 */
public final class Main {
    /** Longest work a page may ask for. */
    static final long MAX_WORK_MS = 60_000;

    private Main() {}

    public static void main(String[] args) {
        Options o;
        try {
            o = Options.parse(args);
        } catch (Options.Invalid e) {
            System.err.println("error: " + e.getMessage());
            System.exit(2);
            return;
        }
        if (o.help) {
            System.out.print(Options.USAGE);
            return;
        }
        int cpus = Runtime.getRuntime().availableProcessors();
        ActorSystem system = ActorSystem.create("jvm-actors", config(o));
        Stats stats = new Stats();
        ActorRef router = system.actorOf(
            new RoundRobinPool(o.routees).props(
                Props.create(PageActor.class, () -> new PageActor(stats)).withDispatcher("page-dispatcher")),
            "pages");
        Materializer mat = Materializer.matFromSystem(system);
        // Until the warm-up is over, /health answers 503: a readiness probe waits for it.
        AtomicBoolean ready = new AtomicBoolean(o.warmupRequests == 0);
        Duration askTimeout = Duration.ofMillis(o.askTimeoutMs);

        org.apache.pekko.japi.function.Function<HttpRequest, CompletionStage<HttpResponse>> handler =
            request -> {
                request.discardEntityBytes(mat);
                String path = request.getUri().path();
                if (!request.method().equals(HttpMethods.GET)) {
                    stats.other.incrementAndGet();
                    return done(HttpResponse.create().withStatus(StatusCodes.METHOD_NOT_ALLOWED)
                        .withEntity("method not allowed: every endpoint answers GET\n"));
                }
                switch (path) {
                    case "/health":
                        stats.health.incrementAndGet();
                        if (!ready.get()) {
                            return done(HttpResponse.create().withStatus(StatusCodes.SERVICE_UNAVAILABLE)
                                .withEntity("warming up\n"));
                        }
                        return done(text("ok"));
                    case "/stats":
                        stats.stats.incrementAndGet();
                        return done(HttpResponse.create()
                            .withEntity(ContentTypes.APPLICATION_JSON, stats.json(o, cpus)));
                    case "/page":
                        stats.page.incrementAndGet();
                        return page(request, router, stats, askTimeout);
                    default:
                        stats.other.incrementAndGet();
                        return done(HttpResponse.create().withStatus(StatusCodes.NOT_FOUND)
                            .withEntity("not found\n"));
                }
            };

        ServerBinding binding;
        String addr = o.bind.getHostString() + ":" + o.bind.getPort();
        try {
            binding = Http.get(system)
                .newServerAt(o.bind.getHostString(), o.bind.getPort())
                .bind(handler)
                .toCompletableFuture()
                .get(30, TimeUnit.SECONDS);
        } catch (ExecutionException | CompletionException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            System.err.println("error: --bind: cannot listen on " + addr + ": " + cause.getMessage());
            Runtime.getRuntime().halt(1);
            return;
        } catch (Exception e) {
            System.err.println("error: --bind: cannot listen on " + addr + ": " + e);
            Runtime.getRuntime().halt(1);
            return;
        }
        installShutdown(system, binding, stats, o, cpus);
        if (o.warmupRequests > 0) {
            warmUp(binding.localAddress(), o.warmupRequests, stats);
            ready.set(true);
        }
        System.err.println("jvm-actors: " + o.routees + " routees, page dispatcher of " + o.poolSize(cpus)
            + " threads (" + cpus + " CPUs x parallelism-factor " + o.parallelismFactor + ", within parallelism-min "
            + o.parallelismMin + " and parallelism-max " + o.parallelismMax + "), ask timeout " + o.askTimeoutMs + " ms");
        System.out.println("listening on " + format(binding.localAddress()));
        System.out.flush();
    }

    /**
     * Sends {@code n} requests to this server, the way nginx forwards them (HTTP/1.0, a
     * connection each), over 4 connections at a time: {@code /page} with no work, sleep and
     * cpu, and {@code /health}. A fresh JVM interprets its code and compiles the hot parts as
     * it runs them; here about 5 ms of CPU per request at first, under 2 ms after 1,500 (on
     * the 2-core machine of the README). Without a warm-up, that compilation lands in the
     * first seconds of the measurement. The counters start from zero afterwards.
     */
    private static void warmUp(InetSocketAddress addr, int n, Stats stats) {
        long start = System.nanoTime();
        String[] paths = {"/page?work_ms=0", "/page?work_ms=0&kind=cpu", "/health", "/page?work_ms=0"};
        java.util.concurrent.atomic.AtomicInteger next = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicInteger failed = new java.util.concurrent.atomic.AtomicInteger();
        Thread[] threads = new Thread[4];
        for (int t = 0; t < threads.length; t++) {
            threads[t] = new Thread(() -> {
                for (int i = next.getAndIncrement(); i < n; i = next.getAndIncrement()) {
                    try (java.net.Socket s = new java.net.Socket()) {
                        s.connect(addr, 5_000);
                        s.setSoTimeout(10_000);
                        s.getOutputStream().write(("GET " + paths[i % paths.length]
                            + " HTTP/1.0\r\nHost: warmup\r\n\r\n").getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                        java.io.InputStream in = s.getInputStream();
                        byte[] buf = new byte[4096];
                        while (in.read(buf) >= 0) {
                            // read to the end: the server closes an HTTP/1.0 connection
                        }
                    } catch (java.io.IOException e) {
                        failed.incrementAndGet();
                    }
                }
            }, "warmup-" + t);
            threads[t].start();
        }
        for (Thread t : threads) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
        stats.reset();
        System.err.printf("jvm-actors: warmed up with %d requests in %.1f s (%d failed)%n",
            n, (System.nanoTime() - start) / 1e9, failed.get());
    }

    private static CompletionStage<HttpResponse> page(
            HttpRequest request, ActorRef router, Stats stats, Duration askTimeout) {
        Optional<String> workParam = request.getUri().query().get("work_ms");
        String kind = request.getUri().query().get("kind").orElse("sleep");
        long workMs;
        try {
            workMs = Long.parseLong(workParam.orElse(""));
        } catch (NumberFormatException e) {
            workMs = -1;
        }
        if (workMs < 0 || workMs > MAX_WORK_MS) {
            return done(HttpResponse.create().withStatus(StatusCodes.BAD_REQUEST)
                .withEntity("work_ms: expected 0..=" + MAX_WORK_MS + " (milliseconds)\n"));
        }
        if (!kind.equals("sleep") && !kind.equals("cpu")) {
            return done(HttpResponse.create().withStatus(StatusCodes.BAD_REQUEST)
                .withEntity("kind: expected sleep or cpu\n"));
        }
        Stats.Page counters = stats.page(kind + ":" + workMs);
        counters.requests.incrementAndGet();
        long deadline = System.nanoTime() + askTimeout.toNanos();
        PageActor.Work work = new PageActor.Work(kind.equals("cpu"), workMs, deadline);
        stats.asksInFlight.incrementAndGet();
        long ms = workMs;
        return Patterns.ask(router, work, askTimeout).handle((answer, error) -> {
            stats.asksInFlight.decrementAndGet();
            if (error == null) {
                counters.ok.incrementAndGet();
                return text("page: " + kind + " " + ms + " ms");
            }
            Throwable cause = error instanceof CompletionException && error.getCause() != null
                ? error.getCause() : error;
            if (cause instanceof AskTimeoutException) {
                stats.askTimeouts.incrementAndGet();
                counters.timeouts.incrementAndGet();
                // What Play answers when an action's ask times out.
                return HttpResponse.create().withStatus(StatusCodes.SERVICE_UNAVAILABLE)
                    .withEntity("ask timed out after " + askTimeout.toMillis() + " ms (AskTimeoutException)\n");
            }
            return HttpResponse.create().withStatus(StatusCodes.INTERNAL_SERVER_ERROR)
                .withEntity("page failed: " + cause + "\n");
        });
    }

    private static HttpResponse text(String body) {
        return HttpResponse.create().withEntity(ContentTypes.TEXT_PLAIN_UTF8, body);
    }

    private static CompletionStage<HttpResponse> done(HttpResponse r) {
        return CompletableFuture.completedFuture(r);
    }

    private static String format(InetSocketAddress a) {
        String host = a.getAddress() == null ? a.getHostString() : a.getAddress().getHostAddress();
        if (a.getAddress() instanceof Inet6Address) {
            host = "[" + host + "]";
        }
        return host + ":" + a.getPort();
    }

    /** Pekko's settings: the page dispatcher from the flags, logs on stderr. */
    static Config config(Options o) {
        long requestTimeoutMs = o.askTimeoutMs + 5_000;
        String text = String.join("\n",
            "pekko {",
            "  loglevel = WARNING",
            "  stdout-loglevel = OFF",
            "  loggers = [\"loadlab.jvmactors.StderrLogger\"]",
            "  log-dead-letters = off",
            "  log-dead-letters-during-shutdown = off",
            "  http.server {",
            "    backlog = 1024",
            "    max-connections = 4096",
            // The ask timeout answers first; this only bounds a request nobody answers.
            "    request-timeout = " + requestTimeoutMs + " ms",
            "  }",
            "}",
            "page-dispatcher {",
            "  type = Dispatcher",
            "  executor = fork-join-executor",
            "  fork-join-executor {",
            "    parallelism-min = " + o.parallelismMin,
            "    parallelism-factor = " + o.parallelismFactor,
            "    parallelism-max = " + o.parallelismMax,
            "  }",
            "}");
        return ConfigFactory.parseString(text).withFallback(ConfigFactory.load());
    }

    /**
     * SIGTERM and SIGINT: stop accepting, let in-flight requests finish within the grace,
     * stop the actors, exit 0. (The JVM's own handler would exit 143.)
     */
    @SuppressWarnings("sunapi")
    private static void installShutdown(ActorSystem system, ServerBinding binding, Stats stats, Options o, int cpus) {
        AtomicBoolean stopping = new AtomicBoolean();
        sun.misc.SignalHandler handler = signal -> {
            if (!stopping.compareAndSet(false, true)) {
                return;
            }
            System.err.println("jvm-actors: SIG" + signal.getName() + ": finishing " + stats.asksInFlight.get()
                + " asks in flight (grace " + o.shutdownTimeoutS + " s)");
            try {
                binding.terminate(Duration.ofSeconds(o.shutdownTimeoutS))
                    .toCompletableFuture()
                    .get(o.shutdownTimeoutS + 5, TimeUnit.SECONDS);
            } catch (Exception e) {
                System.err.println("jvm-actors: connections not closed in time: " + e);
            }
            System.err.println("jvm-actors: final stats " + stats.json(o, cpus));
            system.terminate();
            try {
                system.getWhenTerminated().toCompletableFuture().get(5, TimeUnit.SECONDS);
            } catch (Exception e) {
                System.err.println("jvm-actors: actors still busy after 5 s; exiting anyway");
            }
            System.err.flush();
            System.exit(0);
        };
        sun.misc.Signal.handle(new sun.misc.Signal("TERM"), handler);
        sun.misc.Signal.handle(new sun.misc.Signal("INT"), handler);
    }
}

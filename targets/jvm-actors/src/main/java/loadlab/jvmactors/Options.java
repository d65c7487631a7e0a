package loadlab.jvmactors;

import java.net.InetSocketAddress;

/**
 * The command line, parsed and checked once: every error names its flag, as the other
 * reference servers do ({@code error: invalid value '0' for --routees: expected 1..=100000}).
 */
final class Options {
    /** Address to listen on; port 0 picks a free port. */
    InetSocketAddress bind = new InetSocketAddress("127.0.0.1", 8080);
    /** Routees of the page router (Play's {@code nr-of-instances}, default 24). */
    int routees = 24;
    /** {@code parallelism-min} of the page dispatcher (Akka's default, 8). */
    int parallelismMin = 8;
    /** {@code parallelism-factor}: threads per available CPU (Play's default, 1.0). */
    double parallelismFactor = 1.0;
    /** {@code parallelism-max} of the page dispatcher (Play's default, 24). */
    int parallelismMax = 24;
    /** How long a page waits for its actor's answer before it answers 503. */
    long askTimeoutMs = 4_000;
    /** Seconds in-flight requests may take to finish after SIGTERM. */
    long shutdownTimeoutS = 30;
    /** Requests the server sends itself before it is ready, so the JIT has compiled them. */
    int warmupRequests = 0;
    /** {@code --help} was given. */
    boolean help;

    /** A bad command line; the message names the flag. */
    static final class Invalid extends Exception {
        private static final long serialVersionUID = 1L;

        Invalid(String message) {
            super(message);
        }
    }

    static final String USAGE = String.join("\n",
        "jvm-actors: document 003's Play/Akka app on Apache Pekko. Prints `listening on ADDR`",
        "once ready; SIGTERM finishes in-flight requests and exits 0.",
        "",
        "GET /page?work_ms=N&kind=sleep|cpu  asks a routee, which does N ms of work on the page dispatcher",
        "GET /health                         answers ok",
        "GET /stats                          counters as JSON",
        "",
        "Flags:",
        "  --bind ADDR                 address to listen on; :PORT means 127.0.0.1:PORT, port 0 picks one [127.0.0.1:8080]",
        "  --routees N                 actors behind the round-robin router (nr-of-instances) [24]",
        "  --parallelism-min N         page dispatcher: fewest threads [8]",
        "  --parallelism-factor F      page dispatcher: threads per available CPU [1.0]",
        "  --parallelism-max N         page dispatcher: most threads [24]",
        "  --ask-timeout-ms MS         how long a page waits for its actor before answering 503 [4000]",
        "  --shutdown-timeout SECS     grace for in-flight requests after SIGTERM [30]",
        "  --warmup-requests N         requests sent to itself before the ready line (/health answers 503 until then) [0]",
        "  --help                      this text",
        "");

    static Options parse(String[] args) throws Invalid {
        Options o = new Options();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (arg.equals("--help") || arg.equals("-h")) {
                o.help = true;
                continue;
            }
            String flag = arg;
            String value;
            int eq = arg.indexOf('=');
            if (arg.startsWith("--") && eq > 0) {
                flag = arg.substring(0, eq);
                value = arg.substring(eq + 1);
            } else {
                value = null;
            }
            if (!KNOWN.contains("|" + flag + "|")) {
                throw new Invalid("unexpected argument '" + arg + "' (see --help)");
            }
            if (value == null) {
                if (i + 1 >= args.length) {
                    throw new Invalid("a value is required for " + flag);
                }
                value = args[++i];
            }
            switch (flag) {
                case "--bind":
                    o.bind = bindAddr(value);
                    break;
                case "--routees":
                    o.routees = (int) integer(flag, value, 1, 100_000);
                    break;
                case "--parallelism-min":
                    o.parallelismMin = (int) integer(flag, value, 1, 32_767);
                    break;
                case "--parallelism-factor":
                    o.parallelismFactor = factor(flag, value);
                    break;
                case "--parallelism-max":
                    o.parallelismMax = (int) integer(flag, value, 1, 32_767);
                    break;
                case "--ask-timeout-ms":
                    o.askTimeoutMs = integer(flag, value, 1, 600_000);
                    break;
                case "--shutdown-timeout":
                    o.shutdownTimeoutS = integer(flag, value, 0, 3_600);
                    break;
                case "--warmup-requests":
                    o.warmupRequests = (int) integer(flag, value, 0, 1_000_000);
                    break;
                default:
                    throw new IllegalStateException(flag);
            }
        }
        if (o.parallelismMin > o.parallelismMax) {
            throw new Invalid("invalid value '" + o.parallelismMin + "' for --parallelism-min: expected at most --parallelism-max ("
                + o.parallelismMax + ")");
        }
        return o;
    }

    private static final String KNOWN =
        "|--bind|--routees|--parallelism-min|--parallelism-factor|--parallelism-max|--ask-timeout-ms|--shutdown-timeout|--warmup-requests|";

    private static long integer(String flag, String value, long min, long max) throws Invalid {
        long n;
        try {
            n = Long.parseLong(value);
        } catch (NumberFormatException e) {
            n = Long.MIN_VALUE;
        }
        if (n < min || n > max) {
            throw new Invalid("invalid value '" + value + "' for " + flag + ": expected " + min + "..=" + max);
        }
        return n;
    }

    private static double factor(String flag, String value) throws Invalid {
        double f;
        try {
            f = Double.parseDouble(value);
        } catch (NumberFormatException e) {
            f = Double.NaN;
        }
        if (!(f > 0 && f <= 10_000)) {
            throw new Invalid("invalid value '" + value + "' for " + flag + ": expected a number above 0, at most 10000");
        }
        return f;
    }

    /** {@code HOST:PORT}, {@code [V6]:PORT} or {@code :PORT} (loopback). */
    static InetSocketAddress bindAddr(String value) throws Invalid {
        int colon = value.lastIndexOf(':');
        Invalid bad = new Invalid("invalid value '" + value + "' for --bind: expected HOST:PORT, e.g. 127.0.0.1:0");
        if (colon < 0) {
            throw bad;
        }
        String host = value.substring(0, colon);
        if (host.isEmpty()) {
            host = "127.0.0.1";
        } else if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        int port;
        try {
            port = Integer.parseInt(value.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw bad;
        }
        if (port < 0 || port > 65_535 || host.isEmpty()) {
            throw bad;
        }
        return new InetSocketAddress(host, port);
    }

    /**
     * Threads of the page dispatcher, as Pekko sizes a fork-join executor:
     * {@code ceil(CPUs × factor)} kept within {@code [min, max]}.
     */
    int poolSize(int cpus) {
        int scaled = (int) Math.ceil(cpus * parallelismFactor);
        return Math.min(Math.max(scaled, parallelismMin), parallelismMax);
    }
}

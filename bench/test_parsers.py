"""The bench scripts' parsers on canned tool outputs (python3 -m unittest discover -s bench)."""

import contextlib
import importlib.util
import io
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lib  # noqa: E402


def _load(name):
    # By path: `grpc` would otherwise be the grpcio package where it is installed.
    spec = importlib.util.spec_from_file_location("bench_" + name, os.path.join(HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


peers = _load("peers")
grpc = _load("grpc")

WRK = """Running 10s test @ http://127.0.0.1:43111/
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   272.91us  523.83us  16.18ms   98.90%
    Req/Sec   147.91k    12.06k  157.75k    90.00%
  1471181 requests in 10.00s, 209.05MB read
  Socket errors: connect 0, read 12, write 0, timeout 3
  Non-2xx or 3xx responses: 40
Requests/sec: 147090.24
Transfer/sec:     20.90MB
"""

AB = """Concurrency Level:      64
Time taken for tests:   10.002 seconds
Complete requests:      312345
Failed requests:        3
   (Connect: 0, Receive: 0, Length: 3, Exceptions: 0)
Non-2xx responses:      7
Keep-Alive requests:    312000
Requests per second:    31228.40 [#/sec] (mean)

Percentage of the requests served within a certain time (ms)
  50%      2
  66%      2
  99%      5
 100%     12 (longest request)
"""

OHA = json.dumps({
    "summary": {"successRate": 1.0, "total": 10.001},
    "latencyPercentiles": {"p50": 0.00061, "p90": 0.0011, "p99": 0.0021},
    "statusCodeDistribution": {"200": 199970, "503": 10},
    "errorDistribution": {"aborted due to deadline": 25, "connection reset": 2},
})

H2LOAD = """finished in 2.37s, 84236.77 req/s, 5.46MB/s
requests: 200000 total, 200010 started, 200000 done, 199960 succeeded, 40 failed, 5 errored, 2 timeout
status codes: 199960 2xx, 0 3xx, 30 4xx, 10 5xx
traffic: 12.97MB (13600392) total, 9.16MB (9600000) headers (space savings 51.02%), 390.63KB (400000) data
                     min         max         mean         sd        +/- sd
time for request:       30us     13.56ms       749us       428us    91.40%
time for connect:      119us       435us       242us       100us    75.00%
"""

GHZ = """
Summary:
  Count:\t100006
  Total:\t2.15 s
  Slowest:\t14.21 ms
  Fastest:\t0.04 ms
  Average:\t1.35 ms
  Requests/sec:\t46420.60

Latency distribution:
  10 % in 0.71 ms 
  50 % in 850.12 µs 
  99 % in 4.15 ms 

Status code distribution:
  [OK]            100000 responses   
  [Unavailable]   2 responses   

Error distribution:
  [4]   rpc error: code = Unavailable desc = connection refused
"""


class TimeFile(unittest.TestCase):
    def parse(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".time", delete=False) as f:
            f.write(text)
        try:
            return lib.parse_time_file(f.name)
        finally:
            os.unlink(f.name)

    def test_user_sys_rss(self):
        t = self.parse("1.06 8.78 5032\n")
        self.assertEqual(t, {"time_note": None, "cpu_user_s": 1.06, "cpu_sys_s": 8.78,
                             "cpu_s": 9.84, "rss_kb": 5032})

    def test_note_before_the_data(self):
        t = self.parse("Command exited with non-zero status 1\n2.10 1.40 11432\n")
        self.assertEqual(t["time_note"], "Command exited with non-zero status 1")
        self.assertEqual((t["cpu_s"], t["rss_kb"]), (3.5, 11432))

    def test_no_data(self):
        self.assertIsNone(self.parse("Command terminated by signal 9\n"))
        self.assertIsNone(lib.parse_time_file("/nonexistent/run.time"))


class Durations(unittest.TestCase):
    def test_units(self):
        self.assertEqual(lib.dur_s("10.00s"), 10.0)
        self.assertAlmostEqual(lib.dur_s("272.91us"), 272.91e-6)
        self.assertAlmostEqual(lib.dur_s("16.18ms"), 0.01618)
        self.assertEqual(lib.dur_s("1.00m"), 60.0)
        self.assertIsNone(lib.dur_s("10 s"))


class Tools(unittest.TestCase):
    def test_wrk(self):
        r = peers.parse_wrk(WRK)
        self.assertEqual(r["requests"], 1471181)
        self.assertEqual(r["elapsed_s"], 10.0)
        self.assertEqual(r["errors"], {"socket_read": 12, "socket_timeout": 3, "non_2xx_3xx": 40})
        self.assertEqual(r["latency_ms"], {"mean": 0.273, "max": 16.18})
        self.assertIsNone(peers.parse_wrk("unable to connect"))

    def test_ab(self):
        r = peers.parse_ab(AB)
        self.assertEqual(r["requests"], 312345)
        self.assertEqual(r["elapsed_s"], 10.002)
        self.assertEqual(r["errors"], {"failed": 3, "non_2xx": 7})
        self.assertEqual(r["keepalive_requests"], 312000)
        self.assertEqual(r["latency_ms"], {"p50": 2.0, "p99": 5.0})
        self.assertIsNone(peers.parse_ab(""))

    def test_oha(self):
        r = peers.parse_oha("oha prints its JSON document:\n" + OHA)
        self.assertEqual(r["requests"], 199980)
        self.assertEqual(r["elapsed_s"], 10.001)
        self.assertEqual(r["aborted_at_deadline"], 25)
        self.assertEqual(r["errors"], {"connection reset": 2, "non_2xx_3xx": 10})
        self.assertEqual(r["latency_ms"], {"p50": 0.61, "p99": 2.1})
        self.assertIsNone(peers.parse_oha("no json"))

    def test_h2load(self):
        r = lib.parse_h2load(H2LOAD)
        self.assertEqual(r["requests"], 200000)
        self.assertEqual(r["elapsed_s"], 2.37)
        self.assertEqual(r["errors"], {"failed": 40, "errored": 5, "timeout": 2,
                                       "status_4xx_5xx": 40})
        self.assertEqual(r["latency_ms"], {"mean": 0.749, "max": 13.56})
        self.assertIsNone(lib.parse_h2load("starting benchmark..."))

    def test_h2load_for_grpc_counts_successes(self):
        r = grpc.parse_h2load(H2LOAD)
        self.assertEqual(r["successful"], 199960)
        self.assertEqual(r["error_count"], 40 + 5 + 2)
        self.assertEqual(r["latency_ms"], {})

    def test_ghz(self):
        r = grpc.parse_ghz(GHZ)
        self.assertEqual(r["requests"], 100006)
        self.assertEqual(r["elapsed_s"], 2.15)
        self.assertEqual(r["tool_rps"], 46420.6)
        self.assertEqual(r["status_codes"], {"OK": 100000, "Unavailable": 2})
        self.assertEqual(r["successful"], 100000)
        self.assertEqual(r["error_count"], 6)
        self.assertEqual(r["errors"], {
            "grpc_Unavailable": 2,
            "error: rpc error: code = Unavailable desc = connection refused": 4})
        self.assertEqual(r["latency_ms"], {"p50": 0.85, "p99": 4.15})
        self.assertIsNone(grpc.parse_ghz(""))


class Loadlab(unittest.TestCase):
    def write(self, j):
        f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        self.addCleanup(os.unlink, f.name)
        with f:
            json.dump(j, f)
        return f.name

    def test_error_classes_with_a_count(self):
        path = self.write({"requests": 10, "successful": 9, "duration_s": 1.5,
                           "errors": {"connection_reset": 1, "http_5xx": 0}})
        self.assertEqual(lib.loadlab_errors(lib.load_loadlab_json(path)), {"connection_reset": 1})
        r = grpc.parse_loadlab(path)
        self.assertEqual((r["requests"], r["successful"], r["error_count"]), (10, 9, 1))
        self.assertEqual(peers.parse_loadlab(path)["elapsed_s"], 1.5)

    def test_no_request_count(self):
        self.assertIsNone(lib.load_loadlab_json(self.write({"errors": 3})))
        self.assertIsNone(lib.load_loadlab_json("/nonexistent/run.json"))
        self.assertEqual(lib.loadlab_errors({"errors": 3}), {"errors": 3})


class Tables(unittest.TestCase):
    def test_text_and_markdown(self):
        hdr, rows = ["tool", "req/s", "notes"], [["wrk", "1,000", "x"], ["loadlab", "20", ""]]
        self.assertEqual(lib.text_table(hdr, rows),
                         "tool     req/s  notes\n"
                         "-------  -----  -----\n"
                         "wrk      1,000  x\n"
                         "loadlab     20")
        self.assertEqual(lib.md_table(hdr, rows),
                         "| tool | req/s | notes |\n|---|---:|---|\n"
                         "| wrk | 1,000 | x |\n| loadlab | 20 |  |")
        self.assertEqual((lib.fmt(None), lib.fmt(1234.5), lib.fmt(0.5, 3)), ("-", "1,234", "0.500"))



class PeerTargets(unittest.TestCase):
    """Issue 33's targets, judged from summarized runs: each PASS or FAIL on its own figure."""

    @staticmethod
    def rec(phase, tool, req_per_cpu_s, lag_p99=None, rate=None, limited=None):
        r = {"phase": phase, "tool": tool, "ok": True, "rps": 1000.0, "cpu_s": 1.0,
             "req_per_cpu_s": req_per_cpu_s, "rss_kb": 9000, "requests": 10000,
             "duration_s": 10, "round": 1}
        if lag_p99 is not None:
            r["schedule_lag_ms"] = {"p99": lag_p99}
        if rate is not None:
            r["rate"] = rate
        if limited is not None:
            r["generator_limited"] = limited
        return r

    def test_open_loop_phases_by_rate_and_targets(self):
        recs = [
            self.rec("keepalive", "loadlab", 130000), self.rec("keepalive", "wrk", 100000),
            self.rec("close", "loadlab", 21000), self.rec("close", "wrk", 20000),
            self.rec("openloop-50000", "loadlab", 90000, 0.2),
            self.rec("openloop-50000", "oha", 60000),
            self.rec("openloop-20000", "loadlab", 125000, 0.25),
            self.rec("openloop-20000", "oha", 60000),
            self.rec("openloop-100000", "loadlab", 150000, 0.8, limited=False),
        ]
        summ = peers.summarize(recs)
        self.assertEqual(peers.open_phases(summ),
                         [("openloop-20000", 20000.0), ("openloop-50000", 50000.0),
                          ("openloop-100000", 100000.0)])
        lines = peers.target_checks(summ, [])
        self.assertIn("[PASS] loadlab vs wrk, keep-alive on: 1.30×", lines[0])
        self.assertIn("[FAIL] loadlab vs wrk, keep-alive off: 1.05×", lines[1])
        # 125,000 / 60,000 = 2.08x oha, 8 µs per request; lag 0.25 ms.
        self.assertIn("[PASS] loadlab vs oha, open loop at 20,000 req/s: 2.08×", lines[2])
        self.assertIn("8.0 µs per request (target ≥ 1.5×)", lines[2])
        self.assertIn("[PASS] loadlab open-loop schedule lag p99 at 20,000 req/s: 0.250 ms", lines[3])
        # 90,000 / 60,000 = 1.50x oha at 50,000 req/s: short of 1.8x.
        self.assertIn("[FAIL] loadlab vs oha, open loop at 50,000 req/s: 1.50×", lines[4])
        self.assertIn("[PASS] loadlab open loop at 100,000 req/s on one core: lag p99 0.800 ms, "
                      "generator-limited in 0 of 1 runs", lines[5])
        rows, _ = peers.open_rows(summ["openloop-50000"], 50000)
        self.assertEqual(rows[0][4], "11.1")  # µs per request at 50,000 req/s

    def test_open_loop_misses_and_older_files(self):
        recs = [self.rec("openloop", "loadlab", 60000, 0.5, rate=20000),
                self.rec("openloop-100000", "loadlab", 150000, 0.4, limited=True)]
        summ = peers.summarize(recs)
        self.assertEqual(peers.open_phases(summ), [("openloop", 20000), ("openloop-100000", 100000.0)])
        lines = peers.target_checks(summ, [])
        self.assertTrue(any(l.startswith("[ -- ] loadlab vs oha, open loop at 20,000 req/s")
                            for l in lines), lines)
        self.assertTrue(any(l.startswith("[FAIL] loadlab open-loop schedule lag p99") for l in lines))
        self.assertTrue(any(l.startswith("[ -- ] loadlab open loop at 50,000 req/s: not measured")
                            for l in lines), lines)
        # Held within 1 ms but generator-limited: not on schedule.
        self.assertTrue(any(l.startswith("[FAIL] loadlab open loop at 100,000 req/s on one core")
                            for l in lines), lines)

    def test_the_floor_bounds_each_target(self):
        recs = [
            self.rec("keepalive", "loadlab", 110000), self.rec("keepalive", "wrk", 100000),
            self.rec("keepalive", "floor", 98000),
            self.rec("close", "loadlab", 21000), self.rec("close", "wrk", 20000),
            self.rec("close", "floor", 28000),
            self.rec("openloop-20000", "loadlab", 55000, 0.27),
            self.rec("openloop-20000", "oha", 60000),
            self.rec("openloop-20000", "floor", 70000, 0.31),
        ]
        lines = peers.target_checks(peers.summarize(recs), [], wake_us=30.0)
        self.assertIn("[FLOOR] bench/floor vs wrk, keep-alive on: 0.98×", lines[1])
        self.assertIn("out of reach of any client", lines[1])
        self.assertIn("[FLOOR] bench/floor vs wrk, keep-alive off: 1.40×", lines[3])
        self.assertIn("target 1.3× within reach", lines[3])
        floor = [l for l in lines if l.startswith("[FLOOR] bench/floor open loop")]
        # 1e6 / 70,000 = 14.3 µs; lag 0.31 ms; 70,000 / 60,000 = 1.17x oha.
        self.assertEqual(len(floor), 1, lines)
        self.assertIn("14.3 µs per request, lag p99 0.310 ms, 1.17× oha", floor[0])
        self.assertIn("out of reach", floor[0])
        self.assertNotIn("lag p99 is over", floor[0])
        # Fast enough (1.67x oha) but its own lag over 0.3 ms: the line says which missed.
        recs[-2] = self.rec("openloop-20000", "oha", 42000)
        floor = [l for l in peers.target_checks(peers.summarize(recs), [], wake_us=30.0)
                 if l.startswith("[FLOOR] bench/floor open loop")]
        self.assertIn("1.67× oha: target 1.5× oha out of reach", floor[0])
        self.assertIn("(the floor's own lag p99 is over the 0.3 ms target)", floor[0])
        # 30 µs per wake-up, 5,000 wake-ups per second, 20,000 requests per second.
        self.assertTrue(any("a timer wake-up costs 30.0 µs of CPU on this machine: 7.5 µs per request"
                            in l for l in lines), lines)

    def test_the_stamped_floor_says_what_measuring_latency_costs(self):
        recs = [
            self.rec("openloop-20000", "loadlab", 55000, 0.27),
            self.rec("openloop-20000", "oha", 60000),
            self.rec("openloop-20000", "floor", 70000, 0.31),
            self.rec("openloop-20000", "floor-stamped", 65000, 0.31),
        ]
        lines = [l for l in peers.target_checks(peers.summarize(recs), [])
                 if l.startswith("[FLOOR] bench/floor --stamp")]
        # 1e6 / 65,000 = 15.4 µs, 1.1 µs more than 14.3; 65,000 / 60,000 = 1.08x oha.
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("at 20,000 req/s: 15.4 µs per request (+1.1 µs for the timestamps), "
                      "1.08× oha: CPU target 1.5× oha out of reach of any client here that "
                      "measures latency", lines[0])
        recs[1] = self.rec("openloop-20000", "oha", 42000)
        lines = [l for l in peers.target_checks(peers.summarize(recs), [])
                 if l.startswith("[FLOOR] bench/floor --stamp")]
        self.assertIn("1.55× oha: CPU target 1.5× oha within reach of a client that measures "
                      "latency", lines[0])
        rows, _ = peers.open_rows(peers.summarize(recs)["openloop-20000"], 20000)
        self.assertEqual([r[0] for r in rows], ["loadlab", "oha", "floor", "floor-stamped"])
        self.assertIn("recvmsg", rows[-1][-1])

    def test_without_oha_the_floor_claims_no_reach(self):
        recs = [
            self.rec("openloop-20000", "loadlab", 55000, 0.27),
            self.rec("openloop-20000", "floor", 70000, 0.31),
            self.rec("openloop-20000", "floor-stamped", 65000, 0.31),
        ]
        lines = [l for l in peers.target_checks(peers.summarize(recs), [])
                 if l.startswith("[FLOOR] bench/floor")]
        self.assertEqual(len(lines), 2, lines)
        for l in lines:
            self.assertIn("target 1.5× oha not compared (oha not measured)", l)
            self.assertNotIn("reach", l)

    def test_the_floors_drops_at_the_held_rate(self):
        # 10,000 sent and 250 dropped (2.4 %): its lag p99 says nothing of those.
        floor = dict(self.rec("openloop-100000", "floor", 180000, 0.6), unsent=250)
        recs = [self.rec("openloop-100000", "loadlab", 150000, 1.2, limited=True), floor]
        summ = peers.summarize(recs)
        lines = [l for l in peers.target_checks(summ, [])
                 if l.startswith("[FLOOR] bench/floor at 100,000 req/s on one core")]
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("lag p99 0.600 ms, 250 arrivals dropped for want of a free connection "
                      "(2.4 %", lines[0])
        self.assertIn("not shown within reach by the floor (more than 1 % dropped", lines[0])
        rows, _ = peers.open_rows(summ["openloop-100000"], 100000)
        self.assertIn("250 arrivals dropped", rows[-1][-1])
        # 50 dropped (0.5 %) with lag p99 0.6 ms: the floor held it.
        recs[1] = dict(floor, unsent=50)
        lines = [l for l in peers.target_checks(peers.summarize(recs), [])
                 if l.startswith("[FLOOR] bench/floor at 100,000")]
        self.assertIn("(0.5 %", lines[0])
        self.assertTrue(lines[0].endswith("target within reach"), lines[0])

    def test_the_servers_share_of_its_core_is_beside_the_held_rate(self):
        busy = [dict(self.rec("openloop-100000", "loadlab", 150000, 9.0, limited=True),
                     server_util=u) for u in (0.97, 1.0, 0.99)]
        floor = dict(self.rec("openloop-100000", "floor", 180000, 0.6), unsent=250,
                     server_util=0.98)
        summ = peers.summarize(busy + [floor])
        lines = peers.target_checks(summ, [])
        held = [l for l in lines if l.startswith("[FAIL] loadlab open loop at 100,000")]
        self.assertEqual(len(held), 1, lines)
        self.assertTrue(held[0].endswith("; nginx's worker 99 % busy on its core (median)"),
                        held[0])
        fl = [l for l in lines if l.startswith("[FLOOR] bench/floor at 100,000")]
        self.assertIn("nginx's worker 98 % busy", fl[0])
        rows, _ = peers.open_rows(summ["openloop-100000"], 100000)
        self.assertIn("nginx 99% busy (median)", rows[0][-1])
        # No measurement of the server (an older results file): nothing said.
        summ = peers.summarize([self.rec("openloop-100000", "loadlab", 150000, 9.0, limited=True)])
        held = [l for l in peers.target_checks(summ, []) if "100,000" in l][0]
        self.assertNotIn("nginx", held)

    def test_the_servers_share_of_its_core_is_beside_each_ratio_in_open_loop(self):
        # 29 November on an AMD host: one nginx worker about 80 % busy at 50,000 req/s, oha short of
        # the rate; the ratio's line says how close the server was to its limit.
        recs = [dict(self.rec("openloop-50000", "loadlab", 400000, 6.0), server_util=u)
                for u in (0.78, 0.80, 0.83)]
        recs += [dict(self.rec("openloop-50000", "oha", 370000, 8.0), server_util=0.75)]
        lines = peers.target_checks(peers.summarize(recs), [])
        ratio = [l for l in lines if l.startswith("[FAIL] loadlab vs oha, open loop at 50,000")]
        self.assertEqual(len(ratio), 1, lines)
        self.assertTrue(ratio[0].endswith("(target ≥ 1.8×); nginx's worker 80 % busy on its core "
                                          "(median)"), ratio[0])
        # Not recorded (older results): nothing said.
        for r in recs:
            del r["server_util"]
        lines = peers.target_checks(peers.summarize(recs), [])
        ratio = [l for l in lines if "loadlab vs oha, open loop at 50,000" in l]
        self.assertTrue(ratio[0].endswith("(target ≥ 1.8×)"), ratio[0])

    def test_a_record_takes_the_servers_cpu_over_the_whole_run(self):
        with tempfile.TemporaryDirectory() as d:
            out, time_file, stdout = (os.path.join(d, n) for n in ("r.jsonl", "t", "o"))
            with open(time_file, "w") as f:
                f.write("0.50 7.50 5000\n")
            with open(stdout, "w") as f:
                f.write(WRK)
            argv = sys.argv
            sys.argv = ["peers.py", "record", "--out", out, "--phase", "keepalive", "--round", "1",
                        "--tool", "wrk", "--stdout", stdout, "--time", time_file,
                        "--duration", "8", "--server-cpu-s", "9.6", "--server-wall-s", "12",
                        "--host-ticks-before", "1000 50", "--host-ticks-after", "1900 150"]
            try:
                with self.assertRaises(SystemExit) as done, \
                        contextlib.redirect_stdout(io.StringIO()) as printed:
                    peers.main()
            finally:
                sys.argv = argv
            self.assertEqual(done.exception.code, 0)
            rec = lib.read_records(out)[0]
        # 9.6 s of CPU over a run of 12 s (not the 8 s asked for): 80 % of the core.
        self.assertEqual((rec["server_cpu_s"], rec["server_util"]), (9.6, 0.8))
        # 900 ticks busy, 100 stolen: the host took 10 % of what the CPUs wanted, and the
        # progress line says so.
        self.assertEqual(rec["host_steal"], 0.1)
        self.assertIn("host stole 10 %", printed.getvalue())
        self.assertTrue(rec["ok"], rec)

    def test_lines_judged_from_runs_the_host_stole_from_say_so(self):
        recs = [
            # keep-alive on: 2 % is the limit itself, not over it.
            dict(self.rec("keepalive", "loadlab", 130000), host_steal=0.02),
            self.rec("keepalive", "wrk", 100000),
            # keep-alive off: loadlab's run quiet, wrk's robbed of 12 % (the ratio is both's).
            dict(self.rec("close", "loadlab", 21000), host_steal=0.001),
            dict(self.rec("close", "wrk", 20000), host_steal=0.12),
            dict(self.rec("openloop-20000", "loadlab", 125000, 0.25), host_steal=0.05),
            dict(self.rec("openloop-20000", "oha", 60000), host_steal=0.0),
        ]
        lines = peers.target_checks(peers.summarize(recs), [], wake_us=30.0)
        stolen = [l for l in lines if "host stole" in l]
        self.assertEqual(len(stolen), 3, lines)
        self.assertTrue(stolen[0].startswith("[FAIL] loadlab vs wrk, keep-alive off: 1.05×"), lines)
        self.assertTrue(stolen[0].endswith("[host stole up to 12 % of the CPU time during these "
                                           "runs: not this machine's figure]"), stolen[0])
        self.assertTrue(stolen[1].startswith("[PASS] loadlab vs oha, open loop at 20,000"), lines)
        self.assertIn("[PASS] loadlab open-loop schedule lag p99 at 20,000 req/s: 0.250 ms (target "
                      "≤ 0.3 ms) [host stole up to 5 %", stolen[2])
        # The wake-up line is measured apart from the runs: not marked by theirs, but by the
        # steal during its own measurement.
        self.assertFalse(any("host stole" in l for l in lines if "timer wake-up" in l), lines)
        for share, marked in ((0.3, True), (0.01, False)):
            wake = [l for l in peers.target_checks(peers.summarize(recs), [], wake_us=30.0,
                                                   wake_steal=share) if "timer wake-up" in l]
            self.assertEqual(len(wake), 1, wake)
            self.assertEqual(wake[0].endswith("[host stole up to 30 % of the CPU time during "
                                              "these runs: not this machine's figure]"), marked, wake)
            self.assertEqual("host stole" in wake[0], marked, wake)
        para = lib.steal_paragraph(recs)
        self.assertIn("2.0 % of the time this machine's CPUs wanted to run in the median run, "
                      "12.0 % in the worst; 2 of 5 runs over 2 %", para)
        self.assertIn("no run over 2 %", lib.steal_paragraph(recs[:1] + recs[2:3]))
        self.assertIsNone(lib.steal_paragraph(recs[1:2]))
        summ = grpc.summarize([dict(r, suite="grpc", successful=10, requested=10, tool=t)
                               for r, t in ((recs[2], "loadlab"), (recs[3], "ghz"))])
        self.assertIn("[host stole up to 12 %", grpc.target_checks(summ)[0])

    def test_a_ratio_shows_the_decimals_its_verdict_needs(self):
        self.assertEqual(lib.ratio_text(1.2345, 1.0), "1.23×")
        self.assertEqual(lib.ratio_text(0.9962, 1.0), "0.996×")
        self.assertEqual(lib.ratio_text(1.79996, 1.8), "1.799×")
        self.assertEqual(lib.ratio_text(1.3, 1.3), "1.30×")
        recs = [self.rec("keepalive", "loadlab", 99620), self.rec("keepalive", "wrk", 100000)]
        self.assertIn("[FAIL] loadlab vs wrk, keep-alive on: 0.996× requests",
                      peers.target_checks(peers.summarize(recs), [])[0])

    def test_steal_share_of_a_run(self):
        # 300 ticks busy and 100 stolen over the run: the host took a quarter.
        self.assertEqual(lib.steal_share("1000 50", "1300 150"), 0.25)
        self.assertEqual(lib.steal_share("1000 50", "1300 50"), 0.0)
        for before, after in (("1000 50", None), ("1000", "1300 150"), ("1300 150", "1000 50"),
                              ("5 5", "5 5"), ("x y", "1 2")):
            self.assertIsNone(lib.steal_share(before, after), (before, after))

    def test_floor_output(self):
        line = '{"requests":99937,"errors":2,"elapsed_s":5.000194,"unsent":61,' \
               '"schedule_lag_ms":{"p99":0.315,"max":3.154}}'
        r = peers.parse_floor("noise\n" + line + "\n")
        self.assertEqual(r["requests"], 99937)
        self.assertEqual(r["errors"], {"errors": 2})
        self.assertEqual(r["schedule_lag_ms"]["p99"], 0.315)
        self.assertEqual(r["unsent"], 61)
        self.assertIsNone(peers.parse_floor("loadlab-floor: io_uring refused\n"))


if __name__ == "__main__":
    unittest.main()

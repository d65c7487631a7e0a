#!/usr/bin/env python3
"""Parsing and reporting helper for bench/peers.sh (standard library only).

Subcommands (called by peers.sh; usable by hand on an existing results file):

  record  parse one tool run (tool stdout + GNU time file [+ loadlab JSON])
          and append one JSON line to the results file
  skip    append a "skipped" record (tool cannot do this mode / not installed)
  report  print the median-of-rounds tables (text + markdown) and target checks
  freeport  print a free TCP port on 127.0.0.1
  check   GET a URL, exit 0 if it answers 200 with body "ok"

Counting conventions (identical for every tool):
  requests       completed HTTP responses (any status), from the tool's own output
  cpu_s          user + sys CPU seconds of the generator process tree (GNU time)
  req_per_cpu_s  requests / cpu_s   -- the efficiency figure the targets are on
  rss_kb         peak RSS from GNU time (%M, KiB)
  rps            requests / the tool's own measured elapsed time
"""

import json
import os
import re
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402  (bench/lib.py: what peers.py and grpc.py share)
from lib import fmt as _fmt, med as _med  # noqa: E402

PHASES = [
    ("keepalive", "Closed loop, keep-alive on"),
    ("close", "Closed loop, keep-alive off (new connection per request)"),
    ("openloop", "Open loop, fixed rate"),
]
PEER_ORDER = ["loadlab", "wrk", "ab", "h2load", "oha", "floor", "floor-stamped"]
# bench/floor: not a peer but the least CPU any client spends per request here (io_uring,
# nothing recorded); its ratio to a peer is the most a ratio target can reach on this machine.
FLOOR_NOTE = "lower bound: bench/floor (io_uring, no latency recorded), not a load tool"
# bench/floor --stamp (open loop, run wherever the floor is): each response read with the
# kernel's receive timestamp, which a client reading its responses late needs to measure
# latency at all; the least such a client spends.
STAMPED_NOTE = ("bench/floor --stamp: the floor reading each response with its kernel receive "
                "timestamp (multishot recvmsg), what any client that reads late must add to "
                "measure latency")

# Targets (issue 33): requests per generator CPU-second against wrk, closed loop: with
# keep-alive at or above wrk, without it at least 1.3x; open loop at least 1.5x oha's requests
# per CPU-second at 20,000 req/s with schedule lag p99 at most 0.3 ms, at least 1.8x at 50,000;
# 100,000 req/s held on schedule by one core (lag p99 at most 1 ms, never generator-limited);
# peak RSS under 32 MB, flat.
RSS_LIMIT_KB = 32 * 1024
RATIO_TARGETS = {"keepalive": 1.0, "close": 1.3}
OPEN_TARGET_RATE = 20000
OPEN_OHA_RATIOS = {20000: 1.5, 50000: 1.8}
OPEN_LAG_P99_MS = 0.3
HELD_RATE = 100000
HELD_LAG_P99_MS = 1.0

def open_phases(summ):
    """The open-loop phases of a results file, by rate: ("openloop-20000", 20000.0), ...;
    an older file's single "openloop" phase takes its rate from its records."""
    out = []
    for key, ph in summ.items():
        if key != "openloop" and not key.startswith("openloop-"):
            continue
        rate = None
        if key.startswith("openloop-"):
            rate = float(key.split("-", 1)[1])
        else:
            rates = [x.get("rate") for s in ph.values() for x in s.get("runs", []) if x.get("rate")]
            rate = rates[0] if rates else None
        out.append((key, rate))
    return sorted(out, key=lambda kr: kr[1] or 0)


# --------------------------------------------------------------------------
# parsing


def parse_wrk(text):
    r = {}
    m = re.search(r"(\d+) requests in ([\d.]+\w+),", text)
    if not m:
        return None
    r["requests"] = int(m.group(1))
    r["elapsed_s"] = lib.dur_s(m.group(2))
    errs = {}
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        for k, v in zip(("connect", "read", "write", "timeout"), m.groups()):
            if int(v):
                errs["socket_" + k] = int(v)
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m and int(m.group(1)):
        errs["non_2xx_3xx"] = int(m.group(1))
    r["errors"] = errs
    m = re.search(r"Latency\s+([\d.]+\w+)\s+([\d.]+\w+)\s+([\d.]+\w+)", text)
    if m:
        r["latency_ms"] = {"mean": round(lib.dur_s(m.group(1)) * 1e3, 3),
                           "max": round(lib.dur_s(m.group(3)) * 1e3, 3)}
    return r


def parse_ab(text):
    r = {}
    m = re.search(r"Complete requests:\s+(\d+)", text)
    if not m:
        return None
    r["requests"] = int(m.group(1))
    m = re.search(r"Time taken for tests:\s+([\d.]+) seconds", text)
    r["elapsed_s"] = float(m.group(1)) if m else None
    errs = {}
    m = re.search(r"Failed requests:\s+(\d+)", text)
    if m and int(m.group(1)):
        errs["failed"] = int(m.group(1))
    m = re.search(r"Non-2xx responses:\s+(\d+)", text)
    if m and int(m.group(1)):
        errs["non_2xx"] = int(m.group(1))
    r["errors"] = errs
    m = re.search(r"Keep-Alive requests:\s+(\d+)", text)
    if m:
        r["keepalive_requests"] = int(m.group(1))
    lat = {}
    for p in ("50", "99"):
        m = re.search(r"^\s+%s%%\s+(\d+)" % p, text, re.M)
        if m:
            lat["p" + p] = float(m.group(1))  # ab has 1 ms resolution
    if lat:
        r["latency_ms"] = lat
    return r


def parse_oha(text):
    # oha prints the JSON document on stdout (--output-format json / -j).
    start = text.find("{")
    if start < 0:
        return None
    try:
        j = json.loads(text[start:])
    except json.JSONDecodeError:
        return None
    r = {}
    codes = j.get("statusCodeDistribution") or {}
    r["requests"] = sum(int(v) for v in codes.values())
    summ = j.get("summary") or {}
    r["elapsed_s"] = summ.get("total")
    errs = {}
    for k, v in (j.get("errorDistribution") or {}).items():
        # In-flight requests cancelled at the -z deadline are not errors.
        if "deadline" in k.lower():
            r["aborted_at_deadline"] = r.get("aborted_at_deadline", 0) + int(v)
            continue
        errs[k] = int(v)
    bad = sum(int(v) for k, v in codes.items() if not str(k).startswith(("2", "3")))
    if bad:
        errs["non_2xx_3xx"] = bad
    r["errors"] = errs
    lp = j.get("latencyPercentiles") or {}
    lat = {}
    for k in ("p50", "p99"):
        if lp.get(k) is not None:
            lat[k] = round(lp[k] * 1e3, 3)
    if lat:
        r["latency_ms"] = lat
    return r


def parse_loadlab(path):
    j = lib.load_loadlab_json(path)
    if j is None:
        return None
    r = {}
    r["requests"] = int(j["requests"])
    r["errors"] = lib.loadlab_errors(j)
    if j.get("achieved_rps") is not None:
        r["achieved_rps"] = float(j["achieved_rps"])
    for key in ("elapsed_s", "duration_s", "elapsed_secs"):
        if isinstance(j.get(key), (int, float)):
            r["elapsed_s"] = float(j[key])
            break
    if isinstance(j.get("latency_ms"), dict):
        r["latency_ms"] = {k: v for k, v in j["latency_ms"].items()
                           if isinstance(v, (int, float))}
    if isinstance(j.get("schedule_lag_ms"), dict):
        r["schedule_lag_ms"] = {k: v for k, v in j["schedule_lag_ms"].items()
                                if isinstance(v, (int, float))}
    if "generator_limited" in j:
        r["generator_limited"] = j["generator_limited"]
    if j.get("generator_notes"):
        r["generator_notes"] = j["generator_notes"]
    if isinstance(j.get("connections_opened"), int):
        r["connections_opened"] = j["connections_opened"]
    return r


def parse_floor(text):
    """bench/floor's one JSON line: requests, errors, elapsed_s [, schedule_lag_ms, unsent]."""
    for line in reversed(text.strip().splitlines()):
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if not isinstance(j, dict) or not isinstance(j.get("requests"), int):
            return None
        r = {"requests": j["requests"], "errors": {"errors": j["errors"]} if j.get("errors") else {}}
        if isinstance(j.get("elapsed_s"), (int, float)):
            r["elapsed_s"] = float(j["elapsed_s"])
        if isinstance(j.get("schedule_lag_ms"), dict):
            r["schedule_lag_ms"] = j["schedule_lag_ms"]
        # Open loop: arrivals that found every connection busy, dropped (not sent late).
        if isinstance(j.get("unsent"), int):
            r["unsent"] = j["unsent"]
        return r
    return None


PARSERS = {"wrk": parse_wrk, "ab": parse_ab, "h2load": lib.parse_h2load, "oha": parse_oha,
           "floor": parse_floor, "floor-stamped": parse_floor}


def cmd_record(a):
    rec = {
        "ts": lib.now(),
        "phase": a.phase, "round": a.round, "tool": a.tool,
        "connections": a.connections, "duration_s": a.duration,
        "rate": a.rate, "rc": a.rc, "cmd": a.cmd,
        "stdout": a.stdout, "ok": False,
    }
    if a.server_cpu_s is not None:
        # nginx's worker, user + system, over the tool's whole run: its share of its core.
        rec["server_cpu_s"] = a.server_cpu_s
        rec["server_util"] = round(a.server_cpu_s / (a.server_wall_s or a.duration), 3)
    lib.record_steal(rec, a)
    t, p = lib.measure(rec, a, PARSERS, parse_loadlab)
    if t and p and rec.get("requests"):
        rec["ok"] = True
        el = rec.get("elapsed_s")
        if rec.get("achieved_rps"):
            rec["rps"] = rec["achieved_rps"]
        elif el:
            rec["rps"] = rec["requests"] / el
        else:
            rec["rps"] = rec["requests"] / a.duration
        rec["rps"] = round(rec["rps"], 1)
        rec["req_per_cpu_s"] = round(rec["requests"] / rec["cpu_s"], 1) if rec["cpu_s"] > 0 else None
        rec["cpu_util"] = round(rec["cpu_s"] / (el or a.duration), 3)
        rec["error_count"] = sum(rec.get("errors", {}).values())
    else:
        rec["failure"] = lib.failure(t, p, a.rc)
    lib.append_record(a.out, rec)
    # one progress line
    if rec["ok"]:
        extra = ""
        if rec.get("schedule_lag_ms"):
            extra = "  lag p99 %s ms" % _fmt(rec["schedule_lag_ms"].get("p99"), 3)
        extra += lib.steal_note(rec)
        print("    %-13s %10.0f req/s  cpu %6.2fs  %9.0f req/cpu-s  rss %7.1f MB  errors %d%s"
              % (a.tool, rec["rps"], rec["cpu_s"], rec["req_per_cpu_s"] or 0,
                 rec["rss_kb"] / 1024, rec["error_count"], extra))
    else:
        lib.print_failed(a, rec)


# --------------------------------------------------------------------------
# reporting


def summarize(recs):
    """phase -> tool -> summary dict (medians over ok rounds)."""
    out = lib.group_runs(recs, "phase")
    for ph in out.values():
        for s in ph.values():
            runs = s["runs"]
            if not runs:
                continue
            for key in ("rps", "cpu_s", "req_per_cpu_s", "rss_kb", "cpu_util", "error_count",
                        "requests", "server_util"):
                s[key] = _med([x.get(key) for x in runs])
            rpc = [x["req_per_cpu_s"] for x in runs if x.get("req_per_cpu_s")]
            s["spread"] = lib.spread(rpc, s["req_per_cpu_s"])
            s["rss_max_kb"] = max(x["rss_kb"] for x in runs)
            for grp in ("latency_ms", "schedule_lag_ms"):
                keys = set()
                for x in runs:
                    keys.update((x.get(grp) or {}).keys())
                s[grp] = {k: _med([(x.get(grp) or {}).get(k) for x in runs]) for k in keys}
            gl = [x.get("generator_limited") for x in runs if "generator_limited" in x]
            if gl:
                s["generator_limited"] = gl
            s["aborted_at_deadline"] = _med([x.get("aborted_at_deadline") for x in runs])
            s["connections_opened"] = _med([x.get("connections_opened") for x in runs])
            s["unsent"] = _med([x.get("unsent") for x in runs])
    return out


def _tools_in(ph):
    return lib.ordered(ph, PEER_ORDER)


def closed_rows(ph):
    ll = ph.get("loadlab")
    ll_rpc = ll.get("req_per_cpu_s") if ll and ll.get("n") else None
    rows = []
    for tool in _tools_in(ph):
        s = ph[tool]
        if s.get("skipped") and not s["n"]:
            rows.append([tool, "n/a", "", "", "", "", "", "", s["skipped"]])
            continue
        if not s["n"]:
            rows.append([tool, "failed", "", "", "", "", "", "", "%d failed run(s)" % s["failed"]])
            continue
        ratio = lib.ratio_cell(tool, ll_rpc, s["req_per_cpu_s"])
        notes = []
        if s["failed"]:
            notes.append("%d failed run(s)" % s["failed"])
        if tool == "floor":
            notes.append(FLOOR_NOTE)
        if s.get("spread") is not None:
            notes.append("spread %.0f%%" % (100 * s["spread"]))
        if s.get("generator_limited") and any(s["generator_limited"]):
            notes.append("self-reported generator_limited in %d/%d runs"
                         % (sum(map(bool, s["generator_limited"])), len(s["generator_limited"])))
        rows.append([
            tool,
            _fmt(s["rps"]),
            _fmt(s["cpu_s"], 2),
            "%.0f%%" % (100 * s["cpu_util"]) if s.get("cpu_util") is not None else "-",
            _fmt(s["req_per_cpu_s"]),
            _fmt(s["rss_kb"] / 1024, 1),
            _fmt(s["error_count"]),
            ratio,
            ", ".join(notes),
        ])
    return rows


CLOSED_HDR = ["tool", "requests/s", "gen CPU s", "gen CPU %", "req per gen CPU-s",
              "peak RSS MB", "errors", "loadlab ratio (req/CPU-s)", "notes"]


def open_rows(ph, rate):
    """Rows for tools that ran (or failed / are not installed); tools that have
    no fixed-rate mode at all are returned separately for a one-line note."""
    rows, cannot = [], []
    for tool in _tools_in(ph):
        s = ph[tool]
        if not s["n"]:
            if s.get("skipped") and s["skipped"] != "not installed":
                cannot.append("%s: %s" % (tool, s["skipped"]))
                continue
            rows.append([tool, "n/a" if s.get("skipped") else "failed", "", "", "", "", "", "", "", "", "",
                         s.get("skipped") or "%d failed run(s)" % s["failed"]])
            continue
        lat = s.get("latency_ms") or {}
        lag = s.get("schedule_lag_ms") or {}
        notes = []
        if s["failed"]:
            notes.append("%d failed run(s)" % s["failed"])
        if tool == "oha":
            notes.append("latency with --latency-correction; no schedule-lag output")
        if tool == "floor":
            notes.append(FLOOR_NOTE + "; responses read only at the next release")
        if tool == "floor-stamped":
            notes.append(STAMPED_NOTE)
        if tool in ("floor", "floor-stamped") and s.get("unsent"):
            notes.append("%s arrivals dropped (every connection busy; median)" % _fmt(s["unsent"]))
        if s.get("generator_limited") and any(s["generator_limited"]):
            notes.append("self-reported generator_limited in %d/%d runs"
                         % (sum(map(bool, s["generator_limited"])), len(s["generator_limited"])))
        if s.get("connections_opened") is not None:
            notes.append("connections opened: %s (median)" % _fmt(s["connections_opened"]))
        if s.get("server_util") is not None:
            notes.append("nginx %.0f%% busy (median)" % (100 * s["server_util"]))
        rows.append([
            tool,
            _fmt(rate) if rate else "-",
            _fmt(s["rps"]),
            _fmt(s["cpu_s"], 2),
            _fmt(1e6 / s["req_per_cpu_s"], 1) if s.get("req_per_cpu_s") else "-",
            _fmt(s["rss_kb"] / 1024, 1),
            _fmt(lat.get("p50"), 3),
            _fmt(lat.get("p99"), 3),
            _fmt(lag.get("p99"), 3),
            _fmt(lag.get("max"), 3),
            _fmt(s["error_count"]),
            ", ".join(notes),
        ])
    return rows, cannot


OPEN_HDR = ["tool", "target rate", "achieved req/s", "gen CPU s", "gen CPU µs/req", "peak RSS MB",
            "latency p50 ms", "latency p99 ms", "sched lag p99 ms", "sched lag max ms",
            "errors", "notes"]


def _server_busy(s):
    """'; nginx's worker N % busy' over a tool's runs at one rate: how close the server was to
    its core's end (under a client that opens more connections it works harder for the same
    rate, so the line says the figure, not a verdict)."""
    u = s.get("server_util")
    if u is None:
        return ""
    return "; nginx's worker %.0f %% busy on its core (median)" % (100 * u)


# A [FLOOR] line's reach, when oha did not run: no ratio, so no claim either way.
NO_OHA = "not compared (oha not measured)"


def target_checks(summ, memcheck, wake_us=None, wake_steal=None):
    lines = []
    ka = summ.get("keepalive", {})
    cl = summ.get("close", {})

    def ratio(ph, peer, tool="loadlab"):
        a, b = ph.get(tool), ph.get(peer)
        if not (a and b and a.get("n") and b.get("n") and b.get("req_per_cpu_s")):
            return None
        return a["req_per_cpu_s"] / b["req_per_cpu_s"]

    def reach(ok):
        return "within reach" if ok else "out of reach of any client on this machine"

    def mark(since, ph):
        # The lines judged from `ph`'s runs say so where the host stole from any of them.
        warn = lib.steal_warning([r for s in ph.values() for r in s.get("runs") or []])
        for i in range(since, len(lines)):
            if warn and not lines[i].startswith("[ -- ]") and "timer wake-up" not in lines[i]:
                lines[i] += warn

    for key, name, ph in (("keepalive", "keep-alive on", ka), ("close", "keep-alive off", cl)):
        since = len(lines)
        r = ratio(ph, "wrk")
        target = RATIO_TARGETS[key]
        if r is None:
            lines.append("[ -- ] loadlab vs wrk, %s: not measured" % name)
        else:
            lines.append("[%s] loadlab vs wrk, %s: %s requests per generator CPU-second (target ≥ %.1f×)"
                         % ("PASS" if r >= target else "FAIL", name, lib.ratio_text(r, target), target))
        f = ratio(ph, "wrk", "floor")
        if f is not None:
            lines.append("[FLOOR] bench/floor vs wrk, %s: %.2f×, the most a client reached here: "
                         "target %.1f× %s" % (name, f, target, reach(f >= target)))
        mark(since, ph)
    by_rate = dict((rate, summ[key]) for key, rate in open_phases(summ))
    for rate, target in sorted(OPEN_OHA_RATIOS.items()):
        ol = by_rate.get(rate, {})
        since = len(lines)
        ll = ol.get("loadlab")
        if not (ll and ll.get("n") and ll.get("req_per_cpu_s")):
            lines.append("[ -- ] loadlab open loop at %s req/s: not measured" % _fmt(rate))
            continue
        r = ratio(ol, "oha")
        if r is None:
            lines.append("[ -- ] loadlab vs oha, open loop at %s req/s: oha not measured" % _fmt(rate))
        else:
            # How busy the server was: near its core's end, the arrivals find every
            # connection busy and a client spends more per request (loadlab opens connections,
            # oha falls short of the rate); the figure, not a verdict.
            lines.append("[%s] loadlab vs oha, open loop at %s req/s: %s requests per generator "
                         "CPU-second, %.1f µs per request (target ≥ %.1f×)%s"
                         % ("PASS" if r >= target else "FAIL", _fmt(rate), lib.ratio_text(r, target),
                            1e6 / ll["req_per_cpu_s"], target, _server_busy(ll)))
        lag = (ll.get("schedule_lag_ms") or {}).get("p99")
        if rate == OPEN_TARGET_RATE:
            if lag is None:
                lines.append("[ -- ] loadlab open-loop schedule lag p99: not reported")
            else:
                lines.append("[%s] loadlab open-loop schedule lag p99 at %s req/s: %.3f ms (target ≤ %g ms)"
                             % ("PASS" if lag <= OPEN_LAG_P99_MS else "FAIL", _fmt(rate), lag,
                                OPEN_LAG_P99_MS))
        fl = ol.get("floor")
        if fl and fl.get("n") and fl.get("req_per_cpu_s"):
            f_lag = (fl.get("schedule_lag_ms") or {}).get("p99")
            f_oha = ratio(ol, "oha", "floor")
            fast = f_oha is not None and f_oha >= target
            steady = rate != OPEN_TARGET_RATE or (f_lag is not None and f_lag <= OPEN_LAG_P99_MS)
            why = ""
            if fast and not steady:
                # The floor is fast enough; it is its schedule that misses the target.
                why = " (the floor's own lag p99 is over the %g ms target)" % OPEN_LAG_P99_MS
            lines.append("[FLOOR] bench/floor open loop at %s req/s: %.1f µs per request, lag p99 %s ms%s: "
                         "target %.1f× oha %s%s"
                         % (_fmt(rate), 1e6 / fl["req_per_cpu_s"], _fmt(f_lag, 3),
                            ", %.2f× oha" % f_oha if f_oha is not None else "",
                            target, reach(fast and steady) if f_oha is not None else NO_OHA, why))
        fs = ol.get("floor-stamped")
        if fs and fs.get("n") and fs.get("req_per_cpu_s"):
            s_oha = ratio(ol, "oha", "floor-stamped")
            extra = ""
            if fl and fl.get("n") and fl.get("req_per_cpu_s"):
                extra = " (%+.1f µs for the timestamps)" % (
                    1e6 / fs["req_per_cpu_s"] - 1e6 / fl["req_per_cpu_s"])
            # The CPU part of the target only: the schedule's part is the plain floor's line.
            lines.append("[FLOOR] bench/floor --stamp open loop at %s req/s: %.1f µs per request%s%s: "
                         "CPU target %.1f× oha %s"
                         % (_fmt(rate), 1e6 / fs["req_per_cpu_s"], extra,
                            ", %.2f× oha" % s_oha if s_oha is not None else "", target,
                            NO_OHA if s_oha is None
                            else "within reach of a client that measures latency"
                            if s_oha >= target
                            else "out of reach of any client here that measures latency"))
        if wake_us and rate == OPEN_TARGET_RATE:
            # One wake-up per 200 µs release gap (MIN_WAKE_GAP_NS) releases rate / 5,000
            # arrivals, so each request carries 5,000 / rate of a wake-up.
            lines.append("[FLOOR] a timer wake-up costs %.1f µs of CPU on this machine: %.1f µs per "
                         "request at %s req/s with one wake-up per 200 µs release gap, before any "
                         "request is sent" % (wake_us, wake_us * 5000 / rate, _fmt(rate))
                         + lib.steal_warning([{"host_steal": wake_steal}]))
        mark(since, ol)
    since = len(lines)
    held = by_rate.get(HELD_RATE, {}).get("loadlab")
    if not (held and held.get("n")):
        lines.append("[ -- ] loadlab open loop at %s req/s on one core: not measured" % _fmt(HELD_RATE))
    else:
        lag = (held.get("schedule_lag_ms") or {}).get("p99")
        limited = sum(1 for g in held.get("generator_limited") or [] if g)
        ok = lag is not None and lag <= HELD_LAG_P99_MS and limited == 0
        lines.append("[%s] loadlab open loop at %s req/s on one core: lag p99 %s ms, generator-limited "
                     "in %d of %d runs (target: lag p99 ≤ %g ms, never limited)%s"
                     % ("PASS" if ok else "FAIL", _fmt(HELD_RATE), _fmt(lag, 3), limited,
                        len(held.get("runs") or []), HELD_LAG_P99_MS, _server_busy(held)))
    fl = by_rate.get(HELD_RATE, {}).get("floor")
    if fl and fl.get("n") and fl.get("requests"):
        # The floor drops an arrival that finds every connection busy (it has no queue and
        # opens none): loadlab sends it late instead, and its lag p99 counts it.
        f_lag = (fl.get("schedule_lag_ms") or {}).get("p99")
        dropped = fl.get("unsent") or 0
        share = dropped / (fl["requests"] + dropped)
        held = f_lag is not None and f_lag <= HELD_LAG_P99_MS and share <= 0.01
        lines.append("[FLOOR] bench/floor at %s req/s on one core: lag p99 %s ms, %s arrivals dropped "
                     "for want of a free connection (%.1f %%, median; loadlab sends those late "
                     "and counts them): target %s%s"
                     % (_fmt(HELD_RATE), _fmt(f_lag, 3), _fmt(dropped), 100 * share,
                        "within reach" if held else
                        "not shown within reach by the floor (more than 1 %% dropped or lag p99 "
                        "over %g ms)" % HELD_LAG_P99_MS, _server_busy(fl)))
    mark(since, by_rate.get(HELD_RATE, {}))
    ll = ka.get("loadlab")
    if ll and ll.get("n"):
        mx = ll["rss_max_kb"]
        lines.append("[%s] loadlab peak RSS, keep-alive run: %.1f MB (max over rounds; target < 32 MB)"
                     % ("PASS" if mx < RSS_LIMIT_KB else "FAIL", mx / 1024))
        if memcheck:
            short = [x for x in memcheck if x.get("ok")]
            if short:
                s_rss = max(x["rss_kb"] for x in short)
                s_dur = short[0]["duration_s"]
                grow = ll["rss_kb"] - s_rss
                # "not growing with duration": allow 10% or 2 MB noise, whichever larger
                ok = grow <= max(2048, 0.10 * s_rss)
                lines.append("[%s] loadlab RSS vs duration: %.1f MB at %gs, %.1f MB at %gs (median)"
                             % ("PASS" if ok else "FAIL", s_rss / 1024, s_dur,
                                ll["rss_kb"] / 1024, ll["runs"][0]["duration_s"]))
    else:
        lines.append("[ -- ] loadlab peak RSS: not measured")
    return lines


def cmd_report(a):
    recs = lib.read_records(a.results)
    memcheck = [r for r in recs if r.get("phase") == "memcheck"]
    summ = summarize([r for r in recs if r.get("phase") != "memcheck"])
    runs = [r for r in recs if r.get("ok")]
    rep = lib.Report()
    if runs:
        rep.meta("%d connections, %gs per run, median of %d round(s); generator on CPU %s, nginx on CPU %s"
                 % (runs[0].get("connections") or 0, runs[0].get("duration_s") or 0,
                    max(r.get("round", 0) for r in runs), a.gen_cpu, a.server_cpu))
    rep.host(a.host)
    phases = [(key, title, None) for key, title in PHASES if key != "openloop"]
    open_title = dict(PHASES)["openloop"]
    phases += [(key, open_title, rate or a.rate) for key, rate in open_phases(summ)]
    for key, title, rate in phases:
        ph = summ.get(key)
        if not ph:
            continue
        cannot = []
        is_open = key.startswith("openloop")
        if is_open:
            hdr = OPEN_HDR
            rows, cannot = open_rows(ph, rate)
            title = "%s (%s req/s, %d connections)" % (
                title, _fmt(rate) if rate else "?", (runs[0].get("connections") or 0) if runs else 0)
        else:
            hdr, rows = CLOSED_HDR, closed_rows(ph)
        if not rows:
            continue
        rep.table(title, hdr, rows)
        if is_open:
            note = ("Open-loop peer: wrk2 is not packaged in Debian, so oha -q (rate-limited, "
                    "--latency-correction) stands in; oha reports no schedule lag.")
            if cannot:
                note += " Not run (no fixed-rate mode): " + "; ".join(cannot) + "."
            rep.paragraph(note)
    rep.paragraph("'gen CPU %' = generator CPU seconds / elapsed; well below 100% means the run was "
                  "not generator-bound (server-bound, or the machine was busy), so compare "
                  "'req per gen CPU-s' rather than 'requests/s'.")
    steal = lib.steal_paragraph(runs)
    if steal:
        rep.paragraph(steal)
    wake_steal = lib.steal_share(a.wake_host_ticks_before, a.wake_host_ticks_after)
    rep.targets(target_checks(summ, memcheck, a.wake_us, wake_steal))
    print("\n".join(rep.text))
    print("\n---- markdown (for README) ----\n")
    print("\n".join(rep.md))
    rep.write_md(a.md)


# --------------------------------------------------------------------------
# small utilities for the shell script


def cmd_check(a):
    deadline = time.monotonic() + a.timeout
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(a.url, timeout=1) as resp:
                body = resp.read()
                if resp.status == 200 and body == b"ok":
                    return 0
                last = "status %s body %r" % (resp.status, body[:40])
        except Exception as e:  # noqa: BLE001 - any failure means "not ready yet"
            last = str(e)
        time.sleep(0.1)
    print("server at %s not ready: %s" % (a.url, last), file=sys.stderr)
    return 1


def _record_args(p):
    p.add_argument("--duration", type=float, required=True)
    p.add_argument("--server-cpu-s", type=float,
                   help="CPU seconds nginx's worker used during the run")
    p.add_argument("--server-wall-s", type=float,
                   help="seconds the run took, start to end (the server's CPU is over these)")
    p.add_argument("--connections", type=int)
    p.add_argument("--rate", type=float)


def _report_args(p):
    p.add_argument("--rate", type=float)
    p.add_argument("--wake-us", type=float, help="CPU per timer wake-up (bench/floor wakes)")
    p.add_argument("--wake-host-ticks-before", help="/proc/stat \"BUSY STEAL\" before the wake-ups")
    p.add_argument("--wake-host-ticks-after", help="/proc/stat \"BUSY STEAL\" after them")


def _check_args(p):
    p.add_argument("url")
    p.add_argument("--timeout", type=float, default=10)


def main():
    lib.main(__doc__, "phase", PARSERS, cmd_record, _record_args, cmd_report, _report_args,
             extra=[("check", _check_args, cmd_check)])


if __name__ == "__main__":
    main()

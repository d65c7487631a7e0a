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

import argparse
import json
import math
import os
import re
import socket
import statistics
import sys
import time
import urllib.request

PHASES = [
    ("keepalive", "Closed loop, keep-alive on"),
    ("close", "Closed loop, keep-alive off (new connection per request)"),
    ("openloop", "Open loop, fixed rate"),
]
PEER_ORDER = ["loadlab", "wrk", "ab", "h2load", "oha"]

# Targets from the issue.
RSS_LIMIT_KB = 32 * 1024
RATIO_TARGET = 1.0


# --------------------------------------------------------------------------
# parsing


def _num(s):
    return float(s.replace(",", ""))


def parse_time_file(path):
    """GNU time -f '%U %S %M' -o PATH. May carry a 'Command exited with
    non-zero status' / 'Command terminated by signal' line before the data."""
    out = {"time_note": None}
    try:
        with open(path) as f:
            lines = [l.strip() for l in f if l.strip()]
    except OSError:
        return None
    data = None
    for l in lines:
        m = re.fullmatch(r"([\d.]+) ([\d.]+) (\d+)", l)
        if m:
            data = m
        else:
            out["time_note"] = l
    if not data:
        return None
    out["cpu_user_s"] = float(data.group(1))
    out["cpu_sys_s"] = float(data.group(2))
    out["cpu_s"] = round(out["cpu_user_s"] + out["cpu_sys_s"], 3)
    out["rss_kb"] = int(data.group(3))
    return out


def _dur_s(s):
    """wrk style durations: 10.10s, 500.00ms, 1.00m"""
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", s)
    if not m:
        return None
    v = float(m.group(1))
    return v * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}[m.group(2)]


def parse_wrk(text):
    r = {}
    m = re.search(r"(\d+) requests in ([\d.]+\w+),", text)
    if not m:
        return None
    r["requests"] = int(m.group(1))
    r["elapsed_s"] = _dur_s(m.group(2))
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
        r["latency_ms"] = {"mean": round(_dur_s(m.group(1)) * 1e3, 3),
                           "max": round(_dur_s(m.group(3)) * 1e3, 3)}
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


def parse_h2load(text):
    r = {}
    m = re.search(r"finished in ([\d.]+\w+), ([\d.]+) req/s", text)
    m2 = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                   r"(\d+) failed, (\d+) errored, (\d+) timeout", text)
    if not (m and m2):
        return None
    r["elapsed_s"] = _dur_s(m.group(1))
    total, started, done, succ, failed, errored, tmo = map(int, m2.groups())
    r["requests"] = done
    errs = {}
    if failed:
        errs["failed"] = failed
    if errored:
        errs["errored"] = errored
    if tmo:
        errs["timeout"] = tmo
    m = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text)
    if m:
        bad = int(m.group(3)) + int(m.group(4))
        if bad:
            errs["status_4xx_5xx"] = bad
    r["errors"] = errs
    m = re.search(r"time for request:\s+([\d.]+\w+)\s+([\d.]+\w+)\s+([\d.]+\w+)", text)
    if m:
        r["latency_ms"] = {"mean": round(_dur_s(m.group(3)) * 1e3, 3),
                           "max": round(_dur_s(m.group(2)) * 1e3, 3)}
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
    try:
        with open(path) as f:
            j = json.load(f)
    except (OSError, json.JSONDecodeError):
        return None
    r = {}
    if "requests" not in j:
        return None
    r["requests"] = int(j["requests"])
    errs = j.get("errors") or {}
    if isinstance(errs, dict):
        r["errors"] = {k: int(v) for k, v in errs.items() if v}
    else:
        r["errors"] = {"errors": int(errs)} if errs else {}
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


PARSERS = {"wrk": parse_wrk, "ab": parse_ab, "h2load": parse_h2load, "oha": parse_oha}


def cmd_record(a):
    rec = {
        "ts": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "phase": a.phase, "round": a.round, "tool": a.tool,
        "connections": a.connections, "duration_s": a.duration,
        "rate": a.rate, "rc": a.rc, "cmd": a.cmd,
        "stdout": a.stdout, "ok": False,
    }
    t = parse_time_file(a.time)
    try:
        with open(a.stdout, errors="replace") as f:
            text = f.read()
    except OSError:
        text = ""
    if a.tool == "loadlab":
        p = parse_loadlab(a.json) if a.json else None
    else:
        p = PARSERS[a.tool](text)
    if t:
        rec.update(t)
    if p:
        rec.update(p)
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
        why = []
        if not t:
            why.append("no GNU time data")
        if not p:
            why.append("could not parse tool output")
        rec["failure"] = "; ".join(why) + (" (rc=%d)" % a.rc if a.rc else "")
    with open(a.out, "a") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")
    # one progress line
    if rec["ok"]:
        extra = ""
        if rec.get("schedule_lag_ms"):
            extra = "  lag p99 %s ms" % _fmt(rec["schedule_lag_ms"].get("p99"), 3)
        print("    %-8s %10.0f req/s  cpu %6.2fs  %9.0f req/cpu-s  rss %7.1f MB  errors %d%s"
              % (a.tool, rec["rps"], rec["cpu_s"], rec["req_per_cpu_s"] or 0,
                 rec["rss_kb"] / 1024, rec["error_count"], extra))
    else:
        print("    %-8s FAILED: %s (see %s)" % (a.tool, rec["failure"], a.stdout))


def cmd_skip(a):
    rec = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S"), "phase": a.phase, "tool": a.tool,
           "round": 0, "ok": False, "skipped": a.reason}
    with open(a.out, "a") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")


# --------------------------------------------------------------------------
# reporting


def _fmt(v, nd=0):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if nd == 0:
        return "{:,.0f}".format(v)
    return "{:,.{}f}".format(v, nd)


def _k(v):
    return "-" if v is None else "%.1fk" % (v / 1000.0)


def _med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def summarize(recs):
    """phase -> tool -> summary dict (medians over ok rounds)."""
    out = {}
    for r in recs:
        ph = out.setdefault(r["phase"], {})
        s = ph.setdefault(r["tool"], {"runs": [], "failed": 0, "skipped": None})
        if r.get("skipped"):
            s["skipped"] = r["skipped"]
        elif r.get("ok"):
            s["runs"].append(r)
        else:
            s["failed"] += 1
    for ph in out.values():
        for s in ph.values():
            runs = s["runs"]
            s["n"] = len(runs)
            if not runs:
                continue
            for key in ("rps", "cpu_s", "req_per_cpu_s", "rss_kb", "cpu_util", "error_count",
                        "requests"):
                s[key] = _med([x.get(key) for x in runs])
            rpc = [x["req_per_cpu_s"] for x in runs if x.get("req_per_cpu_s")]
            s["spread"] = (max(rpc) - min(rpc)) / s["req_per_cpu_s"] if len(rpc) > 1 and s["req_per_cpu_s"] else None
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
    return out


def _tools_in(ph):
    return sorted(ph, key=lambda t: (PEER_ORDER.index(t) if t in PEER_ORDER else 99, t))


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
        if tool == "loadlab":
            ratio = "—"
        elif ll_rpc and s["req_per_cpu_s"]:
            ratio = "%.2f×" % (ll_rpc / s["req_per_cpu_s"])
        else:
            ratio = "-"
        notes = []
        if s["failed"]:
            notes.append("%d failed run(s)" % s["failed"])
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
            rows.append([tool, "n/a" if s.get("skipped") else "failed", "", "", "", "", "", "", "", "",
                         s.get("skipped") or "%d failed run(s)" % s["failed"]])
            continue
        lat = s.get("latency_ms") or {}
        lag = s.get("schedule_lag_ms") or {}
        notes = []
        if s["failed"]:
            notes.append("%d failed run(s)" % s["failed"])
        if tool == "oha":
            notes.append("latency with --latency-correction; no schedule-lag output")
        if s.get("generator_limited") and any(s["generator_limited"]):
            notes.append("self-reported generator_limited in %d/%d runs"
                         % (sum(map(bool, s["generator_limited"])), len(s["generator_limited"])))
        if s.get("connections_opened") is not None:
            notes.append("connections opened: %s (median)" % _fmt(s["connections_opened"]))
        rows.append([
            tool,
            _fmt(rate) if rate else "-",
            _fmt(s["rps"]),
            _fmt(s["cpu_s"], 2),
            _fmt(s["rss_kb"] / 1024, 1),
            _fmt(lat.get("p50"), 3),
            _fmt(lat.get("p99"), 3),
            _fmt(lag.get("p99"), 3),
            _fmt(lag.get("max"), 3),
            _fmt(s["error_count"]),
            ", ".join(notes),
        ])
    return rows, cannot


OPEN_HDR = ["tool", "target rate", "achieved req/s", "gen CPU s", "peak RSS MB",
            "latency p50 ms", "latency p99 ms", "sched lag p99 ms", "sched lag max ms",
            "errors", "notes"]


def text_table(hdr, rows):
    w = [max(len(str(x)) for x in col) for col in zip(hdr, *rows)]
    lines = ["  ".join(str(c).ljust(w[i]) if i in (0, len(hdr) - 1) else str(c).rjust(w[i])
                       for i, c in enumerate(r)) for r in [hdr] + rows]
    lines.insert(1, "  ".join("-" * x for x in w))
    return "\n".join(l.rstrip() for l in lines)


def md_table(hdr, rows):
    out = ["| " + " | ".join(hdr) + " |",
           "|" + "|".join(["---"] + ["---:"] * (len(hdr) - 2) + ["---"]) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def target_checks(summ, memcheck):
    lines = []
    ka = summ.get("keepalive", {})
    cl = summ.get("close", {})

    def ratio(ph, peer):
        a, b = ph.get("loadlab"), ph.get(peer)
        if not (a and b and a.get("n") and b.get("n") and b.get("req_per_cpu_s")):
            return None
        return a["req_per_cpu_s"] / b["req_per_cpu_s"]

    for name, ph in (("keep-alive on", ka), ("keep-alive off", cl)):
        r = ratio(ph, "wrk")
        if r is None:
            lines.append("[ -- ] loadlab vs wrk, %s: not measured" % name)
        else:
            lines.append("[%s] loadlab vs wrk, %s: %.2f× requests per generator CPU-second (target ≥ %.1f×)"
                         % ("PASS" if r >= RATIO_TARGET else "FAIL", name, r, RATIO_TARGET))
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
    recs = []
    with open(a.results) as f:
        for line in f:
            line = line.strip()
            if line:
                recs.append(json.loads(line))
    memcheck = [r for r in recs if r.get("phase") == "memcheck"]
    summ = summarize([r for r in recs if r.get("phase") != "memcheck"])
    runs = [r for r in recs if r.get("ok")]
    meta = ""
    if runs:
        meta = ("%d connections, %gs per run, median of %d round(s); generator on CPU %s, nginx on CPU %s"
                % (runs[0].get("connections") or 0, runs[0].get("duration_s") or 0,
                   max(r.get("round", 0) for r in runs), a.gen_cpu, a.server_cpu))
    rate = a.rate
    text, md = [], []
    if meta:
        text.append(meta)
        md.append("_" + meta + "_")
    if a.host:
        text.append("host: " + a.host)
        md.append("_host: " + a.host + "_")
    for key, title in PHASES:
        ph = summ.get(key)
        if not ph:
            continue
        cannot = []
        if key == "openloop":
            hdr = OPEN_HDR
            rows, cannot = open_rows(ph, rate)
            title = "%s (%s req/s, %d connections)" % (
                title, _fmt(rate) if rate else "?", (runs[0].get("connections") or 0) if runs else 0)
        else:
            hdr, rows = CLOSED_HDR, closed_rows(ph)
        if not rows:
            continue
        text += ["", "== " + title + " ==", text_table(hdr, rows)]
        md += ["", "**" + title + "**", "", md_table(hdr, rows)]
        if key == "openloop":
            note = ("Open-loop peer: wrk2 is not packaged in Debian, so oha -q (rate-limited, "
                    "--latency-correction) stands in; oha reports no schedule lag.")
            if cannot:
                note += " Not run (no fixed-rate mode): " + "; ".join(cannot) + "."
            text += ["", note]
            md += ["", note]
    notes = ("'gen CPU %' = generator CPU seconds / elapsed; well below 100% means the run was "
             "not generator-bound (server-bound, or the machine was busy), so compare "
             "'req per gen CPU-s' rather than 'requests/s'.")
    text += ["", notes]
    md += ["", notes]
    checks = target_checks(summ, memcheck)
    text += ["", "== Targets =="] + checks
    md += ["", "Targets:", ""] + ["- " + c for c in checks]
    print("\n".join(text))
    print("\n---- markdown (for README) ----\n")
    print("\n".join(md))
    if a.md:
        with open(a.md, "w") as f:
            f.write("\n".join(md) + "\n")


# --------------------------------------------------------------------------
# small utilities for the shell script


def cmd_freeport(a):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
    s.close()


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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="sub", required=True)

    p = sub.add_parser("record")
    p.add_argument("--out", required=True)
    p.add_argument("--phase", required=True)
    p.add_argument("--round", type=int, required=True)
    p.add_argument("--tool", required=True, choices=["loadlab"] + sorted(PARSERS))
    p.add_argument("--stdout", required=True)
    p.add_argument("--time", required=True)
    p.add_argument("--json")
    p.add_argument("--rc", type=int, default=0)
    p.add_argument("--cmd", default="")
    p.add_argument("--duration", type=float, required=True)
    p.add_argument("--connections", type=int)
    p.add_argument("--rate", type=float)

    p = sub.add_parser("skip")
    p.add_argument("--out", required=True)
    p.add_argument("--phase", required=True)
    p.add_argument("--tool", required=True)
    p.add_argument("--reason", required=True)

    p = sub.add_parser("report")
    p.add_argument("results")
    p.add_argument("--md")
    p.add_argument("--rate", type=float)
    p.add_argument("--gen-cpu", default="1")
    p.add_argument("--server-cpu", default="0")
    p.add_argument("--host", default="")

    sub.add_parser("freeport")

    p = sub.add_parser("check")
    p.add_argument("url")
    p.add_argument("--timeout", type=float, default=10)

    a = ap.parse_args()
    rc = {"record": cmd_record, "skip": cmd_skip, "report": cmd_report,
          "freeport": cmd_freeport, "check": cmd_check}[a.sub](a)
    sys.exit(rc or 0)


if __name__ == "__main__":
    main()

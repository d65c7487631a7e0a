#!/usr/bin/env python3
"""Parsing and reporting helper for bench/grpc.sh (standard library only).

Shares the GNU time / h2load parsers, tables and command line with peers.py (bench/lib.py).

Subcommands (called by grpc.sh; usable by hand on an existing results file):

  record    parse one run (tool stdout + GNU time file [+ loadlab JSON]) and
            append one JSON line to the results file
  skip      append a "skipped" record (tool not installed / not wanted)
  report    print the median-of-rounds tables (text + markdown) and target checks
  freeport  print a free TCP port on 127.0.0.1

Counting conventions (identical for every tool):
  requests       completed responses/calls (any status), from the tool's own output
  successful     2xx/3xx responses (HTTP/2), grpc-status OK calls (gRPC), messages answered
                 (the stream suite: ghz's OK calls x the messages each carried)
  cpu_s          user + sys CPU seconds of the generator process tree (GNU time)
  req_per_cpu_s  successful / cpu_s   -- the efficiency figure the targets are on
  rss_kb         peak RSS from GNU time (%M, KiB)
  rps            successful / the tool's own measured elapsed time
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402  (bench/lib.py: what peers.py and grpc.py share)
from lib import fmt as _fmt, med as _med  # noqa: E402

SUITES = [
    ("grpc", "gRPC unary, helloworld.Greeter/SayHello on greeter-tokio (1 thread)", "ghz", 2.0),
    ("http2", "HTTP/2 cleartext (prior knowledge), nginx 1 worker, 2-byte body", "h2load", 1.1),
    ("stream", "gRPC bidirectional streaming, ticker.Ticker/Chat (an echo): messages, not calls",
     "ghz", 2.0),
    ("upload", "gRPC client streaming, ticker.Ticker/Upload (one receipt a call): messages, not calls",
     "ghz", 2.0),
]
ORDER = ["loadlab", "ghz", "h2load"]


# --------------------------------------------------------------------------
# parsing


def _ghz_dur_s(s):
    """ghz summary durations: '3.06 s', '14.30 ms', '850.12 µs', '120 ns'"""
    m = re.fullmatch(r"([\d.]+)\s*(ns|µs|us|ms|s|m|h)", s.strip())
    if not m:
        return None
    v = float(m.group(1))
    return v * {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0,
                "m": 60.0, "h": 3600.0}[m.group(2)]


def parse_ghz(text):
    """ghz -O summary (the default format; json would add every call's details)."""
    m = re.search(r"^\s*Count:\s+(\d+)", text, re.M)
    if not m:
        return None
    r = {"requests": int(m.group(1))}
    m = re.search(r"^\s*Total:\s+(.+)$", text, re.M)
    r["elapsed_s"] = _ghz_dur_s(m.group(1)) if m else None
    m = re.search(r"^\s*Requests/sec:\s+([\d.]+)", text, re.M)
    if m:
        r["tool_rps"] = float(m.group(1))
    codes = {}
    sec = re.search(r"Status code distribution:\n(.*?)(?:\n\s*\n|\Z)", text, re.S)
    if sec:
        for cm in re.finditer(r"\[([^\]]+)\]\s+(\d+) responses", sec.group(1)):
            codes[cm.group(1)] = int(cm.group(2))
    r["status_codes"] = codes
    r["successful"] = codes.get("OK", 0)
    errs = {}
    for k, v in codes.items():
        if k != "OK":
            errs["grpc_" + k] = v
    sec = re.search(r"Error distribution:\n(.*?)(?:\n\s*\n|\Z)", text, re.S)
    if sec:
        for em in re.finditer(r"\[(\d+)\]\s+(.+)", sec.group(1)):
            errs["error: " + em.group(2).strip()[:80]] = int(em.group(1))
    r["errors"] = errs
    # calls that never got a status (connection errors) are in Count but not in codes
    r["error_count"] = r["requests"] - r["successful"]
    lat = {}
    for p in ("50", "99"):
        lm = re.search(r"^\s*%s\s*%%\s+in\s+(.+?)\s*$" % p, text, re.M)
        if lm and _ghz_dur_s(lm.group(1)) is not None:
            lat["p" + p] = round(_ghz_dur_s(lm.group(1)) * 1e3, 3)
    if lat:
        r["latency_ms"] = lat
    return r


def parse_h2load(text):
    r = lib.parse_h2load(text)
    if r is None:
        return None
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded", text)
    r["successful"] = int(m.group(4))  # h2load: responses with 2xx/3xx status
    r["error_count"] = r["requests"] - r["successful"] + sum(
        v for k, v in r["errors"].items() if k in ("errored", "timeout"))
    # h2load prints no percentiles; keep mean/max out of the p50/p99 columns
    r["latency_ms"] = {}
    return r


def parse_loadlab(path):
    j = lib.load_loadlab_json(path)
    if j is None:
        return None
    r = {"requests": int(j["requests"])}
    r["successful"] = int(j["successful"]) if j.get("successful") is not None else None
    r["errors"] = lib.loadlab_errors(j)
    if j.get("errors_total") is not None:
        r["error_count"] = int(j["errors_total"])
    else:
        r["error_count"] = sum(r["errors"].values())
    if isinstance(j.get("status_codes"), dict):
        r["status_codes"] = j["status_codes"]
    if isinstance(j.get("duration_s"), (int, float)):
        r["elapsed_s"] = float(j["duration_s"])
    if j.get("achieved_rps") is not None:
        r["tool_rps"] = float(j["achieved_rps"])
    if isinstance(j.get("latency_ms"), dict):
        r["latency_ms"] = {k: v for k, v in j["latency_ms"].items() if isinstance(v, (int, float))}
    if isinstance(j.get("generator_cpu_seconds"), (int, float)):
        r["self_cpu_s"] = float(j["generator_cpu_seconds"])
    if isinstance(j.get("generator_peak_rss_bytes"), (int, float)):
        r["self_rss_kb"] = int(j["generator_peak_rss_bytes"] / 1024)
    for k in ("generator_limited", "stop_reason", "connections_opened", "connections"):
        if k in j:
            r[k] = j[k]
    if j.get("warnings"):
        r["warnings"] = j["warnings"]
    if j.get("generator_notes"):
        r["generator_notes"] = j["generator_notes"]
    return r


PARSERS = {"ghz": parse_ghz, "h2load": parse_h2load}


def cmd_record(a):
    rec = {
        "ts": lib.now(),
        "suite": a.suite, "round": a.round, "tool": a.tool,
        "requested": a.requested, "connections": a.connections, "concurrency": a.concurrency,
        "rc": a.rc, "cmd": a.cmd, "stdout": a.stdout, "ok": False,
    }
    lib.record_steal(rec, a)
    t, p = lib.measure(rec, a, PARSERS, parse_loadlab)
    if p and a.per_call > 1:
        # A streaming call of ghz's carried per_call messages each way: count messages.
        for key in ("requests", "successful", "error_count"):
            if rec.get(key) is not None:
                rec[key] *= a.per_call
        p["successful"] = rec.get("successful")
    if t and p and p.get("successful") is not None and t["cpu_s"] > 0:
        rec["ok"] = True
        el = rec.get("elapsed_s")
        rec["rps"] = round(rec["successful"] / el, 1) if el else None
        rec["req_per_cpu_s"] = round(rec["successful"] / rec["cpu_s"], 1)
        rec["cpu_util"] = round(rec["cpu_s"] / el, 3) if el else None
        notes = []
        if rec["requests"] != a.requested:
            notes.append("count %d != requested %d" % (rec["requests"], a.requested))
        if rec["successful"] != rec["requests"]:
            notes.append("successful %d of %d" % (rec["successful"], rec["requests"]))
        if rec.get("self_cpu_s") is not None and rec["cpu_s"] > 0:
            d = abs(rec["self_cpu_s"] - rec["cpu_s"]) / rec["cpu_s"]
            if d > 0.10:
                notes.append("self-reported CPU %.2fs vs GNU time %.2fs" % (rec["self_cpu_s"], rec["cpu_s"]))
        if a.rc:
            notes.append("exit status %d" % a.rc)
        rec["notes"] = notes
    else:
        more = ["no success count"] if p and p.get("successful") is None else []
        rec["failure"] = lib.failure(t, p, a.rc, more)
    lib.append_record(a.out, rec)
    if rec["ok"]:
        print("    %-8s %8d ok %6d err  %9.0f req/s  cpu %6.2fs  %9.0f req/cpu-s  rss %6.1f MB%s%s"
              % (a.tool, rec["successful"], rec["error_count"], rec["rps"] or 0, rec["cpu_s"],
                 rec["req_per_cpu_s"], rec["rss_kb"] / 1024,
                 ("  [" + "; ".join(rec["notes"]) + "]") if rec["notes"] else "",
                 lib.steal_note(rec)))
    else:
        lib.print_failed(a, rec)


# --------------------------------------------------------------------------
# reporting


def summarize(recs):
    """suite -> tool -> summary dict (medians over ok rounds)."""
    out = lib.group_runs(recs, "suite")
    for su in out.values():
        for s in su.values():
            runs = s["runs"]
            if not runs:
                continue
            for key in ("requested", "requests", "successful", "error_count", "rps", "cpu_s",
                        "cpu_util", "req_per_cpu_s", "rss_kb", "self_cpu_s"):
                s[key] = _med([x.get(key) for x in runs])
            rpc = [x["req_per_cpu_s"] for x in runs]
            s["spread"] = lib.spread(rpc, s["req_per_cpu_s"])
            s["latency_ms"] = {k: _med([(x.get("latency_ms") or {}).get(k) for x in runs])
                               for k in ("p50", "p99")}
            s["notes"] = sorted({n for x in runs for n in x.get("notes", [])})
    return out


HDR = ["tool", "requested", "responses", "errors", "req/s", "gen CPU s", "gen CPU %",
       "req per gen CPU-s", "peak RSS MB", "p50 ms", "p99 ms", "loadlab ratio (req/CPU-s)", "notes"]


def suite_rows(su):
    ll = su.get("loadlab")
    ll_rpc = ll.get("req_per_cpu_s") if ll and ll.get("n") else None
    rows = []
    for tool in lib.ordered(su, ORDER):
        s = su[tool]
        if not s["n"]:
            why = s["skipped"] or "%d failed run(s)" % s["failed"]
            rows.append([tool, "n/a" if s["skipped"] else "failed"] + [""] * (len(HDR) - 3) + [why])
            continue
        ratio = lib.ratio_cell(tool, ll_rpc, s["req_per_cpu_s"])
        notes = []
        if s["failed"]:
            notes.append("%d failed run(s)" % s["failed"])
        if s.get("spread") is not None:
            notes.append("spread %.0f%%" % (100 * s["spread"]))
        if s.get("self_cpu_s") is not None:
            notes.append("self-reported CPU %.2fs" % s["self_cpu_s"])
        notes += s["notes"][:3]
        lat = s.get("latency_ms") or {}
        rows.append([
            tool, _fmt(s["requested"]), _fmt(s["requests"]), _fmt(s["error_count"]),
            _fmt(s["rps"]), _fmt(s["cpu_s"], 2),
            "%.0f%%" % (100 * s["cpu_util"]) if s.get("cpu_util") is not None else "-",
            _fmt(s["req_per_cpu_s"]), _fmt(s["rss_kb"] / 1024, 1),
            _fmt(lat.get("p50"), 3), _fmt(lat.get("p99"), 3), ratio, "; ".join(notes),
        ])
    return rows


def target_checks(summ):
    lines = []
    for key, _title, peer, target in SUITES:
        su = summ.get(key)
        if su is None:
            continue
        a, b = su.get("loadlab"), su.get(peer)
        if not (a and b and a.get("n") and b.get("n") and b.get("req_per_cpu_s")):
            lines.append("[ -- ] %s: loadlab vs %s not measured" % (key, peer))
            continue
        r = a["req_per_cpu_s"] / b["req_per_cpu_s"]
        lines.append("[%s] %s: loadlab vs %s %s requests per generator CPU-second (target ≥ %.1f×)%s"
                     % ("PASS" if r >= target else "FAIL", key, peer, lib.ratio_text(r, target), target,
                        lib.steal_warning([x for s in su.values() for x in s.get("runs") or []])))
        if a.get("error_count"):
            lines.append("       note: loadlab counted %s errors (median)" % _fmt(a["error_count"]))
    return lines


def cmd_report(a):
    recs = lib.read_records(a.results)
    summ = summarize(recs)
    runs = [r for r in recs if r.get("ok")]
    rep = lib.Report()
    rep.meta("closed loop, fixed request count, median of %d round(s); generator on CPU %s, server on CPU %s"
             % (max([r.get("round", 0) for r in runs] or [0]), a.gen_cpu, a.server_cpu))
    rep.host(a.host)
    for key, title, _peer, _t in SUITES:
        su = summ.get(key)
        if not su:
            continue
        r0 = next((r for r in runs if r["suite"] == key), {})
        title = "%s — %s connections, %s concurrent" % (
            title, r0.get("connections", "?"), r0.get("concurrency", "?"))
        rep.table(title, HDR, suite_rows(su))
    rep.paragraph("'req/s' and 'req per gen CPU-s' count successful responses only. 'gen CPU %' = "
                  "generator CPU / elapsed; well below 100% means the server (one thread/worker) "
                  "was the bottleneck, so compare 'req per gen CPU-s'. ghz runs with --cpus 1 and its "
                  "template processing disabled; h2load prints no latency percentiles.")
    steal = lib.steal_paragraph(runs)
    if steal:
        rep.paragraph(steal)
    rep.targets(target_checks(summ))
    print("\n".join(rep.text))
    rep.write_md(a.md)


def _record_args(p):
    p.add_argument("--requested", type=int, required=True)
    p.add_argument("--connections", type=int)
    p.add_argument("--concurrency", type=int)
    p.add_argument("--per-call", type=int, default=0,
                   help="messages each call carried (ghz on a streaming method): counts become messages")


def main():
    lib.main(__doc__, "suite", PARSERS, cmd_record, _record_args, cmd_report, lambda p: None)


if __name__ == "__main__":
    main()

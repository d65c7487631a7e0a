"""What bench/peers.py and bench/grpc.py share (standard library only): the GNU time and
h2load parsers, the results file (one JSON record a line), the median-of-rounds helpers,
the text and markdown tables, and the command line both scripts are driven by.

Each script keeps its own tools' parsers, its record and summary fields and its report.
"""

import argparse
import json
import math
import re
import socket
import statistics
import sys
import time


# --------------------------------------------------------------------------
# parsing


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


def dur_s(s):
    """wrk and h2load style durations: 10.10s, 500.00ms, 1.00m"""
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", s)
    if not m:
        return None
    v = float(m.group(1))
    return v * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}[m.group(2)]


def parse_h2load(text):
    """h2load's summary: completed requests, elapsed time, error classes, mean/max latency."""
    r = {}
    m = re.search(r"finished in ([\d.]+\w+), ([\d.]+) req/s", text)
    m2 = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                   r"(\d+) failed, (\d+) errored, (\d+) timeout", text)
    if not (m and m2):
        return None
    r["elapsed_s"] = dur_s(m.group(1))
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
        r["latency_ms"] = {"mean": round(dur_s(m.group(3)) * 1e3, 3),
                           "max": round(dur_s(m.group(2)) * 1e3, 3)}
    return r


def load_loadlab_json(path):
    """loadlab's --json result, or None if it is missing, unreadable or has no request count."""
    try:
        with open(path) as f:
            j = json.load(f)
    except (OSError, json.JSONDecodeError):
        return None
    if "requests" not in j:
        return None
    return j


def loadlab_errors(j):
    """loadlab's error classes with a count, whether written as a map or as one number."""
    errs = j.get("errors") or {}
    if isinstance(errs, dict):
        return {k: int(v) for k, v in errs.items() if v}
    return {"errors": int(errs)} if errs else {}


# --------------------------------------------------------------------------
# records


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def measure(rec, a, parsers, parse_loadlab):
    """Parses the GNU time file and the tool's output (loadlab: its JSON) of one run into
    `rec`; returns both parses (None where one failed)."""
    t = parse_time_file(a.time)
    try:
        with open(a.stdout, errors="replace") as f:
            text = f.read()
    except OSError:
        text = ""
    if a.tool == "loadlab":
        p = parse_loadlab(a.json) if a.json else None
    else:
        p = parsers[a.tool](text)
    if t:
        rec.update(t)
    if p:
        rec.update(p)
    return t, p


# Over this share of the time this machine's CPUs wanted to run, taken by the host (a VM's
# hypervisor running something else: /proc/stat's steal), a run's CPU figures are the host's
# as much as the tool's.
STEAL_LIMIT = 0.02


def steal_share(before, after):
    """The share of the time this machine's CPUs wanted to run that its host took over a run:
    steal / (busy + steal), from /proc/stat's cpu line read before and after as "BUSY STEAL"
    clock ticks (bench/lib.sh's host_ticks). None if either reading is missing or makes no sense."""
    try:
        b0, s0 = (int(x) for x in before.split())
        b1, s1 = (int(x) for x in after.split())
    except (AttributeError, ValueError):
        return None
    busy, steal = b1 - b0, s1 - s0
    if busy < 0 or steal < 0 or busy + steal == 0:
        return None
    return steal / (busy + steal)


def record_steal(rec, a):
    """Stores the run's steal share in `rec` (as "host_steal") when the script measured it."""
    share = steal_share(getattr(a, "host_ticks_before", None), getattr(a, "host_ticks_after", None))
    if share is not None:
        rec["host_steal"] = round(share, 4)


def steal_note(rec):
    """The progress line's mention of steal: only where the run crossed STEAL_LIMIT."""
    s = rec.get("host_steal")
    return "  host stole %.0f %%" % (100 * s) if s is not None and s > STEAL_LIMIT else ""


def steal_shares(runs):
    """The steal shares measured over `runs` (records), smallest first."""
    return sorted(r["host_steal"] for r in runs if r.get("host_steal") is not None)


def worst_steal(runs):
    """The largest steal share over `runs` (records), None where none was measured."""
    shares = steal_shares(runs)
    return shares[-1] if shares else None


def steal_warning(runs):
    """What a target line adds when the host stole more than STEAL_LIMIT in any of the runs
    it is judged from (every tool's: a ratio is only as good as its worse side)."""
    worst = worst_steal(runs)
    if worst is None or worst <= STEAL_LIMIT:
        return ""
    return (" [host stole up to %.0f %% of the CPU time during these runs: not this machine's "
            "figure]" % (100 * worst))


def steal_paragraph(runs):
    """One paragraph on the host's steal over every run of the report; None if no run measured it."""
    shares = steal_shares(runs)
    if not shares:
        return None
    over = sum(1 for s in shares if s > STEAL_LIMIT)
    head = ("Steal: the host (a VM's hypervisor) took %.1f %% of the time this machine's CPUs "
            "wanted to run in the median run, %.1f %% in the worst"
            % (100 * med(shares), 100 * shares[-1]))
    if not over:
        return head + "; no run over %.0f %%." % (100 * STEAL_LIMIT)
    return (head + "; %d of %d runs over %.0f %%. Their CPU figures, the ratios and the schedule "
            "lags are the host's as much as the tools': the targets they touch are marked; re-run "
            "when the host is quiet (bench/lib.sh's host_ticks, or the steal column of `vmstat 1`)."
            % (over, len(shares), 100 * STEAL_LIMIT))


def failure(t, p, rc, more=()):
    """Why a run gave no record: the missing parses, then `more`, then the exit status."""
    why = []
    if not t:
        why.append("no GNU time data")
    if not p:
        why.append("could not parse tool output")
    why += list(more)
    return "; ".join(why) + (" (rc=%d)" % rc if rc else "")


def print_failed(a, rec):
    print("    %-8s FAILED: %s (see %s)" % (a.tool, rec["failure"], a.stdout))


def append_record(path, rec):
    with open(path, "a") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")


def read_records(path):
    recs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                recs.append(json.loads(line))
    return recs


# --------------------------------------------------------------------------
# summaries


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def group_runs(recs, key):
    """key (phase or suite) -> tool -> {"runs": ok records, "failed": count, "skipped": reason,
    "n": len(runs)}."""
    out = {}
    for r in recs:
        s = out.setdefault(r[key], {}).setdefault(
            r["tool"], {"runs": [], "failed": 0, "skipped": None})
        if r.get("skipped"):
            s["skipped"] = r["skipped"]
        elif r.get("ok"):
            s["runs"].append(r)
        else:
            s["failed"] += 1
    for group in out.values():
        for s in group.values():
            s["n"] = len(s["runs"])
    return out


def spread(vals, median):
    """(max - min) / median over the rounds, None for a single round or a zero median."""
    return (max(vals) - min(vals)) / median if len(vals) > 1 and median else None


def ordered(tools, order):
    """The tools in `order`, then the others by name."""
    return sorted(tools, key=lambda t: (order.index(t) if t in order else 99, t))


def ratio_cell(tool, ll_rpc, rpc):
    """The 'loadlab ratio (req/CPU-s)' cell."""
    if tool == "loadlab":
        return "—"
    if ll_rpc and rpc:
        return "%.2f×" % (ll_rpc / rpc)
    return "-"


# --------------------------------------------------------------------------
# formatting


def ratio_text(r, target):
    """A ratio judged against `target`, to two decimals unless they would hide the verdict
    (0.996 against 1.0 reads "1.00" but fails): then to three, cut rather than rounded if
    even those would (a cut ratio under a target of at most three decimals stays under)."""
    for nd in (2, 3):
        if (round(r, nd) >= target) == (r >= target):
            return "%.*f×" % (nd, r)
    return "%.3f×" % (math.floor(r * 1000) / 1000)


def fmt(v, nd=0):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if nd == 0:
        return "{:,.0f}".format(v)
    return "{:,.{}f}".format(v, nd)


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


class Report:
    """The report as plain text (printed) and as markdown (for the README), side by side."""

    def __init__(self):
        self.text, self.md = [], []

    def meta(self, line):
        self.text.append(line)
        self.md.append("_" + line + "_")

    def host(self, host):
        if host:
            self.meta("host: " + host)

    def table(self, title, hdr, rows):
        self.text += ["", "== " + title + " ==", text_table(hdr, rows)]
        self.md += ["", "**" + title + "**", "", md_table(hdr, rows)]

    def paragraph(self, line):
        self.text += ["", line]
        self.md += ["", line]

    def targets(self, checks):
        self.text += ["", "== Targets =="] + checks
        self.md += ["", "Targets:", ""] + ["- " + c for c in checks]

    def write_md(self, path):
        if path:
            with open(path, "w") as f:
                f.write("\n".join(self.md) + "\n")


# --------------------------------------------------------------------------
# command line


def cmd_skip(a, key):
    """Appends a "skipped" record (tool not installed / cannot do this mode)."""
    append_record(a.out, {"ts": now(), key: getattr(a, key), "tool": a.tool,
                          "round": 0, "ok": False, "skipped": a.reason})


def cmd_freeport(a):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
    s.close()


def main(doc, key, tools, record, record_args, report, report_args, extra=()):
    """The command line of both scripts: `record` (runs grouped by --KEY, tools `tools`),
    `skip`, `report`, `freeport`, then `extra` as (name, add_arguments, command).
    `record_args` adds the script's own record options after the shared ones, `report_args`
    its report options after --md."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="sub", required=True)

    p = sub.add_parser("record")
    p.add_argument("--out", required=True)
    p.add_argument("--" + key, required=True)
    p.add_argument("--round", type=int, required=True)
    p.add_argument("--tool", required=True, choices=["loadlab"] + sorted(tools))
    p.add_argument("--stdout", required=True)
    p.add_argument("--time", required=True)
    p.add_argument("--json")
    p.add_argument("--rc", type=int, default=0)
    p.add_argument("--cmd", default="")
    p.add_argument("--host-ticks-before", help="/proc/stat's busy and steal ticks before the run")
    p.add_argument("--host-ticks-after", help="/proc/stat's busy and steal ticks after the run")
    record_args(p)

    p = sub.add_parser("skip")
    p.add_argument("--out", required=True)
    p.add_argument("--" + key, required=True)
    p.add_argument("--tool", required=True)
    p.add_argument("--reason", required=True)

    p = sub.add_parser("report")
    p.add_argument("results")
    p.add_argument("--md")
    report_args(p)
    p.add_argument("--gen-cpu", default="1")
    p.add_argument("--server-cpu", default="0")
    p.add_argument("--host", default="")

    sub.add_parser("freeport")

    commands = {"record": record, "skip": lambda a: cmd_skip(a, key), "report": report,
                "freeport": cmd_freeport}
    for name, add_arguments, command in extra:
        add_arguments(sub.add_parser(name))
        commands[name] = command

    a = ap.parse_args()
    rc = commands[a.sub](a)
    sys.exit(rc or 0)

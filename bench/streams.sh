#!/usr/bin/env bash
# WebSocket benchmark: loadlab vs k6 vs Artillery vs a floor client, against one echo server.
#
#   bench/streams.sh                                  # full run (~8 minutes)
#   DURATION=5 ROUNDS=1 bench/streams.sh              # quick look (~2 minutes)
#   TOOLS=loadlab,floor MEMORY=0 bench/streams.sh     # no peers, no idle-connection phase
#
# The server: Node's `ws` (Debian's node-ws, /usr/share/nodejs/ws; `ws` from npm if that is
# missing) in one Node process pinned to SERVER_CPU, echoing every message as it came,
# no compression. Nobody here wrote it; it is the WebSocket library most Node services run;
# one event loop echoes well over the rates measured here; and it holds 10,000 idle
# connections in little memory. Its own count of echoed messages (GET /stats on the same
# port) is read before and after every run, so each tool's count of replies is checked
# against it: a tool is credited with min(its replies, the messages the server echoed).
#
# Messages (phase "rate-R", once per rate in RATES): every generator pinned to GEN_CPU and
# run under GNU time (user+sys CPU and peak RSS of the process tree, the same way for every
# tool), CONNECTIONS connections, open loop at R messages/s in total for DURATION seconds:
#   loadlab    run ws://… --rate R -c CONNECTIONS --cpus 1 --io uring (one message in flight per
#              connection; latency recorded)
#   k6         K6_VERSION built with `go install go.k6.io/k6@…`; k6/websockets, one VU per
#              connection (per-vu-iterations, 1 iteration), each sending on its own schedule
#              at R/CONNECTIONS messages/s (setTimeout to the next due time, so that timer
#              drift does not lower the rate), counting replies in onmessage
#   artillery  ARTILLERY_VERSION from npm (into ARTILLERY_PREFIX); its ws engine: CONNECTIONS
#              virtual users arriving over 1 s, each sending in a loop with a think time of
#              CONNECTIONS/R s (Artillery has no open-loop send rate: the loop's own time
#              adds to each gap, so it falls behind the rate by what a send costs it)
#   floor      bench/ws-floor (built here with cargo): the least CPU a WebSocket client can
#              spend per message on this machine (pre-masked frame, one write per message,
#              replies walked by frame header only, epoll, nothing recorded; it reads
#              the replies when it wakes to send, never woken by one)
#   floor-woken the same, woken by each reply as it arrives (--woken: a timerfd and the
#              connections in one epoll set), as a client that times its replies must be
#              (loadlab is): the floor for a tool that measures latency
# Runs are interleaved (round -> tool, tool order rotated each round); the report shows the
# median of the rounds: messages per generator CPU-second, CPU µs per message, peak RSS,
# and the ratios loadlab ÷ k6, loadlab ÷ Artillery (messages per CPU-second) and floor ÷
# loadlab (CPU per message: how close loadlab is to the floor). Targets: loadlab ≥ 3× k6,
# loadlab within 1.3× of the floor's CPU per message.
#
# Start-up (STARTUP=1): each tool once per round for 1 s at CONNECTIONS messages/s (one
# message per connection): its fixed cost per run (start, connect, summary), shown on its
# own and subtracted in the report's "net of start-up" column (k6 and Artillery pay a
# noticeable share of a 10-second run's CPU before the first message and after the last).
#
# Idle connections (MEMORY=1): peak RSS of `loadlab run ws://… -c IDLE_CONNECTIONS
# --ping-every 5s -d 3s --warmup 5s` minus that of the same with -c IDLE_BASE, divided by the
# difference in connections: what loadlab spends per open idle connection. The script
# raises its soft open-files limit to the hard limit (the server and loadlab each need one
# descriptor per connection).
#
# Raw results: bench/out/streams-<stamp>.jsonl, tool output in bench/out/streams-<stamp>/.
#
# Environment:
#   DURATION          seconds per message run                            (10)
#   ROUNDS            interleaved rounds of the message runs             (3)
#   RATES             messages/s in total, comma list                    (2000,10000)
#   CONNECTIONS       connections per message run                        (64)
#   BODY              the text message sent                              (hello)
#   TOOLS             comma list from loadlab,k6,artillery,floor         (all)
#   MEMORY            1 = the idle-connection phase (needs loadlab)      (1)
#   STARTUP           1 = the start-up phase (below)                     (1)
#   STARTUP_ROUNDS / IDLE_ROUNDS   rounds of those two phases            (1 / 1)
#   FLOOR_WOKEN       1 = run the floor a second time with --woken       (1)
#   IDLE_CONNECTIONS / IDLE_BASE   connections of its two runs           (10000 / 100)
#   LOADLAB           loadlab binary                          (target/release/loadlab)
#   LOADLAB_IO_MODE   loadlab's --io: uring (its cheapest per message; `auto` takes epoll
#                     for WebSocket, docs/src/streams.md says why) or epoll   (uring)
#   FLOOR             bench/ws-floor binary (built: bench/ws-floor/target/release/loadlab-ws-floor)
#   K6                k6 binary (found on PATH or in Go's bin directory, else installed)
#   K6_VERSION        k6 version go-installed when missing               (v1.8.1)
#   ARTILLERY_VERSION Artillery version npm-installed when missing       (2.0.21: the last
#                     that runs on Node 20, Debian's; later ones need Node ≥ 22)
#   ARTILLERY_PREFIX  where npm installs it   (~/.cache/loadlab-bench/artillery-VERSION)
#   GEN_CPU / SERVER_CPU   CPUs for generator / server                   (1 / 0)
#   INSTALL           0 = never install/build missing tools, skip them with a reason (1)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
RATES=${RATES:-2000,10000}
CONNECTIONS=${CONNECTIONS:-64}
BODY=${BODY:-hello}
TOOLS=${TOOLS:-loadlab,k6,artillery,floor}
MEMORY=${MEMORY:-1}
FLOOR_WOKEN=${FLOOR_WOKEN:-1}
STARTUP=${STARTUP:-1}
STARTUP_ROUNDS=${STARTUP_ROUNDS:-1}
IDLE_ROUNDS=${IDLE_ROUNDS:-1}
IDLE_CONNECTIONS=${IDLE_CONNECTIONS:-10000}
IDLE_BASE=${IDLE_BASE:-100}
LOADLAB=${LOADLAB:-$ROOT/target/release/loadlab}
LOADLAB_IO_MODE=${LOADLAB_IO_MODE:-uring}
FLOOR=${FLOOR:-}
K6=${K6:-}
K6_VERSION=${K6_VERSION:-v1.8.1}
ARTILLERY_VERSION=${ARTILLERY_VERSION:-2.0.21}
ARTILLERY_PREFIX=${ARTILLERY_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/loadlab-bench/artillery-$ARTILLERY_VERSION}
GEN_CPU=${GEN_CPU:-1}
SERVER_CPU=${SERVER_CPU:-0}
INSTALL=${INSTALL:-1}
# Hard wall-clock bound per run (every tool stops itself at DURATION; Artillery and k6 take
# a few seconds to start and to write their summaries).
RUN_TIMEOUT=$((DURATION + 60))

GOBIN_DIR=
if command -v go >/dev/null || [[ -x /usr/local/go/bin/go ]]; then
    GO=$(command -v go || echo /usr/local/go/bin/go)
    GOBIN_DIR=$("$GO" env GOBIN 2>/dev/null || true)
    [[ -n $GOBIN_DIR ]] || GOBIN_DIR=$("$GO" env GOPATH 2>/dev/null || echo "$HOME/go")/bin
fi
export PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin:/usr/local/go/bin:${GOBIN_DIR:-$HOME/go/bin}:/usr/sbin:/sbin"
# Artillery: no telemetry, no update check (nothing leaves loopback; see no-telemetry.js).
export ARTILLERY_DISABLE_TELEMETRY=true ARTILLERY_TELEMETRY_DEFAULTS='{}' NO_UPDATE_NOTIFIER=1
export K6_NO_USAGE_REPORT=true

BENCH_NAME=streams.sh
# shellcheck source=lib.sh
. "$HERE/lib.sh"

posint DURATION "$DURATION"; posint ROUNDS "$ROUNDS"; posint CONNECTIONS "$CONNECTIONS"
posint STARTUP_ROUNDS "$STARTUP_ROUNDS"; posint IDLE_ROUNDS "$IDLE_ROUNDS"
posint IDLE_CONNECTIONS "$IDLE_CONNECTIONS"; posint IDLE_BASE "$IDLE_BASE"
(( IDLE_CONNECTIONS > IDLE_BASE )) || die "IDLE_CONNECTIONS must be larger than IDLE_BASE"
IFS=, read -r -a WANT_RATES <<<"$RATES"
for r in "${WANT_RATES[@]}"; do
    [[ $r =~ ^[0-9]+$ && $r -gt 0 ]] || die "RATES must be positive integers (messages/s), got '$r'"
done
IFS=, read -r -a WANT_TOOLS <<<"$TOOLS"
for t in "${WANT_TOOLS[@]}"; do
    case $t in loadlab|k6|artillery|floor) ;; *) die "unknown tool '$t' in TOOLS (loadlab,k6,artillery,floor)" ;; esac
done
has_tool() { in_list "$1" "${WANT_TOOLS[@]}"; }
[[ $MEMORY == 0 ]] || MEMORY=1
[[ $STARTUP == 0 ]] || STARTUP=1
[[ $FLOOR_WOKEN == 0 ]] || FLOOR_WOKEN=1

command -v python3 >/dev/null || die "python3 is required"
command -v taskset >/dev/null || die "taskset (util-linux) is required"
ncpu=$(nproc)
(( GEN_CPU < ncpu && SERVER_CPU < ncpu )) || die "need CPUs $SERVER_CPU and $GEN_CPU; this machine has $ncpu"
[[ $GEN_CPU != "$SERVER_CPU" ]] || log "warning: GEN_CPU == SERVER_CPU; generator and server will share a core"

if has_tool loadlab || [[ $MEMORY == 1 ]]; then
    if [[ ! -x $LOADLAB ]]; then
        log "streams.sh: loadlab binary not found at $LOADLAB"
        log "  build it first:   cargo build --release -p loadlab"
        log "  or point LOADLAB=/path/to/loadlab, or leave it out: TOOLS=k6,artillery,floor MEMORY=0"
        exit 1
    fi
    "$LOADLAB" run --help 2>&1 | grep -q -- --ping-every \
        || die "$LOADLAB has no WebSocket connection load (run --ping-every): rebuild it (cargo build --release -p loadlab)"
fi

# Descriptors: the idle phase holds IDLE_CONNECTIONS in loadlab and as many in the server.
hard=$(ulimit -Hn)
if [[ $hard != unlimited ]] && (( hard < IDLE_CONNECTIONS + 64 )) && [[ $MEMORY == 1 ]]; then
    die "the open-files hard limit is $hard; IDLE_CONNECTIONS=$IDLE_CONNECTIONS needs at least $((IDLE_CONNECTIONS + 64)) (lower it, or MEMORY=0)"
fi
ulimit -n "$hard" 2>/dev/null || log "warning: could not raise the open-files soft limit to $hard"

# ---------------------------------------------------------------- installs
missing_pkgs=()
[[ -x /usr/bin/time ]] || missing_pkgs+=(time)     # GNU time, not the shell keyword
command -v node >/dev/null || missing_pkgs+=(nodejs)
[[ -e /usr/share/nodejs/ws/package.json ]] || missing_pkgs+=(node-ws)
apt_install "${missing_pkgs[@]}"
[[ -x /usr/bin/time ]] || die "GNU time (/usr/bin/time) not available"
command -v node >/dev/null || die "node not available (apt-get install nodejs)"
[[ -e /usr/share/nodejs/ws/package.json ]] || die "Node's ws not available (apt-get install node-ws)"

SKIP_TOOL=() SKIP_WHY=()   # tools not available -> skipped with a printed reason
skip_tool() { log "warning: skipping $1: $2"; SKIP_TOOL+=("$1"); SKIP_WHY+=("$2"); }
is_skipped() { in_list "$1" "${SKIP_TOOL[@]:-}"; }
skip_reason() {
    local i
    for i in "${!SKIP_TOOL[@]}"; do [[ ${SKIP_TOOL[$i]} == "$1" ]] && { echo "${SKIP_WHY[$i]}"; return; }; done
}

if has_tool k6; then
    [[ -n $K6 ]] || K6=$(command -v k6 || true)
    if [[ -z $K6 ]]; then
        if [[ $INSTALL != 1 ]]; then
            skip_tool k6 "k6 not installed (INSTALL=0); install it with: go install go.k6.io/k6@$K6_VERSION"
        else
            [[ -n $GOBIN_DIR ]] || die "k6 is missing and there is no Go toolchain to build it: install Go, or k6 by hand, or leave it out: TOOLS=loadlab,artillery,floor"
            log "installing k6 $K6_VERSION (go install go.k6.io/k6@$K6_VERSION, low priority; several minutes)..."
            nice -n 19 "$GO" install "go.k6.io/k6@$K6_VERSION" \
                || die "go install go.k6.io/k6@$K6_VERSION failed (is the Go module proxy reachable? GOPROXY=$("$GO" env GOPROXY)); install k6 by hand and set K6=/path/to/k6, or leave it out: TOOLS=loadlab,artillery,floor"
            K6=$GOBIN_DIR/k6
        fi
    fi
    if ! is_skipped k6; then
        [[ -x $K6 ]] || die "k6 not found at $K6"
        "$K6" version >/dev/null 2>&1 || die "$K6 does not run ($K6 version failed)"
    fi
fi

ARTILLERY=$ARTILLERY_PREFIX/node_modules/.bin/artillery
if has_tool artillery; then
    if [[ ! -x $ARTILLERY ]]; then
        if [[ $INSTALL != 1 ]]; then
            skip_tool artillery "Artillery not installed at $ARTILLERY_PREFIX (INSTALL=0); install it with: npm install --prefix $ARTILLERY_PREFIX --ignore-scripts artillery@$ARTILLERY_VERSION"
        else
            command -v npm >/dev/null || die "Artillery is missing and there is no npm to install it (apt-get install npm), or leave it out: TOOLS=loadlab,k6,floor"
            log "installing Artillery $ARTILLERY_VERSION into $ARTILLERY_PREFIX (npm, no install scripts: no browser download; a few minutes)..."
            mkdir -p "$ARTILLERY_PREFIX"
            PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 nice -n 19 npm install --prefix "$ARTILLERY_PREFIX" --ignore-scripts \
                --no-audit --no-fund --loglevel=error "artillery@$ARTILLERY_VERSION" >&2 \
                || die "npm install artillery@$ARTILLERY_VERSION failed (is the npm registry reachable?); install it by hand (npm install --prefix $ARTILLERY_PREFIX --ignore-scripts artillery@$ARTILLERY_VERSION), or leave it out: TOOLS=loadlab,k6,floor"
        fi
    fi
    if ! is_skipped artillery; then
        [[ -x $ARTILLERY ]] || die "Artillery not found at $ARTILLERY after installing it"
        "$ARTILLERY" version >/dev/null 2>&1 \
            || die "$ARTILLERY does not run here (artillery version failed; Artillery after 2.0.21 needs Node ≥ 22, this is $(node --version)): ARTILLERY_VERSION=2.0.21, or TOOLS=loadlab,k6,floor"
    fi
fi

if has_tool floor; then
    if [[ -z $FLOOR ]]; then
        FLOOR=$HERE/ws-floor/target/release/loadlab-ws-floor
        if [[ $INSTALL == 1 ]]; then
            log "building bench/ws-floor (cargo build --release --locked)..."
            cargo build -q --release --locked --manifest-path "$HERE/ws-floor/Cargo.toml" \
                || die "bench/ws-floor did not build (cargo build --release --manifest-path bench/ws-floor/Cargo.toml); or leave it out: TOOLS=loadlab,k6,artillery"
        fi
    fi
    [[ -x $FLOOR ]] || skip_tool floor "no bench/ws-floor binary at $FLOOR (INSTALL=0)"
fi

# ---------------------------------------------------------------- helper, server
STAMP=$(date +%Y%m%d-%H%M%S)
OUTDIR=$HERE/out
RAW=$OUTDIR/streams-$STAMP
RESULTS=$OUTDIR/streams-$STAMP.jsonl
mkdir -p "$RAW"
: >"$RESULTS"

server_dir streams
PYHELP=$SRV_DIR/streams.py
PY="python3 $PYHELP"

cat >"$PYHELP" <<'PYEOF'
#!/usr/bin/env python3
"""Parsing and reporting helper for bench/streams.sh (written by it; standard library only).

Subcommands: record (one run -> one JSON line), skip, report, freeport, stats URL (the
echo server's counters).

Counting conventions (identical for every tool):
  sent          messages the tool says it sent (the floor, k6, Artillery; loadlab: requests)
  replies       replies the tool counted (Artillery counts none: the server's count is used)
  echoed        messages the server echoed during the run (its own counter, before/after)
  credited      min(replies, echoed): what the efficiency figures are computed on
  cpu_s         user + sys CPU seconds of the generator's process tree (GNU time)
  msg_per_cpu_s credited / cpu_s;  cpu_us_per_msg = 1e6 * cpu_s / credited
  rss_kb        peak RSS from GNU time (%M, KiB)
"""

import json
import os
import sys
import urllib.request

sys.path.insert(0, os.environ["BENCH_DIR"])
import lib  # noqa: E402  (bench/lib.py)
from lib import fmt as _fmt, med as _med  # noqa: E402

ORDER = ["loadlab", "k6", "artillery", "floor", "floor-woken"]
K6_TARGET = 3.0      # loadlab >= 3x k6's messages per CPU-second
FLOOR_TARGET = 1.3   # loadlab's CPU per message <= 1.3x the floor's


def _load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError, TypeError):
        return None


def parse_loadlab(path, stdout):
    j = lib.load_loadlab_json(path)
    if j is None:
        return None
    r = {"sent": int(j["requests"]), "replies": int(j.get("successful") or 0)}
    r["error_count"] = int(j["errors_total"]) if j.get("errors_total") is not None else sum(
        lib.loadlab_errors(j).values())
    if isinstance(j.get("duration_s"), (int, float)):
        r["elapsed_s"] = float(j["duration_s"])
    if isinstance(j.get("latency_ms"), dict):
        r["latency_ms"] = {k: v for k, v in j["latency_ms"].items() if isinstance(v, (int, float))}
    if isinstance(j.get("generator_cpu_seconds"), (int, float)):
        r["self_cpu_s"] = float(j["generator_cpu_seconds"])
    if isinstance(j.get("generator_peak_rss_bytes"), (int, float)):
        r["self_rss_kb"] = int(j["generator_peak_rss_bytes"] / 1024)
    for k in ("connections_opened", "connections", "generator_limited", "stop_reason"):
        if k in j:
            r[k] = j[k]
    return r


def parse_floor(path, stdout):
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                j = json.loads(line)
            except ValueError:
                return None
            return {"sent": j["sent"], "replies": j["replies"], "error_count": j["errors"],
                    "elapsed_s": j["elapsed_s"], "unsent": j.get("unsent", 0)}
    return None


def parse_k6(path, stdout):
    j = _load_json(path)
    if not j or "metrics" not in j:
        return None
    m = j["metrics"]

    def count(name):
        v = (m.get(name) or {}).get("values") or {}
        return int(v.get("count", 0))
    r = {"sent": count("ws_msgs_sent"), "replies": count("ws_msgs_received"),
         "sessions": count("ws_sessions")}
    # Sessions that did not open, and iterations k6 cut short, are its errors.
    r["error_count"] = count("ws_session_errors") if "ws_session_errors" in m else 0
    st = j.get("state") or {}
    if st.get("testRunDurationMs"):
        r["elapsed_s"] = st["testRunDurationMs"] / 1e3
    return r


def parse_artillery(path, stdout):
    j = _load_json(path)
    if not j or "aggregate" not in j:
        return None
    c = j["aggregate"].get("counters") or {}
    r = {"sent": int(c.get("websocket.messages_sent", 0)), "replies": None,
         "vusers_failed": int(c.get("vusers.failed", 0))}
    if "websocket.messages_received" in c:
        r["replies"] = int(c["websocket.messages_received"])
    r["error_count"] = sum(int(v) for k, v in c.items() if k.startswith("errors.")) + r["vusers_failed"]
    return r


PARSERS = {"loadlab": parse_loadlab, "floor": parse_floor, "floor-woken": parse_floor,
           "k6": parse_k6, "artillery": parse_artillery}


def cmd_record(a):
    rec = {"ts": lib.now(), "phase": a.phase, "round": a.round, "tool": a.tool,
           "rate": a.rate, "duration": a.duration, "connections": a.connections,
           "rc": a.rc, "cmd": a.cmd, "stdout": a.stdout, "ok": False}
    lib.record_steal(rec, a)
    t = lib.parse_time_file(a.time)
    try:
        with open(a.stdout, errors="replace") as f:
            text = f.read()
    except OSError:
        text = ""
    p = PARSERS[a.tool](a.json, text)
    if t:
        rec.update(t)
    if p:
        rec.update(p)
    sb, sa = _load_json_text(a.server_before), _load_json_text(a.server_after)
    if sb and sa:
        rec["echoed"] = sa["messages"] - sb["messages"]
        rec["server_opened"] = sa["opened"] - sb["opened"]
        rec["server_open_peak"] = a.server_open_peak
    if a.server_cpu_s is not None:
        rec["server_cpu_s"] = a.server_cpu_s
        rec["server_wall_s"] = a.server_wall_s
    notes = []
    if t and p:
        rec["ok"] = True
        replies, echoed = rec.get("replies"), rec.get("echoed")
        if a.phase.startswith("idle"):
            credited = replies   # pongs: the server echoes no messages
        elif replies is None:
            credited = echoed
            notes.append("replies: the server's count (the tool counts none)")
        elif echoed is None:
            credited = replies
        else:
            credited = min(replies, echoed)
            if abs(replies - echoed) > max(10, 0.01 * echoed):
                notes.append("tool counted %d replies, server echoed %d" % (replies, echoed))
        rec["credited"] = credited or 0
        if not a.phase.startswith("idle"):
            rec["achieved_rps"] = round(rec["credited"] / a.duration, 1)
            # GNU time counts in 10 ms steps: a run of no measurable CPU counts as one step.
            rec["msg_per_cpu_s"] = round(rec["credited"] / max(rec["cpu_s"], 0.01), 1)
            rec["cpu_us_per_msg"] = round(1e6 * rec["cpu_s"] / rec["credited"], 2) if rec["credited"] else None
            if a.rate and rec["credited"] < 0.95 * a.rate * a.duration:
                notes.append("behind the rate: %d of %d messages" % (rec["credited"], a.rate * a.duration))
        if rec.get("error_count"):
            notes.append("%d errors" % rec["error_count"])
        if rec.get("unsent"):
            notes.append("%d arrivals found every connection busy" % rec["unsent"])
        if rec.get("self_cpu_s") is not None and abs(rec["self_cpu_s"] - rec["cpu_s"]) > 0.1 * rec["cpu_s"] + 0.02:
            notes.append("self-reported CPU %.2fs vs GNU time %.2fs" % (rec["self_cpu_s"], rec["cpu_s"]))
        if a.rc:
            notes.append("exit status %d" % a.rc)
    else:
        rec["failure"] = lib.failure(t, p, a.rc)
    rec["notes"] = notes
    lib.append_record(a.out, rec)
    if not rec["ok"]:
        lib.print_failed(a, rec)
    elif a.phase.startswith("idle"):
        print("    %-9s %6d connections (server opened %s, held %s)  cpu %5.2fs  peak rss %7.1f MB%s"
              % (a.tool, a.connections, rec.get("server_opened", "?"), rec.get("server_open_peak", "?"),
                 rec["cpu_s"], rec["rss_kb"] / 1024,
                 ("  [" + "; ".join(notes) + "]") if notes else ""))
    else:
        print("    %-11s %7d replies (server %s) %5d err  cpu %5.2fs  %8.0f msg/cpu-s  %6.1f µs/msg  rss %6.1f MB%s%s"
              % (a.tool, rec["credited"], rec.get("echoed", "?"), rec.get("error_count") or 0,
                 rec["cpu_s"], rec["msg_per_cpu_s"], rec["cpu_us_per_msg"] or 0, rec["rss_kb"] / 1024,
                 ("  [" + "; ".join(notes) + "]") if notes else "", lib.steal_note(rec)))


def _load_json_text(s):
    try:
        return json.loads(s) if s else None
    except ValueError:
        return None


# --------------------------------------------------------------------------
# report


def summarize(recs):
    out = lib.group_runs(recs, "phase")
    for ph in out.values():
        for s in ph.values():
            runs = s["runs"]
            if not runs:
                continue
            for key in ("rate", "connections", "sent", "replies", "echoed", "credited", "error_count",
                        "achieved_rps", "cpu_s", "msg_per_cpu_s", "cpu_us_per_msg", "rss_kb",
                        "self_rss_kb", "server_opened", "server_open_peak"):
                s[key] = _med([x.get(key) for x in runs])
            srv = [x["server_cpu_s"] / x["server_wall_s"] for x in runs
                   if x.get("server_cpu_s") is not None and x.get("server_wall_s")]
            s["server_util"] = _med(srv)
            vals = [x["msg_per_cpu_s"] for x in runs if x.get("msg_per_cpu_s")]
            s["spread"] = lib.spread(vals, _med(vals)) if vals else None
            lat = [x.get("latency_ms") or {} for x in runs]
            s["latency_ms"] = {k: _med([l.get(k) for l in lat]) for k in ("p50", "p99")}
            s["notes"] = sorted({n for x in runs for n in x.get("notes", [])})
    return out


HDR = ["tool", "replies", "server echoed", "errors", "msg/s", "gen CPU s", "msg per gen CPU-s",
       "CPU µs/msg", "net of start-up µs/msg", "peak RSS MB", "server CPU %", "loadlab ratio", "notes"]


def net_us(s, start):
    """CPU µs per message less the tool's start-up run's CPU (None without one)."""
    if not (start and start.get("n") and s.get("credited")):
        return None
    return 1e6 * max(0.0, s["cpu_s"] - start["cpu_s"]) / s["credited"]


def rate_rows(ph, startup):
    ll = ph.get("loadlab")
    ll_mpc = ll.get("msg_per_cpu_s") if ll and ll.get("n") else None
    ll_us = ll.get("cpu_us_per_msg") if ll and ll.get("n") else None
    rows = []
    for tool in lib.ordered(ph, ORDER):
        s = ph[tool]
        if not s["n"]:
            why = s["skipped"] or "%d failed run(s)" % s["failed"]
            rows.append([tool, "n/a" if s["skipped"] else "failed"] + [""] * (len(HDR) - 3) + [why])
            continue
        if tool == "loadlab":
            ratio = "—"
        elif tool.startswith("floor"):
            # floor's CPU per message / loadlab's: 1.0 = loadlab at the floor
            ratio = ("floor/loadlab CPU per msg %.2f" % (s["cpu_us_per_msg"] / ll_us)
                     if ll_us and s.get("cpu_us_per_msg") else "-")
        else:
            ratio = lib.ratio_cell(tool, ll_mpc, s.get("msg_per_cpu_s"))
        notes = []
        if s["failed"]:
            notes.append("%d failed run(s)" % s["failed"])
        if s.get("spread") is not None:
            notes.append("spread %.0f%%" % (100 * s["spread"]))
        if s.get("server_opened") is not None and s["server_opened"] != s.get("connections"):
            notes.append("server opened %d connections" % s["server_opened"])
        lat = s.get("latency_ms") or {}
        if lat.get("p50") is not None:
            notes.append("p50/p99 %.2f/%.2f ms" % (lat["p50"], lat["p99"]))
        notes += s["notes"][:3]
        rows.append([
            tool, _fmt(s["credited"]), _fmt(s.get("echoed")), _fmt(s.get("error_count")),
            _fmt(s["achieved_rps"]), _fmt(s["cpu_s"], 2), _fmt(s["msg_per_cpu_s"]),
            _fmt(s["cpu_us_per_msg"], 1), _fmt(net_us(s, startup.get(tool)), 1),
            _fmt(s["rss_kb"] / 1024, 1),
            "%.0f%%" % (100 * s["server_util"]) if s.get("server_util") is not None else "-",
            ratio, "; ".join(notes)])
    return rows


def idle_section(summ, rep):
    lo = [k for k in summ if k.startswith("idle-")]
    if len(lo) < 2:
        return None
    keys = sorted(lo, key=lambda k: int(k.split("-")[1]))
    base, big = summ[keys[0]].get("loadlab"), summ[keys[-1]].get("loadlab")
    rows = []
    for k in keys:
        s = summ[k].get("loadlab")
        if not s or not s["n"]:
            rows.append([k.split("-")[1], "failed", "", "", "", ""])
            continue
        rows.append([_fmt(int(k.split("-")[1])), _fmt(s.get("server_open_peak")), _fmt(s["cpu_s"], 2),
                     _fmt(s["rss_kb"] / 1024, 1),
                     _fmt(s["self_rss_kb"] / 1024, 1) if s.get("self_rss_kb") else "-",
                     "; ".join(s["notes"][:2])])
    rep.table("Idle connections: loadlab run ws://… --ping-every 5s -d 3s --warmup 5s (median of rounds)",
              ["connections", "server held", "gen CPU s", "peak RSS MB (GNU time)",
               "peak RSS MB (loadlab's own)", "notes"], rows)
    if base and big and base["n"] and big["n"]:
        n0, n1 = int(keys[0].split("-")[1]), int(keys[-1].split("-")[1])
        per = (big["rss_kb"] - base["rss_kb"]) * 1024 / (n1 - n0)
        line = ("Memory per idle open connection: (%s KB - %s KB) / %s = %.0f bytes (%.1f KiB)"
                % (_fmt(big["rss_kb"]), _fmt(base["rss_kb"]), _fmt(n1 - n0), per, per / 1024))
        rep.paragraph(line)
        return per
    return None


def target_checks(summ, rates):
    lines = []
    startup = summ.get("startup") or {}
    for rate in rates:
        ph = summ.get("rate-%d" % rate) or {}
        ll = ph.get("loadlab")
        runs = [x for s in ph.values() for x in s.get("runs") or []]
        if not (ll and ll["n"]):
            lines.append("[ -- ] %d msg/s: loadlab not measured" % rate)
            continue
        for peer, target in (("k6", K6_TARGET), ("artillery", None)):
            p = ph.get(peer)
            if not (p and p["n"] and p.get("msg_per_cpu_s")):
                lines.append("[ -- ] %d msg/s: loadlab vs %s not measured" % (rate, peer))
                continue
            r = ll["msg_per_cpu_s"] / p["msg_per_cpu_s"]
            if target:
                lines.append("[%s] %d msg/s: loadlab vs %s %s messages per generator CPU-second (target ≥ %.0f×)%s"
                             % ("PASS" if r >= target else "FAIL", rate, peer, lib.ratio_text(r, target),
                                target, lib.steal_warning(runs)))
            else:
                lines.append("[info] %d msg/s: loadlab vs %s %.2f× messages per generator CPU-second"
                             % (rate, peer, r))
            a, b = net_us(ll, startup.get("loadlab")), net_us(p, startup.get(peer))
            if a and b:
                lines.append("[info] %d msg/s: loadlab vs %s %.2f× net of both tools' start-up runs"
                             % (rate, peer, b / a))
        fw = ph.get("floor-woken")
        if fw and fw["n"] and fw.get("cpu_us_per_msg") and ll.get("cpu_us_per_msg"):
            lines.append("[info] %d msg/s: floor-woken's CPU per message ÷ loadlab's = %.2f (loadlab spends "
                         "%.2f× the %.1f µs of a floor that reads each reply as it arrives)"
                         % (rate, fw["cpu_us_per_msg"] / ll["cpu_us_per_msg"],
                            ll["cpu_us_per_msg"] / fw["cpu_us_per_msg"], fw["cpu_us_per_msg"]))
        f = ph.get("floor")
        if f and f["n"] and f.get("cpu_us_per_msg") and ll.get("cpu_us_per_msg"):
            over = ll["cpu_us_per_msg"] / f["cpu_us_per_msg"]
            lines.append("[%s] %d msg/s: floor's CPU per message ÷ loadlab's = %.2f (loadlab spends %s the "
                         "floor's %.1f µs; target ≤ %.1f×)%s"
                         % ("PASS" if over <= FLOOR_TARGET else "FAIL", rate,
                            f["cpu_us_per_msg"] / ll["cpu_us_per_msg"], lib.ratio_text(over, FLOOR_TARGET),
                            f["cpu_us_per_msg"], FLOOR_TARGET, lib.steal_warning(runs)))
        else:
            lines.append("[ -- ] %d msg/s: floor not measured" % rate)
    return lines


def cmd_report(a):
    recs = lib.read_records(a.results)
    summ = summarize(recs)
    runs = [r for r in recs if r.get("ok")]
    rates = sorted({int(k.split("-")[1]) for k in summ if k.startswith("rate-")})
    rep = lib.Report()
    rep.meta("WebSocket echo (Node ws, 1 process, CPU %s), open loop, %s connections, %ss per run, "
             "median of %d round(s); generator on CPU %s"
             % (a.server_cpu, a.connections, a.duration,
                max([r.get("round", 0) for r in runs] or [0]), a.gen_cpu))
    rep.host(a.host)
    if a.versions:
        rep.meta("tools: " + a.versions)
    startup = summ.get("startup") or {}
    if startup:
        rows = []
        for tool in lib.ordered(startup, ORDER):
            s = startup[tool]
            if not s["n"]:
                rows.append([tool, "n/a" if s["skipped"] else "failed", "", "", s["skipped"] or ""])
                continue
            rows.append([tool, _fmt(s["credited"]), _fmt(s["cpu_s"], 2), _fmt(s["rss_kb"] / 1024, 1),
                         "; ".join(s["notes"][:2])])
        rep.table("Start-up: a 1-second run, one message per connection (median of rounds)",
                  ["tool", "replies", "gen CPU s", "peak RSS MB", "notes"], rows)
    for rate in rates:
        rep.table("%s messages/s, body %r" % (_fmt(rate), a.body), HDR,
                  rate_rows(summ["rate-%d" % rate], startup))
    if rates:
        rep.paragraph("'replies' = min(the tool's own count, the server's echoed count), the messages "
                      "credited; 'msg/s' = replies / duration; 'msg per gen CPU-s' = replies / (user+sys "
                      "CPU of the generator, GNU time); 'CPU µs/msg' its inverse; 'server CPU %' = the "
                      "echo server's CPU / wall time over the run. 'loadlab ratio' = loadlab's msg per "
                      "CPU-s ÷ the tool's (for the floor: the floor's CPU per message ÷ loadlab's, 1.0 "
                      "= at the floor). Every tool's CPU includes its start-up and summary (what a user pays "
                      "per run); 'net of start-up' subtracts the tool's start-up run's CPU.")
    idle_section(summ, rep)
    steal = lib.steal_paragraph(runs)
    if steal:
        rep.paragraph(steal)
    rep.targets(target_checks(summ, rates))
    print("\n".join(rep.text))
    rep.write_md(a.md)


def _record_args(p):
    p.add_argument("--rate", type=int, default=0)
    p.add_argument("--duration", type=float, required=True)
    p.add_argument("--connections", type=int, required=True)
    p.add_argument("--server-before")
    p.add_argument("--server-after")
    p.add_argument("--server-open-peak", type=int)
    p.add_argument("--server-cpu-s", type=float)
    p.add_argument("--server-wall-s", type=float)


def _report_args(p):
    p.add_argument("--connections", default="?")
    p.add_argument("--duration", default="?")
    p.add_argument("--body", default="hello")
    p.add_argument("--versions", default="")


def _stats_args(p):
    p.add_argument("url")


def cmd_stats(a):
    try:
        with urllib.request.urlopen(a.url, timeout=5) as r:
            print(r.read().decode())
    except OSError as e:
        print("stats: %s" % e, file=sys.stderr)
        return 1


def main():
    lib.main(__doc__, "phase", [t for t in ORDER if t != "loadlab"], cmd_record, _record_args,
             cmd_report, _report_args, extra=[("stats", _stats_args, cmd_stats)])


if __name__ == "__main__":
    main()
PYEOF
export BENCH_DIR=$HERE

# The echo server: Node's ws, one process. GET /stats on the same port: its counters.
cat >"$SRV_DIR/echo.js" <<'EOF'
'use strict';
const http = require('http');
let WebSocket;
try { WebSocket = require('/usr/share/nodejs/ws'); } catch (e) { WebSocket = require('ws'); }
const port = Number(process.argv[2]);
let messages = 0, open = 0, opened = 0, peak = 0;
const server = http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  const body = JSON.stringify({ messages, open, opened, peak });
  if (req.url === '/stats?reset-peak') peak = open;
  res.end(body);
});
const wss = new WebSocket.Server({ server, perMessageDeflate: false, clientTracking: false,
                                   maxPayload: 1 << 20 });
wss.on('connection', (ws) => {
  open++; opened++; if (open > peak) peak = open;
  ws.on('message', (data, isBinary) => { messages++; ws.send(data, { binary: isBinary }); });
  ws.on('close', () => { open--; });
  ws.on('error', () => {});
});
server.listen(port, '127.0.0.1', 16384, () => console.log('listening on 127.0.0.1:' + port));
EOF

PORT=$($PY freeport)
WS_URL="ws://127.0.0.1:$PORT/"
STATS_URL="http://127.0.0.1:$PORT/stats"
taskset -c "$SERVER_CPU" node "$SRV_DIR/echo.js" "$PORT" >"$RAW/server.out" 2>"$RAW/server.err" </dev/null &
GRT_PID=$!   # stopped on exit by lib.sh's bench_cleanup
for _ in $(seq 100); do
    grep -q '^listening on' "$RAW/server.out" 2>/dev/null && break
    kill -0 "$GRT_PID" 2>/dev/null || break
    sleep 0.1
done
grep -q '^listening on' "$RAW/server.out" 2>/dev/null \
    || { cat "$RAW/server.out" "$RAW/server.err" >&2 2>/dev/null || true; die "the echo server did not come up on $WS_URL"; }
WS_VERSION=$(node -p 'require("/usr/share/nodejs/ws/package.json").version' 2>/dev/null || echo '?')

# k6: one VU per connection, each on its own schedule of RATE/VUS messages/s.
cat >"$SRV_DIR/k6.js" <<'EOF'
import { WebSocket } from 'k6/websockets';
import { setTimeout } from 'k6/timers';

const URL = __ENV.URL, BODY = __ENV.BODY || 'hello';
const RATE = Number(__ENV.RATE), VUS = Number(__ENV.VUS), DURATION = Number(__ENV.DURATION);

export const options = {
  scenarios: { ws: { executor: 'per-vu-iterations', vus: VUS, iterations: 1,
                     maxDuration: (DURATION + 30) + 's', gracefulStop: '5s' } },
  summaryTrendStats: ['avg', 'max'],
};

export default function () {
  const gap = 1000 * VUS / RATE;   // ms between this VU's messages
  const ws = new WebSocket(URL);
  let replies = 0;
  ws.onmessage = () => { replies++; };
  ws.onopen = () => {
    // A random phase, so that the VUs' sends spread over the gap; each send due by its
    // own schedule (t0 + n * gap), so timer lateness does not lower the rate.
    const t0 = Date.now() + Math.random() * gap, end = Date.now() + DURATION * 1000;
    let n = 0;
    const tick = () => {
      const now = Date.now();
      if (now >= end) { setTimeout(() => ws.close(), 500); return; }   // replies in flight
      while (t0 + n * gap <= now) { ws.send(BODY); n++; }
      setTimeout(tick, Math.max(0, Math.min(t0 + n * gap, end) - Date.now()));
    };
    tick();
  };
  ws.onerror = (e) => { console.error('ws error: ' + e.error); };
}

export function handleSummary(data) {
  return { [__ENV.SUMMARY]: JSON.stringify(data) };
}
EOF

# artillery_script RATE DURATION PATH: CONNECTIONS virtual users over 1 s, each a fixed send loop.
artillery_script() {
    local rate=$1 dur=$2 path=$3
    local think count
    # In milliseconds with a unit: Artillery reads a bare number as seconds only if it is an integer.
    think=$(awk -v c="$CONNECTIONS" -v r="$rate" 'BEGIN { printf "%.3fms", 1000 * c / r }')
    count=$(( (rate * dur + CONNECTIONS - 1) / CONNECTIONS ))
    cat >"$path" <<EOF
config:
  target: "$WS_URL"
  phases:
    - duration: 1
      arrivalCount: $CONNECTIONS
  ws:
    perMessageDeflate: false
scenarios:
  - engine: ws
    flow:
      - loop:
          - send: "$BODY"
          - think: "$think"
        count: $count
EOF
}

# Artillery 2.0.21 sends an anonymous event to app.posthog.com even with
# ARTILLERY_DISABLE_TELEMETRY set; with no DNS here its retries keep the process alive ~12 s
# after the test. Loading its PostHog client fails instead (Artillery catches that and
# sends nothing): no wait, nothing off loopback.
cat >"$SRV_DIR/no-telemetry.js" <<'EOF'
const Module = require('module');
const load = Module._load;
Module._load = function (request) {
  if (request === 'posthog-node') throw new Error('telemetry blocked by bench/streams.sh');
  return load.apply(this, arguments);
};
EOF

load1=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
if awk -v l="$load1" 'BEGIN { exit !(l > 0.5) }'; then
    log "warning: 1-minute load average is $load1; other work on this machine will skew the numbers"
fi
HOSTDESC="$(uname -srm); $(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')"
log "echo server: Node $(node --version) ws $WS_VERSION on $WS_URL (pid $GRT_PID, CPU $SERVER_CPU); generators on CPU $GEN_CPU"
log "duration ${DURATION}s, rounds $ROUNDS, connections $CONNECTIONS, rates ${WANT_RATES[*]} msg/s, body '$BODY'"
log "open files: $(ulimit -Sn); idle phase: $([[ $MEMORY == 1 ]] && echo "$IDLE_BASE vs $IDLE_CONNECTIONS connections" || echo off)"
log "raw output: $RAW"
VERSIONS=()
for t in "${WANT_TOOLS[@]}"; do
    is_skipped "$t" && continue
    case $t in
        loadlab) v=$("$LOADLAB" --version 2>&1 | head -1 || true) ;;
        k6) v=$("$K6" version 2>&1 | head -1 || true) ;;
        artillery) v="artillery $ARTILLERY_VERSION (Node $(node --version))" ;;
        floor) v="bench/ws-floor (epoll lower bound)" ;;
    esac
    log "  $t: $v"
    VERSIONS+=("$v")
done
# The floor runs twice: reading replies at its next send (the least), and woken by each.
if has_tool floor && ! is_skipped floor && [[ $FLOOR_WOKEN == 1 ]]; then
    WANT_TOOLS+=(floor-woken)
fi
VERSIONS+=("server: Node $(node --version) ws $WS_VERSION")

# ---------------------------------------------------------------- runs
# tool_cmd TOOL RATE DURATION BASE -> fills CMD (and OWN: the tool's own result file)
CMD=() OWN=
tool_cmd() {
    local tool=$1 rate=$2 dur=$3 base=$4
    OWN=$base.result.json
    case $tool in
        loadlab)   CMD=("$LOADLAB" run "$WS_URL" --rate "$rate" -d "${dur}s" -c "$CONNECTIONS"
                        --body "$BODY" --cpus 1 --io "$LOADLAB_IO_MODE" --json "$OWN" -q) ;;
        k6)        CMD=(env URL="$WS_URL" BODY="$BODY" RATE="$rate" VUS="$CONNECTIONS" DURATION="$dur"
                        SUMMARY="$OWN" "$K6" run --quiet --no-usage-report --no-thresholds "$SRV_DIR/k6.js") ;;
        artillery) artillery_script "$rate" "$dur" "$base.yml"
                   CMD=(env NODE_OPTIONS="--require $SRV_DIR/no-telemetry.js"
                        "$ARTILLERY" run --quiet --output "$OWN" "$base.yml") ;;
        floor)     CMD=("$FLOOR" --addr "127.0.0.1:$PORT" --connections "$CONNECTIONS" --duration "$dur"
                        --rate "$rate" --body "$BODY") ;;
        floor-woken) CMD=("$FLOOR" --addr "127.0.0.1:$PORT" --connections "$CONNECTIONS" --duration "$dur"
                        --rate "$rate" --body "$BODY" --woken) ;;
    esac
}

server_alive() {
    kill -0 "$GRT_PID" 2>/dev/null && return 0
    local st=0
    wait "$GRT_PID" 2>/dev/null || st=$?
    die "the echo server (pid $GRT_PID) is gone, exit status $st; see $RAW/server.err"
}
# cpu_ticks PID: the user + system CPU time PID has used so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || true; }

# run_one PHASE ROUND TOOL RATE CONNECTIONS DURATION CMD... (the command is given)
run_cmd() {
    local phase=$1 round=$2 tool=$3 rate=$4 conns=$5 dur=$6 base=$7; shift 7
    local rc=0 before after ticks0 ticks1 t0 t1 host0 host1 peak=
    server_alive
    rm -f "$OWN" "$base.time"
    before=$($PY stats "$STATS_URL?reset-peak") || die "the echo server does not answer $STATS_URL"
    ticks0=$(cpu_ticks "$GRT_PID"); host0=$(host_ticks); t0=$(date +%s.%N)
    # Bounded: the tools stop at their duration; timeout is only a safety net. Background +
    # wait, so Ctrl-C reaches the INT trap at once.
    timeout -k 5 "$RUN_TIMEOUT" \
        taskset -c "$GEN_CPU" /usr/bin/time -f '%U %S %M' -o "$base.time" \
        "$@" >"$base.out" 2>"$base.err" </dev/null &
    RUN_PID=$!
    wait "$RUN_PID" || rc=$?
    RUN_PID=
    ticks1=$(cpu_ticks "$GRT_PID"); host1=$(host_ticks); t1=$(date +%s.%N)
    (( rc == 124 || rc == 137 )) && log "    $tool: timed out after ${RUN_TIMEOUT}s"
    sleep 0.5   # the server's close handlers
    after=$($PY stats "$STATS_URL") || die "the echo server does not answer $STATS_URL"
    peak=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["peak"])' "$after" 2>/dev/null || true)
    local extra=()
    [[ -n $host0 && -n $host1 ]] && extra+=(--host-ticks-before "$host0" --host-ticks-after "$host1")
    [[ -n $ticks0 && -n $ticks1 ]] &&
        extra+=(--server-cpu-s "$(awk -v a="$ticks0" -v b="$ticks1" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (b - a) / hz }')"
                --server-wall-s "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')")
    [[ -n $peak ]] && extra+=(--server-open-peak "$peak")
    $PY record --out "$RESULTS" --phase "$phase" --round "$round" --tool "$tool" \
        --stdout "$base.out" --time "$base.time" --json "$OWN" --rc "$rc" --rate "$rate" \
        --duration "$dur" --connections "$conns" --server-before "$before" --server-after "$after" \
        --cmd "$*" "${extra[@]}" || true
    sleep 1   # let sockets settle between runs
}

run_one() {   # run_one PHASE ROUND TOOL RATE DURATION
    local phase=$1 round=$2 tool=$3 rate=$4 dur=$5
    local base="$RAW/$phase-r$round-$tool"
    tool_cmd "$tool" "$rate" "$dur" "$base"
    run_cmd "$phase" "$round" "$tool" "$rate" "$CONNECTIONS" "$dur" "$base" "${CMD[@]}"
}

tools=()
for t in "${WANT_TOOLS[@]}"; do
    if is_skipped "$t"; then
        for rate in "${WANT_RATES[@]}"; do
            $PY skip --out "$RESULTS" --phase "rate-$rate" --tool "$t" --reason "$(skip_reason "$t")"
        done
        [[ $STARTUP == 1 ]] && $PY skip --out "$RESULTS" --phase startup --tool "$t" --reason "$(skip_reason "$t")"
    else
        tools+=("$t")
    fi
done
if ((${#tools[@]})); then
    # Start-up: one message per connection in a 1-second run, what each tool costs whatever it sends.
    if [[ $STARTUP == 1 ]]; then
        for ((r = 1; r <= STARTUP_ROUNDS; r++)); do
            log "== start-up (1 s, $CONNECTIONS messages), round $r/$STARTUP_ROUNDS"
            n=${#tools[@]}
            for ((i = 0; i < n; i++)); do
                run_one startup "$r" "${tools[$(((i + r - 1) % n))]}" "$CONNECTIONS" 1
            done
        done
    fi
    for rate in "${WANT_RATES[@]}"; do
        for ((r = 1; r <= ROUNDS; r++)); do
            log "== $rate msg/s, round $r/$ROUNDS"
            n=${#tools[@]}
            for ((i = 0; i < n; i++)); do
                run_one "rate-$rate" "$r" "${tools[$(((i + r - 1) % n))]}" "$rate" "$DURATION"   # rotate start each round
            done
        done
    done
fi

# Idle connections: loadlab holding IDLE_BASE, then IDLE_CONNECTIONS, pinging every 5 s.
if [[ $MEMORY == 1 ]]; then
    for ((r = 1; r <= IDLE_ROUNDS; r++)); do
        log "== idle connections, round $r/$IDLE_ROUNDS"
        for c in "$IDLE_BASE" "$IDLE_CONNECTIONS"; do
            base="$RAW/idle-$c-r$r-loadlab"
            OWN=$base.result.json
            run_cmd "idle-$c" "$r" loadlab 0 "$c" 3 "$base" \
                "$LOADLAB" run "$WS_URL" -c "$c" --ping-every 5s -d 3s --warmup 5s --cpus 1 --json "$OWN" -q
        done
    done
fi

log ""
$PY report "$RESULTS" --md "$RAW/summary.md" --gen-cpu "$GEN_CPU" --server-cpu "$SERVER_CPU" \
    --host "$HOSTDESC" --connections "$CONNECTIONS" --duration "$DURATION" --body "$BODY" \
    --versions "$(IFS=';'; echo "${VERSIONS[*]}" | sed 's/;/; /g')"
log ""
log "raw results: $RESULTS"
log "markdown:    $RAW/summary.md"

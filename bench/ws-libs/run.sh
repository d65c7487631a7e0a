#!/usr/bin/env bash
# WebSocket client libraries: CPU per message of tokio-tungstenite, fastwebsockets and a
# hand-written frame codec, on this machine, under one driver (bench/ws-libs/src/main.rs).
#
#   bench/ws-libs/run.sh                                # 3 rounds x 2 rates x 3 libs, 5 s each
#   ROUNDS=1 RATES=10000 DURATION=3 bench/ws-libs/run.sh  # quick look
#
# What it measures: the CPU time (user + sys, GNU time) the client process spends per
# reply, for the same work done three ways:
#   tungstenite     tokio-tungstenite 0.30 as loadlab's engine configures it (what loadlab uses)
#   fastwebsockets  fastwebsockets (crates.io), after an upgrade done by hand
#   raw             a minimal frame codec on tokio: what a library costs over the bare minimum
# Each run: CONNECTIONS connections, one current-thread tokio runtime, one task per
# connection, open loop at RATE messages/s in total ("hello" text frames, one in flight per
# connection) for DURATION s. The client is pinned to CLIENT_CPU, under GNU time (%U %S %M)
# and `timeout 30`; the server, Node's ws (Debian's node-ws, /usr/share/nodejs/ws) echoing
# every message, to SERVER_CPU. Traffic goes to 127.0.0.1 only.
#
# Runs are interleaved (round -> rate -> lib, the libs' order rotated each round) so that a
# slow stretch of the machine falls on every lib. The table gives, per lib and rate, the
# median over the rounds of replies, CPU µs per reply and its spread (min-max over rounds),
# peak RSS, and the ratio of the median CPU per reply to tungstenite's at the same rate.
# GNU time prints user and sys to 0.01 s each: a run's CPU is known to about ±0.01 s
# (±1 µs per message over 10,000 messages, ±0.2 µs over 50,000).
#
# "busy others" is CLIENT_CPU's busy time (/proc/stat) during the run less the client's own
# CPU: other work that ran on the client's core, a sign the run was disturbed.
#
# The 1-minute load average is printed first; above LOAD_MAX (1.5) the script waits up to
# LOAD_WAIT s (120) for it to drop and says so if it did not. Raw results go to
# bench/out/ws-libs-DATE.tsv.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROUNDS=${ROUNDS:-3}
RATES=${RATES:-"2000 10000"}
LIBS=${LIBS:-"tungstenite fastwebsockets raw"}
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-64}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
LOAD_MAX=${LOAD_MAX:-1.5}
LOAD_WAIT=${LOAD_WAIT:-120}
WS_MODULE=${WS_MODULE:-/usr/share/nodejs/ws}
OUT_DIR=${OUT_DIR:-$HERE/../out}

log() { printf '%s\n' "$*" >&2; }
die() { log "ws-libs: $*"; exit 1; }
load1() { cut -d' ' -f1 /proc/loadavg; }
# cpu_busy_ticks N: busy clock ticks of CPU N so far (user + nice + system + irq + softirq).
cpu_busy_ticks() { awk -v c="cpu$1" '$1 == c { print $2 + $3 + $4 + $7 + $8; exit }' /proc/stat; }

command -v node >/dev/null || die "node is missing (apt-get install nodejs node-ws)"
[[ -e $WS_MODULE ]] || die "$WS_MODULE is missing (apt-get install node-ws)"
[[ -x /usr/bin/time ]] || die "/usr/bin/time is missing (apt-get install time)"
TICK=$(getconf CLK_TCK)

# --- the machine's load ------------------------------------------------------------------
LOAD_NOTE=""
log "1-minute load average: $(load1)"
if awk -v l="$(load1)" -v m="$LOAD_MAX" 'BEGIN { exit !(l > m) }'; then
    log "above $LOAD_MAX: waiting up to ${LOAD_WAIT}s for it to drop"
    waited=0
    while ((waited < LOAD_WAIT)) && awk -v l="$(load1)" -v m="$LOAD_MAX" 'BEGIN { exit !(l > m) }'; do
        sleep 10
        waited=$((waited + 10))
    done
    if awk -v l="$(load1)" -v m="$LOAD_MAX" 'BEGIN { exit !(l > m) }'; then
        LOAD_NOTE="load average still $(load1) (> $LOAD_MAX) after waiting ${LOAD_WAIT}s: results taken on a busy machine"
    else
        LOAD_NOTE="load average dropped to $(load1) after ${waited}s"
    fi
    log "$LOAD_NOTE"
fi

# --- build -------------------------------------------------------------------------------
(cd "$HERE" && cargo build --release --quiet) || die "cargo build failed"
BIN=$HERE/target/release/ws-libs

# --- server ------------------------------------------------------------------------------
# A free port on 127.0.0.1, chosen by the kernel.
PORT=${PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}
SERVER_PID=""
cleanup() {
    if [[ -n $SERVER_PID ]]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -f "${TIME_FILE:-}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Echoes every message as it came (text as text, binary as binary); exits by itself after
# 10 minutes should the trap not run.
taskset -c "$SERVER_CPU" node -e "
const {WebSocketServer} = require('$WS_MODULE');
const w = new WebSocketServer({host: '127.0.0.1', port: $PORT});
w.on('connection', s => s.on('message', (m, b) => s.send(m, {binary: b})));
setTimeout(() => process.exit(0), 600000);" &
SERVER_PID=$!
for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null || die "the server exited"
    sleep 0.1
done
(exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null || die "the server is not listening on $PORT"

# --- runs --------------------------------------------------------------------------------
mkdir -p "$OUT_DIR"
RAW=$OUT_DIR/ws-libs-$(date +%Y%m%d-%H%M%S).tsv
TIME_FILE=$(mktemp)
printf 'round\trate\tlib\tsent\treplies\terrors\telapsed_s\tuser_s\tsys_s\tmaxrss_kb\tload1\tbusy_others_s\n' >"$RAW"
read -r -a libs <<<"$LIBS"
n=${#libs[@]}
log "server: Node ws on CPU $SERVER_CPU, port $PORT; client on CPU $CLIENT_CPU; $CONNECTIONS connections, ${DURATION}s a run"
for round in $(seq "$ROUNDS"); do
    for rate in $RATES; do
        for j in $(seq 0 $((n - 1))); do
            lib=${libs[$(((j + round - 1) % n))]}
            load=$(load1)
            busy0=$(cpu_busy_ticks "$CLIENT_CPU")
            json=$(timeout 30 taskset -c "$CLIENT_CPU" /usr/bin/time -f '%U %S %M' -o "$TIME_FILE" \
                "$BIN" --lib "$lib" --addr "127.0.0.1:$PORT" --connections "$CONNECTIONS" \
                --rate "$rate" --duration "$DURATION") || { log "round $round $lib @ $rate: failed or timed out"; continue; }
            busy1=$(cpu_busy_ticks "$CLIENT_CPU")
            read -r user sys rss <"$TIME_FILE"
            row=$(python3 -c '
import json, sys
j = json.loads(sys.argv[1])
print("\t".join(str(j[k]) for k in ("sent", "replies", "errors", "elapsed_s")))' "$json")
            others=$(awk -v b="$((busy1 - busy0))" -v t="$TICK" -v u="$user" -v s="$sys" \
                'BEGIN { o = b / t - u - s; printf "%.2f", (o < 0 ? 0 : o) }')
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$rate" "$lib" "$row" \
                "$user" "$sys" "$rss" "$load" "$others" >>"$RAW"
            log "round $round  rate $rate  $lib: $json  cpu ${user}u ${sys}s  rss ${rss}KB  load $load  busy others ${others}s"
        done
    done
done

# --- table -------------------------------------------------------------------------------
[[ -n $LOAD_NOTE ]] && echo "Note: $LOAD_NOTE"
echo "Load average at the end: $(load1). Raw results: $RAW"
python3 - "$RAW" <<'EOF'
import csv, statistics, sys

rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
groups = {}
for r in rows:
    groups.setdefault((int(r["rate"]), r["lib"]), []).append(r)

def cpu_us(r):
    replies = int(r["replies"])
    return (float(r["user_s"]) + float(r["sys_s"])) * 1e6 / replies if replies else float("nan")

med = {k: statistics.median(cpu_us(r) for r in v) for k, v in groups.items()}
print()
print("| lib | rate (msg/s) | runs | replies (median) | errors | CPU µs/msg (median) | spread (min–max) | peak RSS KiB (median) | vs tungstenite | busy others s (max) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
libs = list(dict.fromkeys(r["lib"] for r in rows))
for rate in sorted({k[0] for k in groups}):
    for lib in libs:
        v = groups.get((rate, lib))
        if not v:
            continue
        us = [cpu_us(r) for r in v]
        base = med.get((rate, "tungstenite"))
        ratio = f"{med[(rate, lib)] / base:.2f}" if base else "-"
        print(
            f"| {lib} | {rate} | {len(v)} | {statistics.median(int(r['replies']) for r in v):.0f}"
            f" | {sum(int(r['errors']) for r in v)} | {med[(rate, lib)]:.2f}"
            f" | {min(us):.2f}–{max(us):.2f} | {statistics.median(int(r['maxrss_kb']) for r in v):.0f}"
            f" | {ratio} | {max(float(r['busy_others_s']) for r in v):.2f} |"
        )
EOF

#!/usr/bin/env bash
# How fast loadlab reads traffic to replay (issue 62): a generated nginx `combined` access
# log of LINES lines, read and named by loadlab's reader (`crates/replay`, streamed from the
# file as a replay streams it) and by GoAccess (Debian's `goaccess`, the common log
# analyser; it also builds its report's panels, so it does more per line: read its figure
# as what reading a log costs in a tool users have, not as the same work), each pinned to
# GEN_CPU, ROUNDS interleaved rounds. Prints each one's lines per CPU-second (median), the
# ratio, loadlab's rate against the 100,000 req/s a replay may send, and its peak memory
# (flat whatever the log's size).
#
# Then the replay's fidelity (FIDELITY=1): a generated `$msec` log of 20 s with a burst
# (200 req/s, 2,000 req/s from its 8th second to its 12th) replayed by `loadlab run --replay`
# on GEN_CPU at x1 and x5 against nginx on SERVER_CPU, whose own access log is the truth:
# requests that arrived of those logged, and the share that arrived in another second than
# the log's (compressed), beside what loadlab says of itself. No peer replays an nginx log at
# its times (goreplay replays its own capture format; vegeta and k6 take no timing from a
# log), so these are loadlab's figures alone.
#
#   bench/replay.sh                      # 2,000,000 lines (about 270 MB), 3 rounds
#   LINES=500000 ROUNDS=1 bench/replay.sh
#   LOADLAB=/path/to/loadlab bench/replay.sh   # the fidelity of another build (not rebuilt)
#
# Environment:
#   LINES    lines of the generated log              (2000000)
#   ROUNDS   interleaved rounds                      (3)
#   GEN_CPU  the CPU both run on                     (1)
#   SERVER_CPU  nginx's CPU in the fidelity part     (0)
#   FIDELITY 0 = skip the replay's fidelity          (1)
#   INSTALL  0 = never install goaccess or GNU time  (1)
#   LOADLAB  the loadlab the fidelity part runs      (target/release/loadlab, built)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
BENCH_NAME=replay.sh
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
LINES=${LINES:-2000000}
ROUNDS=${ROUNDS:-3}
GEN_CPU=${GEN_CPU:-1}
SERVER_CPU=${SERVER_CPU:-0}
FIDELITY=${FIDELITY:-1}
INSTALL=${INSTALL:-1}
posint LINES "$LINES"
posint ROUNDS "$ROUNDS"

missing=()
command -v goaccess >/dev/null || missing+=(goaccess)
[[ $FIDELITY == 0 ]] || command -v nginx >/dev/null || missing+=(nginx)
[[ -x /usr/bin/time ]] || missing+=(time)
if ((${#missing[@]})); then
    [[ $INSTALL == 1 ]] || die "missing ${missing[*]} (INSTALL=0)"
    apt_install "${missing[@]}"
fi

log "building the reader (release)"
(cd "$ROOT" && cargo build -q --release -p loadlab-replay --example parse_rate)
READER="$ROOT/target/release/examples/parse_rate"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
LOG="$WORK/access.log"
log "writing $LINES lines of nginx's combined format"
python3 - "$LINES" "$LOG" <<'PY'
import sys
n, path = int(sys.argv[1]), sys.argv[2]
paths = ["/", "/users/42", "/items/123e4567-e89b-12d3-a456-426614174000", "/search?q=shoes&page=3",
         "/static/app.9f3a1c2b.js", "/api/cart"]
agents = ["Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
          "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15", "curl/8.5.0"]
with open(path, "w") as f:
    for i in range(n):
        s = i // 50  # 50 requests a second
        f.write('10.0.%d.%d - - [14/Nov/2023:%02d:%02d:%02d +0000] "GET %s HTTP/1.1" %d %d "https://shop.example/" "%s"\n'
                % (i % 7, i % 250, (s // 3600) % 24, (s // 60) % 60, s % 60, paths[i % len(paths)],
                   404 if i % 97 == 0 else 200, 100 + i % 900, agents[i % len(agents)]))
PY
SIZE=$(du -m "$LOG" | cut -f1)

# cpu_seconds FILE: user + sys of a GNU time -f '%U %S' line.
cpu_seconds() { awk 'END { print $1 + $2 }' "$1"; }

declare -a LL GA MEM
for ((r = 1; r <= ROUNDS; r++)); do
    order=(loadlab goaccess)
    ((r % 2 == 0)) && order=(goaccess loadlab)
    for tool in "${order[@]}"; do
        case $tool in
        loadlab)
            /usr/bin/time -f '%U %S' -o "$WORK/t" taskset -c "$GEN_CPU" "$READER" "$LOG" combined >"$WORK/out"
            grep -q "^loadlab $LINES requests (0 bad lines)" "$WORK/out" \
                || die "loadlab read other than $LINES requests: $(cat "$WORK/out")"
            LL+=("$(awk -v n="$LINES" -v c="$(cpu_seconds "$WORK/t")" 'BEGIN { printf "%.0f", n / c }')")
            MEM+=("$(sed -n 's/.*peak memory \([0-9]*\) KiB.*/\1/p' "$WORK/out")")
            ;;
        goaccess)
            /usr/bin/time -f '%U %S' -o "$WORK/t" taskset -c "$GEN_CPU" goaccess "$LOG" \
                --log-format=COMBINED --no-progress -o "$WORK/report.json" >/dev/null 2>"$WORK/ga.err" \
                || die "goaccess failed: $(tail -3 "$WORK/ga.err")"
            GA+=("$(awk -v n="$LINES" -v c="$(cpu_seconds "$WORK/t")" 'BEGIN { printf "%.0f", n / c }')")
            ;;
        esac
    done
    log "round $r: loadlab ${LL[-1]} lines/CPU-s, goaccess ${GA[-1]} lines/CPU-s"
done

median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ll=$(median "${LL[@]}")
ga=$(median "${GA[@]}")
mem=$(median "${MEM[@]}")
echo "== reading a ${SIZE} MB combined log of $LINES lines on CPU $GEN_CPU, median of $ROUNDS rounds"
printf '%-10s %14s\n' tool "lines/CPU-s"
printf '%-10s %14s\n' loadlab "$ll" goaccess "$ga"
awk -v l="$ll" -v g="$ga" -v m="$mem" 'BEGIN {
    printf "loadlab / goaccess: %.2fx (goaccess also builds its report)\n", l / g
    printf "loadlab against a 100,000 req/s replay: %.1fx ahead; peak memory %.1f MiB\n", l / 100000, m / 1024
}'

[[ $FIDELITY == 1 ]] || exit 0

# ---------------------------------------------------------------- the replay's fidelity
if [[ -z ${LOADLAB:-} ]]; then
    log "building loadlab (release)"
    (cd "$ROOT" && cargo build -q --release -p loadlab)
    LOADLAB="$ROOT/target/release/loadlab"
fi
server_dir replay
NGX_DIR=$SRV_DIR
trap 'bench_cleanup; rm -rf "$WORK"' EXIT
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$NGX_DIR/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $NGX_DIR/nginx.pid;
error_log $NGX_DIR/error.log warn;
events { worker_connections 4096; }
http {
    log_format lab '\$msec "\$request" \$status';
    client_body_temp_path $NGX_DIR/client_body;
    proxy_temp_path $NGX_DIR/proxy;
    fastcgi_temp_path $NGX_DIR/fastcgi;
    uwsgi_temp_path $NGX_DIR/uwsgi;
    scgi_temp_path $NGX_DIR/scgi;
    server {
        listen 127.0.0.1:$PORT;
        access_log $NGX_DIR/access.log lab;
        location / { return 200 "ok"; }
    }
}
CONF
taskset -c "$SERVER_CPU" nginx -p "$NGX_DIR" -e "$NGX_DIR/error.log" -c "$NGX_DIR/nginx.conf" >/dev/null 2>&1 &
NGX_PID=$!
for _ in $(seq 50); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 0.2)" 2>/dev/null && break
    sleep 0.1
done
SOURCE="$WORK/source.log"
python3 - "$SOURCE" <<'PY'
import sys
t0, lines = 1700000000.0, []
paths = ["/", "/users/42", "/items/7", "/search?q=shoes"]
for ms in range(20000):
    per_ms = 2 if 8000 <= ms < 12000 else (1 if ms % 5 == 0 else 0)
    for j in range(per_ms):
        lines.append('%.3f "GET %s HTTP/1.1" 200' % (t0 + ms / 1000, paths[len(lines) % 4]))
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
LOGGED=$(wc -l <"$SOURCE")
printf '\n== replaying a 20 s $msec log of %s requests (200 req/s, 2,000 req/s for 4 s) against nginx on CPU %s, loadlab on CPU %s\n' \
    "$LOGGED" "$SERVER_CPU" "$GEN_CPU"
printf '%-6s %8s %8s %15s %16s %11s %11s\n' speed logged arrived "moved (nginx)" "moved (loadlab)" "gap shape" "lag p99 ms"
for speed in 1 5; do
    : >"$NGX_DIR/access.log"
    kill -USR1 "$NGX_PID"
    sleep 0.3
    taskset -c "$GEN_CPU" "$LOADLAB" run "http://127.0.0.1:$PORT/" --replay "$SOURCE" \
        --log-format 'nginx:$msec "$request" $status' --speed "$speed" --quiet \
        --json "$WORK/replay-$speed.json" >/dev/null 2>"$WORK/replay-$speed.err" \
        || die "the replay failed: $(tail -3 "$WORK/replay-$speed.err")"
    sleep 0.5
    python3 - "$SOURCE" "$NGX_DIR/access.log" "$WORK/replay-$speed.json" "$speed" <<'PY'
import json, sys
def per_second(path, speed):
    ts = [float(l.split()[0]) for l in open(path) if l.strip()]
    first, v = min(ts), {}
    for t in ts:
        s = int((t - first) / speed)
        v[s] = v.get(s, 0) + 1
    return v, len(ts)
speed = float(sys.argv[4])
want, logged = per_second(sys.argv[1], speed)
got, arrived = per_second(sys.argv[2], 1.0)
moved = sum(abs(want.get(s, 0) - got.get(s, 0)) for s in set(want) | set(got)) / 2
r = json.load(open(sys.argv[3]))
f = r["traffic"]["replay"]
print("%-6s %8d %8d %14.2f%% %15.2f%% %10.2f%% %11.3f" % ("x%g" % speed, logged, arrived, 100 * moved / logged,
      100 * f["moved_share"], 100 * (f.get("gap_distance") or 0), r["schedule_lag_ms"]["p99"]))
PY
done

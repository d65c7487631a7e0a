#!/usr/bin/env bash
# The cost of requests that vary: loadlab's generator CPU per request, open loop, with one
# fixed request against the same run with templates (a URL fed from a CSV of IDs, ${seq},
# a ${uuid} header) and against a targets file of three named requests, side by side with
# oha's fixed URL and its --rand-regex-url (oha's way of varying requests) in one run.
#
#   bench/templates.sh                       # 20,000 req/s, 10 s x 3 rounds
#   RATE=50000 DURATION=5 ROUNDS=2 bench/templates.sh
#
# nginx (1 worker, `return 200`) is pinned to SERVER_CPU, every generator to GEN_CPU, each
# run under GNU time: CPU (user+sys) over the requests it sent gives µs of generator CPU
# per request. Runs are interleaved (round -> variant, start rotated each round); the
# report prints the median of the rounds and the ratios to loadlab's fixed request. The
# target (issue 28): templated ≤ 1.10 × fixed.
#
# Environment:
#   RATE        open-loop rate, requests/s                  (20000)
#   DURATION    seconds per run                             (10)
#   ROUNDS      interleaved rounds                          (3)
#   CONNECTIONS initial pool                                (64)
#   ROWS        rows of the data file                       (10000)
#   LOADLAB     loadlab binary                              (target/release/loadlab)
#   GEN_CPU / SERVER_CPU                                    (1 / 0)
#   INSTALL     0 = never install missing tools (nginx, GNU time); oha is used if present
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
RATE=${RATE:-20000}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-64}
ROWS=${ROWS:-10000}
LOADLAB=${LOADLAB:-$ROOT/target/release/loadlab}
GEN_CPU=${GEN_CPU:-1}
SERVER_CPU=${SERVER_CPU:-0}
INSTALL=${INSTALL:-1}
export PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin:/usr/sbin:/sbin"

BENCH_NAME=templates.sh
# shellcheck source=lib.sh
. "$HERE/lib.sh"

for v in RATE DURATION ROUNDS CONNECTIONS ROWS; do posint "$v" "${!v}"; done
[[ -x $LOADLAB ]] || die "no loadlab binary at $LOADLAB: cargo build --release (or LOADLAB=...)"
command -v python3 >/dev/null || die "python3 is required"
command -v taskset >/dev/null || die "taskset (util-linux) is required"
missing=()
command -v nginx >/dev/null || missing+=(nginx)
[[ -x /usr/bin/time ]] || missing+=(time)
apt_install "${missing[@]}"
(( GEN_CPU < $(nproc) && SERVER_CPU < $(nproc) )) || die "need CPUs $SERVER_CPU and $GEN_CPU"

server_dir templates
DIR=$SRV_DIR
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
BASE="http://127.0.0.1:$PORT"
cat >"$DIR/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $DIR/nginx.pid;
error_log $DIR/error.log warn;
worker_rlimit_nofile 65536;
events { worker_connections 16384; }
http {
    access_log off;
    client_body_temp_path $DIR/client_body;
    proxy_temp_path $DIR/proxy;
    fastcgi_temp_path $DIR/fastcgi;
    uwsgi_temp_path $DIR/uwsgi;
    scgi_temp_path $DIR/scgi;
    keepalive_requests 1000000;
    server { listen 127.0.0.1:$PORT; location / { return 200 "ok"; } }
}
EOF
taskset -c "$SERVER_CPU" nginx -p "$DIR" -e "$DIR/error.log" -c "$DIR/nginx.conf" >"$DIR/stdout" 2>&1 &
NGX_PID=$!
for _ in $(seq 100); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 0.2)" 2>/dev/null && break
    sleep 0.1
done

# The data: ROWS user IDs; the targets: three named requests, one templated.
python3 - "$DIR/ids.csv" "$ROWS" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("id,name\n")
    for i in range(int(sys.argv[2])):
        f.write(f"{100000 + i},user{i}\n")
PY
cat >"$DIR/targets.txt" <<EOF
# @name home
GET $BASE/

# @name item
GET $BASE/items/\${rand:1-100000}?s=\${seq}

# @name search
GET $BASE/search?q=\${pick:shoes,hats,socks}
X-Request-Id: \${uuid}
EOF

OUT=$HERE/out/templates-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
: >"$OUT/results.tsv"

# variant NAME: the command for it in CMD (false when the tool is missing).
variant() {
    local common=(--rate "$RATE" -d "${DURATION}s" -c "$CONNECTIONS" -t 1 -q --json "$OUT/$1.json")
    case $1 in
        fixed)     CMD=("$LOADLAB" run "$BASE/users/100042?s=1" "${common[@]}") ;;
        templated) CMD=("$LOADLAB" run "$BASE/users/\${id}?s=\${seq}" -H 'X-Request-Id: ${uuid}' --data "$DIR/ids.csv" "${common[@]}") ;;
        targets)   CMD=("$LOADLAB" run --targets "$DIR/targets.txt" "${common[@]}") ;;
        oha-fixed)
            command -v oha >/dev/null || return 1
            CMD=(oha --no-tui --output-format json -c "$CONNECTIONS" -z "${DURATION}s" -q "$RATE" --latency-correction "$BASE/users/100042?s=1") ;;
        oha-regex)
            command -v oha >/dev/null || return 1
            CMD=(oha --no-tui --output-format json -c "$CONNECTIONS" -z "${DURATION}s" -q "$RATE" --latency-correction --rand-regex-url "$BASE/users/1[0-9]{5}\\?s=[0-9]{1,6}") ;;
    esac
}

VARIANTS=(fixed templated targets oha-fixed oha-regex)
log "nginx on $BASE (CPU $SERVER_CPU), generators on CPU $GEN_CPU; $RATE req/s, ${DURATION}s x $ROUNDS rounds"
for ((r = 1; r <= ROUNDS; r++)); do
    n=${#VARIANTS[@]}
    for ((i = 0; i < n; i++)); do
        v=${VARIANTS[$(((i + r - 1) % n))]}
        variant "$v" || { log "  $v: oha not installed, skipped"; continue; }
        log "== round $r: $v"
        timeout -k 5 "$((DURATION + 30))" taskset -c "$GEN_CPU" /usr/bin/time -f '%U %S' -o "$OUT/$v.time" \
            "${CMD[@]}" >"$OUT/$v.out" 2>"$OUT/$v.err" </dev/null || true
        python3 - "$v" "$r" "$OUT" >>"$OUT/results.tsv" <<'PY'
import json, sys
v, r, out = sys.argv[1], sys.argv[2], sys.argv[3]
user, sys_ = (float(x) for x in open(f"{out}/{v}.time").read().split()[-2:])
if v.startswith("oha"):
    j = json.load(open(f"{out}/{v}.out"))
    s = j["summary"]
    sent = round(s["requestsPerSec"] * s["total"])
    lag = None
else:
    j = json.load(open(f"{out}/{v}.json"))
    sent = j["requests"] + j["errors_total"] - j["errors"]["http_4xx"] - j["errors"]["http_5xx"]
    lag = j["schedule_lag_ms"]["p99"]
us = 1e6 * (user + sys_) / max(sent, 1)
print(f"{v}\t{r}\t{sent}\t{us:.2f}\t{'' if lag is None else f'{lag:.3f}'}")
PY
        sleep 1
    done
done

python3 - "$OUT/results.tsv" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
by = {}
for v, r, sent, us, lag in rows:
    by.setdefault(v, []).append((float(us), int(sent), float(lag) if lag else None))
med = {v: statistics.median(x[0] for x in xs) for v, xs in by.items()}
print(f"{'variant':<12} {'µs CPU/request':>15} {'requests':>10} {'lag p99 ms':>11}  (median of rounds)")
for v in ["fixed", "templated", "targets", "oha-fixed", "oha-regex"]:
    if v not in by:
        continue
    xs = by[v]
    lag = [x[2] for x in xs if x[2] is not None]
    print(f"{v:<12} {med[v]:>15.2f} {statistics.median(x[1] for x in xs):>10.0f} "
          f"{(f'{statistics.median(lag):.3f}' if lag else '-'):>11}")
if "fixed" in med:
    for v in ["templated", "targets"]:
        if v in med:
            ratio = med[v] / med["fixed"]
            verdict = "PASS" if ratio <= 1.10 else "FAIL"
            print(f"[RATIO] loadlab {v} / fixed: {ratio:.3f}x generator CPU per request (target <= 1.10: {verdict})")
if "oha-fixed" in med and "oha-regex" in med:
    print(f"[RATIO] oha regex URL / fixed: {med['oha-regex'] / med['oha-fixed']:.3f}x")
if "templated" in med and "oha-regex" in med:
    print(f"[RATIO] loadlab templated vs oha regex URL: {med['oha-regex'] / med['templated']:.2f}x (oha's CPU per request over loadlab's)")
PY
log "raw output: $OUT"

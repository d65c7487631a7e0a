#!/usr/bin/env bash
# Peer benchmark: loadlab vs wrk, ab, h2load, oha against a local nginx.
#
# bench/floor runs beside them: not a peer but the least CPU any HTTP/1.1 client spends per
# request on this machine (io_uring, nothing recorded; built here with cargo). Its ratio to
# a peer is the most a target ratio can reach here; the report says which targets are
# beyond it. In open loop it runs a second time with --stamp ("floor-stamped"): each
# response read with its kernel receive timestamp, the least a client that reads its
# responses late spends if it measures latency at all. Both open-loop rows read through one
# standing multishot receive per connection (--multishot), as loadlab does.
#
#   bench/peers.sh                          # full run (10 s x 3 rounds x tools x modes)
#   DURATION=3 ROUNDS=1 TOOLS=wrk,ab bench/peers.sh
#
# nginx (1 worker, fixed 2-byte body "ok", loopback only) is pinned to SERVER_CPU;
# every generator is pinned to GEN_CPU and run under GNU time, so generator CPU
# (user+sys) and peak RSS are measured the same way for every tool. Runs are
# interleaved (round -> tool, tool order rotated each round) and the report
# shows the median of the rounds. Raw results: bench/out/peers-<stamp>.jsonl.
#
# Environment:
#   DURATION     seconds per run                         (10)
#   ROUNDS       interleaved rounds                      (3)
#   CONNECTIONS  connections per closed-loop run         (64)
#   RATES        open-loop rates, requests/s, comma list (20000,50000,100000)
#   RATE         one open-loop rate (overrides RATES; kept for older scripts)
#   LOADLAB      loadlab binary                          (target/release/loadlab)
#   IO           loadlab's --io: auto, epoll or uring    (auto)
#   TOOLS        comma list from loadlab,wrk,ab,h2load,oha,floor (all)
#   FLOOR        bench/floor binary (built: bench/floor/target/release/loadlab-floor)
#   MODES        comma list from keepalive,close,openloop (all)
#   GEN_CPU / SERVER_CPU   CPUs for generator / nginx    (1 / 0)
#   MEMCHECK     1 = extra short loadlab run to check RSS does not grow with duration (1)
#   INSTALL      0 = never install missing tools, just skip them (1)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
PY="python3 $HERE/peers.py"

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-64}
RATES=${RATE:-${RATES:-20000,50000,100000}}
LOADLAB=${LOADLAB:-$ROOT/target/release/loadlab}
IO=${IO:-auto}
case $IO in auto|epoll|uring) ;; *) echo "peers.sh: IO must be auto, epoll or uring, not '$IO'" >&2; exit 2 ;; esac
TOOLS=${TOOLS:-loadlab,wrk,ab,h2load,oha,floor}
FLOOR=${FLOOR:-}
MODES=${MODES:-keepalive,close,openloop}
GEN_CPU=${GEN_CPU:-1}
SERVER_CPU=${SERVER_CPU:-0}
MEMCHECK=${MEMCHECK:-1}
INSTALL=${INSTALL:-1}
# Hard wall-clock bound per run (the tools all stop themselves at DURATION).
RUN_TIMEOUT=$((DURATION + 30))

export PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin:/usr/sbin:/sbin"

BENCH_NAME=peers.sh
# shellcheck source=lib.sh
. "$HERE/lib.sh"

[[ $DURATION =~ ^[0-9]+$ && $DURATION -gt 0 ]] || die "DURATION must be a positive integer (seconds)"
[[ $ROUNDS =~ ^[0-9]+$ && $ROUNDS -gt 0 ]] || die "ROUNDS must be a positive integer"
[[ $CONNECTIONS =~ ^[0-9]+$ && $CONNECTIONS -gt 0 ]] || die "CONNECTIONS must be a positive integer"
IFS=, read -r -a WANT_RATES <<<"$RATES"
for r in "${WANT_RATES[@]}"; do
    [[ $r =~ ^[0-9]+$ && $r -gt 0 ]] || die "RATES must be positive integers (requests/s), got '$r'"
done

IFS=, read -r -a WANT_TOOLS <<<"$TOOLS"
IFS=, read -r -a WANT_MODES <<<"$MODES"
for t in "${WANT_TOOLS[@]}"; do
    case $t in loadlab|wrk|ab|h2load|oha|floor) ;; *) die "unknown tool '$t' in TOOLS" ;; esac
done
for m in "${WANT_MODES[@]}"; do
    case $m in keepalive|close|openloop) ;; *) die "unknown mode '$m' in MODES" ;; esac
done
has_tool() { in_list "$1" "${WANT_TOOLS[@]}"; }
has_mode() { in_list "$1" "${WANT_MODES[@]}"; }

command -v python3 >/dev/null || die "python3 is required"
command -v taskset >/dev/null || die "taskset (util-linux) is required"
ncpu=$(nproc)
(( GEN_CPU < ncpu && SERVER_CPU < ncpu )) || die "need CPUs $SERVER_CPU and $GEN_CPU; this machine has $ncpu"
[[ $GEN_CPU != "$SERVER_CPU" ]] || log "warning: GEN_CPU == SERVER_CPU; generator and nginx will share a core"

if has_tool loadlab; then
    if [[ ! -x $LOADLAB ]]; then
        log "peers.sh: loadlab binary not found at $LOADLAB"
        log "  build it first:   cargo build --release"
        log "  or point LOADLAB=/path/to/loadlab, or leave it out: TOOLS=wrk,ab,h2load,oha"
        exit 1
    fi
fi

# ---------------------------------------------------------------- installs
declare -A PKG=([wrk]=wrk [ab]=apache2-utils [h2load]=nghttp2-client)
missing_pkgs=()
command -v nginx >/dev/null || missing_pkgs+=(nginx)
[[ -x /usr/bin/time ]] || missing_pkgs+=(time)     # GNU time, not the shell keyword
for t in wrk ab h2load; do
    has_tool "$t" && ! command -v "$t" >/dev/null && missing_pkgs+=("${PKG[$t]}")
done
apt_install "${missing_pkgs[@]}"
command -v nginx >/dev/null || die "nginx not available"
[[ -x /usr/bin/time ]] || die "GNU time (/usr/bin/time) not available"

if has_tool oha && ! command -v oha >/dev/null; then
    if [[ $INSTALL == 1 ]] && command -v cargo >/dev/null; then
        log "installing oha from crates.io (cargo install oha --locked; slow, low priority)..."
        nice -n 19 cargo install oha --locked -j 1 || log "warning: cargo install oha failed"
    fi
fi

SKIP_TOOL=()   # tools not installed -> reported as skipped
if has_tool floor; then
    if [[ -z $FLOOR ]]; then
        FLOOR=$HERE/floor/target/release/loadlab-floor
        log "building bench/floor (cargo build --release --locked)..."
        cargo build -q --release --locked --manifest-path "$HERE/floor/Cargo.toml" \
            || log "warning: bench/floor did not build"
    fi
    # A refused connection on loopback port 1: exits 0 unless io_uring itself is refused.
    if [[ ! -x $FLOOR ]]; then
        log "warning: no bench/floor binary at $FLOOR, skipping it"; SKIP_TOOL+=(floor)
    elif ! why=$("$FLOOR" close --addr 127.0.0.1:1 --connections 1 --duration 0.01 2>&1 >/dev/null); then
        log "warning: bench/floor cannot run here ($why), skipping it"; SKIP_TOOL+=(floor)
    fi
fi
for t in "${WANT_TOOLS[@]}"; do
    [[ $t == loadlab || $t == floor ]] && continue
    command -v "$t" >/dev/null || { log "warning: $t not available, skipping it"; SKIP_TOOL+=("$t"); }
done
is_skipped() { in_list "$1" "${SKIP_TOOL[@]:-}"; }

# oha's JSON flag changed over versions (-j/--json vs --output-format json).
OHA_JSON=()
if has_tool oha && ! is_skipped oha; then
    if oha --help 2>&1 | grep -q -- '--output-format'; then OHA_JSON=(--output-format json)
    else OHA_JSON=(-j); fi
fi

# ---------------------------------------------------------------- nginx
STAMP=$(date +%Y%m%d-%H%M%S)
OUTDIR=$HERE/out
RAW=$OUTDIR/peers-$STAMP
RESULTS=$OUTDIR/peers-$STAMP.jsonl
mkdir -p "$RAW"
: >"$RESULTS"

server_dir peers
NGX_DIR=$SRV_DIR

PORT=$($PY freeport)
URL="http://127.0.0.1:$PORT/"
cat >"$NGX_DIR/nginx.conf" <<EOF
worker_processes 1;
daemon off;
master_process on;
pid $NGX_DIR/nginx.pid;
error_log $NGX_DIR/error.log warn;
worker_rlimit_nofile 65536;
events { worker_connections 16384; }
http {
    access_log off;
    client_body_temp_path $NGX_DIR/client_body;
    proxy_temp_path $NGX_DIR/proxy;
    fastcgi_temp_path $NGX_DIR/fastcgi;
    uwsgi_temp_path $NGX_DIR/uwsgi;
    scgi_temp_path $NGX_DIR/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    default_type text/plain;
    server {
        listen 127.0.0.1:$PORT;
        location / { return 200 "ok"; }
    }
}
EOF
taskset -c "$SERVER_CPU" nginx -p "$NGX_DIR" -e "$NGX_DIR/error.log" -c "$NGX_DIR/nginx.conf" \
    >"$NGX_DIR/stdout" 2>&1 &
NGX_PID=$!
if ! $PY check "$URL" --timeout 10; then
    cat "$NGX_DIR/error.log" "$NGX_DIR/stdout" >&2 2>/dev/null || true
    die "nginx did not come up on $URL"
fi

load1=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
if awk -v l="$load1" 'BEGIN { exit !(l > 0.5) }'; then
    log "warning: 1-minute load average is $load1; other work on this machine will skew the numbers"
fi
HOSTDESC="$(uname -srm); $(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')"
log "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///') on $URL (pid $NGX_PID, CPU $SERVER_CPU); generators on CPU $GEN_CPU"
log "duration ${DURATION}s, rounds $ROUNDS, connections $CONNECTIONS, open-loop rates ${WANT_RATES[*]} req/s"
log "tools: ${WANT_TOOLS[*]}; modes: ${WANT_MODES[*]}; loadlab --io $IO"
log "raw output: $RAW"
for t in "${WANT_TOOLS[@]}"; do
    case $t in
        loadlab) v=$("$LOADLAB" --version 2>&1 | head -1 || true) ;;
        wrk) v=$(wrk --version 2>&1 | head -1 | awk '{print $2}' || true) ;;
        ab) v=$(ab -V 2>&1 | head -1 || true) ;;
        h2load) v=$(h2load --version 2>&1 | head -1 || true) ;;
        oha) v=$(oha --version 2>&1 | head -1 || true) ;;
        floor) v="bench/floor (io_uring lower bound)" ;;
    esac
    is_skipped "$t" || log "  $t: $v"
done

# ---------------------------------------------------------------- the machine
# What one timer wake-up costs the generator's CPU here (open loop pays one per release).
WAKE_US=
WAKE_HOST=()   # the host's steal during that measurement, as the runs record theirs
if has_tool floor && ! is_skipped floor; then
    wake_host0=$(host_ticks)
    wake_json=$(timeout -k 5 30 taskset -c "$GEN_CPU" "$FLOOR" wakes --duration 2 --gap-us 200 2>&1) || true
    wake_host1=$(host_ticks)
    [[ -n $wake_host0 && -n $wake_host1 ]] &&
        WAKE_HOST=(--wake-host-ticks-before "$wake_host0" --wake-host-ticks-after "$wake_host1")
    WAKE_US=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["cpu_us_per_wake"])' "$wake_json" 2>/dev/null) \
        || { log "warning: bench/floor wakes: $wake_json"; WAKE_US=; }
    if [[ -n $WAKE_US ]]; then log "a timer wake-up every 200 µs costs $WAKE_US µs of CPU on CPU $GEN_CPU"; fi
fi

# ---------------------------------------------------------------- runs
# tool_cmd MODE TOOL DUR JSONPATH -> fills CMD array; returns 1 if TOOL cannot do MODE
CMD=()
SKIP_REASON=
tool_cmd() {
    local mode=$1 tool=$2 dur=$3 json=$4 c=$CONNECTIONS
    CMD=(); SKIP_REASON=
    case $mode/$tool in
        keepalive/loadlab) CMD=("$LOADLAB" run "$URL" --connections "$c" --threads 1 --duration "${dur}s" --keep-alive on --io "$IO" --json "$json") ;;
        close/loadlab)     CMD=("$LOADLAB" run "$URL" --connections "$c" --threads 1 --duration "${dur}s" --keep-alive off --io "$IO" --json "$json") ;;
        openloop/loadlab)  CMD=("$LOADLAB" run "$URL" --connections "$c" --threads 1 --duration "${dur}s" --rate "$RATE" --io "$IO" --json "$json") ;;
        keepalive/wrk)     CMD=(wrk -t1 -c"$c" -d"${dur}s" "$URL") ;;
        close/wrk)         CMD=(wrk -t1 -c"$c" -d"${dur}s" -H "Connection: close" "$URL") ;;
        # ab: -t implies -n 50000, so -n must come after -t.
        keepalive/ab)      CMD=(ab -q -k -c "$c" -t "$dur" -n 50000000 "$URL") ;;
        close/ab)          CMD=(ab -q -c "$c" -t "$dur" -n 50000000 "$URL") ;;
        keepalive/h2load)  CMD=(h2load --h1 -t1 -c "$c" -D "$dur" "$URL") ;;
        keepalive/oha)     CMD=(oha --no-tui "${OHA_JSON[@]}" -c "$c" -z "${dur}s" "$URL") ;;
        close/oha)         CMD=(oha --no-tui "${OHA_JSON[@]}" -c "$c" -z "${dur}s" --disable-keepalive "$URL") ;;
        openloop/oha)      CMD=(oha --no-tui "${OHA_JSON[@]}" -c "$c" -z "${dur}s" -q "$RATE" --latency-correction "$URL") ;;
        keepalive/floor)   CMD=("$FLOOR" keepalive --addr "127.0.0.1:$PORT" --connections "$c" --duration "$dur") ;;
        close/floor)       CMD=("$FLOOR" close --addr "127.0.0.1:$PORT" --connections "$c" --duration "$dur") ;;
        # The release gap of loadlab's dispatcher (MIN_WAKE_GAP_NS in crates/engine/src/worker.rs).
        # One standing multishot receive per connection, as loadlab's io_uring transport reads
        # (cheaper in open loop than a receive per response: docs/src/benchmarks.md).
        openloop/floor)    CMD=("$FLOOR" open --addr "127.0.0.1:$PORT" --connections "$c" --duration "$dur" --rate "$RATE" --gap-us 200 --multishot) ;;
        openloop/floor-stamped) CMD=("$FLOOR" open --addr "127.0.0.1:$PORT" --connections "$c" --duration "$dur" --rate "$RATE" --gap-us 200 --multishot --stamp) ;;
        close/h2load)      SKIP_REASON="h2load has no keep-alive-off mode"; return 1 ;;
        openloop/wrk)      SKIP_REASON="closed-loop only, wrk2 not packaged in Debian"; return 1 ;;
        openloop/ab|openloop/h2load) SKIP_REASON="no fixed-rate mode"; return 1 ;;
        *) SKIP_REASON="unsupported"; return 1 ;;
    esac
}

# ngx_worker: the pid of nginx's one worker process (empty if there is none).
ngx_worker() { pgrep -P "$NGX_PID" 2>/dev/null | head -1 || true; }
# cpu_ticks PID: the user + system CPU time PID has used so far, in clock ticks.
cpu_ticks() { [[ -z $1 ]] || awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || true; }

# run_one PHASE ROUND MODE TOOL DUR
run_one() {
    local phase=$1 round=$2 mode=$3 tool=$4 dur=$5
    local base="$RAW/$phase-r$round-$tool"
    local json="$base.loadlab.json"
    tool_cmd "$mode" "$tool" "$dur" "$json" || return 0
    rm -f "$json" "$base.time"
    local rc=0
    kill -0 "$NGX_PID" 2>/dev/null || die "nginx (pid $NGX_PID) is gone; see $NGX_DIR/error.log"
    # How busy the server was during the run (is a rate beyond what nginx serves here?).
    local worker ticks0 ticks1 t0 t1 host0 host1
    worker=$(ngx_worker)
    ticks0=$(cpu_ticks "$worker")
    host0=$(host_ticks)   # and how much of the machine a VM's host took meanwhile
    t0=$(date +%s.%N)
    # Bounded: tools stop at DURATION; timeout is only a safety net. Run in the
    # background and `wait`, so Ctrl-C reaches the INT trap immediately (timeout
    # puts the tool in its own process group, out of reach of the terminal's ^C).
    timeout -k 5 "$((dur + 30))" \
        taskset -c "$GEN_CPU" /usr/bin/time -f '%U %S %M' -o "$base.time" \
        "${CMD[@]}" >"$base.out" 2>"$base.err" </dev/null &
    RUN_PID=$!
    wait "$RUN_PID" || rc=$?
    RUN_PID=
    ticks1=$(cpu_ticks "$worker")
    host1=$(host_ticks)
    t1=$(date +%s.%N)
    local extra=()
    [[ -n $host0 && -n $host1 ]] && extra+=(--host-ticks-before "$host0" --host-ticks-after "$host1")
    # The server's CPU over the tool's whole run (a run behind its schedule outlasts DURATION).
    [[ -n $ticks0 && -n $ticks1 ]] &&
        extra+=(--server-cpu-s "$(awk -v a="$ticks0" -v b="$ticks1" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (b - a) / hz }')"
                --server-wall-s "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')")
    [[ $tool == loadlab ]] && extra+=(--json "$json")
    [[ $mode == openloop ]] && extra+=(--rate "$RATE")
    $PY record --out "$RESULTS" --phase "$phase" --round "$round" --tool "$tool" \
        --stdout "$base.out" --time "$base.time" --rc "$rc" --duration "$dur" \
        --connections "$CONNECTIONS" --cmd "${CMD[*]}" "${extra[@]}" || true
    sleep 1   # let sockets / TIME_WAIT churn settle between runs
}

# Phases: the two closed-loop modes, then open loop once per rate ("openloop-20000", ...).
PHASE_LIST=()
for mode in keepalive close; do
    has_mode "$mode" && PHASE_LIST+=("$mode:$mode:")
done
if has_mode openloop; then
    for r in "${WANT_RATES[@]}"; do PHASE_LIST+=("openloop-$r:openloop:$r"); done
fi
for entry in "${PHASE_LIST[@]}"; do
    IFS=: read -r phase mode RATE <<<"$entry"
    tools=()
    for t in "${WANT_TOOLS[@]}"; do
        if is_skipped "$t"; then
            $PY skip --out "$RESULTS" --phase "$phase" --tool "$t" --reason "not installed"
        elif ! tool_cmd "$mode" "$t" "$DURATION" /dev/null; then
            $PY skip --out "$RESULTS" --phase "$phase" --tool "$t" --reason "$SKIP_REASON"
        else
            tools+=("$t")
        fi
    done
    if [[ $mode == openloop ]] && in_list floor "${tools[@]:-}"; then
        tools+=(floor-stamped)
    fi
    ((${#tools[@]})) || continue
    for ((r = 1; r <= ROUNDS; r++)); do
        log "== $phase, round $r/$ROUNDS"
        n=${#tools[@]}
        for ((i = 0; i < n; i++)); do
            t=${tools[$(((i + r - 1) % n))]}   # rotate start each round
            run_one "$phase" "$r" "$mode" "$t" "$DURATION"
        done
    done
done

# RSS must not grow with duration: one short loadlab keep-alive run to compare against.
if [[ $MEMCHECK == 1 ]] && has_tool loadlab && has_mode keepalive; then
    short=$(( DURATION / 3 )); (( short >= 2 )) || short=2
    if (( short < DURATION )); then
        log "== memcheck: loadlab keep-alive for ${short}s (vs ${DURATION}s above)"
        run_one memcheck 1 keepalive loadlab "$short"
    fi
fi

log ""
$PY report "$RESULTS" --md "$RAW/summary.md" \
    --gen-cpu "$GEN_CPU" --server-cpu "$SERVER_CPU" --host "$HOSTDESC" ${WAKE_US:+--wake-us "$WAKE_US"} "${WAKE_HOST[@]}"
log ""
log "raw results: $RESULTS"
log "markdown:    $RAW/summary.md"

#!/usr/bin/env bash
# Protocol peer benchmark: loadlab gRPC vs ghz (unary calls, bidirectional and client
# streams), loadlab HTTP/2 vs h2load.
#
#   bench/grpc.sh                              # full run (all suites x 3 rounds)
#   ROUNDS=1 TOOLS=ghz,h2load bench/grpc.sh    # peers only
#   SUITES=grpc GRPC_REQUESTS=20000 bench/grpc.sh
#   SUITES=stream bench/grpc.sh                # bidirectional streams only
#   SUITES=upload bench/grpc.sh                # client streams only
#
# Targets (requests per generator CPU-second, median of rounds):
#   gRPC    loadlab >= 2.0x ghz     (helloworld.Greeter/SayHello on greeter-tokio, 1 thread)
#   HTTP/2  loadlab >= 1.1x h2load  (h2c prior knowledge, nginx 1 worker, 2-byte body "ok")
#   stream  loadlab >= 2.0x ghz     (messages per generator CPU-second on a bidirectional
#                                    method: ticker.Ticker/Chat, an echo, on STREAM_SERVER;
#                                    ghz streams STREAM_PER_CALL messages per call with
#                                    --stream-call-count, loadlab holds the streams and sends
#                                    each stream's next message when its reply came)
#   upload  loadlab >= 2.0x ghz     (messages per generator CPU-second on a client-streaming
#                                    method: ticker.Ticker/Upload, the notes counted into one
#                                    receipt a call, on STREAM_SERVER; both tools send
#                                    STREAM_PER_CALL messages per call, ghz with
#                                    --stream-call-count, loadlab with --messages-per-call)
#
# The stream suite's server is the fastest echo here (the greeters' h2 echo on the minimal
# runtime, one core), so that neither generator waits on it: a server slower than the
# generator leaves loadlab's closed loop waking for a message or two at a time, and its
# CPU per message then measures the server's pace as much as loadlab. Measured here on
# 2026-12-06 (3 rounds each): 3.9x on greeter-minimal-epoll (ghz at 100 % of its core,
# loadlab 76 %), 1.4x on tonic's echo (STREAM_SERVER=greeter-tokio or hello: tonic writes
# each message on its own, loadlab reads them one by one, 2.5 us of system time each).
#
# Both suites are closed loop with a fixed request count, so every run stops by
# itself (each is also wrapped in `timeout`). Within a suite both tools use the
# same connections and the same total concurrency (h2load: -c CONNECTIONS,
# -m CONCURRENCY/CONNECTIONS streams per connection). The server is pinned to
# SERVER_CPU; every generator is pinned to GEN_CPU and run under GNU time, so
# generator CPU (user+sys) and peak RSS are measured the same way for every tool.
# req per CPU-s = successful responses / (user+sys). Runs are interleaved (round
# -> tool, order rotated each round); the report shows medians over the rounds.
# ghz uses its default summary output (-O json would add every call's details,
# costing it CPU and memory), --cpus 1, and no call templating.
# Raw results: bench/out/grpc-<stamp>.jsonl (tool output in bench/out/grpc-<stamp>/).
#
# Environment:
#   ROUNDS           interleaved rounds                                  (3)
#   SUITES           comma list from grpc,http2,stream,upload            (all)
#   TOOLS            comma list from loadlab,ghz,h2load                  (all)
#   CONNECTIONS      connections per run, both suites                    (8)
#   CONCURRENCY      requests in flight per run, both suites             (64)
#   GRPC_CONNECTIONS / GRPC_CONCURRENCY / H2_CONNECTIONS / H2_CONCURRENCY  per-suite overrides
#   GRPC_REQUESTS    calls per gRPC run                                  (100000)
#   H2_REQUESTS      requests per HTTP/2 run                             (200000)
#   STREAM_MESSAGES  messages per bidirectional streaming run            (200000)
#   UPLOAD_MESSAGES  messages per client-streaming run (a call's messages go back to
#                    back, so loadlab sends them ten times faster: more, for a second) (2000000)
#   STREAM_PER_CALL  messages per streaming call (ghz; loadlab's upload) (50)
#   STREAM_SERVER    what `loadlab serve` runs for the stream suite
#                    (greeter-minimal-epoll; greeter-tokio and hello serve Chat too)
#   RUN_TIMEOUT      wall-clock bound per run, seconds                   (300)
#   LOADLAB          loadlab binary                         (target/release/loadlab)
#   GREETER          greeter binary                   (target/release/greeter-tokio)
#   GHZ_VERSION      ghz version go-installed when missing               (v0.120.0)
#   GEN_CPU / SERVER_CPU   CPUs for generator / server                   (1 / 0)
#   INSTALL          0 = never install/build missing tools, just skip them (1)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
PY="python3 $HERE/grpc.py"

ROUNDS=${ROUNDS:-3}
SUITES=${SUITES:-grpc,http2,stream,upload}
TOOLS=${TOOLS:-loadlab,ghz,h2load}
CONNECTIONS=${CONNECTIONS:-8}
CONCURRENCY=${CONCURRENCY:-64}
GRPC_CONNECTIONS=${GRPC_CONNECTIONS:-$CONNECTIONS}
GRPC_CONCURRENCY=${GRPC_CONCURRENCY:-$CONCURRENCY}
H2_CONNECTIONS=${H2_CONNECTIONS:-$CONNECTIONS}
H2_CONCURRENCY=${H2_CONCURRENCY:-$CONCURRENCY}
GRPC_REQUESTS=${GRPC_REQUESTS:-100000}
H2_REQUESTS=${H2_REQUESTS:-200000}
STREAM_MESSAGES=${STREAM_MESSAGES:-200000}
UPLOAD_MESSAGES=${UPLOAD_MESSAGES:-2000000}
STREAM_PER_CALL=${STREAM_PER_CALL:-50}
STREAM_SERVER=${STREAM_SERVER:-greeter-minimal-epoll}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
LOADLAB=${LOADLAB:-$ROOT/target/release/loadlab}
GREETER=${GREETER:-$ROOT/target/release/greeter-tokio}
GHZ_VERSION=${GHZ_VERSION:-v0.120.0}
GEN_CPU=${GEN_CPU:-1}
SERVER_CPU=${SERVER_CPU:-0}
INSTALL=${INSTALL:-1}
PROTO=$ROOT/proto/helloworld.proto
CALL=helloworld.Greeter/SayHello
DATA='{"name":"loadlab"}'
TICKER_PROTO=$ROOT/proto/ticker.proto
CHAT=ticker.Ticker/Chat
UPLOAD=ticker.Ticker/Upload
CHAT_DATA='{"seq":1,"text":"loadlab"}'

GOBIN_DIR=$(go env GOBIN 2>/dev/null || true)
[[ -n $GOBIN_DIR ]] || GOBIN_DIR=$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin
export PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin:/usr/local/go/bin:$GOBIN_DIR:$HOME/go/bin:/usr/sbin:/sbin"

BENCH_NAME=grpc.sh
# shellcheck source=lib.sh
. "$HERE/lib.sh"

posint ROUNDS "$ROUNDS"; posint RUN_TIMEOUT "$RUN_TIMEOUT"
posint GRPC_CONNECTIONS "$GRPC_CONNECTIONS"; posint GRPC_CONCURRENCY "$GRPC_CONCURRENCY"
posint H2_CONNECTIONS "$H2_CONNECTIONS"; posint H2_CONCURRENCY "$H2_CONCURRENCY"
posint GRPC_REQUESTS "$GRPC_REQUESTS"; posint H2_REQUESTS "$H2_REQUESTS"
posint STREAM_MESSAGES "$STREAM_MESSAGES"; posint STREAM_PER_CALL "$STREAM_PER_CALL"
(( STREAM_MESSAGES % STREAM_PER_CALL == 0 )) \
    || die "STREAM_MESSAGES ($STREAM_MESSAGES) must be a multiple of STREAM_PER_CALL ($STREAM_PER_CALL) (ghz counts calls)"
posint UPLOAD_MESSAGES "$UPLOAD_MESSAGES"
(( UPLOAD_MESSAGES % STREAM_PER_CALL == 0 )) \
    || die "UPLOAD_MESSAGES ($UPLOAD_MESSAGES) must be a multiple of STREAM_PER_CALL ($STREAM_PER_CALL) (ghz counts calls)"
(( GRPC_CONCURRENCY >= GRPC_CONNECTIONS )) || die "GRPC_CONCURRENCY must be >= GRPC_CONNECTIONS"
(( H2_CONCURRENCY % H2_CONNECTIONS == 0 )) \
    || die "H2_CONCURRENCY ($H2_CONCURRENCY) must be a multiple of H2_CONNECTIONS ($H2_CONNECTIONS) (h2load -m is per connection)"
H2_STREAMS=$((H2_CONCURRENCY / H2_CONNECTIONS))

IFS=, read -r -a WANT_TOOLS <<<"$TOOLS"
IFS=, read -r -a WANT_SUITES <<<"$SUITES"
for t in "${WANT_TOOLS[@]}"; do
    case $t in loadlab|ghz|h2load) ;; *) die "unknown tool '$t' in TOOLS" ;; esac
done
for s in "${WANT_SUITES[@]}"; do
    case $s in grpc|http2|stream|upload) ;; *) die "unknown suite '$s' in SUITES" ;; esac
done
has_tool() { in_list "$1" "${WANT_TOOLS[@]}"; }
has_suite() { in_list "$1" "${WANT_SUITES[@]}"; }

command -v python3 >/dev/null || die "python3 is required"
command -v taskset >/dev/null || die "taskset (util-linux) is required"
ncpu=$(nproc)
(( GEN_CPU < ncpu && SERVER_CPU < ncpu )) || die "need CPUs $SERVER_CPU and $GEN_CPU; this machine has $ncpu"
[[ $GEN_CPU != "$SERVER_CPU" ]] || log "warning: GEN_CPU == SERVER_CPU; generator and server will share a core"

if has_tool loadlab; then
    if [[ ! -x $LOADLAB ]]; then
        log "grpc.sh: loadlab binary not found at $LOADLAB"
        log "  build it first:   cargo build --release"
        log "  or point LOADLAB=/path/to/loadlab, or leave it out: TOOLS=ghz,h2load"
        exit 1
    fi
    if has_suite grpc && ! "$LOADLAB" grpc --help >/dev/null 2>&1; then
        die "$LOADLAB has no 'grpc' command (rebuild it, or TOOLS=ghz,h2load)"
    fi
    if has_suite http2 && ! "$LOADLAB" run --help 2>&1 | grep -q -- --http2; then
        die "$LOADLAB run has no --http2 flag (rebuild it, or TOOLS=ghz,h2load)"
    fi
fi

# ---------------------------------------------------------------- installs
missing_pkgs=()
[[ -x /usr/bin/time ]] || missing_pkgs+=(time)     # GNU time, not the shell keyword
if has_suite http2; then
    command -v nginx >/dev/null || missing_pkgs+=(nginx)
    command -v h2load >/dev/null || missing_pkgs+=(nghttp2-client)   # also the h2c readiness probe
fi
apt_install "${missing_pkgs[@]}"
[[ -x /usr/bin/time ]] || die "GNU time (/usr/bin/time) not available"
if has_suite http2; then
    command -v nginx >/dev/null || die "nginx not available"
    command -v h2load >/dev/null || die "h2load not available (needed to probe the h2c server)"
fi

if { has_suite grpc || has_suite stream || has_suite upload; } && has_tool ghz && ! command -v ghz >/dev/null; then
    if [[ $INSTALL == 1 ]] && command -v go >/dev/null; then
        log "installing ghz $GHZ_VERSION (go install, low priority; a few minutes)..."
        nice -n 19 go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION" || log "warning: go install ghz failed"
        hash -r
    else
        log "warning: ghz missing and no Go toolchain (or INSTALL=0)"
    fi
fi

# The greeter: greeter-tokio if built, else `loadlab serve greeter-tokio`, else build greeter-tokio.
GREETER_CMD=()
if has_suite grpc; then
    if [[ ! -x $GREETER ]] && [[ -x $LOADLAB ]] && "$LOADLAB" serve greeter-tokio --help >/dev/null 2>&1; then
        GREETER_CMD=("$LOADLAB" serve greeter-tokio)
    else
        if [[ ! -x $GREETER ]]; then
            [[ $INSTALL == 1 ]] || die "greeter not found at $GREETER (INSTALL=0)"
            log "building greeter-tokio (cargo build --release -p loadlab-greeters --bin greeter-tokio, low priority)..."
            (cd "$ROOT" && nice -n 19 cargo build --release -p loadlab-greeters --bin greeter-tokio) \
                || die "building greeter-tokio failed"
        fi
        GREETER_CMD=("$GREETER")
    fi
fi

SKIP_TOOL=()   # tools not installed -> reported as skipped
for t in ghz h2load; do
    has_tool "$t" || continue
    command -v "$t" >/dev/null || { log "warning: $t not available, skipping it"; SKIP_TOOL+=("$t"); }
done
is_skipped() { in_list "$1" "${SKIP_TOOL[@]:-}"; }

# ---------------------------------------------------------------- servers
STAMP=$(date +%Y%m%d-%H%M%S)
OUTDIR=$HERE/out
RAW=$OUTDIR/grpc-$STAMP
RESULTS=$OUTDIR/grpc-$STAMP.jsonl
mkdir -p "$RAW"
: >"$RESULTS"

server_dir grpcbench

# await_ready PID BASE MESSAGE: waits (15 s at most) for the server PID to print its ready
# line to BASE.out; if it does not (or exits), shows BASE.out and BASE.err and dies.
await_ready() {
    for _ in $(seq 150); do
        grep -q '^listening on' "$2.out" 2>/dev/null && return 0
        kill -0 "$1" 2>/dev/null || break
        sleep 0.1
    done
    grep -q '^listening on' "$2.out" 2>/dev/null && return 0
    cat "$2.out" "$2.err" >&2 2>/dev/null || true
    die "$3"
}

GRPC_ADDR=
if has_suite grpc; then
    GPORT=$($PY freeport)
    GRPC_ADDR=127.0.0.1:$GPORT
    taskset -c "$SERVER_CPU" "${GREETER_CMD[@]}" --bind "$GRPC_ADDR" --threads 1 \
        >"$RAW/greeter.out" 2>"$RAW/greeter.err" </dev/null &
    GRT_PID=$!
    await_ready "$GRT_PID" "$RAW/greeter" "greeter (${GREETER_CMD[*]}) did not come up on $GRPC_ADDR"
fi

STREAM_ADDR=
if has_suite stream || has_suite upload; then
    [[ -x $LOADLAB ]] || die "the stream suite's server is \`loadlab serve $STREAM_SERVER\`: build loadlab first (cargo build --release)"
    SPORT=$($PY freeport)
    STREAM_ADDR=127.0.0.1:$SPORT
    threads=(--threads 1)
    [[ $STREAM_SERVER == hello ]] && threads=()
    taskset -c "$SERVER_CPU" "$LOADLAB" serve "$STREAM_SERVER" --bind "$STREAM_ADDR" "${threads[@]}" \
        >"$RAW/hello.out" 2>"$RAW/hello.err" </dev/null &
    HELLO_PID=$!
    await_ready "$HELLO_PID" "$RAW/hello" "loadlab serve $STREAM_SERVER did not come up on $STREAM_ADDR"
fi

H2_URL=
if has_suite http2; then
    HPORT=$($PY freeport)
    H2_URL="http://127.0.0.1:$HPORT/"
    # h2c with prior knowledge on a plain listener: `http2 on;` since nginx 1.25.1,
    # `listen ... http2` before (there the port speaks only HTTP/2).
    ngx_ver=$(nginx -v 2>&1 | sed -n 's/.*nginx\/\([0-9.]*\).*/\1/p')
    if printf '1.25.1\n%s\n' "$ngx_ver" | sort -V -C; then   # 1.25.1 <= ngx_ver
        H2_LISTEN="listen 127.0.0.1:$HPORT; http2 on;"
    else
        H2_LISTEN="listen 127.0.0.1:$HPORT http2;"
    fi
    cat >"$SRV_DIR/nginx.conf" <<EOF
worker_processes 1;
daemon off;
master_process on;
pid $SRV_DIR/nginx.pid;
error_log $RAW/nginx-error.log warn;
worker_rlimit_nofile 65536;
events { worker_connections 16384; }
http {
    access_log off;
    client_body_temp_path $SRV_DIR/client_body;
    proxy_temp_path $SRV_DIR/proxy;
    fastcgi_temp_path $SRV_DIR/fastcgi;
    uwsgi_temp_path $SRV_DIR/uwsgi;
    scgi_temp_path $SRV_DIR/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    default_type text/plain;
    server {
        $H2_LISTEN
        location / { return 200 "ok"; }
    }
}
EOF
    taskset -c "$SERVER_CPU" nginx -p "$SRV_DIR" -e "$RAW/nginx-error.log" -c "$SRV_DIR/nginx.conf" \
        >"$SRV_DIR/nginx.stdout" 2>&1 &
    NGX_PID=$!
    up=0
    for _ in $(seq 50); do
        kill -0 "$NGX_PID" 2>/dev/null || break
        if timeout 5 h2load -n1 -c1 "$H2_URL" 2>/dev/null | grep -q '1 succeeded'; then up=1; break; fi
        sleep 0.2
    done
    if [[ $up != 1 ]]; then
        cat "$RAW/nginx-error.log" "$SRV_DIR/nginx.stdout" >&2 2>/dev/null || true
        die "nginx did not answer h2c on $H2_URL"
    fi
fi

load1=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
if awk -v l="$load1" 'BEGIN { exit !(l > 0.5) }'; then
    log "warning: 1-minute load average is $load1; other work on this machine will skew the numbers"
fi
HOSTDESC="$(uname -srm); $(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')"
has_suite grpc && log "greeter ${GREETER_CMD[*]} on $GRPC_ADDR (pid $GRT_PID, 1 thread, CPU $SERVER_CPU)"
has_suite http2 && log "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///') h2c on $H2_URL (pid $NGX_PID, CPU $SERVER_CPU)"
{ has_suite stream || has_suite upload; } && log "loadlab serve $STREAM_SERVER (ticker.Ticker/Chat, an echo; ticker.Ticker/Upload) on $STREAM_ADDR (pid $HELLO_PID, CPU $SERVER_CPU)"
log "generators on CPU $GEN_CPU; rounds $ROUNDS"
has_suite grpc && log "gRPC:   $GRPC_REQUESTS calls, $GRPC_CONNECTIONS connections, $GRPC_CONCURRENCY concurrent"
has_suite http2 && log "HTTP/2: $H2_REQUESTS requests, $H2_CONNECTIONS connections x $H2_STREAMS streams = $H2_CONCURRENCY concurrent"
has_suite stream && log "stream: $STREAM_MESSAGES messages, $GRPC_CONNECTIONS connections, $GRPC_CONCURRENCY streams (ghz: $STREAM_PER_CALL messages per call)"
has_suite upload && log "upload: $UPLOAD_MESSAGES messages, $GRPC_CONNECTIONS connections, $GRPC_CONCURRENCY streams, $STREAM_PER_CALL messages per call"
log "tools: ${WANT_TOOLS[*]}; suites: ${WANT_SUITES[*]}"
log "raw output: $RAW"
for t in "${WANT_TOOLS[@]}"; do
    is_skipped "$t" && continue
    case $t in
        loadlab) v=$("$LOADLAB" --version 2>&1 | head -1 || true) ;;
        ghz) v="$(command -v ghz) $(ghz --version 2>&1 | head -1 || true)" ;;
        h2load) v=$(h2load --version 2>&1 | head -1 || true) ;;
    esac
    log "  $t: $v"
done

# ---------------------------------------------------------------- runs
# tool_cmd SUITE TOOL JSONPATH -> fills CMD, REQ, CONN, CONC; returns 1 if TOOL is not in SUITE
CMD=()
tool_cmd() {
    local suite=$1 tool=$2 json=$3
    CMD=()
    case $suite in
        grpc)  REQ=$GRPC_REQUESTS; CONN=$GRPC_CONNECTIONS; CONC=$GRPC_CONCURRENCY ;;
        http2) REQ=$H2_REQUESTS; CONN=$H2_CONNECTIONS; CONC=$H2_CONCURRENCY ;;
        stream) REQ=$STREAM_MESSAGES; CONN=$GRPC_CONNECTIONS; CONC=$GRPC_CONCURRENCY ;;
        upload) REQ=$UPLOAD_MESSAGES; CONN=$GRPC_CONNECTIONS; CONC=$GRPC_CONCURRENCY ;;
    esac
    case $suite/$tool in
        grpc/loadlab) CMD=("$LOADLAB" grpc "$GRPC_ADDR" --proto "$PROTO" --call "$CALL" -D "$DATA"
                           --connections "$CONN" --concurrency "$CONC" --requests "$REQ"
                           --threads 1 --json "$json" -q) ;;
        grpc/ghz)     CMD=(ghz --insecure --proto "$PROTO" --call "$CALL" -d "$DATA"
                           --connections "$CONN" -c "$CONC" -n "$REQ" --cpus 1
                           --disable-template-functions --disable-template-data -O summary "$GRPC_ADDR") ;;
        http2/loadlab) CMD=("$LOADLAB" run --http2 "$H2_URL" --connections "$CONN" --concurrency "$CONC"
                            --requests "$REQ" --threads 1 --json "$json" -q) ;;
        http2/h2load)  CMD=(h2load -t1 -c "$CONN" -m "$H2_STREAMS" -n "$REQ" "$H2_URL") ;;
        stream/loadlab) CMD=("$LOADLAB" grpc "$STREAM_ADDR" --proto "$TICKER_PROTO" --call "$CHAT"
                             -D "$CHAT_DATA" --connections "$CONN" --concurrency "$CONC"
                             --requests "$REQ" --threads 1 --json "$json" -q) ;;
        stream/ghz)   CMD=(ghz --insecure --proto "$TICKER_PROTO" --call "$CHAT" -d "$CHAT_DATA"
                           --connections "$CONN" -c "$CONC" -n $((REQ / STREAM_PER_CALL))
                           --stream-call-count "$STREAM_PER_CALL" --cpus 1
                           --disable-template-functions --disable-template-data -O summary "$STREAM_ADDR") ;;
        upload/loadlab) CMD=("$LOADLAB" grpc "$STREAM_ADDR" --proto "$TICKER_PROTO" --call "$UPLOAD"
                             -D "$CHAT_DATA" --messages-per-call "$STREAM_PER_CALL"
                             --connections "$CONN" --concurrency "$CONC"
                             --requests "$REQ" --threads 1 --json "$json" -q) ;;
        upload/ghz)   CMD=(ghz --insecure --proto "$TICKER_PROTO" --call "$UPLOAD" -d "$CHAT_DATA"
                           --connections "$CONN" -c "$CONC" -n $((REQ / STREAM_PER_CALL))
                           --stream-call-count "$STREAM_PER_CALL" --cpus 1
                           --disable-template-functions --disable-template-data -O summary "$STREAM_ADDR") ;;
        *) return 1 ;;
    esac
}

server_alive() {   # server_alive PID NAME LOG: die with its exit status if it is gone
    kill -0 "$1" 2>/dev/null && return 0
    local st=0
    wait "$1" 2>/dev/null || st=$?
    (( st > 128 )) && st="$st (signal $((st - 128)))"
    die "$2 (pid $1) is gone, exit status $st; see $3"
}

# run_one SUITE ROUND TOOL
run_one() {
    local suite=$1 round=$2 tool=$3
    local base="$RAW/$suite-r$round-$tool"
    local json="$base.loadlab.json"
    tool_cmd "$suite" "$tool" "$json" || return 0
    rm -f "$json" "$base.time"
    case $suite in
        grpc) server_alive "$GRT_PID" greeter "$RAW/greeter.err" ;;
        http2) server_alive "$NGX_PID" nginx "$RAW/nginx-error.log" ;;
        stream|upload) server_alive "$HELLO_PID" "loadlab serve $STREAM_SERVER" "$RAW/hello.err" ;;
    esac
    local rc=0 host0 host1
    host0=$(host_ticks)   # how much of the machine a VM's host takes during the run
    # Fixed request count: the tools stop by themselves; timeout is a safety net.
    # Background + wait so Ctrl-C reaches the INT trap at once.
    timeout -k 5 "$RUN_TIMEOUT" \
        taskset -c "$GEN_CPU" /usr/bin/time -f '%U %S %M' -o "$base.time" \
        "${CMD[@]}" >"$base.out" 2>"$base.err" </dev/null &
    RUN_PID=$!
    wait "$RUN_PID" || rc=$?
    RUN_PID=
    host1=$(host_ticks)
    (( rc == 124 || rc == 137 )) && log "    $tool: timed out after ${RUN_TIMEOUT}s"
    local extra=()
    [[ -n $host0 && -n $host1 ]] && extra+=(--host-ticks-before "$host0" --host-ticks-after "$host1")
    [[ $tool == loadlab ]] && extra+=(--json "$json")
    # ghz counts calls: each of a streaming run's carried STREAM_PER_CALL messages (each way
    # on Chat; on Upload the client's, answered by one receipt).
    [[ $suite/$tool == stream/ghz || $suite/$tool == upload/ghz ]] && extra+=(--per-call "$STREAM_PER_CALL")
    $PY record --out "$RESULTS" --suite "$suite" --round "$round" --tool "$tool" \
        --stdout "$base.out" --time "$base.time" --rc "$rc" --requested "$REQ" \
        --connections "$CONN" --concurrency "$CONC" --cmd "${CMD[*]}" "${extra[@]}" || true
    sleep 1   # let sockets settle between runs
}

for suite in grpc http2 stream upload; do
    has_suite "$suite" || continue
    tools=()
    for t in "${WANT_TOOLS[@]}"; do
        tool_cmd "$suite" "$t" /dev/null || continue
        if is_skipped "$t"; then
            $PY skip --out "$RESULTS" --suite "$suite" --tool "$t" --reason "not installed"
        else
            tools+=("$t")
        fi
    done
    ((${#tools[@]})) || continue
    for ((r = 1; r <= ROUNDS; r++)); do
        log "== $suite, round $r/$ROUNDS"
        n=${#tools[@]}
        for ((i = 0; i < n; i++)); do
            run_one "$suite" "$r" "${tools[$(((i + r - 1) % n))]}"   # rotate start each round
        done
    done
done

log ""
$PY report "$RESULTS" --md "$RAW/summary.md" --gen-cpu "$GEN_CPU" --server-cpu "$SERVER_CPU" --host "$HOSTDESC"
log ""
log "raw results: $RESULTS"
log "markdown:    $RAW/summary.md"

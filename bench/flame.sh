#!/usr/bin/env bash
# A flame graph of loadlab's HTTP/2 run as bench/grpc.sh runs it (the http2 suite:
# nginx h2c, one worker, a 2-byte body "ok"; 8 connections, 64 in flight, one thread),
# recorded with `perf record --call-graph dwarf` and drawn with inferno.
#
#   bench/flame.sh                               # -> docs/src/img/http2-flame.svg
#   OUT=/tmp/h2.svg H2_REQUESTS=50000 bench/flame.sh
#   TOOL=h2load bench/flame.sh                   # the same load from h2load, for comparison
#
# The release profile already carries line tables (Cargo.toml: debug = "line-tables-only"),
# so the profiled binary is the one benchmarked; it is built into its own target dir
# (FLAME_TARGET) unless LOADLAB points at one. Load goes to 127.0.0.1 only; the run stops
# by itself after H2_REQUESTS and is wrapped in `timeout` as well.
#
# Environment:
#   TOOL          loadlab or h2load                                   (loadlab)
#   OUT           the SVG                         (docs/src/img/http2-flame.svg; h2load: bench/out/h2load-flame.svg)
#   LOADLAB       loadlab binary (skips the build)
#   FLAME_TARGET  cargo target dir for the build                      (target/flame)
#   H2_REQUESTS / H2_CONNECTIONS / H2_CONCURRENCY               (200000 / 8 / 64, as grpc.sh)
#   FREQ          perf sampling frequency, Hz                         (1999)
#   RUN_TIMEOUT   wall-clock bound of the profiled run, seconds       (120)
#   GEN_CPU / SERVER_CPU                                             (1 / 0)
#   INSTALL       0 = never install inferno                          (1)
#   KEEP_FOLDED   set: also keep the folded stacks beside the SVG (OUT with .folded)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
TOOL=${TOOL:-loadlab}
H2_REQUESTS=${H2_REQUESTS:-200000}
H2_CONNECTIONS=${H2_CONNECTIONS:-8}
H2_CONCURRENCY=${H2_CONCURRENCY:-64}
FREQ=${FREQ:-1999}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
GEN_CPU=${GEN_CPU:-1}
SERVER_CPU=${SERVER_CPU:-0}
INSTALL=${INSTALL:-1}
FLAME_TARGET=${FLAME_TARGET:-$ROOT/target/flame}
if [[ $TOOL == loadlab ]]; then
    OUT=${OUT:-$ROOT/docs/src/img/http2-flame.svg}
else
    OUT=${OUT:-$HERE/out/h2load-flame.svg}
fi
export PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin:/usr/sbin:/sbin"

BENCH_NAME=flame.sh
# shellcheck source=lib.sh
. "$HERE/lib.sh"
posint H2_REQUESTS "$H2_REQUESTS"; posint H2_CONNECTIONS "$H2_CONNECTIONS"
posint H2_CONCURRENCY "$H2_CONCURRENCY"; posint FREQ "$FREQ"; posint RUN_TIMEOUT "$RUN_TIMEOUT"
case $TOOL in loadlab|h2load) ;; *) die "TOOL must be loadlab or h2load" ;; esac
(( H2_CONCURRENCY % H2_CONNECTIONS == 0 )) || die "H2_CONCURRENCY must be a multiple of H2_CONNECTIONS"

command -v perf >/dev/null || die "perf is required (Debian: linux-perf)"
command -v nginx >/dev/null || die "nginx is required"
command -v h2load >/dev/null || die "h2load is required (nghttp2-client; also the readiness probe)"
if ! command -v inferno-flamegraph >/dev/null; then
    [[ $INSTALL == 1 ]] || die "inferno missing (cargo install inferno) and INSTALL=0"
    log "installing inferno (cargo install inferno, low priority)..."
    nice -n 19 cargo install --locked inferno >&2 || die "cargo install inferno failed"
fi

if [[ $TOOL == loadlab && -z ${LOADLAB:-} ]]; then
    log "building loadlab (release, line tables) into $FLAME_TARGET..."
    (cd "$ROOT" && CARGO_TARGET_DIR=$FLAME_TARGET CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
        nice -n 10 cargo build --release -p loadlab --bin loadlab) || die "build failed"
    LOADLAB=$FLAME_TARGET/release/loadlab
fi

server_dir flame
PORT=$(python3 "$HERE/grpc.py" freeport)
URL="http://127.0.0.1:$PORT/"
ngx_ver=$(nginx -v 2>&1 | sed -n 's/.*nginx\/\([0-9.]*\).*/\1/p')
if printf '1.25.1\n%s\n' "$ngx_ver" | sort -V -C; then
    LISTEN="listen 127.0.0.1:$PORT; http2 on;"
else
    LISTEN="listen 127.0.0.1:$PORT http2;"
fi
cat >"$SRV_DIR/nginx.conf" <<EOF
worker_processes 1;
daemon off;
master_process on;
pid $SRV_DIR/nginx.pid;
error_log $SRV_DIR/nginx-error.log warn;
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
        $LISTEN
        location / { return 200 "ok"; }
    }
}
EOF
taskset -c "$SERVER_CPU" nginx -p "$SRV_DIR" -e "$SRV_DIR/nginx-error.log" -c "$SRV_DIR/nginx.conf" \
    >"$SRV_DIR/nginx.stdout" 2>&1 &
NGX_PID=$!
up=0
for _ in $(seq 50); do
    kill -0 "$NGX_PID" 2>/dev/null || break
    if timeout 5 h2load -n1 -c1 "$URL" 2>/dev/null | grep -q '1 succeeded'; then up=1; break; fi
    sleep 0.2
done
[[ $up == 1 ]] || { cat "$SRV_DIR/nginx-error.log" >&2 2>/dev/null || true; die "nginx did not answer h2c on $URL"; }

case $TOOL in
    loadlab) CMD=("$LOADLAB" run --http2 "$URL" --connections "$H2_CONNECTIONS"
                  --concurrency "$H2_CONCURRENCY" --requests "$H2_REQUESTS" --threads 1 -q) ;;
    h2load)  CMD=(h2load -t1 -c "$H2_CONNECTIONS" -m $((H2_CONCURRENCY / H2_CONNECTIONS))
                  -n "$H2_REQUESTS" "$URL") ;;
esac
DATA=$SRV_DIR/perf.data
log "profiling: ${CMD[*]}"
timeout -k 5 "$RUN_TIMEOUT" taskset -c "$GEN_CPU" \
    perf record -q -F "$FREQ" --call-graph dwarf,16384 -o "$DATA" -- "${CMD[@]}" >"$SRV_DIR/tool.out" 2>&1 \
    || { cat "$SRV_DIR/tool.out" >&2; die "profiled run failed"; }
grep -E 'succeeded|responses|requests' "$SRV_DIR/tool.out" | head -5 >&2 || true

mkdir -p "$(dirname "$OUT")"
perf script -i "$DATA" 2>/dev/null | inferno-collapse-perf >"$SRV_DIR/folded"
inferno-flamegraph --title "$TOOL HTTP/2 (h2c to nginx): $H2_CONNECTIONS connections, $H2_CONCURRENCY in flight, $H2_REQUESTS requests" <"$SRV_DIR/folded" >"$OUT"
FOLDED_OUT=${OUT%.svg}.folded
[[ -n ${KEEP_FOLDED:-} ]] && cp "$SRV_DIR/folded" "$FOLDED_OUT" && log "folded stacks: $FOLDED_OUT"
log "flame graph: $OUT ($(du -h "$OUT" | cut -f1))"

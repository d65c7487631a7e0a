#!/usr/bin/env bash
# Graceful closes: loadlab and h2load against a stock nginx that closes every keep-alive
# connection after 1,000 requests (its default keepalive_requests), over HTTP/1.1 with
# pipelining and over HTTP/2 with TLS. A request the server never processed (behind a
# `Connection: close` response, above a GOAWAY) is not a server error; the table shows how
# each tool counts it.
#
#   bench/graceful.sh                  # 50,000 requests per run
#   REQUESTS=20000 bench/graceful.sh
#   LOADLAB_BEFORE=/tmp/old-loadlab bench/graceful.sh   # also an older loadlab, for comparison
#
# Environment:
#   REQUESTS        requests per run                                  (50000)
#   LOADLAB         loadlab binary                                    (target/release/loadlab)
#   LOADLAB_BEFORE  another loadlab binary to run the same way         (none)
#   GEN_CPU / SERVER_CPU   CPUs for the generators / nginx            (1 / 0)
#   INSTALL         0 = never install missing tools                   (1)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
REQUESTS=${REQUESTS:-50000}
LOADLAB=${LOADLAB:-$ROOT/target/release/loadlab}
LOADLAB_BEFORE=${LOADLAB_BEFORE:-}
GEN_CPU=${GEN_CPU:-1}
SERVER_CPU=${SERVER_CPU:-0}
export PATH="$PATH:/usr/sbin:/sbin"

BENCH_NAME=graceful.sh
# shellcheck source=lib.sh
. "$HERE/lib.sh"

posint REQUESTS "$REQUESTS"
[[ -x $LOADLAB ]] || die "no loadlab at $LOADLAB: run 'cargo build --release' first"
[[ -z $LOADLAB_BEFORE || -x $LOADLAB_BEFORE ]] || die "LOADLAB_BEFORE=$LOADLAB_BEFORE is not executable"
missing=()
command -v nginx >/dev/null || missing+=(nginx)
command -v h2load >/dev/null || missing+=(nghttp2-client)
command -v openssl >/dev/null || missing+=(openssl)
command -v python3 >/dev/null || missing+=(python3)
apt_install "${missing[@]}"

server_dir graceful
DIR=$SRV_DIR

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
HTTP_PORT=$(free_port)
HTTPS_PORT=$(free_port)
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -days 1 \
    -keyout "$DIR/key.pem" -out "$DIR/cert.pem" 2>/dev/null
# keepalive_requests is left at nginx's default (1000): that is the point.
cat >"$DIR/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $DIR/nginx.pid;
error_log $DIR/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $DIR/client_body;
    proxy_temp_path $DIR/proxy;
    fastcgi_temp_path $DIR/fastcgi;
    uwsgi_temp_path $DIR/uwsgi;
    scgi_temp_path $DIR/scgi;
    server { listen 127.0.0.1:$HTTP_PORT; location / { return 200 "ok"; } }
    server {
        listen 127.0.0.1:$HTTPS_PORT ssl http2;
        ssl_certificate $DIR/cert.pem;
        ssl_certificate_key $DIR/key.pem;
        location / { return 200 "ok"; }
    }
}
EOF
taskset -c "$SERVER_CPU" nginx -p "$DIR" -e "$DIR/error.log" -c "$DIR/nginx.conf" >"$DIR/stdout" 2>&1 &
NGX_PID=$!
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$HTTPS_PORT") 2>/dev/null && break
    sleep 0.1
done
(exec 3<>"/dev/tcp/127.0.0.1/$HTTPS_PORT") 2>/dev/null || { cat "$DIR/error.log" >&2; die "nginx did not start"; }
log "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///') with default keepalive_requests on :$HTTP_PORT (HTTP/1.1) and :$HTTPS_PORT (HTTP/2, TLS); $REQUESTS requests per run"

ROWS=()
# loadlab_row LABEL BINARY PROTOCOL ARGS... : one loadlab run, one table row.
loadlab_row() {
    local label=$1 bin=$2 proto=$3 json="$DIR/run.json"
    shift 3
    rm -f "$json"
    timeout 300 taskset -c "$GEN_CPU" "$bin" run "$@" -q --json "$json" >"$DIR/run.out" 2>&1 || true
    [[ -s $json ]] || { ROWS+=("| $label | $proto | failed: $(tail -1 "$DIR/run.out") | | | | |"); return; }
    ROWS+=("$(python3 - "$json" "$label" "$proto" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
per = j.get("requests_per_server_close")
errors = ", ".join(f"{n} {k}" for k, n in j["errors"].items() if n) or "0"
print(f'| {sys.argv[2]} | {sys.argv[3]} | {j["successful"] + j["errors_total"]} | {j["successful"]} | {errors} '
      f'| {j.get("resent_unprocessed", "n/a")} | {j.get("server_closes", "n/a")}'
      f'{f" (every {per:.0f})" if per else ""} |')
PY
)")
}

h2load_row() {
    timeout 300 taskset -c "$GEN_CPU" h2load -n "$REQUESTS" -c 4 -m 32 "https://localhost:$HTTPS_PORT/" >"$DIR/h2load.out" 2>&1 || true
    local line
    line=$(grep -E '^requests:' "$DIR/h2load.out" || echo "requests: (no summary)")
    # requests: N total, N started, N done, N succeeded, N failed, N errored, N timeout
    ROWS+=("$(awk -v l="$line" 'BEGIN {
        n = split(l, f, /[ ,]+/);
        for (i = 1; i < n; i++) v[f[i+1]] = f[i];
        printf "| h2load -c 4 -m 32 | HTTP/2 + TLS | %s | %s | %s failed, %s errored (stops at 1,000 per connection) | n/a | n/a |",
               v["total"], v["succeeded"], v["failed"], v["errored"] }')")
}

for bin in "$LOADLAB" $LOADLAB_BEFORE; do
    name=loadlab
    [[ $bin == "$LOADLAB" ]] || name="loadlab (before)"
    loadlab_row "$name -c 8 --pipeline 16" "$bin" "HTTP/1.1" "http://127.0.0.1:$HTTP_PORT/" -n "$REQUESTS" -c 8 --pipeline 16
    loadlab_row "$name -c 4 --concurrency 128" "$bin" "HTTP/2 + TLS" --http2 "https://localhost:$HTTPS_PORT/" --insecure -n "$REQUESTS" -c 4 --concurrency 128
done
h2load_row

echo
echo "**Against stock nginx (keepalive_requests 1000): $REQUESTS requests per run**"
echo
echo "| tool | protocol | requests | succeeded | errors | re-sent unprocessed | server closes |"
echo "|---|---|---:|---:|---|---:|---|"
printf '%s\n' "${ROWS[@]}"
echo
echo "A request behind a Connection: close response, or a stream above a GOAWAY, was never processed by the server: loadlab sends it again on a new connection (charging its latency from the first intended send) and counts it under re-sent, not as an error."

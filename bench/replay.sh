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
#   bench/replay.sh                      # 2,000,000 lines (about 270 MB), 3 rounds
#   LINES=500000 ROUNDS=1 bench/replay.sh
#
# Environment:
#   LINES    lines of the generated log              (2000000)
#   ROUNDS   interleaved rounds                      (3)
#   GEN_CPU  the CPU both run on                     (1)
#   INSTALL  0 = never install goaccess or GNU time  (1)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
BENCH_NAME=replay.sh
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
LINES=${LINES:-2000000}
ROUNDS=${ROUNDS:-3}
GEN_CPU=${GEN_CPU:-1}
INSTALL=${INSTALL:-1}
posint LINES "$LINES"
posint ROUNDS "$ROUNDS"

missing=()
command -v goaccess >/dev/null || missing+=(goaccess)
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

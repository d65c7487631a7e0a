#!/usr/bin/env bash
# Distributed load: what the coordinator costs. For N = 1, 2, 4, 8 agents (all on this
# machine, loopback), one `loadlab run --agents N` step of DURATION at RATE req/s against
# the scenario server; prints the coordinator's CPU time per agent per second of load, and
# checks the merged request count against the sum of the agents'. Then the merge of the
# results of 100 agents' 60-second steps (crates/fleet/examples/merge_cost.rs).
#
#   bench/fleet.sh
#   AGENTS="1 4 16" DURATION=20 RATE=4000 bench/fleet.sh
#
# Environment:
#   AGENTS      agent counts to try                             ("1 2 4 8")
#   DURATION    seconds of load per run                         (10)
#   RATE        total offered req/s                             (2000)
#   LOADLAB     loadlab binary                                  (target/release/loadlab)
#   GEN_CPU / SERVER_CPU   CPUs for the agents / the server and coordinator   (1 / 0)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
AGENTS=${AGENTS:-"1 2 4 8"}
DURATION=${DURATION:-10}
RATE=${RATE:-2000}
LOADLAB=${LOADLAB:-$ROOT/target/release/loadlab}
GEN_CPU=${GEN_CPU:-1}
SERVER_CPU=${SERVER_CPU:-0}

BENCH_NAME=fleet.sh
# shellcheck source=lib.sh
. "$HERE/lib.sh"

posint DURATION "$DURATION"
posint RATE "$RATE"
[[ -x $LOADLAB ]] || die "no loadlab at $LOADLAB: run 'cargo build --release' first"
command -v python3 >/dev/null || die "python3 is needed"

python3 - "$LOADLAB" "$AGENTS" "$DURATION" "$RATE" "$GEN_CPU" "$SERVER_CPU" <<'PY'
import json, os, socket, subprocess, sys, tempfile, time

loadlab, agent_counts, duration, rate, gen_cpu, server_cpu = sys.argv[1:]
duration, rate = int(duration), int(rate)
tmp = tempfile.mkdtemp(prefix="fleet-bench-")
token = os.path.join(tmp, "token")
open(token, "w").write("bench-token-0123456789\n")

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

port = free_port()
server = subprocess.Popen(["taskset", "-c", server_cpu, loadlab, "serve", "scenario",
                           "--bind", f"127.0.0.1:{port}", "--workers", "1"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
server.stdout.readline()
rows = []
try:
    for n in [int(x) for x in agent_counts.split()]:
        listen = f"127.0.0.1:{free_port()}"
        out = os.path.join(tmp, f"run-{n}.json")
        coord = subprocess.Popen(["taskset", "-c", server_cpu, loadlab, "run",
                                  f"http://127.0.0.1:{port}/health", "--rate", str(rate),
                                  "-d", f"{duration}s", "-c", str(max(n, 16)), "--agents", str(n),
                                  "--listen", listen, "--token-file", token, "--json", out, "-q"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        agents = [subprocess.Popen(["taskset", "-c", gen_cpu, loadlab, "agent", "--coordinator", listen,
                                    "--token-file", token, "--name", f"a{i}", "--threads", "1", "-q"],
                                   stderr=subprocess.DEVNULL) for i in range(n)]
        t0 = time.monotonic()
        _, status, usage = os.wait4(coord.pid, 0)
        wall = time.monotonic() - t0
        for a in agents:
            a.wait(timeout=10)
        if status != 0:
            print(f"  {n} agents: the coordinator failed (status {status})", file=sys.stderr)
            continue
        r = json.load(open(out))
        cpu = usage.ru_utime + usage.ru_stime
        share_sum = sum(a["requests"] for a in r["agents"])
        rows.append((n, r["requests"], share_sum, r["achieved_rps"], cpu, wall))
finally:
    server.terminate(); server.wait()

print(f"_coordinator cost: {duration}s step at {rate} req/s, agents pinned to CPU {gen_cpu}, coordinator and server on CPU {server_cpu}_\n")
print("| agents | merged requests | sum of agents' | achieved req/s | coordinator CPU s | wall s | CPU ms per agent-second |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for n, req, s, ach, cpu, wall in rows:
    print(f"| {n} | {req:,} | {s:,} | {ach:,.0f} | {cpu:.3f} | {wall:.1f} | {1000 * cpu / (n * duration):.2f} |")
    assert req == s, f"merged {req} != sum of agents {s}"
if len(rows) >= 2:
    (n1, *_, c1, _), (n2, *_, c2, _) = rows[0], rows[-1]
    print(f"\nmarginal cost: {1000 * (c2 - c1) / ((n2 - n1) * duration):.2f} CPU ms per extra agent per second "
          f"(from {n1} to {n2} agents; the rest is the coordinator's fixed cost: start-up, waiting, the report)")
PY

echo
echo "merge of 100 agents' 60 s results (release build):"
(cd "$ROOT" && cargo run -q --release -p loadlab-fleet --example merge_cost -- 100 60)

#!/usr/bin/env bash
# The README's test command: installs what the tests need, then runs every test of the
# workspace (those that need system software included) and ends on one tally.
#
#   ./test.sh                 everything; as root, installs what is missing with apt-get
#   ./test.sh --no-install    installs nothing: names what is missing and stops
#   ./test.sh --check         only says what is missing (exit 1 when something is)
#   ./test.sh --beside CMD    runs CMD beside the tests that only wait, at the lowest CPU
#                             priority (.ci/run: its lints and checks); --job CMD
#                             and --alone-job CMD run CMD as one of the tests, in the
#                             pool or alone (.ci/run: the plans)
#   ./test.sh -- ARGS         ARGS go to every test binary (a name filter, --nocapture)
#
# `cargo test --workspace` alone needs nothing but Rust: the tests that need system
# software (nginx, gunicorn, Node.js, a JDK, Prometheus, Chromium, root for network
# namespaces, mounts and cgroups) are marked `#[ignore = "needs …"]` and listed as ignored
# in its output. This script runs them too (`--include-ignored`).
set -euo pipefail
cd "$(dirname "$0")"
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

install=1
check_only=0
test_args=()
runner_opts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) install=0 ;;
    --check) check_only=1 ;;
    --beside|--job|--alone-job) runner_opts+=("$1" "$2"); shift ;;
    --) shift; test_args=("$@"); break ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown argument '$1' (see ./test.sh --help)" >&2; exit 2 ;;
  esac
  shift
done

# What the tests need, one line each: a command that must answer (or a file that must
# exist), the Debian package that brings it, and what needs it.
requirements() {
  cat <<'EOF'
ip            iproute2              network namespaces: ports that run out, agents on other hosts
sysctl        procps                a namespace's narrowed port range; kill and ps
python3       python3               http.server and the listener discovery tests; bench/ parsers
nginx         nginx                 tests/nginx.rs, tls.rs, traffic.rs, lab_build.rs (a server nobody here wrote)
chromium      chromium              tests/report_html.rs opens report.html in a headless browser
chattr        e2fsprogs             tests/lab_faults.rs locks a bundle directory mid-run
mkfs.ext4     e2fsprogs             tests/lab_diagnosis.rs formats a loop device (a slow disk)
losetup       mount                 tests/lab_diagnosis.rs: a loop device, throttled by the blkio cgroup
gunicorn      gunicorn              tests/knee.rs, sessions.rs (a pre-fork Python server)
node          nodejs                tests/knee.rs, http2.rs (one event loop)
taskset       util-linux            pins test servers and the one-core demo
setpriv       util-linux            tests/io_uring_refused.rs
prlimit       util-linux            tests/websocket.rs, knee.rs (servers out of descriptors)
script        bsdutils              tests/live_view.rs gives the live view a terminal
prometheus    prometheus            tests/prometheus.rs (remote write into a real Prometheus)
curl          curl                  tests/sessions.rs reads a server's stats inside a namespace
java          default-jdk-headless  tests/jvm_actors.rs and outputs.rs (Pekko app, Java HdrHistogram)
mvn           maven                 builds targets/jvm-actors and fetches the Java HdrHistogram jar
websockets    python3-websockets    tests/websocket.rs (a Python WebSocket echo server)
node-ws       node-ws               tests/websocket.rs (Node's ws echo server)
grpcio        python3-grpcio        tests/grpc_stream.rs (a Python grpcio server-streaming server)
pip           python3-pip           fetches grpcio-reflection from PyPI for tests/grpc_reflection.rs
EOF
}

have() {
  case "$1" in
    nginx) [ -x /usr/sbin/nginx ] || [ -x /usr/bin/nginx ] || command -v nginx >/dev/null 2>&1 ;;
    prometheus) [ -x /usr/bin/prometheus ] || command -v prometheus >/dev/null 2>&1 ;;
    websockets) /usr/bin/python3 -c 'import websockets' >/dev/null 2>&1 ;;
    grpcio) /usr/bin/python3 -c 'import grpc' >/dev/null 2>&1 ;;
    pip) /usr/bin/python3 -m pip --version >/dev/null 2>&1 ;;
    node-ws) [ -f /usr/share/nodejs/ws/package.json ] ;;
    sysctl) command -v sysctl >/dev/null 2>&1 && command -v kill >/dev/null 2>&1 ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
  esac
}

missing=()
while read -r cmd pkg why; do
  have "$cmd" || missing+=("$pkg")
done < <(requirements)
# One package once (util-linux brings two commands).
if [ "${#missing[@]}" -gt 0 ]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
fi

say_missing() {
  echo "missing for the tests that need system software:" >&2
  while read -r cmd pkg why; do
    have "$cmd" || printf '  %-22s (%s) %s\n' "$pkg" "$cmd" "$why" >&2
  done < <(requirements)
}

if [ "$check_only" = 1 ]; then
  if [ "${#missing[@]}" -gt 0 ]; then say_missing; exit 1; fi
  echo "everything the tests need is here"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  {
    echo "test.sh: the full suite needs root (network namespaces, mounts, cgroups, real-time"
    echo "threads). Run it as root (sudo ./test.sh), or run 'cargo test --workspace' for the"
    echo "tests that need nothing but Rust (the others are listed there as ignored)."
  } >&2
  [ "${#missing[@]}" -gt 0 ] && say_missing
  exit 2
fi

if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$install" = 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say_missing
    echo "install them (Debian: apt-get install ${missing[*]}), or run ./test.sh as root on Debian to have them installed" >&2
    exit 2
  fi
  echo "== installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "== the system software the tests need: all here"
fi

# grpcio-reflection (PyPI; Debian has none) of the grpcio installed, into target/pydeps:
# tests/grpc_reflection.rs's server describes its service by reflection.
if [ ! -d target/pydeps/grpc_reflection ]; then
  echo "== grpcio-reflection into target/pydeps (PyPI)"
  grpc_version=$(/usr/bin/python3 -c 'import grpc; print(grpc.__version__)')
  /usr/bin/python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps \
    --target target/pydeps "grpcio-reflection==$grpc_version"
fi

# Java: the HdrHistogram library (tests/outputs.rs reads loadlab's interval logs with it) and
# the jar of targets/jvm-actors (document 003's Pekko app; Maven caches both in ~/.m2).
echo "== the Java HdrHistogram library and targets/jvm-actors (Maven)"
mvn -q -B dependency:get -Dartifact=org.hdrhistogram:HdrHistogram:2.2.2
mvn -q -B -f targets/jvm-actors/pom.xml package -DskipTests
test -s targets/jvm-actors/target/jvm-actors.jar

# Checks that cannot run on this machine (io_uring refused for the glommio and monoio
# greeters, a cgroup hierarchy it does not mount) fail unless LOADLAB_SKIPPED names a file;
# each skip is listed there with its reason and printed at the end instead of passing
# silently. A caller (.ci/run) may name the file itself to add its own.
export LOADLAB_SKIPPED=${LOADLAB_SKIPPED:-$(mktemp)}
status=0
# Every test binary of the workspace, the ignored ones included, several at once where they
# only wait (tools/test_runner.py says which run alone, and why); then the HTTP/1.1 suites
# again over each I/O path: `loadlab run` on io_uring (LOADLAB_IO is --io's default) for
# hostile servers, graceful closes, coordinated omission, open-loop accuracy, bounded work,
# errors by class, port exhaustion, nginx, sessions and requests that vary; and, since
# `--io auto` takes io_uring in open loop, the open-loop suites on epoll, the transport a
# kernel that refuses io_uring gets.
uring=graceful_close,hostile_http1,open_loop,closed_loop,errors,bounded_work,interrupt,port_exhaustion,nginx,sessions,traffic,fd_limits
epoll=graceful_close,hostile_http1,open_loop,errors,bounded_work,interrupt,traffic,port_exhaustion
python3 tools/test_runner.py "${runner_opts[@]}" --pass "LOADLAB_IO=uring:$uring" --pass "LOADLAB_IO=epoll:$epoll" \
  ${LOADLAB_TEST_TIMES:+--slowest-tests "$LOADLAB_TEST_TIMES"} -- "${test_args[@]}" || status=1
echo "== doc tests"
cargo test -q --workspace --doc -- --include-ignored "${test_args[@]}" || status=1
skips=$(grep -c . "$LOADLAB_SKIPPED" || true)
echo "skipped checks: $skips (counted as passed above; none of these ran)"
sed 's/^/  SKIPPED /' "$LOADLAB_SKIPPED"
exit "$status"

# Shell helpers shared by the bench scripts (sourced; set BENCH_NAME first).

log() { printf '%s\n' "$*" >&2; }
die() { log "$BENCH_NAME: $*"; exit 1; }
posint() { [[ $2 =~ ^[0-9]+$ && $2 -gt 0 ]] || die "$1 must be a positive integer"; }

# in_list VALUE ITEM... : whether VALUE is one of the ITEMs.
in_list() { local v=$1 x; shift; for x in "$@"; do [[ $x == "$v" ]] && return 0; done; return 1; }

as_root() {
    if [[ $(id -u) -eq 0 ]]; then "$@"
    elif command -v sudo >/dev/null; then sudo "$@"
    else return 1; fi
}

# apt_install PKG... : installs the Debian packages given (none: nothing to do), unless INSTALL=0.
apt_install() {
    (($#)) || return 0
    [[ ${INSTALL:-1} == 1 ]] || die "missing: $* (INSTALL=0)"
    command -v apt-get >/dev/null || die "missing $* and no apt-get; install them by hand"
    log "installing: $*"
    as_root apt-get update -qq || die "apt-get update failed (need root or sudo)"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null \
        || die "apt-get install $* failed"
}

# host_ticks: this machine's CPU time so far as "BUSY STEAL" clock ticks, every CPU (/proc/stat's
# cpu line: busy = user + nice + system + irq + softirq; steal = time the CPUs wanted to run
# while a VM's hypervisor ran something else). Empty where /proc/stat has no steal field.
host_ticks() { awk '/^cpu / { if (NF >= 9) print $2 + $3 + $4 + $7 + $8, $9; exit }' /proc/stat 2>/dev/null || true; }

# The current tool run ($RUN_PID): `timeout` makes itself a process-group leader, so
# signalling the group ends timeout, GNU time and the tool together.
RUN_PID=
stop_run() {
    if [[ -n $RUN_PID ]] && kill -0 "$RUN_PID" 2>/dev/null; then
        kill -TERM -- "-$RUN_PID" 2>/dev/null || kill -TERM "$RUN_PID" 2>/dev/null || true
        wait "$RUN_PID" 2>/dev/null || true
    fi
    RUN_PID=
}

# stop_pid PID SIGNAL : signals a server, waits up to 5 s, then kills it.
stop_pid() {
    local pid=$1
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
    kill "-$2" "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# server_dir NAME : makes $SRV_DIR (/tmp/loadlab-NAME.XXXXXX, readable by nginx's workers)
# and, on exit or interrupt, stops the current run, nginx ($NGX_PID) and any other server
# ($GRT_PID), and removes the directory.
SRV_DIR= NGX_PID= GRT_PID=
server_dir() {
    SRV_DIR=$(mktemp -d "/tmp/loadlab-$1.XXXXXX")
    chmod 755 "$SRV_DIR"
    trap bench_cleanup EXIT
    trap 'log "interrupted"; exit 130' INT TERM
}
bench_cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_run
    stop_pid "$NGX_PID" QUIT
    stop_pid "$GRT_PID" TERM
    rm -rf "$SRV_DIR"
    exit "$rc"
}

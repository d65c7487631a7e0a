#!/usr/bin/env python3
"""Runs the workspace's test binaries for ./test.sh: several at once where that is safe.

Most of loadlab's integration tests wait (a knee search of a server that sleeps 50 ms per
request, agents in network namespaces, a Prometheus that scrapes each second): run one
after another, as `cargo test` does, the suite took 21 minutes of which the CPUs were busy
5. So the binaries that only wait run in a pool of `--jobs` at once, and those that measure
the machine's CPUs (a knee search that names a CPU-bound target, the demo on one core, a
wake-up lateness check) or keep a CPU busy themselves run alone, with nothing of the suite
beside them, as they did under `cargo test`.

Each binary's output is printed whole when it ends (never interleaved), headed by its name
and time, and the run ends on one tally: tests passed, failed and ignored over every binary,
each failed or ignored test named, and the slowest binaries.

  tools/test_runner.py [--jobs N] [--pass NAME:ENV=V:TARGET,...] [-- ARGS for each binary]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

# Binaries that run with nothing else of the suite beside them, as they did under `cargo
# test`: they change the machine for everyone (io_uring switched off, a real-time thread
# taking half of CPU 0), or they read the CPUs' busy and idle shares and the target's run-queue waits (the
# diagnosis names a CPU-bound target, a pool timing out with the CPU to spare, a Node event
# loop on half-idle CPUs, a CPU quota), pin the server and loadlab to CPUs 0 and 1 and judge
# loadlab's own lateness at the knee, or time how late the machine wakes a sleeper. Named as
# "crate directory/test target".
ALONE = {
    "crates/cli/demo",
    "crates/cli/open_loop",
    # A plan against a fixture of known capacity whose page must show a knee: in the pool
    # its fixture once overflowed its listen queue at half its capacity.
    "crates/cli/report_html",
    # Sets kernel.io_uring_disabled, machine-wide: every other binary would find io_uring
    # refused while it runs.
    "crates/cli/io_uring_refused",
    # These keep a core busy for most of their run (hostile peers answering as fast as they
    # can, the JVM app, the runtime greeters, closed loops): beside them, the pool's knee
    # searches and comparisons found loadlab late by hundreds of milliseconds (a step judged
    # generator-limited, a p99 regression unresolved) when both ran in the pool.
    "crates/cli/jvm_actors",
    "crates/cli/hostile_h2",
    "crates/cli/hostile_http1",
    "crates/cli/hostile_grpc",
    "crates/cli/hostile_tls",
    "crates/cli/bounded_work",
    "crates/cli/closed_loop",
    "crates/engine/lib",
    "targets/runtimes/greeters",
    # Of these binaries, only the tests named run alone; the others of the binary run in the
    # pool (libtest's --skip), one after another as the binary's own lock has them.
    "crates/cli/knee::a_node_event_loop_is_named_as_one_thread_with_the_cpus_half_idle",
    "crates/cli/knee::a_cpu_quota_is_named_as_the_limit_with_its_throttling",
    "crates/cli/lab_diagnosis::a_cpu_bound_target_is_judged_against_its_one_cpu",
    "crates/cli/lab_diagnosis::a_cpu_bound_why_is_read_against_a_configuration_that_held_with_more_cpu",
    "crates/cli/lab_diagnosis::threads_that_wait_behind_each_other_on_a_half_idle_cpu_are_not_cpu_bound",
    "crates/cli/lab_diagnosis::timeouts_behind_a_small_pool_with_its_cpu_half_used_are_the_pool",
    "crates/cli/doctor::doctor_warns_of_a_machine_that_wakes_sleepers_late",
    # WebSocket and server-sent events: knee searches of servers pinned beside loadlab, 10,000
    # connections held, and Node and Python servers pinned to CPU 0 under load, the CPU the
    # pool's measuring tests pin their targets to. In the pool they made the others late: a
    # CI run with them there failed compare, distributed, lab_diagnosis, sessions and the
    # tune plan on a machine 99 % busy, and their own knees stopped on loadlab's lateness.
    "crates/cli/websocket",
    "crates/cli/sse",
}

# Seconds each long binary took on the 2-core machine of docs/src/ci.md: the pool starts the
# longest first, so that none of them starts last and holds the run's end alone. Binaries
# not listed are taken as short; a run's own times (target/test-times.json) replace these.
EXPECTED = {
    "crates/cli/knee": 302,
    "crates/cli/distributed": 102,
    "crates/cli/compare": 100,
    "crates/cli/remote_probe": 91,
    "crates/cli/lab_diagnosis": 78,
    "crates/cli/demo": 64,
    "crates/cli/sessions": 85,
    "crates/cli/traffic": 37,
    "crates/cli/jvm_actors": 36,
    "crates/cli/tune": 34,
    "crates/cli/lab_knee": 50,
    "crates/cli/hostile_h2": 30,
    "crates/cli/lab_verdicts": 28,
    "crates/cli/outputs": 26,
    "crates/cli/prometheus": 24,
    "crates/cli/hostile_http1": 18,
    "crates/cli/open_loop": 16,
    "crates/cli/lab_faults": 15,
    "crates/cli/lab": 13,
    "crates/cli/bounded_work": 13,
    "crates/cli/graceful_close": 12,
    "crates/cli/live_view": 11,
    "crates/cli/websocket": 150,
    "crates/cli/sse": 50,
    "crates/cli/grpc_stream": 45,
    "crates/cli/grpc_bidi": 60,
    "crates/cli/grpc_client_stream": 45,
    "job: .ci/plans runtimes": 70,
    "job: .ci/plans tune": 64,
}

# A whole binary still running after this long is stopped and counted failed: the tests bound
# their own commands far below it, so only a hang reaches it.
BINARY_TIMEOUT = 30 * 60


@dataclass
class Job:
    """One test binary to run once, with its environment."""

    key: str  # "crates/cli/knee"
    cwd: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    label: str = ""  # "" for the main pass, "LOADLAB_IO=uring" for the others
    alone: bool = False

    @property
    def name(self) -> str:
        return f"{self.key} ({self.label})" if self.label else self.key



@dataclass
class Outcome:
    job: Job
    seconds: float
    code: int
    log: str


def binaries(root: Path, cargo_args: list[str]) -> list[tuple[str, str, str]]:
    """(key, package directory, executable) of every test binary `cargo test` would run,
    built now (compiler messages go to the terminal as cargo prints them)."""
    cmd = ["cargo", "test", "-q", "--no-run", "--message-format=json-render-diagnostics", *cargo_args]
    proc = subprocess.run(cmd, cwd=root, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"test_runner: `{' '.join(cmd)}` failed (exit {proc.returncode})")
    return parse_artifacts(proc.stdout, root)


def parse_artifacts(stdout: str, root: Path) -> list[tuple[str, str, str]]:
    """The test executables among cargo's JSON messages, keyed by crate directory and target."""
    found = []
    for line in stdout.splitlines():
        try:
            m = json.loads(line)
        except json.JSONDecodeError:
            continue
        if m.get("reason") != "compiler-artifact" or not m.get("executable"):
            continue
        if not m.get("profile", {}).get("test"):
            continue
        pkg_dir = Path(m["manifest_path"]).parent
        rel = os.path.relpath(pkg_dir, root)
        kind = m["target"]["kind"][0]
        target = "lib" if kind == "lib" else m["target"]["name"]
        if kind == "bin":
            target = f"bin-{m['target']['name']}"
        found.append((f"{rel}/{target}", str(pkg_dir), m["executable"]))
    return found


def split(key: str, cwd: str, argv: list[str], env: dict[str, str], label: str,
          user_filters: bool) -> list[Job]:
    """One binary as its jobs: whole, in the pool or alone; or, when ALONE names some of its
    tests, those alone (`--exact NAME...`) and the rest in the pool (`--skip NAME...`). With a
    name filter of the user's (`./test.sh -- FILTER`), a binary with tests to run alone runs
    whole, alone."""
    if key in ALONE:
        return [Job(key, cwd, argv, env, label, alone=True)]
    names = sorted(a.split("::", 1)[1] for a in ALONE if a.startswith(key + "::"))
    if not names:
        return [Job(key, cwd, argv, env, label)]
    if user_filters:
        return [Job(key, cwd, argv, env, label, alone=True)]
    skips = [x for n in names for x in ("--skip", n)]
    return [
        Job(key, cwd, argv + ["--exact", *names], env, label, alone=True),
        Job(key, cwd, argv + skips, env, label),
    ]


def order(jobs: list[Job], times: dict[str, float]) -> list[Job]:
    """Longest first (a run's own times, else EXPECTED, else short)."""

    def expected(j: Job) -> float:
        t = times.get(j.name + (" alone" if j.alone else ""), times.get(j.name))
        return t if t is not None else EXPECTED.get(j.key, 1.0)

    return sorted(jobs, key=expected, reverse=True)


class Runner:
    def __init__(self, jobs: int, logdir: Path) -> None:
        self.slots = max(1, jobs)
        self.logdir = logdir
        self.lock = threading.Lock()
        self.log_numbers = itertools.count(1)
        self.running: dict[int, subprocess.Popen] = {}
        self.outcomes: list[Outcome] = []
        self.stopping = False

    def _run(self, job: Job, n: int) -> None:
        log_path = self.logdir / f"{n:03}.log"
        started = time.monotonic()
        env = dict(os.environ, **job.env)
        with open(log_path, "w") as log:
            try:
                proc = subprocess.Popen(
                    job.argv, cwd=job.cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True,
                )
            except OSError as e:
                log.write(f"test_runner: could not start {job.argv[0]}: {e}\n")
                code = 127
            else:
                with self.lock:
                    self.running[n] = proc
                try:
                    code = proc.wait(timeout=BINARY_TIMEOUT)
                except subprocess.TimeoutExpired:
                    kill_group(proc)
                    code = proc.wait()
                    log.write(f"\ntest_runner: {job.name} still running after {BINARY_TIMEOUT} s: stopped\n")
                with self.lock:
                    self.running.pop(n, None)
                # What it started and left running (a server, a load loop) would run beside
                # the next jobs and take their CPU: stopped, and named in its log.
                left = sweep_group(proc.pid)
                if left:
                    log.write(f"\ntest_runner: {job.name} left {len(left)} processes running "
                              f"({', '.join(left)}): stopped\n")
        seconds = time.monotonic() - started
        text = log_path.read_text(errors="replace")
        outcome = Outcome(job, seconds, code, text)
        with self.lock:
            self.outcomes.append(outcome)
            # One binary's output at a time, whole.
            sys.stdout.write(f"\n== {job.name}: {'ok' if code == 0 else f'FAILED (exit {code})'} in {seconds:.1f} s\n")
            sys.stdout.write(text)
            sys.stdout.flush()

    def run(self, jobs: list[Job], times: dict[str, float], beside: list[Job] = ()) -> list[Outcome]:
        """The pool first (longest first, `slots` at once), with the `beside` commands at the lowest CPU priority; then, once all of those ended,
        each binary that runs alone."""
        pool = order([j for j in jobs if not j.alone], times)
        alone = order([j for j in jobs if j.alone], times)
        extra = [threading.Thread(target=self._run, args=(j, next(self.log_numbers)), daemon=True) for j in beside]
        for t in extra:
            t.start()
        self._phase(pool, self.slots)
        for t in extra:
            t.join()
        self._phase(alone, 1)
        return self.outcomes

    def _phase(self, waiting: list[Job], slots: int) -> None:
        changed = threading.Condition()
        running: list[Job] = []
        threads: list[threading.Thread] = []

        def body(job: Job, n: int) -> None:
            try:
                self._run(job, n)
            finally:
                with changed:
                    running.remove(job)
                    changed.notify_all()

        with changed:
            while waiting and not self.stopping:
                if len(running) >= slots:
                    changed.wait(1.0)
                    continue
                pick = waiting[0]
                waiting.remove(pick)
                running.append(pick)
                t = threading.Thread(target=body, args=(pick, next(self.log_numbers)), daemon=True)
                threads.append(t)
                t.start()
        for t in threads:
            t.join()

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            for proc in self.running.values():
                kill_group(proc)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def sweep_group(pgid: int) -> list[str]:
    """Kills the processes still in process group `pgid` (a job's session, after its first
    process ended) and returns their names with their pids."""
    left = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
        comm = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            left.append(f"{comm} {stat.parent.name}")
    if left:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return sorted(left)


RESULT = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored")
NAMED = re.compile(r"^test (\S+) \.\.\. (FAILED|ignored)(.*)$")


def tally(outcomes: list[Outcome]) -> tuple[str, bool]:
    """The closing lines, and whether everything passed."""
    passed = failed = ignored = 0
    failed_names: list[str] = []
    ignored_names: list[str] = []
    broken: list[str] = []
    for o in outcomes:
        results = 0
        for line in o.log.splitlines():
            m = RESULT.match(line)
            if m:
                results += 1
                passed += int(m[1])
                failed += int(m[2])
                ignored += int(m[3])
                continue
            m = NAMED.match(line)
            if m:
                where = f"{o.job.name}: {m[1]}"
                if m[2] == "FAILED":
                    failed_names.append(where)
                else:
                    ignored_names.append(f"{where}{m[3]}")
        if o.code != 0 and not any(f.startswith(f"{o.job.name}: ") for f in failed_names):
            # Crashed, hung, or never started: no test of it is named failed.
            broken.append(f"{o.job.name}: exit {o.code} with no failed test named (crash, hang or no start)")
        elif results == 0 and o.code == 0 and not o.job.key.startswith(("beside: ", "job: ")):
            broken.append(f"{o.job.name}: printed no test result")
    binaries_run = sum(not o.job.key.startswith(("beside: ", "job: ")) for o in outcomes)
    lines = [f"tests: {passed} passed, {failed} failed, {ignored} ignored, in {binaries_run} binaries"]
    lines += [f"  FAILED {n}" for n in failed_names]
    lines += [f"  BROKEN {n}" for n in broken]
    lines += [f"  IGNORED {n}" for n in ignored_names]
    return "\n".join(lines), failed == 0 and not broken and not failed_names


def slowest(outcomes: list[Outcome], n: int) -> str:
    rows = sorted(outcomes, key=lambda o: o.seconds, reverse=True)[:n]
    return "\n".join(f"  {o.seconds:7.1f} s  {o.job.name}{'  (alone)' if o.job.alone else ''}" for o in rows)


TIMED = re.compile(r"^test (\S+) \.\.\. \w+.* <([0-9.]+)s>$")


def slowest_tests(outcomes: list[Outcome], n: int) -> str:
    """From --report-time's `test NAME ... ok <12.345s>` lines."""
    rows = []
    for o in outcomes:
        for line in o.log.splitlines():
            m = TIMED.match(line)
            if m:
                rows.append((float(m[2]), f"{o.job.name}: {m[1]}"))
    rows.sort(reverse=True)
    return "\n".join(f"  {t:7.1f} s  {name}" for t, name in rows[:n])


def load_times(path: Path) -> dict[str, float]:
    try:
        return {k: float(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("LOADLAB_TEST_JOBS", "4")),
                    help="binaries that only wait, run at once (default 4, or LOADLAB_TEST_JOBS)")
    ap.add_argument("--pass", dest="passes", action="append", default=[],
                    metavar="ENV=VALUE:TARGET,TARGET", help="run these targets of crates/cli again with ENV=VALUE")
    ap.add_argument("--cargo-arg", action="append", default=[], help="for `cargo test --no-run` (default --workspace)")
    ap.add_argument("--slowest-tests", type=int, default=0, metavar="N",
                    help="time every test (libtest's --report-time, unstable: RUSTC_BOOTSTRAP=1 is set "
                         "for the test binaries) and list the N slowest; a test's time includes any wait "
                         "for a lock its binary's tests share")
    ap.add_argument("--beside", action="append", default=[], metavar="CMD",
                    help="a shell command run beside the pool at the lowest CPU priority (SCHED_IDLE, "
                         "nice 19); the binaries that run alone wait for it (.ci/run: its checks)")
    ap.add_argument("--job", action="append", default=[], metavar="CMD",
                    help="a shell command run in the pool like a test binary that only waits (.ci/run: a plan)")
    ap.add_argument("--alone-job", action="append", default=[], metavar="CMD",
                    help="a shell command run alone, like a binary that reads the CPUs' idle share or keeps a core busy")
    ap.add_argument("args", nargs="*", help="after --: given to every test binary")
    a = ap.parse_args()
    # A name filter of the user's (not a flag, nor a flag's value such as --test-threads 1).
    takes_value = {"--test-threads", "--skip", "--format", "--logfile", "--color", "-Z", "--shuffle-seed"}
    user_filters = any(not x.startswith("-") and (i == 0 or a.args[i - 1] not in takes_value)
                       for i, x in enumerate(a.args))
    if a.slowest_tests:
        a.args = ["-Z", "unstable-options", "--report-time", *a.args]

    root = Path(__file__).resolve().parent.parent
    built = binaries(root, a.cargo_arg or ["--workspace"])
    timing = {"RUSTC_BOOTSTRAP": "1"} if a.slowest_tests else {}
    jobs = [j for key, cwd, exe in built
            for j in split(key, cwd, [exe, "--include-ignored", *a.args], dict(timing), "", user_filters)]
    by_key = {key: (cwd, exe) for key, cwd, exe in built}
    for spec in a.passes:
        assign, _, targets = spec.partition(":")
        var, _, value = assign.partition("=")
        for t in filter(None, targets.split(",")):
            key = f"crates/cli/{t}"
            if key not in by_key:
                sys.exit(f"test_runner: --pass {spec}: no test target {key}")
            cwd, exe = by_key[key]
            jobs += split(key, cwd, [exe, "--include-ignored", *a.args], {**timing, var: value},
                          f"{var}={value}", user_filters)

    beside = [Job(f"beside: {cmd}", str(root), ["chrt", "--idle", "0", "nice", "-n", "19", "bash", "-c", cmd])
              for cmd in a.beside]
    jobs += [Job(f"job: {cmd}", str(root), ["bash", "-c", cmd]) for cmd in a.job]
    jobs += [Job(f"job: {cmd}", str(root), ["bash", "-c", cmd], alone=True) for cmd in a.alone_job]

    times_path = root / "target" / "test-times.json"
    times = load_times(times_path)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="loadlab-test-logs-") as logdir:
        runner = Runner(a.jobs, Path(logdir))
        print(f"== {len(jobs)} jobs (test binaries and commands): {sum(not j.alone for j in jobs)} in a pool "
              f"of {runner.slots}, then {sum(j.alone for j in jobs)} alone", flush=True)
        try:
            outcomes = runner.run(jobs, times, beside)
        except KeyboardInterrupt:
            runner.stop()
            print("\ntest_runner: interrupted", file=sys.stderr)
            return 130
    wall = time.monotonic() - started
    times.update({o.job.name + (" alone" if o.job.alone else ""): round(o.seconds, 1) for o in outcomes})
    try:
        times_path.write_text(json.dumps(times, indent=1, sort_keys=True))
    except OSError:
        pass
    text, ok = tally(outcomes)
    if a.slowest_tests:
        print(f"\n== the {a.slowest_tests} slowest tests")
        print(slowest_tests(outcomes, a.slowest_tests))
    print(f"\n== the slowest jobs (the whole run took {wall:.0f} s)")
    print(slowest(outcomes, 12))
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

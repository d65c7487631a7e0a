"""Unit tests of tools/test_runner.py (python3 -m unittest discover -s tools)."""

import json
import sys
import threading
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import test_runner as tr  # noqa: E402


def artifact(manifest, kind, name, exe, test=True):
    return json.dumps({
        "reason": "compiler-artifact",
        "manifest_path": manifest,
        "target": {"kind": [kind], "name": name},
        "profile": {"test": test},
        "executable": exe,
    })


class Artifacts(unittest.TestCase):
    def test_test_executables_are_keyed_by_crate_directory_and_target(self):
        out = "\n".join([
            artifact("/r/crates/cli/Cargo.toml", "test", "knee", "/r/target/debug/deps/knee-1"),
            artifact("/r/crates/engine/Cargo.toml", "lib", "loadlab_engine", "/r/target/debug/deps/e-2"),
            artifact("/r/crates/cli/Cargo.toml", "bin", "loadlab", "/r/target/debug/deps/loadlab-3"),
            # The binary itself (not a test harness) and a library without an executable.
            artifact("/r/crates/cli/Cargo.toml", "bin", "loadlab", "/r/target/debug/loadlab", test=False),
            json.dumps({"reason": "compiler-artifact", "target": {"kind": ["lib"], "name": "x"},
                        "profile": {"test": False}, "executable": None, "manifest_path": "/r/x/Cargo.toml"}),
            json.dumps({"reason": "build-finished", "success": True}),
            "not json",
        ])
        got = tr.parse_artifacts(out, Path("/r"))
        self.assertEqual(got, [
            ("crates/cli/knee", "/r/crates/cli", "/r/target/debug/deps/knee-1"),
            ("crates/engine/lib", "/r/crates/engine", "/r/target/debug/deps/e-2"),
            ("crates/cli/bin-loadlab", "/r/crates/cli", "/r/target/debug/deps/loadlab-3"),
        ])


def outcome(key, log, code=0, label="", seconds=1.0):
    job = tr.Job(key, "/", ["x"], {}, label)
    return tr.Outcome(job, seconds, code, log)


class Tally(unittest.TestCase):
    def test_counts_every_binary_and_names_each_failed_and_ignored_test(self):
        text, ok = tr.tally([
            outcome("crates/cli/a", "test x ... ok\ntest result: ok. 3 passed; 0 failed; 0 ignored; 0 measured\n"),
            outcome("crates/cli/b", "test y ... FAILED\ntest z ... ignored, needs nginx\n"
                    "test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured\n", code=101),
        ])
        self.assertFalse(ok)
        self.assertIn("tests: 4 passed, 1 failed, 1 ignored, in 2 binaries", text)
        self.assertIn("FAILED crates/cli/b: y", text)
        self.assertIn("IGNORED crates/cli/b: z, needs nginx", text)

    def test_a_crash_or_a_silent_binary_is_not_a_pass(self):
        _, ok = tr.tally([outcome("crates/cli/a", "thread main panicked before any test\n", code=101)])
        self.assertFalse(ok)
        text, ok = tr.tally([outcome("crates/cli/a", "nothing\n", code=0)])
        self.assertFalse(ok)
        self.assertIn("printed no test result", text)

    def test_all_passed(self):
        text, ok = tr.tally([outcome("crates/x/lib", "test result: ok. 2 passed; 0 failed; 0 ignored;\n",
                                     label="LOADLAB_IO=uring")])
        self.assertTrue(ok, text)


class Order(unittest.TestCase):
    def test_longest_first_from_the_runs_own_times_then_the_expected(self):
        jobs = [tr.Job(k, "/", ["x"]) for k in ("crates/cli/new", "crates/cli/compare", "crates/cli/knee")]
        keys = [j.key for j in tr.order(jobs, {})]
        self.assertEqual(keys, ["crates/cli/knee", "crates/cli/compare", "crates/cli/new"])
        keys = [j.key for j in tr.order(jobs, {"crates/cli/new": 500.0})]
        self.assertEqual(keys[0], "crates/cli/new")


class Schedule(unittest.TestCase):
    def test_the_pool_runs_at_once_and_the_alone_ones_one_by_one_after_it(self):
        import tempfile
        # The three of the pool meet at a barrier (they can only pass it together); the
        # alone ones count who else is running.
        barrier = threading.Barrier(3, timeout=30)
        lock = threading.Lock()
        running = set()
        seen_beside = {}
        finished = []

        class Probe(tr.Runner):
            def _run(self, job, n):
                with lock:
                    seen_beside[job.key] = set(running)
                    running.add(job.key)
                if job.key.startswith("p/"):
                    barrier.wait()
                else:
                    time.sleep(0.05)
                    with lock:
                        seen_beside[job.key] |= running - {job.key}
                with lock:
                    running.discard(job.key)
                    finished.append(job.key)
                    self.outcomes.append(tr.Outcome(job, 0.0, 0, ""))

        jobs = [tr.Job(k, "/", ["x"], alone=k.startswith("a/")) for k in ("a/x", "p/1", "a/y", "p/2", "p/3")]
        with tempfile.TemporaryDirectory() as d:
            Probe(3, Path(d)).run(jobs, {})
        self.assertFalse(barrier.broken, "the pool's three did not run at once")
        self.assertEqual(sorted(finished[:3]), ["p/1", "p/2", "p/3"], finished)
        self.assertEqual(seen_beside["a/x"], set())
        self.assertEqual(seen_beside["a/y"], set())


class Leftovers(unittest.TestCase):
    def test_what_a_job_leaves_running_is_stopped_and_named_in_its_log(self):
        import os
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            pidfile = Path(d) / "pid"
            job = tr.Job("j", d, ["bash", "-c", f"sleep 60 & echo $! > {pidfile}; exit 0"])
            runner = tr.Runner(1, Path(d))
            runner.run([job], {})
            pid = int(pidfile.read_text())
            # Killed: gone, or a zombie until its parent (init) reaps it.
            for _ in range(100):
                try:
                    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                except FileNotFoundError:
                    break
                if state == "Z":
                    break
                time.sleep(0.05)
            else:
                os.kill(pid, 9)
                self.fail(f"sleep {pid} still running after its job ended")
            (outcome,) = runner.outcomes
            self.assertEqual(outcome.code, 0)
            self.assertIn(f"left 1 processes running (sleep {pid}): stopped", outcome.log)


class Split(unittest.TestCase):
    def setUp(self):
        self.saved = set(tr.ALONE)
        tr.ALONE.clear()
        tr.ALONE.update({"crates/cli/whole", "crates/cli/part::t_one", "crates/cli/part::t_two"})

    def tearDown(self):
        tr.ALONE.clear()
        tr.ALONE.update(self.saved)

    def test_a_binary_runs_whole_alone_whole_in_the_pool_or_split_by_test(self):
        [whole] = tr.split("crates/cli/whole", "/", ["exe"], {}, "", False)
        self.assertTrue(whole.alone)
        [pooled] = tr.split("crates/cli/other", "/", ["exe"], {}, "", False)
        self.assertFalse(pooled.alone)
        alone, rest = tr.split("crates/cli/part", "/", ["exe", "--include-ignored"], {"A": "1"}, "A=1", False)
        self.assertEqual(alone.argv, ["exe", "--include-ignored", "--exact", "t_one", "t_two"])
        self.assertTrue(alone.alone)
        self.assertEqual(rest.argv, ["exe", "--include-ignored", "--skip", "t_one", "--skip", "t_two"])
        self.assertFalse(rest.alone)
        self.assertEqual((rest.env, rest.label), ({"A": "1"}, "A=1"))

    def test_with_the_users_filter_a_split_binary_runs_whole_alone(self):
        [job] = tr.split("crates/cli/part", "/", ["exe", "knee"], {}, "", True)
        self.assertTrue(job.alone)
        self.assertEqual(job.argv, ["exe", "knee"])


if __name__ == "__main__":
    unittest.main()

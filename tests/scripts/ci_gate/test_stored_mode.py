"""scripts/lib/ci_gate/stored_mode.py through scripts/ci-bench: the stored baseline's exit codes,
--expected-not-ok that never excuses a row the baseline ran, a baseline that cannot judge a row,
inputs that are the run's own outputs, --update-baseline's refusals, a signal to the gate, and a
commit that does not build.

Run: python3 -m unittest -v test_stored_mode (from tests/scripts/ci_gate), with DDPBENCH_BINARY set.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

from stand_in_repository import STAND_IN, StandInRepository

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[3]))
CI_BENCH = SOURCE / "scripts" / "ci-bench"
BASELINE = json.loads((SOURCE / "scripts" / "ci-bench.baseline.json").read_text())
# Loose on purpose: these tests are about exit codes, not about the committed numbers.
LOOSE = ["--threshold", "0.5", "--min-vs-pytorch", "0.5"]


def without_row(doc: dict, row: str) -> dict:
    out = copy.deepcopy(doc)
    out["runs"] = [r for r in out["runs"] if r["name"] != row]
    out.pop("summary", None)
    return out


def slowed(doc: dict, row: str, factor: float) -> dict:
    """`row` `factor` times slower in every repetition, the rest as it was."""
    out = copy.deepcopy(doc)
    for r in out["runs"]:
        if r["name"] == row and r["status"] == "ok":
            r["train_time_s"] *= factor
            for rate in ("images_per_s", "steady_images_per_s"):
                r[rate] /= factor
    out.pop("summary", None)
    return out


def with_status(doc: dict, row: str, repetitions: range, status: str) -> dict:
    out = copy.deepcopy(doc)
    for r in out["runs"]:
        if r["name"] == row and r["repetition"] in repetitions:
            r["status"], r["reason"] = status, f"{status} on purpose (test)"
    out.pop("summary", None)
    return out


class GateCase(unittest.TestCase):
    """A scratch folder, the committed baseline in it, and scripts/ci-bench on the real ddpbench."""

    def setUp(self) -> None:
        if not os.environ.get("DDPBENCH_BINARY"):
            self.skipTest("DDPBENCH_BINARY is not set")
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-stored-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.base = self.write("base.json", BASELINE)
        self.out = self.dir / "out"

    def write(self, name: str, doc: dict | str) -> Path:
        path = self.dir / name
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        return path

    def gate(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        env = env or {k: v for k, v in os.environ.items() if not k.startswith("DDPBENCH_CI_")}
        return subprocess.run([str(CI_BENCH), "--out-dir", str(self.out), *args], capture_output=True, text=True,
                              check=False, timeout=300, env=env)

    def verdict(self) -> str | None:
        path = self.out / "verdict.txt"
        return path.read_text().strip() if path.exists() else None


class ExitCodeTest(GateCase):
    def test_exit_codes(self) -> None:
        same = self.gate("--baseline", str(self.base), "--current", str(self.base), *LOOSE)
        self.assertEqual(same.returncode, 0, same.stdout + same.stderr)
        self.assertIn("No regression", same.stdout)
        self.assertEqual(self.verdict(), "no regression")
        lost = self.write("lost.json", without_row(BASELINE, "ddp-2"))
        for flags in ([], ["--bisect"], ["--expected-not-ok", "ddp-2,ddp-2.torch"]):
            # A row the baseline ran is a regression when it is missing now: "expected not to run
            # here" never excuses it (the attack's case: a candidate failing ddp-2 every time passed).
            regression = self.gate(*flags, "--baseline", str(self.base), "--current", str(lost), *LOOSE)
            self.assertEqual(regression.returncode, 1, f"{flags}: {regression.stdout + regression.stderr}")
            self.assertIn("ddp-2 (faithful): ran in the baseline, absent now", regression.stdout)
            self.assertEqual(self.verdict(), "regression")
        other = copy.deepcopy(BASELINE)
        other["environment"]["cpu_cores"] += 62
        other = self.write("other.json", other)
        for flags, code, usage in (([], 2, 2), (["--bisect"], 125, 128)):
            mismatch = self.gate(*flags, "--baseline", str(self.base), "--current", str(other), *LOOSE)
            self.assertEqual(mismatch.returncode, code, mismatch.stderr)
            self.assertIn("CPU cores", mismatch.stderr + mismatch.stdout)
            self.assertEqual(self.verdict(), "cannot judge")
            absent = self.gate(*flags, "--baseline", str(self.base), "--current", str(self.dir / "none.json"))
            self.assertEqual(absent.returncode, code, absent.stderr)
            self.assertIn("--current", absent.stderr)
            typo = self.gate(*flags, "--repat", "3")
            self.assertEqual(typo.returncode, usage, typo.stderr)
            self.assertIn("unrecognized arguments: --repat", typo.stderr)
            garbage = self.gate(*flags, "--baseline", str(self.write("g.json", "{\"runs\": ")), "--current", str(self.base))
            self.assertEqual(garbage.returncode, usage, garbage.stderr)
            self.assertIn("--baseline", garbage.stderr)

    def test_the_default_gate_times_every_row(self) -> None:
        # dp-2's own twin cannot run on CPUs: it is timed against the twin that ran nearest it.
        same = self.gate("--baseline", str(self.base), "--current", str(self.base))
        self.assertEqual(same.returncode, 0, same.stdout + same.stderr)
        self.assertIn("dp-2 (faithful): normalised by ddp-2.torch", same.stdout)
        slow = self.write("slow.json", slowed(BASELINE, "dp-2", 3.0))
        caught = self.gate("--baseline", str(self.base), "--current", str(slow))
        self.assertEqual(caught.returncode, 1, caught.stdout + caught.stderr)
        self.assertRegex(caught.stdout, r"\| dp-2 \(faithful\) \| train_time_s / twin \| [0-9.]+ \| [0-9.]+ \| 3\.000 \| REGRESSION")

    def test_a_baseline_that_cannot_judge_a_row_is_refused(self) -> None:
        for name, doc in (("lacking", without_row(BASELINE, "dp-2")),
                          ("never-ok", with_status(BASELINE, "dp-2", range(5), "failed"))):
            path = self.write(f"{name}.json", doc)
            for flags, code in (([], 2), (["--bisect"], 128)):
                refused = self.gate(*flags, "--baseline", str(path), "--current", str(self.base), *LOOSE)
                self.assertEqual(refused.returncode, code, refused.stdout + refused.stderr)
                self.assertIn("never ran dp-2", refused.stderr)
        accepted = self.gate("--baseline", str(self.write("x.json", with_status(BASELINE, "dp-2", range(5), "failed"))),
                             "--current", str(self.base), "--expected-not-ok", "dp-2", *LOOSE)
        self.assertNotIn("never ran dp-2", accepted.stderr, "a row expected not to run here was held against the baseline")


class OwnOutputsTest(GateCase):
    """The gate never reads what it writes: an input inside --out-dir is refused before anything
    runs (the attack: --baseline at the last run's results.json was overwritten and compared with
    itself)."""

    def test_an_input_inside_the_out_dir_is_refused_untouched(self) -> None:
        self.out.mkdir()
        (self.out / ".ddpbench-ci-bench-out").write_text(f"made by scripts/ci-bench (--out-dir): the gate replaces its "
                                                        f"own files here\nfolder {self.out.resolve()}\n")
        (self.out / "current").mkdir()
        (self.out / "current" / ".ddpbench-ci-bench-rounds").write_text("")
        inside = self.out / "current" / "results.json"
        inside.write_text(json.dumps(BASELINE))
        sweep = self.out / "current" / "sweep.json"
        shutil.copy2(SOURCE / "scripts" / "ci-bench.sweep.json", sweep)
        for args in (["--baseline", str(inside)], ["--baseline", str(self.base), "--current", str(inside)],
                     ["--sweep-file", str(sweep)]):
            refused = self.gate(*args)
            self.assertEqual(refused.returncode, 2, refused.stderr)
            self.assertIn("lies inside --out-dir", refused.stderr)
            self.assertEqual(json.loads(inside.read_text()), BASELINE)

    def test_update_baseline_replaces_only_a_result_file_and_never_its_input(self) -> None:
        mine = self.write("notes.json", '{"mine": true}')
        refused = self.gate("--update-baseline", "--current", str(self.base), "--baseline", str(mine))
        self.assertEqual(refused.returncode, 2, refused.stderr)
        self.assertIn("exists and is not a result file of the gate's rows", refused.stderr)
        self.assertEqual(mine.read_text(), '{"mine": true}')
        same = self.gate("--update-baseline", "--current", str(self.base), "--baseline", str(self.base))
        self.assertEqual(same.returncode, 2, same.stderr)
        self.assertIn("is the file --current", same.stderr)
        target = self.write("old-baseline.json", BASELINE)
        (self.dir / "old-baseline.json.ci-bench-tmp").symlink_to(mine)  # a link at a temporary name leads nowhere
        done = self.gate("--update-baseline", "--current", str(self.base), "--baseline", str(target))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(mine.read_text(), '{"mine": true}')
        self.assertFalse(target.is_symlink())
        self.assertIsNone(self.verdict(), "an update is no verdict")


class InputsTest(GateCase):
    """What the gate reads is a plain file, read once: a FIFO or a pipe is refused, never waited on."""

    def test_a_fifo_or_a_pipe_is_refused_at_once(self) -> None:
        fifo = self.dir / "fifo.json"
        os.mkfifo(fifo)
        for args, says in ((["--baseline", str(fifo), "--current", str(self.base)], "--baseline"),
                           (["--baseline", str(self.base), "--current", str(fifo)], "--current"),
                           (["--sweep-file", str(fifo)], "--sweep-file"),
                           (["--baseline", "/dev/stdin", "--current", str(self.base)], "not a plain file")):
            with self.subTest(args=args):
                done = subprocess.run([str(CI_BENCH), "--out-dir", str(self.out), *args], capture_output=True,
                                      text=True, check=False, timeout=60, stdin=subprocess.PIPE)
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertIn(says, done.stderr)

    def test_no_compare_needs_no_baseline(self) -> None:
        stand_in = StandInRepository(self.dir / "repo-folder")
        done = stand_in.gate("--no-compare", "--repeat", "2", "--baseline", str(self.dir / "none.json"))
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertTrue((stand_in.repo / "results" / "ci-bench" / "current" / "results.json").is_file())
        # A row that failed is the measurement's exit 1, never 0 (it was 0, under --bisect too).
        failed = stand_in.gate("--no-compare", "--repeat", "2", faults={"candidate": {"sweep": "failed"}})
        self.assertEqual(failed.returncode, 1, failed.stdout + failed.stderr)
        self.assertIn("a row failed", failed.stderr)
        self.assertFalse((stand_in.repo / "results" / "ci-bench" / "verdict.txt").exists(), "nothing was judged")
        # So with a file measured before (--current), whose row failed (it was 0).
        measured = self.dir / "failed-row.json"
        doc = json.loads((stand_in.repo / "results" / "ci-bench" / "current" / "results.json").read_text())
        measured.write_text(json.dumps(doc))
        given = stand_in.gate("--no-compare", "--current", str(measured), "--out-dir", str(self.dir / "given"))
        self.assertEqual(given.returncode, 1, given.stdout + given.stderr)
        # A row that did not run at all is no measurement of it either (the thirteenth attack: 0,
        # and the bisect recipe's good.json lacked the row).
        missing = stand_in.gate("--no-compare", "--repeat", "2", faults={"candidate": {"sweep": "missing-row"}})
        self.assertEqual(missing.returncode, 1, missing.stdout + missing.stderr)
        self.assertIn("absent: planned by the sweep, not in the file", missing.stderr)

    def test_rows_whose_names_hold_a_dot_are_the_sweep_files(self) -> None:
        stand_in = StandInRepository(self.dir / "repo-folder")
        sweep = stand_in.repo / "scripts" / "ci-bench.sweep.json"
        doc = json.loads(sweep.read_text())
        doc["rows"] = [dict(doc["rows"][0], name="ddp.2")]
        sweep.write_text(json.dumps(doc))
        baseline = stand_in.stored_baseline(self.dir / "dot-baseline.json", repeat=3)
        self.assertEqual(stand_in.gate("--baseline", str(baseline), "--repeat", "3", "--min-vs-pytorch", "0.5")
                         .returncode, 0)
        target = self.dir / "new.json"
        updated = stand_in.gate("--update-baseline", "--baseline", str(target), "--repeat", "3", "--min-vs-pytorch",
                                "0.5")
        self.assertEqual(updated.returncode, 0, updated.stdout + updated.stderr)


class UpdateBaselineTest(GateCase):
    """--update-baseline refuses a file the gate then could not time, or that lacks a row or a
    repetition (but --expected-not-ok's): what did not run in the baseline is never compared again."""

    def test_rows_that_did_not_run_are_refused(self) -> None:
        target = self.dir / "new-baseline.json"
        for status in ("failed", "skipped", "interrupted"):
            broken = self.write(f"{status}.json", with_status(BASELINE, "ddp-2", range(3, 4), status))
            refused = self.gate("--update-baseline", "--current", str(broken), "--baseline", str(target))
            self.assertEqual(refused.returncode, 2, refused.stdout + refused.stderr)
            self.assertIn(f"ddp-2 (faithful) repetition 3: {status}: {status} on purpose", refused.stderr)
            self.assertFalse(target.exists(), "a refused baseline was written")
        expected = self.gate("--update-baseline", "--current", str(broken), "--baseline", str(target),
                             "--expected-not-ok", "ddp-2,dp-2.torch")
        self.assertEqual(expected.returncode, 0, expected.stdout + expected.stderr)
        self.assertTrue(target.exists())
        target.unlink()
        plain = self.gate("--update-baseline", "--current", str(self.base), "--baseline", str(target))
        self.assertEqual(plain.returncode, 0, plain.stdout + plain.stderr)
        nothing_expected = self.gate("--update-baseline", "--current", str(self.base), "--baseline",
                                     str(self.dir / "x.json"), "--expected-not-ok", "")
        self.assertEqual(nothing_expected.returncode, 2, nothing_expected.stderr)
        self.assertIn("dp-2.torch (faithful) repetition 0: skipped", nothing_expected.stderr)
        cut = self.write("cut.json", without_row(BASELINE, "dp-2"))
        refused_cut = self.gate("--update-baseline", "--current", str(cut), "--baseline", str(self.dir / "c.json"))
        self.assertEqual(refused_cut.returncode, 2, refused_cut.stderr)
        self.assertIn("dp-2 (faithful) repetition 4: absent: planned by the sweep, not in the file", refused_cut.stderr)

    def test_a_file_lacking_a_row_of_the_gates_sweep_file_is_refused(self) -> None:
        # The second attack on the old gate: a baseline without dp-2 (a sweep run with --rows) was
        # taken, and dp-2 three times slower then passed, "only in the current file".
        lacking = copy.deepcopy(BASELINE)
        lacking["runs"] = [r for r in lacking["runs"] if not r["name"].startswith("dp-2")]
        lacking["sweep"]["rows"] = [r for r in lacking["sweep"]["rows"] if not r["name"].startswith("dp-2")]
        lacking.pop("summary", None)
        path = self.write("lacking.json", lacking)
        target = self.dir / "new-baseline.json"
        refused = self.gate("--update-baseline", "--current", str(path), "--baseline", str(target),
                            "--expected-not-ok", "")
        self.assertEqual(refused.returncode, 2, refused.stdout + refused.stderr)
        self.assertIn("lacks rows the gate's sweep file", refused.stderr)
        self.assertFalse(target.exists(), "a baseline lacking a gated row was written")

    def test_a_file_the_gate_cannot_time_or_read_is_refused_in_one_line(self) -> None:
        target = self.dir / "new-baseline.json"
        untimed = copy.deepcopy(BASELINE)
        for run in untimed["runs"]:
            if run["name"] == "single":
                run["train_time_s"] = None
        untimed.pop("summary", None)
        no_status = copy.deepcopy(BASELINE)
        del no_status["runs"][0]["status"]
        words = copy.deepcopy(BASELINE)
        words["sweep"]["repeat"] = "five"
        for name, doc, says in (("untimed.json", untimed, "single (faithful)"), ("no-status.json", no_status, "status"),
                                ("words.json", words, "five")):
            path = self.write(name, doc)
            refused = self.gate("--update-baseline", "--current", str(path), "--baseline", str(target))
            self.assertEqual(refused.returncode, 2, refused.stdout + refused.stderr)
            self.assertIn(f"the gate cannot time {path}", refused.stderr)
            self.assertIn(says, refused.stderr)
            self.assertNotIn("Traceback", refused.stderr)
            self.assertFalse(target.exists())

    def test_a_compare_that_passes_a_malformed_file_does_not_make_it_the_baseline(self) -> None:
        # The candidate's compare says "No regression." to anything: the gate's own reading of the
        # file still names it, in one line.
        wrapper = self.dir / "lying-ddpbench"
        wrapper.write_text(f"#!/bin/sh\nSTAND_IN_BUILD=x exec {sys.executable} {STAND_IN} \"$@\"\n")
        wrapper.chmod(0o755)
        env = dict(os.environ, DDPBENCH_BINARY=str(wrapper), STAND_IN_REAL=os.environ["DDPBENCH_BINARY"],
                   STAND_IN_STATE=str(self.dir), STAND_IN_FAULTS=json.dumps({"x": {"compare": {"floor": "lie"}}}))
        no_status = copy.deepcopy(BASELINE)
        del no_status["runs"][0]["status"]
        path = self.write("no-status.json", no_status)
        target = self.dir / "new-baseline.json"
        refused = self.gate("--update-baseline", "--current", str(path), "--baseline", str(target), env=env)
        self.assertEqual(refused.returncode, 2, refused.stdout + refused.stderr)
        self.assertIn(f"--update-baseline: {path} is not a result file the gate can read", refused.stderr)
        self.assertNotIn("Traceback", refused.stderr)
        self.assertFalse(target.exists())


class MeasuredTest(unittest.TestCase):
    """The stored mode measuring with a stand-in candidate: a signal to the gate stops its sweep,
    and a commit that does not build cannot be judged."""

    def setUp(self) -> None:
        if not os.environ.get("DDPBENCH_BINARY"):
            self.skipTest("DDPBENCH_BINARY is not set")
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-stored-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.stand_in = StandInRepository(self.dir)

    def test_a_signal_to_the_gate_stops_its_sweep(self) -> None:
        baseline = self.stand_in.stored_baseline(self.dir / "baseline.json")
        state = self.stand_in.state
        shutil.rmtree(state, ignore_errors=True)
        state.mkdir()
        env = self.stand_in.env({"candidate": {"sweep": "hang"}}, DDPBENCH_CI_SWEEP_TIMEOUT_S="600")
        for signum, code in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
            (state / "pids").unlink(missing_ok=True)
            gate = subprocess.Popen(["scripts/ci-bench", "--baseline", str(baseline)], cwd=self.stand_in.repo, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(200):
                if (state / "pids").exists() and (state / "pids").read_text().strip():
                    break
                time.sleep(0.1)
            gate.send_signal(signum)
            _, stderr = gate.communicate(timeout=60)
            self.assertEqual(gate.returncode, code, stderr)
            self.assertIn("no verdict", stderr)
            pid = int((state / "pids").read_text().split()[0])
            status = Path(f"/proc/{pid}/status")
            self.assertTrue(not status.exists() or "\nState:\tZ" in status.read_text(), "the sweep outlived its gate")
            self.assertFalse((self.stand_in.repo / "results" / "ci-bench" / "verdict.txt").exists())

    def test_a_commit_that_does_not_build_is_skipped_under_bisect(self) -> None:
        (self.stand_in.repo / "broken").write_text("")
        env = self.stand_in.env()
        env.pop("DDPBENCH_BINARY")
        for flags, code in (([], 2), (["--bisect"], 125)):
            done = self.stand_in.gate(*flags, "--current", str(self.dir / "x.json"), env=env)
            self.assertEqual(done.returncode, code, done.stderr)
            self.assertIn("the set-up or build failed", done.stderr)
            self.assertIn("this commit does not compile", done.stderr)
            self.assertEqual((self.stand_in.repo / "results" / "ci-bench" / "verdict.txt").read_text(), "cannot judge\n")


if __name__ == "__main__":
    unittest.main()

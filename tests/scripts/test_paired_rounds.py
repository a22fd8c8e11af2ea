"""scripts/lib/paired_rounds.py, the rounds of scripts/ci-bench --against: the random order
(both orders of the two builds occur, a row's two runs are back to back, a seed reproduces the
order), the adaptive stop (after --min-rounds only undecided rows run again, up to
--max-rounds), and the verdicts that reach the exit code, on stand-in builds whose times are
known (tests/scripts/fake_ddpbench.py) and the real `ddpbench compare --paired`.

Run: python3 -m unittest -v test_paired_rounds (from tests/scripts), with DDPBENCH_BINARY set.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from collections import Counter
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
PAIRED_ROUNDS = SOURCE / "scripts" / "lib" / "paired_rounds.py"
FAKE = Path(__file__).resolve().parent / "fake_ddpbench.py"
sys.path.insert(0, str(PAIRED_ROUNDS.parent))
import paired_rounds  # noqa: E402

ROWS = ["single", "ddp-2", "dp-2"]


class RoundOrderTest(unittest.TestCase):
    def test_each_round_runs_every_row_once_per_build_back_to_back(self) -> None:
        for round_index in range(10):
            order = paired_rounds.round_order(ROWS, ["baseline", "candidate"], seed=3, round_index=round_index)
            self.assertEqual(Counter(order), Counter((row, arm) for row in ROWS for arm in ("baseline", "candidate")))
            for first, second in zip(order[::2], order[1::2]):
                self.assertEqual(first[0], second[0], f"round {round_index}: a row's two runs are not adjacent: {order}")

    def test_both_orders_occur_and_the_rows_are_shuffled(self) -> None:
        orders = [paired_rounds.round_order(ROWS, ["baseline", "candidate"], seed=11, round_index=r) for r in range(24)]
        for row in ROWS:
            firsts = Counter(next(arm for r, arm in order if r == row) for order in orders)
            self.assertGreaterEqual(firsts["baseline"], 4, f"{row}: {firsts}")
            self.assertGreaterEqual(firsts["candidate"], 4, f"{row}: {firsts}")
        self.assertGreater(len({tuple(r for r, _ in order[::2]) for order in orders}), 2, "the rows never change order")

    def test_each_block_of_two_rounds_runs_each_rows_builds_in_both_orders(self) -> None:
        # Unbalanced, an effect of running first in a pair was read as a change: the trimmed mean
        # cut the rounds of the minority order away (the attack: 9 false alarms in 30).
        for block in range(12):
            first, second = (paired_rounds.round_order(ROWS, ["baseline", "candidate"], seed=9, round_index=r)
                             for r in (2 * block, 2 * block + 1))
            for row in ROWS:
                self.assertEqual([a for r, a in first if r == row], [a for r, a in second if r == row][::-1])
        # Which build opens a block is random, not a fixed alternation.
        openers = Counter(next(a for r, a in paired_rounds.round_order(ROWS, ["baseline", "candidate"], 9, 2 * b)
                               if r == "ddp-2") for b in range(12))
        self.assertEqual(set(openers), {"baseline", "candidate"}, openers)

    def test_a_seed_reproduces_the_order_and_another_seed_changes_it(self) -> None:
        def orders(seed: int) -> list[list[tuple[str, str]]]:
            return [paired_rounds.round_order(ROWS, ["baseline", "candidate"], seed, r) for r in range(12)]

        self.assertEqual(orders(5), orders(5))
        self.assertNotEqual(orders(5), orders(6))


class StandInBuilds(unittest.TestCase):
    """Two stand-in builds (fake_ddpbench.py) and the rounds run on them."""

    def setUp(self) -> None:
        if not os.environ.get("DDPBENCH_BINARY"):
            self.skipTest("DDPBENCH_BINARY is not set")
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-paired-rounds-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.sweep = self.dir / "sweep.json"
        self.sweep.write_text(json.dumps({"name": "ci-bench", "rows": [{"name": row} for row in ROWS]}))

    def builds(self, rows: dict[str, dict[str, object]], first_penalty: float = 0.0,
               compare: dict[str, dict[str, str]] | None = None) -> tuple[Path, Path, Path]:
        """Two stand-in builds with these times (and compare misbehaving as `compare` says:
        fake_ddpbench.py); their run log."""
        state = self.dir / "state"
        shutil.rmtree(state, ignore_errors=True)
        state.mkdir()
        log = self.dir / "runs.log"
        log.unlink(missing_ok=True)
        os.environ["FAKE_DDPBENCH_SPEC"] = json.dumps({"log": str(log), "state": str(state), "rows": rows,
                                                       "first_penalty": first_penalty, "compare": compare or {}})
        paths = []
        for build in ("baseline", "candidate"):
            path = self.dir / f"{build}-ddpbench"
            path.write_text(f"#!/bin/sh\nFAKE_DDPBENCH_BUILD={build} exec {sys.executable} {FAKE} \"$@\"\n")
            path.chmod(0o755)
            paths.append(path)
        return paths[0], paths[1], log

    def run_rounds(self, baseline: Path, candidate: Path, *args: str, seed: int = 1, twins: bool = False,
                   lockstep: bool = False) -> subprocess.CompletedProcess[str]:
        """The rounds back to back (--no-lockstep): the stand-ins take no turns (test_lockstep.py
        runs lockstep on real builds)."""
        out = self.dir / "out"
        shutil.rmtree(out, ignore_errors=True)
        return subprocess.run([sys.executable, str(PAIRED_ROUNDS), "--baseline-binary", str(baseline),
                               "--candidate-binary", str(candidate), "--sweep-file", str(self.sweep), "--out-dir",
                               str(out), "--seed", str(seed), "--twins" if twins else "--no-twins",
                               "--lockstep" if lockstep else "--no-lockstep", *args],
                              capture_output=True, text=True, check=False, timeout=300)

    @staticmethod
    def runs(log: Path) -> list[tuple[str, str]]:
        return [tuple(line.split()) for line in log.read_text().splitlines()]  # type: ignore[misc]


class PairedRoundsTest(StandInBuilds):

    def test_a_slowed_row_is_a_regression_after_the_first_rounds(self) -> None:
        baseline, candidate, log = self.builds({
            "single": {"baseline": [4.0, 0.01], "candidate": [4.0, 0.01]},
            "ddp-2": {"baseline": [8.0, 0.01], "candidate": [9.2, 0.01]},  # 15 % slower
            "dp-2": {"baseline": [6.0, 0.01], "candidate": [6.0, 0.01]}})
        done = self.run_rounds(baseline, candidate)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertRegex(done.stdout, r"ddp-2 \(faithful\) train_time_s: 1[45]\.\d % slower.*REGRESSION")
        self.assertEqual(Counter(row for _, row in self.runs(log)), {"single": 8, "ddp-2": 8, "dp-2": 8},
                         "every row was decided after 4 rounds, yet more ran")

    def test_unchanged_builds_pass_and_stop_at_the_first_look(self) -> None:
        baseline, candidate, log = self.builds({row: {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]}
                                                for row in ROWS})
        done = self.run_rounds(baseline, candidate)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertEqual(len(self.runs(log)), 4 * 2 * len(ROWS))
        self.assertIn("ci-bench: rounds run per row: single 4, ddp-2 4, dp-2 4", done.stderr)
        self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "no regression\n")

    def test_only_the_undecided_row_runs_again_up_to_the_cap(self) -> None:
        baseline, candidate, log = self.builds({
            "single": {"baseline": [4.0, 0.005], "candidate": [4.0, 0.005]},
            "ddp-2": {"baseline": [8.0, 0.3], "candidate": [8.0, 0.3]},  # too noisy to decide
            "dp-2": {"baseline": [6.0, 0.005], "candidate": [6.0, 0.005]}})
        done = self.run_rounds(baseline, candidate, "--max-rounds", "7")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        runs = self.runs(log)
        self.assertEqual(Counter(row for _, row in runs), {"single": 8, "ddp-2": 14, "dp-2": 8})
        self.assertEqual({row for _, row in runs[4 * 2 * len(ROWS):]}, {"ddp-2"})
        self.assertIn("ci-bench: rounds run per row: single 4, ddp-2 7, dp-2 4", done.stderr)
        self.assertRegex(done.stdout, r"ddp-2 \(faithful\) train_time_s: .*7 pairs")

    def test_the_run_order_is_random_per_round_and_the_seed_reproduces_it(self) -> None:
        spec = {row: {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]} for row in ROWS}
        baseline, candidate, log = self.builds(spec)
        self.run_rounds(baseline, candidate, "--min-rounds", "8", "--max-rounds", "8", seed=42)
        first = self.runs(log)
        baseline, candidate, log = self.builds(spec)
        self.run_rounds(baseline, candidate, "--min-rounds", "8", "--max-rounds", "8", seed=42)
        self.assertEqual(self.runs(log), first)
        baseline, candidate, log = self.builds(spec)
        self.run_rounds(baseline, candidate, "--min-rounds", "8", "--max-rounds", "8", seed=43)
        self.assertNotEqual(self.runs(log), first)
        pairs = [(a, b) for a, b in zip(first[::2], first[1::2])]
        self.assertTrue(all(a[1] == b[1] and a[0] != b[0] for a, b in pairs), first)
        self.assertEqual({a[0] for a, _ in pairs}, {"baseline", "candidate"}, "one build always ran first")
        order_file = [json.loads(line) for line in (self.dir / "out" / "order.jsonl").read_text().splitlines()]
        self.assertEqual(len(order_file), 8 * 2 * len(ROWS))

    def test_round_r_is_repetition_r_of_each_builds_file(self) -> None:
        baseline, candidate, _ = self.builds({row: {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]}
                                              for row in ROWS})
        self.run_rounds(baseline, candidate)
        for side in ("baseline", "candidate"):
            doc = json.loads((self.dir / "out" / f"{side}-rounds.json").read_text())
            reps = Counter((r["name"], r["repetition"]) for r in doc["runs"])
            self.assertEqual(reps, Counter({(row, r): 1 for row in ROWS for r in range(4)}))
            self.assertEqual(doc["sweep"]["repeat"], 4)

    def test_a_regression_found_at_one_look_stands_at_the_next(self) -> None:
        # The attack's case: single is a regression after round 4 and stops; ddp-2's fifth round
        # raises its p-value, which moves single's Holm p-value above the first look's alpha. A
        # regression at any look stands (each look spends its own share of alpha).
        five = {"times": [5.0] * 12}
        baseline, candidate, _ = self.builds({
            "single": {"baseline": five, "candidate": {"times": [5.6, 5.25, 5.5, 5.3]}},
            "ddp-2": {"baseline": five, "candidate": {"times": [5.26, 5.14, 5.25, 5.16, 4.9]}},
            "dp-2": {"baseline": five, "candidate": {"times": [5.0] * 12}}})
        self.sweep.write_text(json.dumps({"name": "ci-bench", "rows": [{"name": "single"}, {"name": "ddp-2"}]}))
        done = self.run_rounds(baseline, candidate, "--max-rounds", "5")
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("single (faithful) train_time_s was a regression after round 4", done.stdout)
        self.assertNotIn("No regression.", done.stdout)
        written = (self.dir / "out" / "paired.md").read_text()
        self.assertIn("was a regression after round 4", written)
        self.assertNotIn("No regression.", written)
        self.assertNotIn("single", (self.dir / "out" / "undecided.txt").read_text())
        self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "regression\n")

    def test_an_effect_of_running_first_is_no_regression(self) -> None:
        spec = {row: {"baseline": [5.0, 0.01], "candidate": [5.0, 0.01]} for row in ROWS}
        alarms = 0
        for seed in range(1, 7):
            baseline, candidate, _ = self.builds(spec, first_penalty=0.08)
            done = self.run_rounds(baseline, candidate, "--max-rounds", "8", seed=seed)
            self.assertIn(done.returncode, (0, 1), done.stderr)
            alarms += done.returncode
        self.assertEqual(alarms, 0, "the first run of each pair 8 % slower was read as a change")

    def test_a_candidate_whose_sweep_dies_or_writes_garbage_fails_the_gate(self) -> None:
        ok = [5.0, 0.005]
        for broken in ("crash", "garbage"):
            baseline, candidate, _ = self.builds({"single": {"baseline": ok, "candidate": broken},
                                                  "ddp-2": {"baseline": ok, "candidate": ok},
                                                  "dp-2": {"baseline": ok, "candidate": ok}})
            done = self.run_rounds(baseline, candidate)
            self.assertEqual(done.returncode, 1, broken + done.stderr)
            self.assertIn("the candidate build's sweep of row single", done.stderr)
            self.assertIn("the candidate fails the gate", done.stderr)
            # The baseline build's broken output cannot judge the candidate: bad input.
            baseline, candidate, _ = self.builds({"single": {"baseline": broken, "candidate": ok},
                                                  "ddp-2": {"baseline": ok, "candidate": ok},
                                                  "dp-2": {"baseline": ok, "candidate": ok}})
            done = self.run_rounds(baseline, candidate)
            self.assertEqual(done.returncode, 2, broken + done.stderr)
            self.assertIn("the baseline build's sweep of row single", done.stderr)

    def test_a_candidate_that_refuses_what_it_ran_before_fails(self) -> None:
        ok = [5.0, 0.005]
        baseline, candidate, _ = self.builds({"single": {"baseline": ok, "candidate": "refuse-after-first"},
                                              "ddp-2": {"baseline": ok, "candidate": ok},
                                              "dp-2": {"baseline": ok, "candidate": ok}})
        done = self.run_rounds(baseline, candidate)
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertIn("refused the input it ran in an earlier round", done.stderr)
        self.assertFalse((self.dir / "out" / "verdict.txt").exists())

    def test_a_row_the_baseline_never_ran_cannot_judge_the_candidate(self) -> None:
        ok = [5.0, 0.005]
        rows = {"single": {"baseline": "failed", "candidate": [6.5, 0.005]},
                "ddp-2": {"baseline": ok, "candidate": ok}, "dp-2": {"baseline": ok, "candidate": ok}}
        baseline, candidate, _ = self.builds(rows)
        done = self.run_rounds(baseline, candidate)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertIn("the baseline build never ran single in any round", done.stderr)
        baseline, candidate, _ = self.builds(rows)
        expected = self.run_rounds(baseline, candidate, "--expected-not-ok", "single")
        self.assertEqual(expected.returncode, 0, expected.stdout + expected.stderr)

    def test_a_terminated_gate_stops_its_runs_and_a_second_gate_waits_for_no_one(self) -> None:
        ok = [5.0, 0.005]
        baseline, candidate, _ = self.builds({row: {"baseline": ok, "candidate": ok} for row in ROWS})
        spec = json.loads(os.environ["FAKE_DDPBENCH_SPEC"])
        os.environ["FAKE_DDPBENCH_SPEC"] = json.dumps(dict(spec, sleep_s=30))
        out = self.dir / "out"
        command = [sys.executable, str(PAIRED_ROUNDS), "--baseline-binary", str(baseline), "--candidate-binary",
                   str(candidate), "--sweep-file", str(self.sweep), "--out-dir", str(out), "--seed", "1", "--no-twins",
                   "--no-lockstep"]
        first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pids = Path(spec["state"]) / "pids"
        for _ in range(100):
            if pids.exists() and pids.read_text().strip():
                break
            time.sleep(0.1)
        second = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
        self.assertEqual(second.returncode, 2, second.stderr)
        self.assertIn("another gate is writing into --out-dir", second.stderr)
        first.terminate()
        _, stderr = first.communicate(timeout=60)
        self.assertEqual(first.returncode, 130, stderr)
        self.assertIn("terminated", stderr)
        for pid in pids.read_text().split():
            with self.assertRaises(ProcessLookupError, msg=f"sweep {pid} outlived its gate"):
                os.kill(int(pid), 0)

    def test_a_build_that_takes_no_turns_cannot_be_timed_in_lockstep(self) -> None:
        # A build that ignores the coordinator runs beside the other build: nothing it timed is
        # comparable: a baseline build older than lockstep cannot judge (never a pass). The
        # stand-ins take no turns; the baseline build's rows are checked first.
        baseline, candidate, _ = self.builds({row: {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]}
                                              for row in ROWS})
        done = self.run_rounds(baseline, candidate, lockstep=True)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertRegex(done.stderr, r"the baseline build's row \S+ ran without taking turns \(no lockstep_wait_s")
        self.assertIn("--round-level", done.stderr)
        self.assertFalse((self.dir / "out" / "verdict.txt").exists())
        # (A candidate that takes no turns fails: test_lockstep.py, on the real ddpbench.)

    def test_bad_rounds_are_bad_input(self) -> None:
        baseline, candidate, _ = self.builds({row: {"baseline": [5.0, 0.0], "candidate": [5.0, 0.0]} for row in ROWS})
        for args, message in ((["--min-rounds", "1"], "--min-rounds must be 2 or more"),
                              (["--min-rounds", "5", "--max-rounds", "4"], "at most --max-rounds")):
            done = self.run_rounds(baseline, candidate, *args)
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn(message, done.stderr)
        for args, message in ((["--threshold", "nan"], "--threshold must be a number in [0, 1)"),
                              (["--threshold", "1"], "--threshold must be a number in [0, 1)"),
                              (["--threshold", "x"], "--threshold must be a number in [0, 1)"),
                              (["--alpha", "0"], "--alpha must be a number in (0, 1)"),
                              (["--alpha", "2"], "--alpha must be a number in (0, 1)"),
                              (["--max-rounds", "101"], "--max-rounds at most 100"),
                              (["--min-rounds", "four"], "--min-rounds must be a non-negative integer"),
                              (["--seed", "-1"], "--seed must be a non-negative integer"),
                              (["--twins", "--floor", "0"], "--floor (--min-vs-pytorch) must be a number in (0, inf)"),
                              (["--twins"], "--floor is needed with twins"),
                              (["--floor-metric", "speed"], "--floor-metric: 'speed' must name"),
                              (["--metric", "bogus"], "--metric: 'bogus' must name"),
                              (["--metric", "test_accuracy"], "test_accuracy is no timing"),
                              (["--metric", "train_time_s,train_time_s"], "at most once"),
                              (["--allow-missing", "no-such-row"], "--allow-missing: the sweep file has no row")):
            done = self.run_rounds(baseline, candidate, *args)
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn(message, done.stderr)
        self.assertFalse((self.dir / "runs.log").exists(), "rounds ran before the settings were checked")
        (self.dir / "a-file").write_text("")
        done = subprocess.run([sys.executable, str(PAIRED_ROUNDS), "--baseline-binary", str(baseline),
                               "--candidate-binary", str(candidate), "--sweep-file", str(self.sweep), "--out-dir",
                               str(self.dir / "a-file" / "out"), "--seed", "1", "--no-twins"], capture_output=True,
                              text=True, check=False, timeout=60)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("--out-dir", done.stderr)
        self.sweep.write_text(json.dumps({"rows": [{"name": "single"}, {"name": "single"}]}))
        done = self.run_rounds(baseline, candidate)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("must name each row once", done.stderr)


class CandidateRefusalTest(StandInBuilds):
    """A candidate whose sweep refuses (exit 2) a row the baseline build accepts fails the gate
    (exit 1): the input is good. Where both refuse it, or only the baseline build does, the gate
    cannot judge (exit 2; 125 under --bisect)."""

    def setUp(self) -> None:
        super().setUp()
        self.sweep.write_text(json.dumps({"name": "ci-bench", "rows": [{"name": "single"}]}))

    @staticmethod
    def seed_where(first: str) -> int:
        """A seed whose first round runs `first` build first."""
        return next(seed for seed in range(1, 100)
                    if paired_rounds.round_order(["single"], ["baseline", "candidate"], seed, 0)[0][1] == first)

    def count(self, build: str) -> int:
        path = self.dir / "state" / f"{build}.single.count"
        return int(path.read_text()) if path.exists() else 0

    def test_a_candidate_refusing_what_the_baseline_build_accepts_fails(self) -> None:
        for first in ("baseline", "candidate"):
            baseline, candidate, _ = self.builds({"single": {"baseline": [5.0, 0.005], "candidate": "refuse"}})
            done = self.run_rounds(baseline, candidate, seed=self.seed_where(first))
            self.assertEqual(done.returncode, 1, f"{first} first: {done.stdout + done.stderr}")
            self.assertIn("the candidate build's sweep of row single", done.stderr)
            self.assertIn("which the baseline build accepted", done.stderr)
            self.assertIn("the candidate fails the gate", done.stderr)
            self.assertEqual(self.count("baseline"), 1, f"{first} first: the baseline build ran the row once, to tell")
            self.assertFalse((self.dir / "out" / "verdict.txt").exists())

    def test_an_input_both_builds_refuse_or_only_the_baseline_build_refuses_cannot_be_judged(self) -> None:
        for rows in ({"single": {"baseline": "refuse", "candidate": "refuse"}},
                     {"single": {"baseline": "refuse", "candidate": [5.0, 0.005]}}):
            for first in ("baseline", "candidate"):
                baseline, candidate, _ = self.builds(rows)
                done = self.run_rounds(baseline, candidate, seed=self.seed_where(first))
                self.assertEqual(done.returncode, 2, f"{rows} {first} first: {done.stdout + done.stderr}")
                self.assertIn("the baseline build's sweep of row single", done.stderr)
                self.assertNotIn("the candidate fails", done.stderr)


class UndecidedTest(StandInBuilds):
    """Rows undecided below the cap: an older compare says so with exit 0 and its undecided rows, a
    newer one with exit 2 and "Undecided below the cap". Either way the rounds go on while the
    judge names undecided rows, and two builds that say it each their own way agree."""

    NOISY = {"single": {"baseline": [4.0, 0.005], "candidate": [4.0, 0.005]},
             "ddp-2": {"baseline": [8.0, 0.3], "candidate": [8.0, 0.3]},  # too noisy to decide before the cap
             "dp-2": {"baseline": [6.0, 0.005], "candidate": [6.0, 0.005]}}

    def test_an_older_and_a_newer_compare_agree_on_undecided_rows_and_the_rounds_go_on(self) -> None:
        for judge, accused in (("old", "new"), ("new", "old"), ("new", "new")):
            baseline, candidate, log = self.builds(self.NOISY, compare={"baseline": {"paired": judge},
                                                                        "candidate": {"paired": accused}})
            done = self.run_rounds(baseline, candidate, "--max-rounds", "7")
            self.assertEqual(done.returncode, 0, f"judge {judge}, candidate {accused}: {done.stdout + done.stderr}")
            self.assertNotIn("disagreed", done.stdout)
            self.assertEqual(Counter(row for _, row in self.runs(log)), {"single": 8, "ddp-2": 14, "dp-2": 8},
                             f"judge {judge}, candidate {accused}: the undecided row did not run to the cap")
            self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "no regression\n")

    def test_a_candidate_that_cannot_judge_at_the_last_look_leaves_the_gate_unable_to(self) -> None:
        same = {row: {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]} for row in ROWS}
        baseline, candidate, _ = self.builds(same, compare={"candidate": {"paired": "cannot-judge"}})
        done = self.run_rounds(baseline, candidate)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertNotIn("The candidate fails", done.stdout)
        self.assertIn("the candidate's `compare --paired` printed its table and cannot judge", done.stdout)
        self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "cannot judge\n")
        # A regression the judge found stands whatever the candidate's compare says.
        slow = {row: {"baseline": [5.0, 0.005], "candidate": [10.0 if row == "single" else 5.0, 0.005]} for row in ROWS}
        baseline, candidate, _ = self.builds(slow, compare={"candidate": {"paired": "cannot-judge"}})
        done = self.run_rounds(baseline, candidate)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "regression\n")


def compared(rc: int, last_line: str = "", undecided: tuple[str, ...] = (), stderr: str = "") -> paired_rounds.Compared:
    """A compare run that printed a table ending in `last_line` (none: printed nothing)."""
    stdout = f"| single (faithful) | train_time_s | 4 |\n\n{last_line}\n" if last_line else ""
    return paired_rounds.Compared(rc, stdout, stderr, undecided)


class RuleTest(unittest.TestCase):
    """rule(): the baseline build's compare judges; how each answer of the candidate's is read."""

    def setUp(self) -> None:
        self.OLD_UNDECIDED = compared(0, "No regression.", ("ddp-2",))
        self.NEW_UNDECIDED = compared(2, "Undecided below the cap (run more rounds of ddp-2).", ("ddp-2",))
        self.NO_REGRESSION = compared(0, "No regression.")
        self.REGRESSION = compared(1, "**Regression**: the candidate is slower beyond the noise, or a row failed.")
        self.CANNOT_JUDGE = compared(2, "Cannot judge: a row or comparison above has nothing to judge it by.")
        self.REFUSED = compared(2, stderr="ddpbench: error: refused")

    def ruled(self, judge: paired_rounds.Compared, accused: paired_rounds.Compared, final: bool) -> tuple[int, bool]:
        ruling = paired_rounds.rule("compare --paired", judge, accused, final=final)
        return ruling.rc, bool(ruling.disagreement)

    def test_undecided_said_either_way_is_agreement_at_a_look_before_the_last(self) -> None:
        for judge in (self.OLD_UNDECIDED, self.NEW_UNDECIDED):
            for accused in (self.OLD_UNDECIDED, self.NEW_UNDECIDED, self.NO_REGRESSION):
                self.assertEqual(self.ruled(judge, accused, final=False), (0, False), (judge, accused))

    def test_the_last_look(self) -> None:
        cases = [
            (self.NO_REGRESSION, self.CANNOT_JUDGE, (2, False)),   # an older judge, a newer candidate's rule
            (self.NO_REGRESSION, self.NEW_UNDECIDED, (2, False)),
            (self.NEW_UNDECIDED, self.NEW_UNDECIDED, (2, False)),  # undecided at the end is no pass
            (self.OLD_UNDECIDED, self.OLD_UNDECIDED, (2, False)),
            (self.REGRESSION, self.CANNOT_JUDGE, (1, True)),       # the judge's regression stands
            (self.REGRESSION, self.NO_REGRESSION, (1, True)),
            (self.REGRESSION, self.REFUSED, (1, True)),
            (self.REGRESSION, self.REGRESSION, (1, False)),
            (self.NO_REGRESSION, self.REFUSED, (1, True)),         # the candidate refuses what the judge judged
            (self.NO_REGRESSION, self.REGRESSION, (1, True)),
            (self.NO_REGRESSION, self.NO_REGRESSION, (0, False)),
            (self.CANNOT_JUDGE, self.NO_REGRESSION, (2, False)),
            (self.CANNOT_JUDGE, self.REFUSED, (2, False)),
        ]
        for judge, accused, expected in cases:
            self.assertEqual(self.ruled(judge, accused, final=True), expected, (judge, accused))

    def test_a_judge_that_refuses_or_dies_decides_nothing(self) -> None:
        with self.assertRaises(paired_rounds.BadInput):
            paired_rounds.rule("compare --paired", self.REFUSED, self.NO_REGRESSION)
        with self.assertRaises(paired_rounds.BadInput):
            paired_rounds.rule("compare --paired", compared(-11), self.NO_REGRESSION)


class OutDirTest(StandInBuilds):
    """--out-dir: the gate removes only round folders it made (their marker says so) and its own
    files; a user's baseline/ or candidate/ there is refused before anything runs."""

    def gate(self, baseline: Path, candidate: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(PAIRED_ROUNDS), "--baseline-binary", str(baseline),
                               "--candidate-binary", str(candidate), "--sweep-file", str(self.sweep), "--out-dir",
                               str(out), "--seed", "1", "--no-twins", "--no-lockstep", *args], capture_output=True,
                              text=True, check=False, timeout=300)

    def test_a_users_folders_named_like_the_builds_are_refused_untouched(self) -> None:
        baseline, candidate, log = self.builds({row: {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]}
                                                for row in ROWS})
        out = self.dir / "mine"
        files = {out / "baseline" / "notes.txt": b"my baseline notes\n",
                 out / "candidate" / "round-00" / "thesis.tex": b"\\section{mine}\n",
                 out / "keep.txt": b"mine\n"}
        for path, data in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        for check in ([], ["--check"]):
            done = self.gate(baseline, candidate, out, *check)
            self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
            self.assertIn(f"{out / 'baseline'} and {out / 'candidate'} exist without the marker", done.stderr)
            for path, data in files.items():
                self.assertEqual(path.read_bytes(), data, f"{path} was changed")
        self.assertFalse(log.exists(), "rounds ran before --out-dir was checked")
        # Only the candidate's folder is the user's: still refused, the baseline's untouched too.
        shutil.rmtree(out / "baseline")
        done = self.gate(baseline, candidate, out)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(f"{out / 'candidate'} exists without the marker", done.stderr)
        self.assertEqual((out / "candidate" / "round-00" / "thesis.tex").read_bytes(), b"\\section{mine}\n")

    def test_a_gate_refused_before_it_holds_the_folder_removes_nothing(self) -> None:
        # A refused setting, a folder not the gate's, another gate at work: none of these may
        # take the files of a gate that finished (or the user's own) with it.
        baseline, candidate, _ = self.builds({row: {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]}
                                              for row in ROWS})
        out = self.dir / "out"
        (out / "baseline").mkdir(parents=True)
        for name in ("paired.md", "verdict.txt", "undecided.txt", "floor.md"):
            (out / name).write_text("mine\n")
        for args in (["--check"], [], ["--min-rounds", "1"]):
            done = self.gate(baseline, candidate, out, *args)
            self.assertEqual(done.returncode, 2, done.stderr)
            for name in ("paired.md", "verdict.txt", "undecided.txt", "floor.md"):
                self.assertEqual((out / name).read_text(), "mine\n", f"{args}: {name} was touched")
        (out / "baseline").rmdir()
        with open(out / ".ci-bench.lock", "w") as held:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            done = self.gate(baseline, candidate, out)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("another gate is writing into", done.stderr)
        self.assertEqual((out / "verdict.txt").read_text(), "mine\n", "a refused gate took the running gate's verdict")

    def test_the_gates_own_folders_are_reused_and_nothing_else_is_removed(self) -> None:
        baseline, candidate, _ = self.builds({row: {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]}
                                              for row in ROWS})
        out = self.dir / "out"
        out.mkdir()
        (out / "keep.txt").write_text("mine\n")
        for _ in range(2):
            done = self.gate(baseline, candidate, out)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            for label in ("baseline", "candidate"):
                self.assertTrue((out / label / paired_rounds.ROUNDS_MARKER).is_file())
        self.assertEqual((out / "keep.txt").read_text(), "mine\n")
        (self.dir / "a-file").write_text("")
        done = self.gate(baseline, candidate, self.dir / "a-file", "--check")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("is not a folder", done.stderr)

    def test_rows_expected_not_to_run_must_be_the_sweep_files(self) -> None:
        baseline, candidate, log = self.builds({row: {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]}
                                                for row in ROWS})
        for check in ([], ["--check"]):
            done = self.gate(baseline, candidate, self.dir / "out", "--expected-not-ok", "nonsense-row", *check)
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn("--expected-not-ok: the sweep file has no row nonsense-row", done.stderr)
        self.assertFalse(log.exists())
        # A twin is a row's; the committed default keeps only the rows this sweep file has.
        for args in (["--expected-not-ok", "dp-2.torch,single"], ["--expected-not-ok-default", "dp-9.torch"]):
            done = self.gate(baseline, candidate, self.dir / "out", *args, "--check")
            self.assertEqual(done.returncode, 0, f"{args}: {done.stderr}")


# The committed baseline's first repetition: the stand-in writes each row's twin from it, so a
# row at its committed time keeps its committed ratio to its twin.
COMMITTED_S = {"single": 3.900853366, "ddp-2": 7.407802188, "dp-2": 6.051714154}


class JudgeTest(StandInBuilds):
    """The baseline build's compare is the judge (it ran the same rounds); the candidate's own
    compare must agree with it, or the candidate fails."""

    def test_a_slow_candidate_whose_compare_lies_still_fails(self) -> None:
        baseline, candidate, _ = self.builds({row: {"baseline": [5.0, 0.005], "candidate": [10.0 if row == "single"
                                                                                           else 5.0, 0.005]}
                                              for row in ROWS}, compare={"candidate": {"paired": "lie"}})
        done = self.run_rounds(baseline, candidate)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertRegex(done.stdout, r"single \(faithful\) train_time_s: .*REGRESSION")
        self.assertIn("its `compare --paired` disagreed with the baseline build's (baseline build: exit 1, "
                      "candidate: exit 0", done.stdout)
        self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "regression\n")

    def test_a_candidate_whose_compare_refuses_the_rounds_fails(self) -> None:
        baseline, candidate, log = self.builds({row: {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]}
                                                for row in ROWS}, compare={"candidate": {"paired": "refuse"}})
        done = self.run_rounds(baseline, candidate, "--max-rounds", "8")
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("(baseline build: exit 0, candidate: exit 2: ddpbench compare: refused on purpose", done.stdout)
        self.assertEqual(len(self.runs(log)), 4 * 2 * len(ROWS), "rounds ran on after the candidate failed")
        self.assertIn("disagreed", (self.dir / "out" / "paired.md").read_text())

    def test_a_judge_that_cannot_judge_leaves_the_gate_unable_to_whatever_the_candidate_says(self) -> None:
        spec = {row: {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]} for row in ROWS}
        baseline, candidate, _ = self.builds(spec, compare={"baseline": {"paired": "cannot-judge"},
                                                            "candidate": {"paired": "lie"}})
        done = self.run_rounds(baseline, candidate)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertIn("Cannot judge: too few pairs at the cap", done.stdout)
        self.assertIn("| single (faithful)", done.stdout, "the judge's table is not shown")
        self.assertIn("Cannot judge", (self.dir / "out" / "paired.md").read_text())
        self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "cannot judge\n")
        baseline, candidate, _ = self.builds(spec, compare={"baseline": {"paired": "refuse"}})
        refused = self.run_rounds(baseline, candidate)
        self.assertEqual(refused.returncode, 2, refused.stdout + refused.stderr)
        self.assertIn("the baseline build's `compare --paired` refused the rounds", refused.stderr)
        self.assertFalse((self.dir / "out" / "verdict.txt").exists())

    def test_builds_that_agree_pass(self) -> None:
        baseline, candidate, _ = self.builds({row: {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]}
                                              for row in ROWS}, compare={"baseline": {"paired": "lie"},
                                                                         "candidate": {"paired": "lie"}})
        done = self.run_rounds(baseline, candidate)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertNotIn("disagreed", done.stdout)


class FloorTest(StandInBuilds):
    """The PyTorch floor runs inside the rounds' gate, judged by the baseline build, and
    verdict.txt is written after it."""

    def floored(self, factor: float, compare: dict[str, dict[str, str]] | None = None
                ) -> subprocess.CompletedProcess[str]:
        """Both builds at `factor` times single's committed time (no change between them)."""
        self.sweep.write_text(json.dumps({"name": "ci-bench", "rows": [{"name": "single"}]}))
        times = [COMMITTED_S["single"] * factor, 0.005]
        baseline, candidate, _ = self.builds({"single": {"baseline": times, "candidate": times}}, compare=compare)
        return self.run_rounds(baseline, candidate, "--floor", "0.85", twins=True)

    def test_a_row_below_the_floor_fails_and_the_verdict_says_so(self) -> None:
        done = self.floored(1.0)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn("Every row at or above the floor.", done.stdout)
        self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "no regression\n")
        slow = self.floored(2.0)
        self.assertEqual(slow.returncode, 1, slow.stdout + slow.stderr)
        self.assertIn("**Below the floor**", slow.stdout)
        self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "regression\n",
                         "verdict.txt does not include the floor")

    def test_a_candidate_whose_floor_lies_still_fails(self) -> None:
        done = self.floored(2.0, compare={"candidate": {"floor": "lie"}})
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("**Below the floor**", done.stdout)
        self.assertIn("its `compare --min-vs-pytorch` disagreed with the baseline build's (baseline build: exit 1, "
                      "candidate: exit 0", done.stdout)

    def test_a_floor_the_judge_cannot_judge_or_that_dies_gives_no_pass(self) -> None:
        done = self.floored(1.0, compare={"baseline": {"floor": "cannot-judge"}, "candidate": {"floor": "lie"}})
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertIn("Cannot judge the floor", done.stdout)
        self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "cannot judge\n")
        died = self.floored(1.0, compare={"baseline": {"floor": "crash"}})
        self.assertEqual(died.returncode, 2, died.stdout + died.stderr)
        self.assertIn("the baseline build's `compare --min-vs-pytorch` exited with -11", died.stderr)
        self.assertFalse((self.dir / "out" / "verdict.txt").exists(), "a gate that died in the floor left a verdict")


if __name__ == "__main__":
    unittest.main()

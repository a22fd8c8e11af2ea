"""scripts/lib/paired_rounds.py, the rounds of scripts/ci-bench --against: the random order
(both orders of the two builds occur, a row's two runs are back to back, a seed reproduces the
order), the adaptive stop (after --min-rounds only undecided rows run again, up to
--max-rounds), and the verdicts that reach the exit code, on stand-in builds whose times are
known (tests/scripts/fake_ddpbench.py) and the real `ddpbench compare --paired`.

Run: python3 -m unittest -v test_paired_rounds (from tests/scripts), with DDPBENCH_BINARY set.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
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

    def test_a_seed_reproduces_the_order_and_another_seed_changes_it(self) -> None:
        def orders(seed: int) -> list[list[tuple[str, str]]]:
            return [paired_rounds.round_order(ROWS, ["baseline", "candidate"], seed, r) for r in range(12)]

        self.assertEqual(orders(5), orders(5))
        self.assertNotEqual(orders(5), orders(6))


class PairedRoundsTest(unittest.TestCase):
    def setUp(self) -> None:
        if not os.environ.get("DDPBENCH_BINARY"):
            self.skipTest("DDPBENCH_BINARY is not set")
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-paired-rounds-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.sweep = self.dir / "sweep.json"
        self.sweep.write_text(json.dumps({"name": "ci-bench", "rows": [{"name": row} for row in ROWS]}))

    def builds(self, rows: dict[str, dict[str, list[float]]]) -> tuple[Path, Path, Path]:
        """Two stand-in builds with these times; their run log."""
        state = self.dir / "state"
        shutil.rmtree(state, ignore_errors=True)
        state.mkdir()
        log = self.dir / "runs.log"
        log.unlink(missing_ok=True)
        os.environ["FAKE_DDPBENCH_SPEC"] = json.dumps({"log": str(log), "state": str(state), "rows": rows})
        paths = []
        for build in ("baseline", "candidate"):
            path = self.dir / f"{build}-ddpbench"
            path.write_text(f"#!/bin/sh\nFAKE_DDPBENCH_BUILD={build} exec {sys.executable} {FAKE} \"$@\"\n")
            path.chmod(0o755)
            paths.append(path)
        return paths[0], paths[1], log

    def run_rounds(self, baseline: Path, candidate: Path, *args: str, seed: int = 1
                   ) -> subprocess.CompletedProcess[str]:
        out = self.dir / "out"
        shutil.rmtree(out, ignore_errors=True)
        return subprocess.run([sys.executable, str(PAIRED_ROUNDS), "--baseline-binary", str(baseline),
                               "--candidate-binary", str(candidate), "--sweep-file", str(self.sweep), "--out-dir",
                               str(out), "--seed", str(seed), "--no-twins", *args], capture_output=True, text=True,
                              check=False, timeout=300)

    @staticmethod
    def runs(log: Path) -> list[tuple[str, str]]:
        return [tuple(line.split()) for line in log.read_text().splitlines()]  # type: ignore[misc]

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

    def test_bad_rounds_are_bad_input(self) -> None:
        baseline, candidate, _ = self.builds({row: {"baseline": [5.0, 0.0], "candidate": [5.0, 0.0]} for row in ROWS})
        for args, message in ((["--min-rounds", "1"], "--min-rounds must be 2 or more"),
                              (["--min-rounds", "5", "--max-rounds", "4"], "at most --max-rounds")):
            done = self.run_rounds(baseline, candidate, *args)
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn(message, done.stderr)
        self.sweep.write_text(json.dumps({"rows": [{"name": "single"}, {"name": "single"}]}))
        done = self.run_rounds(baseline, candidate)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("must name each row once", done.stderr)


if __name__ == "__main__":
    unittest.main()

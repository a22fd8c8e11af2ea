"""scripts/lib/ci_gate/rounds.py: the random order of a round (both orders of the two builds occur,
a row's two runs are back to back, blocks of two rounds balance who goes first, a seed reproduces
the order), and what a build's result file must be to be read as that build's run of a row.

Run: python3 -m unittest -v test_rounds (from tests/scripts/ci_gate).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import unittest
from collections import Counter
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(SOURCE / "scripts" / "lib"))
from ci_gate.rounds import round_order, rows_problem, timing_problem  # noqa: E402

ROWS = ["single", "ddp-2", "dp-2"]


class RoundOrderTest(unittest.TestCase):
    def test_each_round_runs_every_row_once_per_build_back_to_back(self) -> None:
        for round_index in range(10):
            order = round_order(ROWS, ["baseline", "candidate"], seed=3, round_index=round_index)
            self.assertEqual(Counter(order), Counter((row, arm) for row in ROWS for arm in ("baseline", "candidate")))
            for first, second in zip(order[::2], order[1::2]):
                self.assertEqual(first[0], second[0], f"round {round_index}: a row's two runs are not adjacent: {order}")

    def test_both_orders_occur_and_the_rows_are_shuffled(self) -> None:
        orders = [round_order(ROWS, ["baseline", "candidate"], seed=11, round_index=r) for r in range(24)]
        for row in ROWS:
            firsts = Counter(next(arm for r, arm in order if r == row) for order in orders)
            self.assertGreaterEqual(firsts["baseline"], 4, f"{row}: {firsts}")
            self.assertGreaterEqual(firsts["candidate"], 4, f"{row}: {firsts}")
        self.assertGreater(len({tuple(r for r, _ in order[::2]) for order in orders}), 2, "the rows never change order")

    def test_each_block_of_two_rounds_runs_each_rows_builds_in_both_orders(self) -> None:
        # Unbalanced, an effect of running first in a pair was read as a change: the trimmed mean
        # cut the rounds of the minority order away (the attack: 9 false alarms in 30).
        for block in range(12):
            first, second = (round_order(ROWS, ["baseline", "candidate"], seed=9, round_index=r)
                             for r in (2 * block, 2 * block + 1))
            for row in ROWS:
                self.assertEqual([a for r, a in first if r == row], [a for r, a in second if r == row][::-1])
        # Which build opens a block is random, not a fixed alternation.
        openers = Counter(next(a for r, a in round_order(ROWS, ["baseline", "candidate"], 9, 2 * b)
                               if r == "ddp-2") for b in range(12))
        self.assertEqual(set(openers), {"baseline", "candidate"}, openers)

    def test_a_seed_reproduces_the_order_and_another_seed_changes_it(self) -> None:
        def orders(seed: int) -> list[list[tuple[str, str]]]:
            return [round_order(ROWS, ["baseline", "candidate"], seed, r) for r in range(12)]

        self.assertEqual(orders(5), orders(5))
        self.assertNotEqual(orders(5), orders(6))


class TimingTest(unittest.TestCase):
    def test_a_rows_steps_are_the_steps_the_gate_timed(self) -> None:
        turns = [0.08] * 16
        self.assertEqual(timing_problem([0.078] * 16, turns, 4), "", "an honest row, its turns' messages aside")
        self.assertEqual(timing_problem([0.01] * 4 + [0.078] * 12, turns, 4), "", "warm-up is not compared")
        # Hiding a steady step now and then is the machine's; more than a quarter of them, the build's
        # (the fourteenth attack: 7 of 16 hidden, a candidate twice as slow read 80 % faster).
        self.assertEqual(timing_problem([0.078] * 13 + [0.001] * 3, turns, 4), "")
        self.assertIn("4 of its 12 steady steps took less than their turns",
                      timing_problem([0.078] * 12 + [0.001] * 4, turns, 4))
        self.assertIn("12 of its 12 steady steps", timing_problem([0.04] * 16, turns, 4))
        # An empty turn beside each step halved the median turn.
        self.assertEqual(timing_problem([0.078] * 16, turns * 2, 4), "it took 32 turns for its 16 steps")


class ResultFileTest(unittest.TestCase):
    """A build's result file of one row: its runs are named objects, every one the row, its twin
    or a variant, each once; anything else is that build's garbage."""

    def setUp(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-rounds-"))
        self.addCleanup(shutil.rmtree, self.dir)
        template = json.loads((SOURCE / "scripts" / "ci-bench.baseline.json").read_text())
        self.runs = [r for r in template["runs"] if r["name"] in ("single", "single.torch") and r["repetition"] == 0]
        self.doc = dict(template, runs=self.runs, sweep=dict(template["sweep"], rows=[
            r for r in template["sweep"]["rows"] if r["name"] in ("single", "single.torch")]))

    def problem(self, doc: object) -> str:
        path = self.dir / "results.json"
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        return rows_problem(path, "single")

    def test_the_rows_run_and_nothing_else(self) -> None:
        self.assertEqual(self.problem(self.doc), "")
        self.assertEqual(self.problem(dict(self.doc, runs=self.runs + [dict(self.runs[0], name="single.no-sync-bn")])), "")
        for doc, says in (("{\"runs\": [", "no readable result file"),
                          ([1, 2], "runs are not a list of named rows"),
                          (dict(self.doc, runs=self.runs + ["a string"]), "runs are not a list of named rows"),
                          (dict(self.doc, runs={"single": 1}), "runs are not a list of named rows"),
                          (dict(self.doc, runs=self.runs + [dict(self.runs[0], name="ddp-2")]), "rows it was not asked for"),
                          (dict(self.doc, runs=self.runs[1:]), "no row single"),
                          (dict(self.doc, runs=self.runs + [self.runs[0]]), "more than once"),
                          (dict(self.doc, sweep={}), "without the sweep's planned rows")):
            with self.subTest(says=says):
                self.assertIn(says, self.problem(doc))


if __name__ == "__main__":
    unittest.main()

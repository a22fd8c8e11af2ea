"""scripts/gate-power --paired (scripts/lib/paired_power.py): the false-alarm bound is the
exact one-sided Clopper-Pearson bound; a trial is one adaptive gate run; disjoint trials never
share a round; a detection is the slowed row's regression, not any alarm; measuring resumes.

Run: python3 -m unittest -v test_paired_power (from tests/scripts), with DDPBENCH_BINARY set.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
STAND_IN = Path(__file__).resolve().parent / "ci_gate" / "stand_in_ddpbench.py"
sys.path.insert(0, str(SOURCE / "scripts" / "lib"))
import paired_power  # noqa: E402
from ci_gate.cli import Usage  # noqa: E402
from ci_gate.judge import PairedCompare  # noqa: E402

ROWS = ["single", "ddp-2"]


class ClopperPearsonTest(unittest.TestCase):
    def test_no_alarm_in_n_bounds_the_rate_at_one_minus_alpha_to_the_one_over_n(self) -> None:
        for n in (1, 30, 60, 200):
            self.assertAlmostEqual(paired_power.clopper_pearson_upper(0, n), 1 - 0.05 ** (1 / n), places=6)
        self.assertAlmostEqual(paired_power.clopper_pearson_upper(0, 60), 0.0487, places=4)

    def test_the_bound_leaves_five_percent_below_the_observed_count(self) -> None:
        for hits, n in ((1, 60), (3, 60), (7, 20)):
            upper = paired_power.clopper_pearson_upper(hits, n)
            tail = sum(math.comb(n, k) * upper ** k * (1 - upper) ** (n - k) for k in range(hits + 1))
            self.assertAlmostEqual(tail, 0.05, places=5)
            self.assertGreater(upper, hits / n)
        self.assertEqual(paired_power.clopper_pearson_upper(5, 5), 1.0)


class RegressionsTest(unittest.TestCase):
    def test_only_rows_called_a_regression_are_read(self) -> None:
        text = ("- ddp-2 (faithful) train_time_s: 12.0 % slower, 95 % CI +11.9 % to +12.1 %, 8 pairs: REGRESSION "
                "(beyond the 5.0 % threshold)\n- single (faithful) train_time_s: 0.1 % faster, ..., 4 pairs: "
                "unchanged (the interval lies inside ±5.0 %)\n| ddp-2 (faithful) | train_time_s | REGRESSION |\n")
        self.assertEqual(paired_power.regressions(text), {"ddp-2"})


class TrialsTest(unittest.TestCase):
    def setUp(self) -> None:
        if not os.environ.get("DDPBENCH_BINARY"):
            self.skipTest("DDPBENCH_BINARY is not set")
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-paired-power-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.sweep = self.dir / "sweep.json"
        self.sweep.write_text(json.dumps({"name": "ci-bench", "rows": [{"name": row} for row in ROWS]}))
        (self.dir / "state").mkdir()
        os.environ.update(STAND_IN_TIMES=json.dumps({"rows": {row: {"one": [5.0, 0.004]} for row in ROWS}}),
                          STAND_IN_STATE=str(self.dir / "state"), STAND_IN_REAL=os.environ["DDPBENCH_BINARY"],
                          STAND_IN_FAULTS="{}", DDPBENCH_SOURCE_DIR=str(SOURCE))
        self.binary = self.dir / "ddpbench"
        self.binary.write_text(f"#!/bin/sh\nSTAND_IN_BUILD=one exec {sys.executable} {STAND_IN} \"$@\"\n")
        self.binary.chmod(0o755)
        self.work = self.dir / "work"

    def test_disjoint_trials_take_consecutive_rounds_and_a_detection_is_the_slowed_row(self) -> None:
        paired_power.measure(str(self.binary), self.sweep, [0.5], rounds=12, seed=1, twins=False, work=self.work)
        self.assertEqual(len((self.dir / "state" / "runs.log").read_text().splitlines()), 12 * len(ROWS) * 3)
        gate = PairedCompare(str(self.binary), str(self.binary), 0.05, 0.05, "train_time_s", 4, 12)
        table = paired_power.evaluate(str(self.binary), self.sweep, [0.5], ["single", "all"], self.work, gate,
                                      resample=4, seed=1)
        lines = {tuple(c.strip() for c in line.strip("|").split("|")[:2]): line for line in table.splitlines()
                 if line.startswith("| disjoint") or line.startswith("| resampled")}
        # Every row decided at the first look: 12 rounds are 3 disjoint gate runs, no more.
        self.assertIn("| 3 | 0/3 (0 %, ≤ 63.2 %) | - | 4.0 |", lines[("disjoint", "A/A")])
        self.assertIn("| 3 | - | 3/3 (100 %) | 4.0 |", lines[("disjoint", "single +50 %")])
        self.assertIn("| 3 | - | 3/3 (100 %) | 4.0 |", lines[("disjoint", "all +50 %")])
        self.assertIn("| 4 | 0/4 (0 %) |", lines[("resampled", "A/A")])  # shared rounds: no bound

    def test_an_alarm_on_another_row_is_no_detection_of_the_slowed_one(self) -> None:
        paired_power.measure(str(self.binary), self.sweep, [0.5], rounds=8, seed=1, twins=False, work=self.work)

        def scale(arm: str, row: str, factor: float) -> None:
            for path in (self.work / arm).glob(f"round-*/{row}/results.json"):
                doc = json.loads(path.read_text())
                for run in doc["runs"]:
                    run["train_time_s"] *= factor
                path.write_text(json.dumps(doc))

        scale("slow-50pct", "single", 1 / 1.5)  # the "slowed" single is not slower after all
        scale("aa", "ddp-2", 1.3)               # while the unslowed ddp-2 regresses
        gate = PairedCompare(str(self.binary), str(self.binary), 0.05, 0.05, "train_time_s", 4, 8)
        table = paired_power.evaluate(str(self.binary), self.sweep, [0.5], ["single"], self.work, gate, resample=0,
                                      seed=1)
        self.assertIn("| disjoint | A/A | 2 | 2/2 (100 %", table)
        self.assertIn("| disjoint | single +50 % | 2 | - | 0/2 (0 %) |", table)

    def test_measuring_again_runs_only_what_is_missing(self) -> None:
        paired_power.measure(str(self.binary), self.sweep, [0.1], rounds=2, seed=1, twins=False, work=self.work)
        shutil.rmtree(self.work / "aa" / "round-001" / "single")
        paired_power.measure(str(self.binary), self.sweep, [0.1], rounds=3, seed=1, twins=False, work=self.work)
        runs = (self.dir / "state" / "runs.log").read_text().splitlines()
        self.assertEqual(len(runs), 2 * 2 * 3 + 1 + 2 * 3)

    def test_too_few_rounds_for_a_trial_is_bad_input(self) -> None:
        paired_power.measure(str(self.binary), self.sweep, [0.1], rounds=3, seed=1, twins=False, work=self.work)
        gate = PairedCompare(str(self.binary), str(self.binary), 0.05, 0.05, "train_time_s", 2, 4)
        with self.assertRaisesRegex(Usage, "3 complete rounds"):
            paired_power.evaluate(str(self.binary), self.sweep, [0.1], ["all"], self.work, gate, resample=0, seed=1)


if __name__ == "__main__":
    unittest.main()

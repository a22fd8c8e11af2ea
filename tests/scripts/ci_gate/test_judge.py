"""scripts/lib/ci_gate/judge.py: the baseline build's compare judges, the candidate's must agree
(each answer of the candidate's read by rule()), and a judge that refuses, dies or hangs decides
nothing; then on stand-in builds, the comparison and the PyTorch floor judged by both builds.

Run: python3 -m unittest -v test_judge (from tests/scripts/ci_gate), with DDPBENCH_BINARY set.
"""
from __future__ import annotations

import json
import sys
import unittest

from gate_rounds import ROWS, Done, StandInBuilds
from ci_gate.judge import Compared, rule, run_compare
from ci_gate.outcomes import Side, Stop, What


def compared(rc: int | None, last_line: str = "", undecided: tuple[str, ...] = (), stderr: str = "") -> Compared:
    """A compare run that printed a table ending in `last_line` (none: printed nothing)."""
    stdout = f"| single (faithful) | train_time_s | 4 |\n\n{last_line}\n" if last_line else ""
    return Compared(rc, stdout, stderr, undecided)


class RuleTest(unittest.TestCase):
    """rule(): the baseline build's compare judges; how each answer of the candidate's is read."""

    def setUp(self) -> None:
        self.OLD_UNDECIDED = compared(0, "No regression.", ("ddp-2",))
        self.NEW_UNDECIDED = compared(2, "Undecided below the cap (run more rounds of ddp-2).", ("ddp-2",))
        self.NO_REGRESSION = compared(0, "No regression.")
        self.REGRESSION = compared(1, "**Regression**: the candidate is slower beyond the noise, or a row failed.")
        self.CANNOT_JUDGE = compared(2, "Cannot judge: a row or comparison above has nothing to judge it by.")
        self.REFUSED = compared(2, stderr="ddpbench: error: refused")

    def ruled(self, judge: Compared, accused: Compared, final: bool) -> tuple[int, bool]:
        ruling = rule("compare --paired", judge, accused, final=final)
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
            (self.CANNOT_JUDGE, self.REFUSED, (1, True)),          # its refusal is its own, whatever the judge
        ]
        for judge, accused, expected in cases:
            self.assertEqual(self.ruled(judge, accused, final=True), expected, (judge, accused))

    def test_a_judge_that_refuses_dies_or_hangs_decides_nothing_and_is_the_baselines(self) -> None:
        for judge, what in ((self.REFUSED, What.REFUSED), (compared(-11), What.CRASH), (compared(None), What.HANG),
                            (compared(130), What.INTERRUPTED)):
            with self.subTest(what=what), self.assertRaises(Stop) as raised:
                rule("compare --paired", judge, self.NO_REGRESSION)
            self.assertEqual((raised.exception.outcome.side, raised.exception.outcome.what), (Side.BASELINE, what))

    def test_the_candidates_compare_that_dies_hangs_or_is_interrupted(self) -> None:
        for accused, what in ((compared(-11), What.CRASH), (compared(None), What.HANG), (self.REFUSED, What.REFUSED)):
            ruling = rule("compare --paired", self.NO_REGRESSION, accused, final=True)
            self.assertEqual((ruling.rc, ruling.what), (1, what))
        # Where the judge cannot judge too (it was 125 under --bisect: a commit whose compare segfaults skipped).
        for accused, what in ((compared(-11), What.CRASH), (compared(None), What.HANG), (self.REFUSED, What.REFUSED)):
            ruling = rule("compare --paired", self.CANNOT_JUDGE, accused, final=True)
            self.assertEqual((ruling.rc, ruling.what), (1, what))
        with self.assertRaises(Stop) as raised:
            rule("compare --paired", self.NO_REGRESSION, compared(143))
        self.assertEqual((raised.exception.outcome.side, raised.exception.outcome.what), (Side.CANDIDATE, What.INTERRUPTED))


# The committed baseline's first repetition: the stand-in writes each row's twin from it, so a
# row at its committed time keeps its committed ratio to its twin.
COMMITTED_S = {"single": 3.900853366, "ddp-2": 7.407802188, "dp-2": 6.051714154}


class RunCompareTest(unittest.TestCase):
    def test_a_cannot_judge_after_a_flood_is_still_cannot_judge(self) -> None:
        said = run_compare(Side.CANDIDATE, [sys.executable, "-c", "import sys\n"
                                            "for _ in range(10): sys.stdout.write('y' * (1 << 20))\n"
                                            "print('\\nCannot judge: too noisy'); sys.stdout.write('z' * (9 << 20))\n"
                                            "sys.exit(2)"], 60)
        self.assertEqual(said.verdict, "cannot judge")


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

    def test_a_candidate_whose_compare_removes_the_judges_file_still_fails(self) -> None:
        # The judge's undecided rows were checked after the candidate's compare had run beside them:
        # removed, the baseline build was blamed (garbage, 125 under --bisect) for the candidate's regression.
        baseline, candidate, _ = self.builds({row: {"baseline": [5.0, 0.005], "candidate": [10.0 if row == "single"
                                                                                           else 5.0, 0.005]}
                                              for row in ROWS}, compare={"candidate": {"paired": "erase-judge"}})
        done = self.run_rounds(baseline, candidate)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
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
        self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "cannot judge\n")
        self.assertIs(refused.outcome.side, Side.BASELINE)

    def test_a_compare_that_speaks_no_utf8_is_its_own_sides(self) -> None:
        same = {row: {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]} for row in ROWS}
        baseline, candidate, _ = self.builds(same, compare={"candidate": {"paired": "bytes"}})
        done = self.run_rounds(baseline, candidate)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIs(done.outcome.side, Side.CANDIDATE)
        baseline, candidate, _ = self.builds(same, compare={"baseline": {"paired": "bytes"}})
        done = self.run_rounds(baseline, candidate)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertEqual((done.outcome.side, done.outcome.what), (Side.BASELINE, What.REFUSED))

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

    def floored(self, factor: float, compare: dict[str, dict[str, str]] | None = None) -> Done:
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

    def test_a_regression_stands_when_the_floors_judge_fails(self) -> None:
        self.sweep.write_text(json.dumps({"name": "ci-bench", "rows": [{"name": "single"}]}))
        baseline, candidate, _ = self.builds({"single": {"baseline": [5.0, 0.005], "candidate": [10.0, 0.005]}},
                                             compare={"baseline": {"floor": "refuse"}})
        done = self.run_rounds(baseline, candidate, "--floor", "0.5", twins=True)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("Cannot judge the floor", done.stdout)
        self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "regression\n")

    def test_a_floor_the_judge_cannot_judge_or_that_dies_gives_no_pass(self) -> None:
        done = self.floored(1.0, compare={"baseline": {"floor": "cannot-judge"}, "candidate": {"floor": "lie"}})
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertIn("Cannot judge the floor", done.stdout)
        self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "cannot judge\n")
        died = self.floored(1.0, compare={"baseline": {"floor": "crash"}})
        self.assertEqual(died.returncode, 2, died.stdout + died.stderr)
        self.assertIn("the baseline build's `compare --min-vs-pytorch` exited with -11", died.stderr)
        self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "cannot judge\n")
        self.assertIs(died.outcome.side, Side.BASELINE)


if __name__ == "__main__":
    unittest.main()

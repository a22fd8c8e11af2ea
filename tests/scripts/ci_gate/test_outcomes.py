"""scripts/lib/ci_gate/outcomes.py: the one table of exit codes, row by row, and the docs that
print it.

Run: python3 -m unittest -v test_outcomes (from tests/scripts/ci_gate).
"""
from __future__ import annotations

import os
import signal
import sys
import unittest
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(SOURCE / "scripts" / "lib"))
from ci_gate.outcomes import TABLE, Outcome, Side, What, markdown_table  # noqa: E402

# git bisect run: 0 good, 125 skip, 1-127 bad, 128 and above stop.
GOOD, SKIP, BAD, STOP = "good", "skip", "bad", "stop"


def bisect_reads(code: int) -> str:
    return GOOD if code == 0 else SKIP if code == 125 else BAD if 1 <= code <= 127 else STOP


class TableTest(unittest.TestCase):
    def test_each_row(self) -> None:
        expected = {  # (side, what): (plain, bisect, verdict.txt)
            (Side.CANDIDATE, What.NO_REGRESSION): (0, 0, "no regression"),
            (Side.CANDIDATE, What.REGRESSION): (1, 1, "regression"),
            (Side.CANDIDATE, What.CANNOT_JUDGE): (2, 125, "cannot judge"),
            (Side.CANDIDATE, What.CRASH): (1, 1, "regression"),
            (Side.CANDIDATE, What.GARBAGE): (1, 1, "regression"),
            (Side.CANDIDATE, What.HANG): (1, 1, "regression"),
            (Side.CANDIDATE, What.REFUSED): (1, 1, "regression"),
            (Side.CANDIDATE, What.BUILD_FAILED): (2, 125, "cannot judge"),
            (Side.CANDIDATE, What.INTERRUPTED): (2, 125, "cannot judge"),
            (Side.CANDIDATE, What.UPDATED): (0, 0, None),
            (Side.CANDIDATE, What.MEASURED): (0, 0, None),
            (Side.CANDIDATE, What.ROW_FAILED): (1, 1, None),
            (Side.BASELINE, What.CANNOT_JUDGE): (2, 125, "cannot judge"),
            (Side.BASELINE, What.CRASH): (2, 125, "cannot judge"),
            (Side.BASELINE, What.GARBAGE): (2, 125, "cannot judge"),
            (Side.BASELINE, What.HANG): (2, 125, "cannot judge"),
            (Side.BASELINE, What.REFUSED): (2, 125, "cannot judge"),
            (Side.BASELINE, What.BUILD_FAILED): (2, 128, "cannot judge"),
            (Side.BASELINE, What.INTERRUPTED): (2, 125, "cannot judge"),
            (Side.INPUT, What.REFUSED): (2, 128, None),
            (Side.GATE, What.FAILED): (2, 128, None),
        }
        self.assertEqual({key: (c.plain, c.bisect, c.verdict) for key, c in TABLE.items()}, expected)

    def test_only_the_candidate_is_ever_bad_and_nothing_but_a_verdict_is_good(self) -> None:
        for (side, what), code in TABLE.items():
            with self.subTest(side=side, what=what):
                if bisect_reads(code.bisect) == BAD:
                    self.assertIs(side, Side.CANDIDATE)
                    self.assertEqual(code.plain, 1)
                if code.plain == 0:
                    self.assertIn(what, (What.NO_REGRESSION, What.UPDATED, What.MEASURED))
                self.assertNotEqual(code.bisect, 2, "git bisect run would read 2 as bad")
        # The gate's own failure and bad input stop a bisection, never blame or skip a commit.
        for side, what in ((Side.GATE, What.FAILED), (Side.INPUT, What.REFUSED)):
            self.assertEqual(bisect_reads(Outcome(side, what).exit_code(bisect=True)), STOP)

    def test_a_signal_to_the_gate_is_128_plus_its_number_and_no_verdict(self) -> None:
        for signum, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)):
            outcome = Outcome(Side.SIGNAL, What.INTERRUPTED, "", signum)
            self.assertEqual((outcome.exit_code(False), outcome.exit_code(True)), (code, code))
            self.assertIsNone(outcome.verdict)

    def test_an_outcome_the_table_lacks_is_an_error_not_a_code(self) -> None:
        with self.assertRaises(ValueError):
            Outcome(Side.INPUT, What.CRASH).exit_code(False)

    def test_the_docs_print_the_table(self) -> None:
        docs = (SOURCE / "docs" / "gate.md").read_text()
        self.assertTrue(markdown_table() in docs, "docs/gate.md's table of exit codes is not outcomes.markdown_table():\n"
                        + markdown_table())


if __name__ == "__main__":
    unittest.main()

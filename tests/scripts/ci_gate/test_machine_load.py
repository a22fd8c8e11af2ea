"""scripts/lib/ci_gate/machine_load.py: others' CPU time and steal per round from /proc/stat and
the gate's own times, on fixed samples; the report says a busy machine and names it as the likely
cause of a verdict too noisy to give, and only then.

Run: python3 -m unittest -v test_machine_load (from tests/scripts/ci_gate).
"""
from __future__ import annotations

import os
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts" / "lib"))
from ci_gate import machine_load  # noqa: E402
from ci_gate.machine_load import CpuSample, RoundLoad  # noqa: E402

HZ = os.sysconf("SC_CLK_TCK")
STAT = ("cpu  {user} 10 {system} 90000 40 5 6 {steal} 0 0\n"
        "cpu0 1 1 1 1 1 1 1 1 0 0\nintr 12345\nctxt 999\n")


class MachineLoadTest(unittest.TestCase):

    def test_busy_time_is_user_nice_system_irq_softirq_and_steal_apart(self) -> None:
        busy, steal = machine_load.cpu_seconds(STAT.format(user=1000, system=200, steal=30))
        self.assertAlmostEqual(busy, (1000 + 10 + 200 + 5 + 6) / HZ)
        self.assertAlmostEqual(steal, 30 / HZ)
        with self.assertRaises(ValueError):
            machine_load.cpu_seconds("cpu0 1 2 3\n")

    def test_a_sample_reads_the_file_it_is_given_and_none_where_there_is_none(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            stat = Path(folder) / "stat"
            stat.write_text(STAT.format(user=HZ * 7, system=0, steal=0))
            s = machine_load.sample(stat)
            self.assertIsNotNone(s)
            self.assertAlmostEqual(s.busy_s, 7 + (10 + 5 + 6) / HZ)
            self.assertIsNone(machine_load.sample(Path(folder) / "absent"))
            stat.write_text("no cpu line\n")
            self.assertIsNone(machine_load.sample(stat))

    def test_others_are_the_machines_busy_time_less_the_gates(self) -> None:
        before = CpuSample(busy_s=100.0, steal_s=1.0, gate_s=10.0, at_s=50.0)
        after = CpuSample(busy_s=130.0, steal_s=3.0, gate_s=30.0, at_s=60.0)  # 30 s busy, 20 of them the gate's
        load = machine_load.between(3, before, after, cores=2)
        self.assertEqual(load.round, 3)
        self.assertAlmostEqual(load.others_cores, 1.0)
        self.assertAlmostEqual(load.steal_cores, 0.2)
        self.assertTrue(load.busy)
        quiet = machine_load.between(1, before, CpuSample(120.0, 1.0, 29.0, 60.0), cores=2)
        self.assertAlmostEqual(quiet.others_cores, 0.1)
        self.assertFalse(quiet.busy)
        # The gate's children counted late (a child reaped after the busy time was read): never below 0.
        self.assertEqual(machine_load.between(1, before, CpuSample(105.0, 1.0, 30.0, 60.0), 2).others_cores, 0.0)
        self.assertIsNone(machine_load.between(1, None, after))
        self.assertIsNone(machine_load.between(1, after, after))

    def test_steal_alone_makes_a_busy_round(self) -> None:
        self.assertTrue(RoundLoad(1, 10.0, 0.0, 0.1, 2).busy)  # 5 % of 2 cores
        self.assertFalse(RoundLoad(1, 10.0, 0.24, 0.09, 2).busy)

    def test_the_report_says_a_busy_machine_and_names_it_only_where_too_noisy(self) -> None:
        quiet, busy = RoundLoad(1, 30.0, 0.02, 0.0, 2), RoundLoad(2, 30.0, 1.4, 0.0, 2)
        self.assertIn("The machine was quiet.", machine_load.summary([quiet]))
        said = machine_load.summary([quiet, busy])
        self.assertIn("per round 1: 0.02, 2: 1.40.", said)
        self.assertIn("**The machine was busy** in round 2", said)
        noisy = "- ddp-2 (faithful) step_time_s: ... CANNOT JUDGE (too noisy: still undecided ...)"
        cause = machine_load.likely_cause([quiet, busy], noisy)
        self.assertIn("the likely cause is the machine: other work used up to 1.40 of its 2 cores (round 2)", cause)
        self.assertEqual(machine_load.likely_cause([quiet], noisy), "", "a quiet machine is no cause")
        self.assertEqual(machine_load.likely_cause([busy], "REGRESSION"), "", "only a verdict too noisy to give")
        self.assertIn("not measured", machine_load.summary([]))


if __name__ == "__main__":
    unittest.main()

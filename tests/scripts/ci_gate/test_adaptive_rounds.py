"""scripts/lib/ci_gate/adaptive_rounds.py: the adaptive stop (after --min-rounds only undecided
rows run again, up to --max-rounds), a regression that stands, and each build's fault read as its
own (the candidate fails; the baseline build cannot judge), on stand-in builds whose times are known
(stand_in_ddpbench.py) and the real `ddpbench compare --paired`.

Run: python3 -m unittest -v test_adaptive_rounds (from tests/scripts/ci_gate), with DDPBENCH_BINARY set.
"""
from __future__ import annotations

import json
import unittest
from collections import Counter

from gate_rounds import ROWS, StandInBuilds
from ci_gate.outcomes import Side
from ci_gate.rounds import round_order


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
        """...where, still undecided, it cannot be judged: its bound reaches past the threshold, so
        "no regression" would be a pass that could not have seen one. Each round's load is kept."""
        baseline, candidate, log = self.builds({
            "single": {"baseline": [4.0, 0.005], "candidate": [4.0, 0.005]},
            "ddp-2": {"baseline": [8.0, 0.3], "candidate": [8.0, 0.3]},  # too noisy to decide
            "dp-2": {"baseline": [6.0, 0.005], "candidate": [6.0, 0.005]}})
        done = self.run_rounds(baseline, candidate, "--max-rounds", "7")
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "cannot judge\n")
        self.assertRegex(done.stdout, r"ddp-2 \(faithful\) train_time_s: .*too noisy: .*95 % upper bound \+\d")
        self.assertIn("Machine load: processes not the gate's used", done.stdout)
        loads = json.loads((self.dir / "out" / "machine-load.json").read_text())
        self.assertEqual([load["round"] for load in loads], [1, 2, 3, 4, 5, 6, 7])
        self.assertTrue(all(load["others_cores"] >= 0 and load["wall_s"] > 0 for load in loads), loads)
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

    def test_a_regression_stands_when_the_baseline_build_fails_a_later_round(self) -> None:
        # The second attack: single 2x slower is a regression at round 4; ddp-2, too noisy, runs on,
        # and the baseline build's sweep dies in round 5. The regression found stands (1), in both modes.
        self.sweep.write_text(json.dumps({"name": "ci-bench", "rows": [{"name": "single"}, {"name": "ddp-2"}]}))
        spec = {"single": {"baseline": [5.0, 0.005], "candidate": [10.0, 0.005]},
                "ddp-2": {"baseline": [8.0, 0.3], "candidate": [8.0, 0.3]}}
        for lockstep in (False, True):
            baseline, candidate, _ = self.builds(spec, faults={"baseline": {"sweep": "sigsegv", "after": 8}})
            done = self.run_rounds(baseline, candidate, "--max-rounds", "8", lockstep=lockstep)
            self.assertEqual(done.returncode, 1, f"lockstep {lockstep}: {done.stdout + done.stderr}")
            self.assertIn("single (faithful) train_time_s was a regression after round 4", done.stdout)
            self.assertIn("the baseline build's sweep of row ddp-2", done.stdout)
            self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "regression\n")

    def test_rows_whose_names_hold_a_dot_are_the_sweep_files(self) -> None:
        self.sweep.write_text(json.dumps({"name": "ci-bench", "rows": [{"name": "ddp.2"}, {"name": "single"}]}))
        same = {row: {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]} for row in ("ddp.2", "single")}
        baseline, candidate, _ = self.builds(same)
        done = self.run_rounds(baseline, candidate, "--floor", "0.5", twins=True)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)

    def test_an_effect_of_running_first_is_no_regression(self) -> None:
        spec = {row: {"baseline": [5.0, 0.01], "candidate": [5.0, 0.01]} for row in ROWS}
        alarms = 0
        for seed in range(1, 7):
            baseline, candidate, _ = self.builds(spec, first_penalty=0.08)
            done = self.run_rounds(baseline, candidate, "--max-rounds", "8", seed=seed)
            # Undecided at the cap is cannot judge (2), never a regression.
            self.assertIn(done.returncode, (0, 1, 2), done.stderr)
            alarms += done.returncode == 1
        self.assertEqual(alarms, 0, "the first run of each pair 8 % slower was read as a change")

    def test_a_candidate_whose_sweep_dies_or_writes_garbage_fails_the_gate(self) -> None:
        ok = [5.0, 0.005]
        for broken in ("crash", "garbage", "runs-string", "extra-row", "missing-row"):
            baseline, candidate, _ = self.builds({"single": {"baseline": ok, "candidate": broken},
                                                  "ddp-2": {"baseline": ok, "candidate": ok},
                                                  "dp-2": {"baseline": ok, "candidate": ok}})
            done = self.run_rounds(baseline, candidate)
            self.assertEqual(done.returncode, 1, broken + done.stderr)
            self.assertIn("the candidate build's sweep of row single", done.stderr)
            self.assertIn("the candidate fails the gate", done.stderr)
            # The baseline build's broken output cannot judge the candidate, and is never the candidate's fault.
            baseline, candidate, _ = self.builds({"single": {"baseline": broken, "candidate": ok},
                                                  "ddp-2": {"baseline": ok, "candidate": ok},
                                                  "dp-2": {"baseline": ok, "candidate": ok}})
            done = self.run_rounds(baseline, candidate)
            self.assertEqual(done.returncode, 2, broken + done.stderr)
            self.assertIn("the baseline build's sweep of row single", done.stderr)
            self.assertNotIn("the candidate fails", done.stderr)
            self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "cannot judge\n")

    def test_a_candidate_that_refuses_what_it_ran_before_fails(self) -> None:
        ok = [5.0, 0.005]
        baseline, candidate, _ = self.builds({"single": {"baseline": ok, "candidate": "refuse-after-first"},
                                              "ddp-2": {"baseline": ok, "candidate": ok},
                                              "dp-2": {"baseline": ok, "candidate": ok}})
        done = self.run_rounds(baseline, candidate)
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertIn("refused the input it ran in an earlier round", done.stderr)
        self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "regression\n",
                         "a failed candidate's gate reached a verdict")

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

    def test_a_build_that_takes_no_turns_cannot_be_timed_in_lockstep(self) -> None:
        # A build that ignores the coordinator runs beside the other build: nothing it timed is
        # comparable: a baseline build older than lockstep cannot judge (never a pass), a candidate
        # that broke lockstep fails.
        spec = {row: {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]} for row in ROWS}
        baseline, candidate, _ = self.builds(spec, faults={"baseline": {"sweep": "no-turns"}})
        done = self.run_rounds(baseline, candidate, lockstep=True)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertRegex(done.stderr, r"the baseline build's row \S+ ran without taking turns \(no lockstep_wait_s")
        self.assertIn("--round-level", done.stderr)
        baseline, candidate, _ = self.builds(spec, faults={"candidate": {"sweep": "no-turns"}})
        done = self.run_rounds(baseline, candidate, lockstep=True)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("the candidate broke lockstep", done.stderr)
        baseline, candidate, _ = self.builds(spec)
        done = self.run_rounds(baseline, candidate, lockstep=True)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)

    def test_a_build_whose_ranks_name_another_row_took_no_turns_with_the_other(self) -> None:
        # Its hello named row "elsewhere": the coordinator gave it a session alone, the two builds
        # ran one beside the other, and the rounds were judged as lockstep's.
        spec = {row: {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]} for row in ROWS}
        baseline, candidate, _ = self.builds(spec, faults={"candidate": {"sweep": "other-row"}})
        done = self.run_rounds(baseline, candidate, lockstep=True)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertRegex(done.stderr, r"the candidate build's row \S+ took no turns as that row \(its sessions: "
                                      r"elsewhere\).*the candidate build broke lockstep")
        baseline, candidate, _ = self.builds(spec, faults={"baseline": {"sweep": "other-row"}})
        done = self.run_rounds(baseline, candidate, lockstep=True)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertIn("the baseline build broke lockstep", done.stderr)


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
                    if round_order(["single"], ["baseline", "candidate"], seed, 0)[0][1] == first)

    def count(self, build: str) -> int:
        path = self.state / f"{build}.single.count"
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
            self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "regression\n")

    def test_a_row_both_builds_refuse_is_never_the_candidates_whatever_ran_before_it(self) -> None:
        """"Ran before" is this row's, not any row's: a candidate that ran `single` and then refused
        `ddp-2`, which the baseline build refuses too, was failed (1) for "the input it ran in an
        earlier round", on some seeds only."""
        self.sweep.write_text(json.dumps({"name": "ci-bench", "rows": [{"name": "single"}, {"name": "ddp-2"}]}))
        rows = {"single": {"baseline": [5.0, 0.005], "candidate": [5.0, 0.005]},
                "ddp-2": {"baseline": "refuse", "candidate": "refuse"}}
        for seed in range(1, 7):
            baseline, candidate, _ = self.builds(rows)
            done = self.run_rounds(baseline, candidate, seed=seed)
            self.assertEqual(done.returncode, 2, f"seed {seed}: {done.stdout + done.stderr}")
            self.assertIn(done.outcome.side, (Side.INPUT, Side.BASELINE), f"seed {seed}")
            self.assertNotIn("ran in an earlier round", done.stderr, f"seed {seed}")

    def test_an_input_both_builds_refuse_or_only_the_baseline_build_refuses_cannot_be_judged(self) -> None:
        for rows in ({"single": {"baseline": "refuse", "candidate": "refuse"}},
                     {"single": {"baseline": "refuse", "candidate": [5.0, 0.005]}}):
            for first in ("baseline", "candidate"):
                baseline, candidate, _ = self.builds(rows)
                done = self.run_rounds(baseline, candidate, seed=self.seed_where(first))
                self.assertEqual(done.returncode, 2, f"{rows} {first} first: {done.stdout + done.stderr}")
                self.assertIn("the baseline build's sweep of row single", done.stderr)
                self.assertNotIn("the candidate fails", done.stderr)
                self.assertIn(done.outcome.side, (Side.INPUT, Side.BASELINE))


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
            # At the cap the row is still too noisy for its bound to exclude a 5 % slowdown.
            self.assertEqual(done.returncode, 2, f"judge {judge}, candidate {accused}: {done.stdout + done.stderr}")
            self.assertIn("too noisy", done.stdout)
            self.assertNotIn("disagreed", done.stdout)
            self.assertEqual(Counter(row for _, row in self.runs(log)), {"single": 8, "ddp-2": 14, "dp-2": 8},
                             f"judge {judge}, candidate {accused}: the undecided row did not run to the cap")
            self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "cannot judge\n")

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


if __name__ == "__main__":
    unittest.main()

"""scripts/validate and its analyses (scripts/lib/projection_validation.py, advice_validation.py):
on the rows one full validation recorded (tests/data/recorded/), `ddpbench project` and
`ddpbench advise` must say exactly what they said when the rows were recorded (a change of
the models that moves a projection or an advice fails here, on fixed inputs, in seconds); a
recording that is not whole is bad input; and, on two emulated hosts, a real row trains and
`project` and `advise` read it (no figure asserted: figures are the validation's to print).

A model changed on purpose: rewrite the expected outputs with DDPBENCH_UPDATE_GOLDEN=1 (refused
under CI) and say in the commit what moved and why.

Run: python3 -m unittest -v test_validate (from tests/scripts), with DDPBENCH_BINARY set; the
real run on emulated hosts (ShortRunOnEmulatedHostsTest) needs root and iproute2 and skips
with the reason elsewhere.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(SOURCE / "scripts" / "lib"))
import advice_validation  # noqa: E402
import projection_validation  # noqa: E402
from emulated_hosts import (RESNET18_ROW, CannotEmulate, EmulatedHosts, Shaping, WorldLoad,  # noqa: E402
                            hosts_had_their_share)
from recorded_rows import ask, normalised, read_recording  # noqa: E402

RECORDED = SOURCE / "tests" / "data" / "recorded"
VALIDATE = SOURCE / "scripts" / "validate"
RELATIVE_TOLERANCE = 1e-9  # the same arithmetic on the same inputs: only the last bits may differ
# Questions the validations do not ask, on their recorded rows: other fabrics, nodes of many
# ranks, link overrides, bf16, overlap off. (command, row, options)
FURTHER = {
    "projection": [
        ("project", "row-2-1gbit-overlap-sweep0.json", ["--ranks", "8,64,512", "--fabric", "ndr-ib"]),
        ("project", "row-4-200mbit-fp16-sweep1.json", ["--ranks", "16,128", "--ranks-per-node", "4",
                                                        "--intra-node-gbps", "200", "--inter-node-gbps", "25",
                                                        "--latency-us", "20", "--nics-per-node", "2"]),
        ("project", "row-3-1gbit-no-overlap-sweep1.json", ["--ranks", "1,2,6", "--ranks-per-node", "3",
                                                            "--fabric", "ethernet-100g"]),
    ],
    "advice": [
        ("advise", "row-200mbit-2-25mb-allreduce-sweep0.json", ["--ranks", "8,64", "--ranks-per-node", "4",
                                                                 "--fabric", "hdr-ib", "--comm-hook",
                                                                 "allreduce,fp16,bf16", "--overlap", "on,off"]),
        ("advise", "row-2gbit-2-25mb-allreduce-sweep1.json", ["--ranks", "4,32", "--ranks-per-node", "1",
                                                               "--bucket-mb", "2,25,50", "--overlap", "off"]),
    ],
}


def binary() -> Path:
    path = os.environ.get("DDPBENCH_BINARY")
    if not path:
        raise unittest.SkipTest("DDPBENCH_BINARY is not set")
    return Path(path)


def differences(expected: object, found: object, where: str = "") -> list[str]:
    """Every figure, word or entry of the models' answers that moved, by where it is, with both
    values: numbers within RELATIVE_TOLERANCE of each other are the same (an int and a float of
    one value too); anything else must be equal, NaN included, and of the same kind."""
    def number(value: object) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    if isinstance(expected, dict) and isinstance(found, dict):
        lines = [f"{where}{key}: not asked any more" if not where else f"{where}{key}: gone"
                 for key in expected if key not in found]
        lines += [f"{where}{key}: new (not in the expected outputs)" if not where else f"{where}{key}: new"
                  for key in found if key not in expected]
        for key in expected.keys() & found.keys():
            lines += differences(expected[key], found[key], f"{where}{key}" + (": " if not where else "."))
        return sorted(lines)
    at = where.rstrip(". :")
    if isinstance(expected, list) and isinstance(found, list):
        if len(expected) != len(found):
            return [f"{at}: {len(expected)} entries -> {len(found)}"]
        return [line for i, (was, now) in enumerate(zip(expected, found))
                for line in differences(was, now, f"{at}[{i}].")]
    if number(expected) and number(found):
        was, now = float(expected), float(found)
        if (math.isnan(was) and math.isnan(now)) or math.isclose(was, now, rel_tol=RELATIVE_TOLERANCE, abs_tol=1e-12):
            return []
        change = f" ({100 * (now / was - 1):+.3f} %)" if was and math.isfinite(was) and math.isfinite(now) else ""
        return [f"{at}: {expected!r} -> {found!r}{change}"]
    if type(expected) is not type(found) or expected != found:
        return [f"{at}: {expected!r} -> {found!r}"]
    return []


class RecordedRowsCase(unittest.TestCase):
    part = ""
    module = projection_validation

    def check_the_model_says_what_it_said(self) -> None:
        folder, expected_file = RECORDED / self.part, RECORDED / f"{self.part}.expected.json"
        scratch = Path(tempfile.mkdtemp(prefix=f"ddpbench-recorded-{self.part}-"))
        self.addCleanup(shutil.rmtree, scratch, True)
        recording = read_recording(folder, self.part, self.module.worlds())
        analysis = self.module.analyse(binary(), recording, scratch)
        print("\n".join(["", *analysis.lines, "", *(f"- {g.met}: {g.name}: {g.text}" for g in analysis.goals)]))
        outputs = {**analysis.outputs, **self.further_answers(recording, scratch)}
        moved = differences(json.loads(expected_file.read_text()), outputs)
        if os.environ.get("DDPBENCH_UPDATE_GOLDEN") == "1":
            self.assertFalse(os.environ.get("CI"), "DDPBENCH_UPDATE_GOLDEN is set under CI: expected outputs are "
                                                   "never rewritten there")
            if moved:
                expected_file.write_text(json.dumps(outputs, indent=1, sort_keys=True) + "\n")
                self.fail(f"rewrote {expected_file.name} ({len(moved)} moved): review the change and run again "
                          f"without DDPBENCH_UPDATE_GOLDEN")
            return
        self.assertEqual(moved, [], f"the model's outputs on the recorded rows moved ({len(moved)}); if on purpose, "
                                    f"rerun with DDPBENCH_UPDATE_GOLDEN=1:\n" + "\n".join(moved[:20]))
        self.assertGreater(len(outputs), len(FURTHER[self.part]))

    def further_answers(self, recording, scratch: Path) -> dict[str, object]:
        """The model asked what the validation does not ask it, on the same recorded rows."""
        answers = {}
        for i, (output, row, options) in enumerate(FURTHER[self.part]):
            command = [output if output == "project" else "advise", str(recording.file(row)), *options]
            output_file = "projection" if output == "project" else "advice"
            _, document = ask(binary(), command, scratch / f"further-{i}", output_file)
            answers[f"further: {output} {row} {' '.join(options)}"] = normalised(document, recording.folder)
        return answers


class RecordedProjectionTest(RecordedRowsCase):
    part, module = "projection", projection_validation

    def test_the_model_projects_the_recorded_rows_as_it_did(self) -> None:
        self.check_the_model_says_what_it_said()


class RecordedAdviceTest(RecordedRowsCase):
    part, module = "advice", advice_validation

    def test_the_advisor_advises_on_the_recorded_rows_as_it_did(self) -> None:
        self.check_the_model_says_what_it_said()


class GoldenRewriteTest(unittest.TestCase):
    """DDPBENCH_UPDATE_GOLDEN=1, outside CI, rewrites the expected outputs and still fails (an
    update is a reviewed second run); any other value, or CI, rewrites nothing."""

    def test_only_an_update_outside_ci_rewrites_and_it_never_passes(self) -> None:
        source = Path(tempfile.mkdtemp(prefix="ddpbench-golden-"))
        self.addCleanup(shutil.rmtree, source)
        shutil.copytree(SOURCE / "scripts" / "lib", source / "scripts" / "lib")
        shutil.copytree(RECORDED / "advice", source / "tests" / "data" / "recorded" / "advice")
        (source / "tests" / "scripts").mkdir(parents=True)
        shutil.copy(Path(__file__), source / "tests" / "scripts" / "test_validate.py")
        expected = source / "tests" / "data" / "recorded" / "advice.expected.json"
        stale = json.loads((RECORDED / "advice.expected.json").read_text())
        first = next(iter(stale))
        stale[first]["advice"][0]["model_step_s"] *= 1.5
        expected.write_text(json.dumps(stale))

        def run(**env: str) -> subprocess.CompletedProcess[str]:
            environment = {k: v for k, v in os.environ.items() if k not in ("CI", "DDPBENCH_UPDATE_GOLDEN")}
            environment.update(DDPBENCH_SOURCE_DIR=str(source), DDPBENCH_BINARY=str(binary()), **env)
            return subprocess.run([sys.executable, "-m", "unittest", "test_validate.RecordedAdviceTest"],
                                  cwd=source / "tests" / "scripts", env=environment, capture_output=True, text=True,
                                  check=False, timeout=600)

        for env in ({"DDPBENCH_UPDATE_GOLDEN": "0"}, {"DDPBENCH_UPDATE_GOLDEN": "1", "CI": "1"}, {}):
            with self.subTest(env=env):
                done = run(**env)
                self.assertNotEqual(done.returncode, 0, done.stderr)
                self.assertEqual(json.loads(expected.read_text()), stale, "rewritten")
        rewritten = run(DDPBENCH_UPDATE_GOLDEN="1")
        self.assertNotEqual(rewritten.returncode, 0, rewritten.stderr)
        self.assertIn("rewrote advice.expected.json (1 moved): review the change", rewritten.stderr)
        self.assertEqual(run().returncode, 0)


class ComparisonTest(unittest.TestCase):
    def test_a_moved_figure_a_lost_and_a_new_projection_are_each_named(self) -> None:
        expected = {"a": {"step_s": 1.0, "advised": "5 MB"}, "b": {"step_s": 2.0}}
        found = {"a": {"step_s": 1.1, "advised": "5 MB"}, "c": {"step_s": 2.0}}
        self.assertEqual(differences(expected, found),
                         ["a: step_s: 1.0 -> 1.1 (+10.000 %)", "b: not asked any more",
                          "c: new (not in the expected outputs)"])
        self.assertEqual(differences(expected, json.loads(json.dumps(expected))), [])
        self.assertEqual(differences({"a": {"step_s": 1.0}}, {"a": {"step_s": 1.0 + 1e-12}}), [])
        self.assertEqual(differences({"a": {"step_s": 2}}, {"a": {"step_s": 2.0}}), [])
        self.assertEqual(differences({"a": {"advised": "5 MB"}}, {"a": {"advised": "25 MB"}}),
                         ["a: advised: '5 MB' -> '25 MB'"])

    def test_every_field_at_any_depth_is_compared(self) -> None:
        """Whatever the model answers, not only what the validation's tables read."""
        was = {"q": {"ranks": [{"advised": {"flags": "--bucket-mb 5"}, "settings": [{"step_s": 1.0}, {"step_s": 2.0}]}],
                     "points": [{"speedup": 1.5}], "ties": ["a", "b"], "fitted": None}}
        self.assertEqual(differences(was, json.loads(json.dumps(was))), [])
        now = json.loads(json.dumps(was))
        now["q"]["ranks"][0]["advised"]["flags"] = "--bucket-mb 1"
        now["q"]["ranks"][0]["settings"][1]["step_s"] = 2.2
        now["q"]["points"][0]["speedup"] = float("nan")
        now["q"]["ties"] = ["a"]
        now["q"]["fitted"] = 0.0
        self.assertEqual(differences(was, now), [
            "q: fitted: None -> 0.0", "q: points[0].speedup: 1.5 -> nan",
            "q: ranks[0].advised.flags: '--bucket-mb 5' -> '--bucket-mb 1'",
            "q: ranks[0].settings[1].step_s: 2.0 -> 2.2 (+10.000 %)", "q: ties: 2 entries -> 1"])
        self.assertEqual(differences({"q": {"x": True}}, {"q": {"x": 1}}), ["q: x: True -> 1"])


class SpearmanTest(unittest.TestCase):
    def test_ties_share_their_ranks_and_a_reversed_order_is_minus_one(self) -> None:
        self.assertEqual(advice_validation.ranks_of([3.0, 1.0, 3.0, 2.0]), [3.5, 1.0, 3.5, 2.0])
        self.assertAlmostEqual(advice_validation.spearman([1, 2, 3, 4], [10, 20, 30, 40]), 1.0)
        self.assertAlmostEqual(advice_validation.spearman([1, 2, 3, 4], [4, 3, 2, 1]), -1.0)
        self.assertAlmostEqual(advice_validation.spearman([1, 2, 3, 4], [1, 3, 2, 4]), 0.8)


class NotANumberTest(unittest.TestCase):
    """A model's error or figure that is not a number cannot be judged: never met, never MISSED
    as a miss of the model's accuracy, and scripts/validate does not exit 0 on it."""

    def test_an_error_that_is_not_a_number_is_not_judged_with_its_row_named(self) -> None:
        share = (True, "")
        for bad in (math.nan, math.inf, None):
            found = [(0.01, "2 hosts, overlap, on 1gbit"), (bad, "3 hosts, fp16, on 200mbit")]
            line, goals = projection_validation.rate_goals("its own point", found, 0.5, 0.5, share)
            self.assertEqual(len(goals), 1, goals)
            self.assertIsNone(goals[0].met, goals)
            self.assertTrue(goals[0].not_a_number)
            self.assertIn(f"3 hosts, fp16, on 200mbit: {bad}", goals[0].text)
            self.assertIn("cannot judge", line)
            compression = projection_validation.compression_goal([(0.02, "2 hosts"), (bad, "3 hosts")])
            self.assertIsNone(compression.met)
            self.assertTrue(compression.not_a_number)
            advice = advice_validation.link_goals("200mbit", 0.0, 0.05, bad, 0.9, share)
            self.assertEqual([(g.met, g.not_a_number) for g in advice], [(None, True)], advice)
            self.assertIn("the worst error", advice[0].text)
        # Numbers are judged as before: a NaN among them must not hide behind max() or the median.
        _, goals = projection_validation.rate_goals("its own point", [(0.01, "a"), (0.6, "b")], 0.5, 0.5, (True, ""))
        self.assertEqual([g.met for g in goals], [False, False, True])
        self.assertTrue(math.isnan(projection_validation.relative_error(None, 1.0)))
        self.assertTrue(math.isnan(projection_validation.relative_error(1.0, 0.0)))

    def test_validate_exits_2_where_a_goal_cannot_be_judged(self) -> None:
        from importlib.machinery import SourceFileLoader
        from importlib.util import module_from_spec, spec_from_loader
        loader = SourceFileLoader("validate_script", str(VALIDATE))
        validate = module_from_spec(spec_from_loader("validate_script", loader))
        loader.exec_module(validate)
        unjudged = projection_validation.Goal("its own point", None, "cannot judge: 1 of 2 errors not a number",
                                              not_a_number=True)
        busy = projection_validation.Goal("2 hosts to more", None, "not judged: the machine was busy")
        folder = Path(tempfile.mkdtemp(prefix="ddpbench-nan-goal-"))
        self.addCleanup(shutil.rmtree, folder)
        validate.binaries = lambda from_rows: (Path("ddpbench"), Path("ddpbench_microbench"))
        argv = sys.argv
        self.addCleanup(setattr, sys, "argv", argv)
        sys.argv = ["scripts/validate", "projection", "--from-rows", str(folder)]
        for goals, status in (([unjudged], 2), ([], 0)):
            validate.report = lambda *_, found=goals: list(found)
            self.assertEqual(validate.main(), status, goals)
        self.assertFalse(busy.not_a_number, "a busy machine's not judged is the measurement's, exit 0 as before")


class HostsShareTest(unittest.TestCase):
    def test_the_largest_worlds_median_load_decides(self) -> None:
        quiet, busy = WorldLoad(0.05, 0.01, 0.0), WorldLoad(0.35, 0.01, 0.0)
        self.assertTrue(hosts_had_their_share({2: [busy, busy], 4: [quiet, busy, quiet]})[0])
        self.assertFalse(hosts_had_their_share({2: [quiet], 4: [busy, quiet, busy]})[0])


class BadRecordingTest(unittest.TestCase):
    """scripts/validate --from-rows on a recording that is not whole: exit 2, the file named."""

    def setUp(self) -> None:
        self.env = dict(os.environ, DDPBENCH_BINARY=str(binary()))
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-bad-recording-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.copy = self.dir / "advice"
        shutil.copytree(RECORDED / "advice", self.copy)

    def validate(self, *args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(VALIDATE), *args], capture_output=True, text=True, cwd=cwd,
                              env=dict(self.env, **env), check=False, timeout=600)

    def test_a_missing_row_is_named(self) -> None:
        name = advice_validation.row_name("2gbit", 4, (5, "fp16"), 1)
        (self.copy / name).unlink()
        done = self.validate("advice", "--from-rows", str(self.copy))
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(f"{name} is missing", done.stderr)

    def test_a_row_that_did_not_run_is_named(self) -> None:
        name = advice_validation.row_name("200mbit", 4, (100, "allreduce"), 0)
        data = json.loads((self.copy / name).read_text())
        data["runs"][0]["status"] = "failed"
        (self.copy / name).write_text(json.dumps(data))
        done = self.validate("advice", "--from-rows", str(self.copy))
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(f"{name}: the row did not run", done.stderr)

    def test_a_row_or_a_link_that_is_not_what_its_name_says_is_named(self) -> None:
        """Renamed or edited files would be judged as the rows they claim to be."""
        fp16, plain = (advice_validation.row_name("2gbit", 4, (5, hook), 0) for hook in ("fp16", "allreduce"))
        shutil.copy(self.copy / fp16, self.copy / plain)
        done = self.validate("advice", "--from-rows", str(self.copy))
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(f"{plain}: not the row its name says: --comm-hook 'fp16' (its name says 'allreduce'); --out "
                      f"'/tmp/", done.stderr)
        shutil.copy(RECORDED / "advice" / plain, self.copy / plain)
        two_hosts = advice_validation.row_name("2gbit", 2, (25, "allreduce"), 0)
        four_hosts = advice_validation.row_name("2gbit", 4, (25, "allreduce"), 1)
        shutil.copy(self.copy / two_hosts, self.copy / four_hosts)
        done = self.validate("advice", "--from-rows", str(self.copy))
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(f"{four_hosts}: not the row its name says: --out '/tmp/", done.stderr)
        projection = self.dir / "projection"
        shutil.copytree(RECORDED / "projection", projection)
        shutil.copy(projection / projection_validation.link_name(3, "1gbit"),
                    projection / projection_validation.link_name(4, "1gbit"))
        done = self.validate("projection", "--from-rows", str(projection))
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("link-4-1gbit.json: BM_RankAllreduce across 3 ranks, where its name says 4", done.stderr)

    def test_a_row_whose_speed_is_zero_or_not_a_number_is_named(self) -> None:
        name = advice_validation.row_name("200mbit", 4, (1, "fp16"), 1)
        for value in (0, "fast", None):
            data = json.loads((RECORDED / "advice" / name).read_text())
            data["runs"][0]["steady_images_per_s"] = value
            (self.copy / name).write_text(json.dumps(data))
            done = self.validate("advice", "--from-rows", str(self.copy))
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn(f"{name}: steady_images_per_s is {value!r}, not a", done.stderr)

    def test_loads_that_are_not_the_plans_worlds_or_not_shares_are_named(self) -> None:
        """The machine's load decides whether goals are judged: a NaN is not "quiet"."""
        original = json.loads((RECORDED / "advice" / "validation.json").read_text())
        four = original["loads"]["4"]
        cases = [({**original["loads"], "4": [[math.nan, 0, 0]] * len(four)}, "loads.4[0] is nan, not a finite number"),
                 ({**original["loads"], "4": [[5.0, 0, 0]] * len(four)},
                  "loads.4[0] is [5.0, 0, 0]: shares of the machine"),
                 ({"2": original["loads"]["2"]}, "loads holds worlds {'2': 4}, where the validation runs"),
                 ({**original["loads"], "99": [[0, 0, 0]]}, "'99': 1"),
                 ({**original["loads"], "4": []}, "'4': 0"),
                 ({**original["loads"], "4": four[1:]}, f"'4': {len(four) - 1}"),
                 ([[0, 0, 0]], "loads is not an object of host counts")]
        for loads, says in cases:
            with self.subTest(says=says):
                (self.copy / "validation.json").write_text(json.dumps({**original, "loads": loads}))
                done = self.validate("advice", "--from-rows", str(self.copy))
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertIn(says, done.stderr)
        (self.copy / "validation.json").write_text(json.dumps({**original, "delay": "false"}))
        done = self.validate("advice", "--from-rows", str(self.copy))
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("delay is 'false', not a bool", done.stderr)

    def test_a_duplicated_run_and_a_global_batch_not_the_rows_are_named(self) -> None:
        sweep0, sweep1 = (advice_validation.row_name("2gbit", 4, (5, "fp16"), sweep) for sweep in (0, 1))
        shutil.copy(self.copy / sweep0, self.copy / sweep1)
        done = self.validate("advice", "--from-rows", str(self.copy))
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(f"{sweep1}: not the row its name says: --out", done.stderr)
        data = json.loads((RECORDED / "advice" / sweep1).read_text())
        data["runs"][0]["global_batch"] = 16
        (self.copy / sweep1).write_text(json.dumps(data))
        done = self.validate("advice", "--from-rows", str(self.copy))
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(f"{sweep1}: ran on 4 ranks with a global batch of 16, where its name says 4 ranks of 16",
                      done.stderr)

    def test_a_figure_only_the_analysis_reads_is_proven_before_anything_is_judged(self) -> None:
        projection = self.dir / "projection"
        shutil.copytree(RECORDED / "projection", projection)
        name = projection_validation.row_name(3, "200mbit", "overlap", 1)
        data = json.loads((projection / name).read_text())
        data["runs"][0]["mean_phase_s"]["allreduce_s"] = 0
        (projection / name).write_text(json.dumps(data))
        done = self.validate("projection", "--from-rows", str(projection))
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(f"{name}: mean_phase_s.allreduce_s is 0, not a positive number", done.stderr)
        self.assertNotIn("Traceback", done.stderr)

    def test_folders_and_binaries_that_cannot_serve_are_named_before_anything_runs(self) -> None:
        for folder, says in ((self.dir / "absent", "does not exist"),
                             (self.copy / "validation.json", "is not a folder")):
            done = self.validate("advice", "--from-rows", str(folder))
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn(f"{folder}: {says}", done.stderr)
        dangling = self.dir / "dangling"
        dangling.symlink_to(self.dir / "nowhere")
        for keep, says in ((dangling, "is a link: give the folder itself"),
                           (self.dir / "no" / "such" / "parent", "does not exist")):
            done = self.validate("advice", "--keep-rows", str(keep))
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn(says, done.stderr)
        not_executable = self.dir / "ddpbench"
        not_executable.write_text("#!/bin/sh\n")
        done = self.validate("advice", "--from-rows", str(self.copy), DDPBENCH_BINARY=str(not_executable))
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("is not an executable file", done.stderr)

    def test_a_config_that_is_not_the_command_a_row_ran_is_named(self) -> None:
        """ddpbench's models read the row's config, the proof reads its command line: both must agree."""
        name = advice_validation.row_name("200mbit", 2, (25, "allreduce"), 0)
        data = json.loads((RECORDED / "advice" / name).read_text())
        data["runs"][0]["config"]["comm-hook"] = "fp16"
        (self.copy / name).write_text(json.dumps(data))
        done = self.validate("advice", "--from-rows", str(self.copy))
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(f"{name}: its config is not the command it ran (ddpbench reads the config): comm-hook 'fp16' "
                      f"(the command: allreduce)", done.stderr)

    def test_files_that_break_a_reader_or_the_model_are_named_not_a_traceback_or_a_hang(self) -> None:
        name = advice_validation.row_name("200mbit", 2, (25, "allreduce"), 1)
        (self.copy / name).write_text("[" * 100000 + "]" * 100000)
        done = self.validate("advice", "--from-rows", str(self.copy))
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(f"{name}: JSON nested too deep to read", done.stderr)
        data = json.loads((RECORDED / "advice" / name).read_text())
        data["runs"][0]["strategy_details"]["allreduce_alone"]["fp32_s"] = 1e308  # once a timeline without end
        (self.copy / name).write_text(json.dumps(data))
        done = self.validate("advice", "--from-rows", str(self.copy))
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("a step timeline that does not end", done.stderr)
        projection = self.dir / "projection"
        shutil.copytree(RECORDED / "projection", projection)
        link = json.loads((projection / "link-2-1gbit.json").read_text())
        link["benchmarks"][0]["ranks"] = [2]
        (projection / "link-2-1gbit.json").write_text(json.dumps(link))
        done = self.validate("projection", "--from-rows", str(projection))
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("link-2-1gbit.json: BM_RankAllreduce/65536/iterations:6/real_time: ranks is [2], not a number",
                      done.stderr)
        self.assertNotIn("Traceback", done.stderr)

    def test_a_folder_named_like_an_option_is_a_folder(self) -> None:
        dashed = self.dir / "-rec"
        shutil.copytree(RECORDED / "advice", dashed)
        done = self.validate("advice", "--from-rows=-rec", cwd=self.dir)
        self.assertEqual(done.returncode, 0, done.stderr)

    def test_a_kept_folder_that_is_a_link_or_holds_the_current_folder_is_refused(self) -> None:
        empty = self.dir / "empty"
        empty.mkdir()
        (self.dir / "link").symlink_to(empty)
        for keep, says in ((self.dir / "link", "is a link: give the folder itself"),
                           (Path("."), "is the current folder or holds it")):
            done = self.validate("advice", "--keep-rows", str(keep), cwd=empty)
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn(says, done.stderr)

    def test_another_parts_recording_and_a_folder_without_one_are_refused(self) -> None:
        done = self.validate("projection", "--from-rows", str(self.copy))
        self.assertEqual(done.returncode, 2)
        self.assertIn("recorded by the advice validation, not the projection one", done.stderr)
        done = self.validate("advice", "--from-rows", str(self.dir))
        self.assertEqual(done.returncode, 2)
        self.assertIn("no validation.json", done.stderr)

    def test_bad_arguments_and_a_kept_folder_with_files_in_it_are_refused_untouched(self) -> None:
        self.assertEqual(self.validate("speed").returncode, 2)
        self.assertEqual(self.validate("all", "--from-rows", str(self.copy)).returncode, 2)
        before = sorted(p.name for p in self.copy.iterdir())
        done = self.validate("advice", "--keep-rows", str(self.copy))
        self.assertEqual(done.returncode, 2)
        self.assertIn("is not an empty folder", done.stderr)
        self.assertEqual(sorted(p.name for p in self.copy.iterdir()), before)


class ShortRunOnEmulatedHostsTest(unittest.TestCase):
    """The path of both validations, short: a row trains on two emulated hosts behind shaped
    links, and `project` and `advise` read it and exit as documented. No figure is asserted."""

    def test_a_row_on_two_hosts_projects_and_advises(self) -> None:
        scratch = Path(tempfile.mkdtemp(prefix="ddpbench-short-validation-"))
        self.addCleanup(shutil.rmtree, scratch, True)
        row = scratch / "row.json"
        short = [*RESNET18_ROW]
        short[short.index("--max-steps") + 1] = "5"
        short[short.index("--warmup-steps") + 1] = "2"
        try:
            with EmulatedHosts(2) as hosts:
                hosts.shape(Shaping("1gbit", "1ms", "256kb"))
                hosts.world(2, [str(binary()), *short, "--out", str(row)], timeout_s=300)
        except CannotEmulate as reason:
            self.skipTest(str(reason))
        run = json.loads(row.read_text())["runs"][0]
        self.assertEqual((run["status"], run["world_size"]), ("ok", 2))
        projected = subprocess.run([str(binary()), "project", str(row), "--ranks", "2,4", "--ranks-per-node", "1",
                                    "--out-dir", str(scratch / "projection")], capture_output=True, text=True)
        # 0, or 1 where the model misses the row's own step by more than 15 %, said at its top.
        self.assertIn(projected.returncode, (0, 1), projected.stderr)
        projection = json.loads((scratch / "projection" / "projection.json").read_text())["projections"][0]
        self.assertEqual([p["ranks"] for p in projection["points"]], [2, 4])
        if projected.returncode == 1:
            self.assertIn("Not to be trusted", (scratch / "projection" / "projection.md").read_text())
        advised = subprocess.run([str(binary()), "advise", str(row), "--ranks", "4", "--ranks-per-node", "1",
                                  "--bucket-mb", "5,25", "--comm-hook", "allreduce,fp16", "--overlap", "on", "--force",
                                  "--out-dir", str(scratch / "advice")], capture_output=True, text=True)
        self.assertEqual(advised.returncode, 0, advised.stderr)
        advice = json.loads((scratch / "advice" / "advice.json").read_text())["advice"][0]
        self.assertEqual(advice["not_advised"], "")
        self.assertEqual(len(advice["ranks"][0]["settings"]), 4)



class KeepTest(unittest.TestCase):
    def test_the_recording_is_kept_through_a_folder_of_its_own_never_one_left_there(self) -> None:
        # keep() copied into the fixed name .KEEP.partial-PID: a folder left there (an earlier run
        # killed with the same pid) made the copy fail, and its clean-up removed that folder whole.
        import importlib.machinery
        import importlib.util
        loader = importlib.machinery.SourceFileLoader("validate_script", str(SOURCE / "scripts" / "validate"))
        spec = importlib.util.spec_from_loader("validate_script", loader)
        validate = importlib.util.module_from_spec(spec)
        loader.exec_module(validate)
        with tempfile.TemporaryDirectory() as folder:
            recording, keep = Path(folder) / "recording", Path(folder) / "kept"
            (recording / "rows").mkdir(parents=True)
            (recording / "rows" / "row.json").write_text("{}")
            left = Path(folder) / f".kept.partial-{os.getpid()}"
            left.mkdir()
            (left / "theirs.txt").write_text("not the tool's\n")
            validate.keep(recording, keep)
            self.assertEqual((keep / "rows" / "row.json").read_text(), "{}")
            self.assertEqual((left / "theirs.txt").read_text(), "not the tool's\n")
            self.assertEqual(sorted(p.name for p in Path(folder).iterdir()), sorted([".kept.partial-" + str(os.getpid()),
                                                                                   "kept", "recording"]))


if __name__ == "__main__":
    unittest.main()

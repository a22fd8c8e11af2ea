"""scripts/lib/ci_gate/cli.py: every argument is read and checked before anything runs; a usage
error is exit 2, or 128 under --bisect wherever --bisect stands on the line; nothing after `--`
that decides where files go or which rows run reaches a sweep.

Run: python3 -m unittest -v test_cli (from tests/scripts/ci_gate).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(SOURCE / "scripts" / "lib"))
from ci_gate import cli  # noqa: E402

CI_BENCH = SOURCE / "scripts" / "ci-bench"


def parse(*argv: str, **environ: str) -> cli.Settings:
    return cli.parse(list(argv), SOURCE, environ)


class ParseTest(unittest.TestCase):
    def test_defaults_come_from_the_env_file_and_the_environment_overrides_them(self) -> None:
        s = parse()
        self.assertEqual((s.threshold, s.alpha, s.repeat, s.normalize_by), (0.05, 0.10, 5, "twin"))
        self.assertEqual(s.expected_not_ok, frozenset({"dp-2.torch"}))
        self.assertEqual(parse(DDPBENCH_CI_REPEAT="3").repeat, 3)
        self.assertEqual(parse(DDPBENCH_CI_EXPECTED_NOT_OK="").expected_not_ok, frozenset())
        self.assertEqual(parse(DDPBENCH_CI_REPEAT="").repeat, 5, "an empty variable takes the default (:-)")
        paired = parse("--against", "HEAD")
        plan = cli.rounds_plan(paired, True)
        self.assertEqual((plan.metrics, plan.coarse, plan.min_rounds, plan.max_rounds), ("step_time_s", "", 4, 10))
        coarse = cli.rounds_plan(parse("--against", "HEAD", "--metric", "step_time_s,train_time_s"), True)
        self.assertEqual(coarse.coarse, "train_time_s")
        self.assertEqual(cli.rounds_plan(paired, False).metrics, "train_time_s")

    def test_bad_values_name_the_flag(self) -> None:
        for args, says in ((["--repeat", "0"], "--repeat must be an integer of at least 1"),
                           (["--threshold", "1.5"], "--threshold must be a number in [0, 1)"),
                           (["--threshold", "nan"], "--threshold must be a number in [0, 1)"),
                           (["--alpha", "0"], "--alpha must be a number in (0, 0.5)"),
                           # What both builds' compares refuse is the input's (it was 125: every commit skipped).
                           (["--alpha", "0.6"], "--alpha must be a number in (0, 0.5)"),
                           (["--min-vs-pytorch", "200"], "--min-vs-pytorch must be a number in (0, 100)"),
                           (["--metric", "bogus"], "--metric: 'bogus' must name"),
                           (["--metric", "train_time_s,train_time_s"], "at most once"),
                           (["--min-vs-pytorch", "0"], "--min-vs-pytorch must be a number in (0, 100)"),
                           (["--normalize-by", "nothing"], "--normalize-by must be twin or a row"),
                           (["--no-twins"], "--no-twins leaves out the twins --normalize-by twin divides by"),
                           (["--expected-not-ok", "nonsense-row"], "--expected-not-ok: the sweep file has no row"),
                           (["--sweep-file", "/no/such/file.json"], "--sweep-file: cannot read the rows"),
                           (["--against", "x", "--metric", "test_accuracy"], "test_accuracy is no timing"),
                           (["--against", "x", "--max-rounds", "101"], "--max-rounds at most 100"),
                           (["--against", "x", "--min-rounds", "1"], "--min-rounds must be 2 or more"),
                           (["--against", "x", "--min-rounds", "6", "--max-rounds", "5"], "must be at most --max-rounds"),
                           (["--against", "x", "--seed", "-3"], "--seed must be an integer"),
                           (["--against", "x", "--turn-timeout-s", "0"], "--turn-timeout-s must be a number"),
                           (["--against", "x", "--turn-timeout-s", "0.001"], "--turn-timeout-s must be a number in [1,"),
                           (["--update-baseline", "--no-compare"], "--update-baseline does not take"),
                           (["--no-compare", "--bisect"], "--no-compare judges nothing: it cannot --bisect"),
                           (["--update-baseline", "--bisect"], "--update-baseline does not take"),
                           # An empty value took the default, or the stored mode's metrics in a
                           # lockstep gate, silently (the thirteenth attack).
                           (["--threshold="], "--threshold: an empty value"),
                           (["--against", "x", "--metric="], "--metric: an empty value"),
                           (["--repeat", ""], "--repeat: an empty value"),
                           (["--out-dir="], "--out-dir: an empty value"),
                           (["--against", " "], "--against: an empty value")):
            with self.subTest(args=args), self.assertRaises(cli.Usage) as raised:
                parse(*args)
            self.assertIn(says, str(raised.exception))
        # A deadline of a millisecond blamed the candidate (its dry run "hung") at every commit.
        for name in ("DDPBENCH_CI_COMPARE_TIMEOUT_S", "DDPBENCH_CI_ROW_TIMEOUT_S"):
            with self.subTest(name=name), self.assertRaises(cli.Usage) as raised:
                parse(**{name: "0.001"})
            self.assertIn(f"{name} must be a number in [1, 604800]", str(raised.exception))

    def test_a_row_name_that_is_no_plain_name_is_refused(self) -> None:
        """Each row names the gate's folders under --out-dir: '../../victim' made it delete and write
        files outside (with a build whose --dry-run took the name)."""
        with tempfile.TemporaryDirectory() as folder:
            for name in ("../../victim", "a/b", "..", "with space"):
                sweep = Path(folder) / "s.json"
                sweep.write_text(json.dumps({"rows": [{"name": "single"}, {"name": name}]}))
                with self.subTest(name=name), self.assertRaises(cli.Usage) as raised:
                    cli.sweep_rows(sweep)
                self.assertIn("a row's name is letters, digits", str(raised.exception))
            sweep.write_text(json.dumps({"rows": [{"name": "ddp-2.torch"}, {"name": "single_1"}]}))
            self.assertEqual(cli.sweep_rows(sweep), ("ddp-2.torch", "single_1"))
            # A name that is a list or an object: TypeError, the gate's own failure (the twelfth attack).
            for name in (["single"], {"a": 1}, "", 7):
                sweep.write_text(json.dumps({"rows": [{"name": "single"}, {"name": name}]}))
                with self.subTest(name=name), self.assertRaises(cli.Usage) as raised:
                    cli.sweep_rows(sweep)
                self.assertIn("names a row that is no name", str(raised.exception))

    def test_this_commits_own_unreadable_sweep_file_cannot_be_judged(self) -> None:
        # Merge-conflict markers in this commit's own sweep file stopped `git bisect run` (128); it
        # is this commit that cannot be judged (125). A file the user names stays a usage error.
        from ci_gate.outcomes import Side, Stop, What
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            (root / "scripts").mkdir()
            shutil.copy2(SOURCE / "scripts" / "ci-bench.env", root / "scripts" / "ci-bench.env")
            (root / "scripts" / "ci-bench.sweep.json").write_text('<<<<<<< HEAD\n{"rows": []}\n=======\n')
            with self.assertRaises(Stop) as raised:
                cli.parse(["--against", "HEAD~1"], root, {})
            self.assertEqual((raised.exception.outcome.side, raised.exception.outcome.what),
                             (Side.CANDIDATE, What.CANNOT_JUDGE))
            self.assertEqual(raised.exception.outcome.exit_code(bisect=True), 125)
            # However it is spelled (the thirteenth attack: named, it was 128 and stopped the bisection).
            for spelled in (str(root / "scripts" / "ci-bench.sweep.json"), str(root / "scripts" / ".." / "scripts" /
                                                                               "ci-bench.sweep.json")):
                with self.subTest(spelled=spelled), self.assertRaises(Stop) as raised:
                    cli.parse(["--against", "HEAD~1", "--sweep-file", spelled], root, {})
                self.assertEqual(raised.exception.outcome.exit_code(bisect=True), 125)
            # A file of the user's elsewhere stays the input's.
            (root / "mine.json").write_text("{")
            with self.assertRaises(cli.Usage):
                cli.parse(["--against", "HEAD~1", "--sweep-file", str(root / "mine.json")], root, {})

    def test_a_flag_of_the_other_mode_twice_or_unknown_is_a_usage_error(self) -> None:
        for args, says in ((["--seed", "1"], "--seed is a flag of the paired mode"),
                           (["--round-level"], "--round-level is a flag of the paired mode"),
                           (["--against", "x", "--repeat", "3"], "--repeat is a flag of the stored mode"),
                           (["--against", "x", "--baseline", "b.json"], "--baseline is a flag of the stored mode"),
                           (["--threshold", "0.1", "--threshold=0.2"], "--threshold given more than once"),
                           (["--repat", "3"], "unrecognized arguments: --repat"),
                           (["--thresh", "0.1"], "unrecognized arguments: --thresh"),  # no abbreviations
                           (["--allow-missing", "ddp-2"], "unrecognized arguments: --allow-missing")):
            with self.subTest(args=args), self.assertRaises(cli.Usage) as raised:
                parse(*args)
            self.assertIn(says, str(raised.exception))

    def test_arguments_after_the_separator_are_on_the_allow_list_only(self) -> None:
        accepted = parse("--", "--inject-slowdown", "0.1", "--threads=1", "--no-preload-python")
        self.assertEqual(accepted.sweep_args, ("--inject-slowdown", "0.1", "--threads=1", "--no-preload-python"))
        for refused in (["--reports-dir", "x"], ["--out-dir", "x"], ["--rows", "single"], ["--resume"],
                        ["--repeat", "2"], ["--gbench-json", "x"], ["--file", "x"], ["--out", "x"],
                        ["--save-checkpoint", "x"], ["--reports-dir=x"], ["stray"], ["--bisect"], ["--dry-run"],
                        ["--inject-slowdown"], ["--no-preload-python=1"], ["--inject-slowdown", "--threads", "1"]):
            with self.subTest(args=refused), self.assertRaises(cli.Usage) as raised:
                parse("--", *refused)
            self.assertIn("argument after --", str(raised.exception))
        with self.assertRaises(cli.Usage) as raised:  # both builds slowed: the judge refuses a slowed baseline
            parse("--against", "HEAD", "--", "--inject-slowdown", "0.1")
        self.assertIn("would reach both builds", str(raised.exception))
        self.assertEqual(parse("--against", "HEAD", "--", "--threads", "1").sweep_args, ("--threads", "1"))


class ThroughTheScriptTest(unittest.TestCase):
    """The exit codes of usage errors, through scripts/ci-bench, and nothing made."""

    def setUp(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-ci-cli-"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(self.dir)])

    def gate(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DDPBENCH_")}
        return subprocess.run([str(CI_BENCH), "--out-dir", str(self.dir / "out"), *args], capture_output=True, text=True,
                              check=False, timeout=60, env=env)

    def test_bisect_anywhere_makes_a_usage_error_128(self) -> None:
        # Any form of it (--bisect=1, an abbreviation) and --help under it: nothing judged, bisect stops.
        for args in (["--bisect=1"], ["--bisect=yes", "--repeat", "3"], ["--bis", "--repeat", "0"], ["--bi", "--repat", "3"], ["--bi=yes"], ["--bise=1", "--repat", "3"],
                     ["--bisect", "-h"],
                     ["--against", "HEAD", "--bisect", "--help"],
                     ["--repat", "3", "--bisect"], ["--bisect", "--repat", "3"], ["--", "--bisect"],
                     ["--threshold", "x", "--bisect"], ["--against", "HEAD", "--bisect", "--", "--reports-dir", "d"],
                     ["--bisect", "--seed", "3"]):
            with self.subTest(args=args):
                done = self.gate(*args)
                self.assertEqual(done.returncode, 128, done.stderr)
                if "-h" not in args and "--help" not in args:
                    said = [line for line in done.stderr.splitlines() if line.startswith("scripts/ci-bench:")]
                    self.assertEqual(len(said), 1, done.stderr)
        plain = self.gate("--repat", "3")
        self.assertEqual(plain.returncode, 2, plain.stderr)
        self.assertNotIn("Traceback", plain.stderr)
        self.assertFalse((self.dir / "out").exists(), "a usage error made the --out-dir")

    def test_the_callers_python_settings_do_not_reach_the_gate(self) -> None:
        # A PYTHONPATH shadowing what the gate imports, a PYTHONHOME that is no Python: the gate runs
        # isolated (a failure there would be exit 1, "bad", at every commit of a bisection).
        shadow = self.dir / "shadow"
        shadow.mkdir()
        (shadow / "secrets.py").write_text("raise SystemExit(1)\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("DDPBENCH_")}
        env.update(PYTHONPATH=str(shadow), PYTHONHOME="/nonexistent")
        done = subprocess.run([str(CI_BENCH), "--bisect", "--repat"], capture_output=True, text=True, check=False,
                              timeout=60, env=env)
        self.assertEqual(done.returncode, 128, done.stderr)

    def test_a_gate_that_cannot_start_is_its_own_failure(self) -> None:
        # A file of the gate's broken or missing: Python's own exit 1 would be "bad" at every commit.
        lib = self.dir / "scripts" / "lib"
        shutil.copytree(SOURCE / "scripts" / "lib" / "ci_gate", lib / "ci_gate", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(CI_BENCH, self.dir / "scripts" / "ci-bench")
        (lib / "ci_gate" / "stored_mode.py").write_text("this is not Python\n")
        for flags, code in (([], 2), (["--bisect"], 128), (["--bisect=1"], 128)):
            done = subprocess.run([str(self.dir / "scripts" / "ci-bench"), *flags], capture_output=True, text=True,
                                  check=False, timeout=60)
            self.assertEqual(done.returncode, code, done.stderr)
            self.assertIn("the gate itself failed to start", done.stderr)

    def test_help_exits_zero_and_lists_every_flag(self) -> None:
        done = subprocess.run([str(CI_BENCH), "--help"], capture_output=True, text=True, check=False, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        for flag in ("--against", "--against-dir", "--out-dir", "--sweep-file", "--expected-not-ok", "--bisect",
                     "--update-baseline", "--no-compare", "--round-level", "--turn-timeout-s"):
            self.assertIn(flag, done.stdout)


if __name__ == "__main__":
    unittest.main()

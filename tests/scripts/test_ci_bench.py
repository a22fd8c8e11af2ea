"""scripts/ci-bench's exit codes, and `git bisect run` driving it: 0 no regression, 1 a
regression, 2 bad input; under --bisect, 125 (skip this commit) wherever the gate cannot
judge (bad input, a build that fails), so bisect finds the first regressing commit across
commits it cannot measure.

Run: python3 -m unittest -v test_ci_bench (from tests/scripts), with DDPBENCH_BINARY set.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
CI_BENCH = SOURCE / "scripts" / "ci-bench"
FAKE = Path(__file__).resolve().parent / "fake_ddpbench.py"
BASELINE = json.loads((SOURCE / "scripts" / "ci-bench.baseline.json").read_text())
# Loose on purpose: these tests are about exit codes, not about the committed numbers.
LOOSE = ["--threshold", "0.5", "--min-vs-pytorch", "0.5"]


def without_row(doc: dict, row: str) -> dict:
    out = copy.deepcopy(doc)
    out["runs"] = [r for r in out["runs"] if r["name"] != row]
    out.pop("summary", None)
    return out


def slowed(doc: dict, row: str, factor: float) -> dict:
    """`row` `factor` times slower in every repetition, the rest as it was."""
    out = copy.deepcopy(doc)
    for r in out["runs"]:
        if r["name"] == row and r["status"] == "ok":
            r["train_time_s"] *= factor
            for rate in ("images_per_s", "steady_images_per_s"):
                r[rate] /= factor
    out.pop("summary", None)
    return out


def with_status(doc: dict, row: str, repetition: int, status: str) -> dict:
    out = copy.deepcopy(doc)
    for r in out["runs"]:
        if r["name"] == row and r["repetition"] == repetition:
            r["status"], r["reason"] = status, f"{status} on purpose (test)"
    out.pop("summary", None)
    return out


def on_another_machine(doc: dict) -> dict:
    out = copy.deepcopy(doc)
    out["environment"]["cpu_cores"] = out["environment"]["cpu_cores"] + 62
    return out


class CiBenchTest(unittest.TestCase):
    def setUp(self) -> None:
        if not os.environ.get("DDPBENCH_BINARY"):
            self.skipTest("DDPBENCH_BINARY is not set")
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-ci-bench-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.base = self.write("base.json", BASELINE)

    def write(self, name: str, doc: dict | str) -> Path:
        path = self.dir / name
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        return path

    def gate(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(CI_BENCH), *args], capture_output=True, text=True, check=False, timeout=300,
                              env=env or dict(os.environ))

    def test_exit_codes(self) -> None:
        same = self.gate("--baseline", str(self.base), "--current", str(self.base), *LOOSE)
        self.assertEqual(same.returncode, 0, same.stdout + same.stderr)
        self.assertIn("No regression", same.stdout)
        lost = self.write("lost.json", without_row(BASELINE, "ddp-2"))
        regression = self.gate("--baseline", str(self.base), "--current", str(lost), *LOOSE)
        self.assertEqual(regression.returncode, 1, regression.stdout + regression.stderr)
        self.assertIn("ddp-2 (faithful): ran in the baseline, absent now", regression.stdout)
        allowed = self.gate("--baseline", str(self.base), "--current", str(lost), "--allow-missing", "ddp-2,ddp-2.torch",
                            *LOOSE)
        self.assertEqual(allowed.returncode, 0, allowed.stdout + allowed.stderr)
        other = self.write("other.json", on_another_machine(BASELINE))
        for bisect, code in ((False, 2), (True, 125)):
            flags = ["--bisect"] if bisect else []
            mismatch = self.gate(*flags, "--baseline", str(self.base), "--current", str(other), *LOOSE)
            self.assertEqual(mismatch.returncode, code, mismatch.stderr)
            self.assertIn("CPU cores", mismatch.stderr)
            absent = self.gate(*flags, "--baseline", str(self.base), "--current", str(self.dir / "none.json"))
            self.assertEqual(absent.returncode, code, absent.stderr)
            self.assertIn("--current: cannot read", absent.stderr)
            typo = self.gate(*flags, "--repat", "3")
            self.assertEqual(typo.returncode, code, typo.stderr)
            self.assertIn("unknown argument '--repat'", typo.stderr)
        # A regression stays a regression under --bisect: only "cannot judge" becomes 125.
        self.assertEqual(self.gate("--bisect", "--baseline", str(self.base), "--current", str(lost), *LOOSE).returncode, 1)

    def test_the_default_gate_times_every_row(self) -> None:
        # dp-2's own twin cannot run on CPUs: it is timed against the twin that ran nearest it,
        # so with ci-bench's own settings it cannot be three times slower unseen.
        same = self.gate("--baseline", str(self.base), "--current", str(self.base))
        self.assertEqual(same.returncode, 0, same.stdout + same.stderr)
        self.assertIn("dp-2 (faithful): normalised by ddp-2.torch", same.stdout)
        self.assertNotIn("not compared: dp-2 (faithful)", same.stdout)
        slow = self.write("slow.json", slowed(BASELINE, "dp-2", 3.0))
        caught = self.gate("--baseline", str(self.base), "--current", str(slow))
        self.assertEqual(caught.returncode, 1, caught.stdout + caught.stderr)
        self.assertRegex(caught.stdout, r"\| dp-2 \(faithful\) \| train_time_s / twin \| [0-9.]+ \| [0-9.]+ \| 3\.000 \| REGRESSION")

    def test_update_baseline_refuses_rows_that_did_not_run(self) -> None:
        target = self.dir / "new-baseline.json"
        for status in ("failed", "skipped", "interrupted"):
            broken = self.write(f"{status}.json", with_status(BASELINE, "ddp-2", 3, status))
            refused = self.gate("--update-baseline", "--current", str(broken), "--baseline", str(target))
            self.assertEqual(refused.returncode, 2, refused.stdout + refused.stderr)
            self.assertIn(f"ddp-2 (faithful) repetition 3: {status}: {status} on purpose", refused.stderr)
            self.assertIn("--expected-not-ok", refused.stderr)
            self.assertFalse(target.exists(), "a refused baseline was written")
        expected = self.gate("--update-baseline", "--current", str(broken), "--baseline", str(target),
                             "--expected-not-ok", "ddp-2,dp-2.torch")
        self.assertEqual(expected.returncode, 0, expected.stdout + expected.stderr)
        self.assertTrue(target.exists())
        target.unlink()
        # The committed baseline itself: only dp-2.torch did not run, which ci-bench.env expects here.
        plain = self.gate("--update-baseline", "--current", str(self.base), "--baseline", str(target))
        self.assertEqual(plain.returncode, 0, plain.stdout + plain.stderr)
        nothing_expected = self.gate("--update-baseline", "--current", str(self.base), "--baseline",
                                     str(self.dir / "x.json"), "--expected-not-ok", "")
        self.assertEqual(nothing_expected.returncode, 2, nothing_expected.stderr)
        self.assertIn("dp-2.torch (faithful) repetition 0: skipped", nothing_expected.stderr)
        # A sweep cut short between rows leaves the later rows out altogether.
        truncated = without_row(BASELINE, "dp-2")
        cut = self.write("cut.json", truncated)
        cut_target = self.dir / "cut-baseline.json"
        refused_cut = self.gate("--update-baseline", "--current", str(cut), "--baseline", str(cut_target))
        self.assertEqual(refused_cut.returncode, 2, refused_cut.stderr)
        self.assertIn("dp-2 (faithful) repetition 4: absent: planned by the sweep, not in the file", refused_cut.stderr)
        self.assertFalse(cut_target.exists())
        unknown = self.gate("--update-baseline", "--current", str(self.base), "--baseline", str(self.dir / "y.json"),
                            "--expected-not-ok", "dp-3.torch")
        self.assertEqual(unknown.returncode, 2, unknown.stderr)
        self.assertIn("names rows the sweep does not have: dp-3.torch", unknown.stderr)

    def test_a_commit_that_does_not_build_is_skipped(self) -> None:
        env = dict(os.environ, DDPBENCH_TORCH_PREFIX=str(self.dir / "no-libtorch-here"),
                   DDPBENCH_BUILD_DIR=str(self.dir / "build"))
        env.pop("DDPBENCH_BINARY")
        broken = self.gate("--bisect", "--baseline", str(self.base), "--current", str(self.base), env=env)
        self.assertEqual(broken.returncode, 125, broken.stderr)
        self.assertIn("the set-up or build failed", broken.stderr)
        self.assertEqual(self.gate("--baseline", str(self.base), "--current", str(self.base), env=env).returncode, 2)

    def test_git_bisect_run_finds_the_first_regression_past_commits_it_cannot_judge(self) -> None:
        if shutil.which("git") is None:
            self.skipTest("git is not installed")
        repo = self.dir / "repo"
        repo.mkdir()
        git_env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                       GIT_COMMITTER_EMAIL="t@t")

        def git(*args: str) -> str:
            return subprocess.run(["git", *args], cwd=repo, env=git_env, capture_output=True, text=True,
                                  check=True).stdout

        git("init", "-q")
        good, broken, regressed = json.dumps(BASELINE), "{\"schema\": ", json.dumps(without_row(BASELINE, "ddp-2"))
        # Commits 2-5 cannot be judged (their results are not JSON): bisect must skip them, not
        # blame them, and still name commit 7.
        history = [good, broken, broken, broken, broken, good, regressed, regressed]
        commits = []
        for number, text in enumerate(history, 1):
            (repo / "current.json").write_text(text)
            git("add", "current.json")
            git("commit", "-q", "--allow-empty", "-m", f"commit {number}")
            commits.append(git("rev-parse", "HEAD").strip())
        git("bisect", "start", commits[-1], commits[0])
        run = subprocess.run(["git", "bisect", "run", str(CI_BENCH), "--bisect", "--baseline", str(self.base), "--current",
                              "current.json", *LOOSE], cwd=repo, env=git_env, capture_output=True, text=True,
                             check=False, timeout=600)
        log = git("bisect", "log")
        git("bisect", "reset")
        self.assertIn(f"{commits[6]} is the first bad commit", run.stdout, run.stdout + run.stderr)
        self.assertIn("commit 7", run.stdout)
        self.assertIn("# skip:", log, "no commit was skipped, so the test proved nothing about 125")

    def test_git_bisect_run_against_a_good_commit_finds_the_commit_that_slowed_a_row(self) -> None:
        """A small real history: each commit's "build" (its scripts/lib/setup.sh) is a stand-in
        whose sweep writes the row with a known time (fake_ddpbench.py: 1 s within 1 %, times
        the commit's own slowdown) and whose other commands are the real ddpbench; commit 4 makes
        the row 5 times slower. Known times, so the verdict on each commit cannot move with the
        machine's noise (identical commits timed live could read as a regression). ci-bench
        --against builds the good commit in its worktree once and runs both builds' rounds."""
        if shutil.which("git") is None:
            self.skipTest("git is not installed")
        repo = self.dir / "repo"
        (repo / "scripts" / "lib").mkdir(parents=True)
        for name in ("ci-bench", "ci-bench.env", "lib/paired_rounds.py"):
            shutil.copy2(SOURCE / "scripts" / name, repo / "scripts" / name)
        (repo / "scripts" / "ci-bench.sweep.json").write_text(json.dumps({
            "name": "ci-bench", "baseline": "single",
            "defaults": {"model": "tiny", "num-classes": 10, "dataset": "synthetic", "synthetic-train-images": 1024,
                         "synthetic-test-images": 64, "batch-size": 16, "workers": 0, "device": "cpu",
                         "max-steps": 32, "warmup-steps": 2, "max-eval-batches": 1, "seed": 1, "threads": 1},
            "rows": [{"name": "single", "options": {"strategy": "single"}}]}))
        (repo / "scripts" / "lib" / "setup.sh").write_text(
            'DDPBENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)\n'
            'DDPBENCH_BUILD_DIR=${DDPBENCH_BUILD_DIR:-$DDPBENCH_ROOT/build}\n'
            'ddpbench_setup() {\n'
            '  [ ! -e "$DDPBENCH_ROOT/broken" ] || { echo "this commit does not compile" >&2; return 1; }\n'
            '  [ ! -e "$DDPBENCH_ROOT/nobinary" ] || return 0\n'
            '  mkdir -p "$DDPBENCH_BUILD_DIR"\n'
            '  printf \'#!/bin/sh\\n[ "$1" = sweep ] && exec %s %s "$@" --inject-slowdown %s\\nexec %s "$@"\\n\' \\\n'
            '    "$FAKE_PYTHON" "$FAKE_SWEEP" "$(cat "$DDPBENCH_ROOT/slowdown")" "$FAKE_REAL_DDPBENCH" '
            '>"$DDPBENCH_BUILD_DIR/ddpbench"\n'
            '  [ ! -e "$DDPBENCH_ROOT/crash" ] || printf \'#!/bin/sh\\n[ "$1" = sweep ] && kill -SEGV $$\\nexec %s "$@"\\n\' '
            '"$FAKE_REAL_DDPBENCH" >"$DDPBENCH_BUILD_DIR/ddpbench"\n'
            '  chmod +x "$DDPBENCH_BUILD_DIR/ddpbench"\n'
            '}\n')
        (repo / ".gitignore").write_text("/build*/\n/results/\n")
        (self.dir / "fake-state").mkdir()
        env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                   GIT_COMMITTER_EMAIL="t@t", FAKE_REAL_DDPBENCH=os.environ["DDPBENCH_BINARY"],
                   FAKE_PYTHON=sys.executable, FAKE_SWEEP=str(FAKE), FAKE_DDPBENCH_BUILD="stand-in",
                   FAKE_DDPBENCH_SPEC=json.dumps({"log": str(self.dir / "fake-runs.log"),
                                                  "state": str(self.dir / "fake-state"),
                                                  "rows": {"single": {"stand-in": [1.0, 0.01]}}}))
        env.pop("DDPBENCH_BINARY")
        env.pop("DDPBENCH_BUILD_DIR", None)

        def git(*args: str) -> str:
            return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True,
                                  check=True).stdout

        git("init", "-q")
        # 1 good; 2 does not build; 3 good; 4 makes the row 5 times slower; 5, 6 keep it.
        history = [("0", False), ("0", True), ("0", False), ("4.0", False), ("4.0", False), ("4.0", False)]
        commits = []
        for number, (slowdown, broken) in enumerate(history, 1):
            (repo / "slowdown").write_text(slowdown + "\n")
            (repo / "broken").unlink(missing_ok=True)
            if broken:
                (repo / "broken").write_text("")
            git("add", "-A")
            git("commit", "-q", "--allow-empty", "-m", f"commit {number}")
            commits.append(git("rev-parse", "HEAD").strip())

        # A commit that does not build is skipped; one that is not a commit is bad input.
        git("checkout", "-q", commits[1])
        skipped = subprocess.run(["scripts/ci-bench", "--bisect", "--against", commits[0], "--no-twins"], cwd=repo,
                                 env=env, capture_output=True, text=True, check=False, timeout=600)
        self.assertEqual(skipped.returncode, 125, skipped.stderr)
        self.assertIn("the set-up or build failed", skipped.stderr)
        for flags, code in (([], 2), (["--bisect"], 128)):  # 128 stops git bisect run: no commit can be judged
            unknown = subprocess.run(["scripts/ci-bench", *flags, "--against", "no-such-rev"], cwd=repo, env=env,
                                     capture_output=True, text=True, check=False, timeout=60)
            self.assertEqual(unknown.returncode, code, unknown.stderr)
            self.assertIn("--against: 'no-such-rev' is not a commit", unknown.stderr)
        git("checkout", "-q", commits[-1])

        git("bisect", "start", commits[-1], commits[0])
        run = subprocess.run(["git", "bisect", "run", "scripts/ci-bench", "--bisect", "--against", commits[0],
                              "--no-twins", "--seed", "1", "--max-rounds", "8"], cwd=repo, env=env, capture_output=True, text=True,
                             check=False, timeout=1200)
        git("bisect", "reset")
        self.assertIn(f"{commits[3]} is the first bad commit", run.stdout, run.stdout + run.stderr)
        self.assertRegex(run.stdout, r"single \(faithful\) train_time_s: \d+\.\d % slower.*REGRESSION")
        # A REV whose set-up succeeds but leaves no binary does not build: the binary left by
        # the last REV built there is not taken for its.
        git("checkout", "-q", "-b", "nobin", commits[0])
        (repo / "nobinary").write_text("")
        git("add", "-A")
        git("commit", "-q", "-m", "set-up that builds nothing")
        git("checkout", "-q", commits[-1])
        for flags, code in (([], 2), (["--bisect"], 128)):
            stale = subprocess.run(["scripts/ci-bench", *flags, "--against", "nobin", "--no-twins"], cwd=repo,
                                   env=env, capture_output=True, text=True, check=False, timeout=120)
            self.assertEqual(stale.returncode, code, stale.stderr)
            self.assertIn("--against: nobin", stale.stderr)
            self.assertIn("does not build", stale.stderr)

        # A candidate whose sweep crashes fails the gate, twins on (the floor has no rounds to read).
        git("checkout", "-q", "-b", "crashing", commits[-1])
        (repo / "crash").write_text("")
        git("add", "-A")
        git("commit", "-q", "-m", "a sweep that crashes")
        crashed = subprocess.run(["scripts/ci-bench", "--bisect", "--against", commits[0], "--seed", "3"], cwd=repo,
                                 env=env, capture_output=True, text=True, check=False, timeout=600)
        self.assertEqual(crashed.returncode, 1, crashed.stdout + crashed.stderr)
        self.assertIn("the candidate fails the gate", crashed.stderr)
        git("checkout", "-q", commits[-1])

        # --against-dir never removes or checks out a folder this repository did not make there:
        # neither a stranger's src nor the candidate's own checkout.
        foreign = self.dir / "foreign"
        (foreign / "src").mkdir(parents=True)
        (foreign / "src" / "notes.txt").write_text("precious")
        refused = subprocess.run(["scripts/ci-bench", "--against", commits[0], "--no-twins", "--against-dir",
                                  str(foreign)], cwd=repo, env=env, capture_output=True, text=True, check=False,
                                 timeout=120)
        self.assertEqual(refused.returncode, 2, refused.stderr)
        self.assertIn("exists and is not a worktree this repository made", refused.stderr)
        self.assertEqual((foreign / "src" / "notes.txt").read_text(), "precious")
        own = self.dir / "lay" / "src"
        subprocess.run(["git", "clone", "-q", str(repo), str(own)], env=env, check=True)
        (own / "thesis.txt").write_text("uncommitted")
        refused = subprocess.run(["scripts/ci-bench", "--against", commits[0], "--no-twins", "--against-dir",
                                  str(own.parent)], cwd=own, env=env, capture_output=True, text=True, check=False,
                                 timeout=120)
        self.assertEqual(refused.returncode, 2, refused.stderr)
        self.assertEqual((own / "thesis.txt").read_text(), "uncommitted")

        subprocess.run(["scripts/ci-bench", "--against", commits[0], "--no-twins", "--max-rounds", "4", "--threshold",
                        "0.9"], cwd=repo, env=env, capture_output=True, check=False, timeout=600)

        # The good commit is built in its own worktree beside the build folder, kept for the next run.
        worktree = subprocess.run(["git", "-C", str(repo / "build-against" / "src"), "rev-parse", "HEAD"],
                                  capture_output=True, text=True, check=True).stdout.strip()
        self.assertEqual(worktree, commits[0])
        self.assertTrue((repo / "build-against" / "build" / "ddpbench").exists())


if __name__ == "__main__":
    unittest.main()

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


class GateCase(unittest.TestCase):
    """A scratch folder, the committed baseline in it, and scripts/ci-bench to run."""

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

    def stand_in_history(self) -> tuple[Path, dict[str, str], object, list[str]]:
        """A small real repository whose commits' "builds" (their scripts/lib/setup.sh) are
        stand-ins (fake_ddpbench.py) with known times: its path, environment, git and commits
        (1 good; 2 does not build; 3 good; 4 makes the row 5 times slower; 5, 6 keep it)."""
        if shutil.which("git") is None:
            self.skipTest("git is not installed")
        repo = self.dir / "repo"
        (repo / "scripts" / "lib").mkdir(parents=True)
        for name in ("ci-bench", "ci-bench.env", "lib/paired_rounds.py", "lib/lockstep.py"):
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

        return repo, env, git, commits


class CiBenchTest(GateCase):
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
        repo, env, git, commits = self.stand_in_history()

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
        self.assertIn("but no marker .ddpbench-ci-bench-worktree, so scripts/ci-bench did not make it", refused.stderr)
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
        self.assertIn(f"worktree {repo / 'build-against' / 'src'}",
                      (repo / "build-against" / ".ddpbench-ci-bench-worktree").read_text())
        # In a folder the gate made, a src that is not its worktree (put there since) is not touched.
        git("worktree", "remove", "--force", str(repo / "build-against" / "src"))
        (repo / "build-against" / "src").mkdir()
        (repo / "build-against" / "src" / "notes.txt").write_text("precious")
        refused = subprocess.run(["scripts/ci-bench", "--against", commits[0], "--no-twins"], cwd=repo, env=env,
                                 capture_output=True, text=True, check=False, timeout=120)
        self.assertEqual(refused.returncode, 2, refused.stderr)
        self.assertIn("exists and is not a worktree this repository made", refused.stderr)
        self.assertEqual((repo / "build-against" / "src" / "notes.txt").read_text(), "precious")



class AgainstDirTest(GateCase):
    """--against-dir: the gate uses only a folder it made (its marker says so), and refuses any
    other, and any folder holding the candidate's checkout or build, before a file is touched;
    every setting is checked before REV is built."""

    def against(self, repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["scripts/ci-bench", *args], cwd=repo, env=env, capture_output=True, text=True,
                              check=False, timeout=120)

    @staticmethod
    def snapshot(folder: Path) -> dict[str, bytes]:
        return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
                if p.is_file() and ".git" not in p.relative_to(folder).parts}

    def test_a_users_worktree_at_the_against_dir_is_refused_untouched(self) -> None:
        repo, env, git, commits = self.stand_in_history()
        mine = self.dir / "mine"
        git("worktree", "add", "-q", "-b", "my-work", str(mine / "src"), commits[2])
        (mine / "src" / "slowdown").write_text("edited, not committed\n")
        (mine / "src" / "draft.txt").write_text("untracked\n")
        before = self.snapshot(mine)
        for flags, code in (([], 2), (["--bisect"], 128)):
            refused = self.against(repo, env, *flags, "--against", commits[0], "--no-twins", "--against-dir", str(mine))
            self.assertEqual(refused.returncode, code, refused.stderr)
            self.assertIn(f"--against-dir {mine} holds files", refused.stderr)
            self.assertIn("choose another --against-dir", refused.stderr)
            self.assertEqual(self.snapshot(mine), before, "the user's worktree was changed")
        self.assertEqual(subprocess.run(["git", "-C", str(mine / "src"), "rev-parse", "--abbrev-ref", "HEAD"],
                                        capture_output=True, text=True, check=True).stdout.strip(), "my-work")
        self.assertFalse((self.dir / "fake-runs.log").exists(), "something ran")

    def head(self, worktree: Path) -> str:
        return subprocess.run(["git", "-C", str(worktree), "rev-parse", "--abbrev-ref", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()

    def test_a_worktree_added_again_at_the_gates_src_is_refused_untouched(self) -> None:
        # The attack: the gate made D (marker) and D/src; the user removed that worktree and added
        # their own at the same path, on a branch, with an edit and an untracked file. The marker
        # stands and D/src is a worktree of this repository, yet it is not the gate's.
        repo, env, git, commits = self.stand_in_history()
        mine = self.dir / "d"
        made = self.against(repo, env, "--against", commits[0], "--no-twins", "--max-rounds", "2", "--min-rounds", "2",
                            "--against-dir", str(mine))
        self.assertIn(made.returncode, (0, 1), made.stderr)
        self.assertTrue((mine / ".ddpbench-ci-bench-worktree").is_file())
        git("worktree", "remove", "--force", str(mine / "src"))
        git("worktree", "add", "-q", "-b", "userwork", str(mine / "src"), "HEAD")
        (mine / "src" / "slowdown").write_text("edited, not committed\n")
        (mine / "src" / "draft.txt").write_text("untracked\n")
        before = self.snapshot(mine / "src")
        for flags, code in (([], 2), (["--bisect"], 128)):
            refused = self.against(repo, env, *flags, "--against", commits[2], "--no-twins", "--against-dir", str(mine))
            self.assertEqual(refused.returncode, code, refused.stderr)
            self.assertIn(f"{mine / 'src'} is a worktree of this repository that scripts/ci-bench did not add",
                          refused.stderr)
            self.assertEqual(self.snapshot(mine / "src"), before, "the user's worktree was changed")
            self.assertEqual(self.head(mine / "src"), "userwork", "the user's branch is no longer checked out")

    def test_the_gates_own_worktree_with_a_branch_or_changes_is_refused_untouched(self) -> None:
        repo, env, git, commits = self.stand_in_history()
        d = self.dir / "d"
        quick = ["--no-twins", "--max-rounds", "2", "--min-rounds", "2", "--against-dir", str(d)]
        made = self.against(repo, env, "--against", commits[0], *quick)
        self.assertIn(made.returncode, (0, 1), made.stderr)
        src = d / "src"
        # A branch checked out there: someone works in it (the gate always detaches).
        git("-C", str(src), "checkout", "-q", "-b", "someone")
        refused = self.against(repo, env, "--against", commits[2], *quick)
        self.assertEqual(refused.returncode, 2, refused.stderr)
        self.assertIn("has branch someone checked out", refused.stderr)
        self.assertEqual(self.head(src), "someone")
        git("-C", str(src), "checkout", "-q", "--detach")
        for path, text in ((src / "slowdown", "edited\n"), (src / "draft.txt", "untracked\n")):
            original = path.read_bytes() if path.exists() else None
            path.write_text(text)
            before = self.snapshot(src)
            refused = self.against(repo, env, "--against", commits[2], *quick)
            self.assertEqual(refused.returncode, 2, refused.stderr)
            self.assertIn("holds changes scripts/ci-bench did not make", refused.stderr)
            self.assertEqual(self.snapshot(src), before, f"{path.name} was changed")
            if original is None:
                path.unlink()
            else:
                path.write_bytes(original)
        # Ignored files (a build's) are the gate's to clean: the worktree is used again.
        (src / "build-old").mkdir()
        (src / "build-old" / "object.o").write_text("ignored\n")
        again = self.against(repo, env, "--against", commits[2], *quick)
        self.assertIn(again.returncode, (0, 1), again.stderr)
        self.assertEqual(git("-C", str(src), "rev-parse", "HEAD").strip(), commits[2])
        self.assertFalse((src / "build-old").exists())

    def test_a_commit_made_in_the_gates_worktree_and_an_out_dir_inside_it_are_refused_untouched(self) -> None:
        # The second attack: a commit on the gate's detached HEAD leaves status clean and no
        # branch, yet the next checkout would orphan it; an --out-dir inside REV's worktree (an
        # ignored folder) was wiped by its clean.
        repo, env, git, commits = self.stand_in_history()
        d = self.dir / "d"
        quick = ["--no-twins", "--max-rounds", "2", "--min-rounds", "2", "--against-dir", str(d)]
        made = self.against(repo, env, "--against", commits[0], *quick)
        self.assertIn(made.returncode, (0, 1), made.stderr)
        src = d / "src"
        (src / "notes.txt").write_text("mine\n")
        git("-C", str(src), "add", "notes.txt")
        git("-C", str(src), "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "work on the gate's HEAD")
        mine = git("-C", str(src), "rev-parse", "HEAD").strip()
        for flags, code in (([], 2), (["--bisect"], 128)):
            refused = self.against(repo, env, *flags, "--against", commits[2], *quick)
            self.assertEqual(refused.returncode, code, refused.stderr)
            self.assertIn(f"not at {commits[0]} where scripts/ci-bench left it", refused.stderr)
            self.assertEqual(git("-C", str(src), "rev-parse", "HEAD").strip(), mine, "the user's commit was left")
            self.assertEqual((src / "notes.txt").read_text(), "mine\n")
        git("-C", str(src), "checkout", "-q", "--detach", commits[0])
        inside = src / "results" / "mine"
        inside.mkdir(parents=True)
        (inside / "notes.txt").write_text("precious\n")
        for out in (inside, d):
            refused = self.against(repo, env, "--against", commits[2], *quick, "--out-dir", str(out))
            self.assertEqual(refused.returncode, 2, refused.stderr)
            self.assertIn("lie one inside the other", refused.stderr)
        self.assertEqual((inside / "notes.txt").read_text(), "precious\n")

    def test_the_candidates_checkout_and_build_are_refused(self) -> None:
        repo, env, _, commits = self.stand_in_history()
        (repo / "build").mkdir()
        binary = repo / "build" / "ddpbench"
        binary.write_text(f"#!/bin/sh\nexec {os.environ['DDPBENCH_BINARY']} \"$@\"\n")
        binary.chmod(0o755)
        env = dict(env, DDPBENCH_BINARY=str(binary))
        kept = binary.read_bytes()
        (self.dir / "a-file").write_text("")
        for folder, says in ((".", "is the candidate's checkout"), (str(self.dir), "is the candidate's checkout"),
                             ("build", "holds the candidate's build folder"),
                             ("build/against", "lies inside the candidate's build folder"),
                             (str(self.dir / "a-file"), "exists and is not a folder")):
            refused = self.against(repo, env, "--against", commits[0], "--no-twins", "--against-dir", folder)
            self.assertEqual(refused.returncode, 2, f"{folder}: {refused.stderr}")
            self.assertIn(says, refused.stderr)
            self.assertEqual(binary.read_bytes(), kept, f"{folder}: the candidate's binary was removed or replaced")
            self.assertFalse((repo / "src").exists() or (repo / "build" / "against").exists() or
                             (repo / ".lock").exists() or (repo / "build" / "src").exists(), f"{folder}: made files")
        # A build folder elsewhere (DDPBENCH_BUILD_DIR) is the candidate's build too.
        elsewhere = self.dir / "b"
        refused = self.against(repo, dict(env, DDPBENCH_BUILD_DIR=str(elsewhere / "build")), "--against", commits[0],
                               "--no-twins", "--against-dir", str(elsewhere))
        self.assertEqual(refused.returncode, 2, refused.stderr)
        self.assertIn("holds the candidate's build folder", refused.stderr)

    def test_a_folder_without_the_gates_marker_is_refused_and_the_marker_is_checked(self) -> None:
        repo, env, git, commits = self.stand_in_history()
        made = self.against(repo, env, "--against", commits[0], "--no-twins", "--max-rounds", "2", "--min-rounds", "2")
        self.assertIn(made.returncode, (0, 1), made.stderr)
        default = repo / "build-against"
        marker = default / ".ddpbench-ci-bench-worktree"
        self.assertIn(f"worktree {default / 'src'}", marker.read_text())
        # Used again: the marker stands, and it is the gate's worktree that is checked out.
        again = self.against(repo, env, "--against", commits[2], "--no-twins", "--max-rounds", "2", "--min-rounds", "2")
        self.assertIn(again.returncode, (0, 1), again.stderr)
        self.assertEqual(git("-C", str(default / "src"), "rev-parse", "HEAD").strip(), commits[2])
        # A folder an older gate made has no marker: refused with how to remove it.
        marker.unlink()
        (default / "src" / "draft.txt").write_text("untracked\n")
        old = self.against(repo, env, "--against", commits[0], "--no-twins")
        self.assertEqual(old.returncode, 2, old.stderr)
        self.assertIn("if an earlier scripts/ci-bench made it (before the marker), remove it", old.stderr)
        self.assertTrue((default / "src" / "draft.txt").exists())
        # A marker of another folder (a copy) is not this folder's.
        marker.write_text(f"ddpbench scripts/ci-bench --against worktree\ngit-common-dir {repo / '.git'}\n"
                          f"worktree {self.dir / 'elsewhere' / 'src'}\n")
        copied = self.against(repo, env, "--against", commits[0], "--no-twins")
        self.assertEqual(copied.returncode, 2, copied.stderr)
        self.assertIn("its marker", copied.stderr)
        self.assertTrue((default / "src" / "draft.txt").exists())

    def test_every_setting_is_checked_before_rev_is_built(self) -> None:
        repo, env, _, commits = self.stand_in_history()
        (self.dir / "empty.json").write_text(json.dumps({"rows": []}))
        (self.dir / "a-file").write_text("mine\n")
        (self.dir / "mine" / "candidate").mkdir(parents=True)
        (self.dir / "mine" / "candidate" / "notes.txt").write_text("mine\n")
        for args, says in ((["--max-rounds", "101"], "--max-rounds at most 100"),
                           (["--min-rounds", "1"], "--min-rounds must be 2 or more"),
                           (["--min-rounds", "6", "--max-rounds", "5"], "must be at most --max-rounds"),
                           (["--max-rounds", "x"], "--max-rounds must be a non-negative integer"),
                           (["--threshold", "1.5"], "--threshold must be a number in [0, 1)"),
                           (["--alpha", "0"], "--alpha must be a number in (0, 1)"),
                           (["--metric", "test_accuracy"], "test_accuracy is no timing of two builds"),
                           (["--metric", "train_time_s,train_time_s"], "at most once"),
                           (["--min-vs-pytorch", "0"], "--floor (--min-vs-pytorch) must be a number in (0, inf)"),
                           (["--min-vs-pytorch", "fast"], "--floor (--min-vs-pytorch) must be a number"),
                           (["--seed", "-3"], "--seed must be a non-negative integer"),
                           (["--sweep-file", str(self.dir / "none.json")], "--sweep-file: cannot read the rows"),
                           (["--sweep-file", str(self.dir / "empty.json")], "must name each row once"),
                           (["--allow-missing", "no-such-row"], "--allow-missing: the sweep file has no row"),
                           (["--expected-not-ok", "nonsense-row"], "--expected-not-ok: the sweep file has no row"),
                           (["--out-dir", str(self.dir / "a-file")], "a-file is not a folder"),
                           (["--out-dir", str(self.dir / "a-file" / "out")], "a-file is not a folder"),
                           (["--out-dir", str(self.dir / "mine")], "exists without the marker")):
            for flags, code in (([], 2), (["--bisect"], 125)):
                refused = self.against(repo, env, *flags, "--against", commits[0], *args)
                self.assertEqual(refused.returncode, code, f"{args}: {refused.stderr}")
                self.assertIn(says, refused.stderr, args)
        self.assertFalse((repo / "build-against").exists(), "the against dir was made before the settings were checked")
        self.assertFalse((repo / "build").exists(), "a build started before the settings were checked")
        self.assertEqual((self.dir / "a-file").read_text(), "mine\n")
        self.assertEqual((self.dir / "mine" / "candidate" / "notes.txt").read_text(), "mine\n")

    def test_sweep_arguments_the_candidate_refuses_are_refused_before_rev_is_built(self) -> None:
        repo, env, _, commits = self.stand_in_history()
        refused = self.against(repo, env, "--against", commits[0], "--no-twins", "--", "--bogus-flag")
        self.assertEqual(refused.returncode, 2, refused.stderr)
        self.assertIn("the candidate's sweep refuses the sweep file's rows or the arguments after --", refused.stderr)
        self.assertIn("--bogus-flag", refused.stderr)
        self.assertNotIn("baseline build", refused.stderr)
        self.assertFalse((repo / "build-against").exists(), "REV was built before the sweep's arguments were checked")
        self.assertFalse((self.dir / "fake-runs.log").exists(), "something ran")
        accepted = self.against(repo, env, "--against", commits[0], "--no-twins", "--max-rounds", "2", "--min-rounds",
                                "2", "--", "--inject-slowdown", "0")
        self.assertIn(accepted.returncode, (0, 1), accepted.stderr)


class UpdateBaselineTest(GateCase):
    """--update-baseline refuses a file the gate then cannot time: its own comparison of the
    file with itself must pass."""

    def test_a_file_the_gate_cannot_time_is_refused(self) -> None:
        target = self.dir / "new-baseline.json"
        untimed = copy.deepcopy(BASELINE)
        for run in untimed["runs"]:
            if run["name"] == "single":
                run["train_time_s"] = None
        untimed.pop("summary", None)
        path = self.write("untimed.json", untimed)
        for flags, code in (([], 2), (["--bisect"], 125)):
            refused = self.gate(*flags, "--update-baseline", "--current", str(path), "--baseline", str(target))
            self.assertEqual(refused.returncode, code, refused.stdout + refused.stderr)
            self.assertIn(f"--update-baseline: the gate cannot time {path}", refused.stderr)
            self.assertIn("single (faithful)", refused.stderr, "compare's reason is not quoted")
            self.assertFalse(target.exists(), "a baseline the gate cannot time was written")

    def test_a_file_lacking_a_row_of_the_gates_sweep_file_is_refused(self) -> None:
        # The second attack: a baseline without dp-2 (a sweep run with --rows) was taken, and
        # dp-2 three times slower then passed, "only in the current file".
        target = self.dir / "new-baseline.json"
        lacking = copy.deepcopy(BASELINE)
        lacking["runs"] = [r for r in lacking["runs"] if not r["name"].startswith("dp-2")]
        lacking["sweep"]["rows"] = [r for r in lacking["sweep"]["rows"] if not r["name"].startswith("dp-2")]
        lacking.pop("summary", None)
        path = self.write("lacking.json", lacking)
        for flags, code in (([], 2), (["--bisect"], 125)):
            refused = self.gate(*flags, "--update-baseline", "--current", str(path), "--baseline", str(target),
                                "--expected-not-ok", "")
            self.assertEqual(refused.returncode, code, refused.stdout + refused.stderr)
            self.assertIn("lacks rows the gate's sweep file", refused.stderr)
            self.assertIn("dp-2", refused.stderr)
            self.assertFalse(target.exists(), "a baseline lacking a gated row was written")

    def test_a_malformed_file_is_refused_in_one_line_not_a_traceback(self) -> None:
        target = self.dir / "new-baseline.json"
        no_status = copy.deepcopy(BASELINE)
        del no_status["runs"][0]["status"]
        words = copy.deepcopy(BASELINE)
        words["sweep"]["repeat"] = "five"
        for name, doc, says in (("no-status.json", no_status, "status"), ("words.json", words, "five")):
            path = self.write(name, doc)
            for flags, code in (([], 2), (["--bisect"], 125)):
                refused = self.gate(*flags, "--update-baseline", "--current", str(path), "--baseline", str(target))
                self.assertEqual(refused.returncode, code, refused.stdout + refused.stderr)
                self.assertNotIn("Traceback", refused.stderr)
                self.assertIn(f"the gate cannot time {path}", refused.stderr)
                self.assertIn(says, refused.stderr)
                self.assertFalse(target.exists())
        # A compare that passes it anyway (here one that says "No regression." to anything): the
        # gate's own reading of the file still names it in one line.
        wrapper = self.dir / "lying-ddpbench"
        wrapper.write_text(f"#!/bin/sh\nFAKE_DDPBENCH_BUILD=x exec {sys.executable} {FAKE} \"$@\"\n")
        wrapper.chmod(0o755)
        env = dict(os.environ, DDPBENCH_BINARY=str(wrapper), FAKE_REAL_DDPBENCH=os.environ["DDPBENCH_BINARY"],
                   FAKE_DDPBENCH_SPEC=json.dumps({"log": str(self.dir / "log"), "state": str(self.dir), "rows": {},
                                                  "compare": {"x": {"floor": "lie"}}}))
        for name in ("no-status.json", "words.json"):
            refused = self.gate("--update-baseline", "--current", str(self.dir / name), "--baseline", str(target),
                                env=env)
            self.assertEqual(refused.returncode, 2, refused.stdout + refused.stderr)
            self.assertNotIn("Traceback", refused.stderr)
            self.assertIn(f"--update-baseline: {self.dir / name} is not a result file the gate can read", refused.stderr)
            self.assertEqual(len(refused.stderr.strip().splitlines()), 1, refused.stderr)
            self.assertFalse(target.exists())

    def test_a_file_compare_refuses_is_refused_with_its_reason(self) -> None:
        wrapper = self.dir / "refusing-ddpbench"
        wrapper.write_text(f"#!/bin/sh\nFAKE_DDPBENCH_BUILD=x exec {sys.executable} {FAKE} \"$@\"\n")
        wrapper.chmod(0o755)
        env = dict(os.environ, DDPBENCH_BINARY=str(wrapper), FAKE_DDPBENCH_SPEC=json.dumps({
            "log": str(self.dir / "log"), "state": str(self.dir), "rows": {}, "compare": {"x": {"floor": "refuse"}}}))
        target = self.dir / "new-baseline.json"
        refused = self.gate("--update-baseline", "--current", str(self.base), "--baseline", str(target), env=env)
        self.assertEqual(refused.returncode, 2, refused.stdout + refused.stderr)
        self.assertIn("exited with 2", refused.stderr)
        self.assertIn("refused on purpose (test)", refused.stderr)
        self.assertFalse(target.exists())


if __name__ == "__main__":
    unittest.main()

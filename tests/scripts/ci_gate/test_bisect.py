"""scripts/ci-bench under `git bisect run`: it names the first regressing commit, skips the commits
it cannot judge (125: a commit that does not build, a result file that cannot be read), and stops
(128) where no commit could be judged (a REV that is not a commit or does not build); a candidate
that crashes is bad (1), never skipped or an interruption.

Run: python3 -m unittest -v test_bisect (from tests/scripts/ci_gate), with DDPBENCH_BINARY set.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

from stand_in_repository import GIT_IDENTITY, StandInRepository

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[3]))
CI_BENCH = SOURCE / "scripts" / "ci-bench"
BASELINE = json.loads((SOURCE / "scripts" / "ci-bench.baseline.json").read_text())
LOOSE = ["--threshold", "0.5", "--min-vs-pytorch", "0.5"]
# Each commit "builds" a wrapper around the stand-in whose sweeps are as slow as its file `slowdown` says.
SETUP = """DDPBENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DDPBENCH_BUILD_DIR=${DDPBENCH_BUILD_DIR:-$DDPBENCH_ROOT/build}
ddpbench_setup() {
  [ ! -e "$DDPBENCH_ROOT/broken" ] || { echo "this commit does not compile" >&2; return 1; }
  [ ! -e "$DDPBENCH_ROOT/nobinary" ] || return 0
  mkdir -p "$DDPBENCH_BUILD_DIR"
  printf '#!/bin/sh\\n[ "$1" = sweep ] && exec %s %s "$@" --inject-slowdown %s\\nexec %s %s "$@"\\n' "$STAND_IN_PYTHON" \\
    "$STAND_IN_SCRIPT" "$(cat "$DDPBENCH_ROOT/slowdown")" "$STAND_IN_PYTHON" "$STAND_IN_SCRIPT" >"$DDPBENCH_BUILD_DIR/ddpbench"
  [ ! -e "$DDPBENCH_ROOT/crash" ] || printf '#!/bin/sh\\n[ "$1" = sweep ] && kill -SEGV $$\\nexec %s %s "$@"\\n' \\
    "$STAND_IN_PYTHON" "$STAND_IN_SCRIPT" >"$DDPBENCH_BUILD_DIR/ddpbench"
  chmod +x "$DDPBENCH_BUILD_DIR/ddpbench"
}
"""


def without_row(doc: dict, row: str) -> dict:
    out = copy.deepcopy(doc)
    out["runs"] = [r for r in out["runs"] if r["name"] != row]
    out.pop("summary", None)
    return out


class BisectTest(unittest.TestCase):
    def setUp(self) -> None:
        if not os.environ.get("DDPBENCH_BINARY"):
            self.skipTest("DDPBENCH_BINARY is not set")
        if shutil.which("git") is None:
            self.skipTest("git is not installed")
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-bisect-"))
        self.addCleanup(shutil.rmtree, self.dir)

    def test_the_stored_mode_names_the_first_regression_past_commits_it_cannot_judge(self) -> None:
        repo = self.dir / "repo"
        repo.mkdir()
        env = dict(os.environ, **GIT_IDENTITY)

        def git(*args: str) -> str:
            return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout

        git("init", "-q")
        base = self.dir / "base.json"
        base.write_text(json.dumps(BASELINE))
        good, broken, regressed = json.dumps(BASELINE), "{\"schema\": ", json.dumps(without_row(BASELINE, "ddp-2"))
        # Commits 2-5 cannot be judged (their results are not JSON): bisect must skip them, not
        # blame them, and still name commit 7.
        commits = []
        for number, text in enumerate([good, broken, broken, broken, broken, good, regressed, regressed], 1):
            (repo / "current.json").write_text(text)
            git("add", "current.json")
            git("commit", "-q", "--allow-empty", "-m", f"commit {number}")
            commits.append(git("rev-parse", "HEAD").strip())
        git("bisect", "start", commits[-1], commits[0])
        run = subprocess.run(["git", "bisect", "run", str(CI_BENCH), "--bisect", "--baseline", str(base), "--current",
                              "current.json", "--out-dir", str(self.dir / "out"), *LOOSE], cwd=repo, env=env,
                             capture_output=True, text=True, check=False, timeout=600)
        log = git("bisect", "log")
        git("bisect", "reset")
        self.assertIn(f"{commits[6]} is the first bad commit", run.stdout, run.stdout + run.stderr)
        self.assertIn("# skip:", log, "no commit was skipped, so the test proved nothing about 125")

    def history(self) -> tuple[Path, dict[str, str], list[str]]:
        """A real repository whose commits' set-ups build stand-ins with known slowdowns (1 good;
        2 does not build; 3 good; 4 makes the row 5 times slower; 5, 6 keep it)."""
        stand_in = StandInRepository(self.dir)
        repo = stand_in.repo
        (repo / "scripts" / "lib" / "setup.sh").write_text(SETUP)
        env = stand_in.env()
        env.pop("DDPBENCH_BINARY")
        stand_in.state.mkdir()
        commits = []
        for number, (slowdown, broken) in enumerate([("0", False), ("0", True), ("0", False), ("4.0", False),
                                                     ("4.0", False), ("4.0", False)], 1):
            (repo / "slowdown").write_text(slowdown + "\n")
            (repo / "broken").unlink(missing_ok=True)
            if broken:
                (repo / "broken").write_text("")
            stand_in.git("add", "-A")
            stand_in.git("commit", "-q", "--allow-empty", "-m", f"commit {number}")
            commits.append(stand_in.git("rev-parse", "HEAD").strip())
        self.git = stand_in.git
        return repo, env, commits

    def gate(self, repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["scripts/ci-bench", *args], cwd=repo, env=env, capture_output=True, text=True,
                              check=False, timeout=600)

    def test_against_a_good_commit_it_names_the_commit_that_slowed_a_row(self) -> None:
        repo, env, commits = self.history()
        quick = ["--no-twins", "--seed", "1", "--min-rounds", "2", "--max-rounds", "4"]
        self.git("checkout", "-q", commits[1])
        skipped = self.gate(repo, env, "--bisect", "--against", commits[0], *quick)
        self.assertEqual(skipped.returncode, 125, skipped.stderr)
        self.assertIn("the set-up or build failed", skipped.stderr)
        for flags, code in (([], 2), (["--bisect"], 128)):  # 128 stops git bisect run: no commit can be judged
            unknown = self.gate(repo, env, *flags, "--against", "no-such-rev", *quick)
            self.assertEqual(unknown.returncode, code, unknown.stderr)
            self.assertIn("--against: 'no-such-rev' is not a commit", unknown.stderr)
        self.git("checkout", "-q", commits[-1])
        self.git("bisect", "start", commits[-1], commits[0])
        run = subprocess.run(["git", "bisect", "run", "scripts/ci-bench", "--bisect", "--against", commits[0], *quick],
                             cwd=repo, env=env, capture_output=True, text=True, check=False, timeout=1200)
        self.git("bisect", "reset")
        self.assertIn(f"{commits[3]} is the first bad commit", run.stdout, run.stdout + run.stderr)
        self.assertRegex(run.stdout, r"single \(faithful\) step_time_s: \d+\.\d % slower.*REGRESSION")
        # A REV whose set-up succeeds but leaves no binary does not build: the binary left by the
        # last REV built there is not taken for its; no commit can be judged against it.
        self.git("checkout", "-q", "-b", "nobin", commits[0])
        (repo / "nobinary").write_text("")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "set-up that builds nothing")
        self.git("checkout", "-q", commits[-1])
        for flags, code in (([], 2), (["--bisect"], 128)):
            stale = self.gate(repo, env, *flags, "--against", "nobin", *quick)
            self.assertEqual(stale.returncode, code, stale.stderr)
            self.assertIn("does not build", stale.stderr)
        # A candidate whose sweep crashes is bad under --bisect: never skipped, never an interruption.
        self.git("checkout", "-q", "-b", "crashing", commits[-1])
        (repo / "crash").write_text("")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "a sweep that crashes")
        crashed = self.gate(repo, env, "--bisect", "--against", commits[0], *quick)
        self.assertEqual(crashed.returncode, 1, crashed.stdout + crashed.stderr)
        self.assertIn("the candidate fails the gate", crashed.stderr)
        self.assertEqual((repo / "results" / "ci-bench" / "verdict.txt").read_text(), "regression\n")


if __name__ == "__main__":
    unittest.main()

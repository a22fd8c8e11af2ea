"""A small real git repository for the gate's tests: it holds this checkout's gate (scripts/ci-bench,
its package, its defaults) and a sweep file of one row, and each commit's set-up "builds" in a
second by leaving a wrapper around stand_in_ddpbench.py as its binary (STAND_IN_BUILD=baseline).
The candidate is the checkout itself, its binary the same stand-in as DDPBENCH_BINARY
(STAND_IN_BUILD=candidate). Faults are asked of either build per gate run (STAND_IN_FAULTS).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[3]))
STAND_IN = Path(__file__).resolve().parent / "stand_in_ddpbench.py"
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@t"}
SETUP = """DDPBENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DDPBENCH_BUILD_DIR=${DDPBENCH_BUILD_DIR:-$DDPBENCH_ROOT/build}
ddpbench_setup() {
  [ ! -e "$DDPBENCH_ROOT/broken" ] || { echo "this commit does not compile" >&2; return 1; }
  mkdir -p "$DDPBENCH_BUILD_DIR"
  env | grep '^GIT_' >"$DDPBENCH_BUILD_DIR/git-variables" || true  # what of the caller's git reached the build
  printf '#!/bin/sh\\nSTAND_IN_BUILD=baseline exec %s %s "$@"\\n' "$STAND_IN_PYTHON" "$STAND_IN_SCRIPT" \\
    >"$DDPBENCH_BUILD_DIR/ddpbench"
  chmod +x "$DDPBENCH_BUILD_DIR/ddpbench"
}
"""
# Fast deadlines: a hang is found in seconds.
DEADLINES = {"DDPBENCH_CI_ROW_TIMEOUT_S": "10", "DDPBENCH_CI_COMPARE_TIMEOUT_S": "10",
             "DDPBENCH_CI_SWEEP_TIMEOUT_S": "15", "DDPBENCH_CI_BUILD_TIMEOUT_S": "60"}


class StandInRepository:
    def __init__(self, folder: Path, rows: tuple[str, ...] = ("single",)) -> None:
        self.folder = folder
        self.repo = folder / "repo"
        self.state = folder / "stand-in-state"
        lib = self.repo / "scripts" / "lib"
        lib.mkdir(parents=True)
        shutil.copy2(SOURCE / "scripts" / "ci-bench", self.repo / "scripts" / "ci-bench")
        shutil.copy2(SOURCE / "scripts" / "ci-bench.env", self.repo / "scripts" / "ci-bench.env")
        for module in ("lockstep.py", "output_rule.py", "running_clock.py"):  # what the gate imports beside its package
            shutil.copy2(SOURCE / "scripts" / "lib" / module, lib / module)
        shutil.copytree(SOURCE / "scripts" / "lib" / "ci_gate", lib / "ci_gate",
                        ignore=shutil.ignore_patterns("__pycache__"))
        committed = json.loads((SOURCE / "scripts" / "ci-bench.sweep.json").read_text())
        committed["rows"] = [row for row in committed["rows"] if row["name"] in rows]
        (self.repo / "scripts" / "ci-bench.sweep.json").write_text(json.dumps(committed, indent=1))
        (lib / "setup.sh").write_text(SETUP)
        (self.repo / "harness" / "launch").mkdir(parents=True)
        (self.repo / "harness" / "launch" / "lockstep_turns.hpp").write_text("// lockstep: the stand-in takes turns\n")
        (self.repo / ".gitignore").write_text("/build*/\n/results/\n__pycache__/\n")
        self.candidate = folder / "candidate-ddpbench"
        self.candidate.write_text(f"#!/bin/sh\nSTAND_IN_BUILD=candidate exec {sys.executable} {STAND_IN} \"$@\"\n")
        self.candidate.chmod(0o755)
        self.git("init", "-q")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "the stand-in project")
        self.head = self.git("rev-parse", "HEAD").strip()

    def git(self, *args: str, cwd: Path | None = None) -> str:
        return subprocess.run(["git", *args], cwd=cwd or self.repo, env=dict(os.environ, **GIT_IDENTITY),
                              capture_output=True, text=True, check=True).stdout

    def env(self, faults: dict | None = None, **more: str) -> dict[str, str]:
        env = {name: value for name, value in os.environ.items() if not name.startswith(("GIT_", "DDPBENCH_CI_"))}
        env.update(DEADLINES)
        env.update(GIT_IDENTITY)
        env.update(STAND_IN_FAULTS=json.dumps(faults or {}), STAND_IN_STATE=str(self.state),
                   STAND_IN_REAL=os.environ["DDPBENCH_BINARY"], STAND_IN_PYTHON=sys.executable,
                   STAND_IN_SCRIPT=str(STAND_IN), DDPBENCH_SOURCE_DIR=str(SOURCE),
                   DDPBENCH_BINARY=str(self.candidate))
        env.pop("DDPBENCH_BUILD_DIR", None)
        env.update(more)
        return env

    def gate(self, *args: str, faults: dict | None = None, timeout: float = 180,
             env: dict[str, str] | None = None, **more: str) -> subprocess.CompletedProcess[str]:
        """scripts/ci-bench in the repository, the stand-in's state fresh."""
        shutil.rmtree(self.state, ignore_errors=True)
        self.state.mkdir()
        return subprocess.run(["scripts/ci-bench", *args], cwd=self.repo, env=env or self.env(faults, **more),
                              capture_output=True, text=True, check=False, timeout=timeout)

    def runs(self) -> list[str]:
        log = self.state / "runs.log"
        return log.read_text().splitlines() if log.exists() else []

    def stored_baseline(self, path: Path, repeat: int = 5) -> Path:
        """A baseline measured by the stand-in: every row, `repeat` repetitions, with twins."""
        out = self.folder / "measured-baseline"
        shutil.rmtree(self.state, ignore_errors=True)
        self.state.mkdir()
        subprocess.run([str(self.candidate), "sweep", "--file", str(self.repo / "scripts" / "ci-bench.sweep.json"),
                        "--repeat", str(repeat), "--reference", "--out-dir", str(out)], env=self.env(), check=True)
        shutil.copy2(out / "results.json", path)
        return path

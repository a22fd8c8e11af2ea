"""Two stand-in builds (stand_in_ddpbench.py, times per row and build) and the paired gate's rounds
run on them in this process, ended as the gate ends them (main.GateRun.finish: the exit code,
verdict.txt): the rounds tests' driver, without git or a build."""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import unittest
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(SOURCE / "scripts" / "lib"))
from ci_gate.adaptive_rounds import RoundsSettings, run_rounds  # noqa: E402
from ci_gate.judge import Floor, PairedCompare  # noqa: E402
from ci_gate.main import GateRun  # noqa: E402
from ci_gate.out_dir import OutDir  # noqa: E402
from ci_gate.outcomes import Outcome, Side, Stop  # noqa: E402
from ci_gate.rounds import Arm  # noqa: E402

STAND_IN = Path(__file__).resolve().parent / "stand_in_ddpbench.py"
ROWS = ["single", "ddp-2", "dp-2"]


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str
    outcome: Outcome


def run_paired(baseline: Path, candidate: Path, sweep: Path, rows: tuple[str, ...], out_path: Path, *args: str,
               seed: int = 1, twins: bool = False, lockstep: bool = False) -> Done:
    """The paired gate's rounds of two binaries into `out_path` (made afresh), ended as the gate ends
    them. `args`: --min-rounds, --max-rounds, --metric, --threshold, --expected-not-ok, --floor,
    --turn-timeout-s, each with its value."""
    flags = dict(zip(args[::2], args[1::2]))
    shutil.rmtree(out_path, ignore_errors=True)
    out = OutDir(out_path, {}, {})
    gate = GateRun(SOURCE)
    gate.out = out
    judge = PairedCompare(str(baseline), str(candidate), float(flags.get("--threshold", 0.05)), 0.05,
                          flags.get("--metric", "train_time_s"), int(flags.get("--min-rounds", 4)),
                          int(flags.get("--max-rounds", 12)), deadline_s=120)
    floor = Floor(str(baseline), str(candidate), float(flags["--floor"]), "train_time_s,steady_images_per_s",
                  120) if twins else None
    expected = frozenset(n for n in flags.get("--expected-not-ok", "").split(",") if n)
    turn_timeout_s = float(flags.get("--turn-timeout-s", 300))
    settings = RoundsSettings(sweep, rows, seed, twins, lockstep, expected, turn_timeout_s, 900, 120)
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            out.claim()
            outcome, text = run_rounds(Arm("baseline", str(baseline), side=Side.BASELINE),
                                       Arm("candidate", str(candidate), side=Side.CANDIDATE), judge, floor, settings, out)
        except Stop as stop:
            outcome, text = stop.outcome, ""
        code = gate.finish(outcome, text, bisect=False)
    return Done(code, stdout.getvalue(), stderr.getvalue(), outcome)


class StandInBuilds(unittest.TestCase):
    def setUp(self) -> None:
        if not os.environ.get("DDPBENCH_BINARY"):
            self.skipTest("DDPBENCH_BINARY is not set")
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-rounds-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.sweep = self.dir / "sweep.json"
        self.sweep.write_text(json.dumps({"name": "ci-bench", "rows": [{"name": row} for row in ROWS]}))
        self.state = self.dir / "state"
        self.saved = {k: os.environ.get(k) for k in ("STAND_IN_TIMES", "STAND_IN_FAULTS", "STAND_IN_STATE",
                                                     "STAND_IN_REAL", "DDPBENCH_SOURCE_DIR")}
        self.addCleanup(self.restore)

    def restore(self) -> None:
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def builds(self, rows: dict[str, dict[str, object]], first_penalty: float = 0.0,
               compare: dict[str, dict[str, str]] | None = None, faults: dict | None = None) -> tuple[Path, Path, Path]:
        """Two stand-in builds with these times (and compare misbehaving as `compare` says); their run log."""
        shutil.rmtree(self.state, ignore_errors=True)
        self.state.mkdir()
        faults = dict(faults or {})
        for build, how in (compare or {}).items():
            faults.setdefault(build, {})["compare"] = how
        os.environ.update(STAND_IN_TIMES=json.dumps({"rows": rows, "first_penalty": first_penalty}),
                          STAND_IN_FAULTS=json.dumps(faults), STAND_IN_STATE=str(self.state),
                          STAND_IN_REAL=os.environ["DDPBENCH_BINARY"], DDPBENCH_SOURCE_DIR=str(SOURCE))
        paths = []
        for build in ("baseline", "candidate"):
            path = self.dir / f"{build}-ddpbench"
            path.write_text(f"#!/bin/sh\nSTAND_IN_BUILD={build} exec {sys.executable} {STAND_IN} \"$@\"\n")
            path.chmod(0o755)
            paths.append(path)
        return paths[0], paths[1], self.state / "runs.log"

    def run_rounds(self, baseline: Path, candidate: Path, *args: str, seed: int = 1, twins: bool = False,
                   lockstep: bool = False) -> Done:
        """The rounds back to back by default (lockstep=True: in lockstep), as the gate runs them."""
        rows = tuple(row["name"] for row in json.loads(self.sweep.read_text())["rows"])
        return run_paired(baseline, candidate, self.sweep, rows, self.dir / "out", *args, seed=seed, twins=twins,
                          lockstep=lockstep)

    def runs(self, log: Path) -> list[tuple[str, str]]:
        return [tuple(line.split()) for line in log.read_text().splitlines()] if log.exists() else []  # type: ignore

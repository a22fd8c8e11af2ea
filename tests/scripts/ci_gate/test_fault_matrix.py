"""The gate's fault matrix: every fault a build can play (garbage, a runs list with a string, an
extra row, a missing row, a figure no proof reads, a sweep that is a list, JSON too deep to parse, a
FIFO for a result file, a row failed in every round, SIGSEGV, SIGKILL, a
hang in its sweep, steps each in time that hold the row past its deadline, a hang in its compare,
a refusal), on either side (the candidate, the baseline), in every mode (the stored baseline,
rounds back to back, lockstep, both under --bisect), gives the exit code, verdict.txt and culprit
of outcomes.TABLE; and after every gate, the user's things (another
worktree, one moved away, untracked files under status.showUntrackedFiles=no, files beside the
gate's in --out-dir, a reports folder) are as they were, byte for byte.

Run: python3 -m unittest -v test_fault_matrix (from tests/scripts/ci_gate), with DDPBENCH_BINARY set.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import unittest
from pathlib import Path

from stand_in_repository import StandInRepository

FAULTS = ("garbage", "runs-string", "extra-row", "missing-row", "bad-figure", "sweep-list", "deep-json", "fifo-results",
          "failed", "sigsegv", "sigkill", "hang", "slow-steps", "refuse", "compare-hang")
PAIRED = {"round-level": ["--round-level"], "lockstep": [], "lockstep, --bisect": ["--bisect"]}
# The stored mode's baseline is a file: its faults are bad input (test_stored_mode), its sweep the candidate's.
QUICK = ["--no-twins", "--min-rounds", "2", "--max-rounds", "2", "--turn-timeout-s", "8"]
# (side, fault) -> (exit, exit under --bisect, verdict.txt, verdict.json's "what") in paired mode.
CANDIDATE_FAILS = (1, 1, "regression")
BASELINE_CANNOT = (2, 125, "cannot judge")
PAIRED_EXPECTED = {
    ("candidate", "garbage"): (*CANDIDATE_FAILS, "garbage"),
    ("candidate", "runs-string"): (*CANDIDATE_FAILS, "garbage"),
    ("candidate", "extra-row"): (*CANDIDATE_FAILS, "garbage"),
    ("candidate", "missing-row"): (*CANDIDATE_FAILS, "garbage"),
    ("candidate", "bad-figure"): (*CANDIDATE_FAILS, "garbage"),
    ("candidate", "sweep-list"): (*CANDIDATE_FAILS, "garbage"),
    ("candidate", "deep-json"): (*CANDIDATE_FAILS, "garbage"),
    ("candidate", "fifo-results"): (*CANDIDATE_FAILS, "garbage"),
    ("candidate", "failed"): (*CANDIDATE_FAILS, "regression"),
    ("candidate", "sigsegv"): (*CANDIDATE_FAILS, "crash"),
    ("candidate", "sigkill"): (*CANDIDATE_FAILS, "crash"),
    ("candidate", "hang"): (*CANDIDATE_FAILS, "hang"),
    ("candidate", "slow-steps"): (*CANDIDATE_FAILS, "hang"),  # every turn in time, the row past its deadline
    ("candidate", "refuse"): (*CANDIDATE_FAILS, "refused"),
    ("candidate", "compare-hang"): (*CANDIDATE_FAILS, "hang"),
    ("baseline", "garbage"): (*BASELINE_CANNOT, "garbage"),
    ("baseline", "runs-string"): (*BASELINE_CANNOT, "garbage"),
    ("baseline", "extra-row"): (*BASELINE_CANNOT, "garbage"),
    ("baseline", "missing-row"): (*BASELINE_CANNOT, "garbage"),
    ("baseline", "bad-figure"): (*BASELINE_CANNOT, "garbage"),
    ("baseline", "sweep-list"): (*BASELINE_CANNOT, "garbage"),
    ("baseline", "deep-json"): (*BASELINE_CANNOT, "garbage"),
    ("baseline", "fifo-results"): (*BASELINE_CANNOT, "garbage"),
    ("baseline", "failed"): (*BASELINE_CANNOT, "cannot judge"),
    ("baseline", "sigsegv"): (*BASELINE_CANNOT, "crash"),
    ("baseline", "sigkill"): (*BASELINE_CANNOT, "crash"),
    ("baseline", "hang"): (*BASELINE_CANNOT, "hang"),
    ("baseline", "slow-steps"): (*BASELINE_CANNOT, "hang"),
    ("baseline", "refuse"): (*BASELINE_CANNOT, "refused"),
    ("baseline", "compare-hang"): (*BASELINE_CANNOT, "hang"),
}
# The stored mode: the candidate's sweep and compare; the baseline is a file (bad input where broken).
STORED_EXPECTED = {
    "garbage": (*CANDIDATE_FAILS, "garbage"), "runs-string": (*CANDIDATE_FAILS, "garbage"),
    # A row its sweep planned and did not write is its garbage, as in the paired mode (it was read as
    # a row missing from the comparison: also 1, not said as the sweep's).
    "extra-row": (*CANDIDATE_FAILS, "garbage"), "missing-row": (*CANDIDATE_FAILS, "garbage"),
    "bad-figure": (*CANDIDATE_FAILS, "garbage"), "sweep-list": (*CANDIDATE_FAILS, "garbage"),
    "deep-json": (*CANDIDATE_FAILS, "garbage"), "fifo-results": (*CANDIDATE_FAILS, "garbage"),
    "failed": (*CANDIDATE_FAILS, "regression"), "sigsegv": (*CANDIDATE_FAILS, "crash"),
    "sigkill": (*CANDIDATE_FAILS, "crash"), "hang": (*CANDIDATE_FAILS, "hang"), "slow-steps": (*CANDIDATE_FAILS, "hang"),
    "refuse": (2, 125, "cannot judge", "cannot judge"), "compare-hang": (*CANDIDATE_FAILS, "hang"),
}
CULPRIT = {"candidate": "the candidate", "baseline": "the baseline build"}


def faults_of(side: str, fault: str) -> dict:
    return {side: {"compare": "hang"} if fault == "compare-hang" else {"sweep": fault}}


def snapshot(paths: list[Path]) -> dict[str, str]:
    """Every file under `paths`: its content's hash (a link: its target), and every folder."""
    found: dict[str, str] = {}
    for top in paths:
        for path in [top, *sorted(top.rglob("*"))] if top.is_dir() else [top]:
            if path.is_symlink():
                found[str(path)] = "link " + os.readlink(path)
            elif path.is_file():
                found[str(path)] = hashlib.sha1(path.read_bytes()).hexdigest()
            elif path.is_dir():
                found[str(path)] = "folder"
            else:
                found[str(path)] = "absent"
    return found


class UsersThings:
    """What a user keeps beside the gate, which no gate may touch."""

    def __init__(self, stand_in: StandInRepository) -> None:
        base, git = stand_in.folder / "users", stand_in.git
        self.other = base / "other-worktree"
        git("worktree", "add", "-q", "-b", "mine", str(self.other), "HEAD")
        (self.other / "scripts" / "ci-bench.env").write_text("# edited, not committed\n")
        (self.other / "draft.txt").write_text("untracked work\n")
        moved = base / "moved-worktree"
        git("worktree", "add", "-q", "-b", "moved", str(moved), "HEAD")
        (moved / "notes.txt").write_text("in a worktree moved away during the run\n")
        moved.rename(base / "moved-away")  # its registration now points at nothing: a prune would remove it
        git("config", "status.showUntrackedFiles", "no")
        (stand_in.repo / "untracked-notes.txt").write_text("the user's, unseen by git status\n")
        self.reports = base / "reports"
        self.reports.mkdir()
        (self.reports / "results.json").write_text('{"mine": true}\n')
        self.common = stand_in.repo / ".git"
        self.paths = [self.other, base / "moved-away", stand_in.repo / "untracked-notes.txt", self.reports,
                      self.common / "worktrees" / "moved-worktree", self.common / "config"]

    def snapshot(self) -> dict[str, str]:
        return snapshot(self.paths)


class FaultMatrixTest(unittest.TestCase):
    """The whole matrix in one test, run on a few slots at once (each its own --out-dir,
    --against-dir and stand-in state), the user's things checked after every gate."""

    @classmethod
    def setUpClass(cls) -> None:
        if not os.environ.get("DDPBENCH_BINARY"):
            raise unittest.SkipTest("DDPBENCH_BINARY is not set")
        if shutil.which("git") is None:
            raise unittest.SkipTest("git is not installed")
        cls.dir = Path(tempfile.mkdtemp(prefix="ddpbench-fault-matrix-"))
        cls.stand_in = StandInRepository(cls.dir)
        cls.users = UsersThings(cls.stand_in)
        cls.baseline = cls.stand_in.stored_baseline(cls.dir / "users" / "baseline.json")
        cls.before = cls.users.snapshot()
        cls.lock = threading.Lock()

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.dir, ignore_errors=True)

    def slot_args(self, slot: int, paired: bool) -> list[str]:
        out = ["--out-dir", str(self.dir / f"out-{slot}")]
        return out + (["--against-dir", str(self.dir / f"against-{slot}")] if paired else [])

    def near_names(self, slot: int) -> dict[Path, bytes]:
        """Files a user left in the gate's --out-dir with names near the gate's own."""
        out = self.dir / f"out-{slot}"
        return {out / name: f"the user's {name}\n".encode() for name in
                ("baseline-rounds.tmp", "candidate-rounds.tmp", "verdict.txt.orig", "paired.md~", ".lock",
                 "results.json", "compare.md.bak")}

    def gate(self, slot: int, args: list[str], faults: dict) -> subprocess.CompletedProcess[str]:
        state = self.dir / f"state-{slot}"
        env = self.stand_in.env(faults, STAND_IN_STATE=str(state))
        shutil.rmtree(state, ignore_errors=True)
        state.mkdir()
        return subprocess.run(["scripts/ci-bench", *args], cwd=self.stand_in.repo, env=env, capture_output=True,
                              text=True, check=False, timeout=120)

    def check(self, name: str, done: subprocess.CompletedProcess[str], expected: tuple, slot: int,
              culprit: str, bisect: bool) -> list[str]:
        """What is wrong with one gate's answer (empty: all right)."""
        plain, under_bisect, verdict, what = expected
        said = f"{name}: exit {done.returncode}\n{done.stdout[-1500:]}\n{done.stderr[-2500:]}"
        wrong = []
        if done.returncode != (under_bisect if bisect else plain):
            wrong.append(f"{name}: exit {done.returncode}, not {under_bisect if bisect else plain}")
        out = self.dir / f"out-{slot}"
        got = (out / "verdict.txt").read_text().strip() if (out / "verdict.txt").exists() else None
        if got != verdict:
            wrong.append(f"{name}: verdict.txt {got!r}, not {verdict!r}")
        record = json.loads((out / "verdict.json").read_text()) if (out / "verdict.json").exists() else {}
        side = "candidate" if culprit == CULPRIT["candidate"] else "baseline"
        if record.get("what") != what or record.get("side") != side:
            wrong.append(f"{name}: verdict.json says {record.get('side')}: {record.get('what')}, not {culprit}: {what}")
        if culprit not in done.stderr:
            wrong.append(f"{name}: the culprit ({culprit}) is not named")
        for path, content in self.near_names(slot).items():
            if not path.exists() or path.read_bytes() != content:
                wrong.append(f"{name}: the user's {path.name} in --out-dir was changed")
        with self.lock:
            after = self.users.snapshot()
        if after != self.before:
            changed = sorted(k for k in set(after) | set(self.before) if after.get(k) != self.before.get(k))
            wrong.append(f"{name}: the user's things changed: {changed}")
        return [f"{line}\n--- {said}" for line in wrong[:1]] + wrong[1:]

    def cases(self) -> list[tuple[str, list[str], dict, tuple, str, bool]]:
        cases = []
        for mode, flags in PAIRED.items():
            for (side, fault), expected in PAIRED_EXPECTED.items():
                cases.append((f"{mode}: {side} {fault}", ["--against", "HEAD", *QUICK, *flags],
                              faults_of(side, fault), expected, CULPRIT[side], "--bisect" in flags))
        for flags in ([], ["--bisect"]):
            for fault, expected in STORED_EXPECTED.items():
                cases.append((f"stored{', --bisect' if flags else ''}: candidate {fault}",
                              ["--baseline", str(self.baseline), "--repeat", "3", "--min-vs-pytorch", "0.5", *flags],
                              faults_of("candidate", fault), expected, "the candidate", bool(flags)))
        return cases

    def test_every_fault_on_either_side_in_every_mode(self) -> None:
        slots = 4
        for slot in range(slots):  # each slot's first gate adds its worktree and builds REV: one at a time
            done = self.gate(slot, ["--against", "HEAD", *QUICK, *self.slot_args(slot, True)], {})
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            for path, content in self.near_names(slot).items():
                path.write_bytes(content)
        cases = self.cases()

        def run(index: int) -> list[str]:
            name, args, faults, expected, culprit, bisect = cases[index]
            slot = index % slots
            done = self.gate(slot, [*args, *self.slot_args(slot, "--against" in args)], faults)
            return self.check(name, done, expected, slot, culprit, bisect)

        with concurrent.futures.ThreadPoolExecutor(slots) as pool:
            found = [line for batch in range(0, len(cases), slots) for lines in
                     pool.map(run, range(batch, min(batch + slots, len(cases)))) for line in lines]
        self.assertEqual(found, [], "\n".join(found))


if __name__ == "__main__":
    unittest.main()

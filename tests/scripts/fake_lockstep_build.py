#!/usr/bin/env python3
"""A stand-in build for the lockstep coordinator's tests (test_lockstep.py): it starts WORLD rank
processes per row, each of which speaks the lockstep protocol (harness/launch/lockstep_turns.hpp)
through strategies/pytorch/lockstep_turns.py, "trains" STEPS steps of STEP_S seconds each, and
logs each step's start and end. One rank may die or hang at one step.

Usage: fake_lockstep_build.py SPEC.json
SPEC: {"rows": [ROW, ...], "world": W, "steps": N, "step_s": S, "log": PATH,
       "die": [RANK, STEP] or null, "hang": [RANK, STEP] or null, "exit": CODE or null (exit at once),
       "linger_s": S (after its ranks end, the build stays S seconds before it exits: a stuck teardown),
       "own_session": true (each rank process starts a session of its own),
       "flood": N (before its ranks, the build opens N connections to the turns' socket and keeps them)}
The log's lines: "ARM ROW RANK STEP START_S END_S" (time.time()), then "ARM ROW RANK held END_S"
once released after training.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(SOURCE / "strategies" / "pytorch"))
from lockstep_turns import LockstepTurns  # noqa: E402


def rank_main(spec: dict, row: str, rank: int) -> int:
    arm = os.environ["DDPBENCH_LOCKSTEP_ARM"]
    turns = LockstepTurns.from_environment(row, rank, spec["world"])
    assert turns is not None
    with open(spec["log"], "a") as log:
        for step in range(spec["steps"]):
            if spec.get("die") == [rank, step]:
                os._exit(9)
            if not turns.wait_for_turn():
                raise SystemExit("the coordinator hung up")
            if spec.get("hang") == [rank, step]:
                time.sleep(3600)
            start = time.time()
            time.sleep(spec["step_s"])
            log.write(f"{arm} {row} {rank} {step} {start:.6f} {time.time():.6f}\n")
            log.flush()
            turns.release(step)
        turns.end()
        log.write(f"{arm} {row} {rank} held {time.time():.6f}\n")
    return 0


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    if len(argv) == 3:
        return rank_main(spec, argv[1], int(argv[2]))
    if spec.get("exit") is not None:
        return spec["exit"]
    held = []
    for _ in range(spec.get("flood") or 0):  # kept open for as long as the build runs
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(os.environ["DDPBENCH_LOCKSTEP_SOCKET"])
        held.append(sock)
    for row in spec["rows"]:
        # "own_session": each rank a session of its own, as the preloaded Python's forked PyTorch ranks are.
        ranks = [subprocess.Popen([sys.executable, __file__, argv[0], row, str(r)],
                                  start_new_session=bool(spec.get("own_session"))) for r in range(spec["world"])]
        codes = [rank.wait() for rank in ranks]
        if any(codes):
            return 1
    time.sleep(spec.get("linger_s") or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

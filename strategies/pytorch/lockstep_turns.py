"""A rank's side of a lockstep run, as harness/launch/lockstep_turns.hpp is ddpbench's: before
each step the rank blocks on a socket read until the coordinator (scripts/lib/lockstep.py) gives
its build the turn, and says when the step is done. Off unless DDPBENCH_LOCKSTEP_SOCKET is set.
"""
from __future__ import annotations

import os
import socket
import time


class LockstepTurns:
    def __init__(self, socket_path: str, hello: str):
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._socket.connect(socket_path)
        except OSError as error:
            raise RuntimeError(f"lockstep (DDPBENCH_LOCKSTEP_SOCKET): cannot connect to {socket_path}: {error}") from None
        self._reader = self._socket.makefile("r", encoding="ascii")
        self._send(hello)
        self.holding = False
        self.ended = False
        self.waited_s = 0.0

    @classmethod
    def from_environment(cls, row: str, rank: int, world: int) -> "LockstepTurns | None":
        path = os.environ.get("DDPBENCH_LOCKSTEP_SOCKET", "")
        if not path:
            return None
        arm = os.environ.get("DDPBENCH_LOCKSTEP_ARM", "")
        if not arm or " " in arm or not row or " " in row:
            raise RuntimeError(f"lockstep (DDPBENCH_LOCKSTEP_SOCKET): the build '{arm}' and row '{row}' must each be one word")
        return cls(path, f"hello {arm} {row} {rank} {world} {os.getpid()}")

    def _send(self, line: str) -> None:
        try:
            self._socket.sendall((line + "\n").encode("ascii"))
        except OSError as error:
            raise RuntimeError(f"lockstep (DDPBENCH_LOCKSTEP_SOCKET): the coordinator hung up ({error})") from None

    def wait_for_turn(self) -> bool:
        """Blocks until this build has the turn; False when the coordinator hung up instead."""
        self.release(-1)
        start = time.perf_counter()
        line = self._reader.readline()  # blocks in the kernel until the turn
        self.waited_s += time.perf_counter() - start
        if not line:
            return False
        if line.strip() != "go":
            raise RuntimeError(f"lockstep (DDPBENCH_LOCKSTEP_SOCKET): the coordinator said {line.strip()!r}, not 'go'")
        self.holding = True
        return True

    def release(self, step: int) -> None:
        if self.holding:
            self.holding = False
            self._send(f"done {step}")

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            self.release(-1)
            self._send("end")
            start = time.perf_counter()
            # Only "bye" (or EOF) releases it: a "go" sent before the coordinator read "end" does not.
            line = self._reader.readline()
            while line and line.strip() != "bye":
                line = self._reader.readline()
            self.waited_s += time.perf_counter() - start

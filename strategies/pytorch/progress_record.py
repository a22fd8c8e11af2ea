"""This rank's progress record in the run's store, kept as ddpbench's own ranks keep theirs
(harness/launch/rank_progress.hpp): with each heartbeat, how many training steps it has entered
(each step's gradients are reduced in at least one collective, so a step counts as one), the one
it is in or left last, and for how long. When a rank hangs, the rank that waits and times out
reads the records and names the one behind (harness/runner/pytorch_rank.cpp), never itself.
The record is kept only where a launcher serves the run's store (spec["progress"])."""
from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import torch.distributed as dist

HEARTBEAT_PERIOD_S = 0.5  # harness/distributed/communicator.cpp: kHeartbeatPeriod


class ProgressRecord:
    """A heartbeat thread publishing this rank's record; enter() and leave() mark each step."""

    def __init__(self, where: dict[str, Any] | None) -> None:
        self._lock = threading.Lock()
        self._beats = self._entered = 0
        self._inside = False
        self._since = time.monotonic()
        self._phase = ""
        self._store = None
        if not where:
            return
        try:
            client = dist.TCPStore(where["address"], int(where["port"]), None, False, timedelta(seconds=10),
                                   wait_for_workers=False)
        except (RuntimeError, ValueError):  # no record to keep: a failure then blames no rank, and says so
            return
        self._store = dist.PrefixStore(where["prefix"], client)
        self._key = where["key"]
        threading.Thread(target=self._beat, name="ddpbench progress", daemon=True).start()

    def enter(self, phase: str) -> None:
        with self._lock:
            self._entered += 1
            self._inside, self._since, self._phase = True, time.monotonic(), phase

    def leave(self) -> None:
        with self._lock:
            self._inside, self._since = False, time.monotonic()

    def text(self) -> str:
        """The record as rank_progress.cpp's format_progress writes it."""
        with self._lock:
            return (f"beats={self._beats};entered={self._entered};at={self._entered};inside={int(self._inside)};"
                    f"for_s={time.monotonic() - self._since:.3f};phase={self._phase}")

    def _beat(self) -> None:
        while True:
            with self._lock:
                self._beats += 1
            try:
                self._store.set(self._key, self.text())  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001 - the store is gone (the run ended): no one reads it now
                return
            time.sleep(HEARTBEAT_PERIOD_S)

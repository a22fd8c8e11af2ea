"""Step timing as ddpbench's runner times it (harness/timing/phase_timer.cpp): on a GPU, CUDA
events recorded at each phase's edges and at step boundaries, read only when the runner
synchronises; on a CPU, the host clock. A step lasts from the previous step's end (or the
epoch's start) to its own. Phases are NVTX ranges of the same names on a GPU."""
from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch

PHASES = ("data", "forward", "backward", "comm", "optimizer", "allreduce")


@dataclass
class StepTiming:
    time_s: float
    phases: dict[str, float] = field(default_factory=dict)


class StepClock:
    def __init__(self, device: torch.device, nvtx: bool, unmeasured: tuple[str, ...] = ()) -> None:
        self.cuda = device.type == "cuda"
        self.nvtx = nvtx and self.cuda
        self.unmeasured = unmeasured  # phases this implementation cannot see (reported as null)
        self._intervals: list[tuple[str, object, object]] = []
        self._boundary: object = None
        self._muted = False
        self._not_measured: set[str] = set()

    def _now(self) -> object:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    @staticmethod
    def _seconds(start: object, end: object) -> float:
        if isinstance(start, float):
            return end - start  # type: ignore[operator]
        return start.elapsed_time(end) / 1e3  # type: ignore[union-attr]

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        if self.nvtx:
            torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            if self.nvtx:
                torch.cuda.nvtx.range_pop()

    @contextlib.contextmanager
    def muted(self) -> Iterator[None]:
        """No phase is timed inside: a graph's capture records its work without running it."""
        self._muted = True
        try:
            yield
        finally:
            self._muted = False

    def not_measured(self, *names: str) -> None:
        """This step's `names` phases ran where no event sees them (reported as null)."""
        self._not_measured.update(names)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if self._muted:
            with self.range(name):
                yield
            return
        with self.range(name):
            start = self._now()
            try:
                yield
            finally:
                self._intervals.append((name, start, self._now()))

    def mark_epoch_start(self) -> None:
        self._boundary = self._now()

    def finish_step(self) -> Callable[[], StepTiming]:
        boundary = self._now()
        previous, self._boundary = self._boundary, boundary
        intervals, self._intervals = self._intervals, []
        unmeasured = self.unmeasured + tuple(sorted(self._not_measured))
        self._not_measured = set()

        def resolve() -> StepTiming:
            if not isinstance(boundary, float):
                boundary.synchronize()  # type: ignore[union-attr]
            phases = {name: 0.0 for name in PHASES}
            for name, start, end in intervals:
                phases[name] += self._seconds(start, end)
            for name in unmeasured:
                phases[name] = math.nan
            return StepTiming(self._seconds(previous, boundary), phases)

        return resolve

"""What else ran on the machine while the gate measured: per round, the CPU time of processes
that are not the gate's (the machine's busy time in /proc/stat, less the CPU time of the gate and
of every child it waited for) and the time a hypervisor stole, each in cores (CPU seconds per
second of the round). A gate that ran beside other work says so with its verdict, and a row it
cannot judge, too noisy, names the load as the likely cause: a verdict the machine's neighbours
made is not the candidate's.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

# Others' work past a quarter of a core, or a hypervisor stealing 5 % of the machine, in any
# round: enough to move a 2-core machine's step times by more than the gate resolves.
BUSY_CORES = 0.25
STOLEN_SHARE = 0.05


@dataclass(frozen=True)
class CpuSample:
    """The machine's and the gate's CPU seconds so far, and when they were read."""
    busy_s: float   # every CPU's user, nice, system, irq and softirq time (guest time is in user)
    steal_s: float  # time a hypervisor ran something else on this machine's CPUs
    gate_s: float   # the gate's own CPU time and its waited-for children's (their children's too)
    at_s: float     # time.monotonic()


@dataclass(frozen=True)
class RoundLoad:
    """One round's load: what processes not the gate's used, and what was stolen, in cores."""
    round: int        # from 1
    wall_s: float
    others_cores: float
    steal_cores: float
    cores: int        # the machine's CPUs

    @property
    def busy(self) -> bool:
        return self.others_cores >= BUSY_CORES or self.steal_cores >= STOLEN_SHARE * self.cores

    def record(self) -> dict:
        return {"round": self.round, "wall_s": round(self.wall_s, 3), "others_cores": round(self.others_cores, 3),
                "steal_cores": round(self.steal_cores, 3), "cores": self.cores, "busy": self.busy}


def cpu_seconds(stat_text: str) -> tuple[float, float]:
    """(busy, steal) seconds of the aggregate `cpu` line of /proc/stat's text; ValueError where it
    has none."""
    for line in stat_text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            ticks = [int(f) for f in fields[1:]] + [0] * 8
            user, nice, system, _idle, _iowait, irq, softirq, steal = ticks[:8]
            hz = os.sysconf("SC_CLK_TCK")
            return (user + nice + system + irq + softirq) / hz, steal / hz
    raise ValueError("no aggregate cpu line")


def sample(stat: Path = Path("/proc/stat")) -> CpuSample | None:
    """The CPU seconds now; None where /proc/stat cannot be read (no such file: not Linux)."""
    try:
        busy_s, steal_s = cpu_seconds(stat.read_text())
    except (OSError, ValueError):
        return None
    t = os.times()
    return CpuSample(busy_s, steal_s, t.user + t.system + t.children_user + t.children_system, time.monotonic())


def between(round_number: int, before: CpuSample | None, after: CpuSample | None,
            cores: int | None = None) -> RoundLoad | None:
    """The load of the round between two samples; None where either is unknown or no time passed.
    A child still running at `after` has not been counted for the gate yet, so others' share is a
    bound from above; it is never below 0."""
    if before is None or after is None or after.at_s <= before.at_s:
        return None
    wall_s = after.at_s - before.at_s
    others_s = max(0.0, (after.busy_s - before.busy_s) - (after.gate_s - before.gate_s))
    steal_s = max(0.0, after.steal_s - before.steal_s)
    return RoundLoad(round_number, wall_s, others_s / wall_s, steal_s / wall_s, cores or os.cpu_count() or 1)


def summary(loads: list[RoundLoad]) -> str:
    """The load line of the gate's report: each round's, and whether the machine was busy."""
    if not loads:
        return "Machine load: not measured (no /proc/stat).\n"
    rounds = ", ".join(f"{load.round}: {load.others_cores:.2f}" + (f" (+{load.steal_cores:.2f} stolen)"
                                                                   if load.steal_cores >= 0.005 else "")
                       for load in loads)
    busy = [load.round for load in loads if load.busy]
    line = (f"Machine load: processes not the gate's used, in cores of {loads[0].cores}, per round {rounds}.")
    if not busy:
        return line + " The machine was quiet.\n"
    return (line + f" **The machine was busy** in round{'s' if len(busy) > 1 else ''} "
            f"{', '.join(str(r) for r in busy)} (other work past {BUSY_CORES} cores, or {STOLEN_SHARE:.0%} of its "
            f"CPUs stolen): its noise is in these rounds.\n")


def likely_cause(loads: list[RoundLoad], text: str) -> str:
    """Where the verdict cannot judge for noise and the machine was busy, the line that says so."""
    busy = [load for load in loads if load.busy]
    if not busy or "too noisy" not in text:
        return ""
    worst = max(busy, key=lambda load: load.others_cores + load.steal_cores)
    return (f"Too noisy, and the likely cause is the machine: other work used up to {worst.others_cores:.2f} of its "
            f"{worst.cores} cores (round {worst.round}){' with ' + format(worst.steal_cores, '.2f') + ' stolen' if worst.steal_cores >= 0.005 else ''}; "
            f"run the gate again on a quiet machine.\n")

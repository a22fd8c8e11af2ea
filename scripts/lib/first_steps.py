#!/usr/bin/env python3
"""The first step of each row of a sweep's results.json against its steady steps, by phase,
ddpbench's beside its PyTorch twin's (with the twin's start-up, from its start to its first
step), and each CUDA-graph row's speed-up over its eager row: the row of the same mode whose
configuration differs only in `cuda-graphs`, medians over repetitions. For scripts/device-check's
summary: it prints, and judges nothing. A row whose figures are not what a run writes is
named with what is wrong and left out.

Usage: first_steps.py RESULTS.json"""
from __future__ import annotations

import json
import math
import statistics
import sys
from typing import Any

PHASES = ("data", "forward", "backward", "optimizer")
# What a row's configuration may differ in and still be the same row (where it ran, its name).
NOT_THE_ROW = ("name", "out", "cuda-graphs", "trace-steps", "profile-steps", "save-checkpoint")


class NotARun(ValueError):
    """A row whose figures are not what a run writes."""


def number(value: Any, what: str, least: float = 0.0, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    try:
        finite = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    except OverflowError:  # an integer past any float
        finite = False
    if not finite or value < least:
        raise NotARun(f"{what} is {json.dumps(value)}, not a number of at least {least:g}")
    return float(value)


def label(run: dict[str, Any]) -> str:
    return f"{run['name']} ({run['mode']})" if run["mode"] else run["name"]


def proven(run: Any) -> dict[str, Any]:
    """The fields this script reads, each checked; raises NotARun naming the first that is wrong."""
    if not isinstance(run, dict) or not isinstance(run.get("name"), str) or not run["name"]:
        raise NotARun("a row without a name")
    out = {"name": run["name"], "mode": run.get("mode", ""), "status": run.get("status"),
           "strategy": run.get("strategy", ""), "config": run.get("config", {}), "reason": run.get("reason", ""),
           "details": run.get("strategy_details") or {}, "repetition": run.get("repetition", 0)}
    if not isinstance(out["mode"], str) or not isinstance(out["config"], dict) or not isinstance(out["details"], dict):
        raise NotARun("mode, config or strategy_details of the wrong type")
    if out["status"] != "ok":
        return out
    out.update(proven_steps(run))
    out["images_per_s"] = number(run.get("steady_images_per_s"), "steady_images_per_s", 1e-9, allow_none=True)
    if "start_up_s" in out["details"]:
        out["start_up_s"] = number(out["details"]["start_up_s"], "strategy_details.start_up_s")
    return out


def proven_steps(run: dict[str, Any]) -> dict[str, Any]:
    """A row's step times, its warm-up and its first step's phases, each checked."""
    warmup = run.get("warmup_steps")
    if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 0:
        raise NotARun(f"warmup_steps is {json.dumps(warmup)}, not a count of steps")
    steps = run.get("step_records")
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        raise NotARun("step_records is not a list of steps")
    out = {"warmup": warmup,
           "times": [number(s.get("time_s"), f"step_records[{k}].time_s", 1e-9) for k, s in enumerate(steps)]}
    if steps:
        phases = steps[0].get("phases")
        if not isinstance(phases, dict):
            raise NotARun("step_records[0] has no phases")
        out["first_phases"] = {name: number(phases.get(f"{name}_s"), f"step_records[0].phases.{name}_s",
                                            allow_none=True) for name in PHASES}
    return out


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def first_step_line(run: dict[str, Any]) -> str | None:
    if run["status"] != "ok":
        return None
    if not run["times"]:
        return f"  {label(run)[:44]:44} ran no step"
    first = run["times"][0]
    steady = run["times"][run["warmup"]:]
    median = statistics.median(steady) if steady else None
    measured = dict(run["first_phases"])
    # Outside every phase: the host between steps (lazy initialisation, a capture, the loader's start).
    measured["other"] = first - sum(v for v in measured.values() if v is not None)
    phases = " ".join(f"{name} {seconds(value)}" for name, value in measured.items())
    ratio = f"{first / median:.0f}x" if median else "-"
    start_up = ""
    if "start_up_s" in run:  # a PyTorch rank's start-up: from ddpbench starting it to its first step
        start_up = f"; start-up {seconds(run['start_up_s'])} s ({run['details'].get('python', '')})"
    return (f"  {label(run)[:44]:44} {seconds(first):>8} s  {ratio:>6} the steady median "
            f"{seconds(median)} s; {phases}{start_up}")


def same_row(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = (set(a["config"]) | set(b["config"])) - set(NOT_THE_ROW)
    return a["mode"] == b["mode"] and all(a["config"].get(k) == b["config"].get(k) for k in keys)


def median_rate(runs: list[dict[str, Any]]) -> float | None:
    rates = [r["images_per_s"] for r in runs if r["status"] == "ok" and r["images_per_s"]]
    return statistics.median(rates) if rates else None


def graph_line(where: str, reps: list[dict[str, Any]], runs: list[dict[str, Any]]) -> str:
    if not all(same_row(r, reps[0]) for r in reps):
        return f"  {where}: its repetitions are configured differently: not compared"
    if all(r["status"] == "skipped" for r in reps):
        return f"  {where}: skipped ({reps[0]['reason']})"
    eager = [r for r in runs if r["config"].get("cuda-graphs") is not True and same_row(r, reps[0])]
    done = [g for r in reps if r["status"] == "ok" and isinstance(g := r["details"].get("cuda_graphs"), dict)]
    counts = "; ".join(f"captured at step {g.get('capture_step')}, {g.get('replayed_steps')} replayed, "
                       f"{g.get('eager_steps')} eager" for g in done[:1])
    ours, theirs = median_rate(reps), median_rate(eager)
    if ours is None:
        return f"  {where}: no steady images/s measured ({len(reps)} run(s), none ok)"
    if theirs is None:
        return f"  {where}: no eager row of the same configuration measured steady images/s; {counts}"
    return (f"  {where}: {ours / theirs:.2f}x the eager row's steady images/s (medians of {len(reps)} and "
            f"{len(eager)} runs); {counts}")


def graph_speedups(runs: list[dict[str, Any]]) -> list[str]:
    """Each graphed row (its repetitions) against the eager row it differs from only in the switch."""
    graphed: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in runs:
        if run["config"].get("cuda-graphs") is True:
            graphed.setdefault((run["name"], run["mode"]), []).append(run)
    return [graph_line(f"{name} ({mode})" if mode else name, reps, runs) for (name, mode), reps in sorted(graphed.items())]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        runs = json.load(open(argv[0]))["runs"]
        if not isinstance(runs, list):
            raise ValueError("'runs' is not a list")
    except (OSError, KeyError, TypeError, ValueError, RecursionError) as e:
        print(f"  no runs: {e}")
        return 1
    read: list[dict[str, Any]] = []
    seen: set[tuple[str, str, Any]] = set()
    print("  first step (s), against the steady median, by phase:")
    for k, raw in enumerate(runs):
        try:
            run = proven(raw)
        except NotARun as e:
            print(f"  runs[{k}] ({raw.get('name') if isinstance(raw, dict) else '?'}): not read: {e}")
            continue
        key = (run["name"], run["mode"], json.dumps(run["repetition"]))
        if key in seen:
            print(f"  runs[{k}] ({run['name']}): not read: a second row of that name, mode and repetition")
            continue
        seen.add(key)
        read.append(run)
        if line := first_step_line(run):
            print(line)
    if speedups := graph_speedups(read):
        print("  CUDA graphs:")
        print("\n".join(speedups))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

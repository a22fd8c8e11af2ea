#!/usr/bin/env python3
"""The first step of each row of a sweep's results.json against its steady steps, by phase,
ddpbench's beside its PyTorch twin's (with the twin's start-up, from its start to its first
step), and each CUDA-graph row's speed-up over its eager row (a row named NAME-graphs
against NAME). For scripts/device-check's summary: it prints, and
judges nothing.

Usage: first_steps.py RESULTS.json"""
from __future__ import annotations

import json
import math
import statistics
import sys
from typing import Any

PHASES = ("data", "forward", "backward", "optimizer")


def seconds(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) and math.isfinite(value) else "-"


def first_step_line(run: dict[str, Any]) -> str | None:
    steps = run.get("step_records") or []
    if run.get("status") != "ok" or not steps:
        return None
    first = steps[0]
    steady = [s["time_s"] for s in steps[run.get("warmup_steps", 0):] if isinstance(s.get("time_s"), (int, float))]
    median = statistics.median(steady) if steady else math.nan
    measured = {name: first["phases"].get(f"{name}_s") for name in PHASES}
    # Outside every phase: the host between steps (lazy initialisation, a capture, the loader's start).
    inside = sum(v for v in measured.values() if isinstance(v, (int, float)) and math.isfinite(v))
    measured["other"] = first["time_s"] - inside
    phases = " ".join(f"{name} {seconds(value)}" for name, value in measured.items())
    ratio = f"{first['time_s'] / median:.0f}x" if median and math.isfinite(median) and median > 0 else "-"
    label = f"{run['name']} ({run.get('mode', '')})" if run.get("mode") else run["name"]
    details = run.get("strategy_details") or {}
    # A PyTorch rank's start-up: from ddpbench starting it to its first step.
    start_up = (f"; start-up {seconds(details['start_up_s'])} s ({details.get('python', '')})"
                if "start_up_s" in details else "")
    return (f"  {label[:44]:44} {seconds(first['time_s']):>8} s  {ratio:>6} the steady median "
            f"{seconds(median)} s; {phases}{start_up}")


def graph_speedups(runs: list[dict[str, Any]]) -> list[str]:
    by_name = {(r["name"], r.get("strategy")): r for r in runs if r.get("status") == "ok"}
    lines = []
    for (name, strategy), run in sorted(by_name.items()):
        if not name.endswith("-graphs"):
            continue
        eager = by_name.get((name[: -len("-graphs")], strategy))
        graphs = (run.get("strategy_details") or {}).get("cuda_graphs") or {}
        counts = (f"captured at step {graphs.get('capture_step')}, {graphs.get('replayed_steps')} replayed, "
                  f"{graphs.get('eager_steps')} eager")
        if eager and eager.get("steady_images_per_s") and run.get("steady_images_per_s"):
            lines.append(f"  {name} ({strategy}): {run['steady_images_per_s'] / eager['steady_images_per_s']:.2f}x "
                         f"the eager row's steady images/s; {counts}")
        else:
            lines.append(f"  {name} ({strategy}): no eager row to compare; {counts}")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        runs = json.load(open(argv[0]))["runs"]
    except (OSError, KeyError, ValueError) as e:
        print(f"  no runs: {e}")
        return 1
    print("  first step (s), against the steady median, by phase:")
    for run in runs:
        line = first_step_line(run)
        if line:
            print(line)
    speedups = graph_speedups(runs)
    if speedups:
        print("  CUDA graphs:")
        print("\n".join(speedups))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

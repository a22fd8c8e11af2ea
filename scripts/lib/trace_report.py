"""What a traced row's steps spent their time on, read from its traces (`--trace-steps A:B`).

`ddpbench trace` proves the row's file and merges its per-rank traces on one clock; this reads
the merged trace for ddpbench's own ranges (ProfilerStep#N, the phases, the bucket allreduces)
and, on a GPU, the kernels, and hands the per-rank files to Holistic Trace Analysis (HTA):

- per rank, the traced steps' mean time and phases, the allreduce time, and how much of it ran
  before backward's last gradient was ready (hidden under backward's own work: the
  communication/computation overlap);
- per step, how late each rank reached the points where the ranks meet (collectives, bucket
  launches, the step's end) behind the first there, on one clock: where a straggler shows. The
  straggler verdict itself is the row's own (the runner's, over every untraced steady step,
  from each rank's own time with its waits left out), printed beside it: a few traced steps'
  arrival times are too noisy to judge on (a rank slowed 3x was latest in as few as 1 of 6
  steps on a loaded 2-core machine);
- on a GPU: kernels per step, the GPU's busy fraction and its largest idle gaps, and HTA's
  temporal breakdown, overlap, idle-time and kernel-launch analyses. HTA's analyses read GPU
  kernels; on a CPU trace the report says so instead of running them.

Exit 0; 2 on bad input (the `ddpbench trace` error is printed; --json or --svg naming one of
the files read), 1 when HTA is not installed.
"""
from __future__ import annotations

import argparse
import io
import re
import json
import math
import os
import subprocess
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from output_rule import OutputClash, check_outputs, write_whole  # beside this file

PHASES = ("data", "forward", "backward", "comm", "optimizer")
STEP_PREFIX = "ProfilerStep#"
BUCKET_PREFIX = "allreduce bucket "
COLLECTIVE_PREFIXES = ("gloo:", "nccl:")  # c10d's record_function names for its collectives
PIDS_PER_RANK = 100  # reports/trace_merge.hpp: kPidsPerRank
LAST_GRADIENT = "last gradient ready"  # strategies/bucket_allreduce_hook.cpp's mark
HTA_ANALYSES = ("temporal breakdown", "comm/comp overlap", "idle time", "kernel launches")


@dataclass
class Interval:
    start_us: float
    end_us: float

    @property
    def length_us(self) -> float:
        return self.end_us - self.start_us


@dataclass
class Step:
    number: int
    span: Interval
    phases_us: dict[str, float] = field(default_factory=dict)
    buckets: list[Interval] = field(default_factory=list)
    backward: list[Interval] = field(default_factory=list)
    kernels: list[Interval] = field(default_factory=list)
    collectives: list[Interval] = field(default_factory=list)  # c10d's gloo:* / nccl:* ranges
    last_gradient_us: float | None = None  # where backward's own work ended (DDP's last bucket ready)

    @property
    def allreduce_us(self) -> float:
        return union_length(self.buckets)

    @property
    def hidden_us(self) -> float | None:
        """Allreduce time that ran while backward's own work did, before its last gradient: the
        `backward` range also holds DDP's wait for the buckets, which hides nothing."""
        if self.last_gradient_us is None or not self.backward:
            return None
        work = Interval(min(b.start_us for b in self.backward), self.last_gradient_us)
        return sum(overlap_length(bucket, work) for bucket in merge_intervals(self.buckets))

    def sync_points(self) -> list[tuple[str, float]]:
        """Where the ranks meet in this step, in order: each collective's start (c10d issues them
        in the same order on every rank), each bucket's launch, and the step's end."""
        entered = sorted(c.start_us for c in self.collectives)
        launches = sorted(b.start_us for b in self.buckets)
        return ([(f"collective {i}", t) for i, t in enumerate(entered)] +
                [(f"bucket launch {i}", t) for i, t in enumerate(launches)] + [("step end", self.span.end_us)])


def merge_intervals(intervals: list[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for i in sorted(intervals, key=lambda i: i.start_us):
        if merged and i.start_us <= merged[-1].end_us:
            merged[-1].end_us = max(merged[-1].end_us, i.end_us)
        else:
            merged.append(Interval(i.start_us, i.end_us))
    return merged


def union_length(intervals: list[Interval]) -> float:
    return sum(i.length_us for i in merge_intervals(intervals))


def overlap_length(a: Interval, b: Interval) -> float:
    return max(0.0, min(a.end_us, b.end_us) - max(a.start_us, b.start_us))


def gaps(intervals: list[Interval]) -> list[Interval]:
    merged = merge_intervals(intervals)
    return [Interval(a.end_us, b.start_us) for a, b in zip(merged, merged[1:])]


def rank_of(pid: Any) -> int | None:
    return pid // PIDS_PER_RANK if isinstance(pid, int) else None


def timed(value: Any) -> bool:
    try:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    except OverflowError:  # an integer past any float
        return False


def timed_events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The complete events ("X") every figure here reads: a name, a finite start and a length of
    at least zero. Anything else is no interval on the timeline and is left out, by every reader."""
    events = trace.get("traceEvents")
    return [e for e in (events if isinstance(events, list) else []) if isinstance(e, dict) and e.get("ph") == "X" and
            isinstance(e.get("name"), str) and timed(e.get("ts")) and timed(e.get("dur")) and e["dur"] >= 0]


def read_steps(trace: dict[str, Any]) -> dict[int, list[Step]]:
    """Each rank's traced steps, with the ranges and kernels that fall in each."""
    events = timed_events(trace)
    steps: dict[int, list[Step]] = {}
    for e in events:
        if (e["name"].startswith(STEP_PREFIX) and e["name"][len(STEP_PREFIX):].isdigit()
                and rank_of(e.get("pid")) is not None):
            steps.setdefault(rank_of(e["pid"]), []).append(
                Step(int(e["name"][len(STEP_PREFIX):]), Interval(e["ts"], e["ts"] + e["dur"])))
    for rank_steps in steps.values():
        rank_steps.sort(key=lambda s: s.number)
    # A kernel belongs to the step whose host code launched it (the runtime call with its correlation id).
    launches = {(rank_of(e.get("pid")), e.get("args", {}).get("correlation")): e["ts"]
                for e in events if e.get("cat") == "cuda_runtime"}

    def step_at(rank: int, ts: float) -> Step | None:
        for step in steps.get(rank, []):
            if step.span.start_us <= ts <= step.span.end_us:
                return step
        return None

    for e in events:
        rank = rank_of(e.get("pid"))
        if rank is None or rank not in steps:
            continue
        interval = Interval(e["ts"], e["ts"] + e["dur"])
        if e.get("cat") == "kernel":
            launched = launches.get((rank, e.get("args", {}).get("correlation")))
            step = step_at(rank, launched) if launched is not None else None
            if step:
                step.kernels.append(interval)
            continue
        if e.get("cat") != "user_annotation":
            continue
        step = step_at(rank, e["ts"])
        if step is None:
            continue
        if e["name"] in PHASES:
            step.phases_us[e["name"]] = step.phases_us.get(e["name"], 0.0) + interval.length_us
            if e["name"] == "backward":
                step.backward.append(interval)
        elif e["name"].startswith(BUCKET_PREFIX):
            step.buckets.append(interval)
        elif e["name"].startswith(COLLECTIVE_PREFIXES):
            step.collectives.append(interval)
        elif e["name"] == LAST_GRADIENT:
            step.last_gradient_us = e["ts"]
    return steps


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def rank_breakdown(steps: dict[int, list[Step]]) -> list[dict[str, Any]]:
    rows = []
    for rank, rank_steps in sorted(steps.items()):
        allreduce = sum(s.allreduce_us for s in rank_steps)
        hidden = [s.hidden_us for s in rank_steps]
        measured = allreduce > 0 and all(h is not None for h in hidden)
        rows.append({
            "rank": rank,
            "steps": len(rank_steps),
            "step_ms": mean([s.span.length_us / 1e3 for s in rank_steps]),
            "phases_ms": {p: mean([s.phases_us.get(p, 0.0) / 1e3 for s in rank_steps]) for p in PHASES},
            # No bucket ranges: the Reducer's built-in hook ran them, or no DDP: not measured, not 0.
            "allreduce_ms": allreduce / 1e3 / len(rank_steps) if allreduce > 0 else None,
            "hidden_fraction": sum(h for h in hidden if h is not None) / allreduce if measured else None,
        })
    return rows


def step_alignment(steps: dict[int, list[Step]]) -> list[dict[str, Any]]:
    """Per step, on the one clock: how late each rank reached the points where the ranks meet (its
    bucket launches, its step's end) behind the first rank there, and the rank latest: the one the
    others waited for. Time a rank spends waiting inside a collective is not lateness."""
    by_number: dict[int, dict[int, Step]] = {}
    for rank, rank_steps in steps.items():
        for s in rank_steps:
            by_number.setdefault(s.number, {})[rank] = s
    rows = []
    for number, ranks in sorted(by_number.items()):
        if len(ranks) < 2:
            continue
        points = {r: s.sync_points() for r, s in ranks.items()}
        if len({tuple(name for name, _ in p) for p in points.values()}) != 1:
            continue  # the ranks' collectives differ in this step: no points to compare
        late = {r: 0.0 for r in ranks}
        for k in range(len(next(iter(points.values())))):
            first = min(points[r][k][1] for r in ranks)
            for r in ranks:
                late[r] = max(late[r], points[r][k][1] - first)
        start0 = min(s.span.start_us for s in ranks.values())
        latest = max(sorted(ranks), key=lambda r: late[r])
        step_us = sorted(s.span.length_us for s in ranks.values())[len(ranks) // 2]
        rows.append({
            "step": number,
            "start_ms": {r: (s.span.start_us - start0) / 1e3 for r, s in sorted(ranks.items())},
            "late_ms": {r: late[r] / 1e3 for r in sorted(ranks)},
            "latest_rank": latest,
            "late_fraction": late[latest] / step_us if step_us > 0 else 0.0,
        })
    return rows


def row_straggler(row: dict[str, Any]) -> dict[str, Any]:
    """The row's own straggler verdict (reports/run_result.hpp), as its JSON states it."""
    return {key: row.get(key) for key in ("straggler", "slowest_rank", "rank_spread", "straggler_cause",
                                          "straggler_steps", "straggler_of_steps", "straggler_p")}


def gpu_figures(steps: dict[int, list[Step]]) -> list[dict[str, Any]]:
    rows = []
    for rank, rank_steps in sorted(steps.items()):
        kernels = [k for s in rank_steps for k in s.kernels]
        if not kernels:
            continue
        window = Interval(min(k.start_us for k in kernels), max(k.end_us for k in kernels))
        largest = sorted(gaps(kernels), key=lambda g: -g.length_us)[:5]
        rows.append({
            "rank": rank,
            "kernels_per_step": mean([float(len(s.kernels)) for s in rank_steps]),
            "busy_fraction": union_length(kernels) / window.length_us if window.length_us > 0 else None,
            "largest_gaps_us": [round(g.length_us, 1) for g in largest],
        })
    return rows


HOST_CALLS = ("cpu_op", "cuda_runtime", "cuda_driver")


def longest_calls(trace: dict[str, Any], steps: dict[int, list[Step]], rank: int = 0, count: int = 8) -> list[dict]:
    """Rank `rank`'s host calls inside its traced steps (LibTorch's ops, CUDA runtime and driver
    calls), by name, the longest in total first: where a slow step's host time went (autotuning,
    module loading, allocation). Nested ops each count their own span, inner calls included."""
    # The steps as one set of time, however often a step's range was written.
    spans = merge_intervals([s.span for s in steps.get(rank, [])])
    totals: dict[str, list[float]] = {}
    for e in timed_events(trace):
        if e.get("cat") not in HOST_CALLS or rank_of(e.get("pid")) != rank:
            continue
        # Only the part inside the traced steps, wherever the call began or ended.
        inside = sum(overlap_length(Interval(e["ts"], e["ts"] + e["dur"]), span) for span in spans)
        if inside > 0:
            entry = totals.setdefault(e["name"], [0.0, 0])
            entry[0] += inside
            entry[1] += 1
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])[:count]
    return [{"name": name, "total_ms": total_us / 1e3, "calls": calls} for name, (total_us, calls) in ranked]


def hta_report(rank_files: list[Path], has_kernels: bool) -> dict[str, Any]:
    """HTA over the row's rank files alone (its folder may hold other JSON), its chatter kept out."""
    from hta.trace_analysis import TraceAnalysis  # the HTA environment's; imported only here

    with tempfile.TemporaryDirectory() as folder:
        for rank, path in enumerate(rank_files):
            os.symlink(path.resolve(), Path(folder) / f"rank{rank}{''.join(path.suffixes[-2:])}")
        chatter = io.StringIO()
        with redirect_stdout(chatter), redirect_stderr(chatter):
            analysis = TraceAnalysis(trace_dir=folder)
            ranks = sorted(analysis.t.traces.keys())
            found: dict[str, Any] = {"ranks": ranks, "analyses": {}}
            if not has_kernels:
                for name in HTA_ANALYSES:
                    found["analyses"][name] = "needs GPU kernels: this trace has none (a CPU row)"
                return found
            runs = {
                "temporal breakdown": lambda: analysis.get_temporal_breakdown(visualize=False),
                "comm/comp overlap": lambda: analysis.get_comm_comp_overlap(visualize=False),
                "idle time": lambda: analysis.get_idle_time_breakdown(visualize=False)[0],
                "kernel launches": lambda: {r: df.describe() for r, df in
                                            analysis.get_cuda_kernel_launch_stats(visualize=False).items()},
            }
            for name, run in runs.items():
                try:
                    found["analyses"][name] = run()
                except Exception as error:  # one analysis failing leaves the others
                    found["analyses"][name] = f"failed: {type(error).__name__}: {error}"
    return found


def print_report(merged: dict[str, Any], record: dict[str, Any], breakdown: list[dict], alignment: list[dict],
                 verdict: dict[str, Any], gpu: list[dict], hta: dict[str, Any] | None, calls: list[dict]) -> None:
    info = merged["ddpbench"]
    print(f"row {info['row']}: steps {info['first_step']}-{info['last_step']}, {len(info['ranks'])} ranks")
    print(f"clock: {info['clock']}")
    traced, untraced = record.get("traced_step_time_s"), record.get("untraced_step_time_s")
    if isinstance(traced, (int, float)) and isinstance(untraced, (int, float)) and untraced > 0:
        print(f"traced steps' p50 {1e3 * traced:.3f} ms, the untraced steady steps' {1e3 * untraced:.3f} ms: "
              f"{traced / untraced:.3f}x (rank 0, steps past warm-up)")
    else:
        print("traced steps against untraced ones: not measured (the trace holds warm-up steps only, or no "
              "steady step is left untraced)")
    print()
    print("ddpbench's ranges, mean per traced step (ms):")
    print("| rank | steps | step | " + " | ".join(PHASES) + " | allreduce | hidden under backward's work |")
    print("| ---: | ---: | ---: | " + " | ".join("---:" for _ in PHASES) + " | ---: | ---: |")
    for row in breakdown:
        allreduce = "-" if row["allreduce_ms"] is None else f"{row['allreduce_ms']:.3f}"
        hidden = "-" if row["hidden_fraction"] is None else f"{100 * row['hidden_fraction']:.0f} %"
        print(f"| {row['rank']} | {row['steps']} | {row['step_ms']:.3f} | "
              + " | ".join(f"{row['phases_ms'][p]:.3f}" for p in PHASES) + f" | {allreduce} | {hidden} |")
    if any(row["allreduce_ms"] is None for row in breakdown):
        print("(allreduce -: no bucket ranges, from the Reducer's built-in hook or a row without DDP)")
    print("\nper step, on the one clock: each rank's start, and how late it reached the ranks' meeting points "
          "(collectives, bucket launches, step end) behind the first rank there, ms:")
    for row in alignment:
        cells = ", ".join(f"rank {r} start +{row['start_ms'][r]:.3f} late {row['late_ms'][r]:.3f}"
                          for r in row["start_ms"])
        print(f"  step {row['step']}: {cells}; latest: rank {row['latest_rank']} "
              f"({100 * row['late_fraction']:.0f} % of the step)")
    print("(lateness is where a straggler shows on the timeline; step by step it moves with noise)")
    spread = verdict.get("rank_spread")
    spread_text = f"{spread:.2f}x" if isinstance(spread, (int, float)) else "not measured"
    if verdict.get("straggler"):
        print(f"straggler (the row's verdict, over its untraced steady steps): rank {verdict['slowest_rank']}, its "
              f"own time {spread_text} the fastest rank's ({verdict['straggler_cause']}), the slowest in "
              f"{verdict['straggler_steps']} of {verdict['straggler_of_steps']} steps")
    else:
        print(f"straggler (the row's verdict, over its untraced steady steps): none (slowest rank's own time "
              f"{spread_text} the fastest's)")
    if gpu:
        print("\nGPU kernels of the traced steps:")
        for row in gpu:
            busy = "-" if row["busy_fraction"] is None else f"{100 * row['busy_fraction']:.1f} %"
            print(f"  rank {row['rank']}: {row['kernels_per_step']:.0f} kernels/step, GPU busy {busy}, "
                  f"largest gaps {row['largest_gaps_us']} us")
    else:
        print("\nno GPU kernels in the trace (a CPU row): no kernel counts, busy fraction or gaps")
    if calls:
        print("\nlongest host calls in rank 0's traced steps, total (calls): "
              + "; ".join(f"{c['name']} {c['total_ms']:.1f} ms ({c['calls']})" for c in calls))
    if hta is not None:
        print(f"\nHolistic Trace Analysis: loaded ranks {hta['ranks']}")
        for name, value in hta["analyses"].items():
            print(f"  {name}:" + (f" {value}" if isinstance(value, str) else "\n" + str(value)))


RANK_TRACE = re.compile(r".*\.rank[0-9]+\.trace\.json(\.gz)?$")
# The id of an --svg timeline's root element: what tells an earlier timeline from any other SVG.
TIMELINE_ID = "ddpbench-trace-timeline"


def is_figures_file(path: Path) -> bool:
    """An earlier figures file of this report (--json): an object with the keys it writes (a
    user's list of those names, ["row", "ranks", ...], was taken for one and replaced)."""
    try:
        found = json.loads(path.read_bytes()[: 1 << 26])
    except (OSError, ValueError):
        return False
    return isinstance(found, dict) and set(found) >= {"row", "ranks", "steps", "gpu"}


def is_timeline(path: Path) -> bool:
    """An earlier timeline of this report (--svg): an SVG whose root carries the timeline's id,
    never any SVG (a user's own drawing is not replaced)."""
    try:
        with open(path, "rb") as existing:
            first_line = existing.readline(1 << 12)
    except OSError:
        return False
    return first_line.startswith(b"<svg") and f'id="{TIMELINE_ID}"'.encode() in first_line


def output_problem(json_out: str | None, svg_out: str | None, inputs: list[Path]) -> str | None:
    """What is wrong with writing --json and --svg (the output rule: scripts/lib/output_rule.py),
    besides: a path named as a rank's trace (`ddpbench trace --out` refuses the same) and a folder
    that cannot take the file. None when they can be written."""
    try:
        check_outputs({"RESULTS" if k == 0 else f"RESULTS (rank {k - 1}'s trace)": p for k, p in enumerate(inputs)},
                      {"--json": (json_out, "a figures file of this report", is_figures_file),
                       "--svg": (svg_out, "a timeline of this report", is_timeline)})
    except OutputClash as clash:
        return str(clash)
    for out in (o for o in (json_out, svg_out) if o):
        if RANK_TRACE.match(Path(out).name):
            return f"'{out}' is a rank's trace (of this row or another): give another path"
        folder = Path(out).resolve().parent
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            return f"'{out}' cannot be written (its folder is missing or read-only)"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="the traced row's result JSON")
    parser.add_argument("--row", help="the traced row, where the file holds several")
    parser.add_argument("--ddpbench", required=True, help="the ddpbench binary")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--svg", help="also draw the traced steps' timeline here (scripts/lib/trace_timeline.py)")
    parser.add_argument("--no-hta", action="store_true", help="leave HTA out (where it is not installed)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        merged_path = Path(scratch) / "merged.trace.json"
        command = [args.ddpbench, "trace", args.results, "--out", str(merged_path)]
        if args.row:
            command += ["--row", args.row]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            return done.returncode
        merged = json.loads(merged_path.read_text())
    # `ddpbench trace` proved the file: its traced row is read back as it is.
    info = merged["ddpbench"]
    row = next(r for r in json.loads(Path(args.results).read_text())["runs"]
               if r.get("trace") and (r.get("name"), r.get("mode", ""), r.get("repetition", 0)) ==
               (info["row"], info["mode"], info["repetition"]))
    record = row["trace"]
    steps = read_steps(merged)
    breakdown, alignment, gpu = rank_breakdown(steps), step_alignment(steps), gpu_figures(steps)
    verdict = row_straggler(row)
    folder = Path(merged["ddpbench"]["folder"])  # where `ddpbench trace` found them
    rank_files = [folder / r["file"] for r in merged["ddpbench"]["ranks"]]
    if problem := output_problem(args.json, args.svg, [Path(args.results), *rank_files]):
        print(f"trace-report: {problem}", file=sys.stderr)
        return 2
    hta = None
    if not args.no_hta:
        try:
            hta = hta_report(rank_files, has_kernels=bool(gpu))
        except ImportError as error:
            print(f"trace-report: HTA is not installed here ({error}); scripts/trace-report sets it up", file=sys.stderr)
            return 1
    calls = longest_calls(merged, steps)
    print_report(merged, record, breakdown, alignment, verdict, gpu, hta, calls)
    if args.svg:
        from trace_timeline import draw_timeline  # beside this file
        write_whole(args.svg, draw_timeline(merged))
    if args.json:
        figures = {"row": merged["ddpbench"]["row"], "ranks": breakdown, "steps": alignment, "straggler": verdict,
                   "gpu": gpu, "longest_host_calls": calls,
                   "hta_ranks": hta["ranks"] if hta else None}
        write_whole(args.json, json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""scripts/gate-power --paired: how often does the paired gate (scripts/ci-bench --against) cry
wolf, and how often does it catch a slowdown of one row or of all rows?

Measuring: rounds of the ci-bench sweep's rows on one binary, each row in each round run once
per arm, back to back in a random order (the order of scripts/ci-bench --against): `base` (the
baseline build), `aa` (the same build again: the A/A candidate) and one arm per slowdown level
(`--inject-slowdown X` on that run's row: real busy work). Runs are kept in --work-dir and a
later call goes on where the last stopped.

Evaluating: a trial is one gate run, `ddpbench compare --paired` with the adaptive rounds of
ci-bench (after --min-rounds only the undecided rows take another round, up to --max-rounds),
whose candidate is, per row, the `aa` arm or a slowed one: A/A (a regression anywhere is a
false alarm), one row slowed (a detection when that row is a regression), all rows slowed.
Trials of one kind take disjoint rounds from the stream, in order, as consecutive gate runs
would. Since a gate run of 4 to 12 rounds costs minutes, --resample N adds N trials per kind
whose rounds are drawn without replacement from all measured rounds: the procedure applied to
the measured noise many times over (trials share rounds, so their count overstates the
evidence; the disjoint count is the honest one).
"""
from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ci_gate import children  # noqa: E402
from ci_gate.adaptive_rounds import row_of  # noqa: E402
from ci_gate.cli import Usage, sweep_rows  # noqa: E402
from ci_gate.judge import PairedCompare, regressions as compared_regressions  # noqa: E402
from ci_gate.outcomes import Side, Stop  # noqa: E402
from ci_gate.rounds import (Arm, Refusal, checked_result, forget_taken, lockstep_row, merge_rounds,  # noqa: E402
                            round_order, run_row)
from output_rule import write_whole  # noqa: E402


def arm_label(level: float) -> str:
    return f"slow-{round(level * 100)}pct"


def measure(binary: str, sweep_file: Path, levels: list[float], rounds: int, seed: int, twins: bool,
            work: Path) -> None:
    rows = list(sweep_rows(sweep_file))
    arms = {"base": Arm("base", binary, side=Side.BASELINE), "aa": Arm("aa", binary)}
    for level in levels:
        label = arm_label(level)
        arms[label] = Arm(label, binary, (), {row: ("--inject-slowdown", str(level)) for row in rows})
    for round_index in range(rounds):
        order = round_order(rows, list(arms), seed, round_index)
        if all((work / arm / f"round-{round_index:03d}" / row / "wall_s").exists() for row, arm in order):
            continue
        began = time.monotonic()
        for row, label in order:
            folder = work / label / f"round-{round_index:03d}" / row
            if (folder / "wall_s").exists():
                continue
            shutil.rmtree(folder, ignore_errors=True)
            started = time.monotonic()
            run_row(arms[label], sweep_file, row, twins, folder)
            (folder / "wall_s").write_text(f"{time.monotonic() - started:.2f}\n")
        print(f"gate-power: round {round_index + 1}/{rounds} measured in {time.monotonic() - began:.0f} s",
              file=sys.stderr, flush=True)


def lockstep_folder(work: Path, arm: str, round_index: int, row: str) -> Path:
    """Where a lockstep run of `row` (the base arm beside `arm`) keeps both builds' results."""
    return work / "lockstep" / arm / f"round-{round_index:03d}" / row


def measure_lockstep(binary: str, sweep_file: Path, levels: list[float], rounds: int, seed: int, twins: bool,
                     work: Path) -> None:
    """Rounds of lockstep runs, as scripts/ci-bench --against runs them by default: in each round,
    each row once per candidate arm (`aa`, and each slowdown), side by side with the base arm in
    lockstep, the rows and arms in a random order; fresh processes every run."""
    rows = list(sweep_rows(sweep_file))
    base = Arm("base", binary, side=Side.BASELINE)
    arms = {"aa": Arm("candidate", binary)}
    for level in levels:
        arms[arm_label(level)] = Arm("candidate", binary, (), {row: ("--inject-slowdown", str(level)) for row in rows})
    for round_index in range(rounds):
        order = round_order(rows, list(arms), seed, round_index)
        began = time.monotonic()
        measured = 0
        for row, label in order:
            folder = lockstep_folder(work, label, round_index, row)
            if (folder / "wall_s").exists():
                continue
            shutil.rmtree(folder, ignore_errors=True)
            started = time.monotonic()
            sides = [(base, folder / "base"), (arms[label], folder / "cand")]
            ran = lockstep_row(sides, sweep_file, row, twins, seed, f"power:{round_index}:{row}:{label}",
                               folder / "lockstep.json")
            for arm, side_folder in sides:
                done = children.Finished(arm.side, f"the {arm.label} build's sweep of row {row}",
                                         ran.returncodes[arm.label], False, 0, side_folder / "sweep.log")
                checked_result(arm, row, side_folder, done, stopped=ran.record["stopped"].get(arm.label, ""))
            (folder / "wall_s").write_text(f"{time.monotonic() - started:.2f}\n")
            measured += 1
        if measured:
            print(f"gate-power: lockstep round {round_index + 1}/{rounds} measured in {time.monotonic() - began:.0f} s",
                  file=sys.stderr, flush=True)


def trimmed_mean(values: list[float]) -> float:
    """The 20 % trimmed mean (scipy.stats.trim_mean(x, 0.2))."""
    ordered = sorted(values)
    cut = len(ordered) // 5
    kept = ordered[cut:len(ordered) - cut]
    return sum(kept) / len(kept)


def run_statistic(steady: list[tuple[int, float]]) -> float:
    """A lockstep run's log ratio from its steady steps (position, log ratio), as
    reports/matched_steps.cpp takes it: the mean of the even and the odd positions' trimmed means."""
    return (trimmed_mean([d for k, d in steady if k % 2 == 0]) + trimmed_mean([d for k, d in steady if k % 2])) / 2


def read_lockstep_run(folder: Path, row: str) -> tuple[dict, dict, dict] | None:
    """A measured lockstep run of `row`: the base and the candidate build's rows, and the
    coordinator's record; None where any is missing or unreadable."""
    try:
        base, cand = (next(r for r in json.loads((folder / side / "results.json").read_text())["runs"]
                           if r["name"] == row) for side in ("base", "cand"))
        return base, cand, json.loads((folder / "lockstep.json").read_text())
    except (OSError, ValueError, KeyError, StopIteration):
        return None


def lockstep_noise(work: Path, rows: list[str], arms: list[str], pool: list[int]) -> str:
    """What the lockstep runs say about the noise, per row and candidate arm: the runs' statistic
    (run_statistic, as compare takes it) and its spread between runs, the
    spread of one step's log ratio within a run, the train_time_s log ratio's spread between runs,
    and the effect of going first in a pair (the mean log ratio of the pairs the candidate opened
    less that of the pairs the baseline build opened)."""
    lines = ["| row | candidate | runs | step: mean log ratio | between runs (sd) | one step within a run (sd) | "
             "train_time_s: mean | between runs (sd) | candidate first minus baseline first (mean ± sd) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        for arm in arms:
            per_run, within, train, first_effect = [], [], [], []
            for round_index in pool:
                read = read_lockstep_run(lockstep_folder(work, arm, round_index, row), row)
                if read is None or not read[2]["sessions"]:
                    continue
                base, cand, record = read
                first = record["sessions"][0]["first"]
                warmup = base["warmup_steps"]
                pairs = list(zip(base["step_records"], cand["step_records"]))
                steady = [(k, math.log(c["time_s"] / b["time_s"])) for k, (b, c) in enumerate(pairs) if k >= warmup]
                if len(steady) < 2:
                    continue
                per_run.append(run_statistic(steady))
                within.append(statistics.stdev([d for _, d in steady]))
                train.append(math.log(cand["train_time_s"] / base["train_time_s"]))
                candidate_opened = [d for k, d in steady if (k % 2 == 0) == (first == "candidate")]
                baseline_opened = [d for k, d in steady if (k % 2 == 0) != (first == "candidate")]
                if candidate_opened and baseline_opened:
                    first_effect.append(statistics.mean(candidate_opened) - statistics.mean(baseline_opened))
            if len(per_run) < 2:
                continue
            lines.append(f"| {row} | {arm} | {len(per_run)} | {statistics.mean(per_run):+.4f} | "
                         f"{statistics.stdev(per_run):.4f} | {statistics.mean(within):.4f} | "
                         f"{statistics.mean(train):+.4f} | {statistics.stdev(train):.4f} | "
                         f"{statistics.mean(first_effect):+.4f} ± {statistics.stdev(first_effect):.4f} |")
    return "\n".join(lines) + "\n"


def export_lockstep_runs(work: Path, out: Path) -> int:
    """Every complete lockstep run in `work`, one JSON line each (row, candidate arm, round, the
    first build, both builds' step times, warm-up, train times and waits, wall seconds): the
    record that keeps, small enough to commit, from which the noise can be read again."""
    lines = []
    for wall in sorted(work.glob("lockstep/*/round-*/*/wall_s")):
        folder = wall.parent
        read = read_lockstep_run(folder, folder.name)
        if read is None:
            continue
        base, cand, record = read
        lines.append(json.dumps({
            "row": folder.name, "arm": folder.parent.parent.name, "round": int(folder.parent.name.split("-")[1]),
            "first": record["sessions"][0]["first"] if record["sessions"] else None,
            "warmup_steps": base["warmup_steps"], "wall_s": float(wall.read_text()),
            **{f"{side}_{key}": run[key] for side, run in (("base", base), ("cand", cand))
               for key in ("train_time_s", "lockstep_wait_s")},
            "base_step_s": [round(step["time_s"], 6) for step in base["step_records"]],
            "cand_step_s": [round(step["time_s"], 6) for step in cand["step_records"]]}))
    write_whole(out, "".join(line + "\n" for line in lines))
    return len(lines)


@dataclass(frozen=True)
class Kind:
    """A kind of trial: which arm is the candidate of each row."""
    name: str
    slowed_row: str  # "" for A/A, "all" for every row
    level: float

    def arm(self, row: str) -> str:
        return arm_label(self.level) if self.slowed_row in ("all", row) else "aa"


def clopper_pearson_upper(hits: int, trials: int, confidence: float = 0.95) -> float:
    """The one-sided upper bound of a binomial rate (exact)."""
    if trials == 0:
        return 1.0
    if hits >= trials:
        return 1.0

    def cdf(p: float) -> float:
        return sum(math.comb(trials, k) * p ** k * (1 - p) ** (trials - k) for k in range(hits + 1))

    low, high = hits / trials, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if cdf(mid) > 1 - confidence:
            low = mid
        else:
            high = mid
    return high


@dataclass
class Trial:
    alarm: bool        # the gate failed
    detected: bool     # the slowed row (any row, for `all`) was a regression
    rounds: dict[str, int]
    wall_s: float


def regressions(text: str) -> set[str]:
    """Rows the paired comparison's text calls a regression ("- ddp-2 (faithful) ...: REGRESSION (...)")."""
    return {name.split(" (", 1)[0] for name in compared_regressions(text)}


def gate_trial(kind: Kind, rows: list[str], draws: dict[str, list[int]], gate: PairedCompare, work: Path,
               scratch: Path, in_lockstep: bool = False) -> Trial | None:
    """One adaptive gate run whose rounds of row r come from draws[r], in order; None when a row
    would need more rounds than it was given."""
    taken = {row: gate.min_rounds for row in rows}
    found: set[str] = set()  # a regression at any look stands, as in ci-bench --against
    while True:
        if any(taken[row] > len(draws[row]) for row in rows):
            return None
        files: dict[str, list[tuple[int, Path]]] = {"base": [], "cand": []}
        wall = 0.0
        for row in rows:
            for position, round_index in enumerate(draws[row][:taken[row]]):
                if in_lockstep:  # one run held both sides
                    folder = lockstep_folder(work, kind.arm(row), round_index, row)
                    for side in ("base", "cand"):
                        files[side].append((position, folder / side / "results.json"))
                    wall += float((folder / "wall_s").read_text())
                    continue
                for side, arm in (("base", "base"), ("cand", kind.arm(row))):
                    folder = work / arm / f"round-{round_index:03d}" / row
                    files[side].append((position, folder / "results.json"))
                    wall += float((folder / "wall_s").read_text())
        merge_rounds(files["base"], scratch / "base.json")
        merge_rounds(files["cand"], scratch / "cand.json")
        ruling, undecided = gate.compare(scratch / "base.json", scratch / "cand.json", scratch / "undecided.txt",
                                         scratch / "paired.md")
        rc, text = ruling.rc, ruling.text
        found |= regressions(text)
        again = {row_of(name, tuple(rows)) for name in undecided}
        if not again:
            detected = bool(found & set(rows)) if kind.slowed_row == "all" else kind.slowed_row in found
            return Trial(rc == 1 or bool(found), detected, dict(taken), wall)
        for row in again:
            taken[row] += 1


def complete_rounds(work: Path, rows: list[str], arms: list[str], in_lockstep: bool = False) -> list[int]:
    if in_lockstep:
        found = sorted({int(p.name.split("-")[1]) for p in (work / "lockstep" / "aa").glob("round-*")})
        return [r for r in found if all((lockstep_folder(work, arm, r, row) / "wall_s").exists()
                                        for arm in arms if arm != "base" for row in rows)]
    found = sorted({int(p.name.split("-")[1]) for p in (work / "base").glob("round-*")}) if (work / "base").exists() else []
    return [r for r in found if all((work / arm / f"round-{r:03d}" / row / "wall_s").exists()
                                    for arm in arms for row in rows)]


def evaluate(binary: str, sweep_file: Path, levels: list[float], targets: list[str], work: Path,
             gate: PairedCompare, resample: int, seed: int, in_lockstep: bool = False) -> str:
    forget_taken()  # the rounds as they lie in `work`, whoever measured them
    rows = list(sweep_rows(sweep_file))
    arms = ["base", "aa"] + [arm_label(level) for level in levels]
    pool = complete_rounds(work, rows, arms, in_lockstep)
    if len(pool) < gate.max_rounds:
        raise Usage(f"{len(pool)} complete rounds in {work}: a trial may need --max-rounds "
                                     f"({gate.max_rounds}); measure more")
    kinds = [Kind("A/A", "", 0.0)] + [Kind(f"{t} +{round(level * 100)} %", t, level) for t in targets
                                      for level in levels]
    lines = ["| trials | kind | trials | false alarms (disjoint: ≤ 95 % upper bound) | detected | rounds per row (mean) | "
             "minutes per gate run (mean) |", "|---|---|---:|---|---|---:|---:|"]
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        for how in ("disjoint", "resampled"):
            for kind in kinds:
                trials: list[Trial] = []
                if how == "disjoint":
                    # Each trial starts at one round for every row, past every round an earlier
                    # trial used, as a gate run after the last one would.
                    start = 0
                    while True:
                        trial = gate_trial(kind, rows, {row: pool[start:] for row in rows}, gate, work, scratch,
                                           in_lockstep)
                        if trial is None:
                            break
                        trials.append(trial)
                        start += max(trial.rounds.values())
                else:
                    rng = random.Random(f"gate-power-resample:{seed}:{kind.name}")
                    for _ in range(resample):
                        draws = {row: rng.sample(pool, min(len(pool), gate.max_rounds)) for row in rows}
                        trial = gate_trial(kind, rows, draws, gate, work, scratch, in_lockstep)
                        if trial is not None:
                            trials.append(trial)
                if not trials:
                    continue
                n = len(trials)
                alarms = sum(t.alarm for t in trials)
                # Resampled trials share rounds: their count is no sample size for a bound.
                bound = f", ≤ {100 * clopper_pearson_upper(alarms, n):.1f} %" if how == "disjoint" else ""
                alarm_cell = f"{alarms}/{n} ({100 * alarms / n:.0f} %{bound})" if not kind.slowed_row else "-"
                hits = sum(t.detected for t in trials)
                detect_cell = f"{hits}/{n} ({100 * hits / n:.0f} %)" if kind.slowed_row else "-"
                mean_rounds = sum(sum(t.rounds.values()) / len(rows) for t in trials) / n
                minutes = sum(t.wall_s for t in trials) / n / 60
                lines.append(f"| {how} | {kind.name} | {n} | {alarm_cell} | {detect_cell} | {mean_rounds:.1f} | "
                             f"{minutes:.1f} |")
                print(lines[-1], file=sys.stderr, flush=True)
    noise = ("\n\nThe noise of the lockstep runs (log ratios: candidate over baseline build; pair k's order is the "
             "run's first build's when k is even):\n\n" + lockstep_noise(work, rows, arms[1:], pool)) if in_lockstep else ""
    return "\n".join(lines) + noise + (
        f"\n\n{len(pool)} complete rounds measured in {work} (each: every row once per arm: "
        f"{', '.join(arms)}{'; in lockstep: base beside each other arm' if in_lockstep else ''}); gate: threshold {gate.threshold}, alpha {gate.alpha}, metric {gate.metrics}, rounds "
        f"{gate.min_rounds} to {gate.max_rounds}. Disjoint trials take consecutive unused rounds, as consecutive gate "
        f"runs would; resampled trials draw {gate.max_rounds} rounds per row without replacement from the pool "
        f"(they share rounds). Minutes per gate run: the runs' own wall time (two builds), no rebuild.\n")


def main(argv: list[str], build: Callable[[], str], source: Path) -> int:
    """`build` gives the ddpbench binary, building it when needed (after the arguments are read)."""
    parser = argparse.ArgumentParser(prog="scripts/gate-power --paired", description=__doc__.split("\n\n")[0])
    parser.add_argument("--paired", action="store_true")
    parser.add_argument("--rounds", type=int, default=30, help="rounds to measure (each: every row once per arm)")
    parser.add_argument("--levels", default="0.05,0.10,0.15", help="slowdowns, as fractions")
    parser.add_argument("--targets", default="single,ddp-2,dp-2,all", help="rows of the sweep slowed alone, or all")
    parser.add_argument("--sweep-file", type=Path, default=source / "scripts" / "ci-bench.sweep.json")
    parser.add_argument("--twins", action=argparse.BooleanOptionalAction, default=False,
                        help="run PyTorch's twins too (each run twice as long)")
    parser.add_argument("--min-rounds", type=int, default=4)
    parser.add_argument("--max-rounds", type=int, default=12)
    parser.add_argument("--thresholds", default="0.05")
    parser.add_argument("--alphas", default="0.05")
    parser.add_argument("--metric", default="train_time_s")
    parser.add_argument("--coarse-metric", default="", help="metrics judged on the rounds the others ask for")
    parser.add_argument("--resample", type=int, default=100, help="resampled trials per kind (0: none)")
    parser.add_argument("--seed", type=int, default=1, help="the run order and the resampling")
    parser.add_argument("--work-dir", type=Path, default=source / "results" / "gate-power-paired")
    parser.add_argument("--evaluate-only", action="store_true", help="evaluate the rounds measured before")
    parser.add_argument("--export-runs", type=Path,
                        help="--lockstep: write every measured run, one JSON line each, to this file (and evaluate)")
    parser.add_argument("--lockstep", action=argparse.BooleanOptionalAction, default=True,
                        help="measure and gate lockstep runs (ci-bench --against's default); --no-lockstep: rounds "
                             "back to back (ci-bench --against --round-level)")
    args = parser.parse_args(argv)
    try:
        levels = [float(v) for v in args.levels.split(",") if v]
        thresholds = [float(v) for v in args.thresholds.split(",") if v]
        alphas = [float(v) for v in args.alphas.split(",") if v]
    except ValueError as error:
        print(f"scripts/gate-power: {error}", file=sys.stderr)
        return 2
    targets = [t for t in args.targets.split(",") if t]
    try:
        rows = sweep_rows(args.sweep_file)
        binary = build()
        unknown = [t for t in targets if t != "all" and t not in rows]
        if unknown or not levels or any(not 0 < v < 10 for v in levels) or any(not 0 < a < 1 for a in alphas):
            raise Usage(f"--targets must be rows of {args.sweep_file.name} ({', '.join(rows)}) or all "
                                         f"(unknown: {', '.join(unknown) or 'none'}); --levels in (0, 10); "
                                         f"--alphas in (0, 1)")
        if args.rounds < args.max_rounds or not 2 <= args.min_rounds <= args.max_rounds:
            raise Usage("--rounds must be at least --max-rounds, and 2 <= --min-rounds <= --max-rounds")
        args.work_dir.mkdir(parents=True, exist_ok=True)
        if not args.evaluate_only:
            (measure_lockstep if args.lockstep else measure)(binary, args.sweep_file, levels, args.rounds, args.seed,
                                                             args.twins, args.work_dir)
        if args.export_runs is not None and args.lockstep:
            print(f"gate-power: {export_lockstep_runs(args.work_dir, args.export_runs)} lockstep runs written to "
                  f"{args.export_runs}", file=sys.stderr)
        for threshold in thresholds:
            for alpha in alphas:
                # One build on both sides of every trial: it judges itself, and its compare runs once.
                gate = PairedCompare(binary, binary, threshold, alpha, args.metric, args.min_rounds,
                                          args.max_rounds, coarse=args.coarse_metric)
                print(f"\n### threshold {threshold}, alpha {alpha}\n")
                print(evaluate(binary, args.sweep_file, levels, targets, args.work_dir, gate, args.resample, args.seed,
                               args.lockstep), flush=True)
    except (Usage, Stop, Refusal) as error:  # bad input, or a run that died, hung or wrote garbage: nothing to measure
        print(f"scripts/gate-power: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("scripts/gate-power: interrupted", file=sys.stderr)
        return 130
    return 0

"""Paired rounds of two builds (scripts/ci-bench --against): each round runs every row once on
each build, back to back, the builds in a random order for each row and the rows in a random
order (randomized multiple interleaved trials: Abedi & Brecht, ICPE 2017), so whatever the
machine does to one build in a round it does to the other. Round r of a row is repetition r of
that build's rounds file, which `ddpbench compare --paired` reads. After --min-rounds rounds of
every row, each further round runs only the rows the comparison still calls undecided, up to
--max-rounds. The order of round r depends only on the seed and r, so a seed reproduces it.

Exit codes: 0 no regression, 1 a regression (found at any look) or a candidate whose sweep died,
2 bad input or a baseline build that cannot run the rows, 130 interrupted.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import math
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


class BadInput(Exception):
    """What was asked cannot be judged: exit 2 (125 under git bisect)."""


class Interrupted(Exception):
    """A run ended by a signal, or the sweep itself failed: nothing to judge."""


@dataclass(frozen=True)
class Arm:
    """One side of the comparison: a build's binary and the sweep arguments it runs every row with."""
    label: str
    binary: str
    sweep_args: tuple[str, ...] = ()
    row_args: dict[str, tuple[str, ...]] = field(default_factory=dict)  # more arguments for one row


def round_order(rows: list[str], arms: list[str], seed: int, round_index: int) -> list[tuple[str, str]]:
    """Round `round_index`'s runs: every row once per arm, the rows shuffled, each row's arms
    run back to back. The arms' order is counterbalanced in blocks of two rounds: random in the
    first, reversed in the second, so an effect of running first in a pair falls on each build
    equally (unbalanced, the trimmed mean cut the minority order away and read the effect as a
    change). Depends on nothing but its arguments."""
    rng = random.Random(f"ddpbench-paired-rounds:{seed}:{round_index}")
    shuffled_rows = list(rows)
    rng.shuffle(shuffled_rows)
    block = random.Random(f"ddpbench-paired-rounds:{seed}:block:{round_index // 2}")
    arm_orders = {}
    for row in rows:
        row_arms = list(arms)
        block.shuffle(row_arms)
        arm_orders[row] = row_arms[::-1] if round_index % 2 else row_arms
    return [(row, arm) for row in shuffled_rows for arm in arm_orders[row]]


def sweep_rows(sweep_file: Path) -> list[str]:
    try:
        sweep = json.loads(sweep_file.read_text())
        rows = [row["name"] for row in sweep["rows"]]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise BadInput(f"--sweep-file: cannot read the rows of {sweep_file}: {error}") from None
    if not rows or len(set(rows)) != len(rows):
        raise BadInput(f"--sweep-file: {sweep_file} must name each row once (rows: {', '.join(rows) or 'none'})")
    return rows


class BrokenCandidate(Exception):
    """The candidate build's sweep died or wrote nothing readable: the gate fails (exit 1)."""


def run_sweep(command: list[str], log_path: Path) -> int:
    """The sweep in its own process group, so that an interrupted gate stops it and the rows it
    started rather than leave them loading the machine."""
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return process.wait()
        except BaseException:
            for sig, grace_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 5)):
                try:
                    os.killpg(process.pid, sig)
                    process.wait(timeout=grace_s)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue
            raise


def run_row(arm: Arm, sweep_file: Path, row: str, twins: bool, folder: Path, candidate: bool = False,
            ran_before: bool = False) -> Path:
    """One row (and its PyTorch twin) on one build; its result file. A row that fails still
    writes its row (exit 1): the comparison fails it closed. A sweep that itself dies or writes
    no readable result fails the gate when it is the candidate's, and cannot be judged when it
    is the baseline build's."""
    folder.mkdir(parents=True, exist_ok=True)
    command = [arm.binary, "sweep", "--file", str(sweep_file), "--mode", "faithful", "--table", "tutorial", "--rows",
               row, "--repeat", "1", "--out-dir", str(folder), *arm.sweep_args, *arm.row_args.get(row, ())]
    if twins:
        command.append("--reference")
    rc = run_sweep(command, folder / "sweep.log")
    results = folder / "results.json"
    where = f"the {arm.label} build's sweep of row {row} (log: {folder / 'sweep.log'})"
    if rc == 2 and candidate and ran_before:
        raise BrokenCandidate(f"{where} refused the input it ran in an earlier round")
    if rc == 2:
        raise BadInput(f"{where} refused its input")
    if rc in (-signal.SIGINT, -signal.SIGTERM, 130, 143):
        raise Interrupted(f"{where} was interrupted (exit {rc})")
    problem = "" if rc in (0, 1) else f"exited with {rc}"
    if not problem:
        try:
            runs = json.loads(results.read_text())["runs"]
            if not any(r.get("name") == row for r in runs):
                problem = f"wrote no row {row} into {results}"
        except (OSError, ValueError, KeyError, TypeError) as error:
            problem = f"wrote no readable result file ({results}: {error})"
    if problem:
        if candidate:
            raise BrokenCandidate(f"{where} {problem}")
        raise BadInput(f"{where} {problem}")
    return results


def merge_rounds(files: list[tuple[int, Path]], out: Path) -> None:
    """One rounds file: every run of `files` (round, result file), repetition = its round."""
    merged: dict | None = None
    runs: list[dict] = []
    rows: list[dict] = []
    for round_index, path in sorted(files, key=lambda item: (item[0], str(item[1]))):
        doc = json.loads(path.read_text())
        if merged is None:
            merged = doc
        for run in doc["runs"]:
            run["repetition"] = round_index
            runs.append(run)
        for row in (doc.get("sweep") or {}).get("rows", []):
            if all(row.get("name") != r.get("name") or row.get("mode") != r.get("mode") for r in rows):
                rows.append(row)
    if merged is None:
        raise BadInput("no round ran")
    merged["runs"] = runs
    merged.pop("summary", None)
    sweep = merged.setdefault("sweep", {})
    sweep["rows"] = rows
    sweep["repeat"] = 1 + max(index for index, _ in files)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(merged, indent=1))
    tmp.replace(out)


@dataclass
class Gate:
    """The comparison's settings, passed to `ddpbench compare --paired`."""
    binary: str
    threshold: float
    alpha: float
    metrics: str
    min_rounds: int
    max_rounds: int
    allow_missing: str = ""

    def compare(self, baseline: Path, candidate: Path, undecided: Path, out: Path | None = None
                ) -> tuple[int, str, list[str]]:
        command = [self.binary, "compare", str(baseline), str(candidate), "--paired", "--threshold",
                   str(self.threshold), "--alpha", str(self.alpha), "--metric", *self.metrics.split(","),
                   "--min-rounds", str(self.min_rounds), "--max-rounds", str(self.max_rounds), "--undecided-out",
                   str(undecided)]
        if self.allow_missing:
            command += ["--allow-missing", *self.allow_missing.split(",")]
        if out is not None:
            command += ["--out", str(out)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode == 2:
            raise BadInput(f"ddpbench compare --paired refused the rounds: {done.stderr.strip()}")
        if done.returncode not in (0, 1):
            raise Interrupted(f"ddpbench compare --paired exited with {done.returncode}: {done.stderr.strip()}")
        rows = [line.strip() for line in undecided.read_text().splitlines() if line.strip()]
        return done.returncode, done.stdout, rows


def regressions(text: str) -> set[str]:
    """The comparisons `compare --paired`'s text calls a regression, as "ROW (MODE) METRIC"."""
    return {line[2:].split(":", 1)[0] for line in text.splitlines() if line.startswith("- ") and ": REGRESSION" in line}


def row_of(name: str, rows: list[str]) -> str:
    """The sweep row a compared row belongs to: a twin (`ddp-2.torch`) runs with its row."""
    if name in rows:
        return name
    base = name.removesuffix(".torch")
    if base in rows:
        return base
    raise BadInput(f"the comparison names a row '{name}' the sweep file does not have")


# The gate's own files in --out-dir, beside the two builds' round folders; verdict.txt is
# written last, only by a gate that finished.
OUTPUTS = ("baseline-rounds.json", "candidate-rounds.json", "order.jsonl", "paired.md", "undecided.txt", "verdict.txt")


def never_ran_on_baseline(baseline_rounds: Path, expected_not_ok: set[str]) -> list[str]:
    """Rows with no run that finished on the baseline build in any round, but those expected not to
    run here: such a row would pass any candidate."""
    runs = json.loads(baseline_rounds.read_text())["runs"]
    names = dict.fromkeys(r["name"] for r in runs)
    ok = {r["name"] for r in runs if r.get("status") == "ok"}
    return [name for name in names if name not in ok and name not in expected_not_ok]


def run_rounds(baseline: Arm, candidate: Arm, sweep_file: Path, gate: Gate, seed: int, twins: bool, out: Path,
               log=sys.stderr, expected_not_ok: frozenset[str] = frozenset()) -> tuple[int, str]:
    """The adaptive paired gate: the exit code (0 or 1) and the comparison's text."""
    rows = sweep_rows(sweep_file)
    if baseline.label == candidate.label:
        raise BadInput(f"the two builds need two labels (both are '{baseline.label}')")
    out.mkdir(parents=True, exist_ok=True)
    # A folder used before keeps nothing of an earlier gate that could be read as this one's;
    # nothing else in it is touched.
    for stale in (baseline.label, candidate.label):
        shutil.rmtree(out / stale, ignore_errors=True)
    for name in OUTPUTS:
        (out / name).unlink(missing_ok=True)
    files: dict[str, list[tuple[int, Path]]] = {baseline.label: [], candidate.label: []}
    plan = open(out / "order.jsonl", "w")
    to_run = list(rows)
    rounds_of = {row: 0 for row in rows}
    regressed: dict[str, int] = {}  # row (with its mode) -> the round its regression was found
    started = time.monotonic()
    for round_index in range(gate.max_rounds):
        order = [(row, arm) for row, arm in round_order(rows, [baseline.label, candidate.label], seed, round_index)
                 if row in to_run]
        for row, label in order:
            arm = baseline if label == baseline.label else candidate
            began = time.time()
            path = run_row(arm, sweep_file, row, twins, out / label / f"round-{round_index:02d}" / row,
                           candidate=arm is candidate, ran_before=bool(files[label]))
            files[label].append((round_index, path))
            plan.write(json.dumps({"round": round_index, "row": row, "build": label, "started_unix_s": round(began, 3),
                                   "wall_s": round(time.time() - began, 3)}) + "\n")
            plan.flush()
        for row in to_run:
            rounds_of[row] += 1
        print(f"ci-bench: round {round_index + 1} done ({', '.join(f'{r} {a}' for r, a in order)}), "
              f"{time.monotonic() - started:.0f} s", file=log, flush=True)
        if round_index + 1 < gate.min_rounds:
            continue
        merge_rounds(files[baseline.label], out / "baseline-rounds.json")
        merge_rounds(files[candidate.label], out / "candidate-rounds.json")
        rc, text, undecided = gate.compare(out / "baseline-rounds.json", out / "candidate-rounds.json",
                                           out / "undecided.txt", out / "paired.md")
        for name in regressions(text) - set(regressed):
            regressed[name] = round_index + 1
        to_run = sorted({row_of(name, rows) for name in undecided}, key=rows.index)
        if not to_run:
            break
        print(f"ci-bench: undecided after round {round_index + 1}: {', '.join(undecided)}: one more round of "
              f"{', '.join(to_run)}", file=log, flush=True)
    plan.close()
    summary = ", ".join(f"{row} {n}" for row, n in rounds_of.items())
    print(f"ci-bench: rounds run per row: {summary}; {time.monotonic() - started:.0f} s", file=log, flush=True)
    never = never_ran_on_baseline(out / "baseline-rounds.json", expected_not_ok)
    if never:
        raise BadInput(f"the baseline build never ran {', '.join(never)} in any round, so it cannot judge the "
                       f"candidate's (see {out / baseline.label}; rows expected not to run here: "
                       f"{', '.join(sorted(expected_not_ok)) or 'none'})")
    # Each look spends its own share of alpha, so a regression found at any look stands: a later
    # look at other rows (Holm's order changes as they gain rounds) does not take it back.
    taken_back = {name: at for name, at in regressed.items() if name not in regressions(text)}
    if taken_back:
        text = text.rstrip("\n").removesuffix("No regression.").rstrip("\n") + "\n\n" + "".join(
            f"**Regression**: {name} was a regression after round {at} (each look spends its own share of "
            f"alpha, so a regression at any look stands; later rounds of other rows moved Holm's order).\n"
            for name, at in taken_back.items())
        rc = 1
        (out / "paired.md").write_text(text)
    (out / "undecided.txt").write_text("".join(f"{name}\n" for name in undecided
                                               if not any(name == k.split(" (")[0] for k in regressed)))
    (out / "verdict.txt").write_text("regression\n" if rc == 1 else "no regression\n")
    return rc, text


def terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt("terminated")


def abandoned(out: Path, code: int) -> int:
    """A gate that did not finish leaves no verdict of an earlier look to be read as its own."""
    for name in ("paired.md", "undecided.txt", "verdict.txt"):
        try:
            (out / name).unlink(missing_ok=True)
        except OSError:
            pass
    return code


# What `compare --paired` can time (test_accuracy is no timing of two builds).
PAIRED_METRICS = ("train_time_s", "images_per_s", "steady_images_per_s", "step_time_s")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scripts/lib/paired_rounds.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-binary", required=True)
    parser.add_argument("--baseline-label", default="baseline")
    parser.add_argument("--candidate-binary", required=True)
    parser.add_argument("--sweep-file", required=True, type=Path)
    parser.add_argument("--out-dir", required=True, type=Path)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--min-rounds", type=int, default=4)
    parser.add_argument("--max-rounds", type=int, default=12)
    parser.add_argument("--threshold", type=float, default=0.05)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--metric", default="train_time_s")
    parser.add_argument("--allow-missing", default="")
    parser.add_argument("--twins", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--expected-not-ok", default="", help="rows expected not to run on this machine")
    parser.add_argument("sweep_args", nargs="*", help="arguments for both builds' sweeps")
    args = parser.parse_args(argv)
    try:
        if not 1 <= args.min_rounds <= args.max_rounds:
            raise BadInput(f"--min-rounds ({args.min_rounds}) must be 1 or more and at most --max-rounds "
                           f"({args.max_rounds})")
        if args.min_rounds < 2:
            raise BadInput("--min-rounds must be 2 or more: one pair has no spread to test")
        if not (math.isfinite(args.threshold) and 0 <= args.threshold < 1):
            raise BadInput(f"--threshold must be a fraction in [0, 1) (got {args.threshold})")
        if not 0 < args.alpha < 1:
            raise BadInput(f"--alpha must lie in (0, 1) (got {args.alpha})")
        metrics = [m for m in args.metric.split(",") if m]
        unknown = [m for m in metrics if m not in PAIRED_METRICS]
        if not metrics or unknown or len(set(metrics)) != len(metrics):
            raise BadInput(f"--metric: '{args.metric}' must name each of {', '.join(PAIRED_METRICS)} at most once "
                           f"(test_accuracy is no timing of two builds)")
        rows = sweep_rows(args.sweep_file)
        known = set(rows) | {f"{row}.torch" for row in rows}
        strangers = [n for n in args.allow_missing.split(",") if n and n not in known]
        if strangers:
            raise BadInput(f"--allow-missing: the sweep file has no row {', '.join(strangers)} (rows: {', '.join(rows)})")
        for flag, path in (("--baseline-binary", args.baseline_binary), ("--candidate-binary", args.candidate_binary)):
            if not os.access(path, os.X_OK):
                raise BadInput(f"{flag}: '{path}' is not an executable")
        baseline = Arm(args.baseline_label, args.baseline_binary, tuple(args.sweep_args))
        candidate = Arm("candidate", args.candidate_binary, tuple(args.sweep_args))
        gate = Gate(args.candidate_binary, args.threshold, args.alpha, args.metric, args.min_rounds, args.max_rounds,
                    args.allow_missing)
        args.out_dir.mkdir(parents=True, exist_ok=True)
        lock = open(args.out_dir / ".ci-bench.lock", "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BadInput(f"another gate is writing into --out-dir {args.out_dir}") from None
        signal.signal(signal.SIGTERM, terminated)
        rc, text = run_rounds(baseline, candidate, args.sweep_file, gate, args.seed, args.twins, args.out_dir,
                              expected_not_ok=frozenset(n for n in args.expected_not_ok.split(",") if n))
    except BadInput as error:
        print(f"scripts/ci-bench: {error}", file=sys.stderr)
        return abandoned(args.out_dir, 2)
    except OSError as error:  # --out-dir or a file in it cannot be written
        print(f"scripts/ci-bench: --out-dir {args.out_dir}: {error}", file=sys.stderr)
        return abandoned(args.out_dir, 2)
    except BrokenCandidate as error:
        print(f"scripts/ci-bench: {error}: the candidate fails the gate", file=sys.stderr)
        return abandoned(args.out_dir, 1)
    except (Interrupted, KeyboardInterrupt) as error:
        print(f"scripts/ci-bench: {str(error) or 'interrupted'}", file=sys.stderr)
        return abandoned(args.out_dir, 130)
    print(text, end="")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

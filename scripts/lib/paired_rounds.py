"""Paired rounds of two builds (scripts/ci-bench --against): each round runs every row once on
each build, back to back, the builds in a random order for each row and the rows in a random
order (randomized multiple interleaved trials: Abedi & Brecht, ICPE 2017), so whatever the
machine does to one build in a round it does to the other. Round r of a row is repetition r of
that build's rounds file, which `ddpbench compare --paired` reads. After --min-rounds rounds of
every row, each further round runs only the rows the comparison still calls undecided, up to
--max-rounds. The order of round r depends only on the seed and r, so a seed reproduces it.

The judge is the baseline build: it ran the same rounds, so its `ddpbench compare --paired` (and
its PyTorch floor) decides, and the candidate's own compare must agree with it; a candidate that
breaks compare cannot pass its own gate.

Exit codes: 0 no regression, 1 a regression (found at any look, or below the floor), a candidate
whose sweep died, refused an input the baseline build accepted, or whose compare disagreed with
the baseline build's, 2 bad input, a baseline build that cannot run the rows, or a judge that
cannot judge, 130 interrupted. verdict.txt ("regression", "no regression", "cannot judge") is
written last, after the floor.

What it removes in --out-dir: only its own files (OUTPUTS, by those names) and the two builds'
round folders it made (each holds its marker, ROUNDS_MARKER); a baseline/ or candidate/ folder
without the marker is refused before anything runs.
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
from typing import Callable

import lockstep


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
    """The candidate build's sweep died or wrote nothing readable, or refused an input the
    baseline build accepts: the gate fails (exit 1)."""


class Refused(BadInput):
    """A build's sweep refused its input (exit 2): bad input, unless the other build accepts it."""


def run_sweep(command: list[str], log_path: Path) -> int:
    """The sweep in its own process group, so that an interrupted gate stops it and the rows it
    started rather than leave them loading the machine."""
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return process.wait()
        except BaseException:
            lockstep.stop_group(process)
            raise


def sweep_command(arm: Arm, sweep_file: Path, row: str, twins: bool, folder: Path) -> list[str]:
    """One row (and its PyTorch twin) on one build, its results in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    command = [arm.binary, "sweep", "--file", str(sweep_file), "--mode", "faithful", "--table", "tutorial", "--rows",
               row, "--repeat", "1", "--out-dir", str(folder), *arm.sweep_args, *arm.row_args.get(row, ())]
    return command + (["--reference"] if twins else [])


def run_row(arm: Arm, sweep_file: Path, row: str, twins: bool, folder: Path, candidate: bool = False,
            ran_before: bool = False) -> Path:
    """One row (and its PyTorch twin) on one build; its result file (checked_result)."""
    rc = run_sweep(sweep_command(arm, sweep_file, row, twins, folder), folder / "sweep.log")
    return checked_result(arm, row, folder, rc, candidate, ran_before)


def checked_result(arm: Arm, row: str, folder: Path, rc: int, candidate: bool = False, ran_before: bool = False,
                   culprits: tuple[str, ...] = (), stopped: str = "") -> Path:
    """The result file of one build's sweep of `row` that exited with `rc`. A row that fails still
    writes its row (exit 1): the comparison fails it closed. A sweep that itself dies or writes
    no readable result fails the gate when it is the candidate's, and cannot be judged when it
    is the baseline build's; `culprits` (a lockstep run's) say why, where known. A build the
    lockstep coordinator stopped (`stopped`: why) failed, whatever its exit status says."""
    results = folder / "results.json"
    where = f"the {arm.label} build's sweep of row {row} (log: {folder / 'sweep.log'})"
    if stopped:
        raise build_failed(candidate, f"{where} was stopped by the lockstep coordinator: {stopped}")
    if rc == 2 and candidate and ran_before:
        raise BrokenCandidate(f"{where} refused the input it ran in an earlier round")
    if rc == 2:
        raise Refused(f"{where} refused its input")
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
        raise build_failed(candidate, f"{where} {problem}" + "".join(f"; {culprit}" for culprit in culprits))
    return results


def build_failed(candidate: bool, what: str) -> Exception:
    """A build's run that cannot be judged: the candidate's fails the gate, the baseline build's
    leaves it unable to judge."""
    return BrokenCandidate(what) if candidate else BadInput(what)


def lockstep_row(sides: list[tuple[Arm, Path]], sweep_file: Path, row: str, twins: bool, seed: int, run: str,
                 record: Path, turn_timeout_s: float = 300, start_timeout_s: float = 900) -> lockstep.LockstepRun:
    """`row` (and its twin) on each build at once, taking turns (lockstep.py): each build's sweep
    writes into its folder, the coordinator's record to `record`."""
    participants = [lockstep.Participant(arm.label, tuple(sweep_command(arm, sweep_file, row, twins, folder)),
                                         folder / "sweep.log") for arm, folder in sides]
    return lockstep.run_lockstep(participants, seed, run, record, turn_timeout_s, start_timeout_s)


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


INTERRUPTED = (-signal.SIGINT, -signal.SIGTERM, 130, 143)


@dataclass(frozen=True)
class Compared:
    """One `ddpbench compare` run: its exit code, what it said, and the rows its --undecided-out
    named (none where it wrote no such file)."""
    rc: int
    stdout: str
    stderr: str
    undecided: tuple[str, ...] = ()

    def printed(self, start: str) -> bool:
        return any(line.startswith(start) for line in self.stdout.splitlines())

    @property
    def cannot_judge(self) -> bool:
        """Exit 2 with a table ending in "Cannot judge": a verdict, not a refused input (which
        prints nothing on stdout)."""
        return self.rc == 2 and self.printed("Cannot judge")

    @property
    def verdict(self) -> str:
        """regression, no regression, undecided (rows to run again below the cap: exit 0 with
        undecided rows from an older compare, exit 2 and "Undecided below the cap" from a newer),
        cannot judge, refused (exit 2, no table), interrupted, or died."""
        if self.rc == 1:
            return "regression"
        if self.rc == 0:
            return "undecided" if self.undecided else "no regression"
        if self.rc == 2:
            return ("cannot judge" if self.printed("Cannot judge") else
                    "undecided" if self.printed("Undecided below the cap") else "refused")
        return "interrupted" if self.rc in INTERRUPTED else "died"

    def last_said(self) -> str:
        said = self.stderr.strip().splitlines()[-1:] or self.stdout.strip().splitlines()[-1:] or [""]
        return said[0]


def run_compare(command: list[str], undecided: Path | None = None) -> Compared:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    rows: tuple[str, ...] = ()
    if undecided is not None:
        try:
            rows = tuple(line.strip() for line in undecided.read_text().splitlines() if line.strip())
        except OSError:
            pass
    return Compared(done.returncode, done.stdout, done.stderr, rows)


@dataclass(frozen=True)
class Ruling:
    """What a comparison run by both builds decides: rc 0, 1 or 2 (cannot judge), the judge's
    text, where the candidate's compare disagreed, the line that says so (rc 1), and where the
    gate cannot judge for another reason than the judge's own, why (note)."""
    rc: int
    text: str
    judged: int  # the judge's own exit code
    disagreement: str = ""
    note: str = ""


def rule(what: str, judge: Compared, accused: Compared, final: bool = True) -> Ruling:
    """The baseline build's compare decides; the candidate's must say the same. A judge that
    refuses the input or dies decides nothing: that is no fault of the candidate's. "Undecided"
    is one answer whichever way a build says it (an older compare exits 0 with undecided rows, a
    newer one 2). At the final look (`final`), undecided rows cannot be judged, and a candidate
    whose compare prints its table and cannot judge (a newer rule than the judge's) leaves the
    gate unable to judge; a regression the judge found stands whatever the candidate says."""
    judged, said = judge.verdict, accused.verdict
    if judged == "refused":
        raise BadInput(f"the baseline build's `{what}` refused the rounds: {judge.stderr.strip()}")
    if judged == "interrupted":
        raise Interrupted(f"the baseline build's `{what}` was interrupted (exit {judge.rc})")
    if judged == "died":
        raise BadInput(f"the baseline build's `{what}` exited with {judge.rc}, so nothing can judge the "
                       f"candidate: {judge.stderr.strip()}")
    if judged == "cannot judge":
        return Ruling(2, judge.stdout, judge.rc)
    last = accused.last_said()
    disagreement = (f"**The candidate fails**: its `{what}` disagreed with the baseline build's (baseline build: "
                    f"exit {judge.rc}, candidate: exit {accused.rc}{': ' + last if last else ''}).\n")
    if judged == "regression":
        return Ruling(1, judge.stdout, judge.rc, "" if said == "regression" else disagreement)
    if said in ("regression", "refused", "interrupted", "died"):
        return Ruling(1, judge.stdout, judge.rc, disagreement)
    if said == "cannot judge" or (final and said == "undecided" and accused.rc == 2):
        return Ruling(2, judge.stdout, judge.rc, note=(
            f"Cannot judge: the candidate's `{what}` printed its table and cannot judge what the baseline build's "
            f"judged (baseline build: exit {judge.rc}, candidate: exit {accused.rc}{': ' + last if last else ''}); "
            f"a newer rule than the judge's, so neither build's answer stands.\n"))
    if final and judged == "undecided":
        return Ruling(2, judge.stdout, judge.rc, note=(
            f"Cannot judge: rows still undecided after the last round ({', '.join(judge.undecided) or 'named above'}); "
            f"this is no pass.\n"))
    return Ruling(0, judge.stdout, judge.rc)


@dataclass
class Gate:
    """The comparison's settings, passed to `ddpbench compare --paired` of both builds: the
    baseline build's (the judge) and the candidate's."""
    judge: str
    accused: str
    threshold: float
    alpha: float
    metrics: str
    min_rounds: int
    max_rounds: int
    allow_missing: str = ""
    coarse: str = ""  # metrics judged on the rounds the others ask for (compare --coarse-metric)

    def command(self, binary: str, baseline: Path, candidate: Path, undecided: Path, out: Path) -> list[str]:
        command = [binary, "compare", str(baseline), str(candidate), "--paired", "--threshold",
                   str(self.threshold), "--alpha", str(self.alpha), "--metric", *self.metrics.split(","),
                   "--min-rounds", str(self.min_rounds), "--max-rounds", str(self.max_rounds), "--undecided-out",
                   str(undecided), "--out", str(out)]
        if self.allow_missing:
            command += ["--allow-missing", *self.allow_missing.split(",")]
        if self.coarse:
            command += ["--coarse-metric", *self.coarse.split(",")]
        return command

    def compare(self, baseline: Path, candidate: Path, undecided: Path, out: Path,
                at_cap: bool = False) -> tuple[Ruling, list[str]]:
        """This look's ruling and the judge's undecided rows (the rounds to run next, whatever
        the judge's exit code: 0 from an older compare, 2 from a newer). The look is final at
        the cap or where the judge has no row undecided. The candidate's compare writes beside
        the judge's (candidate-*), never over them."""
        accused_undecided = undecided.with_name("candidate-" + undecided.name)
        undecided.unlink(missing_ok=True)
        accused_undecided.unlink(missing_ok=True)
        judge = run_compare(self.command(self.judge, baseline, candidate, undecided, out), undecided)
        # The same binary on both sides (scripts/gate-power's trials) would only say it twice.
        accused = judge if self.accused == self.judge else run_compare(self.command(
            self.accused, baseline, candidate, accused_undecided, out.with_name("candidate-" + out.name)),
            accused_undecided)
        ruling = rule("compare --paired", judge, accused, final=at_cap or not judge.undecided)
        if not undecided.is_file():
            raise BadInput(f"the baseline build's `compare --paired` wrote no undecided rows ({undecided})")
        return ruling, list(judge.undecided)


@dataclass(frozen=True)
class Floor:
    """Each candidate row against its PyTorch twin of the same rounds (the candidate's rounds
    file against itself, so nothing but the floor can fail), judged by both builds."""
    judge: str
    accused: str
    floor: float
    metrics: str

    def command(self, binary: str, rounds: Path) -> list[str]:
        return [binary, "compare", str(rounds), str(rounds), "--normalize-by", "twin", "--metric",
                *self.metrics.split(","), "--min-vs-pytorch", str(self.floor)]

    def check(self, rounds: Path) -> tuple[Ruling, str]:
        """The ruling and its report: the twin lines of the judge's table and one verdict line."""
        ruling = rule("compare --min-vs-pytorch", run_compare(self.command(self.judge, rounds)),
                      run_compare(self.command(self.accused, rounds)))
        lines = ruling.text.splitlines()
        start = next((i for i, line in enumerate(lines) if "PyTorch" in line), len(lines))
        kept = [line for line in lines[start:] if not line.startswith(("No regression", "**Regression"))]
        verdict = {0: "Every row at or above the floor.",
                   1: f"**Below the floor**: a row is slower than {self.floor}x its PyTorch twin beyond the noise.",
                   2: "Cannot judge the floor (above)."}[ruling.judged if ruling.rc != 2 else 2]
        text = (f"ci-bench: each row of the candidate against its PyTorch twin (floor {self.floor}x)\n"
                + "".join(f"{line}\n" for line in kept) + verdict + "\n" + ruling.disagreement + ruling.note)
        return ruling, text


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
# written last, only by a gate that finished, the floor included. These names (and their .tmp
# while written) are the only files it removes there, besides round folders it made.
OUTPUTS = ("baseline-rounds.json", "candidate-rounds.json", "order.jsonl", "paired.md", "undecided.txt",
           "candidate-paired.md", "candidate-undecided.txt", "floor.md", "verdict.txt")
VERDICTS = {0: "no regression", 1: "regression", 2: "cannot judge"}
# Written into each build's round folder (--out-dir/LABEL) the gate makes: only a folder holding
# it is ever removed, so a user's own baseline/ or candidate/ there is refused, never emptied.
ROUNDS_MARKER = ".ddpbench-ci-bench-rounds"


def never_ran_on_baseline(baseline_rounds: Path, expected_not_ok: set[str]) -> list[tuple[str, str]]:
    """Rows with no run that finished on the baseline build in any round, but those expected not to
    run here (such a row would pass any candidate), each with the reason its first run gave."""
    runs = json.loads(baseline_rounds.read_text())["runs"]
    reasons: dict[str, str] = {}
    for r in runs:
        reasons.setdefault(r["name"], r.get("reason") or r.get("status", ""))
    ok = {r["name"] for r in runs if r.get("status") == "ok"}
    return [(name, reason) for name, reason in reasons.items() if name not in ok and name not in expected_not_ok]


def out_dir_refusal(out: Path, labels: tuple[str, ...]) -> str:
    """Why the gate may not write into --out-dir `out` (or ""): a path through a file, a round
    folder (out/LABEL) it did not make (no ROUNDS_MARKER: the user's own), or one of its own
    file names taken by something that is not a file."""
    existing = out
    while not existing.exists() and not existing.is_symlink() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"--out-dir {out}: {existing} is not a folder"
    if not out.is_dir():
        return ""
    strangers = [str(out / label) for label in labels
                 if (out / label).exists() or (out / label).is_symlink()
                 if (out / label).is_symlink() or not (out / label / ROUNDS_MARKER).is_file()]
    if strangers:
        it = "it" if len(strangers) == 1 else "them"
        return (f"--out-dir {out}: {' and '.join(strangers)} exist{'s' if len(strangers) == 1 else ''} without the "
                f"marker {ROUNDS_MARKER}, so scripts/ci-bench did not make {it} (or a gate older than the marker "
                f"did) and will not remove {it}: choose another --out-dir, or move {it} away")
    taken = [str(out / name) for name in OUTPUTS if (out / name).exists() and not (out / name).is_file()]
    if taken:
        return f"--out-dir {out}: {', '.join(taken)} is not a file, and the gate writes its own file there"
    return ""


def clear_outputs(out: Path, labels: tuple[str, ...]) -> None:
    """A folder used before keeps nothing of an earlier gate that could be read as this one's:
    the round folders it made (their marker says so; any other is refused) and its own files;
    nothing else in it is touched. Each round folder is made again with its marker."""
    refusal = out_dir_refusal(out, labels)
    if refusal:
        raise BadInput(refusal)
    for label in labels:
        if (out / label / ROUNDS_MARKER).is_file():
            shutil.rmtree(out / label)
        (out / label).mkdir()
        (out / label / ROUNDS_MARKER).write_text("made by scripts/ci-bench --against: removed by the next gate\n")
    for name in OUTPUTS:
        (out / name).unlink(missing_ok=True)


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def require_turns_taken(arm: Arm, results: Path, candidate: bool) -> None:
    """A row that ran in a lockstep run took turns, as its lockstep_wait_s says. A build that did not
    ran beside the other, and nothing it timed can be compared: the baseline build's is older than
    lockstep (cannot judge: --round-level compares it), the candidate's broke it (it fails)."""
    for run in json.loads(results.read_text())["runs"]:
        if run.get("status") == "ok" and run.get("lockstep_wait_s") is None:
            said = (f"the {arm.label} build's row {run.get('name')} ran without taking turns (no lockstep_wait_s in "
                    f"{results}), beside the other build: ")
            raise build_failed(candidate, said + ("the candidate broke lockstep" if candidate else
                                                  "a build older than lockstep; --round-level (scripts/ci-bench) "
                                                  "compares it back to back"))


@dataclass
class Rounds:
    """The rounds run so far: each build's result files, and how many rounds each row had."""
    baseline: Arm
    candidate: Arm
    sweep_file: Path
    twins: bool
    out: Path
    files: dict[str, list[tuple[int, Path]]] = field(default_factory=dict)
    accepted: dict[str, int] = field(default_factory=dict)  # row -> the round the baseline build first ran it
    turn_timeout_s: float = 300.0
    culprits: list[str] = field(default_factory=list)  # what the lockstep coordinator saw go wrong, by round

    def take(self, arm: Arm, row: str, round_index: int, result: Callable[[bool], Path]) -> None:
        """One build's result file of `row` in a round, as `result(ran_before)` gives it (checked);
        a candidate's refusal is its failure where the baseline build accepts the row."""
        try:
            path = result(bool(self.files.setdefault(arm.label, [])))
        except Refused as refusal:
            if arm is self.candidate:
                raise self.candidate_refused(row, refusal) from None
            raise
        if arm is self.baseline:
            self.accepted.setdefault(row, round_index)
        self.files[arm.label].append((round_index, path))

    def run(self, order: list[tuple[str, str]], round_index: int, plan) -> None:
        baseline, candidate = self.baseline, self.candidate
        for row, label in order:
            arm = baseline if label == baseline.label else candidate
            began = time.time()
            self.take(arm, row, round_index, lambda ran_before: run_row(
                arm, self.sweep_file, row, self.twins, self.out / label / f"round-{round_index:02d}" / row,
                candidate=arm is candidate, ran_before=ran_before))
            plan.write(json.dumps({"round": round_index, "row": row, "build": label, "started_unix_s": round(began, 3),
                                   "wall_s": round(time.time() - began, 3)}) + "\n")
            plan.flush()

    def run_lockstep(self, rows: list[str], round_index: int, seed: int, plan) -> None:
        """Round `round_index` in lockstep: each row (and its twin) on both builds at once, taking
        turns step by step (lockstep.py), fresh processes each round; the coordinator's record
        (each turn's build and seconds, and any culprit) in the baseline build's folder."""
        arms = (self.baseline, self.candidate)
        for row in rows:
            began = time.time()
            folders = {arm.label: self.out / arm.label / f"round-{round_index:02d}" / row for arm in arms}
            ran = lockstep_row([(arm, folders[arm.label]) for arm in arms], self.sweep_file, row, self.twins, seed,
                               f"{round_index}:{row}", folders[self.baseline.label] / "lockstep.json",
                               self.turn_timeout_s, self.turn_timeout_s)
            culprits = tuple(c for session in ran.record["sessions"] for c in session["culprits"])
            culprits += tuple(ran.record["problems"])
            self.culprits += [f"round {round_index + 1}, {row}: {culprit}" for culprit in culprits]
            for arm in arms:  # the baseline build's first: whether it accepts the row decides a refusal
                def result(ran_before: bool, arm: Arm = arm) -> Path:
                    path = checked_result(arm, row, folders[arm.label], ran.returncodes[arm.label],
                                          candidate=arm is self.candidate, ran_before=ran_before, culprits=culprits,
                                          stopped=ran.record["stopped"].get(arm.label, ""))
                    require_turns_taken(arm, path, arm is self.candidate)
                    return path
                self.take(arm, row, round_index, result)
            firsts = {s["row"]: s["first"] for s in ran.record["sessions"]}
            plan.write(json.dumps({"round": round_index, "row": row, "build": "lockstep", "first": firsts,
                                   "culprits": list(culprits), "started_unix_s": round(began, 3),
                                   "wall_s": round(time.time() - began, 3)}) + "\n")
            plan.flush()

    def candidate_refused(self, row: str, refusal: Refused) -> Exception:
        """The candidate's sweep refused a row: its failure where the baseline build accepts that
        row's input (it ran it in a round, or runs it now), bad input where both refuse it."""
        if row in self.accepted:
            return BrokenCandidate(f"{refusal}, which the baseline build accepted (round {self.accepted[row] + 1})")
        folder = self.out / self.baseline.label / "refusal-check" / row
        try:
            run_row(self.baseline, self.sweep_file, row, self.twins, folder)
        except Refused as too:
            return BadInput(f"{refusal}, and {too} too: neither build accepts it")
        return BrokenCandidate(f"{refusal}, which the baseline build accepted (its sweep of the same row, run to "
                               f"tell: {folder / 'sweep.log'})")

    def merge(self) -> tuple[Path, Path]:
        merge_rounds(self.files[self.baseline.label], self.out / "baseline-rounds.json")
        merge_rounds(self.files[self.candidate.label], self.out / "candidate-rounds.json")
        return self.out / "baseline-rounds.json", self.out / "candidate-rounds.json"


def stood(text: str, regressed: dict[str, int]) -> tuple[str, bool]:
    """Each look spends its own share of alpha, so a regression found at any look stands: a later
    look at other rows (Holm's order changes as they gain rounds) does not take it back."""
    taken_back = {name: at for name, at in regressed.items() if name not in regressions(text)}
    if not taken_back:
        return text, False
    lines = text.rstrip("\n").splitlines()
    if lines and lines[-1].startswith("No regression"):
        lines.pop()
    return "\n".join(lines).rstrip("\n") + "\n\n" + "".join(
        f"**Regression**: {name} was a regression after round {at} (each look spends its own share of "
        f"alpha, so a regression at any look stands; later rounds of other rows moved Holm's order).\n"
        for name, at in taken_back.items()), True


def run_rounds(baseline: Arm, candidate: Arm, sweep_file: Path, gate: Gate, seed: int, twins: bool, out: Path,
               log=sys.stderr, expected_not_ok: frozenset[str] = frozenset(),
               floor: Floor | None = None, in_lockstep: bool = True, turn_timeout_s: float = 300.0) -> tuple[int, str]:
    """The adaptive paired gate, then the floor: the exit code (0, 1, or 2 where the judge cannot
    judge) and the report."""
    rows = sweep_rows(sweep_file)
    if baseline.label == candidate.label:
        raise BadInput(f"the two builds need two labels (both are '{baseline.label}')")
    out.mkdir(parents=True, exist_ok=True)
    clear_outputs(out, (baseline.label, candidate.label))
    rounds = Rounds(baseline, candidate, sweep_file, twins, out, turn_timeout_s=turn_timeout_s)
    plan = open(out / "order.jsonl", "w")
    to_run = list(rows)
    rounds_of = {row: 0 for row in rows}
    regressed: dict[str, int] = {}  # row (with its mode) -> the round its regression was found
    started = time.monotonic()
    for round_index in range(gate.max_rounds):
        order = [(row, arm) for row, arm in round_order(rows, [baseline.label, candidate.label], seed, round_index)
                 if row in to_run]
        if in_lockstep:
            rounds.run_lockstep(list(dict.fromkeys(row for row, _ in order)), round_index, seed, plan)
        else:
            rounds.run(order, round_index, plan)
        for row in to_run:
            rounds_of[row] += 1
        ran = (f"in lockstep: {', '.join(dict.fromkeys(r for r, _ in order))}" if in_lockstep
               else ", ".join(f"{r} {a}" for r, a in order))
        print(f"ci-bench: round {round_index + 1} done ({ran}), {time.monotonic() - started:.0f} s", file=log, flush=True)
        if round_index + 1 < gate.min_rounds:
            continue
        ruling, undecided = gate.compare(*rounds.merge(), out / "undecided.txt", out / "paired.md",
                                         at_cap=round_index + 1 >= gate.max_rounds)
        if ruling.disagreement:
            break  # the candidate fails whatever more rounds would say
        for name in regressions(ruling.text) - set(regressed):
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
        why = "; ".join(f"{name}: {reason}" for name, reason in never if reason)
        raise BadInput(f"the baseline build never ran {', '.join(name for name, _ in never)} in any round"
                       f"{f' ({why})' if why else ''}, so it cannot judge the "
                       f"candidate's (see {out / baseline.label}; rows expected not to run here: "
                       f"{', '.join(sorted(expected_not_ok)) or 'none'})")
    rc, text = ruling.rc, ruling.text + ruling.disagreement + ruling.note
    if rounds.culprits:
        text += "\nWhat the lockstep coordinator saw:\n" + "".join(f"- {line}\n" for line in rounds.culprits)
    text, taken_back = stood(text, regressed)
    if taken_back:
        rc = 1
        (out / "paired.md").write_text(text)
    if ruling.disagreement or ruling.note:
        (out / "paired.md").write_text(text)
    (out / "undecided.txt").write_text("".join(f"{name}\n" for name in undecided
                                               if not any(name == k.split(" (")[0] for k in regressed)))
    if floor is not None:
        floor_ruling, floor_text = floor.check(out / "candidate-rounds.json")
        (out / "floor.md").write_text(floor_text)
        text = text.rstrip("\n") + "\n\n" + floor_text
        rc = whole_gate(rc, floor_ruling.rc)
    write_atomically(out / "verdict.txt", VERDICTS[rc] + "\n")
    return rc, text


def whole_gate(comparison: int, floor: int) -> int:
    """A regression anywhere fails the gate (it was found, whatever else could not be judged);
    otherwise any part that cannot judge leaves the whole gate unable to."""
    if 1 in (comparison, floor):
        return 1
    return 2 if 2 in (comparison, floor) else 0


def terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt("terminated")


def abandoned(out: Path | None, code: int) -> int:
    """A gate that did not finish leaves no verdict of an earlier look to be read as its own. Only
    a gate that holds --out-dir's lock (`out`; else None) removes anything: one refused before
    (a setting, a folder not its own, another gate at work) touches nothing."""
    if out is None or not out.is_dir():
        return code
    for name in ("paired.md", "undecided.txt", "floor.md", "verdict.txt", "verdict.txt.tmp"):
        try:
            (out / name).unlink(missing_ok=True)
        except OSError:
            pass
    return code


# What `compare --paired` can time (test_accuracy is no timing of two builds); what `compare`
# accepts at all (the floor's metrics); the most rounds `compare --paired` takes.
PAIRED_METRICS = ("train_time_s", "images_per_s", "steady_images_per_s", "step_time_s")
METRICS = PAIRED_METRICS + ("test_accuracy",)
MOST_ROUNDS = 100


def integer(flag: str, text: str) -> int:
    if not text.isdigit():
        raise BadInput(f"{flag} must be a non-negative integer (got '{text}')")
    return int(text)


def number(flag: str, text: str, low: float, high: float, interval: str) -> float:
    """`text` as a finite number within (low, high) or [low, high) as `interval` says."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    inside = (low <= value if interval.startswith("[") else low < value) and value < high
    if not (math.isfinite(value) and inside):
        raise BadInput(f"{flag} must be a number in {interval} (got '{text}')")
    return value


def metric_list(flag: str, text: str, allowed: tuple[str, ...], why: str) -> str:
    metrics = [m for m in text.split(",") if m]
    if not metrics or any(m not in allowed for m in metrics) or len(set(metrics)) != len(metrics):
        raise BadInput(f"{flag}: '{text}' must name each of {', '.join(allowed)} at most once{why}")
    return ",".join(metrics)


@dataclass(frozen=True)
class Settings:
    """Every setting of a gate, checked before anything is built or run."""
    seed: int
    min_rounds: int
    max_rounds: int
    threshold: float
    alpha: float
    metrics: str
    floor: float | None
    floor_metrics: str
    allow_missing: str
    rows: tuple[str, ...]
    expected_not_ok: frozenset[str] = frozenset()
    turn_timeout_s: float = 300.0
    coarse: str = ""


def row_names(flag: str, text: str, rows: list[str]) -> list[str]:
    """The names in `text` (comma-separated), each a row of the sweep file or its twin (ROW.torch)."""
    known = set(rows) | {f"{row}.torch" for row in rows}
    names = [n for n in text.split(",") if n]
    strangers = [n for n in names if n not in known]
    if strangers:
        raise BadInput(f"{flag}: the sweep file has no row {', '.join(strangers)} (rows: {', '.join(rows)}, "
                       f"and each one's twin ROW.torch)")
    return names


def check_settings(args: argparse.Namespace) -> Settings:
    min_rounds, max_rounds = integer("--min-rounds", args.min_rounds), integer("--max-rounds", args.max_rounds)
    if min_rounds < 2:
        raise BadInput("--min-rounds must be 2 or more: one pair has no spread to test")
    if not min_rounds <= max_rounds <= MOST_ROUNDS:
        raise BadInput(f"--min-rounds ({min_rounds}) must be at most --max-rounds ({max_rounds}), and --max-rounds "
                       f"at most {MOST_ROUNDS} (what `ddpbench compare --paired` takes)")
    threshold = number("--threshold", args.threshold, 0, 1, "[0, 1)")
    alpha = number("--alpha", args.alpha, 0, 1, "(0, 1)")
    metrics = metric_list("--metric", args.metric, PAIRED_METRICS, " (test_accuracy is no timing of two builds)")
    floor = None
    if args.twins:
        if args.floor is None:
            raise BadInput("--floor is needed with twins (--no-twins leaves the floor out)")
        floor = number("--floor (--min-vs-pytorch)", args.floor, 0, math.inf, "(0, inf)")
    floor_metrics = metric_list("--floor-metric", args.floor_metric, METRICS, "")
    rows = sweep_rows(args.sweep_file)
    row_names("--allow-missing", args.allow_missing, rows)
    # Names the user gave must be rows; the committed default names rows of the committed sweep
    # file, so with another sweep file it keeps only the rows that file has.
    expected = set(row_names("--expected-not-ok", args.expected_not_ok, rows))
    known = set(rows) | {f"{row}.torch" for row in rows}
    expected |= {n for n in args.expected_not_ok_default.split(",") if n in known}
    if args.out_dir is not None:
        refusal = out_dir_refusal(args.out_dir, (args.baseline_label, "candidate"))
        if refusal:
            raise BadInput(refusal)
    turn_timeout_s = number("--turn-timeout-s", args.turn_timeout_s, 0, 86400.0001, "(0, 86400]")
    coarse = [m for m in args.coarse_metric.split(",") if m]
    if any(m not in metrics.split(",") for m in coarse) or len(set(coarse)) != len(coarse):
        raise BadInput(f"--coarse-metric: '{args.coarse_metric}' must name metrics of --metric ({metrics}), each once")
    return Settings(integer("--seed", args.seed), min_rounds, max_rounds, threshold, alpha, metrics, floor,
                    floor_metrics, args.allow_missing, tuple(rows), frozenset(expected), turn_timeout_s,
                    ",".join(coarse))


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scripts/lib/paired_rounds.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="check the settings and exit (0 or 2): scripts/ci-bench, before it builds anything")
    parser.add_argument("--baseline-binary")
    parser.add_argument("--baseline-label", default="baseline")
    parser.add_argument("--candidate-binary")
    parser.add_argument("--sweep-file", required=True, type=Path)
    parser.add_argument("--out-dir", type=Path)
    parser.add_argument("--seed", default="0")
    parser.add_argument("--min-rounds", default="4")
    parser.add_argument("--max-rounds", default="12")
    parser.add_argument("--threshold", default="0.05")
    parser.add_argument("--alpha", default="0.05")
    parser.add_argument("--metric", default="train_time_s")
    parser.add_argument("--floor", help="--min-vs-pytorch: each candidate row against its twin (with twins)")
    parser.add_argument("--floor-metric", default="train_time_s,steady_images_per_s")
    parser.add_argument("--allow-missing", default="")
    parser.add_argument("--twins", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--lockstep", action=argparse.BooleanOptionalAction, default=True,
                        help="both builds at once, taking turns step by step (default); --no-lockstep: back to back")
    parser.add_argument("--coarse-metric", default="",
                        help="metrics of --metric judged on the rounds the others ask for (compare --coarse-metric)")
    parser.add_argument("--turn-timeout-s", default="300",
                        help="lockstep: a rank that has not finished its step this long after its turn hangs")
    parser.add_argument("--expected-not-ok", default="",
                        help="rows expected not to run on this machine (each a row of the sweep file or its twin)")
    parser.add_argument("--expected-not-ok-default", default="",
                        help="the committed default of --expected-not-ok: only the names that are rows here are kept")
    parser.add_argument("sweep_args", nargs="*", help="arguments for both builds' sweeps")
    return parser


def check_binaries(args: argparse.Namespace) -> None:
    for flag, path in (("--baseline-binary", args.baseline_binary), ("--candidate-binary", args.candidate_binary)):
        if not path or not os.access(path, os.X_OK):
            raise BadInput(f"{flag}: '{path or ''}' is not an executable")
    if args.out_dir is None:
        raise BadInput("--out-dir is needed")


def lock_out_dir(out: Path):
    out.mkdir(parents=True, exist_ok=True)
    lock = open(out / ".ci-bench.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise BadInput(f"another gate is writing into --out-dir {out}") from None
    return lock


def judged_as_allowed(args: argparse.Namespace, settings: Settings) -> list[str]:
    """The rows compare may find missing or not run: --allow-missing's, and those expected not to
    run on this machine (a baseline build that cannot run them cannot judge them, and need not:
    the row's own rounds say so), of the rows the rounds run (a twin only with the twins)."""
    runs = set(settings.rows) | ({f"{row}.torch" for row in settings.rows} if args.twins else set())
    names = [n for n in settings.allow_missing.split(",") if n]
    expected = [n for n in sorted(settings.expected_not_ok) if n in runs and n not in names]
    return names + expected


def gate_of(args: argparse.Namespace, settings: Settings) -> tuple[Arm, Arm, Gate, Floor | None]:
    baseline = Arm(args.baseline_label, args.baseline_binary, tuple(args.sweep_args))
    candidate = Arm("candidate", args.candidate_binary, tuple(args.sweep_args))
    gate = Gate(args.baseline_binary, args.candidate_binary, settings.threshold, settings.alpha, settings.metrics,
                settings.min_rounds, settings.max_rounds, ",".join(judged_as_allowed(args, settings)), settings.coarse)
    floor = None if settings.floor is None else Floor(args.baseline_binary, args.candidate_binary, settings.floor,
                                                      settings.floor_metrics)
    return baseline, candidate, gate, floor


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    lock = None  # held: --out-dir is this gate's, and what it leaves there on failure is removed
    try:
        settings = check_settings(args)
        if args.check:
            return 0
        check_binaries(args)
        baseline, candidate, gate, floor = gate_of(args, settings)
        if baseline.label == candidate.label:
            raise BadInput(f"the two builds need two labels (both are '{baseline.label}')")
        lock = lock_out_dir(args.out_dir)  # held until exit
        signal.signal(signal.SIGTERM, terminated)
        rc, text = run_rounds(baseline, candidate, args.sweep_file, gate, settings.seed, args.twins, args.out_dir,
                              expected_not_ok=settings.expected_not_ok,
                              floor=floor, in_lockstep=args.lockstep, turn_timeout_s=settings.turn_timeout_s)
    except BadInput as error:
        print(f"scripts/ci-bench: {error}", file=sys.stderr)
        return abandoned(args.out_dir if lock else None, 2)
    except OSError as error:  # --out-dir or a file in it cannot be written
        print(f"scripts/ci-bench: --out-dir {args.out_dir}: {error}", file=sys.stderr)
        return abandoned(args.out_dir if lock else None, 2)
    except BrokenCandidate as error:
        print(f"scripts/ci-bench: {error}: the candidate fails the gate", file=sys.stderr)
        return abandoned(args.out_dir if lock else None, 1)
    except (Interrupted, KeyboardInterrupt) as error:
        print(f"scripts/ci-bench: {str(error) or 'interrupted'}", file=sys.stderr)
        return abandoned(args.out_dir if lock else None, 130)
    print(text, end="")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

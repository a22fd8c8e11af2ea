"""Rounds of two builds (the paired gate): each round runs every row once on each build, in
lockstep (both at once, taking turns step by step: scripts/lib/lockstep.py) or back to back in
a random order (randomized multiple interleaved trials: Abedi & Brecht, ICPE 2017), so whatever
the machine does to one build in a round it does to the other. Round r of a row is repetition r
of that build's rounds file, which `ddpbench compare --paired` reads.

Each build's run is read knowing whose it is: a sweep that dies, hangs, writes garbage or
refuses what it ran before is that build's fault (the candidate fails; the baseline build cannot
judge).
"""
from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

import lockstep

from . import builds, children
from .out_dir import write_whole
from .reading import Unreadable, read_json
from .outcomes import Side, Stop, What

@dataclass(frozen=True)
class Arm:
    """One side of the comparison: a build's binary and the sweep arguments it runs every row with."""
    label: str
    binary: str
    sweep_args: tuple[str, ...] = ()
    row_args: dict[str, tuple[str, ...]] = field(default_factory=dict)  # more arguments for one row
    side: Side = Side.CANDIDATE


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


class Refusal(Exception):
    """A build's sweep refused a row's input (exit 2): whose fault it is depends on the other build."""

    def __init__(self, side: Side, reason: str) -> None:
        super().__init__(reason)
        self.side = side


# Each build's result file as the gate read it once that build's process had ended (`take`):
# what is proven, merged and judged is that, whatever is written there later (the other build runs
# as the same user: a candidate that copied its own file over the baseline's passed 50 % slower).
_taken: dict[Path, object] = {}


def take(results: Path) -> None:
    """`results` read now, its build's process just ended (what it holds is proven later)."""
    try:
        _taken[results] = read_json(results)
    except Unreadable as error:
        _taken[results] = error


def forget_taken() -> None:
    """Every file taken forgotten: what is read next is what is on disk (scripts/gate-power measures
    rounds, then judges them as they lie, in one process)."""
    _taken.clear()


def taken(results: Path) -> object:
    """`results`' JSON as taken (a copy: the caller may change it), else as it is now; Unreadable
    where it could not be read."""
    found = _taken[results] if results in _taken else None
    if found is None:
        return read_json(results)
    if isinstance(found, Unreadable):
        raise found
    return copy.deepcopy(found)


# Every build's round folder the gate made (sweep_command): anything else in the builds' round
# folders was made by a process the gate ran.
_started: set[Path] = set()


def left_in_round_folders(out: Path, what: str) -> str:
    """What `what` (a process that just ended) made in the builds' round folders of --out-dir
    (OUT/BUILD/round-NN/...) that the gate did not make, in a phrase, or "" (the baseline build's
    sweep made the candidate's next results.json a folder: the candidate was blamed)."""
    found = [path for path in sorted(out.glob("*/round-*/*")) if path not in _started]
    if not found:
        return ""
    return (f"{what} made {', '.join(map(str, found[:3]))} in the builds' round folders of --out-dir, where only the "
            f"gate makes a round's folder")


def sweep_command(arm: Arm, sweep_file: Path, row: str, twins: bool, folder: Path) -> list[str]:
    """One row (and its PyTorch twin) on one build, its results in `folder`, made afresh here: one
    there already was left by a build (the baseline build's sweep planted the candidate's next
    results.json as a folder: the candidate was blamed, 1 under --bisect)."""
    if folder.exists() or folder.is_symlink():  # made by no process the gate saw make it (left_in_round_folders)
        raise Stop(Side.BASELINE, What.GARBAGE, f"{folder} existed before the {arm.label} build's sweep of it, made by "
                   f"a process the gate did not see make it: nothing run there can be judged")
    folder.mkdir(parents=True)
    _started.add(folder)
    _taken.pop(folder / "results.json", None)  # a run to come writes it afresh
    command = [builds.checked(arm.binary), "sweep", "--file", str(sweep_file), "--mode", "faithful", "--table", "tutorial", "--rows",
               row, "--repeat", "1", "--out-dir", str(folder), *arm.sweep_args, *arm.row_args.get(row, ())]
    return command + (["--reference"] if twins else [])


def run_row(arm: Arm, sweep_file: Path, row: str, twins: bool, folder: Path, deadline_s: float = 1800.0,
            ran_before: bool = False) -> Path:
    """One row (and its PyTorch twin) on one build; its result file (checked_result)."""
    done = children.run(arm.side, f"the {arm.label} build's sweep of row {row}",
                        sweep_command(arm, sweep_file, row, twins, folder), deadline_s, log=folder / "sweep.log")
    take(folder / "results.json")
    return checked_result(arm, row, folder, done, ran_before=ran_before)


def checked_result(arm: Arm, row: str, folder: Path, done: children.Finished, ran_before: bool = False,
                   culprits: tuple[str, ...] = (), stopped: str = "") -> Path:
    """The result file of one build's sweep of `row`. A row that fails still writes its row (exit
    1): the comparison fails it closed. Anything else is this build's fault, as `done.problem`
    reads it: a refusal (Refusal, or a fault where it refuses what it ran before), a crash, a
    hang (`stopped`: the lockstep coordinator stopped it), an interruption, or a result file that
    does not hold this row's runs alone (what the runs say is the judge's reader's to prove)."""
    where = done.where() + "".join(f"; {culprit}" for culprit in culprits)
    if stopped:
        raise Stop(arm.side, What.HANG, f"{where} was stopped by the lockstep coordinator: {stopped}")
    found = done.problem()
    if found is not None and found[0] is What.REFUSED:
        if ran_before:
            raise Stop(arm.side, What.REFUSED, f"{where} refused the input it ran in an earlier round")
        raise Refusal(arm.side, f"{where} refused its input{children.last_words(done)}")
    if found is not None:
        raise Stop(arm.side, found[0], f"{where} {found[1]}{children.last_words(done)}")
    results = folder / "results.json"
    problem = rows_problem(results, row)
    if problem:
        raise Stop(arm.side, What.GARBAGE, f"{where} {problem}")
    return results


def sweep_row_of(name: str, rows: tuple[str, ...] | list[str]) -> str | None:
    """The sweep file's row a run belongs to: the row itself, or its twin or variant (ROW.torch,
    ROW.no-sync-bn: the longest row it extends, as row names may hold dots); None for a stranger."""
    owners = [row for row in rows if name == row or name.startswith(row + ".")]
    return max(owners, key=len) if owners else None


def result_runs(results: Path) -> tuple[list, list] | str:
    """A result file's runs and its sweep's planned rows, each a list of objects, the runs named;
    or why the file is no such thing (whatever it holds: never the gate's own failure)."""
    try:
        doc = taken(results)
    except Unreadable as error:
        return f"wrote no readable result file ({error})"
    runs = doc.get("runs") if isinstance(doc, dict) else None
    sweep = doc.get("sweep") if isinstance(doc, dict) else None
    planned = sweep.get("rows") if isinstance(sweep, dict) else None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and isinstance(r.get("name"), str) for r in runs):
        return f"wrote a result file whose runs are not a list of named rows ({results})"
    if not isinstance(planned, list) or not all(isinstance(p, dict) for p in planned):
        return f"wrote a result file without the sweep's planned rows ({results})"
    return runs, planned


def rows_problem(results: Path, row: str) -> str:
    """Why `results` is not one build's sweep of `row` (or ""): it must be an object whose runs
    are objects, every one a row the sweep planned (the row, its twin, its variants ROW.*), the
    row among them, each run once."""
    found = result_runs(results)
    if isinstance(found, str):
        return found
    runs, _ = found
    names = [r["name"] for r in runs]
    strangers = sorted({n for n in names if n != row and not n.startswith(row + ".")})
    if strangers:
        return f"wrote rows it was not asked for ({', '.join(strangers)}) into {results}"
    if row not in names:
        return f"wrote no row {row} into {results}"
    twice = sorted({(r["name"], str(r.get("mode"))) for r in runs if
                    sum(o["name"] == r["name"] and o.get("mode") == r.get("mode") for o in runs) > 1})
    if twice:
        return f"wrote {twice[0][0]} more than once into {results}"
    return ""


def lockstep_row(sides: list[tuple[Arm, Path]], sweep_file: Path, row: str, twins: bool, seed: int, run: str,
                 record: Path, turn_timeout_s: float = 300, start_timeout_s: float = 900,
                 deadline_s: float | None = None) -> lockstep.LockstepRun:
    """`row` (and its twin) on each build at once, taking turns (lockstep.py): each build's sweep
    writes into its folder, the coordinator's record to `record`."""
    participants = [lockstep.Participant(arm.label, tuple(sweep_command(arm, sweep_file, row, twins, folder)),
                                         folder / "sweep.log") for arm, folder in sides]
    try:
        folders = {arm.label: folder for arm, folder in sides}
        ran = lockstep.run_lockstep(participants, seed, run, record, turn_timeout_s, start_timeout_s,
                                    deadline_s=deadline_s, starting=children.starting,
                                    on_exit=lambda label: take(folders[label] / "results.json"))
    except lockstep.CannotStart as failed:  # as children.run reads a child that cannot start: its side's crash
        side = next(arm.side for arm, _ in sides if arm.label == failed.label)
        raise Stop(side, What.CRASH, str(failed)) from None
    children.require_nothing_left(tuple(arm.side for arm, _ in sides), f"the builds' sweeps of row {row} in lockstep")
    return ran


def merge_rounds(files: list[tuple[int, Path]], out: Path) -> None:
    """One rounds file: every run of `files` (round, result file), repetition = its round."""
    merged: dict | None = None
    runs: list[dict] = []
    rows: list[dict] = []
    for round_index, path in sorted(files, key=lambda item: (item[0], str(item[1]))):
        doc = taken(path)  # proven a result file of the row (rows_problem) when it was taken
        if merged is None:
            merged = doc
        for run in doc["runs"]:
            run["repetition"] = round_index
            runs.append(run)
        for row in (doc.get("sweep") or {}).get("rows", []):
            if all(row.get("name") != r.get("name") or row.get("mode") != r.get("mode") for r in rows):
                rows.append(row)
    if merged is None:
        raise Stop(Side.GATE, What.FAILED, "no round ran, yet the gate merged rounds")
    merged["runs"] = runs
    merged.pop("summary", None)
    sweep = merged.setdefault("sweep", {})
    sweep["rows"] = rows
    sweep["repeat"] = 1 + max(index for index, _ in files)
    write_whole(out, json.dumps(merged, indent=1))


# A build's step, as its file says it, lies inside the turn the gate timed it in (the coordinator's
# clock, from its "go" to the last rank's "done"), shorter by the turn's messages and a little more
# (a rank's step ends before the last rank's "done"); a step more than this shorter than its turn
# left time out of its own timing.
HIDDEN_SHARE, HIDDEN_SLACK_S = 0.10, 0.005
# Honest steps hide that much now and then on a loaded machine; more than this share of the steady
# steps doing so is the build's timing, not the machine's.
MOST_HIDING_STEADY_STEPS = 0.25


def timing_problem(said: list[float], turned: list[float], warmup: int) -> str:
    """Why a row's steps as its file says them are not the steps the gate timed (or ""): one a
    turn, and no more than MOST_HIDING_STEADY_STEPS of the steady ones shorter than their turns by
    more than the slack (the fourteenth attack: a candidate twice as slow hid 7 of its 16 steps, or
    took an empty turn beside each step, under a check of the medians). A step longer than its turn
    is not looked for: it makes its build slower, never faster."""
    if len(said) != len(turned):
        return f"it took {len(turned)} turns for its {len(said)} steps"
    steady = list(zip(said, turned))[warmup:]
    hiding = [k for k, (step, turn) in enumerate(steady, start=warmup)
              if turn - step > HIDDEN_SHARE * turn + HIDDEN_SLACK_S]
    if steady and len(hiding) > MOST_HIDING_STEADY_STEPS * len(steady):
        return (f"{len(hiding)} of its {len(steady)} steady steps took less than their turns (step {hiding[0]}: "
                f"{said[hiding[0]] * 1e3:.1f} ms in a turn of {turned[hiding[0]] * 1e3:.1f} ms)")
    return ""


def require_steps_as_timed(arm: Arm, results: Path, sessions: list[dict]) -> None:
    """Each row's steps, as the build's file says them, are the steps the gate timed its turns in
    (timing_problem): one a build's file leaves time out of, or holds steps the gate did not time
    as such, is its garbage (the thirteenth attack: a candidate 25 times slower by the gate's clock
    reported its steps as before, 0.0 % slower, exit 0): the candidate's 1, the baseline build's
    cannot judge."""
    turns = {session.get("row"): [turn.get("s") for turn in session.get("turns", []) if turn.get("build") == arm.label]
             for session in sessions}
    for run in taken(results)["runs"]:
        said = [record.get("time_s") for record in run.get("step_records") or [] if isinstance(record, dict)]
        turned = turns.get(run.get("name")) or []
        numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in said + turned)
        if run.get("status") != "ok" or not said or not turned or not numbers:
            continue  # what is missing or no number is the proof's to refuse
        warmup = run.get("warmup_steps") if isinstance(run.get("warmup_steps"), int) else 0
        problem = timing_problem(said, turned, max(0, warmup))
        if problem:
            raise Stop(arm.side, What.GARBAGE, f"the {arm.label} build's row {run.get('name')}: {problem}, as the "
                       f"gate timed its turns: its file's steps are not the steps it ran ({results})")


def require_turns_taken(arm: Arm, results: Path, sessions: list[dict]) -> None:
    """A row that ran in a lockstep run took turns, as its lockstep_wait_s says, and took them in
    that row's session of the coordinator's record (`sessions`): a build whose ranks said another
    row's name ran alone, beside the other. A build that did not take turns ran beside the other,
    and nothing it timed can be compared: the baseline build's is older than lockstep (cannot judge:
    --round-level compares it), the candidate's broke lockstep."""
    turned = {session.get("row") for session in sessions if arm.label in session.get("builds", [])}
    for run in taken(results)["runs"]:
        if run.get("status") != "ok":
            continue
        if run.get("lockstep_wait_s") is None:
            said = (f"the {arm.label} build's row {run.get('name')} ran without taking turns (no lockstep_wait_s in "
                    f"{results}), beside the other build: ")
            raise Stop(arm.side, What.GARBAGE, said + ("the candidate broke lockstep" if arm.side is Side.CANDIDATE
                                                       else "a build older than lockstep; --round-level "
                                                       "(scripts/ci-bench) compares it back to back"))
        if run.get("name") not in turned:
            raise Stop(arm.side, What.GARBAGE, f"the {arm.label} build's row {run.get('name')} took no turns as that "
                       f"row (its sessions: {', '.join(sorted(map(str, turned))) or 'none'}), so it ran beside the "
                       f"other build: the {arm.label} build broke lockstep")

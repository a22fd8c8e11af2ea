"""The paired gate's rounds, looked at adaptively: after --min-rounds rounds of every row, the
judge (the baseline build's `compare --paired`, the candidate's agreeing) looks after each round;
only the rows it calls undecided run again, up to --max-rounds; a regression found at any look
stands. Then the PyTorch floor on the candidate's rounds. The order of round r depends only on
the seed and r, so a seed reproduces it (order.jsonl lists every run).
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from . import builds, children, machine_load
from .judge import Floor, PairedCompare, Ruling, read_by_its_proof, regressions, run_compare
from .out_dir import OutDir, open_new
from .outcomes import Outcome, Side, Stop, What
from .rounds import (Arm, Refusal, checked_result, lockstep_row, merge_rounds, require_steps_as_timed,
                     require_turns_taken, round_order, run_row, sweep_row_of)


@dataclass(frozen=True)
class RoundsSettings:
    sweep_file: Path
    rows: tuple[str, ...]
    seed: int
    twins: bool
    lockstep: bool
    expected_not_ok: frozenset[str] = frozenset()
    turn_timeout_s: float = 300.0
    row_deadline_s: float = 1800.0
    compare_deadline_s: float = 300.0


@dataclass
class Rounds:
    """The rounds run so far: each build's result files, and how many rounds each row had."""
    baseline: Arm
    candidate: Arm
    settings: RoundsSettings
    out: OutDir
    folders: dict[str, Path]  # label -> the build's round folder (out/baseline, out/candidate)
    files: dict[str, list[tuple[int, Path]]] = field(default_factory=dict)
    ran: dict[str, set[str]] = field(default_factory=dict)  # build -> the rows it has run in a round before
    accepted: dict[str, int] = field(default_factory=dict)  # row -> the round the baseline build first ran it
    baseline_runs: list[dict] = field(default_factory=list)  # the baseline build's rounds as merged last (merge)
    culprits: list[str] = field(default_factory=list)  # what the lockstep coordinator saw go wrong, by round
    loads: list[machine_load.RoundLoad] = field(default_factory=list)  # what else ran, round by round

    def prove(self, arm: Arm, results: Path, baseline: Path) -> None:
        """The judge's reader (the baseline build's compare) must read each build's rounds file: the
        baseline build's as a baseline (against itself), the candidate's as the current file against
        it (a baseline's rules, such as no slowdown injected, are not the candidate's). One it
        refuses is that build's garbage, never the judge's refusal of the rounds."""
        said = run_compare(Side.BASELINE, [builds.checked(self.baseline.binary), "compare", str(baseline), str(results)],
                           self.settings.compare_deadline_s)
        if not read_by_its_proof(said):
            raise Stop(arm.side, What.GARBAGE, f"the {arm.label} build's rounds file {results} is refused by the "
                       f"judge's reader (the baseline build's compare): {said.last_said()}")
        if said.verdict in ("died", "hung", "interrupted"):
            raise Stop(Side.BASELINE, {"died": What.CRASH, "hung": What.HANG}.get(said.verdict, What.INTERRUPTED),
                       f"the baseline build's compare of {results} {said.verdict} (exit {said.rc})")

    def take(self, arm: Arm, row: str, round_index: int, result: Callable[[bool], Path]) -> None:
        """One build's result file of `row` in a round, as `result(ran_before)` gives it (checked:
        `ran_before`, this build ran this row in an earlier round); a build's refusal is decided by
        whether the other build accepts the row."""
        ran = self.ran.setdefault(arm.label, set())
        try:
            path = result(row in ran)
        except Refusal as refusal:
            raise self.refused(arm, row, refusal) from None
        if arm is self.baseline:
            self.accepted.setdefault(row, round_index)
        ran.add(row)
        self.files.setdefault(arm.label, []).append((round_index, path))

    def refused(self, arm: Arm, row: str, refusal: Refusal) -> Stop:
        """The candidate's refusal is its failure where the baseline build accepts the row (it ran
        it in a round, or runs it now to tell); where both refuse it, the input is bad. The
        baseline build's refusal of rows the candidate's sweep file holds cannot judge it."""
        if arm is self.baseline:
            return Stop(Side.BASELINE, What.REFUSED, f"{refusal}: the baseline build cannot judge these rows")
        if row in self.accepted:
            return Stop(Side.CANDIDATE, What.REFUSED, f"{refusal}, which the baseline build accepted (round "
                        f"{self.accepted[row] + 1})")
        folder = self.folders[self.baseline.label] / "refusal-check" / row
        try:
            run_row(self.baseline, self.settings.sweep_file, row, self.settings.twins, folder,
                    self.settings.row_deadline_s)
        except Refusal as too:
            return Stop(Side.INPUT, What.REFUSED, f"{refusal}, and {too} too: neither build accepts it")
        return Stop(Side.CANDIDATE, What.REFUSED, f"{refusal}, which the baseline build accepted (its sweep of the same "
                    f"row, run to tell: {folder / 'sweep.log'})")

    def run(self, order: list[tuple[str, str]], round_index: int, plan: TextIO) -> None:
        s = self.settings
        for row, label in order:
            arm = self.baseline if label == self.baseline.label else self.candidate
            began = time.time()
            folder = self.folders[label] / f"round-{round_index:02d}" / row
            self.take(arm, row, round_index, lambda ran_before: run_row(
                arm, s.sweep_file, row, s.twins, folder, s.row_deadline_s, ran_before=ran_before))
            plan.write(json.dumps({"round": round_index, "row": row, "build": label, "started_unix_s": round(began, 3),
                                   "wall_s": round(time.time() - began, 3)}) + "\n")
            plan.flush()

    def run_lockstep(self, rows: list[str], round_index: int, plan: TextIO) -> None:
        """Round `round_index` in lockstep: each row (and its twin) on both builds at once, taking
        turns step by step, fresh processes each round; the coordinator's record (each turn's build
        and seconds, and any culprit) in the baseline build's folder."""
        s, arms = self.settings, (self.baseline, self.candidate)
        for row in rows:
            began = time.time()
            folders = {arm.label: self.folders[arm.label] / f"round-{round_index:02d}" / row for arm in arms}
            ran = lockstep_row([(arm, folders[arm.label]) for arm in arms], s.sweep_file, row, s.twins, s.seed,
                               f"{round_index}:{row}", folders[self.baseline.label] / "lockstep.json",
                               s.turn_timeout_s, s.turn_timeout_s, deadline_s=s.row_deadline_s)
            culprits = tuple(c for session in ran.record["sessions"] for c in session["culprits"])
            culprits += tuple(ran.record["problems"])
            self.culprits += [f"round {round_index + 1}, {row}: {culprit}" for culprit in culprits]
            self.past_deadline(ran.record, round_index, row, folders)
            for arm in arms:  # the baseline build's first: whether it accepts the row decides a refusal
                self.take(arm, row, round_index, self.lockstep_result(arm, row, folders[arm.label], ran, culprits))
            firsts = {session["row"]: session["first"] for session in ran.record["sessions"]}
            plan.write(json.dumps({"round": round_index, "row": row, "build": "lockstep", "first": firsts,
                                   "culprits": list(culprits), "started_unix_s": round(began, 3),
                                   "wall_s": round(time.time() - began, 3)}) + "\n")
            plan.flush()

    def past_deadline(self, record: dict, round_index: int, row: str, folders: dict[str, Path]) -> None:
        """A lockstep run that passed its deadline stopped both builds: the one that held it up (its
        turn, or not yet come) is blamed, never the one that waited for it; both where neither can
        be told."""
        held_up = record.get("deadline_culprits") or []
        if not held_up:
            return
        sides = {self.baseline.label: Side.BASELINE, self.candidate.label: Side.CANDIDATE}
        side = Side.CANDIDATE if [sides[label] for label in held_up] == [Side.CANDIDATE] else Side.BASELINE
        raise Stop(side, What.HANG, f"round {round_index + 1}, row {row}: the lockstep run passed its deadline of "
                   f"{self.settings.row_deadline_s:g} s, held up by the {' and the '.join(held_up)} build "
                   f"(logs: {', '.join(str(folder / 'sweep.log') for folder in folders.values())})")

    def lockstep_result(self, arm: Arm, row: str, folder: Path, ran, culprits: tuple[str, ...]) -> Callable[[bool], Path]:
        def result(ran_before: bool) -> Path:
            done = children.Finished(arm.side, f"the {arm.label} build's sweep of row {row}",
                                     ran.returncodes[arm.label], False, self.settings.row_deadline_s,
                                     folder / "sweep.log")
            path = checked_result(arm, row, folder, done, ran_before=ran_before, culprits=culprits,
                                  stopped=ran.record["stopped"].get(arm.label, ""))
            require_turns_taken(arm, path, ran.record["sessions"])
            require_steps_as_timed(arm, path, ran.record["sessions"])
            return path
        return result

    def merge(self) -> tuple[Path, Path]:
        """Each build's rounds file, read by the judge's reader before the judge compares them."""
        baseline, candidate = self.out / "baseline-rounds.json", self.out / "candidate-rounds.json"
        merge_rounds(self.files[self.baseline.label], baseline)
        merge_rounds(self.files[self.candidate.label], candidate)
        self.prove(self.baseline, baseline, baseline)
        self.prove(self.candidate, candidate, baseline)
        # Read once, here, before any compare runs: the verdict never re-reads a file the candidate's
        # compare could have changed since (it got the baseline blamed for its own regression).
        self.baseline_runs = json.loads(baseline.read_text())["runs"]
        return baseline, candidate


def never_ok_on_baseline(runs: list[dict]) -> dict[str, str]:
    """Rows with no run that finished on the baseline build in any round (its rounds' runs), each
    with the reason its first run gave."""
    reasons: dict[str, str] = {}
    for r in runs:
        reasons.setdefault(r["name"], r.get("reason") or r.get("status", ""))
    ok = {r["name"] for r in runs if r.get("status") == "ok"}
    return {name: reason for name, reason in reasons.items() if name not in ok}


def excused(baseline_runs: list[dict], expected_not_ok: frozenset[str]) -> str:
    """The rows compare may find not run on the candidate: those expected not to run here that the
    baseline build did not run either. A row the baseline build ran is never excused."""
    return ",".join(sorted(set(never_ok_on_baseline(baseline_runs)) & expected_not_ok))


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


def row_of(name: str, rows: tuple[str, ...]) -> str:
    """The sweep row a compared row belongs to: a twin (`ddp-2.torch`) runs with its row."""
    base = sweep_row_of(name, rows)
    if base is None:
        raise Stop(Side.BASELINE, What.GARBAGE, f"the judge's comparison names a row '{name}' the sweep file does "
                   f"not have")
    return base


def run_rounds(baseline: Arm, candidate: Arm, gate: PairedCompare, floor: Floor | None, settings: RoundsSettings,
               out: OutDir, log: TextIO | None = None) -> tuple[Outcome, str]:
    """The adaptive paired gate, then the floor: how it ended (the candidate: no regression,
    regression, or cannot judge) and its report. A regression found at a look stands whatever
    happens after it: the baseline build failing a later round, or the floor's judge."""
    folders = {arm.label: out.folder(arm.label) for arm in (baseline, candidate)}
    rounds = Rounds(baseline, candidate, settings, out, folders)
    found = Found()
    try:
        ruling, undecided = rounds_until_decided(rounds, gate, settings, out, found, log or sys.stderr)
        return verdict(rounds, ruling, undecided, found.regressed, floor, settings, out)
    except Stop as stop:
        if not found.regressed or not stands_beside(stop):
            raise
        text = (found.text.rstrip("\n") + "\n\n" + "".join(
            f"**Regression**: {name} was a regression after round {at}; " for name, at in found.regressed.items())
            + f"what came after it could not finish ({stop.outcome.reason}), and a regression found at a look "
              f"stands.\n")
        out.write("paired.md", text)
        return Outcome(Side.CANDIDATE, What.REGRESSION, f"a regression found, then {stop.outcome.what.value} of the "
                       f"baseline build"), text


@dataclass
class Found:
    """What the looks so far found: each regression (row, mode and metric) with its round, and the
    last look's report."""
    regressed: dict[str, int] = field(default_factory=dict)
    text: str = ""


def rounds_until_decided(rounds: Rounds, gate: PairedCompare, settings: RoundsSettings, out: OutDir, found: Found,
                         log: TextIO) -> tuple[Ruling, list[str]]:
    """Rounds until no row is undecided or the cap; the last look's ruling and undecided rows."""
    baseline, candidate = rounds.baseline.label, rounds.candidate.label
    rows = list(settings.rows)
    to_run, rounds_of = list(rows), {row: 0 for row in rows}
    started = time.monotonic()
    with open_new(out / "order.jsonl") as plan:
        for round_index in range(gate.max_rounds):
            order = [(row, arm) for row, arm in round_order(rows, [baseline, candidate], settings.seed, round_index)
                     if row in to_run]
            before = machine_load.sample()
            if settings.lockstep:
                rounds.run_lockstep(list(dict.fromkeys(row for row, _ in order)), round_index, plan)
            else:
                rounds.run(order, round_index, plan)
            load = machine_load.between(round_index + 1, before, machine_load.sample())
            if load is not None:
                rounds.loads.append(load)
            for row in to_run:
                rounds_of[row] += 1
            print(f"ci-bench: round {round_index + 1} done ({', '.join(dict.fromkeys(r for r, _ in order))}), "
                  f"{time.monotonic() - started:.0f} s" + (f"; other processes used {load.others_cores:.2f} cores"
                                                          if load is not None else ""), file=log, flush=True)
            if round_index + 1 < gate.min_rounds:
                continue
            ruling, undecided = look(rounds, gate, settings, out, at_cap=round_index + 1 >= gate.max_rounds)
            if ruling.disagreement:
                break  # the candidate fails whatever more rounds would say
            for name in regressions(ruling.text) - set(found.regressed):
                found.regressed[name] = round_index + 1
            found.text = ruling.text
            to_run = sorted({row_of(name, settings.rows) for name in undecided}, key=rows.index)
            if not to_run:
                break
            print(f"ci-bench: undecided after round {round_index + 1}: {', '.join(undecided)}: one more round of "
                  f"{', '.join(to_run)}", file=log, flush=True)
    summary = ", ".join(f"{row} {n}" for row, n in rounds_of.items())
    print(f"ci-bench: rounds run per row: {summary}; {time.monotonic() - started:.0f} s", file=log, flush=True)
    return ruling, undecided


def look(rounds: Rounds, gate: PairedCompare, settings: RoundsSettings, out: OutDir,
         at_cap: bool) -> tuple[Ruling, list[str]]:
    baseline_rounds, candidate_rounds = rounds.merge()
    gate.allow_missing = excused(rounds.baseline_runs, settings.expected_not_ok)
    return gate.compare(baseline_rounds, candidate_rounds, out / "undecided.txt", out / "paired.md", at_cap=at_cap)


def verdict(rounds: Rounds, ruling: Ruling, undecided: list[str], regressed: dict[str, int], floor: Floor | None,
            settings: RoundsSettings, out: OutDir) -> tuple[Outcome, str]:
    never = {name: reason for name, reason in never_ok_on_baseline(rounds.baseline_runs).items()
             if name not in settings.expected_not_ok}
    if never:
        why = "; ".join(f"{name}: {reason}" for name, reason in never.items() if reason)
        raise Stop(Side.BASELINE, What.CANNOT_JUDGE, f"the baseline build never ran {', '.join(never)} in any round"
                   f"{f' ({why})' if why else ''}, so it cannot judge the candidate's (see {out / 'baseline'}; rows "
                   f"expected not to run here: {', '.join(sorted(settings.expected_not_ok)) or 'none'})")
    rc, what, text = ruling.rc, ruling.what, ruling.text + ruling.disagreement + ruling.note
    side = Side.CANDIDATE
    failed = sorted({r["name"] for r in rounds.baseline_runs if r.get("status") not in ("ok", "skipped")})
    if rc == 2 and failed:  # the judge could not judge rows the baseline build failed in some rounds
        side, text = Side.BASELINE, text + (f"\nThe baseline build failed {', '.join(failed)} in some rounds: the "
                                            f"pairs it left are too few to judge (see {out / 'baseline'}).\n")
    if rounds.culprits:
        text += "\nWhat the lockstep coordinator saw:\n" + "".join(f"- {line}\n" for line in rounds.culprits)
    text = machine_load.summary(rounds.loads) + "\n" + text + machine_load.likely_cause(rounds.loads, text)
    out.write("machine-load.json", json.dumps([load.record() for load in rounds.loads], indent=1) + "\n")
    text, taken_back = stood(text, regressed)
    if taken_back:
        rc, what = 1, What.REGRESSION
    if taken_back or ruling.disagreement or ruling.note:
        out.write("paired.md", text)
    out.write("undecided.txt", "".join(f"{name}\n" for name in undecided
                                       if not any(name == k.split(" (")[0] for k in regressed)))
    if floor is not None:
        try:
            floor_ruling, floor_text = floor.check(out / "candidate-rounds.json")
        except Stop as stop:  # the floor could not be judged: a regression the comparison found stands
            if rc != 1 or not stands_beside(stop):
                raise
            floor_ruling, floor_text = Ruling(2, "", 2, what=What.CANNOT_JUDGE), f"Cannot judge the floor: {stop}\n"
        out.write("floor.md", floor_text)
        text = text.rstrip("\n") + "\n\n" + floor_text
        rc, what = whole_gate((rc, what), (floor_ruling.rc, floor_ruling.what))
    last = [line for line in text.splitlines() if line.strip()][-1:] or [""]
    return Outcome(side if rc == 2 else Side.CANDIDATE, what, last[0]), text


def stands_beside(stop: Stop) -> bool:
    """Whether a regression already found stands beside `stop`, a build's end that would not fail
    the candidate (the baseline build's failure; the candidate's compare interrupted or unable to
    judge, which voided the judge's regression: 125 under --bisect). The candidate's own failure
    is raised as it is (1 either way); the gate's, the input's and a signal's end the gate."""
    return stop.outcome.side in (Side.BASELINE, Side.CANDIDATE) and stop.outcome.code.plain != 1


def whole_gate(comparison: tuple[int, What], floor: tuple[int, What]) -> tuple[int, What]:
    """A regression anywhere fails the gate (it was found, whatever else could not be judged);
    otherwise any part that cannot judge leaves the whole gate unable to."""
    for part in (comparison, floor):
        if part[0] == 1:
            return part
    for part in (comparison, floor):
        if part[0] == 2:
            return part
    return 0, What.NO_REGRESSION


"""The stored mode: the sweep measured now (or --current) against a baseline measured before
(scripts/ci-bench.baseline.json), judged by the candidate's `ddpbench compare` on each row's
ratio to its PyTorch twin (--normalize-by twin: the machine's drift between the two sweeps falls
on both sides of each ratio). --update-baseline makes the measured file the baseline, refusing
one the gate could not time or that lacks a row it gates.
"""
from __future__ import annotations

import json
from pathlib import Path

from output_rule import OutputClash, check_outputs

from . import children, machine_load
from .cli import Settings
from .judge import read_by_its_proof, run_compare
from .out_dir import OutDir, write_whole
from .reading import read_json
from .rounds import result_runs, sweep_row_of
from .outcomes import Outcome, Side, Stop, What

STORED_NOTE = ("ci-bench: a stored baseline was measured at another time: a slowdown of one row by 10-15 % can hide in "
               "the drift between the two sweeps (docs/gate.md); where the baseline commit builds here, "
               "scripts/ci-bench --against REV runs it beside this one")


def result_problem(path: Path, rows: tuple[str, ...]) -> str:
    """Why `path` is not a sweep's result file of the sweep file's rows (or ""): an object whose
    runs are named objects, each a row of the sweep file, its twin or a variant (ROW.*). The
    figures are compare's to prove."""
    found = result_runs(path)
    if isinstance(found, str):
        return found.replace("wrote ", "is ", 1)
    runs, _ = found
    strangers = sorted({r["name"] for r in runs if sweep_row_of(r["name"], rows) is None})
    if strangers:
        return f"holds rows the sweep file does not have: {', '.join(strangers)}"
    return ""


def unjudged_rows(s: Settings) -> str:
    """Why the baseline cannot judge every row the sweep file gates (or ""): a row it lacks, or one
    that ran in none of its repetitions, would never be compared (but --expected-not-ok's)."""
    runs = read_json(s.baseline)["runs"]  # a result file: result_problem said so
    ran = {r["name"] for r in runs if r.get("status") == "ok"}
    never = [row for row in s.rows if row not in ran and row not in s.expected_not_ok]
    if never:
        return (f"never ran {', '.join(never)} (absent, or not ok in any repetition), so the gate could never judge "
                f"{'it' if len(never) == 1 else 'them'}: measure the baseline again (--update-baseline)")
    return ""


def measure(s: Settings, out: OutDir, ddpbench: str) -> Path:
    """The sweep, into --out-dir/current/; its results.json, checked as the candidate's own."""
    folder = out.folder("current")
    command = [ddpbench, "sweep", "--file", str(s.sweep_file), "--mode", "faithful", "--table", "tutorial", "--repeat",
               str(s.repeat), "--out-dir", str(folder), *(["--reference"] if s.twins else []), *s.sweep_args]
    print(f"ci-bench: measuring the sweep into {folder} (log: {folder / 'sweep.log'})", flush=True)
    done = children.run(Side.CANDIDATE, "the candidate's sweep", command, s.deadlines.sweep_s, log=folder / "sweep.log")
    found = done.problem()
    if found is not None and found[0] is What.REFUSED:
        raise Stop(Side.CANDIDATE, What.CANNOT_JUDGE, f"{done.where()} refused the sweep file's rows or the arguments "
                   f"after -- (with no second build, whose fault it is cannot be told){children.last_words(done)}")
    done.stop_unless_fine()
    current = folder / "results.json"
    problem = result_problem(current, s.rows)
    if problem:
        raise Stop(Side.CANDIDATE, What.GARBAGE, f"{done.where()} wrote {current}, which {problem}")
    if done.returncode == 1 and not s.compare:  # judged, a failed row is the comparison's to fail
        raise Stop(Side.CANDIDATE, What.ROW_FAILED, f"{done.where()} exited 1: a row failed (see {current})")
    return current


def prove(side: Side, name: str, ddpbench: str, path: Path, s: Settings) -> None:
    """`compare FILE FILE` reads the file through the proof: a refusal names it in one line."""
    said = run_compare(side, [ddpbench, "compare", str(path), str(path)], s.deadlines.compare_s)
    if not read_by_its_proof(said):  # measured now: the candidate's garbage; given (--current): not judged
        what = What.GARBAGE if side is Side.CANDIDATE else What.CANNOT_JUDGE
        raise Stop(Side.CANDIDATE, what, f"{name} {path} is refused by the candidate's compare: {said.last_said()}")
    stop_if_compare_failed(said, s)


def stop_if_compare_failed(said, s: Settings) -> None:
    failures = {"died": What.CRASH, "hung": What.HANG, "interrupted": What.INTERRUPTED}
    if said.verdict in failures:
        raise Stop(Side.CANDIDATE, failures[said.verdict], f"the candidate's compare {said.verdict} "
                   f"(exit {said.rc}; deadline {s.deadlines.compare_s:g} s){': ' + said.last_said() if said.rc else ''}")


def stored_gate(s: Settings, out: OutDir, ddpbench: str) -> tuple[Outcome, str]:
    judged = s.compare and not s.update_baseline  # --no-compare measures only; an update writes --baseline
    baseline_problem = result_problem(s.baseline, s.rows) or unjudged_rows(s) if judged else ""
    if baseline_problem:
        raise Stop(Side.INPUT, What.REFUSED, f"--baseline {s.baseline} {baseline_problem}")
    if s.current is not None:  # the candidate's result, measured before: where it is unreadable, this commit cannot be judged
        problem = result_problem(s.current, s.rows)
        if problem:
            raise Stop(Side.CANDIDATE, What.CANNOT_JUDGE, f"--current {s.current} {problem}")
        current, side = s.current, Side.INPUT
    else:
        before = machine_load.sample()
        current, side = measure(s, out, ddpbench), Side.CANDIDATE
        load = machine_load.between(1, before, machine_load.sample())
        loads = [load] if load is not None else []
        out.write("machine-load.json", json.dumps([load.record() for load in loads], indent=1) + "\n")
    if s.update_baseline:
        return update_baseline(s, current, ddpbench)
    if not s.compare:
        return measured_outcome(current, s, measured=side is Side.CANDIDATE), ""
    if side is Side.CANDIDATE:
        absent_from_own_sweep(current, s)
    prove(side, "--current" if side is Side.INPUT else "the candidate's result file", ddpbench, current, s)
    outcome, text = judge(s, current, ddpbench, out)
    if side is Side.CANDIDATE:  # measured now: what else ran beside the sweep (the sweep is the one round)
        text = machine_load.summary(loads) + "\n" + text + machine_load.likely_cause(loads, text)
    return outcome, text


def judge(s: Settings, current: Path, ddpbench: str, out: OutDir) -> tuple[Outcome, str]:
    command = [ddpbench, "compare", str(s.baseline), str(current), "--normalize-by", s.normalize_by, "--alpha",
               str(s.alpha), "--metric", s.metrics, "--threshold", str(s.threshold), "--out", str(out / "compare.md")]
    if s.floor is not None:
        command += ["--min-vs-pytorch", str(s.floor)]
    over = ("each repetition over its PyTorch twin's" if s.normalize_by == "twin"
            else f"each row over the {s.normalize_by} row of its own file")
    print(f"ci-bench: {current} against {s.baseline}: {over} (threshold {s.threshold}, alpha {s.alpha})"
          + (f", and each row against its PyTorch twin (floor {s.floor}x)" if s.floor is not None else ""))
    print(STORED_NOTE)
    said = run_compare(Side.CANDIDATE, command, s.deadlines.compare_s)
    stop_if_compare_failed(said, s)
    verdicts = {"no regression": What.NO_REGRESSION, "regression": What.REGRESSION, "cannot judge": What.CANNOT_JUDGE}
    if said.verdict not in verdicts:  # refused: the current file proved, so the pair cannot be judged
        raise Stop(Side.CANDIDATE, What.CANNOT_JUDGE, f"the candidate's compare refuses to compare {current} with "
                   f"{s.baseline}: {said.last_said()}")
    return Outcome(Side.CANDIDATE, verdicts[said.verdict], said.last_said()), said.stdout + said.stderr


def update_baseline(s: Settings, current: Path, ddpbench: str) -> tuple[Outcome, str]:
    """The measured (or --current) file becomes --baseline: refused where the gate's own comparison
    of it with itself fails, where it lacks a row the sweep file gates, or where a row or planned
    repetition did not run (but --expected-not-ok's); the file at --baseline is replaced only where
    it is a result file, and whole."""
    def a_baseline(path: Path) -> bool:
        return not path.is_symlink() and not result_problem(path, s.rows)
    try:  # the project's one output rule (scripts/lib/output_rule.py), as every command keeps it
        check_outputs({"--current": current}, {"--baseline": (s.baseline, "a result file of the gate's rows", a_baseline)})
    except OutputClash as clash:
        raise Stop(Side.INPUT, What.REFUSED, f"--update-baseline: {clash}") from None
    command = [ddpbench, "compare", str(current), str(current), "--normalize-by", s.normalize_by, "--alpha",
               str(s.alpha), "--metric", s.metrics, "--threshold", str(s.threshold)]
    if s.floor is not None:
        command += ["--min-vs-pytorch", str(s.floor)]
    said = run_compare(Side.CANDIDATE, command, s.deadlines.compare_s)
    stop_if_compare_failed(said, s)
    if said.rc != 0:
        lines = [line for line in (said.stdout + said.stderr).splitlines()
                 if said.rc != 1 or line.startswith(("**", "Regression")) or "REGRESSION" in line][-12:]
        raise Stop(Side.INPUT, What.REFUSED, f"--update-baseline: the gate cannot time {current}: its comparison with "
                   f"itself (ddpbench compare, --normalize-by {s.normalize_by}"
                   + (f", floor {s.floor}x" if s.floor is not None else "") + f") exited with {said.rc}:\n"
                   + "".join(f"  {line}\n" for line in lines) + f"  nothing was copied to {s.baseline}")
    refusal = not_a_baseline(current, s, measured=current != s.current)
    if refusal:
        raise Stop(Side.INPUT, What.REFUSED, f"--update-baseline: {refusal}")
    write_whole(s.baseline, current.read_bytes())
    print(f"ci-bench: baseline {s.baseline} updated from {current}")
    return Outcome(Side.CANDIDATE, What.UPDATED, f"baseline {s.baseline} updated from {current}"), ""


# What reading a file that is no result file the gate can read raises in not_run.
NOT_A_RESULT = (KeyError, ValueError, TypeError, AttributeError, RecursionError)


def absent_from_own_sweep(current: Path, s: Settings) -> None:
    """The gate asked the candidate's sweep for every repetition of every row: one it planned and
    did not write is its fault (the thirteenth attack: 1 of 5 written, judged "no regression"),
    where a repetition it ran and failed is the comparison's to judge."""
    try:
        _, bad = not_run(current, s, measured=True)
    except NOT_A_RESULT:
        return  # the proof names what is wrong with it
    absent = [b for b in bad if b[3] == "absent"]
    if absent:
        raise Stop(Side.CANDIDATE, What.GARBAGE, f"the candidate's sweep wrote {current} without repetitions it "
                   f"planned:\n{listed(absent)}")


def not_run(path: Path, s: Settings, measured: bool) -> tuple[list[str], list[tuple[str, str, int, str, str]]]:
    """The gate's rows `path` lacks altogether, and each repetition of a planned row that did not run
    ok (failed, skipped, interrupted, or absent from the file), --expected-not-ok's left out. The
    repetitions planned are the gate's (--repeat) where the gate measured the file, never fewer
    than the file's own (a candidate that dropped --repeat wrote 1 of 5, "repeat": 1, and passed).
    Raises NOT_A_RESULT's errors where the file is none."""
    doc = read_json(path)
    runs, sweep = doc["runs"], doc.get("sweep") or {}
    repeat = max(int(sweep.get("repeat", 1)), s.repeat if measured else 1)
    names, planned = {r["name"] for r in runs}, {row["name"] for row in sweep.get("rows", [])}
    lacking = [n for n in s.rows if n not in planned and n not in names and n not in s.expected_not_ok]
    bad = [(r["name"], r.get("mode", ""), r.get("repetition", 0), r["status"], str(r.get("reason", ""))[:160])
           for r in runs if r["status"] != "ok" and r["name"] not in s.expected_not_ok]
    for row in sweep.get("rows", []):  # a sweep cut short leaves its later rows out altogether
        if row["name"] in s.expected_not_ok:
            continue
        ran = {r.get("repetition", 0) for r in runs if r["name"] == row["name"] and r.get("mode", "") ==
               row.get("mode", "")}
        bad += [(row["name"], row.get("mode", ""), repetition, "absent", "planned by the sweep, not in the file")
                for repetition in sorted(set(range(repeat)) - ran)]
    return lacking, bad


def listed(bad: list[tuple[str, str, int, str, str]]) -> str:
    return "\n".join(f"  {name} ({mode}) repetition {rep}: {status}: {reason}" for name, mode, rep, status, reason in bad)


def measured_outcome(current: Path, s: Settings, measured: bool) -> Outcome:
    """--no-compare: 0 only where every row of the sweep file ran ok in every planned repetition (a
    row absent, skipped or interrupted was "measured", 0, and the bisect recipe's good.json lacked it)."""
    try:
        lacking, bad = not_run(current, s, measured)
    except NOT_A_RESULT as error:
        return Outcome(Side.CANDIDATE, What.GARBAGE, f"{current} is not a result file the gate can read "
                       f"({type(error).__name__}: {error})")
    if lacking:
        return Outcome(Side.CANDIDATE, What.ROW_FAILED, f"{current} lacks rows of the sweep file: {', '.join(lacking)}")
    if bad:
        return Outcome(Side.CANDIDATE, What.ROW_FAILED, f"{current} has rows that did not run:\n{listed(bad)}")
    return Outcome(Side.CANDIDATE, What.MEASURED, f"measured: {current}")


def not_a_baseline(path: Path, s: Settings, measured: bool) -> str:
    """Why `path` may not become the baseline (or ""): what did not run in the baseline is never
    compared again."""
    try:
        lacking, bad = not_run(path, s, measured)
    except NOT_A_RESULT as error:
        return f"{path} is not a result file the gate can read ({type(error).__name__}: {error}); nothing was copied"
    if lacking:
        return (f"{path} lacks rows the gate's sweep file {s.sweep_file} measures: {', '.join(lacking)}; the gate "
                f"would never compare them again (run the whole sweep file)")
    if bad:
        return (f"{path} has rows that did not run, which the gate would never compare again:\n{listed(bad)}\n"
                f"(--expected-not-ok ROWS names rows expected not to run on this machine)")
    return ""

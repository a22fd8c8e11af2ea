#!/usr/bin/env python3
"""A stand-in ddpbench for the gate's tests, so that a gate runs in seconds: `sweep` writes the
rows it is asked for from a template (the committed ci-bench baseline's repetition 0, its times
set or scaled), taking its turns first where it runs in lockstep (DDPBENCH_LOCKSTEP_SOCKET), and
plays a fault on request; `compare` is the real ddpbench (STAND_IN_REAL) but where asked to
misbehave.

STAND_IN_BUILD names the build ("candidate", "baseline", or a test's own label).
STAND_IN_FAULTS (JSON), what each build plays: {BUILD: {"sweep": FAULT, "after": N, "slowdown": X,
  "compare": HOW or {"paired": HOW, "floor": HOW}}}
  FAULT: garbage (truncated JSON), runs-string (a runs list holding a string), extra-row (a row it
  was not asked for), missing-row (the row left out), bad-figure (a time that is a string), failed
  (the row failed), sigsegv, sigkill,
  hang (sleeps until stopped), refuse (exit 2, as for an option it does not have), no-turns (in
  lockstep, runs without taking turns, as a build older than lockstep), slow-steps (each of its 16
  steps takes 1.5 s: every turn in time, the row far too long), hide-steps (in lockstep, each turn
  takes 50 ms and its file says each step took 2 ms: time left out of its own timing), orphan (starts a child that
  ignores SIGTERM, its pid in STAND_IN_STATE/orphans, then hangs), deaf (the sweep itself ignores
  SIGTERM, its pid in STAND_IN_STATE/orphans, and hangs), sweep-list (its "sweep" a
  list), deep-json (JSON nested past any parser's depth), fifo-results (results.json a FIFO),
  other-env (another LibTorch in its environment), other-row (in lockstep, its hello names another
  row: it takes turns alone), plant (writes its row, then makes a folder at the gate's
  verdict.txt, a file in it), plant-verdict-hang (writes the gate's verdict.txt and verdict.json,
  plain, "no regression", then hangs), overwrite-baseline (writes its row, then copies its result
  file over the baseline build's of the same round, 3 s after that one was written), plant-other
  (writes its row, then makes the other build's results.json of round 2 a folder); from the
  build's Nth sweep on ("after", default 0). "slowdown" makes every time of its rows 1 + X longer.
  HOW: lie (prints "No regression." and exits 0), interrupted (the real compare, then exit 143), refuse (nothing on stdout, exit 2), bytes (a
  refusal that says bytes no UTF-8 reads, exit 2),
  cannot-judge (the real table, then a "Cannot judge" line, exit 2), crash (SIGSEGV), hang,
  erase-judge (the real compare, then the judge's undecided rows beside its own removed), or,
  for --paired, old or new: rows still undecided below the cap as an older compare says it (exit
  0, "No regression.") or a newer one (exit 2, "Undecided below the cap"). "floor" is a compare
  with --min-vs-pytorch; a compare of a file with itself alone (the gate's proof) is never played.
STAND_IN_TIMES (JSON, optional): {"rows": {ROW: {BUILD: [MEAN_S, SPREAD] | {"times": [S, ...]} | FAULT
  | "refuse-after-first"}}, "first_penalty": X, "sleep_s": S}: a row's train_time_s drawn per run
  (seeded by build, row and run), or the run's time from a list; a run that opens a pair (the
  first of consecutive runs of a row) X slower; each sweep sleeps S first.
A build's spec {"dry-run": "replace-scratch"}: its `sweep --dry-run` makes the folder of its
--out-dir (the gate's scratch folder) a file, and exits 0.
STAND_IN_STATE: a folder where each build counts its sweeps and logs each run ("BUILD ROW").
"""
from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(SOURCE / "strategies" / "pytorch"))
from lockstep_turns import LockstepTurns  # noqa: E402

TEMPLATE = SOURCE / "scripts" / "ci-bench.baseline.json"
UNDECIDED = "Undecided below the cap"


def value_of(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def replaced(path: Path, text: str) -> None:
    """`path` holds `text` whole: a sweep the gate kills while it counts (a signal, a deadline)
    left the next sweep an empty count, which it died reading (exit 1, no results: the baseline's
    garbage in a test that never faulted the baseline)."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def counted(state: Path, build: str, row: str) -> tuple[int, int]:
    """This build's sweeps so far, and its runs of `row`, before this one; a line in the run log.
    Under a lock: two builds run at once in lockstep, and may share a label."""
    counts = []
    with open(state / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name in (f"{build}.count", f"{build}.{row}.count"):
            path = state / name
            counts.append(int(path.read_text()) if path.exists() else 0)
            replaced(path, str(counts[-1] + 1))
        with open(state / "runs.log", "a") as log:
            log.write(f"{build} {row}\n")
        with open(state / "pids", "a") as pids:
            pids.write(f"{os.getpid()}\n")
    return counts[0], counts[1]


def opens_a_pair(state: Path, row: str) -> bool:
    """The first of consecutive runs of a row (of either build)."""
    with open(state / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        last = state / "last"
        previous, streak = (last.read_text().split() + ["", "0"])[:2] if last.exists() else ("", "0")
        streak = int(streak) + 1 if previous == row else 1
        replaced(last, f"{row} {streak}")
    return streak % 2 == 1


def take_turns(row: str, steps: int, step_s: float) -> float:
    """In lockstep, one rank of a world of one: every step waits for its turn. The seconds waited."""
    turns = LockstepTurns.from_environment(row, 0, 1)
    assert turns is not None
    for step in range(steps):
        if not turns.wait_for_turn():
            raise SystemExit("the coordinator hung up")
        time.sleep(step_s)
        turns.release(step)
    turns.end()
    return turns.waited_s


def scaled(run: dict, factor: float) -> None:
    run["train_time_s"] *= factor
    run["images_per_s"] /= factor
    run["steady_images_per_s"] /= factor
    for record in run.get("step_records", []):
        record["time_s"] *= factor
    for quantile in run.get("step_time_s", {}):
        run["step_time_s"][quantile] *= factor


def seconds_of(how: object, build: str, row: str, runs_of_row: int) -> float | None:
    """The train_time_s STAND_IN_TIMES gives this run (None: the template's, scaled)."""
    if isinstance(how, dict):
        return how["times"][runs_of_row]
    if isinstance(how, list):
        mean, spread = how
        return mean * (1 + spread * random.Random(f"{build}:{row}:{runs_of_row}").uniform(-1, 1))
    return None


def row_runs(row: str, reference: bool, factor: float, seconds: float | None, waited_s: float | None) -> tuple[list, list]:
    """The template's runs and planned rows for `row` (and its twin, never scaled: the reference)."""
    template = json.loads(TEMPLATE.read_text())
    known = {r["name"] for r in template["runs"]}
    like = row if row in known else "single"  # a row the template lacks (a name with a dot) is single's
    names = {like, f"{like}.torch"} if reference else {like}
    runs = [dict(r, name=r["name"].replace(like, row, 1)) for r in template["runs"]
            if r["name"] in names and r["repetition"] == 0]
    for run in runs:
        if run["name"] == row and run["status"] == "ok":
            scaled(run, factor * (seconds / run["train_time_s"] if seconds is not None else 1))
        if waited_s is not None and run["status"] == "ok":
            run["lockstep_wait_s"] = waited_s
    planned = [dict(r, name=r["name"].replace(like, row, 1)) for r in template["sweep"]["rows"] if r["name"] in names]
    for entry in planned:
        if "reference_of" in entry:
            entry["reference_of"] = row
    return runs, planned


def played(fault: str | None, row: str, out: Path) -> None:
    """The faults that end the sweep before it writes anything."""
    if fault == "refuse":
        print(f"ddpbench: error: row '{row}': refused on purpose (test)", file=sys.stderr)
        sys.exit(2)
    if fault in ("sigsegv", "crash", "sigkill"):
        os.kill(os.getpid(), signal.SIGKILL if fault == "sigkill" else signal.SIGSEGV)
    if fault == "orphan":
        child = subprocess.Popen(["sh", "-c", "trap '' TERM; exec sleep 300"])
        with open(Path(os.environ["STAND_IN_STATE"]) / "orphans", "a") as orphans:
            orphans.write(f"{child.pid}\n")
        time.sleep(3600)
    if fault == "deaf":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open(Path(os.environ["STAND_IN_STATE"]) / "orphans", "a") as orphans:
            orphans.write(f"{os.getpid()}\n")
        time.sleep(3600)
    if fault == "plant-verdict-hang":  # the gate's verdict files, plain, saying "no regression"; then hangs
        gate_out = gate_out_dir(out)
        (gate_out / "verdict.json").write_text('{"verdict": "no regression", "exit_code": 0}\n')
        (gate_out / "verdict.txt").write_text("no regression\n")
        time.sleep(3600)
    if fault == "hang":
        time.sleep(3600)


def spoiled(fault: str | None, runs: list, planned: list, row: str) -> list:
    victim = planned[0]["name"] if planned else row
    if fault == "failed":
        for run in runs:
            if run["name"] == victim:
                run.update(status="failed", reason="failed on purpose (test)")
    elif fault == "missing-row":
        runs = [run for run in runs if run["name"] != victim]
    elif fault == "extra-row":
        runs.append(dict(runs[0], name="not-asked-for"))
    elif fault == "runs-string":
        runs.append("a string")
    elif fault == "bad-figure":  # a well-formed file whose figure no proof accepts
        for run in runs:
            if run["name"] == victim:
                run["train_time_s"] = "fast"
    return runs


def sweep(args: list[str], build: str, spec: dict, times: dict, state: Path) -> int:
    if "--dry-run" in args:
        if spec.get("dry-run") == "replace-scratch":  # its --out-dir's folder (the gate's scratch) made a file
            scratch = Path(value_of(args, "--out-dir") or "").parent
            shutil.rmtree(scratch)
            scratch.write_text("the dry run's, not a folder\n")
            return 0
        return 2 if spec.get("sweep") == "refuse" and spec.get("after", 0) == 0 else 0
    row, out = value_of(args, "--rows") or "", Path(value_of(args, "--out-dir") or "")
    sweeps, runs_of_row = counted(state, build, row or "all")
    time.sleep(times.get("sleep_s", 0))
    fault = spec.get("sweep") if sweeps >= spec.get("after", 0) else None
    how = times.get("rows", {}).get(row, {}).get(build)
    if isinstance(how, str):  # a fault of this row alone
        fault = "refuse" if how == "refuse-after-first" and runs_of_row > 0 else None if how == "refuse-after-first" else how
    played(fault, row, out)
    in_lockstep = os.environ.get("DDPBENCH_LOCKSTEP_SOCKET") and fault != "no-turns"
    step_s = {"slow-steps": 1.5, "hide-steps": 0.05}.get(fault or "", 0.002)
    # Each run that will be written takes its turns under its own name, the twin's too, as ddpbench's
    # ranks and PyTorch's twins do; other-row: under another row's name (alone, beside the other build).
    waited_s = None
    for turned in ([row] + ([f"{row}.torch"] if "--reference" in args and row and "," not in row else [])
                   if in_lockstep else []):
        waited_s = take_turns("elsewhere" if fault == "other-row" else turned, 16, step_s)
    if not in_lockstep and fault == "slow-steps":
        time.sleep(16 * step_s)
    factor = (1 + float(spec.get("slowdown", 0))) * (1 + times.get("first_penalty", 0.0) * opens_a_pair(state, row))
    if "--inject-slowdown" in args:  # real busy work in ddpbench: here, the time it adds
        factor *= 1 + float(value_of(args, "--inject-slowdown") or 0)
    asked = row.split(",") if row else [r["name"] for r in json.loads(Path(value_of(args, "--file")).read_text())["rows"]]
    runs, planned = [], []
    for name in asked:  # the stored mode's sweep runs every row of its file, each --repeat times
        for repetition in range(int(value_of(args, "--repeat") or 1)):
            seconds = seconds_of(how, build, name, runs_of_row)
            jitter = 1 + 0.002 * random.Random(f"{name}:{sweeps}:{repetition}").uniform(-1, 1)
            more, planned_here = row_runs(name, "--reference" in args, factor * (jitter if seconds is None else 1),
                                          seconds, waited_s)
            runs += [dict(run, repetition=repetition) for run in more]
        planned += planned_here
    runs = spoiled(fault, runs, planned, row)
    if fault == "hide-steps":
        for run in runs:
            for record in run.get("step_records", []):
                record["time_s"] = 0.002
    template = json.loads(TEMPLATE.read_text())
    doc = dict(template, runs=runs, sweep=dict(template["sweep"], rows=planned, repeat=int(value_of(args, "--repeat") or 1)))
    doc.pop("summary", None)
    if fault == "sweep-list":
        doc["sweep"] = [1]
    if fault == "other-env":
        doc["environment"] = dict(doc["environment"], libtorch_version="9.99.0")
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc)
    if fault == "deep-json":
        text = "[" * 100000 + "]" * 100000
    if fault == "fifo-results":
        (out / "results.json").unlink(missing_ok=True)
        os.mkfifo(out / "results.json")
        return 0
    (out / "results.json").write_text(text[:100] if fault == "garbage" else text)
    if fault == "plant":
        plant(out)
    if fault == "overwrite-baseline":
        overwrite_baseline(out)
    if fault == "plant-other":  # the other build's next round of this row: its results.json a folder
        other = "candidate" if out.parents[1].name == "baseline" else "baseline"
        (out.parents[2] / other / "round-01" / out.name / "results.json").mkdir(parents=True, exist_ok=True)
    return 1 if fault == "failed" else 0


def overwrite_baseline(out: Path) -> None:
    """This build's result file copied over the baseline build's of the same round and row, once
    that one has been written and its build has had time to end (up to 5 s for it to come)."""
    theirs = out.parents[2] / "baseline" / out.parent.name / out.name / "results.json"
    for _ in range(50):
        if theirs.is_file():
            time.sleep(3)
            theirs.write_bytes((out / "results.json").read_bytes())
            return
        time.sleep(0.1)


def gate_out_dir(out: Path) -> Path:
    """The gate's --out-dir above a sweep's --out-dir: the folder that holds the gate's marker."""
    return next(folder for folder in out.parents if (folder / ".ddpbench-ci-bench-out").is_file())


def plant(out: Path) -> None:
    """A folder at the gate's verdict.txt, in the gate's --out-dir, a file of the planter's in it."""
    gate_out = gate_out_dir(out)
    (gate_out / "verdict.txt").mkdir(exist_ok=True)
    (gate_out / "verdict.txt" / "planted").write_text("planted by a build\n")


def compare(args: list[str], how: str) -> int:
    """A compare that misbehaves as `how` says, writing what the real one would write."""
    played({"crash": "sigsegv", "hang": "hang"}.get(how), "", Path("."))
    if how == "refuse":
        print("ddpbench compare: refused on purpose (test)", file=sys.stderr)
        return 2
    if how == "bytes":
        sys.stderr.buffer.write(b"ddpbench compare: \xff\xfe refused in no UTF-8 (test)\n")
        return 2
    undecided, out = value_of(args, "--undecided-out"), value_of(args, "--out")
    if how == "lie":
        text = "No regression.\n"
        if undecided:
            Path(undecided).write_text("")
    elif how in ("old", "new"):
        return undecided_as(how, args, out)
    else:  # cannot-judge: the real table and undecided rows, then the verdict no one can give
        real = subprocess.run([os.environ["STAND_IN_REAL"], "compare", *args], capture_output=True, text=True,
                              check=False)
        lines = [line for line in real.stdout.splitlines() if not line.startswith(("No regression", "Regression"))]
        text = "\n".join(lines) + "\n\nCannot judge: too few pairs at the cap (test).\n"
    if out:
        Path(out).write_text(text)
    print(text, end="")
    return 0 if how == "lie" else 2


def undecided_as(how: str, args: list[str], out: str | None) -> int:
    """The real `compare --paired`, its answer for rows still undecided below the cap as an older
    compare gave it (exit 0, "No regression.") or as a newer one does (exit 2, "Undecided below
    the cap ..."), whichever the real binary is."""
    real = subprocess.run([os.environ["STAND_IN_REAL"], "compare", *args], capture_output=True, text=True, check=False)
    undecided_out = value_of(args, "--undecided-out")
    rows = [line for line in Path(undecided_out).read_text().splitlines() if line and not line.startswith("#")] \
        if undecided_out and Path(undecided_out).exists() else []
    rc, lines = real.returncode, real.stdout.rstrip("\n").splitlines()
    if rows and rc in (0, 2) and (rc == 0 or any(line.startswith(UNDECIDED) for line in lines)):
        lines = [line for line in lines if not line.startswith(("No regression", UNDECIDED))]
        while lines and not lines[-1].strip():
            lines.pop()
        lines += ["", "No regression."] if how == "old" else [
            "", f"{UNDECIDED} (run more rounds of {', '.join(rows)}): no verdict yet (test)."]
        rc = 0 if how == "old" else 2
    text = "\n".join(lines) + "\n"
    if out:
        Path(out).write_text(text)
    print(text, end="")
    print(real.stderr, end="", file=sys.stderr)
    return rc


def compare_how(args: list[str], spec: dict) -> str | None:
    how = spec.get("compare")
    if isinstance(how, dict):
        kind = "paired" if "--paired" in args else "floor" if "--min-vs-pytorch" in args else "proof"
        return how.get(kind)
    return how


def main(argv: list[str]) -> int:
    build = os.environ.get("STAND_IN_BUILD", "candidate")
    spec = json.loads(os.environ.get("STAND_IN_FAULTS") or "{}").get(build, {})
    times = json.loads(os.environ.get("STAND_IN_TIMES") or "{}")
    if argv[:1] == ["sweep"]:
        return sweep(argv[1:], build, spec, times, Path(os.environ["STAND_IN_STATE"]))
    how = compare_how(argv, spec) if argv[:1] == ["compare"] else None
    if how == "interrupted":  # the real compare, then exit 143 as if SIGTERM had stopped it
        subprocess.run([os.environ["STAND_IN_REAL"], *argv], check=False)
        return 143
    if how == "erase-judge":  # the real compare, then the judge's undecided rows beside its own removed
        real = subprocess.run([os.environ["STAND_IN_REAL"], *argv], check=False)
        undecided = value_of(argv, "--undecided-out")
        if undecided:
            (Path(undecided).parent / Path(undecided).name.removeprefix("candidate-")).unlink(missing_ok=True)
        return real.returncode
    if how:
        return compare(argv[1:], how)
    real = os.environ["STAND_IN_REAL"]
    os.execv(real, [real, *argv])
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""A stand-in build for scripts/ci-bench --against's tests: `sweep` writes one row of the
committed ci-bench baseline with a train_time_s drawn from FAKE_DDPBENCH_SPEC (per build and
row: a mean and a relative spread, seeded by build, row and the row's count of runs on that
build), and logs each run; anything else goes to the real ddpbench (DDPBENCH_BINARY). The build
is FAKE_DDPBENCH_BUILD.

FAKE_DDPBENCH_SPEC: {"log": PATH, "state": DIR, "first_penalty": X,
                     "sleep_s": S, "rows": {ROW: {BUILD: [MEAN_S, SPREAD] or {"times": [S, ...]} or "garbage"
                                                   or "crash" or "failed" or "refuse-after-first"
                                                   or "refuse"}}}
first_penalty: a run that opens a pair (the first of consecutive runs of a row) is X slower.
"refuse": the sweep refuses the row's input every time (exit 2, as for an option it does not have).
`sweep --dry-run` is the real one's (the real ddpbench: FAKE_REAL_DDPBENCH, else DDPBENCH_BINARY).
"compare": {BUILD: {"paired": HOW, "floor": HOW}} makes that build's `compare --paired` or its
plain compare (the floor) misbehave, HOW being "lie" (prints "No regression." and exits 0 whatever
the files say), "refuse" (nothing on stdout, exit 2), "cannot-judge" (the real table, then a
"Cannot judge" line, exit 2), "crash" (killed by SIGSEGV), or, for `--paired`, "old" or "new":
the real comparison as an older compare says rows still undecided below the cap (exit 0, its
table ending "No regression.") or a newer one (exit 2, its table ending "Undecided below the
cap"), whichever the real binary is; otherwise compare is the real one.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))


def real_binary() -> str:
    return os.environ.get("FAKE_REAL_DDPBENCH") or os.environ["DDPBENCH_BINARY"]


def sweep(args: list[str], spec: dict) -> int:
    if "--dry-run" in args:
        os.execv(real_binary(), [real_binary(), "sweep", *args])
    row = args[args.index("--rows") + 1]
    out = Path(args[args.index("--out-dir") + 1])
    build = os.environ["FAKE_DDPBENCH_BUILD"]
    state = Path(spec["state"]) / f"{build}.{row}.count"
    count = int(state.read_text()) if state.exists() else 0
    state.write_text(str(count + 1))
    how = spec["rows"][row][build]
    with open(Path(spec["state"]) / "pids", "a") as pids:
        pids.write(f"{os.getpid()}\n")
    time.sleep(spec.get("sleep_s", 0))
    if how == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if how == "refuse-after-first" and count > 0 or how == "refuse":
        print(f"ddpbench: error: row '{row}': refused on purpose (test)", file=sys.stderr)
        return 2
    if isinstance(how, dict):
        seconds = how["times"][count]
    else:
        mean, spread = how if isinstance(how, list) else (1.0, 0.0)
        rng = random.Random(f"{build}:{row}:{count}")
        seconds = mean * (1 + spread * rng.uniform(-1, 1))
    last = Path(spec["state"]) / "last"
    previous, streak = (last.read_text().split() + ["", "0"])[:2] if last.exists() else ("", "0")
    streak = int(streak) + 1 if previous == row else 1
    last.write_text(f"{row} {streak}")
    if streak % 2 == 1:
        seconds *= 1 + spec.get("first_penalty", 0.0)
    if "--inject-slowdown" in args:  # real busy work in ddpbench: here, the time it adds
        seconds *= 1 + float(args[args.index("--inject-slowdown") + 1])
    baseline = json.loads((SOURCE / "scripts" / "ci-bench.baseline.json").read_text())
    runs = [r for r in baseline["runs"] if r["name"] == row and r["repetition"] == 0]
    if "--reference" in args:
        runs += [r for r in baseline["runs"] if r["name"] == f"{row}.torch" and r["repetition"] == 0]
    for run in runs:
        if run["name"] == row and how == "failed":
            run["status"], run["reason"] = "failed", "failed on purpose (test)"
        elif run["name"] == row:
            ratio = seconds / run["train_time_s"]
            run["train_time_s"] = seconds
            run["images_per_s"] /= ratio
            run["steady_images_per_s"] /= ratio
    baseline["runs"] = runs
    baseline["sweep"]["rows"] = [r for r in baseline["sweep"]["rows"] if r["name"] in {run["name"] for run in runs}]
    baseline["sweep"]["repeat"] = 1
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(baseline)[:100] if how == "garbage" else json.dumps(baseline))
    with open(spec["log"], "a") as log:
        log.write(f"{build} {row}\n")
    return 1 if how == "failed" else 0


def value_of(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def compare(args: list[str], how: str) -> int:
    """A compare that misbehaves as `how` says, writing what the real one would write."""
    if how == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if how == "refuse":
        print("ddpbench compare: refused on purpose (test)", file=sys.stderr)
        return 2
    undecided, out = value_of(args, "--undecided-out"), value_of(args, "--out")
    if how == "lie":
        text = "No regression.\n"
        if undecided:
            Path(undecided).write_text("")
    elif how in ("old", "new"):
        return undecided_as(how, args, out)
    else:  # cannot-judge: the real table and undecided rows, then the verdict no one can give
        real = subprocess.run([os.environ["DDPBENCH_BINARY"], "compare", *args], capture_output=True, text=True,
                              check=False)
        lines = [line for line in real.stdout.splitlines() if not line.startswith(("No regression", "Regression"))]
        text = "\n".join(lines) + "\n\nCannot judge: too few pairs at the cap (test).\n"
    if out:
        Path(out).write_text(text)
    print(text, end="")
    return 0 if how == "lie" else 2


UNDECIDED = "Undecided below the cap"


def undecided_as(how: str, args: list[str], out: str | None) -> int:
    """The real `compare --paired`, its answer for rows still undecided below the cap as an older
    compare gave it (exit 0, "No regression.") or as a newer one does (exit 2, "Undecided below
    the cap ..."), whichever the real binary is."""
    real = subprocess.run([real_binary(), "compare", *args], capture_output=True, text=True, check=False)
    undecided_out = value_of(args, "--undecided-out")
    rows = Path(undecided_out).read_text().split() if undecided_out and Path(undecided_out).exists() else []
    rc, lines = real.returncode, real.stdout.rstrip("\n").splitlines()
    undecided_now = bool(rows) and rc in (0, 2) and (rc == 0 or any(line.startswith(UNDECIDED) for line in lines))
    if undecided_now:
        lines = [line for line in lines if not line.startswith(("No regression", UNDECIDED))]
        while lines and not lines[-1].strip():
            lines.pop()
        if how == "old":
            lines += ["", "No regression."]
            rc = 0
        else:
            lines += ["", f"{UNDECIDED} (run more rounds of {', '.join(rows)}): no verdict yet (test)."]
            rc = 2
    text = "\n".join(lines) + "\n"
    if out:
        Path(out).write_text(text)
    print(text, end="")
    print(real.stderr, end="", file=sys.stderr)
    return rc


def main() -> int:
    spec = json.loads(os.environ["FAKE_DDPBENCH_SPEC"])
    if sys.argv[1:2] == ["sweep"]:
        return sweep(sys.argv[2:], spec)
    if sys.argv[1:2] == ["compare"]:
        kind = "paired" if "--paired" in sys.argv else "floor"
        how = spec.get("compare", {}).get(os.environ.get("FAKE_DDPBENCH_BUILD", ""), {}).get(kind)
        if how:
            return compare(sys.argv[2:], how)
    os.execv(real_binary(), [real_binary(), *sys.argv[1:]])
    return 127


if __name__ == "__main__":
    sys.exit(main())

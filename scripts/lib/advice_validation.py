"""The tuning advice's validation: `ddpbench advise` from one DDP row measured on 2 emulated hosts,
against every setting of a grid measured on 4.

On each of two link speeds, one where communication dominates the step (200 Mbit/s) and one
where most of it hides under backward (2 Gbit/s): one row on 2 hosts with PyTorch's defaults
(25 MB buckets, no hook, overlap); `ddpbench advise` from it for 4 hosts over the grid (bucket
caps 1, 5, 25 and 100 MB, each without and with fp16 compression, overlap on); every setting of
the grid measured on 4 hosts. Every row runs twice, in a forward sweep and a backward one, and
the analysis keeps the faster of its two runs.

Per link: each setting's predicted and measured step, its error, both ranks; the Spearman rank
correlation of the two orders; how far the advised setting measured from the measured best.
The issue's goals (advised within 5 % of the best, median error within 10 %, every setting
within 20 %, Spearman at least 0.8) are reported met or missed, and so are the bounds the CI
test held before it became this validation (the goals on 200 Mbit/s; on 2 Gbit/s, where each
host's 0.45 of a core is shared by backward and Gloo and every setting measures within about
10 % of the others: advised within 10 %, median 25 %, every 45 %, Spearman 0.3), judged only
where the hosts had their share of the machine.
"""
from __future__ import annotations

import math
import statistics
from pathlib import Path

from emulated_hosts import RESNET18_ROW, EmulatedHosts, Shaping, busy_outside_the_ranks, hosts_had_their_share
from projection_validation import (SWEEPS, Analysis, Goal, is_number, percent_text, relative_error, seconds_text,
                                   unjudgeable)
from recorded_rows import BadRecording, Recording, ask, normalised

PART = "advice"
SHAPINGS = {"2gbit": Shaping("2gbit", "1ms", "512kb"), "200mbit": Shaping("200mbit", "5ms", "64kb")}
BUCKET_MB = (1, 5, 25, 100)
HOOKS = ("allreduce", "fp16")
GRID = [(mb, hook) for hook in HOOKS for mb in BUCKET_MB]
DEFAULTS = (25, "allreduce")
MEASURED_FROM, ADVISED_FOR = 2, 4

# advised within, median error, every error, least Spearman
GOALS = (0.05, 0.10, 0.20, 0.8)
BOUNDS_HELD_BEFORE = {"200mbit": GOALS, "2gbit": (0.10, 0.25, 0.45, 0.3)}


def row_name(shaping: str, hosts: int, setting: tuple[int, str], sweep: int) -> str:
    return f"row-{shaping}-{hosts}-{setting[0]}mb-{setting[1]}-sweep{sweep}.json"


def plan() -> list[tuple[str, int, tuple[int, str]]]:
    rows = [(shaping, MEASURED_FROM, DEFAULTS) for shaping in SHAPINGS]
    return rows + [(shaping, ADVISED_FOR, setting) for shaping in SHAPINGS for setting in GRID]


def worlds() -> dict[int, int]:
    """Host count: the worlds the plan runs on that many hosts (each row twice)."""
    counts: dict[int, int] = {}
    for _, hosts, _ in plan():
        counts[hosts] = counts.get(hosts, 0) + SWEEPS
    return counts


def row_command(setting: tuple[int, str]) -> list[str]:
    return [*RESNET18_ROW, "--bucket-mb", str(setting[0]), "--comm-hook", setting[1]]


def measure(hosts: EmulatedHosts, binary: Path, microbench: Path, folder: Path, log=print) -> None:
    """Every row of the plan twice, forwards then backwards, into `folder`."""
    del microbench  # the advice is judged on rows alone
    shaped = None
    for sweep, order in enumerate((plan(), plan()[::-1])):
        for shaping, count, (mb, hook) in order:
            if shaped != shaping:
                hosts.shape(SHAPINGS[shaping])
                shaped = shaping
            name = row_name(shaping, count, (mb, hook), sweep)
            hosts.world(count, [str(binary), *row_command((mb, hook)), "--out", str(folder / name)])
            log(f"  {name}")


def ranks_of(values: list[float]) -> list[float]:
    """1 for the smallest; ties share the mean of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    """Pearson's correlation of the ranks (ties averaged)."""
    ra, rb = ranks_of(a), ranks_of(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return cov / var if var > 0 else 0.0


def step_s(recording: Recording, name: str) -> float:
    """The row `name`'s step, the row proven to be what its name says (its command and ranks)."""
    rows = {row_name(*key, sweep): key for key in plan() for sweep in range(SWEEPS)}
    _, hosts, setting = rows[name]
    run = recording.run_of(name, row_command(setting), hosts)
    return recording.figure(name, run, "global_batch") / recording.figure(name, run, "steady_images_per_s")


def kept_rows(recording: Recording) -> tuple[dict[tuple[str, int, tuple[int, str]], str], str]:
    """Per row of the plan, the faster of its sweeps' runs, and how far apart they were."""
    runs = {key: [row_name(*key, s) for s in range(SWEEPS)] for key in plan()}
    kept = {key: min(found, key=lambda name: step_s(recording, name)) for key, found in runs.items()}
    spread = sorted(max(step_s(recording, n) for n in found) / min(step_s(recording, n) for n in found) - 1
                    for found in runs.values())
    return kept, (f"each row run twice, the faster kept; the slower ran {100 * spread[len(spread) // 2]:.1f} % "
                  f"slower at the median, {100 * spread[-1]:.1f} % at the worst")


def advise(binary: Path, recording: Recording, row: str, scratch: Path) -> dict:
    command = ["advise", str(recording.file(row)), "--ranks", str(ADVISED_FOR), "--ranks-per-node", "1",
               "--bucket-mb", ",".join(map(str, BUCKET_MB)), "--comm-hook", ",".join(HOOKS), "--overlap", "on"]
    advice, document = ask(binary, command, scratch / f"advice-{Path(row).stem}", "advice")
    if advice["not_advised"]:
        raise BadRecording(f"ddpbench advise {row}: not advised: {advice['not_advised']}")
    return advice, document


def setting_key(setting: dict) -> tuple[float, str]:
    return float(setting["bucket_mb"]), setting["comm_hook"]


def link_goals(shaping: str, advised_gap: float, median: float, worst: float, rho: float,
               judged: tuple[bool, str]) -> list[Goal]:
    name = f"{shaping}: the goals and the bounds held before"
    figures_found = [(advised_gap, "the advised setting's gap to the best"), (median, "the median error"),
                     (worst, "the worst error"), (rho, "Spearman's rho")]
    if cannot := unjudgeable(name, figures_found):
        return [cannot]
    if not judged[0]:
        return [Goal(name, None, f"not judged: {judged[1]}")]
    figures = (f"advised {100 * advised_gap:+.1f} % from the best", f"median {100 * median:.1f} %",
               f"worst {100 * worst:.1f} %", f"Spearman {rho:.2f}")
    goals = []
    kinds = [("goal", GOALS)]
    if BOUNDS_HELD_BEFORE[shaping] != GOALS:
        kinds.append(("bound held before", BOUNDS_HELD_BEFORE[shaping]))
    for kind, (advised_within, median_error, every_error, least_rho) in kinds:
        checks = (("the advised setting within {:.0f} % of the best", 100 * advised_within,
                   advised_gap <= advised_within),
                  ("median error within {:.0f} %", 100 * median_error, median <= median_error),
                  ("every setting within {:.0f} %", 100 * every_error, worst <= every_error),
                  ("Spearman at least {:g}", least_rho, rho >= least_rho))
        for (words, value, met), figure in zip(checks, figures):
            goals.append(Goal(f"{shaping}: {words.format(value)} ({kind})", met, figure))
    return goals


def analyse_link(binary: Path, recording: Recording, rows: dict, shaping: str, scratch: Path,
                 outputs: dict) -> tuple[list[str], list[Goal]]:
    advice, document = advise(binary, recording, rows[shaping, MEASURED_FROM, DEFAULTS], scratch)
    at = advice["ranks"][0]
    predicted = {setting_key(entry["setting"]): entry["step_s"] for entry in at["settings"]}
    measured = {(float(mb), hook): step_s(recording, rows[shaping, ADVISED_FOR, (mb, hook)]) for mb, hook in GRID}
    keys = list(measured)
    missing = [k for k in keys if k not in predicted]
    if missing:
        raise BadRecording(f"ddpbench advise {rows[shaping, MEASURED_FROM, DEFAULTS]}: no prediction for {missing}")
    errors = {k: relative_error(predicted[k], measured[k]) for k in keys}
    every_number = all(map(is_number, errors.values()))
    # A prediction that is not a number has no rank: every figure of this link is then not a number.
    rho = spearman([predicted[k] for k in keys], [measured[k] for k in keys]) if every_number else math.nan
    advised = setting_key(at["advised"])
    best = min(keys, key=lambda k: measured[k])
    advised_gap = measured[advised] / measured[best] - 1
    ties = {setting_key(t) for t in at["ties"]}
    median = statistics.median(abs(e) for e in errors.values()) if every_number else math.nan
    worst = max(abs(e) for e in errors.values()) if every_number else math.nan
    outputs[f"{shaping}: {rows[shaping, MEASURED_FROM, DEFAULTS]} advised for {ADVISED_FOR} hosts"] = normalised(
        document, recording.folder)
    lines = ["", f"{shaping}: measured on {MEASURED_FROM} hosts {seconds_text(advice['measured_step_s'])} a step, "
                 f"the model there {seconds_text(advice['model_step_s'])} ({percent_text(advice['model_error'])}), backward "
                 f"{100 * advice['compute_slowdown']:.0f} % slower beside its allreduces; advised for {ADVISED_FOR}: "
                 f"{at['advised']['label']} ({len(ties - {advised})} ties)", "",
             "| bucket cap | hook | predicted step | measured step | error | predicted rank | measured rank |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    predicted_ranks = ranks_of([predicted[k] for k in keys]) if every_number else [math.nan] * len(keys)
    for k, pr, mr in zip(keys, predicted_ranks, ranks_of([measured[k] for k in keys])):
        mark = " (advised)" if k == advised else " (tie)" if k in ties else ""
        lines.append(f"| {k[0]:g} MB | {k[1]}{mark} | {seconds_text(predicted[k])} | {measured[k]:.3f} s | "
                     f"{percent_text(errors[k])} | {pr:g} | {mr:g} |")
    lines += ["", f"Spearman {rho:.2f}; errors: median {100 * median:.1f} %, worst {100 * worst:.1f} %; the advised "
                  f"setting measured {100 * advised_gap:+.1f} % from the measured best ({best[0]:g} MB, {best[1]})"]
    return lines, link_goals(shaping, advised_gap, median, worst, rho, hosts_had_their_share(recording.loads))


def analyse(binary: Path, recording: Recording, scratch: Path) -> Analysis:
    rows, noise = kept_rows(recording)
    lines = [f"{len(SHAPINGS)} links, {len(GRID)} settings measured on {ADVISED_FOR} hosts, each advised from one row "
             f"on {MEASURED_FROM}; {recording.elapsed_s:.0f} s of measuring", noise,
             busy_outside_the_ranks(recording.loads), hosts_had_their_share(recording.loads)[1]]
    goals: list[Goal] = []
    outputs: dict = {}
    for shaping in SHAPINGS:
        link_lines, link_goals_found = analyse_link(binary, recording, rows, shaping, scratch, outputs)
        lines += link_lines
        goals += link_goals_found
    return Analysis(lines, goals, outputs)

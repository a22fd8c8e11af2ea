"""The projection's validation: DDP rows (overlap on, overlap off, fp16 compression, SyncBatchNorm) across 2, 3
and 4 emulated hosts on two shapings of the links, each shaping's link measured with the
allreduce microbenchmark across the hosts (BM_RankAllreduce: a shaped veth can be bursty, so
the setting is not trusted), and `ddpbench project` held against the steps measured there.

measure() records a run into a folder (recorded_rows); analyse() reads only that folder. Every
row runs twice, in a forward sweep and a backward one, and the analysis keeps the faster of its
two runs: the machine is shared, and a burst of a neighbour's load slows whichever rows ran then
(in one CI run the first rows, 2 hosts on 1 Gbit/s, computed 40 % slower than the rows after
them). Three checks, each a table with its rate against the goal, every row within 15 %:
- its own point: every row's model on the default link (fitted to the row's own buckets' time
  on the wire), at the hosts and on the link it ran on, against the step it measured;
- other links: every row measured on one shaping projected to the other's measured link
  (--calibrate), against the step measured there;
- more hosts: every 2-host row projected to 3 and 4 hosts on the same link, by its default link
  and by the calibrated one, against the steps measured there (judged only where the hosts had
  their share of the machine: emulated_hosts.hosts_had_their_share).
Beside them: no projection the wrong way, fp16's measured allreduce time against none's within
25 % of the projected ratio, and backward's compute beside the allreduces against without
(which the model leaves out). The bounds the CI test held before it became this validation
(the median row within 15 %, every row within 30 % at its own point, 40 % calibrated, 50 % from
2 hosts to more) are reported too, as "bounds held before".
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from emulated_hosts import RESNET18_ROW, EmulatedHosts, Shaping, hosts_had_their_share, busy_outside_the_ranks
from recorded_rows import BadRecording, Recording, ask, normalised

PART = "projection"
HOST_COUNTS = (2, 3, 4)
SHAPINGS = {"1gbit": Shaping("1gbit", "1ms", "256kb"), "200mbit": Shaping("200mbit", "5ms", "64kb")}
SHAPINGS_FASTEST_FIRST = ["1gbit", "200mbit"]
VARIANTS = {"overlap": [], "no-overlap": ["--no-overlap"], "fp16": ["--comm-hook", "fp16"], "sync-bn": []}
SWEEPS = 2  # forwards, then backwards
GOAL = 0.15  # of |predicted / measured - 1|, every row
# The bounds the CI test asserted before (see the docstring): the median over the rows, and every
# row at its own point, calibrated (the microbenchmark measures the link alone; a row's
# allreduces share the host's core with backward's compute), and from 2 hosts to more on the
# default link (the link fitted to the row carries fp16's compression CPU time).
BOUND_MEDIAN, BOUND_OWN, BOUND_CALIBRATED, BOUND_MORE_HOSTS = 0.15, 0.30, 0.40, 0.50
BOUND_COMPRESSION = 0.25


# The figures of a row the analysis reads itself (the rest it asks `ddpbench project`).
FIGURES_READ = (("steady_images_per_s",), ("mean_phase_s", "allreduce_s"), ("strategy_details", "backward_compute_s"))


def row_arguments(variant: str) -> list[str]:
    """The row's command line: the ResNet-18 row with the variant's flags; the SyncBatchNorm
    variant is the row with SyncBatchNorm on, as the default DDP row runs (its collectives inside
    forward and backward, which the model costs as communication)."""
    base = [a for a in RESNET18_ROW if not (variant == "sync-bn" and a == "--no-sync-bn")]
    return [*base, *VARIANTS[variant]]


def row_name(hosts: int, shaping: str, variant: str, sweep: int) -> str:
    return f"row-{hosts}-{shaping}-{variant}-sweep{sweep}.json"


def link_name(hosts: int, shaping: str) -> str:
    return f"link-{hosts}-{shaping}.json"


def plan() -> list[tuple[str, int, str]]:
    return [(shaping, hosts, variant) for shaping in SHAPINGS for hosts in HOST_COUNTS for variant in VARIANTS]


def worlds() -> dict[int, int]:
    """Host count: the worlds the plan runs on that many hosts (each link once, each row twice)."""
    counts = {hosts: len(SHAPINGS) for hosts in HOST_COUNTS}
    for _, hosts, _ in plan():
        counts[hosts] += SWEEPS
    return counts


def run_of(recording: Recording, name: str) -> dict:
    """The row `name` of the plan, proven to be the row its name says (its command and ranks)."""
    rows = {row_name(hosts, shaping, variant, sweep): (hosts, variant) for shaping, hosts, variant in plan()
            for sweep in range(SWEEPS)}
    hosts, variant = rows[name]
    return recording.run_of(name, row_arguments(variant), hosts)


def measure(hosts: EmulatedHosts, binary: Path, microbench: Path, folder: Path, log=print) -> None:
    """Every link once, every row of the plan twice (forwards, then backwards), into `folder`."""
    shaped = None
    measured_links = set()
    for sweep, order in enumerate((plan(), plan()[::-1])):
        for shaping, count, variant in order:
            if shaped != shaping:
                hosts.shape(SHAPINGS[shaping])
                shaped = shaping
            if (count, shaping) not in measured_links:
                out = folder / link_name(count, shaping).replace(".json", "-rank{rank}.json")
                hosts.world(count, [str(microbench), "--benchmark_filter=RankAllreduce", "--benchmark_format=json",
                                    f"--benchmark_out={out}", "--benchmark_out_format=json"])
                for rank in range(1, count):  # rank 0's is the measurement
                    Path(str(out).replace("{rank}", str(rank))).unlink(missing_ok=True)
                Path(str(out).replace("{rank}", "0")).rename(folder / link_name(count, shaping))
                measured_links.add((count, shaping))
            name = row_name(count, shaping, variant, sweep)
            hosts.world(count, [str(binary), *row_arguments(variant), "--out", str(folder / name)])
            log(f"  {name}")


@dataclass
class Goal:
    name: str
    met: bool | None  # None: not judged, and why in the text
    text: str
    # Not judged because a figure of the model's is not a number: cannot judge, never a pass
    # (scripts/validate exits 2), where a busy machine's "not judged" is the measurement's.
    not_a_number: bool = False


def is_number(value: object) -> bool:
    """A finite int or float (not a bool): what a goal can be judged on."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def relative_error(predicted: object, measured: object) -> float:
    """predicted / measured - 1, or NaN where either is not a number (or measured is not positive)."""
    if is_number(predicted) and is_number(measured) and measured > 0:
        return predicted / measured - 1
    return math.nan


def seconds_text(value: object) -> str:
    return f"{value:.3f} s" if is_number(value) else f"{value} (not a number)"


def percent_text(value: object) -> str:
    return f"{100 * value:+.1f} %" if is_number(value) else f"{value} (not a number)"


def unjudgeable(name: str, found: list[tuple[object, str]]) -> Goal | None:
    """The goal `name` cannot be judged where any of its errors is not a number: named with its rows."""
    bad = [f"{what}: {error}" for error, what in found if not is_number(error)]
    if not bad:
        return None
    return Goal(name, None, f"cannot judge: {len(bad)} of {len(found)} errors not a number ({'; '.join(bad)})",
                not_a_number=True)


@dataclass
class Analysis:
    lines: list[str]
    goals: list[Goal]
    # What the model said, per question asked (its whole answer, the recording's folder written
    # <recording>): what CI holds it to on recorded rows.
    outputs: dict[str, object] = field(default_factory=dict)


class Projector:
    """`ddpbench project` on the recording's rows, each question asked once."""

    def __init__(self, binary: Path, recording: Recording, scratch: Path) -> None:
        self.binary, self.recording, self.scratch = binary, recording, scratch
        self.outputs: dict[str, object] = {}
        self.cache: dict[tuple[str, int, str | None], dict] = {}
        self.link_ranks = {link_name(count, shaping): count for shaping in SHAPINGS for count in HOST_COUNTS}

    def __call__(self, row: str, hosts: int, link: str | None) -> dict:
        """The row projected to `hosts` hosts on the link `link` measured (the default link,
        fitted to the row's own buckets, where None); --force: its own check is read here."""
        key = (row, hosts, link)
        if key in self.cache:
            return self.cache[key]
        calibrate = ["--calibrate", str(self.recording.link_of(link, self.link_ranks[link]))] if link else []
        command = ["project", str(self.recording.file(row)), "--ranks", str(hosts), "--ranks-per-node", "1", *calibrate]
        projection, document = ask(self.binary, command, self.scratch / f"projection-{len(self.cache)}", "projection")
        where = f"{row} to {hosts} hosts on {link or 'its default link'}"
        if (link is not None or hosts != projection["measured_ranks"]) and projection["not_projected"]:
            raise BadRecording(f"{where}: not projected: {projection['not_projected']}")
        # What the binary fitted, not only what the file holds: the link's rank count, as it says.
        if link is not None and not projection["fabric"]["source"].endswith(f"({self.link_ranks[link]} ranks)"):
            raise BadRecording(f"{where}: ddpbench fitted {projection['fabric']['source']}, not the link of "
                               f"{self.link_ranks[link]} ranks its name says")
        self.outputs[where] = normalised(document, self.recording.folder)
        self.cache[key] = projection
        return projection


def kept_rows(recording: Recording) -> tuple[dict[tuple[int, str, str], str], str]:
    """Per row of the plan, the faster of its sweeps' runs, and how far apart they were."""
    def images_per_s(name: str) -> float:
        return recording.figure(name, run_of(recording, name), "steady_images_per_s")

    # Every figure the analysis reads of a row, proven before anything is judged.
    for name in (row_name(count, shaping, variant, s) for shaping, count, variant in plan() for s in range(SWEEPS)):
        run = run_of(recording, name)
        for figure in FIGURES_READ:
            recording.figure(name, run, *figure)

    runs = {(count, shaping, variant): [row_name(count, shaping, variant, s) for s in range(SWEEPS)]
            for shaping, count, variant in plan()}
    rows = {key: max(found, key=images_per_s) for key, found in runs.items()}
    spread = sorted(max(map(images_per_s, found)) / min(map(images_per_s, found)) - 1 for found in runs.values())
    kept_second = sum(rows[key] == found[1] for key, found in runs.items())
    return rows, (f"each row run twice, the faster kept ({kept_second} of {len(rows)} from the second, backward, "
                  f"sweep); the slower ran {100 * spread[len(spread) // 2]:.1f} % slower at the median, "
                  f"{100 * spread[-1]:.1f} % at the worst")


def variant_words(variant: str) -> str:
    compression = {"fp16": "fp16", "sync-bn": "none, SyncBatchNorm"}.get(variant, "none")
    return f"{'off' if variant == 'no-overlap' else 'on'} | {compression}"


def own_point(project: Projector, rows: dict) -> tuple[list[str], list[tuple[float, str]]]:
    """Its own point, on the default link: the model against the step the row measured."""
    table = ["| hosts | link | overlap | compression | model | measured step | error |",
             "| ---: | --- | --- | --- | ---: | ---: | ---: |"]
    errors = []
    for (hosts, shaping, variant), row in rows.items():
        p = project(row, hosts, None)
        what = f"{hosts} hosts, {variant}, on {shaping}"
        if p["model_error"] is None and p["not_projected"]:  # not projected: cannot judge, with its reason
            errors.append((None, f"{what}: not projected: {p['not_projected']}"))
            table.append(f"| {hosts} | {shaping} | {variant_words(variant)} | - | - | {p['not_projected']} |")
            continue
        errors.append((p["model_error"], what))
        table.append(f"| {hosts} | {shaping} | {variant_words(variant)} | {seconds_text(p['model_step_s'])} | "
                     f"{seconds_text(p['measured_step_s'])} | {percent_text(p['model_error'])} |")
    return table, errors


def more_hosts(project: Projector, rows: dict) -> tuple[list[str], dict[str, list[tuple[float, str]]]]:
    """Each 2-host row to 3 and 4 hosts on the same link, by its default link and the calibrated one."""
    table = ["| link | from | to | overlap | compression | link used | predicted step | measured step | error |",
             "| --- | ---: | ---: | --- | --- | --- | ---: | ---: | ---: |"]
    errors: dict[str, list[tuple[float, str]]] = {"default": [], "calibrated": []}
    smallest = HOST_COUNTS[0]
    for shaping in SHAPINGS:
        for variant in VARIANTS:
            for hosts in HOST_COUNTS[1:]:
                measured_s = project(rows[hosts, shaping, variant], hosts, None)["measured_step_s"]
                for used, link in (("default", None), ("calibrated", link_name(hosts, shaping))):
                    predicted_s = project(rows[smallest, shaping, variant], hosts, link)["points"][0]["step_s"]
                    error = relative_error(predicted_s, measured_s)
                    errors[used].append((error, f"{shaping}, {variant}, {smallest} -> {hosts} hosts, {used} link"))
                    table.append(f"| {shaping} | {smallest} | {hosts} | {variant_words(variant)} | {used} | "
                                 f"{seconds_text(predicted_s)} | {seconds_text(measured_s)} | {percent_text(error)} |")
    return table, errors


def other_links(project: Projector, rows: dict) -> tuple[list[str], list[tuple[float, str]], list[str]]:
    """Every row to the other shaping's calibrated link; and the projections the wrong way."""
    table = ["| hosts | measured on | projected to | overlap | compression | predicted step | measured step | error |",
             "| ---: | --- | --- | --- | --- | ---: | ---: | ---: |"]
    errors, wrong_way = [], []
    for (hosts, shaping, variant), row in rows.items():
        for target in SHAPINGS:
            if target == shaping:
                continue
            projected = project(row, hosts, link_name(hosts, target))
            measured_s = project(rows[hosts, target, variant], hosts, link_name(hosts, target))["measured_step_s"]
            predicted_s = projected["points"][0]["step_s"]
            error = relative_error(predicted_s, measured_s)
            errors.append((error, f"{hosts} hosts, {variant}, {shaping} -> {target}"))
            # A slower link must project a slower step than the row measured, a faster one faster
            # (a step that is not a number is its error's, not judged here).
            own_s = projected["measured_step_s"]
            slower = SHAPINGS_FASTEST_FIRST.index(target) > SHAPINGS_FASTEST_FIRST.index(shaping)
            if is_number(predicted_s) and is_number(own_s) and (predicted_s > own_s) != slower:
                wrong_way.append(f"{hosts} hosts, {variant}, {shaping} -> {target}: {own_s:.3f} s -> "
                                 f"{predicted_s:.3f} s")
            table.append(f"| {hosts} | {shaping} | {target} | {variant_words(variant)} | {seconds_text(predicted_s)} | "
                         f"{seconds_text(measured_s)} | {percent_text(error)} |")
    return table, errors, wrong_way


def compression(project: Projector, recording: Recording, rows: dict) -> tuple[list[str], list[tuple[float, str]]]:
    """On the slow link fp16 halves the bytes: its measured communication beside the
    uncompressed row's, and the projection's."""
    table = ["| hosts | allreduce per step, none | fp16 | ratio | projected ratio |",
             "| ---: | ---: | ---: | ---: | ---: |"]
    errors = []
    for hosts in HOST_COUNTS:
        slow = {variant: rows[hosts, "200mbit", variant] for variant in ("overlap", "fp16")}
        plain, fp16 = (recording.figure(slow[variant], run_of(recording, slow[variant]), "mean_phase_s", "allreduce_s")
                       for variant in ("overlap", "fp16"))
        slow_link = link_name(hosts, "200mbit")
        ratio = 1 + relative_error(project(rows[hosts, "1gbit", "fp16"], hosts, slow_link)["points"][0]["comm_s"],
                                   project(rows[hosts, "1gbit", "overlap"], hosts, slow_link)["points"][0]["comm_s"])
        table.append(f"| {hosts} | {plain:.3f} s | {fp16:.3f} s | {fp16 / plain:.2f} | {ratio:.2f} |")
        errors.append((relative_error(fp16 / plain, ratio), f"{hosts} hosts"))
    return table, errors


def contention(recording: Recording, rows: dict) -> list[str]:
    """What the model leaves out, measured: backward's compute beside the allreduces against alone."""
    table = ["| hosts | link | backward compute, overlap | fp16 | no overlap | overlap / no overlap |",
             "| ---: | --- | ---: | ---: | ---: | ---: |"]
    for hosts in HOST_COUNTS:
        for shaping in SHAPINGS:
            compute = {variant: recording.figure(rows[hosts, shaping, variant],
                                                 run_of(recording, rows[hosts, shaping, variant]),
                                                 "strategy_details", "backward_compute_s") for variant in VARIANTS}
            table.append(f"| {hosts} | {shaping} | {compute['overlap']:.3f} s | {compute['fp16']:.3f} s | "
                         f"{compute['no-overlap']:.3f} s | {compute['overlap'] / compute['no-overlap']:.2f} |")
    return table


def rate_goals(name: str, found: list[tuple[float, str]], every_bound: float, median_bound: float | None,
               judged: tuple[bool, str]) -> tuple[str, list[Goal]]:
    """The check's rate line, its goal (every row within GOAL) and the bounds held before; an
    error that is not a number makes them one goal that cannot be judged."""
    if cannot := unjudgeable(f"{name}: every row within {100 * GOAL:.0f} % and the bounds held before", found):
        return f"{name}: {cannot.text}", [cannot]
    within = sum(abs(e) <= GOAL for e, _ in found)
    median = statistics.median(abs(e) for e, _ in found)
    worst = max(found, key=lambda f: abs(f[0]))
    line = (f"{name}: {within} of {len(found)} rows within {100 * GOAL:.0f} %, the median {100 * median:.1f} %, the "
            f"worst {100 * abs(worst[0]):.1f} % ({worst[1]})")
    if not judged[0]:
        return line, [Goal(f"{name}: every row within {100 * GOAL:.0f} %", None, f"not judged: {judged[1]}")]
    goals = [Goal(f"{name}: every row within {100 * GOAL:.0f} % (the goal)", within == len(found),
                  f"{within} of {len(found)}"),
             Goal(f"{name}: every row within {100 * every_bound:.0f} % (bound held before)",
                  abs(worst[0]) <= every_bound, f"the worst {100 * abs(worst[0]):.1f} %")]
    if median_bound is not None:
        goals.append(Goal(f"{name}: the median row within {100 * median_bound:.0f} % (bound held before)",
                          median <= median_bound, f"{100 * median:.1f} %"))
    return line, goals


def compression_goal(errors: list[tuple[object, str]]) -> Goal:
    name = f"fp16's allreduces within {100 * BOUND_COMPRESSION:.0f} % of the projected ratio (bound held before)"
    if cannot := unjudgeable(name, errors):
        return cannot
    worst = max(errors, key=lambda e: abs(e[0]))
    return Goal(name, abs(worst[0]) <= BOUND_COMPRESSION, f"the worst {100 * worst[0]:+.1f} % ({worst[1]})")


def analyse(binary: Path, recording: Recording, scratch: Path) -> Analysis:
    project = Projector(binary, recording, scratch)
    rows, noise = kept_rows(recording)
    for shaping in SHAPINGS:  # every link proven before anything is judged, as every row is
        for count in HOST_COUNTS:
            recording.link_of(link_name(count, shaping), count)
    own_table, own_errors = own_point(project, rows)
    more_table, more_errors = more_hosts(project, rows)
    links_table, link_errors, wrong_way = other_links(project, rows)
    comm_table, compression_errors = compression(project, recording, rows)
    share = hosts_had_their_share(recording.loads)
    anywhere = (True, "")
    checks = [("its own point, default link", own_errors, BOUND_OWN, BOUND_MEDIAN, anywhere),
              ("other links, calibrated", link_errors, BOUND_CALIBRATED, BOUND_MEDIAN, anywhere),
              ("2 hosts to more, default link", more_errors["default"], BOUND_MORE_HOSTS, BOUND_MEDIAN, share),
              ("2 hosts to more, calibrated link", more_errors["calibrated"], BOUND_CALIBRATED, None, share)]
    rates, goals = [], []
    for name, found, every, median, judged in checks:
        line, check_goals = rate_goals(name, found, every, median, judged)
        rates.append(line)
        goals += check_goals
    goals.append(Goal("no projection the wrong way", not wrong_way, "; ".join(wrong_way) or "none"))
    goals.append(compression_goal(compression_errors))
    shaped = f"rate{' and delay' if recording.delay else ' only (no netem here)'}"
    lines = [f"links shaped in {shaped}; each host capped at the same share of the cores whatever the host count; "
             f"{recording.elapsed_s:.0f} s of measuring", noise, busy_outside_the_ranks(recording.loads), share[1], "",
             "Its own point:", "", *own_table, "", "Other links:", "", *links_table, "", "More hosts:", "",
             *more_table, "", *rates, "", "Compression on 200 Mbit/s:", "", *comm_table, "",
             "Backward's compute beside the allreduces (which the model leaves out):", "", *contention(recording, rows)]
    return Analysis(lines, goals, project.outputs)

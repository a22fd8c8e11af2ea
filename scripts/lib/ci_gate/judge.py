"""The judge is not the accused: each comparison of the paired gate (`compare --paired` at each
look, and the PyTorch floor) runs with both builds' binaries on the same rounds files. The
baseline build's decides; the candidate's must say the same, else the candidate fails. A judge
that refuses, dies or hangs decides nothing, and that is no fault of the candidate's.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import builds, children
from .outcomes import Side, Stop, What
from .reading import Unreadable, read_text

INTERRUPTED = tuple(children.INTERRUPTED_STATUSES)


# The lines of compare's that say what it decided where it exits 2: kept however much it prints.
CANNOT_JUDGE, UNDECIDED = "Cannot judge", "Undecided below the cap"
VERDICT_LINES = (CANNOT_JUDGE, UNDECIDED)


@dataclass(frozen=True)
class Compared:
    """One `ddpbench compare` run: its exit code (None: stopped at its deadline), what it said,
    and the rows its --undecided-out named (none where it wrote no such file)."""
    rc: int | None
    stdout: str
    stderr: str
    undecided: tuple[str, ...] = ()

    def printed(self, start: str) -> bool:
        return any(line.startswith(start) for line in self.stdout.splitlines())

    @property
    def verdict(self) -> str:
        """regression, no regression, undecided (rows to run again below the cap: exit 0 with
        undecided rows from an older compare, exit 2 and "Undecided below the cap" from a newer),
        cannot judge, refused (exit 2, no table), interrupted, hung, or died."""
        if self.rc is None:
            return "hung"
        if self.rc == 1:
            return "regression"
        if self.rc == 0:
            return "undecided" if self.undecided else "no regression"
        if self.rc == 2:
            return ("cannot judge" if self.printed(CANNOT_JUDGE) else
                    "undecided" if self.printed(UNDECIDED) else "refused")
        return "interrupted" if self.rc in INTERRUPTED else "died"

    def last_said(self) -> str:
        said = self.stderr.strip().splitlines()[-1:] or self.stdout.strip().splitlines()[-1:] or [""]
        return said[0]


# What compare says, after proving both files, where no row of them ran: the file was read.
NOTHING_IN_COMMON = "the two result files have no row in common"


def read_by_its_proof(said: Compared) -> bool:
    """A compare of a file with itself read it through the proof: it did not refuse it, or found
    only that no row of it ran (a failed row, which a comparison fails closed)."""
    return said.verdict != "refused" or NOTHING_IN_COMMON in said.stderr


def run_compare(side: Side, command: list[str], deadline_s: float, undecided: Path | None = None) -> Compared:
    done = children.run(side, f"{side.value}'s `{' '.join(command[1:3])}`", command, deadline_s, capture=True,
                        markers=VERDICT_LINES)
    rows: tuple[str, ...] = ()
    if undecided is not None:
        try:
            rows = tuple(line.strip() for line in read_text(undecided).splitlines()
                         if line.strip() and not line.startswith("#"))  # a newer compare's first line names the file
        except Unreadable:
            pass
    return Compared(None if done.timed_out else done.returncode, done.stdout, done.stderr, rows)


@dataclass(frozen=True)
class Ruling:
    """What a comparison run by both builds decides: rc 0, 1 or 2 (cannot judge), the judge's
    text, where the candidate's compare disagreed, the line that says so (rc 1), where the gate
    cannot judge for another reason than the judge's own, why (note); `what` says what the
    candidate did where it fails (a regression, or its compare crashed, hung or refused)."""
    rc: int
    text: str
    judged: int
    disagreement: str = ""
    note: str = ""
    what: What = What.NO_REGRESSION


ACCUSED_FAILURES = {"refused": What.REFUSED, "died": What.CRASH, "hung": What.HANG}


def judge_fails(what: str, judge: Compared) -> None:
    """A judge that refuses, dies, hangs or is interrupted decides nothing: the baseline build's."""
    said = judge.stderr.strip() or judge.last_said()
    failures = {"refused": (What.REFUSED, f"refused the rounds: {said}"),
                "interrupted": (What.INTERRUPTED, f"was interrupted (exit {judge.rc})"),
                "died": (What.CRASH, f"exited with {judge.rc}, so nothing can judge the candidate: {said}"),
                "hung": (What.HANG, "ran past its deadline and was stopped, so nothing can judge the candidate")}
    if judge.verdict in failures:
        kind, text = failures[judge.verdict]
        raise Stop(Side.BASELINE, kind, f"the baseline build's `{what}` {text}")


def rule(what: str, judge: Compared, accused: Compared, final: bool = True) -> Ruling:
    """The baseline build's compare decides; the candidate's must say the same. "Undecided" is
    one answer whichever way a build says it (an older compare exits 0 with undecided rows, a
    newer one 2). At the final look, undecided rows cannot be judged, and a candidate whose
    compare prints its table and cannot judge (a newer rule than the judge's) leaves the gate
    unable to judge; a regression the judge found stands whatever the candidate says."""
    judge_fails(what, judge)
    judged, said = judge.verdict, accused.verdict
    last = accused.last_said()
    shown = "stopped at its deadline" if accused.rc is None else f"exit {accused.rc}"
    disagreement = (f"**The candidate fails**: its `{what}` disagreed with the baseline build's (baseline build: "
                    f"exit {judge.rc}, candidate: {shown}{': ' + last if last else ''}).\n")
    if said == "interrupted":  # the judge's regression stands: an accused's 143 voided it (125)
        if judged != "regression":
            raise Stop(Side.CANDIDATE, What.INTERRUPTED, f"the candidate's `{what}` was interrupted (exit {accused.rc})")
        return Ruling(1, judge.stdout, 1, disagreement, what=What.REGRESSION)
    if said in ACCUSED_FAILURES:  # its compare crashed, hung or refused: its own, whatever the judge said
        return Ruling(1, judge.stdout, judge.rc or 0, disagreement, what=ACCUSED_FAILURES[said])
    if judged == "cannot judge":
        return Ruling(2, judge.stdout, judge.rc or 2, what=What.CANNOT_JUDGE)
    if judged == "regression":
        return Ruling(1, judge.stdout, 1, "" if said == "regression" else disagreement, what=What.REGRESSION)
    if said in ("regression", *ACCUSED_FAILURES):
        return Ruling(1, judge.stdout, judge.rc or 0, disagreement, what=ACCUSED_FAILURES.get(said, What.REGRESSION))
    if said == "cannot judge" or (final and said == "undecided" and accused.rc == 2):
        return Ruling(2, judge.stdout, judge.rc or 0, what=What.CANNOT_JUDGE, note=(
            f"Cannot judge: the candidate's `{what}` printed its table and cannot judge what the baseline build's "
            f"judged (baseline build: exit {judge.rc}, candidate: exit {accused.rc}{': ' + last if last else ''}); "
            f"a newer rule than the judge's, so neither build's answer stands.\n"))
    if final and judged == "undecided":
        return Ruling(2, judge.stdout, judge.rc or 0, what=What.CANNOT_JUDGE, note=(
            f"Cannot judge: rows still undecided after the last round ({', '.join(judge.undecided) or 'named above'}); "
            f"this is no pass.\n"))
    return Ruling(0, judge.stdout, judge.rc or 0)


@dataclass
class PairedCompare:
    """`ddpbench compare --paired`'s settings, passed to both builds' binaries: the baseline
    build's (the judge) and the candidate's."""
    judge: str
    accused: str
    threshold: float
    alpha: float
    metrics: str
    min_rounds: int
    max_rounds: int
    allow_missing: str = ""
    coarse: str = ""  # metrics judged on the rounds the others ask for (compare --coarse-metric)
    deadline_s: float = 300.0

    def command(self, binary: str, baseline: Path, candidate: Path, undecided: Path, out: Path) -> list[str]:
        command = [builds.checked(binary), "compare", str(baseline), str(candidate), "--paired", "--threshold",
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
        the judge's exit code). The look is final at the cap or where the judge has no row
        undecided. The candidate's compare writes beside the judge's (candidate-*), never over."""
        accused_undecided = undecided.with_name("candidate-" + undecided.name)
        accused_out = out.with_name("candidate-" + out.name)
        for path in (undecided, accused_undecided, out, accused_out):  # the gate's own names: each look writes afresh
            path.unlink(missing_ok=True)
        judge = run_compare(Side.BASELINE, self.command(self.judge, baseline, candidate, undecided, out),
                            self.deadline_s, undecided)
        # What the judge wrote is read before the accused runs beside it: a candidate's compare that
        # removed the judge's file got the baseline blamed for its own regression.
        judge_wrote = undecided.is_file() and not undecided.is_symlink()
        # The same binary on both sides (scripts/gate-power's trials) would only say it twice.
        accused = judge if self.accused == self.judge else run_compare(Side.CANDIDATE, self.command(
            self.accused, baseline, candidate, accused_undecided, accused_out), self.deadline_s, accused_undecided)
        ruling = rule("compare --paired", judge, accused, final=at_cap or not judge.undecided)
        if not judge_wrote:
            raise Stop(Side.BASELINE, What.GARBAGE, f"the baseline build's `compare --paired` wrote no undecided rows "
                       f"({undecided})")
        return ruling, list(judge.undecided)


@dataclass(frozen=True)
class Floor:
    """Each candidate row against its PyTorch twin of the same rounds (the candidate's rounds
    file against itself, so nothing but the floor can fail), judged by both builds."""
    judge: str
    accused: str
    floor: float
    metrics: str
    deadline_s: float = 300.0

    def command(self, binary: str, rounds: Path) -> list[str]:
        return [builds.checked(binary), "compare", str(rounds), str(rounds), "--normalize-by", "twin", "--metric",
                *self.metrics.split(","), "--min-vs-pytorch", str(self.floor)]

    def check(self, rounds: Path) -> tuple[Ruling, str]:
        """The ruling and its report: the twin lines of the judge's table and one verdict line."""
        ruling = rule("compare --min-vs-pytorch",
                      run_compare(Side.BASELINE, self.command(self.judge, rounds), self.deadline_s),
                      run_compare(Side.CANDIDATE, self.command(self.accused, rounds), self.deadline_s))
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

"""Every exit code of scripts/ci-bench, decided in one place: who ended the gate (the candidate,
the baseline, the gate itself, the user's input, a signal to the gate) and what it was give the
code, plain and under --bisect, and the word verdict.txt holds where the gate reached a verdict.

git bisect run reads 0 as good, 125 as skip, 1-127 (but 125) as bad, and stops at 128 and
above. A commit is bad only where the candidate itself failed; it is skipped where this commit
cannot be judged (noise, its build, or the baseline build failing on this commit's sweep file
and rows); the bisection stops where no commit could be judged: REV is not a commit that
builds, the input is bad, or the gate itself failed. docs/gate.md's
table of exit codes is `markdown_table()` (Outcomes.TheDocsPrintTheTable holds them equal).
"""
from __future__ import annotations

import enum
import signal
from dataclasses import dataclass


class Side(enum.Enum):
    """Who: the side that ran the process, or the part of the gate that failed."""
    CANDIDATE = "the candidate"
    BASELINE = "the baseline"  # REV's build (--against), or the stored baseline file
    GATE = "the gate itself"
    INPUT = "the input"
    SIGNAL = "a signal to the gate"


class What(enum.Enum):
    NO_REGRESSION = "no regression"
    REGRESSION = "regression"
    CANNOT_JUDGE = "cannot judge"
    CRASH = "crash"  # died of a signal the gate did not send, or an exit status it never gives
    GARBAGE = "garbage"  # ended as it may, but wrote nothing the gate can read
    HANG = "hang"  # ran past its deadline, and was stopped
    REFUSED = "refused"  # refused its input (exit 2)
    BUILD_FAILED = "does not build"
    INTERRUPTED = "interrupted"  # SIGINT or SIGTERM, sent by someone else than the gate
    UPDATED = "baseline updated"
    MEASURED = "measured"  # --no-compare: the sweep ran, nothing was judged
    ROW_FAILED = "a row failed"  # --no-compare: the sweep ran, and a row of it failed
    FAILED = "failed"  # the gate's own error: a bug, a full disk


@dataclass(frozen=True)
class Code:
    plain: int
    bisect: int
    verdict: str | None  # verdict.txt's word; None where the gate judged nothing
    meaning: str


_REGRESSION = "regression"
_NONE = "no regression"
_CANNOT = "cannot judge"

TABLE: dict[tuple[Side, What], Code] = {
    (Side.CANDIDATE, What.NO_REGRESSION): Code(0, 0, _NONE, "every row within the threshold, its bound below it"),
    (Side.CANDIDATE, What.REGRESSION): Code(1, 1, _REGRESSION, "a row slower beyond the threshold and the noise, "
                                            "failed, missing, or below the PyTorch floor; or its compare disagreed "
                                            "with the baseline build's"),
    (Side.CANDIDATE, What.CANNOT_JUDGE): Code(2, 125, _CANNOT, "too noisy, undecided at the cap, too few rounds, "
                                              "another environment, its compare cannot read the baseline, or its "
                                              "binary changed under the gate"),
    (Side.CANDIDATE, What.CRASH): Code(1, 1, _REGRESSION, "its sweep or compare died: a signal (SIGSEGV, an OOM "
                                       "kill) or an exit status it never gives"),
    (Side.CANDIDATE, What.GARBAGE): Code(1, 1, _REGRESSION, "its sweep wrote no result the gate can read"),
    (Side.CANDIDATE, What.HANG): Code(1, 1, _REGRESSION, "its sweep or compare ran past its deadline"),
    (Side.CANDIDATE, What.REFUSED): Code(1, 1, _REGRESSION, "it refused rows or arguments the baseline build "
                                         "accepts, or what it ran in an earlier round"),
    (Side.CANDIDATE, What.BUILD_FAILED): Code(2, 125, _CANNOT, "its set-up or build failed"),
    (Side.CANDIDATE, What.INTERRUPTED): Code(2, 125, _CANNOT, "its process was stopped by SIGINT or SIGTERM that "
                                             "the gate did not send"),
    (Side.CANDIDATE, What.UPDATED): Code(0, 0, None, "--update-baseline: the measured file is the new baseline"),
    (Side.CANDIDATE, What.MEASURED): Code(0, 0, None, "--no-compare: the sweep ran, every row ok in every "
                                          "repetition (not under --bisect)"),
    (Side.CANDIDATE, What.ROW_FAILED): Code(1, 1, None, "--no-compare: the sweep ran, and a row failed or a planned "
                                            "repetition did not run"),
    (Side.BASELINE, What.CANNOT_JUDGE): Code(2, 125, _CANNOT, "the baseline build never ran a row: it can judge "
                                             "no candidate's"),
    (Side.BASELINE, What.CRASH): Code(2, 125, _CANNOT, "the baseline build's sweep or compare died"),
    (Side.BASELINE, What.GARBAGE): Code(2, 125, _CANNOT, "the baseline build wrote nothing the gate can read"),
    (Side.BASELINE, What.HANG): Code(2, 125, _CANNOT, "the baseline build ran past its deadline"),
    (Side.BASELINE, What.REFUSED): Code(2, 125, _CANNOT, "the baseline build refused the rows or arguments "
                                         "(the candidate's sweep file)"),
    (Side.BASELINE, What.BUILD_FAILED): Code(2, 128, _CANNOT, "REV is not a commit that builds"),
    (Side.BASELINE, What.INTERRUPTED): Code(2, 125, _CANNOT, "its process was stopped by SIGINT or SIGTERM that "
                                            "the gate did not send"),
    (Side.INPUT, What.REFUSED): Code(2, 128, None, "bad input: an argument, setting, file or folder the gate may "
                                     "not use, or rows both builds refuse"),
    (Side.GATE, What.FAILED): Code(2, 128, None, "the gate's own error (a bug, a full disk): never the "
                                   "candidate's"),
}


def wants_bisect(argv: list[str]) -> bool:
    """--bisect anywhere on the line, in any form a user may have meant it (--bisect=1, --bi: every
    abbreviation the parser takes; "--b" is also --baseline's): every exit code of the gate is git
    bisect's then, a usage error and a failure to start included."""
    names = [arg.partition("=")[0] for arg in argv if arg.startswith("--")]
    return any(len(name) >= 4 and "--bisect".startswith(name) for name in names)


def signal_code(signum: int) -> int:
    """The gate itself was signalled: 128 + the signal's number (130 SIGINT, 143 SIGTERM), which
    stops git bisect run, plain or not."""
    return 128 + signum


@dataclass(frozen=True)
class Outcome:
    """How one gate ended: who, what, and the reason in one line (or the comparison's report)."""
    side: Side
    what: What
    reason: str = ""
    signum: int = 0  # Side.SIGNAL only

    @property
    def code(self) -> Code:
        if self.side is Side.SIGNAL:
            number = signal_code(self.signum)
            return Code(number, number, None, "the gate was interrupted")
        try:
            return TABLE[(self.side, self.what)]
        except KeyError:
            raise ValueError(f"no exit code for {self.side.value}: {self.what.value}") from None

    def exit_code(self, bisect: bool) -> int:
        return self.code.bisect if bisect else self.code.plain

    @property
    def verdict(self) -> str | None:
        return self.code.verdict


class Stop(Exception):
    """Raised where the gate's end is decided: carries its Outcome to the one place that exits."""

    def __init__(self, side: Side, what: What, reason: str) -> None:
        super().__init__(reason)
        self.outcome = Outcome(side, what, reason)


class Signalled(BaseException):
    """The gate received SIGINT, SIGTERM or SIGHUP (a BaseException: no `except Exception` may
    swallow it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


def markdown_table() -> str:
    """The table as docs/gate.md prints it."""
    lines = ["| who | what | exit | under `--bisect` | `verdict.txt` | when |", "| --- | --- | ---: | ---: | --- | --- |"]
    for (side, what), code in TABLE.items():
        lines.append(f"| {side.value} | {what.value} | {code.plain} | {code.bisect} | {code.verdict or '(none)'} | "
                     f"{code.meaning} |")
    lines.append("| a signal to the gate | interrupted | 128 + N | 128 + N | (none) | SIGINT (130), SIGTERM (143), "
                 "SIGHUP (129), SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM to the gate: every process it started is "
                 "stopped |")
    return "\n".join(lines) + "\n"

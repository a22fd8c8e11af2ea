"""scripts/ci-bench, the CI timing gate, as one program: every argument read first, then the
folders it may use checked and claimed, then the builds, the runs and the judgement. Every way it
ends is one Outcome, turned into the exit code by outcomes.TABLE alone, here, in `finish`; a
signal to the gate stops every process it started; verdict.txt is written by every gate that
reached a verdict, a failed candidate's included.
"""
from __future__ import annotations

import io
import json
import os
import resource
import signal
import sys
import traceback
from pathlib import Path
from typing import TextIO

from . import builds, children, cli, rounds
from .builds import candidate_binary
from .out_dir import OutDir
from .outcomes import Outcome, Side, Signalled, Stop, What, wants_bisect
from .paired_mode import paired_gate
from .stored_mode import stored_gate
from .worktree import RevFolder, resolve_rev

# The signals whose default ends the process: each stops the gate's children first (SIGPIPE is
# Python's to ignore: a reader gone changes no answer; SIGKILL cannot be caught: docs/gate.md
# says what it leaves).
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
           signal.SIGALRM)
HELP = Outcome(Side.INPUT, What.REFUSED, "--help judges nothing")  # 0, or 128 under --bisect; nothing said
ROOT = Path(__file__).resolve().parents[3]


class FirstSignal:
    taken: int | None = None


def on_signal(signum: int, frame: object) -> None:
    """The first signal ends the gate; any after it is ignored, so that stopping every child it
    started is never cut short (one come before the first was ignored waits its turn: it is
    dropped here)."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    if FirstSignal.taken is not None:
        return
    FirstSignal.taken = signum
    if children.Starting.now:  # a child is starting: raised once it is registered, so that it is stopped
        children.Starting.signal = signum
        return
    raise Signalled(signum)


class ReaderGone(io.TextIOBase):
    """The gate's stdout or stderr: whatever any part of the gate prints goes where it can, and a
    reader that went away (a closed pipe) changes no answer: the stream then writes to /dev/null,
    and Python's flush at exit cannot turn it into one (exit 120, no verdict)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            self.stream.write(text)
            if "\n" in text:
                self.stream.flush()
        except OSError:
            self.gone()
        return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError:
            self.gone()

    def gone(self) -> None:
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
        except (OSError, ValueError):
            pass
        self.stream = open(os.devnull, "w")

    def fileno(self) -> int:
        return self.stream.fileno()

    def writable(self) -> bool:
        return True


def say(text: str, stream: TextIO) -> None:
    """Printed where it can be (ReaderGone)."""
    stream.write(text)
    stream.flush()


# A child's failure while the disk holding --out-dir has less than this free is the machine's.
FULL_DISK_BYTES = 1 << 20
SIDE_FOLDERS = {Side.CANDIDATE: ("candidate", "current"), Side.BASELINE: ("baseline",)}


def machines_fault(outcome: Outcome, out: OutDir | None) -> Outcome:
    """A side's failure (a crash, garbage, a refusal, a build or a judgement it could not finish)
    while the disk of --out-dir is full is no fault of that side's, unless its own folders took
    most of what the run used: the gate could not give it room to write, so the gate fails (2; 128
    under --bisect)."""
    if out is None or outcome.side not in SIDE_FOLDERS or outcome.code.plain == 0:
        return outcome
    try:
        free = out.free_bytes()
        if free >= FULL_DISK_BYTES or out.bytes_under(*SIDE_FOLDERS[outcome.side]) * 2 >= out.free_at_claim - free:
            return outcome
    except OSError:
        return outcome
    return Outcome(Side.GATE, What.FAILED, f"the disk holding --out-dir {out.given} is full ({free} bytes free), so "
                                           f"nothing the builds wrote there can be judged: the machine's fault, not "
                                           f"{outcome.side.value}'s ({outcome.what.value}: {outcome.reason})")


class GateRun:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.out: OutDir | None = None  # claimed: the verdict goes there
        self.rev: RevFolder | None = None  # claimed: REV's worktree

    def run(self, argv: list[str]) -> tuple[Outcome, str]:
        try:
            s = cli.parse(argv, self.root, dict(os.environ))
        except cli.Usage as error:
            raise cli.usage_stop(error) from None
        inputs = {"--sweep-file": s.sweep_file}
        if s.binary is not None:
            inputs["DDPBENCH_BINARY"] = s.binary
        if s.against is None:
            if s.compare or s.update_baseline:  # read, or written: never inside --out-dir
                inputs["--baseline"] = s.baseline
            if s.current:
                inputs["--current"] = s.current
            self.out = OutDir(s.out_dir, inputs, self.apart(s))
            self.out.claim()
            children.check_after_each(self.left_by)
            return stored_gate(s, self.out, candidate_binary(s, self.out))
        sha = resolve_rev(self.root, s.against)
        rev = RevFolder(self.root, s.against_dir, s.build_dir, s.binary)
        said = rev.refusal(s.out_dir, inputs)  # both folders are checked before either is made or locked
        if said:
            raise Stop(Side.INPUT, What.REFUSED, said)
        self.out = OutDir(s.out_dir, inputs, {"--against-dir": s.against_dir, **self.apart(s)})
        self.out.check()
        self.out.claim()
        children.check_after_each(self.left_by)
        rev.claim(s.out_dir, inputs)
        self.rev = rev
        return paired_gate(s, self.out, rev, sha)

    def left_by(self, what: str) -> str:
        """What `what` (a build's process, just ended) left where only the gate makes things: at
        the gate's names in --out-dir, or in the builds' round folders."""
        assert self.out is not None
        return self.out.left_by(what) or (rounds.left_in_round_folders(self.out.path, what)
                                          if self.out.lock_fd >= 0 else "")

    @staticmethod
    def apart(s: cli.Settings) -> dict[str, Path]:
        """The folders --out-dir must lie apart from in either mode: the candidate's build folder,
        where the gate builds it (inside --out-dir, its build was set aside as a stranger's and
        the candidate blamed: 1 for the user's setting)."""
        return {"the candidate's build folder (DDPBENCH_BUILD_DIR)": s.build_dir} if s.binary is None else {}

    def record_rev_worktree(self) -> None:
        """What REV's set-up and runs left in its worktree, recorded once every child has ended (a
        stamp file there read as a user's change refused every later gate: 128, the bisection
        stopped). Where it cannot be recorded, the next gate names what it finds."""
        if self.rev is None:
            return
        try:
            self.rev.record_left()
        except (Stop, OSError, Signalled) as error:  # the signals are blocked by now; never an answer's end
            say(f"ci-bench: what REV's runs left in {self.rev.src} could not be recorded ({error}): the next gate may "
                f"refuse it as a user's change\n", sys.stderr)

    def finish(self, outcome: Outcome, text: str, bisect: bool) -> int:
        """The report and the verdict; a verdict that cannot be written is the gate's failure."""
        outcome = machines_fault(outcome, self.out)
        outcome = self.strangers_set_aside(outcome)
        if outcome.verdict is not None and self.out is not None and self.out.lock_fd >= 0:
            try:
                self.write_verdict(outcome, bisect)
            except OSError as error:
                outcome = Outcome(Side.GATE, What.FAILED, f"cannot write the verdict into --out-dir "
                                                          f"{self.out.given}: {error} (the gate's own failure)")
        if self.out is not None:
            self.out.release()
        code = outcome.exit_code(bisect)
        if text:
            say(text if text.endswith("\n") else text + "\n", sys.stdout)
        if outcome.reason and (not text or outcome.side is Side.GATE):
            blame = ": the candidate fails the gate" if outcome.code.plain == 1 else ""
            say(f"scripts/ci-bench: {outcome.reason}{blame}\n", sys.stderr)
        say(f"ci-bench: {outcome.verdict or 'no verdict'}: {outcome.side.value}, {outcome.what.value} (exit {code}"
            f"{' under --bisect' if bisect else ''})\n", sys.stderr)
        return code

    def strangers_set_aside(self, outcome: Outcome) -> Outcome:
        """What stands at the gate's names in --out-dir that it did not make, set aside (renamed,
        never removed) so that the verdict can be written. A process the gate waited for that left
        it was blamed when it ended; found only now, it was left by one that escaped the gate's
        watch (a build's process in a session of its own): no pass stands beside it."""
        if self.out is None or self.out.lock_fd < 0:
            return outcome
        try:
            moved = self.out.set_strangers_aside()
        except OSError as error:
            return Outcome(Side.GATE, What.FAILED, f"cannot set aside what stands at the gate's names in --out-dir "
                                                   f"{self.out.given}: {error}")
        for was, now in moved:
            say(f"ci-bench: {was} was not made by the gate; set aside as {now} (not removed)\n", sys.stderr)
        if moved and outcome.code.plain == 0:
            return Outcome(Side.GATE, What.FAILED, f"{', '.join(str(was) for was, _ in moved)} appeared at the gate's "
                           f"names in --out-dir after every process it waited for had been checked (a build's process "
                           f"that escaped the gate's watch): no answer stands beside it")
        return outcome

    def write_verdict(self, outcome: Outcome, bisect: bool) -> None:
        assert self.out is not None
        self.out.write("verdict.json", json.dumps({
            "verdict": outcome.verdict, "exit_code": outcome.exit_code(bisect), "bisect": bisect,
            "side": outcome.side.name.lower(), "what": outcome.what.value, "reason": outcome.reason}, indent=1) + "\n")
        self.out.write("verdict.txt", outcome.verdict + "\n")  # last: the whole gate's answer


def ended(gate: GateRun, argv: list[str]) -> tuple[Outcome, str]:
    """How the gate's run ended, each end its outcome. A signal may come while one is handled
    (the traceback of the gate's own failure blocked on a slow reader): it leaves as Signalled,
    for main to read as the signal it is, never as an uncaught error (exit 1)."""
    try:
        return gate.run(argv)
    except cli.HelpShown:  # it judged nothing: under --bisect, stop rather than mark the commit good
        return HELP, ""
    except Stop as stop:
        return stop.outcome, ""
    except Signalled:
        raise
    except Exception as error:  # the gate's own failure: never the candidate's
        traceback.print_exc()
        return Outcome(Side.GATE, What.FAILED, f"the gate itself failed ({type(error).__name__}: {error}): a fault of "
                                               f"scripts/ci-bench or of the machine, never the candidate's"), ""


def give_back_core_limit() -> None:
    """The core-size limit scripts/ci-bench took from the gate alone (a SIGQUIT before its handlers
    dumped core into the user's checkout), given back for every process the gate starts."""
    given = os.environ.pop("DDPBENCH_CI_CORE_LIMIT", None)
    if given is None:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    wanted = resource.RLIM_INFINITY if given == "unlimited" else int(given) * 1024 if given.isdigit() else soft
    if hard != resource.RLIM_INFINITY and (wanted == resource.RLIM_INFINITY or wanted > hard):
        wanted = hard
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (wanted, hard))
    except (ValueError, OSError):
        pass


def main(argv: list[str], restore_handlers: bool = True) -> int:
    """The gate; its exit code. `restore_handlers` False (the program's own run, __main__) leaves
    every signal ignored once the answer is known, until the process ends: a signal after the
    verdict was written killed it by that signal, the verdict standing beside a 143."""
    bisect = wants_bisect(argv)  # anywhere on the line: git bisect run must never read a usage error as "bad"
    if not isinstance(sys.stdout, ReaderGone):  # every print of the gate's, each module's own included
        # A stream closed before the gate started (>&-) is None in Python: /dev/null then.
        sys.stdout, sys.stderr = (ReaderGone(stream if stream is not None else open(os.devnull, "w"))
                                  for stream in (sys.stdout, sys.stderr))
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # no child writes bytecode into a build's tree
    give_back_core_limit()
    for name in [name for name in os.environ if name.startswith("GIT_")]:
        del os.environ[name]  # a hook's GIT_DIR or GIT_INDEX_FILE: no child reaches the caller's repository
    previous: dict[int, object] = {}
    FirstSignal.taken, children.Starting.signal = None, None  # one gate's: main may run again in one process
    builds.forget_pins()  # one gate's binaries: main may run again in one process
    gate = GateRun(ROOT)
    # A signal at any instant from its handler's installation to the block is caught here: raised
    # before the run, in it, or as it returns (a signal after the block waits, and is ignored).
    try:
        for sig in SIGNALS:
            # One the caller ignores stays ignored, as it asked (nohup's SIGHUP; a script's `cmd &`,
            # SIGINT and SIGQUIT): the handler overrode it, and nohup no longer kept the gate alive.
            if signal.getsignal(sig) is not signal.SIG_IGN:
                previous[sig] = signal.signal(sig, on_signal)
        outcome, text = ended(gate, argv)
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # the verdict is written whole
    except Signalled as signalled:
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # on_signal raises once: no other can come here
        outcome, text = Outcome(Side.SIGNAL, What.INTERRUPTED, f"interrupted: {signalled}", signalled.signum), ""
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        children.stop_all()
        gate.record_rev_worktree()
    try:
        code = (128 if bisect else 0) if outcome is HELP else gate.finish(outcome, text, bisect)
    except Exception:  # even the report: never the candidate's
        traceback.print_exc()
        code = Outcome(Side.GATE, What.FAILED).exit_code(bisect)
    for sig in SIGNALS:  # a signal come since is too late to change the answer; none stays blocked
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    for sig, handler in previous.items() if restore_handlers else ():
        signal.signal(sig, handler)
    return code

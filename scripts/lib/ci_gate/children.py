"""Every process the gate starts runs through `run`: in a process group of its own, with a
deadline, and on the side that started it, so that how it ended is read knowing who caused it
(`Finished.problem`), a child past its deadline is stopped, and a signal to the gate stops every
child still running (`stop_all`).
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, Iterator

import lockstep  # scripts/lib, beside the package
import running_clock  # scripts/lib

from .out_dir import open_new
from .outcomes import Side, Signalled, Stop, What
from .reading import tail

_live: set[subprocess.Popen] = set()


class AfterEach:
    """What the gate checks once each build's process has ended (main sets it when --out-dir is
    claimed): what that process left where only the gate writes, in a phrase, or ""."""
    check: Callable[[str], str] | None = None


def check_after_each(check: Callable[[str], str]) -> None:
    AfterEach.check = check


def require_nothing_left(sides: tuple[Side, ...], what: str) -> None:
    """Raise the side's garbage where `what` (ended) left something at the gate's own names: its
    side's fault, found as soon as it ended, so that no other side's is blamed; where two builds
    ran at once (lockstep), neither can be told: the baseline's side, which cannot judge (125
    under --bisect), never a pass and never the candidate blamed for REV's."""
    said = AfterEach.check(what) if AfterEach.check is not None else ""
    if said and len(sides) == 1:
        raise Stop(sides[0], What.GARBAGE, said)
    if said:
        raise Stop(Side.BASELINE, What.GARBAGE, f"{said}; both builds ran at once, so neither can be blamed")


class Starting:
    """Whether a child is being started (a signal then waits, `signal`, until it is registered)."""
    now = False
    signal: int | None = None


@contextlib.contextmanager
def starting() -> Iterator[None]:
    """A block that starts a child and puts it where it will be stopped: a signal to the gate in
    it waits for the block's end, then is raised (Popen interrupted after its fork leaves a child
    no one holds). Wherever the gate starts a process, it starts it in one."""
    Starting.now = True
    try:
        yield
    finally:  # the block's own error too (a child that could not start) gives way to the signal
        Starting.now = False
        signum, Starting.signal = Starting.signal, None  # raised once: never again by a later start
        if signum is not None:
            raise Signalled(signum)
STOP_GRACE_S = 10.0
# What the gate keeps of a captured stream: its first and its last this many bytes (a compare's
# table is kilobytes). A child that floods its output past it costs the gate no more memory.
KEPT_BYTES = 4 << 20
MARKED_LINES, LINE_BYTES = 64, 4096
# ddpbench's own exit statuses for a SIGINT or SIGTERM it caught; 128 + N from a shell it ran.
INTERRUPTED_STATUSES = {130: signal.SIGINT, 143: signal.SIGTERM, -signal.SIGINT: signal.SIGINT,
                        -signal.SIGTERM: signal.SIGTERM}


@dataclass(frozen=True)
class Finished:
    """How one child ended. returncode is Popen's (negative: killed by that signal); timed_out:
    the gate stopped it at its deadline."""
    side: Side
    what: str  # "the candidate's sweep of row single": said in every reason
    returncode: int
    timed_out: bool
    deadline_s: float
    log: Path | None = None
    stdout: str = ""
    stderr: str = ""

    def problem(self, fine: tuple[int, ...] = (0, 1)) -> tuple[What, str] | None:
        """None where it ended with a status in `fine`; else what went wrong, in a phrase."""
        rc = self.returncode
        if self.timed_out:
            return What.HANG, f"ran past its deadline of {self.deadline_s:g} s and was stopped"
        if rc in fine:
            return None
        if rc == 2:
            return What.REFUSED, "refused its input (exit 2)"
        if rc in INTERRUPTED_STATUSES:
            return What.INTERRUPTED, (f"was stopped by {INTERRUPTED_STATUSES[rc].name}, which the gate did not send "
                                      f"(exit {rc})")
        if rc < 0:
            return What.CRASH, f"died of {signal_name(-rc)}"
        if rc > 128 and signal_name(rc - 128, "") != "":
            return What.CRASH, f"exited with {rc} ({signal_name(rc - 128)} in a process it started)"
        return What.CRASH, f"exited with {rc}, a status it never gives"

    def where(self) -> str:
        return f"{self.what}{f' (log: {self.log})' if self.log else ''}"

    def stop_unless_fine(self, fine: tuple[int, ...] = (0, 1)) -> None:
        """Raise the side's Stop where it ended otherwise than `fine`."""
        found = self.problem(fine)
        if found is not None:
            what, said = found
            raise Stop(self.side, what, f"{self.where()} {said}{last_words(self)}")


def signal_name(number: int, unknown: str | None = None) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}" if unknown is None else unknown


def last_words(finished: Finished, lines: int = 3) -> str:
    """The end of what it said, for a reason: its stderr, else its log."""
    text = finished.stderr or finished.stdout
    if not text and finished.log is not None:
        text = tail(finished.log)
    said = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return (": " + " / ".join(said)) if said else ""


def stop(process: subprocess.Popen) -> None:
    """The child and everything it started: SIGTERM to its group, then SIGKILL."""
    for sig, grace_s in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=grace_s)
            break
        except subprocess.TimeoutExpired:
            continue
    stop_leftovers(process)  # the group may outlive its leader: a child it started that ignores SIGTERM


def stop_leftovers(process: subprocess.Popen) -> None:
    """What an ended child left running in its session (a burner it started in the background, in
    its group or one of its own): its side's, so it ends with it, never outliving the gate or
    passing for another's load."""
    lockstep.kill_leftovers(process)


def stop_all() -> None:
    for process in list(_live):
        stop(process)
        _live.discard(process)


@dataclass
class Kept:
    """A captured stream, read to its end by a thread of its own: its head and its tail, the bytes
    dropped between them, and of those every line that starts with one of `markers` (a verdict's
    line is never lost to a flood before it; at most MARKED_LINES, each cut to LINE_BYTES)."""
    markers: tuple[bytes, ...] = ()
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    dropped: int = 0
    marked: list[bytes] = field(default_factory=list)
    line: bytearray = field(default_factory=bytearray)  # the start of the line being read
    thread: threading.Thread | None = None

    def read(self, stream: IO[bytes]) -> None:
        with stream:
            while chunk := stream.read1(1 << 16):
                if self.markers:
                    self.mark(chunk)
                room = KEPT_BYTES - len(self.head)
                self.head += chunk[:max(room, 0)]
                self.tail += chunk[max(room, 0):]
                if len(self.tail) > KEPT_BYTES:
                    self.dropped += len(self.tail) - KEPT_BYTES
                    del self.tail[:len(self.tail) - KEPT_BYTES]

    def mark(self, chunk: bytes) -> None:
        *ended, rest = chunk.split(b"\n")
        for part in ended:
            self.line += part[:max(LINE_BYTES - len(self.line), 0)]
            if self.line.startswith(self.markers) and len(self.marked) < MARKED_LINES:
                self.marked.append(bytes(self.line))
            self.line.clear()
        self.line += rest[:max(LINE_BYTES - len(self.line), 0)]

    def text(self) -> str:
        """Any bytes a child prints are read (as U+FFFD where they are no UTF-8): its output is
        never the gate's own failure. Where bytes were left out, the marked lines follow the note
        that says so, each on a line of its own."""
        marked = b"".join(line + b"\n" for line in self.marked).decode("utf-8", "replace")
        cut = f"\n[... {self.dropped} bytes left out; the marked lines of the whole stream: ...]\n{marked}" \
            if self.dropped else ""
        return (bytes(self.head).decode("utf-8", "replace") + cut + bytes(self.tail).decode("utf-8", "replace"))


def keep(stream: IO[bytes] | None, markers: tuple[str, ...] = ()) -> Kept:
    kept = Kept(tuple(marker.encode() for marker in markers))
    if stream is not None:
        kept.thread = threading.Thread(target=kept.read, args=(stream,), daemon=True)
        kept.thread.start()
    return kept


def ended_within(process: subprocess.Popen, deadline_s: float) -> bool:
    """Whether `process` ended within `deadline_s` of the time the gate ran (running_clock: a
    stopped job's pause is no build's)."""
    deadline = running_clock.now() + deadline_s
    while True:
        left_s = deadline - running_clock.now()
        if left_s <= 0:
            return process.poll() is not None
        try:
            process.wait(timeout=min(left_s, 1.0))
            return True
        except subprocess.TimeoutExpired:
            continue


def run(side: Side, what: str, command: list[str], deadline_s: float, *, log: Path | None = None,
        capture: bool = False, markers: tuple[str, ...] = (), env: dict[str, str] | None = None,
        cwd: Path | None = None) -> Finished:
    """`command` on `side`, ended by `deadline_s`; its output in `log` (or captured: the lines that
    start with one of `markers` kept wherever they come). Raises Stop(side, CRASH) where it cannot
    even start."""
    log_file = open_new(log) if log is not None else None
    stdout_to = subprocess.PIPE if capture else (log_file or subprocess.DEVNULL)
    stderr_to = subprocess.PIPE if capture else (subprocess.STDOUT if log_file else subprocess.DEVNULL)
    # A signal to the gate while a child starts waits until the child is one stop_all knows (a
    # mask would be the child's too: it could not be stopped by SIGTERM).
    try:
        with starting():
            process = subprocess.Popen(command, stdout=stdout_to, stderr=stderr_to, env=env, cwd=cwd,
                                       start_new_session=True)
            _live.add(process)
    except OSError as error:
        if log_file:
            log_file.close()
        # The gate's own child (git) that cannot start is the gate's failure; a build's, its crash.
        raise Stop(side, What.FAILED if side is Side.GATE else What.CRASH, f"{what} could not start: {error}") from None
    out, err = keep(process.stdout, markers), keep(process.stderr, markers)
    timed_out = False
    try:
        timed_out = not ended_within(process, deadline_s)
        if timed_out:
            stop(process)
    except BaseException:
        stop(process)
        raise
    finally:
        if process.poll() is not None:  # one not yet stopped stays for stop_all
            _live.discard(process)
            stop_leftovers(process)
        if log_file:
            log_file.close()
    for kept in (out, err):  # a grandchild outside the group may hold the pipe open: what was read stands
        if kept.thread is not None:
            kept.thread.join(timeout=5.0)
    if side in (Side.CANDIDATE, Side.BASELINE):  # the gate's own git writes nowhere near --out-dir
        require_nothing_left((side,), what)
    return Finished(side, what, process.returncode, timed_out, deadline_s, log, out.text(), err.text())

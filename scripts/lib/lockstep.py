"""Lockstep runs of two builds (scripts/ci-bench --against, the default; scripts/gate-power): both
builds' processes run the same row at once and take turns step by step, so that whatever the
machine does over a run falls on both (paired benchmarking at the grain of one step: duet
benchmarking, Bulej et al. ICPE 2020; tango-bench). This is the coordinator: it listens on a Unix
socket named to every rank (DDPBENCH_LOCKSTEP_SOCKET, DDPBENCH_LOCKSTEP_ARM), and for each row
gives the turn to every rank of one build, waits until each says its step is done, then passes
the turn. The order is ABBA (pair k: the first build, then the other; pair k + 1 the other way),
the first build drawn from the seed and the run. A waiting rank sleeps in a blocking read, and
OMP_WAIT_POLICY=PASSIVE keeps LibTorch's OpenMP threads (GNU libgomp) from spinning meanwhile. A
build whose training ends first is held ("end", then "bye" once the other's ends too), so its
evaluation does not run beside the other build's last steps.

A rank that hangs up before its training ends (it died) or gives no answer to its turn within
--turn-timeout-s (it hangs) ends its build's part: the coordinator closes that build's
connections, names the culprit in the run's record, and lets the other build run on alone; a
hung build is killed --hang-grace-s later. A build whose ranks do not come within
start_timeout_s of the other's, or that does not end within it of the other's end, is stuck and
stopped. Every build the coordinator stopped is in the record's "stopped", with why: its exit
status is the coordinator's doing, not a user's interruption. Protocol: harness/launch/lockstep_turns.hpp.
"""
from __future__ import annotations

import contextlib
import json
import os
import random
import selectors
import signal
import socket
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ContextManager

import running_clock  # beside this file
from output_rule import remove_tree, write_whole  # beside this file


def first_build(labels: list[str], seed: int, run: str) -> str:
    """The build that goes first in pair 0 of run `run`: drawn from the seed and the run alone."""
    return random.Random(f"ddpbench-lockstep:{seed}:{run}").choice(sorted(labels))


def pair_order(first: str, second: str, pair: int) -> list[str]:
    """ABBA...: pair k runs `first` then `second` when k is even, the other way when odd, so going
    first in a pair falls on each build equally."""
    return [first, second] if pair % 2 == 0 else [second, first]


def turn_order(first: str, second: str, pairs: int) -> list[str]:
    """The turns of `pairs` pairs, in order."""
    return [label for pair in range(pairs) for label in pair_order(first, second, pair)]


@dataclass(frozen=True)
class Participant:
    """One build's part of a lockstep run: its command (a `ddpbench sweep` of one row), its log."""
    label: str
    command: tuple[str, ...]
    log: Path


@dataclass
class Connection:
    sock: socket.socket
    buffer: bytes = b""
    closed: bool = False
    arm: str = ""
    row: str = ""
    rank: int = -1
    world: int = 0
    pid: int = 0
    sender: str = ""  # the build whose session the connecting process is in (its credentials): "" for none
    ended: bool = False
    heard: float = field(default_factory=lambda: running_clock.now())  # when it last sent anything, or hung up

    def line(self) -> str | None:
        if b"\n" not in self.buffer:
            return None
        text, self.buffer = self.buffer.split(b"\n", 1)
        return text.decode("ascii", "replace").strip()

    def send(self, text: str) -> bool:
        try:
            self.sock.sendall((text + "\n").encode("ascii"))
            return True
        except OSError:
            return False

    def describe(self) -> str:
        return f"rank {self.rank} (pid {self.pid})"


@dataclass
class Session:
    """One row's lockstep: who went first, each turn's build and seconds (the coordinator's clock,
    from its "go" to the last rank's "done"), and what went wrong, in words."""
    row: str
    first: str
    builds: list[str]
    turns: list[tuple[str, float]] = field(default_factory=list)
    culprits: list[str] = field(default_factory=list)

    def record(self) -> dict:
        return {"row": self.row, "first": self.first, "builds": self.builds,
                "turns": [{"build": build, "s": round(seconds, 6)} for build, seconds in self.turns],
                "culprits": self.culprits}


# Connections one build may hold to the turns' socket at once: a rank holds one, a row has at most
# a node's ranks and its twin's.
MOST_CONNECTIONS = 64


class PastDeadline(Exception):
    """The whole run took longer than its deadline."""


class Coordinator:
    def __init__(self, listener: socket.socket, processes: dict[str, subprocess.Popen], seed: int, run: str,
                 turn_timeout_s: float, start_timeout_s: float, hang_grace_s: float,
                 deadline_s: float | None = None, on_exit: Callable[[str], None] = lambda label: None):
        self.listener = listener
        self.on_exit, self.reported = on_exit, set()
        self.processes = processes
        self.seed, self.run = seed, run
        self.turn_timeout_s, self.start_timeout_s, self.hang_grace_s = turn_timeout_s, start_timeout_s, hang_grace_s
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ)
        self.connections: list[Connection] = []
        self.first_seen: dict[str, float] = {}  # row -> when its first hello came
        self.hung: dict[str, float] = {}  # build -> when it was found hung: killed hang_grace_s later
        self.stopped: dict[str, str] = {}  # build -> why the coordinator stopped it (hung, or stuck)
        self.first_exit: float | None = None  # when the first build's process ended
        self.deadline = None if deadline_s is None else running_clock.now() + deadline_s
        self.deadline_s = deadline_s
        self.sessions: list[Session] = []
        self.problems: list[str] = []  # hellos that could not be read
        self.holding: str | None = None  # the build whose turn it is, while its step runs
        self.deadline_culprits: list[str] = []  # the builds the deadline found holding up the run

    # --- the socket ---
    def pump(self, timeout_s: float) -> None:
        """One wait for what the ranks send: new connections, lines, hang-ups (and the builds'
        ends, reported)."""
        self.report_exits()
        self.check_deadline()
        for key, _ in self.selector.select(max(0.0, timeout_s)):
            if key.fileobj is self.listener:
                self.accept()
                continue
            connection = key.data
            connection.heard = running_clock.now()
            try:
                data = connection.sock.recv(4096)
            except OSError:
                data = b""
            if data:
                connection.buffer += data
            else:
                self.close(connection)
        self.read_hellos()
        self.kill_hung()

    def accept(self) -> None:
        """A connection from a build's process, kept; one from no build's process is closed at once,
        and a build holding MOST_CONNECTIONS open is stopped as the one that flooded the socket (the
        fourteenth attack: a candidate's thousand connections ran the gate out of files, its own
        failure, 128; or took the row's deadline, the baseline blamed)."""
        try:
            sock, _ = self.listener.accept()
        except OSError:  # out of files, or gone: what holds them is found below, as it is stopped
            return
        sender = self.sender_of(sock)
        held = sum(1 for c in self.connections if c.sender == sender and not c.closed)
        if not sender or held >= MOST_CONNECTIONS:
            sock.close()
            if sender and sender not in self.stopped:
                self.stop(sender, f"the {sender} build held {held} connections to the turns' socket at once (a "
                          f"rank needs one): it flooded the socket")
            return
        connection = Connection(sock, sender=sender)
        self.connections.append(connection)
        self.selector.register(sock, selectors.EVENT_READ, connection)

    def sender_of(self, sock: socket.socket) -> str:
        """The build the process at the other end belongs to, in the kernel's word (SO_PEERCRED): the
        build whose session holds it (each build is started as a session of its own), or whose
        process is among its ancestors (a PyTorch rank forked by the preloaded Python starts a
        session of its own). A rank's hello may not speak for another build."""
        try:
            pid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]
            session = os.getsid(pid)
        except OSError:
            return ""
        leaders = {process.pid: label for label, process in self.processes.items()}
        if session in leaders:
            return leaders[session]
        for ancestor in ancestors(pid):
            if ancestor in leaders:
                return leaders[ancestor]
        return ""

    def check_deadline(self) -> None:
        if self.deadline is not None and running_clock.now() > self.deadline:
            raise PastDeadline

    def close(self, connection: Connection) -> None:
        if not connection.closed:
            connection.closed = True
            try:
                self.selector.unregister(connection.sock)
            except (KeyError, ValueError):
                pass
            connection.sock.close()

    def read_hellos(self) -> None:
        for connection in self.connections:
            if connection.arm or connection.closed and b"\n" not in connection.buffer:
                continue
            line = connection.line()
            if line is None:
                continue
            parts = line.split()
            try:
                if len(parts) != 6 or parts[0] != "hello" or parts[1] not in self.processes:
                    raise ValueError
                rank, world, pid = int(parts[3]), int(parts[4]), int(parts[5])
                if not 0 <= rank < world:
                    raise ValueError
            except ValueError:
                self.problems.append(f"a rank said {line!r}, not 'hello BUILD ROW RANK WORLD PID' of a build here")
                self.close(connection)
                continue
            if connection.sender != parts[1]:
                self.impostor(connection, line)
                continue
            same = [c for c in self.waiting() if (c.arm, c.row, c.rank) == (parts[1], parts[2], rank)]
            connection.arm, connection.row, connection.rank, connection.world, connection.pid = \
                parts[1], parts[2], rank, world, pid
            if same:
                self.problems.append(f"the {parts[1]} build's row {parts[2]} has rank {rank} twice "
                                     f"(pids {same[0].pid} and {pid})")
                self.close(connection)
                continue
            self.first_seen.setdefault(connection.row, running_clock.now())

    def impostor(self, connection: Connection, line: str) -> None:
        """A hello for a build the sender is not part of: dropped; a build that speaks for the other
        is stopped, its fault (it could make the other build's real rank look doubled, and stuck)."""
        self.close(connection)
        if not connection.sender:
            self.problems.append(f"a process of neither build said {line!r}: refused")
            return
        self.stop(connection.sender, f"a process of the {connection.sender} build said {line!r}: it spoke "
                                     f"for another build, and was stopped")

    def waiting(self) -> list[Connection]:
        """Ranks that said hello and wait for their row's lockstep to begin."""
        return [c for c in self.connections if c.arm and not c.closed and not c.ended]

    def exited(self, label: str) -> bool:
        return self.processes[label].poll() is not None

    def report_exits(self) -> None:
        """`on_exit(label)` once for each build whose process has ended, as soon as it is seen (the
        gate reads what the build wrote then: the other, still running as the same user, could
        rewrite it later)."""
        for label in self.processes:
            if label not in self.reported and self.exited(label):
                self.reported.add(label)
                self.on_exit(label)

    # --- which row runs next ---
    def ready(self) -> tuple[str, dict[str, list[Connection]]] | None:
        """A row whose lockstep can begin: every build either has all its ranks for it, or will
        not come (ranks_of)."""
        waiting = self.waiting()
        for row in dict.fromkeys(c.row for c in waiting):
            present: dict[str, list[Connection]] = {}
            for label in self.processes:
                ranks = self.ranks_of(label, row, waiting)
                if ranks is None:
                    break
                if ranks:
                    present[label] = ranks
            else:
                if present:
                    return row, present
        return None

    def ranks_of(self, label: str, row: str, waiting: list[Connection]) -> list[Connection] | None:
        """`label`'s ranks of `row` once all have come; [] where they will not (its process ended,
        it moved on to another row, the coordinator stopped it, or start_timeout_s passed: then
        it is stopped, for run alone later it would run beside the other build's next row);
        None while they may still come."""
        ranks = [c for c in waiting if (c.arm, c.row) == (label, row)]
        if ranks and len({c.rank for c in ranks}) == ranks[0].world:
            return sorted(ranks, key=lambda c: c.rank)
        gone = self.exited(label) or any(c.arm == label and c.row != row for c in waiting) or label in self.stopped
        late = running_clock.now() - self.first_seen[row] > self.start_timeout_s
        if not (gone or late):
            return None
        if not gone:
            self.stop(label, f"the {label} build's ranks of row {row} did not all come within "
                             f"{self.start_timeout_s:g} s of the other build's: it is stuck")
        if ranks:  # some ranks never came: the build cannot step without them
            for c in ranks:
                self.close(c)
            self.problems.append(f"the {label} build's row {row}: only ranks {sorted(c.rank for c in ranks)} of "
                                 f"{ranks[0].world} came")
        return []

    # --- a row in lockstep ---
    def give_turn(self, label: str, ranks: list[Connection], session: Session, pair: int) -> str:
        """One turn: "go" to every rank of `label`, then each one's answer. Returns "stepped",
        "ended" (every rank's training is over) or "broken" (a rank hung up or did not answer)."""
        self.check_deadline()
        self.holding = label  # left set where the deadline passes in the turn: the build held the run up
        outcome = self.take_turn(label, ranks, session, pair)
        self.holding = None
        return outcome

    def take_turn(self, label: str, ranks: list[Connection], session: Session, pair: int) -> str:
        start = running_clock.now()
        for c in ranks:
            if not c.ended:
                c.send("go")
        answered = {id(c) for c in ranks if c.ended}
        while len(answered) < len(ranks):
            for c in ranks:
                if id(c) in answered:
                    continue
                line = c.line()
                if line is None and not c.closed:
                    continue
                if line is None or not (line == "end" or line.startswith("done ")):
                    session.culprits.append(
                        f"the {label} build's {c.describe()} of row {session.row} "
                        + (f"hung up in its turn of pair {pair}: it died or failed" if line is None
                           else f"said {line!r} in its turn of pair {pair}"))
                    return "broken"
                if line == "end":
                    c.ended = True
                answered.add(id(c))
            left_s = start + self.turn_timeout_s - running_clock.now()
            if len(answered) < len(ranks):
                if left_s <= 0:
                    silent = [c.describe() for c in ranks if id(c) not in answered]
                    session.culprits.append(f"the {label} build's row {session.row}: {', '.join(silent)} gave no "
                                            f"answer to its turn of pair {pair} within {self.turn_timeout_s:g} s: it hangs")
                    self.hung[label] = running_clock.now()
                    self.stopped[label] = session.culprits[-1]
                    return "broken"
                self.pump(min(left_s, 1.0))
        if all(c.ended for c in ranks):
            return "ended"
        session.turns.append((label, running_clock.now() - start))
        return "stepped"

    def run_session(self, row: str, present: dict[str, list[Connection]]) -> None:
        labels = sorted(present)
        first = first_build(labels, self.seed, self.run)
        second = next((label for label in labels if label != first), first)
        session = Session(row, first, labels)
        self.sessions.append(session)
        active = dict(present)
        ended: list[Connection] = []
        pair = 0
        while active:
            for label in pair_order(first, second, pair):
                outcome = self.give_turn(label, active[label], session, pair) if label in active else "stepped"
                if outcome == "ended":
                    ended += active.pop(label)
                elif outcome == "broken":
                    for c in active.pop(label):
                        self.close(c)
            pair += 1
        # A build whose training ended first was held: its evaluation starts with the other's.
        for c in ended:
            c.send("bye")
            self.close(c)

    def stop(self, label: str, why: str) -> None:
        self.stopped.setdefault(label, why)
        self.problems.append(why)
        stop_group(self.processes[label])

    def kill_hung(self) -> None:
        for label, since in list(self.hung.items()):
            if not self.exited(label) and running_clock.now() - since > self.hang_grace_s:
                stop_group(self.processes[label])
        # A build that has not ended start_timeout_s after the other did and after its own last word
        # is stuck after its training (its teardown, say); one whose ranks are still connected is
        # running a row on its own (the other build failed early), not stuck.
        if self.first_exit is None and any(self.exited(label) for label in self.processes):
            self.first_exit = running_clock.now()
        if self.first_exit is None:
            return
        for label in self.processes:
            mine = [c for c in self.connections if c.arm == label]
            if self.exited(label) or any(not c.closed for c in mine):
                continue
            if running_clock.now() - max([self.first_exit] + [c.heard for c in mine]) > self.start_timeout_s:
                self.stop(label, f"the {label} build did not end within {self.start_timeout_s:g} s of the other "
                                 f"build's end and its own last word: it is stuck")

    def serve(self) -> None:
        """Rows in lockstep, as their ranks come, until both builds' processes have ended, or
        the deadline (then every build still running is stopped, and the ones holding up the run
        named: deadline_culprits)."""
        try:
            self.serve_rows()
        except PastDeadline:
            running = [label for label in self.processes if not self.exited(label)]
            self.deadline_culprits = self.holding_up(running)
            for label in running:
                held = label in self.deadline_culprits
                self.stop(label, f"the lockstep run passed its deadline of {self.deadline_s:g} s "
                                 + (f"with the {label} build holding it up" if held else
                                    f"while the {label} build waited for the other"))

    def holding_up(self, running: list[str]) -> list[str]:
        """Who the run waited for when its deadline passed: the build whose turn it was; else the
        builds still running without a rank waiting for the other (slow to come, or stuck after
        their training); both where neither or both wait."""
        if self.holding is not None:
            return [self.holding]
        waiting = {c.arm for c in self.waiting()}
        culprits = [label for label in running if label not in waiting]
        return culprits or running

    def serve_rows(self) -> None:
        while True:
            self.pump(0.2)
            found = self.ready()
            if found is not None:
                self.run_session(*found)
                continue
            if all(self.exited(label) for label in self.processes):
                self.pump(0)
                if self.ready() is None:
                    return


def stat_fields(pid: int) -> list[bytes] | None:
    """/proc/PID/stat's fields after "(comm)" (a name may hold spaces and parentheses): state,
    ppid, pgrp, session, ...; None where it cannot be read (the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
        return text[text.rindex(b")") + 2:].split()
    except (OSError, ValueError):
        return None


def ancestors(pid: int) -> list[int]:
    """`pid`'s parent, its parent's, ... up to init; as far as they can be read."""
    chain: list[int] = []
    while pid > 1 and len(chain) < 4096:
        fields = stat_fields(pid)
        if fields is None or len(fields) < 2:
            break
        pid = int(fields[1])
        chain.append(pid)
    return chain


def stop_group(process: subprocess.Popen) -> None:
    """The process and everything it started: SIGTERM, then SIGKILL; then SIGKILL to what is left
    of its group (a child that ignores SIGTERM outlives a leader that does not)."""
    for sig, grace_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
            process.wait(timeout=grace_s)
            break
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue
    kill_leftovers(process)


def kill_leftovers(process: subprocess.Popen) -> None:
    """SIGKILL to what is left of the process's session once it has ended: its group, and every
    other group in its session (it was started as one; a child that moved to a group of its own,
    as shell job control does, outlived a kill of the group). A process that left the session
    (setsid) is out of reach."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in session_members(process.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def session_members(session: int) -> list[int]:
    """The processes whose session is `session`, but this one."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        fields = stat_fields(int(entry.name))
        if fields is not None and len(fields) > 3 and int(fields[3]) == session:
            members.append(int(entry.name))
    return members


class CannotStart(Exception):
    """A build's command could not be started (its binary missing, not executable, its
    interpreter absent): `label`'s fault, the error in words."""

    def __init__(self, label: str, error: OSError) -> None:
        super().__init__(f"the {label} build's sweep could not start: {error}")
        self.label = label


@dataclass
class LockstepRun:
    """What a lockstep run left: each build's exit code and the coordinator's record."""
    returncodes: dict[str, int]
    record: dict


def run_lockstep(participants: list[Participant], seed: int, run: str, record_path: Path | None = None,
                 turn_timeout_s: float = 300, start_timeout_s: float = 900, hang_grace_s: float = 30,
                 deadline_s: float | None = None,
                 starting: Callable[[], ContextManager[None]] = contextlib.nullcontext,
                 on_exit: Callable[[str], None] = lambda label: None) -> LockstepRun:
    """Both builds' commands at once, in lockstep; returns when both have ended (or `deadline_s`
    passed: every build still running is stopped). The record (JSON at `record_path`) holds each
    row's turns and culprits, and the builds the coordinator stopped, with why. Each build is
    started inside `starting()` (the gate's: a signal then waits until the build is held here, to
    be stopped); `on_exit(label)` is called as soon as each build's process is seen to end."""
    # A socket's path has at most 107 characters: under /tmp where TMPDIR's would pass them.
    temporary = tempfile.gettempdir()
    folder = Path(tempfile.mkdtemp(prefix="ddpb-lockstep-", dir=temporary if len(temporary) <= 64 else "/tmp"))
    socket_path = folder / "turns.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    processes: dict[str, subprocess.Popen] = {}
    logs = []
    try:
        listener.bind(str(socket_path))
        listener.listen(64)
        listener.setblocking(False)
        for p in participants:
            env = dict(os.environ, DDPBENCH_LOCKSTEP_SOCKET=str(socket_path), DDPBENCH_LOCKSTEP_ARM=p.label,
                       OMP_WAIT_POLICY="PASSIVE")
            if p.log.is_symlink() or p.log.is_file():  # made afresh: never written through a link left there
                p.log.unlink()
            log = os.fdopen(os.open(p.log, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644),
                            "w")
            logs.append(log)
            try:
                with starting():
                    processes[p.label] = subprocess.Popen(list(p.command), stdout=log, stderr=subprocess.STDOUT,
                                                          env=env, start_new_session=True)
            except OSError as error:
                raise CannotStart(p.label, error) from None
        coordinator = Coordinator(listener, processes, seed, run, turn_timeout_s, start_timeout_s, hang_grace_s,
                                  deadline_s, on_exit)
        coordinator.serve()
        returncodes = {label: process.wait() for label, process in processes.items()}
        coordinator.report_exits()
        for process in processes.values():  # what a build left running in its group ends with it
            kill_leftovers(process)
    except BaseException:
        for process in processes.values():
            stop_group(process)
        raise
    finally:
        for log in logs:
            log.close()
        listener.close()
        with contextlib.suppress(OSError):
            remove_tree(folder)
    record = {"seed": seed, "run": run, "sessions": [s.record() for s in coordinator.sessions],
              "problems": coordinator.problems, "hung": sorted(coordinator.hung), "stopped": coordinator.stopped,
              "deadline_culprits": coordinator.deadline_culprits, "returncodes": returncodes}
    if record_path is not None:  # whole, through a temporary name made afresh (never one a build could have left)
        write_whole(record_path, json.dumps(record, indent=1), ".tmp", hidden=False)
    return LockstepRun(returncodes, record)

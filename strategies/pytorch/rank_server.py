#!/usr/bin/env python3
"""A Python that already holds torch: a sweep starts it once (harness/runner/preloaded_python.cpp),
and each PyTorch rank of its rows is forked from it instead of starting a Python and importing
torch, torchvision and the twin's modules again (seconds per rank).

Usage: rank_server.py SOCKET PARENT_PID
Imports, writes SOCKET.modules (what it imported: "torch" or "torch torchvision"), then
listens on the Unix socket SOCKET (created under a temporary name and renamed, so a client
that finds it finds it listening). rank_client.py sends each request: the script and its
arguments, the environment and working folder, and its own standard input, output and error
(SCM_RIGHTS). The server forks; the child takes those, runs the script as __main__ and exits
with its code; the server answers "forking" before it forks, then the child's pid, then how it
ended ("exit N" or "signal N") as soon as it has. The server never touches CUDA (a forked CUDA context is unusable).

Lifetimes: the server ends with PARENT_PID (the sweep), however that ends, even mid-import;
a rank ends with its client (a client gone is a client killed) and with the server. On its
way out the server removes SOCKET, SOCKET.modules and their folder.
"""
from __future__ import annotations

import ctypes
import importlib
import json
import os
import runpy
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
PR_SET_PDEATHSIG = 1
MAX_REQUEST_BYTES = 1 << 20

# What every rank imports (reference_rank.py's imports). torchvision only where installed: a
# row that needs it and lacks it fails in its child as in a Python of its own.
PRELOADED = ("torch", "torch.distributed", "torch.utils.data", "torch.distributed.algorithms.ddp_comm_hooks",
             "cifar_data", "graphed_step", "lockstep_turns", "models", "step_clock", "training")


def die_with_parent(death_signal: int, parent: int) -> bool:
    """The kernel sends `death_signal` when the parent goes; False when it is gone already."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
    return os.getppid() == parent


def preload() -> list[str]:
    sys.path.insert(0, str(HERE))
    for module in PRELOADED:
        importlib.import_module(module)
    try:
        importlib.import_module("torchvision")
        return ["torch", "torchvision"]
    except ImportError:
        return ["torch"]


def run_child(request: dict, fds: list[int], server_fds: list[int], server: int) -> None:
    """In the forked child: become the client's process, run the script, never return."""
    code = 1
    try:
        if not die_with_parent(signal.SIGKILL, server):
            os._exit(1)
        for fd in server_fds:  # the server's sockets are not the rank's
            try:
                os.close(fd)
            except OSError:
                pass
        os.setsid()  # out of the server's process group: signals reach it by pid, from its client
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ["DDPBENCH_PYTORCH_FORKED"] = "1"
        sys.argv = list(request["argv"])
        if os.environ.get("PYTHONUNBUFFERED"):  # what a Python started with it would do
            sys.stdout.reconfigure(line_buffering=True, write_through=True)
            sys.stderr.reconfigure(write_through=True)
        runpy.run_path(sys.argv[0], run_name="__main__")
        code = 0
    except SystemExit as e:
        # As the interpreter ends on SystemExit: a number is the code, anything else is printed.
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except KeyboardInterrupt:
        # As the interpreter ends on an uncaught KeyboardInterrupt: the traceback, then death by SIGINT.
        sys.excepthook(*sys.exc_info())
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: B036 - printed as the interpreter would (torch's hook prefixes the rank)
        sys.excepthook(*sys.exc_info())
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def receive(connection: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _flags, _address = socket.recv_fds(connection, MAX_REQUEST_BYTES, 3)
    while not data.endswith(b"\n"):
        more = connection.recv(MAX_REQUEST_BYTES)
        if not more:
            raise ConnectionError("the client hung up mid-request")
        data += more
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ConnectionError(f"the client passed {len(fds)} descriptors, not its standard input, output and error")
    return json.loads(data), fds


def watch(connection: socket.socket, pid: int, forget: Callable[[socket.socket], None]) -> None:
    """Tells the client the rank's pid, then how the rank ended the moment it has; kills the
    rank when the client is gone first."""
    ended = False  # set once the rank is reaped: its pid may then be another process's
    reaping = threading.Lock()

    def client_gone() -> None:
        try:
            while connection.recv(64):
                pass
        except OSError:
            pass
        with reaping:
            if not ended:
                os.kill(pid, signal.SIGKILL)  # not reaped yet (waitid's WNOWAIT below): still this rank

    threading.Thread(target=client_gone, daemon=True).start()
    try:
        connection.sendall(f"pid {pid}\n".encode())
    except OSError:
        pass
    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    with reaping:
        ended = True  # client_gone reads it
        os.waitpid(pid, 0)
    ending = f"signal {info.si_status}" if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED) else f"exit {info.si_status}"
    try:
        connection.sendall(f"{ending}\n".encode())
    except OSError:
        pass
    finally:
        forget(connection)
        try:
            connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        connection.close()


def serve(path: Path, parent: int, imported: list[str]) -> None:
    listening = path.with_name(path.name + ".tmp")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(listening))
    server.listen(64)
    path.with_name(path.name + ".modules").write_text(" ".join(imported))
    os.rename(listening, path)
    server.settimeout(0.5)
    open_connections: set[int] = set()
    lock = threading.Lock()

    def forget(connection: socket.socket) -> None:
        with lock:
            open_connections.discard(connection.fileno())

    while os.getppid() == parent:
        try:
            connection, _ = server.accept()
        except socket.timeout:
            continue
        try:
            connection.settimeout(5)
            request, fds = receive(connection)
            connection.settimeout(None)
        except (OSError, ValueError, ConnectionError):
            connection.close()
            continue
        with lock:
            server_fds = [server.fileno(), connection.fileno(), *open_connections]
            open_connections.add(connection.fileno())
        try:
            # From here the rank may run: a client that hears this never starts it a second time.
            connection.sendall(b"forking\n")
        except OSError:
            forget(connection)
            connection.close()
            continue
        # Forked from the main thread, between requests: the child holds no lock another thread took.
        server_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            run_child(request, fds, server_fds, server_pid)
        for fd in fds:
            os.close(fd)
        threading.Thread(target=watch, args=(connection, pid, forget), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print(__doc__, file=sys.stderr)
        return 2
    path, parent = Path(argv[0]), int(argv[1])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C stops the sweep's row; the sweep then stops this
    try:
        if die_with_parent(signal.SIGTERM, parent):
            serve(path, parent, preload())
    finally:
        for leftover in (path, path.with_name(path.name + ".tmp"), path.with_name(path.name + ".modules")):
            leftover.unlink(missing_ok=True)
        try:
            path.parent.rmdir()  # the folder ddpbench made for this server, empty now
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""A Python that already holds torch: a sweep starts it once (harness/runner/pytorch_rank.cpp),
and each PyTorch rank of its rows is forked from it instead of starting a Python and importing
torch, torchvision and the twin's modules again (seconds per rank).

Usage: rank_server.py SOCKET
Imports, writes SOCKET.modules (what it imported: "torch" or "torch torchvision"), then
listens on the Unix socket SOCKET (created under a temporary name and renamed, so a client
that finds it finds it listening). rank_client.py sends each request: the script
and its arguments, the environment and working folder, and its own standard input, output and
error (SCM_RIGHTS). The server forks; the child takes those, runs the script as __main__ and
exits with its code; the server answers the child's pid, then how it ended ("exit N" or
"signal N"). A client whose connection closes before its child ends was killed: its child is
killed too. The server never touches CUDA (a forked CUDA context is unusable) and ends when
signalled or when the process that started it is gone.
"""
from __future__ import annotations

import importlib
import json
import os
import runpy
import select
import signal
import socket
import sys
import threading
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# What every rank imports, imported once here (reference_rank.py's imports). torchvision only
# where installed: a row that needs it and lacks it fails in its child as in its own Python.
PRELOADED = ("torch", "torch.distributed", "torch.utils.data", "torch.distributed.algorithms.ddp_comm_hooks",
             "cifar_data", "graphed_step", "lockstep_turns", "models", "step_clock", "training")
for module in PRELOADED:
    importlib.import_module(module)
IMPORTED = ["torch"]
try:
    importlib.import_module("torchvision")
    IMPORTED.append("torchvision")
except ImportError:
    pass

MAX_REQUEST_BYTES = 1 << 20


def run_child(request: dict, fds: list[int], server_fds: list[int]) -> None:
    """In the forked child: become the client's process, run the script, never return."""
    code = 1
    try:
        for fd in server_fds:  # the server's sockets are not the rank's
            try:
                os.close(fd)
            except OSError:
                pass
        os.setsid()  # out of the server's process group: signals reach it by pid, from its client
        for target, fd in enumerate(fds[:3]):
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
        runpy.run_path(sys.argv[0], run_name="__main__")
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: B036 - the child's failure is its exit code and traceback
        traceback.print_exc()
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
        raise ConnectionError(f"the client passed {len(fds)} descriptors, not its standard input, output and error")
    return json.loads(data), fds


def watch(connection: socket.socket, pid: int, open_connections: set[int], lock: threading.Lock) -> None:
    """Tells the client how its child ended; kills the child when the client is gone first."""
    with connection:
        try:
            connection.sendall(f"pid {pid}\n".encode())
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    ending = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
                    connection.sendall(f"{ending}\n".encode())
                    return
                readable, _, _ = select.select([connection], [], [], 0.05)
                if readable and not connection.recv(1):
                    raise ConnectionError("the client is gone")
        except OSError:  # the client is gone: so is its child
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        finally:
            with lock:
                open_connections.discard(connection.fileno())


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    path = Path(argv[0])
    parent = os.getppid()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C stops the sweep's row; the sweep then stops this
    listening = path.with_name(path.name + ".tmp")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(listening))
    server.listen(64)
    # What a row's check for torch (and torchvision) reads instead of starting a Python to look.
    path.with_name(path.name + ".modules").write_text(" ".join(IMPORTED))
    os.rename(listening, path)
    server.settimeout(0.5)
    open_connections: set[int] = set()
    lock = threading.Lock()
    try:
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
            # Forked from the main thread, between requests: the child holds no lock another thread took.
            with lock:
                server_fds = [server.fileno(), connection.fileno(), *open_connections]
                open_connections.add(connection.fileno())
            pid = os.fork()
            if pid == 0:
                run_child(request, fds, server_fds)
            for fd in fds:
                os.close(fd)
            threading.Thread(target=watch, args=(connection, pid, open_connections, lock), daemon=True).start()
    finally:
        server.close()
        path.unlink(missing_ok=True)
        path.with_name(path.name + ".modules").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Runs a PyTorch rank forked from the sweep's preloaded Python (rank_server.py) as if it were
this process: the rank gets this process's standard input, output and error, environment and
working folder; SIGINT and SIGTERM sent here reach it; this process ends as it ends (its exit
code, or the same signal). Where no server answers, it runs the script in a fresh Python
instead, so a rank never depends on the server being there. Imports nothing heavy: run with
`python -S` it starts in milliseconds.

Usage: python -S rank_client.py SOCKET SCRIPT [ARG...]
"""
from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time

FAILED_RANK_PAUSE_S = 0.25


def fresh_python(argv: list[str]) -> None:
    # Without -S: the script needs the site-packages this process was started without.
    os.execv(sys.executable, [sys.executable, *argv])


def read_line(connection: socket.socket, pending: bytearray) -> str | None:
    while b"\n" not in pending:
        try:
            chunk = connection.recv(256)
        except InterruptedError:
            continue
        if not chunk:
            return None
        pending += chunk
    line, _, rest = bytes(pending).partition(b"\n")
    pending[:] = rest
    return line.decode()


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    path, script_argv = argv[0], argv[1:]
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
    except OSError:
        connection.close()
        fresh_python(script_argv)
    request = {"argv": script_argv, "env": dict(os.environ), "cwd": os.getcwd()}
    socket.send_fds(connection, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
    pending = bytearray()
    if read_line(connection, pending) != "forking":
        # The server ended before it took the request: nothing ran, so the rank runs on its own.
        connection.close()
        fresh_python(script_argv)
    first = read_line(connection, pending)
    if first is None or not first.startswith("pid "):
        # It may have forked the rank and died: never start it a second time (the rank dies with it).
        print(f"rank_client: the preloaded Python ({path}) ended while it started the rank", file=sys.stderr)
        return 1
    pid = int(first.split()[1])

    def forward(number: int, _frame: object) -> None:
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    ending = read_line(connection, pending)
    if ending is None:
        print(f"rank_client: the preloaded Python ({path}) ended before rank process {pid} did; its exit code is "
              "unknown", file=sys.stderr)
        return 1
    kind, value = ending.split()
    if kind == "exit" and value != "0":
        # A forked rank leaves at once when it fails (no interpreter shutdown), where a Python of
        # its own takes a while: the pause keeps a rank that failed because a peer was killed from
        # ending before that peer's death reaches the launcher, which names the first as the culprit.
        time.sleep(FAILED_RANK_PAUSE_S)
    if kind == "signal":
        try:
            signal.signal(int(value), signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL and SIGSTOP keep theirs
            pass
        os.kill(os.getpid(), int(value))
    return int(value)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

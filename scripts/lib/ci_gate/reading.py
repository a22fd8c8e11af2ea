"""What the gate reads that it did not write (a build's results, a compare's rows, a log, the
user's files) is read here alone: a plain file only (a FIFO, a device or a folder would block the
read or mean nothing), whole, at most MOST_BYTES, as text whatever its bytes; JSON whatever its
shape or depth. Every way it cannot be read is one Unreadable, which the caller turns into the
fault of the side that wrote it, never the gate's own failure.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

MOST_BYTES = 256 << 20


class Unreadable(ValueError):
    """The file cannot be read as what it should be; the message says why."""


def read_text(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise Unreadable(f"{path}: {error.strerror}") from None
    try:  # the kind is known from the descriptor, before any read (a folder opens, then cannot be read)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable(f"{path} is not a plain file")
        if info.st_size > MOST_BYTES:
            raise Unreadable(f"{path} holds {info.st_size} bytes, more than any file the gate reads")
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read().decode("utf-8", errors="replace")
    except OSError as error:
        raise Unreadable(f"{path}: {error.strerror}") from None
    finally:
        os.close(fd)


def read_json(path: Path) -> object:
    text = read_text(path)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise Unreadable(f"{path} is not JSON ({type(error).__name__}: {str(error)[:200]})") from None


def tail(path: Path, most: int = 4000) -> str:
    """The end of a log, or "" where it cannot be read."""
    try:
        return read_text(path)[-most:]
    except Unreadable:
        return ""

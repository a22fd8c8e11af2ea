"""The output rule of every script, as ddpbench's commands keep it (harness/base/output_rule.hpp):
an output never resolves to an input or to another output (by path, or as the same file through
a link), and anything existing at an output path (a file, a folder) is replaced only where it is
of the script's own kind, which the output's recogniser knows. Checked before any work.

API:
  check_outputs(inputs, outputs) -> None
      inputs:  {name: path or None}            what the script reads ("RESULTS": "row.json")
      outputs: {name: (path or None, kind, recognise)}   what it writes: its flag, its path, what
               it is ("a figures file"), and recognise(path) -> bool, whether what exists there
               is the script's own (an earlier output; for a folder output, say, an empty folder).
               A None path is not given and is left out.
      Raises OutputClash (a ValueError) whose message names both paths.
  refuse_clashes(program, inputs, outputs) -> None
      check_outputs, or the one-line error "PROGRAM: MESSAGE" on stderr and exit 2.
  write_whole(path, data, suffix=".partial", hidden=True) -> None
      `path` whole or not at all, through a temporary name made afresh beside it (never a name
      that exists, so never a file or link someone left at a known name), then renamed over it,
      with the mode of the file it replaces, else 0644 (mkstemp's 0600 would narrow it). The
      rename makes a new file: a hard link to the old one keeps the old content. The temporary name is
      [.]NAME.RANDOM`suffix` (the gate's documented names: hidden=False, its own suffix).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Mapping, Union

PathLike = Union[str, "os.PathLike[str]"]
Recognise = Callable[[Path], bool]
Output = tuple["PathLike | None", str, Recognise]  # (path, kind, recognise)


class OutputClash(ValueError):
    """An output that would replace an input, another output, or a file of another kind."""


def _identity(path: PathLike) -> tuple[int, int, str] | None:
    """The file a path lands on, as (device, inode, "") where it exists, else its folder's
    (device, inode) and its name: two spellings through a bind mount or a link of the folder are
    one file before either is written. None where not even the folder exists yet."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
        return st.st_dev, st.st_ino, ""
    except OSError:
        pass
    try:
        st = os.stat(os.path.dirname(real) or ".")
        return st.st_dev, st.st_ino, os.path.basename(real)
    except OSError:
        return None


def _same_file(a: PathLike, b: PathLike) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    ia, ib = _identity(a), _identity(b)
    return ia is not None and ia == ib


def _lands_under(inner: PathLike, outer: PathLike) -> bool:
    """Whether `inner` lands under `outer`, both where the kernel resolves them."""
    ri, ro = Path(os.path.realpath(inner)), Path(os.path.realpath(outer))
    return ro in ri.parents


def check_outputs(inputs: Mapping[str, PathLike | None], outputs: Mapping[str, Output]) -> None:
    given_inputs = [(name, path) for name, path in inputs.items() if path]
    seen: list[tuple[str, PathLike]] = []
    for name, (path, kind, recognise) in outputs.items():
        if not path:
            continue
        for input_name, input_path in given_inputs:
            if _same_file(path, input_path):
                raise OutputClash(f"{name} '{path}' is the file {input_name} '{input_path}' reads: an output never "
                                  "replaces an input (give another path)")
        for other_name, other_path in seen:
            if _same_file(path, other_path):
                raise OutputClash(f"{name} '{path}' is the file {other_name} '{other_path}' writes too: each output "
                                  "is a file of its own (give another path)")
        for other_name, (other_path, _, _) in outputs.items():
            if other_path and other_name != name and _lands_under(path, other_path):
                raise OutputClash(f"{name} '{path}' lies under the file {other_name} '{other_path}' writes: one output "
                                  "would be made a folder of for the other (give another path)")
        seen.append((name, path))
        # What is there where the write lands (realpath resolves "link/.." as the kernel does), not
        # only at the spelling: "missing/../link/../notes.md" lands on notes.md once "missing" is made.
        there = path if os.path.lexists(path) else os.path.realpath(path)
        if os.path.lexists(there) and not recognise(Path(there)):
            raise OutputClash(f"{name} '{path}' exists and is not {kind} (what {name} writes): it replaces only what "
                              "is of its own kind (give a new path, or remove what is there)")


def refuse_clashes(program: str, inputs: Mapping[str, PathLike | None], outputs: Mapping[str, Output]) -> None:
    try:
        check_outputs(inputs, outputs)
    except OutputClash as clash:
        print(f"{program}: {clash}", file=sys.stderr)
        sys.exit(2)


def write_whole(path: PathLike, data: str | bytes, suffix: str = ".partial", hidden: bool = True) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)),
                               prefix=f"{'.' if hidden else ''}{os.path.basename(path)}.", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode() if isinstance(data, str) else data)
        try:  # a file it replaces keeps its mode (a user's 0600 baseline stays 0600)
            mode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def remove_tree(path: PathLike) -> None:
    """A folder a program made, and everything in it, however deep: `rm -rf` walks it without
    recursing in this process (shutil.rmtree recursed once a level: a build that left 1500 nested
    folders in its round folder made every later gate fail, RecursionError, 128). Links in it are
    removed, never followed; nothing on another file system is entered. Raises OSError naming the
    folder where it could not be removed."""
    done = subprocess.run(["rm", "-rf", "--one-file-system", "--", os.fspath(path)], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0 or os.path.lexists(path):
        raise OSError(f"cannot remove {os.fspath(path)}: {done.stderr.strip() or 'it is still there'}")

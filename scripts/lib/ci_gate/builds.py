"""The two builds: the candidate (this checkout, built by its own set-up, or DDPBENCH_BINARY) and
REV (built by REV's own set-up in its worktree, --against). Each is built as a child of its own
side: a candidate that does not build cannot be judged (125 under --bisect), a REV that does not
build can judge no commit (128)."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import output_rule  # scripts/lib, beside the package

from . import children
from .cli import Settings
from .out_dir import OutDir
from .outcomes import Side, Stop, What
from .worktree import RevFolder, file_digest


def set_up(side: Side, what: str, setup_sh: Path, deadline_s: float, log: Path, env: dict[str, str]) -> None:
    """`ddpbench_setup` of `setup_sh` (the set-up installs what is missing, then builds)."""
    if not setup_sh.is_file():
        raise Stop(side, What.BUILD_FAILED, f"{what}: there is no {setup_sh}")
    done = children.run(side, what, ["bash", "-c", 'source "$1"; ddpbench_setup', "setup", str(setup_sh)], deadline_s,
                        log=log, env=env)
    found = done.problem(fine=(0,))
    if found is not None:
        kind = What.INTERRUPTED if found[0] is What.INTERRUPTED else What.BUILD_FAILED
        said = f"exited with {done.returncode}" if found[0] in (What.CRASH, What.REFUSED) and done.returncode > 0 else found[1]
        raise Stop(side, kind, f"{done.where()}: the set-up or build failed: it {said}{children.last_words(done)}")


def candidate_binary(s: Settings, out: OutDir) -> str:
    """The candidate's ddpbench: DDPBENCH_BINARY, or this checkout built by its own set-up."""
    if s.binary is not None:
        return pin(Side.CANDIDATE, Path(s.binary))
    set_up(Side.CANDIDATE, "the candidate's set-up", s.root / "scripts" / "lib" / "setup.sh", s.deadlines.build_s,
           out / "candidate-build.log", dict(os.environ, DDPBENCH_BUILD_DIR=str(s.build_dir)))
    binary = s.build_dir / "ddpbench"
    if not os.access(binary, os.X_OK):
        raise Stop(Side.CANDIDATE, What.BUILD_FAILED, f"the set-up or build failed: it left no {binary}")
    return pin(Side.CANDIDATE, binary)


def pin(side: Side, binary: Path) -> str:
    """`binary` as it is now, checked before every later use (checked)."""
    _pinned[str(binary)] = (side, file_digest(binary))
    return str(binary)


def rev_binary(s: Settings, rev: RevFolder, sha: str, out: OutDir) -> str:
    """REV's ddpbench, built by REV's own set-up into DIR/build (its binary alone, where REV's
    set-up knows DDPBENCH_BUILD_TARGETS); a binary another REV left there is never taken."""
    env = {name: value for name, value in os.environ.items() if name != "DDPBENCH_BINARY"}
    env.update(DDPBENCH_BUILD_DIR=str(rev.build), DDPBENCH_BUILD_TARGETS="ddpbench")
    set_up(Side.BASELINE, f"{s.against} ({sha[:12]})'s set-up", rev.src / "scripts" / "lib" / "setup.sh",
           s.deadlines.build_s, out / "baseline-build.log", env)
    rev.check_own_files(sha)
    if not os.access(rev.binary_path, os.X_OK):
        raise Stop(Side.BASELINE, What.BUILD_FAILED, f"{s.against} ({sha[:12]}) does not build: its set-up left no "
                   f"{rev.binary_path}, so no commit can be compared with it")
    rev.mark_built(sha, file_digest(rev.binary_path))
    return pin(Side.BASELINE, rev.binary_path)


# Each build's binary and its SHA-256 as the gate took it: checked before every use.
_pinned: dict[str, tuple[Side, str]] = {}


def forget_pins() -> None:
    _pinned.clear()


def checked(binary: str) -> str:
    """`binary`, unchanged since the gate took it: the candidate runs as the same user and could
    write over REV's (a 50 % slower candidate passed, both "builds" and the judge its own), and
    another build into build/ (a second gate, an IDE) replaced the candidate's between rounds (a
    50 % slower one judged a regression of this commit). A changed one judges nothing: cannot
    judge (125 under --bisect), never a pass and never this commit's regression."""
    side, want = _pinned.get(binary, (None, None))
    if want is not None and file_digest(Path(binary)) != want:
        name = "REV's binary" if side is Side.BASELINE else "the candidate's binary"
        raise Stop(side, What.GARBAGE if side is Side.BASELINE else What.CANNOT_JUDGE,
                   f"{name} {binary} changed since the gate took it (not by the gate): nothing measured or judged "
                   f"with it can judge the candidate")
    return binary


def dry_run(side: Side, binary: str, s: Settings) -> str:
    """Why `binary`'s sweep refuses the sweep file's rows or the arguments after `--` (or ""):
    `sweep --dry-run` reads both, runs and writes nothing (its --out-dir a folder of its own)."""
    scratch = Path(tempfile.mkdtemp(prefix="ddpbench-ci-bench-dry-run-"))
    try:
        command = [binary, "sweep", "--file", str(s.sweep_file), "--mode", "faithful", "--table", "tutorial",
                   "--repeat", "1", "--out-dir", str(scratch / "out"), "--dry-run",
                   *(["--reference"] if s.twins else []), *s.sweep_args]
        done = children.run(side, f"{side.value}'s `sweep --dry-run`", command, s.deadlines.compare_s, capture=True)
    finally:
        replaced = scratch.is_symlink() or not scratch.is_dir()
        if not replaced:
            with contextlib.suppress(OSError):  # what cannot be removed stays in the system's temporary folder
                output_rule.remove_tree(scratch)
    if replaced:  # its own doing, never the gate's failure; what it put there is left, untouched
        raise Stop(side, What.GARBAGE, f"{side.value}'s `sweep --dry-run` replaced the gate's scratch folder {scratch} "
                   f"(the folder of its --out-dir) with something else, which the gate leaves there")
    found = done.problem(fine=(0,))
    if found is None:
        return ""
    if found[0] is What.REFUSED:
        return f"{side.value}'s sweep refuses the sweep file's rows or the arguments after --{children.last_words(done)}"
    raise Stop(side, found[0], f"{done.where()} {found[1]}{children.last_words(done)}")

"""--out-dir, the one folder the gate writes its results in. It is the gate's only where the gate
made it: absent, empty, or holding the gate's marker (MARKER, which names the folder); any other
folder is refused before anything is made, built or run. Inside it the gate replaces or removes
only its documented names (OUTPUTS, and the folders of FOLDERS, each made with FOLDER_MARKER in
it); what a process it ran leaves at those names is that process's side's fault, and is set aside
(NAME.stranger-RANDOM), never removed. Each file is written whole through a fresh temporary
name NAME.RANDOM + TMP_SUFFIX that nothing can be waiting at (write_whole). One gate at a time:
LOCK, opened without truncating, and only once the folder is marked. Nothing the gate reads may
lie inside it.
"""
from __future__ import annotations

import fcntl
import os
import re
import secrets
from pathlib import Path

import output_rule  # scripts/lib, beside the package

from .outcomes import Side, Stop, What

MARKER = ".ddpbench-ci-bench-out"
LOCK = ".ddpbench-ci-bench.lock"
TMP_SUFFIX = ".ci-bench-tmp"
ASIDE = re.compile(r"\.[0-9a-f]{16}" + re.escape(TMP_SUFFIX))  # what follows a folder's name in its temporary one
# What follows a file's name in its temporary one (write_whole: mkstemp's 8 random characters): a
# user's "compare.md.my-notes.ci-bench-tmp" is no name of the gate's, and stays.
FILE_ASIDE = re.compile(r"\.[a-z0-9_]{8}" + re.escape(TMP_SUFFIX))
FOLDER_MARKER = ".ddpbench-ci-bench-rounds"
# Stored mode: current/ (the sweep), compare.md; paired: the rounds' files and each build's
# round folders; both: the two builds' set-up logs and the verdict.
OUTPUTS = ("verdict.txt", "verdict.json", "compare.md", "candidate-build.log", "baseline-build.log",
           "baseline-rounds.json", "candidate-rounds.json", "order.jsonl", "paired.md", "undecided.txt",
           "candidate-paired.md", "candidate-undecided.txt", "floor.md",
           "machine-load.json")
FOLDERS = ("current", "baseline", "candidate")
VERDICTS = ("verdict.txt", "verdict.json")  # written by the gate alone, last


def marker_text(out: Path) -> str:
    return f"made by scripts/ci-bench (--out-dir): the gate replaces its own files here\nfolder {out}\n"


def inside(path: Path, folder: Path) -> bool:
    """`path` is `folder` or lies under it (both resolved)."""
    return path == folder or folder in path.parents


def resolved(path: Path) -> Path:
    return Path(os.path.realpath(path))


def refusal(out: Path, inputs: dict[str, Path], apart: dict[str, Path]) -> str:
    """Why the gate may not write in `out` (or ""), with nothing touched: a path through a file,
    an input the gate reads inside it, a folder that must stay apart from it (either inside the
    other), or a folder the gate did not make."""
    real = resolved(out)
    existing = real
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"--out-dir {out}: {existing} is not a folder"
    for name, path in inputs.items():
        if inside(resolved(path), real):
            return (f"{name} {path} lies inside --out-dir {out}, where the gate writes its results: the gate never reads "
                    f"what it writes; move it, or choose another --out-dir")
    for name, path in apart.items():
        other = resolved(path)
        if inside(other, real) or inside(real, other):
            return f"--out-dir {out} and {name} {path} lie one inside the other: choose an --out-dir apart from it"
    here = resolved(Path.cwd())
    for name in FOLDERS:  # made afresh by every gate: where the gate was started from, it would remove
        if inside(here, real / name):
            return (f"the current folder {Path.cwd()} lies in --out-dir {out}'s {name}/, which the gate removes and "
                    f"makes afresh (every process it starts would run in a removed folder): start it from elsewhere")
    if not real.exists():
        return ""
    entries = sorted(os.listdir(real))
    if MARKER not in entries:
        if entries:
            return (f"--out-dir {out} holds files (e.g. {real / entries[0]}) but no marker {MARKER}, so scripts/ci-bench "
                    f"did not make it and writes nothing there: choose another (or an empty) --out-dir; if an earlier "
                    f"scripts/ci-bench made it (before the marker), remove it (rm -r {out}) and run again")
        return ""
    return marked_refusal(out, real)


def marked_refusal(out: Path, real: Path) -> str:
    marker = real / MARKER
    if marker.is_symlink() or not marker.is_file() or marker.read_text(errors="replace") != marker_text(real):
        return (f"--out-dir {out}: its marker {marker} is not the one scripts/ci-bench writes for this folder (a copy, "
                f"or someone else's); choose another --out-dir")
    for path in strangers(real):
        if path.name in FOLDERS:
            return (f"--out-dir {out}: {path} exists without the marker {FOLDER_MARKER}, so scripts/ci-bench did not "
                    f"make it and will not remove it: move it away, or choose another --out-dir")
        return f"--out-dir {out}: {path} is not a plain file, and the gate writes its own file by that name"
    return ""


def strangers(real: Path, running: bool = False) -> list[Path]:
    """What stands at one of the gate's names in `real` that the gate does not make there: a folder
    of FOLDERS without its marker (or a link, or no folder), anything but a plain file at a file's
    name, and, while the gate runs (`running`), anything at VERDICTS: the claim removed the last
    gate's, and the gate writes its own last, so one there now is a process's (a candidate's "no
    regression" stood beside a signalled gate). Checked at every claim, after every process the
    gate ran (`OutDir.left_by`), and before the verdict."""
    found = [real / name for name in VERDICTS if running and ((real / name).exists() or (real / name).is_symlink())]
    for name in FOLDERS:
        folder = real / name
        if (folder.exists() or folder.is_symlink()) and (folder.is_symlink() or not folder.is_dir() or
                                                         not (folder / FOLDER_MARKER).is_file()):
            found.append(folder)
    for name in (*OUTPUTS, LOCK):
        path = real / name
        if path not in found and (path.is_symlink() or (path.exists() and not path.is_file())):
            found.append(path)
    return found


def write_whole(path: Path, data: str | bytes) -> None:
    """`path` whole or not at all, through NAME.RANDOM + TMP_SUFFIX (the scripts' one writer)."""
    output_rule.write_whole(path, data, TMP_SUFFIX, hidden=False)


def open_new(path: Path):
    """A file of the gate's own (a log, order.jsonl) made afresh for writing as it goes: whatever
    was at the name (an earlier run's, a link left there) is unlinked, never written through."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644), "w")


def mark_and_lock(folder: Path, marker: str, text: str, lock: str, named: str) -> int:
    """`folder` (checked to be the gate's before) made, marked whole where it is not yet, and
    locked for this gate: the lock file opened without truncating, never through a link. Its
    descriptor, held until the gate ends."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / marker).exists():
            write_whole(folder / marker, text)
        fd = os.open(folder / lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as error:
        raise Stop(Side.INPUT, What.REFUSED, f"{named}: {error}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise Stop(Side.INPUT, What.REFUSED, f"another gate is using {named}") from None
    return fd


class OutDir:
    """A claimed --out-dir: marked, locked (until the gate exits), its earlier results removed."""

    def __init__(self, out: Path, inputs: dict[str, Path], apart: dict[str, Path]) -> None:
        self.given = out
        self.path = resolved(out)
        self.inputs, self.apart = inputs, apart
        self.lock_fd = -1
        self.free_at_claim = 0  # bytes free on its disk when the gate took it

    def free_bytes(self) -> int:
        disk = os.statvfs(self.path if self.path.exists() else self.path.parent)
        return disk.f_bavail * disk.f_frsize

    def bytes_under(self, *names: str) -> int:
        """What the gate's folders `names` hold, in bytes."""
        return sum(entry.stat(follow_symlinks=False).st_size for name in names if (self.path / name).is_dir()
                   for entry in (self.path / name).rglob("*") if entry.is_file() and not entry.is_symlink())

    def check(self) -> None:
        said = refusal(self.given, self.inputs, self.apart)
        if said:
            raise Stop(Side.INPUT, What.REFUSED, said)

    def claim(self) -> None:
        self.check()
        self.lock_fd = mark_and_lock(self.path, MARKER, marker_text(self.path), LOCK, f"--out-dir {self.given}")
        self.check()  # again under the lock: another gate, or a person, may have changed it meanwhile
        self.clear()
        self.free_at_claim = self.free_bytes()

    def release(self) -> None:
        """The lock given up (the gate's exit does it too)."""
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1

    def clear(self) -> None:
        """Nothing of an earlier gate that could be read as this one's: its files and folders, by
        their documented names, and their temporary names."""
        for name in OUTPUTS:
            temporaries = [p for p in self.path.glob(f"{name}.*{TMP_SUFFIX}") if FILE_ASIDE.fullmatch(p.name[len(name):])]
            for path in (self.path / name, *temporaries):
                if path.is_file() and not path.is_symlink():
                    path.unlink()
        for name in FOLDERS:
            folder = self.path / name
            # Renamed aside, then removed: a signal in the removal leaves a temporary name (removed
            # by the next gate), never a folder of the gate's name without its marker (refused).
            if folder.is_dir() and not folder.is_symlink() and (folder / FOLDER_MARKER).is_file():
                folder.rename(self.aside(name))
            for aside in self.path.glob(f"{name}.*{TMP_SUFFIX}"):
                if ASIDE.fullmatch(aside.name[len(name):]) and aside.is_dir() and not aside.is_symlink():
                    output_rule.remove_tree(aside)

    def left_by(self, what: str) -> str:
        """What `what` (a process the gate ran, which has ended) left at the gate's names, in a
        phrase, or "": only a process could have put it there while the gate held the folder."""
        found = strangers(self.path, running=True) if self.lock_fd >= 0 else []
        if not found:
            return ""
        return (f"{what} left {', '.join(map(str, found))} at the gate's own name{'s' if len(found) > 1 else ''} in "
                f"--out-dir, where only the gate writes (a verdict, which the gate writes last; not a plain file; or a "
                f"folder without the gate's marker)")

    def set_strangers_aside(self) -> list[tuple[Path, Path]]:
        """Whatever stands at the gate's names that it did not make, renamed NAME.stranger-RANDOM
        (never removed: it is no file of the gate's), so that the verdict can be written and the
        next gate is not refused. Each (where it stood, where it is now)."""
        moved = []
        for path in strangers(self.path, running=True):
            to = path.with_name(f"{path.name}.stranger-{secrets.token_hex(8)}")
            path.rename(to)
            moved.append((path, to))
        return moved

    def aside(self, name: str) -> Path:
        """A folder's temporary name, NAME.RANDOM.ci-bench-tmp (RANDOM: 16 hex digits, ASIDE)."""
        return self.path / f"{name}.{secrets.token_hex(8)}{TMP_SUFFIX}"

    def write(self, name: str, text: str) -> Path:
        """`name` in the folder, whole or not at all."""
        write_whole(self / name, text)
        return self.path / name

    def folder(self, name: str) -> Path:
        """A folder of FOLDERS, made afresh with its marker."""
        if name not in FOLDERS:
            raise ValueError(f"{name} is not one of the gate's documented folders {FOLDERS}")
        folder = self.path / name
        # Made under a temporary name with its marker, then renamed: never seen without it.
        made = self.aside(name)
        made.mkdir()
        (made / FOLDER_MARKER).write_text("made by scripts/ci-bench: removed by the next gate in this --out-dir\n")
        made.rename(folder)
        return folder

    def __truediv__(self, name: str) -> Path:
        if name not in OUTPUTS and name not in FOLDERS:
            raise ValueError(f"{name} is not one of the gate's documented outputs")
        return self.path / name

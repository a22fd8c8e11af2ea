"""--against-dir DIR: REV's worktree (DIR/src) and build (DIR/build), kept between gates so that a
moved REV rebuilds only what changed. The gate uses only what it made, and its git commands
reach nothing past its own worktree:

- DIR is the gate's where it is absent, empty, or holds MARKER naming this repository and DIR;
  the lock (LOCK) is opened, without truncating, only once DIR is marked.
- DIR/src is used again only where it is the very worktree the gate added (a token written
  both beside the marker and into that worktree's own git folder), detached at the commit the
  gate left it at, with no tracked change, no index flag that hides one, and no untracked or
  ignored file at all (the gate's builds and runs write nothing there: REV builds into
  DIR/build, and its Python writes no bytecode), but what REV's own set-up or runs left there,
  recorded by path and content when the gate ended (LEFT). Decided by plumbing commands that no
  status or ignore setting of the user's changes; anything else found is the user's, and the
  worktree is refused untouched.
- Git runs with hooks off, no automatic gc or maintenance (gc prunes every worktree of the
  repository), no line-ending conversion, no optional locks (its checks write nothing, not even
  the index), and none of the caller's GIT_* variables. There is no `git worktree prune` and no
  `git clean`; a registration of DIR/src whose folder is gone (removed, or moved away with its
  index and HEAD) is never removed by the gate: it is refused, with how to remove it.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from . import children
from .out_dir import inside, mark_and_lock, resolved, write_whole
from .outcomes import Side, Stop, What

MARKER = ".ddpbench-ci-bench-worktree"
TOKEN = ".ddpbench-ci-bench-src-token"
ADMIN_TOKEN = "ddpbench-ci-bench-token"
CHECKED_OUT = ".ddpbench-ci-bench-checked-out"
CHECKING_OUT = ".ddpbench-ci-bench-checking-out"  # "FROM TO" while the gate's checkout runs
BUILT_REV = "built-rev"
# What DIR/src held besides REV's tree when the last gate ended (a stamp REV's own set-up wrote,
# a file its sweep made), by path and content: the gate's runs', not a user's change.
LEFT = ".ddpbench-ci-bench-left"
LEFT_BESIDE = ".ddpbench-ci-bench-left-beside"  # the names REV's runs made in DIR beside the gate's
LOCK = ".lock"
ADDING = ".ddpbench-ci-bench-adding"  # while the gate adds its worktree: a cut-short add is the gate's to redo
OWN_NAMES = {MARKER, TOKEN, CHECKED_OUT, CHECKING_OUT, ADDING, BUILT_REV, LEFT, LEFT_BESIDE, LOCK, "src", "build"}
GIT_DEADLINE_S = 600.0
# What of the user's configuration would change what the gate's git sees or does in its own
# worktree, pinned (hooks, index flags, sparse checkout, how a change is detected: trustctime=false
# hid a same-size edit, which the checkout then overwrote; attributes: a global `* text eol=crlf`
# broke REV's set-up, 128, and its filter's commands ran in the gate's checkout; ignoreCase=true hid a
# user's file named as a tracked one but for its case, which the checkout then overwrote); the rest
# (safe.directory, the repository's own format and its info/attributes, which git 2.39 reads
# whatever it is told) is the user's to keep.
GIT_SETTINGS = ("-c", "core.hooksPath=/dev/null", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
                "-c", "core.fsmonitor=false", "-c", "core.autocrlf=false", "-c", "core.eol=lf",
                "-c", "core.untrackedCache=false", "-c", "advice.detachedHead=false", "-c", "core.fileMode=true",
                "-c", "submodule.recurse=false", "-c", "core.ignoreStat=false", "-c", "core.sparseCheckout=false",
                "-c", "core.sparseCheckoutCone=false", "-c", "index.sparse=false", "-c", "core.trustctime=true",
                "-c", "core.checkStat=default", "-c", "core.attributesFile=/dev/null", "-c", "core.ignoreCase=false",
                "-c", "core.precomposeUnicode=false")


def git_env() -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_ATTR_NOSYSTEM"] = "1"  # with core.attributesFile: no attribute of the user's or the machine's
    return env


# The gate's own worktrees (DIR/src of each RevFolder): their git commands name their worktree
# themselves (GIT_WORK_TREE, which outranks core.worktree: a per-worktree config of the user's
# sent the gate's checkout into another folder, writing and removing files there).
_OWN_WORKTREES: set[Path] = set()


def git(cwd: Path, *args: str, side: Side = Side.GATE) -> children.Finished:
    env = git_env()
    if cwd in _OWN_WORKTREES:
        env["GIT_WORK_TREE"] = str(cwd)
    return children.run(side, f"git {' '.join(args[:2])} in {cwd}", ["git", *GIT_SETTINGS, *args], GIT_DEADLINE_S,
                        capture=True, env=env, cwd=cwd)


def git_out(cwd: Path, *args: str) -> str:
    """git's output; the gate fails (never the candidate) where git cannot do what it always can."""
    done = git(cwd, *args)
    if done.returncode != 0 or done.timed_out:
        raise Stop(Side.GATE, What.FAILED, f"git {' '.join(args)} in {cwd} failed: {done.stderr.strip()}")
    return done.stdout


def resolve_rev(root: Path, rev: str) -> str:
    done = git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if done.returncode != 0 or not done.stdout.strip():
        said = done.stderr.strip()  # --quiet keeps "unknown revision" out; what is left is git's own refusal
        raise Stop(Side.INPUT, What.REFUSED, f"--against: '{rev}' is not a commit of the repository at {root}"
                   + (f" (git: {said})" if said else ""))
    return done.stdout.strip()


def blobs_of(src: Path, commits: list[str]) -> dict[str, set[str]]:
    """Each path of the commits' trees, with the object ids it has in them."""
    blobs: dict[str, set[str]] = {}
    for commit in commits:
        for entry in git_out(src, "ls-tree", "-r", "-z", commit).split("\0"):
            if entry:
                meta, path = entry.split("\t", 1)
                blobs.setdefault(path, set()).add(meta.split()[2])
    return blobs


def object_ids(src: Path, paths: list[str]) -> dict[str, str]:
    """What git would store for each file now (its clean filters applied); a link, its target's."""
    ids: dict[str, str] = {}
    files = [p for p in paths if not (src / p).is_symlink()]
    for start in range(0, len(files), 200):
        chunk = files[start:start + 200]
        ids.update(zip(chunk, git_out(src, "hash-object", "--", *chunk).split()))
    for p in paths:
        if (src / p).is_symlink():
            target = os.readlink(src / p).encode()
            ids[p] = hashlib.sha1(b"blob %d\0" % len(target) + target).hexdigest()
    return ids


def not_the_checkouts(src: Path, moving: list[str], found: list[str]) -> list[str]:
    """Of the paths that differ, those a checkout of one commit to the other cut short cannot have
    left: a path of either tree is the checkout's only where it is gone or holds what one of the
    two commits holds, so a user's edit made after the cut is still theirs, and refused."""
    blobs = blobs_of(src, moving)
    present = [p for p in found if p in blobs and ((src / p).is_file() or (src / p).is_symlink())]
    ids = object_ids(src, present)
    return [p for p in found if p not in blobs or (p in ids and ids[p] not in blobs[p])
            or (p not in ids and (src / p).exists())]


@dataclass
class RevFolder:
    root: Path  # the candidate's checkout
    given: Path  # --against-dir as given
    build_dir: Path  # the candidate's build folder
    binary: Path | None  # DDPBENCH_BINARY
    lock_fd: int = -1
    checked_out: bool = False  # this gate checked REV out into DIR/src

    def __post_init__(self) -> None:
        self.dir = resolved(self.given)
        self.src, self.build = self.dir / "src", self.dir / "build"
        self.binary_path = self.build / "ddpbench"
        _OWN_WORKTREES.add(self.src)

    # --- refusals, before anything is made, locked or removed -------------------------------
    def marker_text(self) -> str:
        common = resolved(self.root / git_out(self.root, "rev-parse", "--git-common-dir").strip())
        return f"ddpbench scripts/ci-bench --against worktree\ngit-common-dir {common}\nworktree {self.src}\n"

    def refusal(self, out: Path, inputs: dict[str, Path] | None = None) -> str:
        """Why DIR may not be used (or ""): it holds, or lies in, the candidate's checkout or build,
        overlaps --out-dir, holds a file the gate reads (`inputs`: a sweep file there would be
        checked out over mid-run), is not a folder, or is not the gate's. Read-only."""
        d = self.dir
        for name, path, either in (("the candidate's checkout", self.root, False),
                                   ("the candidate's build folder", self.build_dir, True),
                                   ("--out-dir", out, True)):
            other = resolved(path)
            if inside(other, d) or (either and inside(d, other)):
                return (f"--against-dir {self.given} and {name} {path} lie one inside the other: REV's worktree there "
                        f"is checked out and cleaned every run; choose an --against-dir apart from it (default: "
                        f"build-against/ beside build/)")
        if self.binary is not None and inside(resolved(self.binary), d):
            return f"--against-dir {self.given} holds the candidate's binary {self.binary}; choose another folder"
        for name, path in (inputs or {}).items():
            if inside(resolved(path), d):
                return (f"{name} {path} lies inside --against-dir {self.given}, where REV is checked out: the gate "
                        f"never reads what it writes; move it, or choose another --against-dir")
        if not d.exists() and not d.is_symlink():
            return ""
        if not d.is_dir():
            return f"--against-dir {self.given} exists and is not a folder; choose another --against-dir"
        entries = sorted(os.listdir(d))
        if MARKER not in entries:
            if not entries:
                return ""
            return (f"--against-dir {self.given} holds files (e.g. {d / entries[0]}) but no marker {MARKER}, so "
                    f"scripts/ci-bench did not make it and uses nothing in it: choose another --against-dir; if an "
                    f"earlier scripts/ci-bench made it (before the marker), remove it (git worktree remove --force "
                    f"{self.src}; rm -rf {self.given}) and run again")
        return self.marked_refusal(entries)

    def marked_refusal(self, entries: list[str]) -> str:
        marker = self.dir / MARKER
        if marker.is_symlink() or not marker.is_file() or read_text(marker) != self.marker_text().strip():
            return (f"--against-dir {self.given}: its marker {marker} is another repository's or another folder's; "
                    f"choose another --against-dir")
        strangers = [name for name in entries if name not in OWN_NAMES and name not in self.left_beside()]
        if strangers:
            return (f"--against-dir {self.given} holds {self.dir / strangers[0]}, which scripts/ci-bench does not make "
                    f"there: move it, or choose another --against-dir")
        for name in [name for name in entries if name in OWN_NAMES]:  # REV's own beside them are its
            path = self.dir / name
            kind_ok = path.is_dir() if name in ("build", "src") else path.is_file()
            if path.is_symlink() or not kind_ok:
                return (f"--against-dir {self.given}: {path} is not what the gate makes there (a link, or not a plain "
                        f"{'folder' if name in ('build', 'src') else 'file'}), which it would write or read through")
        return self.src_refusal()

    def src_state(self) -> str:
        """worktree (the gate's), registered (the gate's registration, its folder gone), stranger
        (a worktree of this repository the gate did not add), foreign (anything else), or none."""
        listed = git_out(self.root, "worktree", "list", "--porcelain").splitlines()
        registered = f"worktree {self.src}" in listed
        mine = self.token()
        if self.src.exists() or self.src.is_symlink():
            if not registered or self.src.is_symlink() or not (self.src / ".git").is_file():
                return "foreign"
            theirs = self.admin_token(git_out(self.src, "rev-parse", "--absolute-git-dir").strip())
            if mine and theirs in ("", mine) and (self.dir / ADDING).is_file():
                return "adding"  # the gate's own add, cut short before it finished
            return "worktree" if mine and mine == theirs else "stranger"
        if not registered:
            return "none"
        admin = self.registered_admin()
        return "registered" if admin and mine and self.admin_token(str(admin)) == mine else "stranger"

    def token(self) -> str:
        return read_text(self.dir / TOKEN)

    @staticmethod
    def admin_token(admin: str) -> str:
        return read_text(Path(admin) / ADMIN_TOKEN)

    def registered_admin(self) -> Path | None:
        """The git folder (.git/worktrees/NAME) that registers DIR/src, found by its gitdir file."""
        common = resolved(self.root / git_out(self.root, "rev-parse", "--git-common-dir").strip())
        for admin in sorted((common / "worktrees").glob("*")):
            try:
                if Path((admin / "gitdir").read_text().strip()) == self.src / ".git":
                    return admin
            except OSError:
                continue
        return None

    def src_refusal(self) -> str:
        state = self.src_state()
        if state in ("none", "adding"):
            return ""
        if state == "registered":
            admin = self.registered_admin()
            return (f"{self.src} is gone but its registration {admin} stands (its folder removed, or moved away with "
                    f"its index and HEAD{', and locked' if admin and (admin / 'locked').exists() else ''}): the gate "
                    f"removes no registration; if you moved it to keep it, move it back; else remove the "
                    f"registration (rm -r {admin}) and run again")
        if state == "stranger":
            return (f"{self.src} is a worktree of this repository that scripts/ci-bench did not add (or one added again "
                    f"since: its token is not the gate's), so it may hold a user's work and is not touched: move it, or "
                    f"choose another --against-dir; if it is the gate's own, remove it (git worktree remove --force "
                    f"{self.src}) and run again")
        if state == "foreign":
            return f"{self.src} exists and is not a worktree this repository made: move it, or choose another --against-dir"
        return self.worktree_refusal()

    def worktree_refusal(self) -> str:
        """The gate's own worktree holds nothing of anyone else's, as plumbing sees it. A checkout
        of the gate's that was cut short (the gate signalled in it) is the gate's to finish: HEAD
        at either end of it, and the changes and new files of the two commits' trees, are its own."""
        src = self.src
        left = read_text(self.dir / CHECKED_OUT)
        moving = read_text(self.dir / CHECKING_OUT).split()
        head = git(src, "rev-parse", "-q", "--verify", "HEAD").stdout.strip()
        if not left or (head != left and head not in moving):
            return (f"{src} is at {head or 'no commit'}, not at {left or 'a commit the gate recorded'} where "
                    f"scripts/ci-bench left it: someone committed or checked out there, which its checkout would orphan "
                    f"or lose; it is not touched: move it, or choose another --against-dir")
        branch = git(src, "symbolic-ref", "-q", "--short", "HEAD")
        if branch.returncode == 0:
            return (f"{src} has branch {branch.stdout.strip()} checked out, which scripts/ci-bench never does (it "
                    f"detaches), so someone works there: it is not touched; move it, or choose another --against-dir")
        flagged = [line[2:] for line in git_out(src, "ls-files", "-v").splitlines() if line[:1].islower() or
                   line[:1] == "S"]
        changed = changed_paths(src)
        found = changed + untracked(src)
        if moving:  # what the cut-short checkout of FROM to TO was writing is the gate's own
            found = not_the_checkouts(src, moving, found)
        found = self.not_left_by_the_gates_runs(found) + flagged
        if found:
            return (f"{src} holds changes scripts/ci-bench did not make ({', '.join(sorted(set(found))[:3])}"
                    f"{', ...' if len(set(found)) > 3 else ''}), which its checkout or clean would lose: it is not "
                    f"touched; commit or move them, or choose another --against-dir")
        return ""

    def recorded(self, name: str, kind: type) -> list | dict:
        """A record the last gate wrote in DIR (LEFT, LEFT_BESIDE): of `kind`, else empty."""
        try:
            found = json.loads(read_text(self.dir / name) or "null")
        except ValueError:
            found = None
        return found if isinstance(found, kind) else kind()

    def left_beside(self) -> set[str]:
        """The names in DIR beside the gate's own that REV's set-up or runs made (a cache beside its
        build), as the last gate recorded them: every later gate refused DIR for them (128)."""
        return {name for name in self.recorded(LEFT_BESIDE, list) if isinstance(name, str)}

    def check_own_files(self, sha: str) -> None:
        """The gate's own files in DIR as it wrote them, once REV's set-up has run: one REV wrote
        over is written again (the next gate refused DIR as "someone checked out there": 128), and
        this REV cannot judge (125 under --bisect)."""
        changed = [name for name, text in ((CHECKED_OUT, sha), (MARKER, self.marker_text().strip()))
                   if read_text(self.dir / name) != text]
        if not changed:
            return
        write_whole(self.dir / CHECKED_OUT, sha + "\n")
        write_whole(self.dir / MARKER, self.marker_text())
        raise Stop(Side.BASELINE, What.GARBAGE, f"REV's set-up wrote over the gate's own {', '.join(changed)} in "
                   f"--against-dir {self.given} (written again): nothing it built can judge")

    def not_left_by_the_gates_runs(self, found: list[str]) -> list[str]:
        """Of the paths that differ, those not as the last gate left them (LEFT): what REV's own
        set-up or runs wrote into its tree is the gate's; a path changed since is a user's."""
        left = self.recorded(LEFT, dict)
        if not left:
            return found
        now = content_ids(self.src, [p for p in found if p in left])
        return [p for p in found if p not in left or left[p] != now[p]]

    def record_left(self) -> None:
        """What DIR/src holds besides REV's tree now that the gate's builds and runs have ended,
        by path and content (LEFT), for the next gate; only where this gate checked it out (a
        worktree it refused is never recorded: that would make a user's change the gate's)."""
        if not self.checked_out:
            return
        found = sorted(set(changed_paths(self.src) + untracked(self.src)))
        write_whole(self.dir / LEFT, json.dumps(content_ids(self.src, found), indent=0) + "\n")
        beside = sorted(name for name in os.listdir(self.dir) if name not in OWN_NAMES)
        write_whole(self.dir / LEFT_BESIDE, json.dumps(beside) + "\n")

    # --- what the gate does, under its lock --------------------------------------------------
    def claim(self, out: Path, inputs: dict[str, Path]) -> None:
        said = self.refusal(out, inputs)
        if said:
            raise Stop(Side.INPUT, What.REFUSED, said)
        self.lock_fd = mark_and_lock(self.dir, MARKER, self.marker_text(), LOCK, f"--against-dir {self.given}")
        said = self.refusal(out, inputs)  # again under the lock
        if said:
            raise Stop(Side.INPUT, What.REFUSED, said)

    def check_out(self, sha: str) -> None:
        """REV's tree at DIR/src: the gate's worktree moved to it, or a new one added."""
        state = self.src_state()  # none or adding: a refusal (claim) stands between any other state and here
        if state == "adding":  # no checkout ran in it: removed by its own path, and added afresh
            self.run_git(self.root, "worktree", "remove", "--force", str(self.src))
        if state != "worktree":
            # Every step of the add is known as the gate's, wherever a signal cuts it: the token and
            # the intent first, the worktree, its token, then where it stands.
            token = secrets.token_hex(16)
            write_whole(self.dir / TOKEN, token + "\n")
            write_whole(self.dir / ADDING, "adding " + str(self.src) + "\n")
            self.run_git(self.root, "worktree", "add", "--quiet", "--detach", "--no-checkout", str(self.src), sha)
            admin_dir = git_out(self.src, "rev-parse", "--absolute-git-dir").strip()
            write_whole(Path(admin_dir) / ADMIN_TOKEN, token + "\n")
            write_whole(self.dir / CHECKED_OUT, sha + "\n")
            (self.dir / ADDING).unlink()
        left = read_text(self.dir / CHECKED_OUT)
        write_whole(self.dir / CHECKING_OUT, f"{left} {sha}\n")  # a cut-short checkout is then known as the gate's
        self.run_git(self.src, "checkout", "--quiet", "--detach", "--force", sha)
        write_whole(self.dir / CHECKED_OUT, sha + "\n")
        (self.dir / CHECKING_OUT).unlink()
        self.checked_out = True
        # A binary of another REV must not pass for this one's, nor one changed since the gate built
        # it (a candidate can write over it: it runs as the same user); either is built afresh.
        if self.built_rev() != sha or file_digest(self.binary_path) != self.built_digest():
            (self.dir / BUILT_REV).unlink(missing_ok=True)
            self.binary_path.unlink(missing_ok=True)

    def built_rev(self) -> str:
        return read_text(self.dir / BUILT_REV).split("\n")[0]

    def built_digest(self) -> str:
        """The SHA-256 of REV's binary as the gate built it ("" where not recorded)."""
        lines = read_text(self.dir / BUILT_REV).split("\n")
        return lines[1] if len(lines) > 1 else ""

    def mark_built(self, sha: str, digest: str) -> None:
        write_whole(self.dir / BUILT_REV, sha + "\n" + digest + "\n")

    def run_git(self, cwd: Path, *args: str) -> None:
        done = git(cwd, *args)
        if done.returncode != 0 or done.timed_out:
            raise Stop(Side.BASELINE, What.BUILD_FAILED, f"cannot check REV out into {self.src}: git {' '.join(args)}: "
                       f"{done.stderr.strip()}")


def content_ids(src: Path, paths: list[str]) -> dict[str, str]:
    """Each path's content as git would store it (object_ids), "folder" for a folder (a nested
    repository), "-" where nothing is."""
    files = [p for p in paths if (src / p).is_file() or (src / p).is_symlink()]
    ids = object_ids(src, files)
    return {p: ids[p] if p in ids else "folder" if (src / p).is_dir() else "-" for p in paths}


def changed_paths(src: Path) -> list[str]:
    """Tracked paths that differ from HEAD or the index, as git stores them (-z: never quoted, so a
    name like "é.txt" matches its tree's), a rename's both names."""
    fields = git_out(src, "status", "--porcelain=v1", "-z", "--untracked-files=no", "--ignore-submodules=none").split("\0")
    paths, i = [], 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if not entry:
            continue
        paths.append(entry[3:])
        if set(entry[:2]) & {"R", "C"}:  # its source follows as a field of its own
            paths.append(fields[i])
            i += 1
    return paths


def untracked(src: Path) -> list[str]:
    """Every path in `src` git does not track, ignored or not: `git ls-files --others` lists them
    whatever the ignore rules and status settings (a nested repository as its folder)."""
    return [path for path in git_out(src, "ls-files", "--others", "-z").split("\0") if path]


def file_digest(path: Path) -> str:
    """The SHA-256 of a plain file's bytes, or "" where it is none."""
    try:
        if not path.is_file():
            return ""
        with open(path, "rb") as file:
            return hashlib.sha256(file.read()).hexdigest()
    except OSError:
        return ""


def read_text(path: Path) -> str:
    """A file of the gate's, or "": never a FIFO or anything else a read could block on."""
    try:
        return path.read_text().strip() if path.is_file() else ""
    except OSError:
        return ""

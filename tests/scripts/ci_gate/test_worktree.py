"""scripts/lib/ci_gate/worktree.py: --against-dir holds only what the gate made, and its git
commands reach nothing past its own worktree: a folder, worktree or file of the user's is refused
untouched, whatever the user's git configuration says; no worktree of the user's is pruned; no
hook of the user's runs.

Run: python3 -m unittest -v test_worktree (from tests/scripts/ci_gate), with DDPBENCH_BINARY set.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

from stand_in_repository import StandInRepository

QUICK = ["--no-twins", "--min-rounds", "2", "--max-rounds", "2"]


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(folder).parts}


class WorktreeTest(unittest.TestCase):
    def setUp(self) -> None:
        if not os.environ.get("DDPBENCH_BINARY"):
            self.skipTest("DDPBENCH_BINARY is not set")
        if shutil.which("git") is None:
            self.skipTest("git is not installed")
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-worktree-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.stand_in = StandInRepository(self.dir)
        self.git = self.stand_in.git

    def gate(self, *args: str, **more: str) -> subprocess.CompletedProcess[str]:
        return self.stand_in.gate("--against", "HEAD", *QUICK, *args, **more)

    def refused(self, says: str, *args: str, folder: Path | None = None) -> None:
        """Refused in both modes (2; 128 under --bisect), naming why, nothing of `folder` changed."""
        before = files_of(folder) if folder else {}
        for flags, code in (([], 2), (["--bisect"], 128)):
            done = self.gate(*flags, *args)
            self.assertEqual(done.returncode, code, done.stdout + done.stderr)
            self.assertIn(says, done.stderr)
            if folder:
                self.assertEqual(files_of(folder), before, f"{folder} was changed")
        self.assertEqual(self.stand_in.runs(), [], "something ran")

    def made(self, *args: str) -> Path:
        done = self.gate(*args)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        return self.stand_in.repo / "build-against" / "src"

    def test_a_marker_that_is_no_plain_file_is_refused_without_reading_it(self) -> None:
        """A FIFO at the against-dir's marker hung the gate before any child (no deadline); a folder
        there was the gate's own failure."""
        src = self.made()
        marker = src.parent / ".ddpbench-ci-bench-worktree"
        saved = marker.read_text()
        marker.unlink()
        os.mkfifo(marker)
        self.refused("its marker", folder=src)
        marker.unlink()
        marker.mkdir()
        self.refused("its marker", folder=src)
        marker.rmdir()
        marker.write_text(saved)

    def test_a_users_worktree_or_files_at_the_against_dir_are_refused_untouched(self) -> None:
        mine = self.dir / "mine"
        self.git("worktree", "add", "-q", "-b", "my-work", str(mine / "src"), "HEAD")
        (mine / "src" / "draft.txt").write_text("untracked\n")
        self.refused(f"--against-dir {mine} holds files", "--against-dir", str(mine), folder=mine)
        lock_only = self.dir / "lock-only"
        lock_only.mkdir()
        (lock_only / ".lock").write_text("someone's\n")
        self.refused("holds files", "--against-dir", str(lock_only), folder=lock_only)

    def test_a_worktree_added_again_at_the_gates_src_is_refused_untouched(self) -> None:
        src = self.made()
        self.git("worktree", "remove", "--force", str(src))
        self.git("worktree", "add", "-q", "-b", "userwork", str(src), "HEAD")
        (src / "draft.txt").write_text("untracked\n")
        self.refused("is a worktree of this repository that scripts/ci-bench did not add", folder=src)

    def test_anything_of_the_users_in_the_gates_worktree_is_refused_whatever_git_config_says(self) -> None:
        src = self.made()
        # Hidden from `git status` by the user's settings: untracked files not shown, an ignored file,
        # a change behind skip-worktree. The gate's checks are plumbing and see each.
        self.git("config", "status.showUntrackedFiles", "no")
        cases = (("draft.txt", "untracked\n"), ("build-mine/object.o", "ignored by .gitignore\n"))
        for name, text in cases:
            (src / name).parent.mkdir(exist_ok=True)
            (src / name).write_text(text)
            self.refused("holds changes scripts/ci-bench did not make", folder=src)
            self.assertEqual((src / name).read_text(), text)
            (src / name).unlink()
        self.git("update-index", "--skip-worktree", "scripts/ci-bench.env", cwd=src)
        (src / "scripts" / "ci-bench.env").write_text("# edited behind skip-worktree\n")
        self.refused("holds changes scripts/ci-bench did not make", folder=src)
        self.git("update-index", "--no-skip-worktree", "scripts/ci-bench.env", cwd=src)
        self.git("checkout", "-q", "--", "scripts/ci-bench.env", cwd=src)
        self.git("checkout", "-q", "-b", "someone", cwd=src)
        self.refused("has branch someone checked out", folder=src)
        self.git("checkout", "-q", "--detach", cwd=src)
        (src / "notes.txt").write_text("mine\n")
        self.git("add", "notes.txt", cwd=src)
        self.git("commit", "-q", "-m", "work on the gate's HEAD", cwd=src)
        self.refused("where scripts/ci-bench left it", folder=src)

    def test_what_revs_own_set_up_writes_into_its_tree_is_the_gates_until_someone_changes_it(self) -> None:
        # A REV whose set-up writes a stamp into its own source tree and appends to a tracked file:
        # the next gate refused the worktree as holding the user's changes (128: the bisection stopped).
        setup = self.stand_in.repo / "scripts" / "lib" / "setup.sh"
        setup.write_text(setup.read_text().replace(
            "ddpbench_setup() {\n",
            'ddpbench_setup() {\n  date +%s%N >"$DDPBENCH_ROOT/stamp"\n  echo "# built" >>"$DDPBENCH_ROOT/scripts/ci-bench.env"\n'))
        self.git("commit", "-q", "-am", "a set-up that writes into its own tree")
        src = self.made()
        self.assertTrue((src / "stamp").is_file())
        for _ in range(2):
            self.made()  # its own stamp and edit, as the last gate left them: not the user's
        for name, text in (("stamp", "the user's edit of the stamp\n"), ("scripts/ci-bench.env", "# the user's\n"),
                           ("draft.txt", "the user's new file\n")):
            with self.subTest(name=name):
                before = (src / name).read_text() if (src / name).exists() else None
                (src / name).write_text(text)
                self.refused("holds changes scripts/ci-bench did not make", folder=src)
                self.assertEqual((src / name).read_text(), text)
                if before is None:
                    (src / name).unlink()
                else:
                    (src / name).write_text(before)
        self.made()  # each put back as the gate left it

    def test_what_revs_set_up_writes_beside_its_build_never_stops_a_later_gate(self) -> None:
        # A set-up that keeps a cache beside its build in --against-dir, or writes over the gate's own
        # record of its checkout: every later gate refused the folder (128: the bisection stopped).
        setup = self.stand_in.repo / "scripts" / "lib" / "setup.sh"
        original = setup.read_text()
        setup.write_text(original.replace(
            "ddpbench_setup() {\n", 'ddpbench_setup() {\n  mkdir -p "$DDPBENCH_BUILD_DIR/../deps-cache"\n'))
        self.git("commit", "-q", "-am", "a set-up with a cache beside its build")
        for _ in range(2):
            self.made()
        self.assertTrue((self.stand_in.repo / "build-against" / "deps-cache").is_dir())
        (self.stand_in.repo / "build-against" / "mine.txt").write_text("the user's\n")  # not REV's: refused
        self.refused("which scripts/ci-bench does not make there")
        (self.stand_in.repo / "build-against" / "mine.txt").unlink()
        setup.write_text(original.replace(
            "ddpbench_setup() {\n",
            'ddpbench_setup() {\n  echo 0000 >"$DDPBENCH_BUILD_DIR/../.ddpbench-ci-bench-checked-out"\n'))
        self.git("commit", "-q", "-am", "a set-up that writes over the gate's record")
        for flags, code in (([], 2), (["--bisect"], 125)):
            done = self.gate(*flags)
            self.assertEqual(done.returncode, code, done.stdout + done.stderr)
            self.assertIn("REV's set-up wrote over the gate's own .ddpbench-ci-bench-checked-out", done.stderr)

    def test_the_users_index_settings_shape_neither_the_gates_checkout_nor_its_next_check(self) -> None:
        # core.ignoreStat marked the gate's own checkout assume-unchanged (every later gate refused
        # its worktree as holding the user's changes); a sparse checkout left REV's harness/ out (read
        # as "older than lockstep", built from part of its tree), then was refused for good.
        self.git("config", "core.ignoreStat", "true")
        self.git("config", "core.sparseCheckout", "true")
        info = Path(self.git("rev-parse", "--git-path", "info").strip())
        info = info if info.is_absolute() else self.stand_in.repo / info
        info.mkdir(parents=True, exist_ok=True)
        (info / "sparse-checkout").write_text("/*\n!/harness/\n")
        for _ in range(2):
            src = self.made()
            self.assertEqual([line for line in self.git("ls-files", "-v", cwd=src).splitlines()
                              if not line.startswith("H ")], [], "entries of the gate's index flagged")
            self.assertTrue((src / "harness" / "launch" / "lockstep_turns.hpp").is_file(), "REV checked out in part")

    def test_the_users_attributes_and_filters_shape_neither_the_checkout_nor_its_next_check(self) -> None:
        # A global attributes file with `* text eol=crlf` checked REV out with CRLF (its set-up failed:
        # "does not build", 128), and the next gate refused its own checkout as the user's edits; a
        # global filter driver's smudge command ran in the gate's checkout.
        home = self.dir / "home"
        (home / ".config" / "git").mkdir(parents=True)
        (home / ".config" / "git" / "attributes").write_text("* text eol=crlf\n*.sh filter=mine\n")
        ran = self.dir / "the-users-filter-ran"
        (home / ".gitconfig").write_text(f"[filter \"mine\"]\n\tsmudge = touch {ran} && cat\n\tclean = touch {ran} && cat\n")
        env = self.stand_in.env(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
        for _ in range(2):
            done = self.stand_in.gate("--against", "HEAD", *QUICK, env=env)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        src = self.stand_in.repo / "build-against" / "src"
        self.assertNotIn(b"\r\n", (src / "scripts" / "lib" / "setup.sh").read_bytes())
        self.assertFalse(ran.exists(), "the user's filter ran in the gate's checkout")

    def test_a_users_ignorecase_hides_no_file_of_theirs_from_the_check(self) -> None:
        # core.ignoreCase=true in the user's config: an untracked CI-BENCH.ENV beside the tracked
        # ci-bench.env was unseen, and a REV tracking that name overwrote it.
        src = self.made()
        home = self.dir / "home"
        home.mkdir()
        (home / ".gitconfig").write_text("[core]\n\tignoreCase = true\n")
        (src / "scripts" / "CI-BENCH.ENV").write_text("the user's\n")
        env = self.stand_in.env(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
        done = self.stand_in.gate("--against", "HEAD", *QUICK, "--bisect", env=env)
        self.assertEqual(done.returncode, 128, done.stdout + done.stderr)
        self.assertIn("CI-BENCH.ENV", done.stderr)
        self.assertEqual((src / "scripts" / "CI-BENCH.ENV").read_text(), "the user's\n")

    def test_a_per_worktree_config_sends_the_gates_checkout_nowhere_else(self) -> None:
        # extensions.worktreeConfig with core.worktree in the gate's worktree's config.worktree: the
        # next checkout wrote and removed files in that other folder, and REV was built from the old tree.
        src = self.made()
        self.git("config", "extensions.worktreeConfig", "true")
        elsewhere = self.dir / "elsewhere"
        elsewhere.mkdir()
        (elsewhere / "mine.txt").write_text("mine\n")
        self.git("config", "--worktree", "core.worktree", str(elsewhere), cwd=src)
        (self.stand_in.repo / "added-in-rev2.txt").write_text("rev2\n")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "REV2")
        done = self.gate()
        self.assertEqual(sorted(p.name for p in elsewhere.iterdir()), ["mine.txt"], done.stdout + done.stderr)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertTrue((src / "added-in-rev2.txt").is_file(), "REV2 was not checked out into the gate's worktree")

    def test_an_edit_the_users_stat_settings_would_hide_is_seen(self) -> None:
        # core.trustctime=false: a same-size edit with its mtime restored looked unchanged, and the
        # gate's checkout of another REV overwrote it.
        repo = self.stand_in.repo
        (repo / "notes.txt").write_text("version-A\n")
        self.git("add", "notes.txt")
        self.git("commit", "-q", "-m", "A")
        self.git("tag", "A")
        (repo / "notes.txt").write_text("version-B\n")
        self.git("commit", "-q", "-am", "B")
        done = self.stand_in.gate("--against", "A", *QUICK)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        src = repo / "build-against" / "src"
        self.git("update-index", "--refresh", cwd=src)
        stat = (src / "notes.txt").stat()
        time.sleep(1.1)
        (src / "notes.txt").write_text("USEREDIT1\n")  # the same size
        os.utime(src / "notes.txt", ns=(stat.st_atime_ns, stat.st_mtime_ns))
        self.git("config", "core.trustctime", "false")
        self.git("config", "core.checkStat", "minimal")
        done = self.stand_in.gate("--against", "HEAD", *QUICK)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertIn("holds changes scripts/ci-bench did not make (notes.txt)", done.stderr)
        self.assertEqual((src / "notes.txt").read_text(), "USEREDIT1\n")

    def test_an_add_of_the_gates_cut_short_is_the_gates_to_redo(self) -> None:
        # A signal between `git worktree add` and the token it writes into the worktree left a
        # worktree every later gate called a stranger's; the gate's intent, written first, says it
        # was its own (a worktree without it stays refused).
        src = self.made()
        admin = Path(self.git("rev-parse", "--absolute-git-dir", cwd=src).strip())
        (admin / "ddpbench-ci-bench-token").unlink()
        self.refused("that scripts/ci-bench did not add", folder=src)
        (src.parent / ".ddpbench-ci-bench-adding").write_text("adding\n")
        self.made()
        self.assertFalse((src.parent / ".ddpbench-ci-bench-adding").exists())
        self.made()

    def test_no_worktree_of_the_users_is_pruned_and_no_hook_of_theirs_runs(self) -> None:
        moved = self.dir / "moved"
        self.git("worktree", "add", "-q", "-b", "moved", str(moved), "HEAD")
        moved.rename(self.dir / "moved-away")
        admin = self.stand_in.repo / ".git" / "worktrees" / "moved"
        hook = self.stand_in.repo / ".git" / "hooks" / "post-checkout"
        hook.write_text(f"#!/bin/sh\necho ran >> {self.dir / 'hook-ran'}\n")
        hook.chmod(0o755)
        src = self.made()
        self.assertTrue(admin.is_dir(), "the user's moved worktree was pruned")
        self.assertFalse((self.dir / "hook-ran").exists(), "the user's post-checkout hook ran")
        # The gate's own worktree moved away (and locked) to keep what was staged there: its
        # registration, index and HEAD are never removed; refused, with how to remove them.
        (src / "staged.txt").write_text("keep\n")
        self.git("add", "staged.txt", cwd=src)
        self.git("worktree", "lock", str(src))
        src.rename(self.dir / "kept")
        registration = self.stand_in.repo / ".git" / "worktrees" / "src"
        before = files_of(registration)
        self.refused("its registration", folder=self.dir / "kept")
        self.assertEqual(files_of(registration), before, "the gate's moved worktree's registration was changed")
        shutil.rmtree(registration)  # what the refusal says to do, where nothing there is to keep
        self.made()
        self.assertTrue(admin.is_dir(), "the user's moved worktree was pruned")
        self.assertEqual(self.git("-C", str(src), "rev-parse", "HEAD").strip(), self.stand_in.head)

    def test_a_src_that_is_not_the_gates_worktree_in_its_folder_is_refused_untouched(self) -> None:
        src = self.made()
        self.git("worktree", "remove", "--force", str(src))
        src.mkdir()
        (src / "notes.txt").write_text("precious\n")
        self.refused("exists and is not a worktree this repository made", folder=src)

    def test_what_is_not_the_gates_kind_in_its_folder_is_refused_without_reading_it(self) -> None:
        src = self.made()
        folder = src.parent
        token = folder / ".ddpbench-ci-bench-src-token"
        saved = token.read_text()
        token.unlink()
        os.mkfifo(token)  # a read of it would block the gate forever
        self.refused("is not what the gate makes there", folder=src)
        token.unlink()
        token.write_text(saved)
        (self.dir / "mine.txt").write_text("mine\n")
        link = folder / ".ddpbench-ci-bench-checked-out.ci-bench-tmp"
        link.symlink_to(self.dir / "mine.txt")
        self.refused("which scripts/ci-bench does not make there", folder=src)
        self.assertEqual((self.dir / "mine.txt").read_text(), "mine\n")
        link.unlink()
        sweep = src / "scripts" / "ci-bench.sweep.json"  # checked out over mid-run
        self.refused("lies inside --against-dir", "--sweep-file", str(sweep), folder=src)

    def test_a_checkout_of_the_gates_cut_short_is_the_gates_to_finish(self) -> None:
        # The gate signalled in its own checkout (a CI cancel) left the worktree half way: what the
        # two commits' trees hold is the gate's; a file of anyone else's there is still refused.
        src = self.made()
        old = self.stand_in.head
        (self.stand_in.repo / "added.txt").write_text("in the new commit\n")
        (self.stand_in.repo / "\u00e9t\u00e9.txt").write_text("a name git quotes\n")  # was refused for ever after
        (self.stand_in.repo / "scripts" / "ci-bench.sweep.json").write_text('{"rows": [{"name": "single"}]}\n')
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "a second commit")
        new = self.git("rev-parse", "HEAD").strip()
        (src.parent / ".ddpbench-ci-bench-checking-out").write_text(f"{old} {new}\n")
        (src / "added.txt").write_text("in the new commit\n")  # written, not yet in the index
        (src / "\u00e9t\u00e9.txt").write_text("a name git quotes\n")
        (src / "scripts" / "ci-bench.sweep.json").write_text('{"rows": [{"name": "single"}]}\n')
        (src / "mine.txt").write_text("the user's\n")
        self.refused("holds changes scripts/ci-bench did not make (mine.txt)", folder=src)
        (src / "mine.txt").unlink()
        # A user's edit since, of a file the checkout was writing, holds neither commit's content:
        # still theirs (a next gate's forced checkout threw it away).
        (src / "scripts" / "ci-bench.sweep.json").write_text('{"rows": [{"name": "single"}], "mine": 1}\n')
        self.refused("holds changes scripts/ci-bench did not make (scripts/ci-bench.sweep.json)", folder=src)
        self.assertIn('"mine": 1', (src / "scripts" / "ci-bench.sweep.json").read_text())
        (src / "scripts" / "ci-bench.sweep.json").write_text('{"rows": [{"name": "single"}]}\n')
        done = self.stand_in.gate("--against", new, *QUICK)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertEqual(self.git("-C", str(src), "rev-parse", "HEAD").strip(), new)
        self.assertFalse((src.parent / ".ddpbench-ci-bench-checking-out").exists())

    def test_the_callers_git_variables_do_not_redirect_the_gate(self) -> None:
        other = self.dir / "other"
        subprocess.run(["git", "init", "-q", str(other)], check=True)
        before = files_of(other / ".git")
        env = self.stand_in.env(GIT_DIR=str(other / ".git"), GIT_WORK_TREE=str(other),
                                GIT_INDEX_FILE=str(other / ".git" / "index"))
        done = self.stand_in.gate("--against", "HEAD", *QUICK, env=env)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertEqual(files_of(other / ".git"), before, "the gate wrote into the repository of GIT_DIR")
        # Nor do they reach REV's set-up, whose build stamp reads git (a hook's GIT_DIR made it the caller's).
        reached = (self.stand_in.repo / "build-against" / "build" / "git-variables").read_text()
        self.assertEqual(reached, "", "the caller's git variables reached REV's build")

    def test_the_candidates_checkout_and_build_and_out_dir_are_kept_apart(self) -> None:
        repo = self.stand_in.repo
        (self.dir / "a-file").write_text("mine\n")
        for folder, says in ((".", "the candidate's checkout"), (str(self.dir), "the candidate's checkout"),
                             (str(self.dir / "a-file"), "exists and is not a folder")):
            self.refused(says, "--against-dir", folder)
        build = self.dir / "b" / "build"
        refused = self.stand_in.gate("--against", "HEAD", *QUICK, "--against-dir", str(self.dir / "b"),
                                     DDPBENCH_BUILD_DIR=str(build))
        self.assertEqual(refused.returncode, 2, refused.stderr)
        self.assertIn("the candidate's build folder", refused.stderr)
        self.made()
        inside = repo / "build-against" / "src" / "results"
        for out in (inside, repo / "build-against"):
            self.refused("lie one inside the other", "--out-dir", str(out))
        self.assertEqual((self.dir / "a-file").read_text(), "mine\n")

    def test_a_folder_without_the_gates_marker_or_with_anothers_is_refused(self) -> None:
        src = self.made()
        marker = src.parent / ".ddpbench-ci-bench-worktree"
        text = marker.read_text()
        marker.write_text(text.replace(str(src), str(self.dir / "elsewhere" / "src")))
        self.refused("its marker", folder=src)
        marker.unlink()
        self.refused("if an earlier scripts/ci-bench made it (before the marker), remove it", folder=src)
        marker.write_text(text)
        (src.parent / "notes.txt").write_text("mine\n")
        self.refused("which scripts/ci-bench does not make there", folder=src.parent)


if __name__ == "__main__":
    unittest.main()

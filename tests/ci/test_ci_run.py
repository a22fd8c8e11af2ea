""".ci/run, on a throwaway repository whose scripts/test is a stand-in: it passes a clean tree
through, and fails, naming the files, where an ignored file is tracked (before any test runs)
or where the tests left the checkout other than they found it (a file left behind, changed or
deleted, ignored or not, a commit made), whoever owns the checkout.

Run: python3 -m unittest -v test_ci_run (from tests/ci)
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=ci", "-c", "user.email=ci@example.com", *args],
                   check=True, capture_output=True)


class CiRunTest(unittest.TestCase):
    def setUp(self) -> None:
        if shutil.which("git") is None:
            self.skipTest("needs git")
        self.repo = Path(tempfile.mkdtemp(prefix="ddpbench-ci-run-"))
        self.addCleanup(shutil.rmtree, self.repo)
        (self.repo / ".ci").mkdir()
        shutil.copy(SOURCE / ".ci" / "run", self.repo / ".ci" / "run")
        shutil.copy(SOURCE / ".gitignore", self.repo / ".gitignore")
        (self.repo / "scripts").mkdir()
        (self.repo / "README.md").write_text("readme\n")
        self.stand_in("echo tests ran > build/tests-ran")
        git(self.repo, "init", "-q")
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-q", "-m", "start")

    def stand_in(self, body: str) -> None:
        """scripts/test: makes build/ (ignored), then `body`."""
        test = self.repo / "scripts" / "test"
        test.write_text(f"#!/usr/bin/env bash\nset -e\nmkdir -p build\n{body}\n")
        test.chmod(0o755)

    def ci_run(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.repo / ".ci" / "run")], capture_output=True, text=True, check=False)

    def commit(self) -> None:
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-q", "-m", "change")

    def test_a_clean_tree_passes_and_the_tests_ran(self) -> None:
        done = self.ci_run()
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue((self.repo / "build" / "tests-ran").exists())

    def test_a_tracked_file_of_ctest_or_of_results_fails_before_any_test(self) -> None:
        for name in ("Testing/Temporary/LastTest.log", "results/results.json"):
            (self.repo / name).parent.mkdir(parents=True, exist_ok=True)
            (self.repo / name).write_text("x\n")
            git(self.repo, "add", "-f", name)
        self.commit()
        done = self.ci_run()
        self.assertEqual(done.returncode, 1)
        self.assertIn("Testing/Temporary/LastTest.log", done.stderr)
        self.assertIn("results/results.json", done.stderr)
        self.assertFalse((self.repo / "build" / "tests-ran").exists(), "the check comes before the tests")

    def test_a_file_left_changed_or_deleted_by_the_tests_fails_naming_it(self) -> None:
        for body, name in (("echo x > left-behind.txt", "left-behind.txt"),
                           ("echo changed >> README.md", "README.md"),
                           ("rm .gitignore", ".gitignore")):
            with self.subTest(name=name):
                self.stand_in(body)
                self.commit()
                done = self.ci_run()
                self.assertEqual(done.returncode, 1, done.stderr)
                self.assertIn(name, done.stderr)
                git(self.repo, "checkout", "-q", "--", ".")
                git(self.repo, "clean", "-qfd", "-e", "build")

    def test_what_a_status_listing_misses_is_caught_too(self) -> None:
        """A file already changed before the tests and changed again, an untracked one rewritten,
        a commit made, a write into an ignored folder other than build/, an empty folder left, a
        mode changed, a FIFO, a file whose name starts with build, git's config and index."""
        (self.repo / "notes.txt").write_text("mine\n")
        cases = (("README.md", "echo again >> README.md", lambda: (self.repo / "README.md").write_text("dirty\n")),
                 ("notes.txt", "echo theirs > notes.txt", None),
                 ("refs/heads/", "git -c user.name=t -c user.email=t@t commit -q --allow-empty -m test", None),
                 ("results/results.json", "mkdir -p results && echo x > results/results.json", None),
                 ("left-empty", "mkdir left-empty", None),
                 ("file 600 ./README.md", "chmod 600 README.md", None),
                 ("pipe", "mkfifo pipe", None),
                 ("build.sh", "echo x > build.sh", None),
                 ("config x.y=1", "git config x.y 1", None),
                 ("staged", "echo s > staged && git add staged && rm staged", None))
        for name, body, before in cases:
            with self.subTest(name=name):
                self.stand_in(body)
                git(self.repo, "add", "scripts/test")
                git(self.repo, "commit", "-q", "-m", "stand-in")
                if before:
                    before()
                done = self.ci_run()
                self.assertEqual(done.returncode, 1, done.stderr)
                self.assertIn(name, done.stderr)
                git(self.repo, "reset", "-q", "--hard")
                git(self.repo, "clean", "-qfdx", "-e", "notes.txt")
                subprocess.run(["git", "-C", str(self.repo), "config", "--unset", "x.y"], capture_output=True)
                (self.repo / "README.md").chmod(0o644)
                (self.repo / "notes.txt").write_text("mine\n")

    def test_a_developers_own_excludes_do_not_fail_the_run(self) -> None:
        (self.repo / ".git" / "info").mkdir(exist_ok=True)
        (self.repo / ".git" / "info" / "exclude").write_text("README.md\n*.md\n")
        done = self.ci_run()
        self.assertEqual(done.returncode, 0, done.stderr)

    def test_a_checkout_owned_by_another_user_is_still_checked(self) -> None:
        if os.geteuid() != 0:
            self.skipTest("needs root to give the checkout to another user")
        self.stand_in("echo x > left-behind.txt")
        self.commit()
        subprocess.run(["chown", "-R", "nobody", str(self.repo)], check=True)
        done = self.ci_run()
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertIn("left-behind.txt", done.stderr)

    def test_a_failing_test_command_fails_the_run(self) -> None:
        self.stand_in("exit 3")
        self.commit()
        self.assertEqual(self.ci_run().returncode, 3)


if __name__ == "__main__":
    unittest.main()

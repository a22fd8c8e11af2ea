"""scripts/lib/ci_gate/out_dir.py: --out-dir is the gate's only where it made it (absent, empty,
or marked), nothing the gate reads lies in it, and in it the gate replaces or removes only its
documented names, through their documented temporary names; the lock is taken only in a marked
folder and never truncates a file.

Run: python3 -m unittest -v test_out_dir (from tests/scripts/ci_gate).
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import unittest
from unittest import mock
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(SOURCE / "scripts" / "lib"))
from ci_gate import out_dir  # noqa: E402
from ci_gate.outcomes import Side, Stop, What  # noqa: E402
from ci_gate.reading import Unreadable, read_text  # noqa: E402


class OutDirTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-out-dir-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.out = self.dir / "out"

    def claimed(self, inputs: dict | None = None, apart: dict | None = None) -> out_dir.OutDir:
        claim = out_dir.OutDir(self.out, inputs or {}, apart or {})
        claim.claim()
        self.addCleanup(claim.release)
        return claim

    def refused(self, says: str, inputs: dict | None = None, apart: dict | None = None) -> None:
        before = sorted(p.name for p in self.out.iterdir()) if self.out.is_dir() else None
        with self.assertRaises(Stop) as raised:
            out_dir.OutDir(self.out, inputs or {}, apart or {}).claim()
        self.assertEqual((raised.exception.outcome.side, raised.exception.outcome.what), (Side.INPUT, What.REFUSED))
        self.assertIn(says, str(raised.exception))
        after = sorted(p.name for p in self.out.iterdir()) if self.out.is_dir() else None
        self.assertEqual(after, before, "a refused gate made or removed something")

    def test_a_folder_the_gate_did_not_make_is_refused_untouched(self) -> None:
        self.out.mkdir()
        (self.out / ".lock").write_text("someone's lock\n")  # the attack: a folder holding only a .lock
        self.refused("holds files (e.g.")
        self.assertEqual((self.out / ".lock").read_text(), "someone's lock\n")
        (self.out / ".lock").unlink()
        (self.out / out_dir.MARKER).write_text(out_dir.marker_text(self.dir / "elsewhere"))
        self.refused("its marker")  # a copy of another folder's
        (self.out / out_dir.MARKER).unlink()
        (self.dir / "a-file").write_text("mine\n")
        self.out = self.dir / "a-file" / "out"
        self.refused("is not a folder")
        self.assertEqual((self.dir / "a-file").read_text(), "mine\n")

    def test_nothing_the_gate_reads_lies_inside_and_the_against_dir_stays_apart(self) -> None:
        self.refused("--baseline", inputs={"--baseline": self.out / "results.json"})
        self.refused("--current", inputs={"--current": self.out / "current" / "results.json"})
        self.refused("lie one inside the other", apart={"--against-dir": self.dir})
        self.refused("lie one inside the other", apart={"--against-dir": self.out / "build-against"})
        self.assertFalse(self.out.exists())

    def test_only_documented_names_are_replaced_and_a_marked_folder_is_reused(self) -> None:
        claim = self.claimed()
        claim.release()
        claim.folder("baseline")
        for name in ("verdict.txt", "paired.md", "baseline-rounds.json.k2x9_ab1" + out_dir.TMP_SUFFIX):
            (self.out / name).write_text("an earlier gate's\n")  # mkstemp's 8 characters: the gate's own name
        # A user's names near the gate's, its temporary ones included (the tenth attack: "compare.md.my-notes"
        # + the suffix was removed).
        near = {"baseline-rounds.tmp": "mine", "verdict.txt.orig": "mine", ".lock": "mine", "notes.md": "mine",
                "candidate-rounds.json.ci-bench-tmp": "mine", "compare.md.my-notes" + out_dir.TMP_SUFFIX: "mine",
                "verdict.txt.from-monday" + out_dir.TMP_SUFFIX: "mine", "paired.md.k2x9" + out_dir.TMP_SUFFIX: "mine"}
        for name, text in near.items():
            (self.out / name).write_text(text)
        self.claimed()
        left = {p.name for p in self.out.iterdir()}
        self.assertFalse({"verdict.txt", "paired.md", "baseline", "baseline-rounds.json.k2x9_ab1" + out_dir.TMP_SUFFIX} & left)
        for name, text in near.items():
            self.assertEqual((self.out / name).read_text(), text, f"{name} is the user's")

    def test_a_signal_in_the_gates_own_clearing_leaves_nothing_a_later_gate_refuses(self) -> None:
        # rmtree removed the marker first, and a signal stopped it: every later gate refused the
        # folder without its marker. Now a folder is renamed aside, then removed; one left aside
        # (or half made) is the next gate's to remove, and only such a name of the gate's.
        claim = self.claimed()
        made = claim.folder("candidate")
        (made / "round-00").mkdir()
        claim.release()
        cut_short = out_dir.OutDir(self.out, {}, {})
        with mock.patch.object(out_dir.output_rule, "remove_tree", side_effect=KeyboardInterrupt):
            with self.assertRaises(KeyboardInterrupt):
                cut_short.claim()
        cut_short.release()
        self.assertFalse((self.out / "candidate").exists())
        left = [p.name for p in self.out.iterdir() if p.name.startswith("candidate.")]
        self.assertEqual(len(left), 1, left)
        (self.out / "candidate.mine.ci-bench-tmp").mkdir()  # a user's, whatever it is called near the gate's
        (self.out / "candidate.0123456789abcdef.ci-bench-tmp").mkdir()  # half made, before its marker
        self.claimed()
        self.assertEqual(sorted(p.name for p in self.out.iterdir() if p.name.startswith("candidate")),
                         ["candidate.mine.ci-bench-tmp"])

    def test_a_folder_of_any_depth_a_build_left_is_removed(self) -> None:
        # 1500 nested folders in a round folder: rmtree's recursion failed every later gate (128).
        claim = self.claimed()
        deep = claim.folder("candidate") / "round-00"
        deep.mkdir()
        for _ in range(1500):  # one level at a time: pathlib's mkdir(parents=True) recurses too
            deep = deep / "d"
            os.mkdir(deep)
        claim.release()
        self.claimed()
        self.assertEqual([p.name for p in self.out.iterdir() if p.name.startswith("candidate")], [])

    def test_a_documented_name_that_is_not_the_gates_kind_is_refused(self) -> None:
        claim = self.claimed()
        claim.release()
        (self.out / "candidate").mkdir()  # a user's folder: no FOLDER_MARKER
        (self.out / "candidate" / "notes.txt").write_text("mine\n")
        self.refused("exists without the marker")
        shutil.rmtree(self.out / "candidate")
        (self.dir / "target").write_text("mine\n")
        (self.out / "verdict.txt").symlink_to(self.dir / "target")
        self.refused("is not a plain file")
        self.assertEqual((self.dir / "target").read_text(), "mine\n")

    def test_what_a_process_left_at_the_gates_names_is_named_and_set_aside(self) -> None:
        claim = self.claimed()
        self.assertEqual(claim.left_by("the candidate's sweep"), "")
        (self.out / "verdict.txt").mkdir()
        (self.out / "verdict.txt" / "theirs").write_text("planted\n")
        (self.out / "baseline").mkdir()  # no FOLDER_MARKER: not the gate's
        # A plain verdict.json: the claim removed the last gate's, so one there now is a process's
        # (a candidate's "no regression" stood beside a signalled gate).
        (self.out / "verdict.json").write_text('{"verdict": "no regression"}\n')
        said = claim.left_by("the candidate's sweep")
        self.assertIn(f"the candidate's sweep left {self.out / 'verdict.txt'}, {self.out / 'verdict.json'}, "
                      f"{self.out / 'baseline'}", said)
        moved = claim.set_strangers_aside()
        self.assertEqual([was.name for was, _ in moved], ["verdict.txt", "verdict.json", "baseline"])
        for was, now in moved:
            self.assertRegex(now.name, rf"^{was.name}\.stranger-[0-9a-f]{{16}}$")
        self.assertEqual((moved[0][1] / "theirs").read_text(), "planted\n")  # kept: never removed
        self.assertEqual(claim.left_by("the candidate's sweep"), "")
        claim.write("verdict.txt", "regression\n")
        claim.release()
        self.claimed()  # the next gate is not refused

    def test_one_gate_at_a_time(self) -> None:
        self.claimed()
        self.refused("another gate is using --out-dir")

    def test_writes_are_whole_and_names_are_the_documented_ones(self) -> None:
        claim = self.claimed()
        (self.dir / "mine.txt").write_text("mine\n")  # a link at a temporary name never leads a write
        (self.out / ("verdict.txt" + out_dir.TMP_SUFFIX)).symlink_to(self.dir / "mine.txt")
        claim.write("verdict.txt", "no regression\n")
        self.assertEqual((self.out / "verdict.txt").read_text(), "no regression\n")
        self.assertFalse((self.out / "verdict.txt").is_symlink())
        self.assertEqual((self.dir / "mine.txt").read_text(), "mine\n")
        self.assertEqual(list(self.out.glob("verdict.txt.*" + out_dir.TMP_SUFFIX)), [])
        (self.out / "order.jsonl").symlink_to(self.dir / "mine.txt")  # a link left at a log's name, after the claim
        with out_dir.open_new(self.out / "order.jsonl") as log:
            log.write("the gate's\n")
        self.assertEqual((self.dir / "mine.txt").read_text(), "mine\n")
        self.assertFalse((self.out / "order.jsonl").is_symlink())
        with self.assertRaises(ValueError):
            claim / "results.json"  # not one of its names
        with self.assertRaises(ValueError):
            claim.folder("rows")


class WholeFilesTest(unittest.TestCase):
    def setUp(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="ddpbench-whole-"))
        self.addCleanup(shutil.rmtree, self.folder)

    def test_a_file_the_gate_writes_is_as_readable_as_any_output(self) -> None:
        """mkstemp's 0600 narrowed a baseline --update-baseline replaced (it was 0644)."""
        target = self.folder / "baseline.json"
        target.write_text("{}")
        os.chmod(target, 0o644)
        out_dir.write_whole(target, "{\"runs\": []}")
        self.assertEqual(os.stat(target).st_mode & 0o777, 0o644)
        # A file it replaces keeps its own mode: the user's 0600 baseline was widened to 0644.
        os.chmod(target, 0o600)
        out_dir.write_whole(target, "{\"runs\": [1]}")
        self.assertEqual(os.stat(target).st_mode & 0o777, 0o600)
        out_dir.write_whole(self.folder / "new.json", "{}")
        self.assertEqual(os.stat(self.folder / "new.json").st_mode & 0o777, 0o644)

    def test_a_folder_where_a_file_is_read_is_unreadable_never_the_gates_failure(self) -> None:
        """A sweep that left a folder at results.json made the gate fail (2; 128) where the sweep was at fault."""
        (self.folder / "results.json").mkdir()
        with self.assertRaises(Unreadable) as raised:
            read_text(self.folder / "results.json")
        self.assertIn("is not a plain file", str(raised.exception))


if __name__ == "__main__":
    unittest.main()

"""scripts/lib/output_rule.py, the scripts' output rule, on the cases tests/harness/base/
test_output_rule.cpp holds the C++ rule to: an output is never an input or another output,
however it is spelled or linked, and replaces only what is of its own kind.

Run: python3 -m unittest -v test_output_rule (from tests/scripts)
"""
from __future__ import annotations

import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(SOURCE / "scripts" / "lib"))

from output_rule import OutputClash, check_outputs, refuse_clashes, write_whole  # noqa: E402
import subprocess  # noqa: E402


def ours(path: Path) -> bool:
    """The test's one kind of output: a file that starts with "ours"."""
    return path.is_file() and path.read_text().startswith("ours")


def refusal(inputs: dict, outputs: dict) -> str:
    try:
        check_outputs(inputs, {name: (path, "a file of ours", ours) for name, path in outputs.items()})
    except OutputClash as clash:
        return str(clash)
    return ""


class OutputRuleTest(unittest.TestCase):
    def setUp(self) -> None:
        self.scratch = tempfile.TemporaryDirectory()
        self.dir = Path(self.scratch.name)
        (self.dir / "in.json").write_text("ours, and read")
        (self.dir / "sub").mkdir()

    def tearDown(self) -> None:
        self.scratch.cleanup()

    def test_an_output_is_never_an_input_however_it_is_spelled_or_linked(self) -> None:
        (self.dir / "link.json").symlink_to(self.dir / "in.json")
        os.link(self.dir / "in.json", self.dir / "hard.json")
        for same in ("in.json", "sub/../in.json", "./in.json", "link.json", "hard.json"):
            why = refusal({"CURRENT": self.dir / "in.json"}, {"--out": f"{self.dir}/{same}"})
            self.assertIn(f"--out '{self.dir}/{same}' is the file CURRENT '{self.dir / 'in.json'}' reads", why)
        self.assertNotEqual(refusal({"--file": self.dir / "new.json"}, {"--out": self.dir / "sub/../new.json"}), "")
        self.assertEqual(refusal({"CURRENT": self.dir / "in.json"}, {"--out": self.dir / "out.json"}), "")

    def test_two_outputs_in_one_folder_under_two_mounts_are_one_file(self) -> None:
        (self.dir / "real").mkdir()
        (self.dir / "alias").mkdir()
        mounted = subprocess.run(["mount", "--bind", str(self.dir / "real"), str(self.dir / "alias")],
                                 capture_output=True, text=True)
        if mounted.returncode != 0:
            self.skipTest(f"cannot bind-mount a folder here (needs root): {mounted.stderr.strip()}")
        try:
            clash = refusal({}, {"--svg": self.dir / "real/x", "--json": self.dir / "alias/x"})
            apart = refusal({}, {"--svg": self.dir / "real/x", "--json": self.dir / "alias/y"})
        finally:
            subprocess.run(["umount", "-l", str(self.dir / "alias")], check=True)
        self.assertIn("writes too", clash)
        self.assertEqual(apart, "")

    def test_a_whole_write_never_goes_through_a_name_left_beside_it(self) -> None:
        """The temporary name is made afresh: a file or link a user left at any name beside the
        output (".fig.json.partial", the name the scripts once used) is neither written nor moved."""
        (self.dir / "row.json").write_text("the input")
        (self.dir / ".fig.json.partial").symlink_to(self.dir / "row.json")
        (self.dir / ".tl.svg.partial").write_text("a user's file")
        before = {p.name for p in self.dir.iterdir()}
        write_whole(self.dir / "fig.json", "{}")
        write_whole(self.dir / "tl.svg", "<svg/>")
        self.assertEqual((self.dir / "row.json").read_text(), "the input")
        self.assertTrue((self.dir / ".fig.json.partial").is_symlink())
        self.assertEqual((self.dir / ".tl.svg.partial").read_text(), "a user's file")
        self.assertEqual((self.dir / "fig.json").read_text(), "{}")
        self.assertFalse((self.dir / "fig.json").is_symlink())
        self.assertEqual({p.name for p in self.dir.iterdir()}, before | {"fig.json", "tl.svg"}, "a temporary file left")

    def test_a_link_followed_by_dot_dot_lands_where_the_kernel_says(self) -> None:
        (self.dir / "sub" / "inner").mkdir()
        (self.dir / "sub" / "in.json").write_text("ours, and read")
        (self.dir / "sub" / "notes.md").write_text("a user's notes")
        (self.dir / "l").symlink_to(self.dir / "sub" / "inner")
        for spelled in ("l/../in.json", "missing/../l/../in.json"):
            self.assertIn("is the file CURRENT",
                          refusal({"CURRENT": self.dir / "sub" / "in.json"}, {"--out": f"{self.dir}/{spelled}"}))
        for spelled in ("l/../notes.md", "missing/../l/../notes.md"):
            self.assertIn("exists and is not a file of ours", refusal({}, {"--out": f"{self.dir}/{spelled}"}))
        self.assertEqual(refusal({"CURRENT": self.dir / "sub" / "in.json"}, {"--out": f"{self.dir}/l/../new.json"}), "")

    def test_two_outputs_are_never_one_file(self) -> None:
        why = refusal({}, {"--json": self.dir / "a", "--svg": self.dir / "sub/../a"})
        self.assertIn(f"--svg '{self.dir / 'sub/../a'}' is the file --json '{self.dir / 'a'}' writes too", why)

    def test_an_output_never_lies_under_another_outputs_file(self) -> None:
        why = refusal({}, {"--json": self.dir / "a.json", "--svg": self.dir / "a.json/timeline.svg"})
        self.assertIn(f"--svg '{self.dir / 'a.json/timeline.svg'}' lies under the file --json '{self.dir / 'a.json'}' "
                      f"writes", why)
        self.assertEqual(refusal({}, {"--json": self.dir / "a.json", "--svg": self.dir / "a.svg"}), "")

    def test_an_existing_file_is_replaced_only_where_it_is_of_its_own_kind(self) -> None:
        (self.dir / "earlier.json").write_text("ours from before")
        (self.dir / "mine.svg").write_text("<svg a user's own drawing")
        self.assertEqual(refusal({}, {"--json": self.dir / "earlier.json"}), "")
        self.assertEqual(refusal({}, {"--json": self.dir / "new.json"}), "")
        for taken in (self.dir / "mine.svg", self.dir / "sub"):
            self.assertIn(f"--svg '{taken}' exists and is not a file of ours (what --svg writes)",
                          refusal({}, {"--svg": taken}))

    def test_a_path_not_given_is_left_out(self) -> None:
        self.assertEqual(refusal({"--init-from": None}, {"--out": None, "--json": ""}), "")

    def test_a_clash_is_one_line_on_stderr_and_exit_two(self) -> None:
        err = io.StringIO()
        with redirect_stderr(err), self.assertRaises(SystemExit) as exit_:
            refuse_clashes("a-script", {"RESULTS": self.dir / "in.json"},
                           {"--json": (self.dir / "in.json", "a file of ours", ours)})
        self.assertEqual(exit_.exception.code, 2)
        self.assertEqual(len(err.getvalue().splitlines()), 1)
        self.assertTrue(err.getvalue().startswith("a-script: --json '"), err.getvalue())


if __name__ == "__main__":
    unittest.main()

"""scripts/mutation-check's committed list is usable: at least 20 mutations, each a change of
text that occurs exactly once in a real source file, with a reason and the tests that must
catch it; and the checker refuses a list whose text has drifted from the code.

Run: python3 -m unittest -v test_mutation_list (from tests/scripts)
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
CHECK = SOURCE / "scripts" / "mutation-check"
TEST_FILES = {"test_core": "tests", "test_fast": "tests"}


class MutationListTest(unittest.TestCase):
    def setUp(self) -> None:
        self.data = json.loads((SOURCE / "scripts" / "mutations.json").read_text())

    def test_the_list_covers_what_decides_the_numbers(self) -> None:
        mutations = self.data["mutations"]
        self.assertGreaterEqual(len(mutations), 20)
        files = {m["file"] for m in mutations}
        for required in ("strategies/bucket_allreduce_hook.cpp", "models/sync_batch_norm.cpp", "data/sampler.cpp",
                         "strategies/mixed_precision.cpp", "strategies/dp.cpp", "harness/runner/runner.cpp",
                         "reports/compare.cpp", "harness/base/statistics.cpp", "harness/base/atomic_file.cpp"):
            self.assertIn(required, files)
        for m in mutations:
            with self.subTest(mutation=m["id"]):
                self.assertGreater(len(m["reason"]), 20, "a mutation says why the line matters")
                if m["target"].startswith("unittest:"):
                    module = m["target"].removeprefix("unittest:")
                    self.assertTrue((SOURCE / "tests" / "scripts" / f"{module}.py").exists(), module)
                else:
                    self.assertIn(m["target"], TEST_FILES)
                self.assertTrue(m["filter"])
                self.assertEqual((SOURCE / m["file"]).read_text().count(m["find"]), 1)
        for dropped in self.data.get("dropped", []):
            self.assertTrue(dropped["reason"], "a dropped mutation says why it cannot be caught")

    def test_the_checker_lists_them_and_refuses_a_drifted_list(self) -> None:
        listed = subprocess.run([str(CHECK), "--list"], capture_output=True, text=True, check=False)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertEqual(len(listed.stdout.splitlines()), len(self.data["mutations"]))
        drifted = dict(self.data)
        drifted["mutations"] = [dict(self.data["mutations"][0], find="text that is nowhere in the file")]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(drifted, f)
        try:
            refused = subprocess.run([str(CHECK), "--list", "--mutations", f.name], capture_output=True, text=True,
                                     check=False)
        finally:
            os.unlink(f.name)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("occurs 0 times", refused.stderr)
        unknown = subprocess.run([str(CHECK), "--only", "no-such-mutation"], capture_output=True, text=True,
                                 check=False)
        self.assertEqual(unknown.returncode, 2)
        self.assertIn("no mutation no-such-mutation", unknown.stderr)


if __name__ == "__main__":
    unittest.main()

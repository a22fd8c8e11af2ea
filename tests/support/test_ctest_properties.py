"""What ctest gives each discovered GoogleTest test, read back from ctest itself: the environment
its binary was registered with (one NAME=VALUE, an absolute path that exists), a skip pattern
that marks "[  SKIPPED ]" as skipped and nothing else, and no property swallowed by another.
On the first GPU run (CMake 4.4) a skip pattern of ours with a lone "[" swallowed ENVIRONMENT,
so every test that starts the binary or Python failed or skipped as if there were no GPU.

Run: python3 -m unittest -v test_ctest_properties (from tests/support), with DDPBENCH_BUILD_DIR
and DDPBENCH_CTEST set (ctest sets both).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import unittest
from pathlib import Path

BUILD = Path(os.environ.get("DDPBENCH_BUILD_DIR", "."))
CTEST = os.environ.get("DDPBENCH_CTEST", "ctest")
# The binaries registered without an environment (tests/CMakeLists.txt: ddpbench_add_tests).
WITHOUT_ENVIRONMENT = {"test_nvtx_disabled"}


def discovered_tests() -> list[dict]:
    shown = subprocess.run([CTEST, "--show-only=json-v1"], cwd=BUILD, capture_output=True, text=True, check=False)
    if shown.returncode != 0 or "CMake Error" in shown.stderr:
        raise AssertionError(f"ctest could not read the test files in {BUILD}:\n{shown.stderr}")
    tests = json.loads(shown.stdout)["tests"]
    # gtest_discover_tests gives each test this argument; tests added by hand do not have it.
    return [t for t in tests if "--gtest_also_run_disabled_tests" in t.get("command", [])]


def properties(test: dict) -> dict:
    return {p["name"]: p["value"] for p in test.get("properties", [])}


class CtestPropertiesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.tests = discovered_tests()

    def test_every_binary_was_discovered(self) -> None:
        binaries = {Path(t["command"][0]).name for t in self.tests}
        self.assertIn("test_fast", binaries)
        self.assertGreater(len(self.tests), 100)

    def test_each_test_has_its_binarys_environment(self) -> None:
        for test in self.tests:
            binary = Path(test["command"][0]).name
            environment = properties(test).get("ENVIRONMENT", [])
            with self.subTest(test=test["name"]):
                if binary in WITHOUT_ENVIRONMENT:
                    self.assertEqual(environment, [])
                    continue
                self.assertEqual(len(environment), 1, f"{binary}: {environment}")
                name, _, value = environment[0].partition("=")
                self.assertRegex(name, r"^DDPBENCH_[A-Z_]+$")
                self.assertTrue(Path(value).is_absolute(), f"{name}={value} is not an absolute path")
                self.assertTrue(Path(value).exists(), f"{name}={value} does not exist")

    def test_skip_patterns_mark_a_skip_and_nothing_else(self) -> None:
        skipped = "[  SKIPPED ] Suite.Name (0 ms)"
        for test in self.tests:
            patterns = properties(test).get("SKIP_REGULAR_EXPRESSION", [])
            with self.subTest(test=test["name"]):
                self.assertTrue(patterns, "no skip pattern: a GTEST_SKIP would read as passed")
                for pattern in patterns:
                    self.assertNotIn("ENVIRONMENT", pattern)
                    # CMake's regular expressions read these patterns as Python's re does.
                    self.assertRegex(skipped, pattern)
                    for line in ("[       OK ] Suite.Name (0 ms)", "[  FAILED  ] Suite.Name (0 ms)"):
                        self.assertIsNone(re.search(pattern, line), f"{pattern!r} matches {line!r}")


if __name__ == "__main__":
    unittest.main()

"""scripts/device-check cannot rot: its --cpu-smoke form runs in the test suite, with one step
broken on purpose, and must exit non-zero naming that step while the other steps pass, and
bring back at most 8 files.

Run: python3 -m unittest -v test_device_check (from tests/scripts), with DDPBENCH_BUILD_DIR
(a built tree) and DDPBENCH_PYTHON (a Python with torch) set.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
CHECK = SOURCE / "scripts" / "device-check"


class DeviceCheckTest(unittest.TestCase):
    def test_a_broken_step_fails_the_check_and_is_named(self) -> None:
        build = os.environ.get("DDPBENCH_BUILD_DIR")
        if not build or not (Path(build) / "ddpbench").exists():
            self.skipTest("DDPBENCH_BUILD_DIR holds no built ddpbench")
        out = Path(tempfile.mkdtemp(prefix="ddpbench-device-check-"))
        self.addCleanup(shutil.rmtree, out)
        env = dict(os.environ, DDPBENCH_DEVICE_CHECK_BREAK="gpu-tests")
        run = subprocess.run([str(CHECK), str(out), "--cpu-smoke", "--prebuilt", build], env=env, capture_output=True,
                             text=True, check=False, timeout=900)
        summary = (out / "summary.txt").read_text()
        self.assertEqual(run.returncode, 1, summary + run.stderr[-3000:])
        lines = {line.split()[0]: line for line in summary.splitlines() if line.split()}
        self.assertIn("FAIL", lines["gpu-tests"])
        self.assertIn("SKIP (prebuilt", lines["build"])
        self.assertIn("PASS", lines["rows"], summary)
        self.assertIn("PASS", lines["outputs"], summary)
        self.assertIn("1 step(s) failed: gpu-tests", summary)
        # The rows it ran, each named in the summary with its PyTorch ratio where PyTorch ran it.
        self.assertIn("single-fp16", summary)
        self.assertIn("dp-2replicas-1gpu-replicas", summary)
        files = [p for p in out.rglob("*") if p.is_file()]
        self.assertLessEqual(len(files), 8, [p.name for p in files])
        self.assertTrue(all(p.stat().st_size < 16 << 20 for p in files))
        self.assertTrue((out / "results.json").exists())


if __name__ == "__main__":
    unittest.main()

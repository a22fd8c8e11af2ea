"""scripts/device-check cannot rot: its --cpu-smoke form runs in the test suite, with one step
broken or hung on purpose. A broken step fails the check and is named while the others pass; a
hung step is cut at its deadline and the check still ends inside its budget, with its summary
and the rows finished before the hang; no gpu test may outlive the gpu-tests step's deadline.
At most 8 files come back.

Run: python3 -m unittest -v test_device_check (from tests/scripts), with DDPBENCH_BUILD_DIR
(a built tree), DDPBENCH_PYTHON (a Python with torch) and DDPBENCH_CTEST (ctest) set.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
CHECK = SOURCE / "scripts" / "device-check"


def built_tree(test: unittest.TestCase) -> str:
    build = os.environ.get("DDPBENCH_BUILD_DIR")
    if not build or not (Path(build) / "ddpbench").exists():
        test.skipTest("DDPBENCH_BUILD_DIR holds no built ddpbench")
    return build


def verdicts(summary: str) -> dict[str, str]:
    """Each step's summary line, by step name."""
    return {line.split()[0]: line for line in summary.splitlines() if line.split()}


def plan() -> dict[str, tuple[int, int]]:
    """Each step's cap and floor in seconds, as the script plans them."""
    out = subprocess.run([str(CHECK), "--print-plan"], capture_output=True, text=True, check=True).stdout
    return {name: (int(cap), int(floor)) for name, cap, floor in (line.split() for line in out.splitlines())}


class DeviceCheckTest(unittest.TestCase):
    def run_check(self, env_extra: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], Path, float]:
        build = built_tree(self)
        out = Path(tempfile.mkdtemp(prefix="ddpbench-device-check-"))
        self.addCleanup(shutil.rmtree, out)
        began = time.monotonic()
        run = subprocess.run([str(CHECK), str(out), "--cpu-smoke", "--prebuilt", build, *args],
                             env=dict(os.environ, **env_extra), capture_output=True, text=True, check=False,
                             timeout=900)
        return run, out, time.monotonic() - began

    def assert_outputs_come_back(self, out: Path) -> None:
        files = [p for p in out.rglob("*") if p.is_file()]
        self.assertLessEqual(len(files), 8, [p.name for p in files])
        self.assertTrue(all(p.stat().st_size < 16 << 20 for p in files))

    def test_a_broken_step_fails_the_check_and_is_named(self) -> None:
        run, out, _ = self.run_check({"DDPBENCH_DEVICE_CHECK_BREAK": "gpu-tests"})
        summary = (out / "summary.txt").read_text()
        self.assertEqual(run.returncode, 1, summary + run.stderr[-3000:])
        lines = verdicts(summary)
        self.assertIn("FAIL", lines["gpu-tests"])
        self.assertIn("SKIP (prebuilt", lines["build"])
        self.assertIn("PASS", lines["rows"], summary)
        self.assertIn("PASS", lines["trace"], summary)
        self.assertIn("PASS", lines["outputs"], summary)
        self.assertIn("1 step(s) failed: gpu-tests", summary)
        # The traced rows' figures (a CPU smoke: no kernels, said so).
        self.assertIn("== single-bf16-fast", summary)
        self.assertIn("no GPU kernels", summary)
        # The rows it ran, each named in the summary with its PyTorch ratio where PyTorch ran it.
        self.assertIn("single-fp16", summary)
        self.assertIn("dp-2replicas-1gpu-replicas", summary)
        # Each row's first step by phase, ddpbench's and its twin's; the graph rows skipped on a CPU, saying why.
        self.assertIn("first step (s), against the steady median, by phase:", summary)
        self.assertIn("single-tf32.torch (faithful)", summary)
        self.assertRegex(summary, r"single-tf32-graphs +skipped .*--cuda-graphs captures the step on a GPU")
        self.assert_outputs_come_back(out)
        self.assertTrue((out / "results.json").exists())

    def test_a_hung_step_ends_inside_the_budget(self) -> None:
        # The rows step hangs at its second row (alive, beating) after the first and its twin
        # finished: its deadline must end it, keep those rows, and leave the later steps time.
        # The floors (175 s, the least --budget-s takes) and 30 s for the checks before the first
        # step: at the floors alone a loaded machine's 12 s of start-up left gpu-tests under its floor.
        budget_s = 205
        run, out, elapsed_s = self.run_check({"DDPBENCH_DEVICE_CHECK_HANG": "rows"}, "--budget-s", str(budget_s))
        summary = (out / "summary.txt").read_text()
        self.assertEqual(run.returncode, 1, summary + run.stderr[-3000:])
        self.assertLess(elapsed_s, budget_s + 5, summary)
        lines = verdicts(summary)
        self.assertIn("FAIL (its deadline of", lines["rows"], summary)
        self.assertIn("cut short", lines["rows"], summary)
        self.assertIn("PASS", lines["gpu-tests"], summary)
        self.assertIn("PASS", lines["microbench"], summary)
        self.assertIn("PASS", lines["outputs"], summary)
        self.assertIn("1 step(s) failed: rows", summary)
        self.assertIn(f"of a {budget_s} s budget", summary)
        runs = json.loads((out / "results.json").read_text())["runs"]
        finished = {r["name"]: r["status"] for r in runs}
        self.assertEqual(finished.get("single-tf32"), "ok", finished)
        self.assertEqual(finished.get("single-fp32"), "interrupted", finished)
        self.assertNotEqual(finished.get("single-fp16"), "ok", "a row after the hung one ran")
        self.assertIn("single-tf32", lines, summary)  # the row table in the summary names it
        self.assert_outputs_come_back(out)

    def test_no_gpu_test_may_outlive_the_step_deadline(self) -> None:
        build = built_tree(self)
        ctest = os.environ.get("DDPBENCH_CTEST") or shutil.which("ctest")
        if not ctest:
            self.skipTest("no ctest (DDPBENCH_CTEST)")
        cap_s, _ = plan()["gpu-tests"]
        shown = subprocess.run([ctest, "--show-only=json-v1", "-L", "gpu"], cwd=build, capture_output=True, text=True,
                               check=True).stdout
        tests = json.loads(shown)["tests"]
        self.assertGreaterEqual(len(tests), 10, "the gpu tests were not found")
        for test in tests:
            props = {p["name"]: p["value"] for p in test.get("properties", [])}
            self.assertIn("TIMEOUT", props, f"{test['name']} has no TIMEOUT: ctest's default is 1500 s")
            # The step's ctest stops every test 5 s before the step's deadline.
            self.assertLessEqual(float(props["TIMEOUT"]), cap_s - 5, test["name"])


class FirstStepsTest(unittest.TestCase):
    """scripts/lib/first_steps.py on recorded runs: the first step against the steady median,
    the time outside every phase, a twin's start-up, a graph row's speed-up over the eager row
    of the same mode and configuration (medians over repetitions), and rows whose figures are
    not a run's named and left out rather than read."""

    @staticmethod
    def run_row(name: str, rate: float, first_s: float, graphs: bool = False, mode: str = "faithful",
                strategy: str = "single", **extra: object) -> dict[str, object]:
        phases = {"data_s": 0.01, "forward_s": 0.2, "backward_s": 0.5, "optimizer_s": 0.09}
        steps = [{"time_s": first_s, "phases": phases}] + [{"time_s": 0.02, "phases": phases}] * 5
        return {"name": name, "strategy": strategy, "mode": mode, "status": "ok", "warmup_steps": 2,
                "step_records": steps, "steady_images_per_s": rate,
                "config": {"name": name, "strategy": strategy, "cuda-graphs": graphs, "batch-size": 256}, **extra}

    def first_steps(self, runs: list) -> str:
        folder = Path(tempfile.mkdtemp(prefix="ddpbench-first-steps-"))
        self.addCleanup(shutil.rmtree, folder)
        (folder / "results.json").write_text(json.dumps({"runs": runs}))
        return subprocess.run([str(SOURCE / "scripts" / "lib" / "first_steps.py"), str(folder / "results.json")],
                              capture_output=True, text=True, check=True).stdout

    def test_first_step_start_up_and_graph_speedup(self) -> None:
        graphs = {"capture_step": 4, "replayed_steps": 46, "eager_steps": 4}
        started = {"python": "forked from the sweep's preloaded Python", "start_up_s": 1.5}
        out = self.first_steps([
            self.run_row("single-tf32", 1000.0, 1.0),
            self.run_row("single-tf32.torch", 900.0, 3.0, strategy="torch-single", strategy_details=started),
            self.run_row("single-tf32-graphs", 1400.0, 1.0, True, strategy_details={"cuda_graphs": graphs}),
            self.run_row("single-tf32-graphs", 1600.0, 1.0, True, strategy_details={"cuda_graphs": graphs},
                         repetition=1),
            # A second copy of a row counts once.
            self.run_row("single-tf32-graphs", 9000.0, 1.0, True, repetition=1),
            self.run_row("single-tf32-graphs.torch", 1800.0, 1.0, True, strategy="torch-single"),
            # Another mode's eager row, ten times faster: never the graphed faithful row's.
            self.run_row("single-tf32", 10000.0, 1.0, mode="controlled"),
        ])
        self.assertRegex(out, r"single-tf32 \(faithful\) +1\.000 s +50x the steady median 0\.020 s")
        self.assertIn("other 0.200", out)  # 1 s less the 0.8 s of phases
        self.assertIn("other 2.200; start-up 1.500 s (forked from the sweep's preloaded Python)", out)
        self.assertIn("single-tf32-graphs (faithful): 1.50x the eager row's steady images/s (medians of 2 and 1 "
                      "runs); captured at step 4, 46 replayed, 4 eager", out)
        self.assertIn("single-tf32-graphs.torch (faithful): 2.00x the eager row's steady images/s", out)
        self.assertIn("runs[4] (single-tf32-graphs): not read: a second row of that name, mode and repetition", out)

    def test_figures_that_are_no_runs_are_named_not_read(self) -> None:
        bad_time = self.run_row("a", 1000.0, 1.0)
        bad_time["step_records"][0]["time_s"] = None
        bad_warmup = self.run_row("b", 1000.0, 1.0)
        bad_warmup["warmup_steps"] = "2"
        bad_rate = self.run_row("c-graphs", 1000.0, 1.0, True)
        bad_rate["steady_images_per_s"] = "1000"
        bad_start = self.run_row("d.torch", 1000.0, 1.0, strategy_details={"start_up_s": -3})
        no_phases = self.run_row("e", 1000.0, 1.0)
        del no_phases["step_records"][0]["phases"]
        zero_eager = self.run_row("f", 0.0, 1.0)
        out = self.first_steps([bad_time, bad_warmup, bad_rate, bad_start, no_phases, {"status": "ok"}, zero_eager,
                                self.run_row("f-graphs", 1000.0, 1.0, True)])
        self.assertIn("runs[0] (a): not read: step_records[0].time_s is null", out)
        self.assertIn("runs[1] (b): not read: warmup_steps is \"2\"", out)
        self.assertIn("runs[2] (c-graphs): not read: steady_images_per_s is \"1000\"", out)
        self.assertIn("runs[3] (d.torch): not read: strategy_details.start_up_s is -3", out)
        self.assertIn("runs[4] (e): not read: step_records[0] has no phases", out)
        self.assertIn("runs[5] (None): not read: a row without a name", out)
        self.assertIn("runs[6] (f): not read: steady_images_per_s is 0.0", out)
        self.assertIn("f-graphs (faithful): no eager row of the same configuration measured steady images/s", out)
        self.assertNotIn("nan", out)


if __name__ == "__main__":
    unittest.main()

"""--trace-steps end to end on 2 Gloo ranks, and scripts/lib/trace_report.py: each rank's trace
loads as Chrome-trace JSON and holds ddpbench's ranges nested as the steps ran them; `ddpbench
trace` puts both ranks on one clock, where a delay injected on rank 1 lies over rank 0's wait for
it (also when rank 1's clock is 7 s off on another host); HTA loads the rank traces and says its
analyses need GPU kernels; the report's GPU figures on a fixed trace; and bad input is refused
before any work, with nothing written or overwritten.

Run: python3 -m unittest -v test_trace_report (from tests/scripts); needs DDPBENCH_BINARY, and
DDPBENCH_HTA_PYTHON (scripts/lib/setup.sh's) for the HTA test, which skips without it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest
import zlib
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(SOURCE / "scripts" / "lib"))
import trace_report  # noqa: E402
import trace_timeline  # noqa: E402

BINARY = os.environ.get("DDPBENCH_BINARY", "")
ROW = ["run", "--strategy", "ddp", "--nproc", "2", "--backend", "gloo", "--model", "tiny", "--dataset", "synthetic",
       "--synthetic-train-images", "640", "--synthetic-test-images", "64", "--batch-size", "16", "--max-steps", "14",
       "--warmup-steps", "2", "--threads", "1", "--trace-steps", "4:9"]
TRACED = range(4, 10)
# Rank 1 busy-works four times its training in each step's optimizer phase: tens of
# milliseconds, where a loaded 2-core machine moves a rank's arrival by a few (the second trace
# attack saw up to 7 ms), so which rank is late never turns on the machine's noise.
DELAY = ["--inject-slowdown", "4.0", "--inject-slowdown-rank", "1", "--inject-slowdown-phase", "optimizer"]
PHASES = ("data", "forward", "backward", "comm", "optimizer")


def spans(events: list[dict], pid: int, name: str) -> list[tuple[float, float]]:
    return sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                  if e.get("ph") == "X" and e.get("pid") == pid and e["name"] == name)


def inside(inner: tuple[float, float], outer: tuple[float, float], slack_us: float = 1.0) -> bool:
    return outer[0] - slack_us <= inner[0] and inner[1] <= outer[1] + slack_us


@unittest.skipUnless(BINARY, "needs DDPBENCH_BINARY (the ddpbench binary)")
class TracedRowTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.scratch = tempfile.TemporaryDirectory()
        cls.folder = Path(cls.scratch.name)
        cls.results = cls.folder / "ddp-2.json"
        done = subprocess.run([BINARY, *ROW, *DELAY, "--out", str(cls.results)], capture_output=True, text=True,
                              timeout=300)
        if done.returncode != 0:
            raise AssertionError(f"the traced row failed ({done.returncode}): {done.stderr[-3000:]}")
        cls.row = json.loads(cls.results.read_text())["runs"][0]

    @classmethod
    def tearDownClass(cls) -> None:
        cls.scratch.cleanup()

    def merge(self, results: Path, out: Path) -> dict:
        done = subprocess.run([BINARY, "trace", str(results), "--out", str(out)], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        return json.loads(out.read_text())

    def test_each_rank_wrote_a_chrome_trace_with_its_rank_and_its_steps(self) -> None:
        trace = self.row["trace"]
        self.assertEqual(trace["files"], ["ddp-2.rank0.trace.json", "ddp-2.rank1.trace.json"])
        for rank, name in enumerate(trace["files"]):
            raw = (self.folder / name).read_bytes()
            self.assertEqual(zlib.crc32(raw), trace["crc32"][rank])
            doc = json.loads(raw)
            self.assertIsInstance(doc["traceEvents"], list)
            self.assertEqual(doc["distributedInfo"]["rank"], rank)
            self.assertEqual(doc["distributedInfo"]["world_size"], 2)
            self.assertEqual(doc["distributedInfo"]["backend"], "gloo")
            steps = [e["name"] for e in doc["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
            self.assertEqual(steps, [f"ProfilerStep#{s}" for s in TRACED])

    def test_the_phases_and_buckets_nest_in_their_steps_on_every_rank(self) -> None:
        merged = self.merge(self.results, self.folder / "nesting.trace.json")
        events = merged["traceEvents"]
        for pid in (0, trace_report.PIDS_PER_RANK):
            steps = [span for s in TRACED for span in spans(events, pid, f"ProfilerStep#{s}")]
            self.assertEqual(len(steps), len(TRACED))
            for phase in PHASES:
                found = spans(events, pid, phase)
                # Every step has the phase (rank 1 has two optimizer ranges a step: its delay's
                # own), and each range lies inside one of the steps.
                twice = (pid, phase) == (trace_report.PIDS_PER_RANK, "optimizer")
                self.assertEqual(len(found), len(TRACED) * (2 if twice else 1))
                for step in steps:
                    self.assertTrue(any(inside(span, step) for span in found), (pid, phase, step))
                for span in found:
                    self.assertEqual(sum(inside(span, step) for step in steps), 1, (pid, phase, span))
            buckets = spans(events, pid, "allreduce bucket 0")
            self.assertEqual(len(buckets), len(TRACED), pid)
            for bucket, backward, comm in zip(buckets, spans(events, pid, "backward"), spans(events, pid, "comm")):
                # Launched during backward, done by the end of comm (which waits for it).
                self.assertTrue(backward[0] <= bucket[0] <= backward[1] + 1, (pid, bucket, backward))
                self.assertLessEqual(bucket[1], comm[1] + 1, (pid, bucket, comm))
        delays = spans(events, trace_report.PIDS_PER_RANK, "injected slowdown")
        self.assertEqual(len(delays), len(TRACED))
        for delay in delays:
            self.assertTrue(any(inside(delay, o) for o in spans(events, trace_report.PIDS_PER_RANK, "optimizer")))
        self.assertEqual(spans(events, 0, "injected slowdown"), [])

    def assert_the_delay_lies_over_rank_0s_wait(self, merged: dict) -> None:
        events = merged["traceEvents"]
        delays = spans(events, trace_report.PIDS_PER_RANK, "injected slowdown")
        for step in TRACED[:-1]:
            delay = delays[step - TRACED[0]]
            (next_step,) = spans(events, 0, f"ProfilerStep#{step + 1}")
            # Rank 0 is in its next step, held by rank 1, for most of rank 1's delay ...
            overlap = min(delay[1], next_step[1]) - max(delay[0], next_step[0])
            self.assertGreater(overlap, 0.5 * (delay[1] - delay[0]), (step, delay, next_step))
            # ... and its next allreduce ends only after the delay does: it needs rank 1's gradients.
            bucket = spans(events, 0, "allreduce bucket 0")[step + 1 - TRACED[0]]
            self.assertGreater(bucket[1], delay[1], (step, bucket, delay))

    def test_the_merged_trace_shows_rank_1s_delay_where_rank_0_waited(self) -> None:
        merged = self.merge(self.results, self.folder / "merged.trace.json")
        self.assertIn("one host", merged["ddpbench"]["clock"])
        self.assert_the_delay_lies_over_rank_0s_wait(merged)

    def test_ranks_of_hosts_whose_clocks_differ_are_aligned_on_the_barrier(self) -> None:
        # Rank 1 as if on another host whose clock runs 7 s ahead: the row's JSON and files copied.
        folder = self.folder / "skewed"
        folder.mkdir(exist_ok=True)
        row_doc = json.loads(self.results.read_text())
        trace = row_doc["runs"][0]["trace"]
        for rank, name in enumerate(trace["files"]):
            doc = json.loads((self.folder / name).read_text())
            if rank == 1:
                doc["ddpbench"]["host"] = "other-host"
                doc["baseTimeNanoseconds"] += 7_000_000_000
            raw = json.dumps(doc).encode()
            (folder / name).write_bytes(raw)
            trace["crc32"][rank] = zlib.crc32(raw)
        (folder / "ddp-2.json").write_text(json.dumps(row_doc))
        merged = self.merge(folder / "ddp-2.json", folder / "merged.trace.json")
        self.assertIn("2 hosts", merged["ddpbench"]["clock"])
        shift = merged["ddpbench"]["ranks"][1]["shift_us"]
        self.assertAlmostEqual(shift, -7e6, delta=5e3)  # the skew, within the barrier's exit spread
        self.assert_the_delay_lies_over_rank_0s_wait(merged)

    def test_the_traced_steps_are_out_of_the_steady_figures(self) -> None:
        times = [s["time_s"] for s in self.row["step_records"]]
        steady = sorted(t for i, t in enumerate(times) if i >= 2 and i not in TRACED)
        traced = sorted(times[4:10])
        # The project's quantiles are linear-interpolated (numpy's default); 6 of each.
        median = (steady[2] + steady[3]) / 2
        self.assertAlmostEqual(self.row["step_time_s"]["p50"], median, places=12)
        self.assertAlmostEqual(self.row["trace"]["untraced_step_time_s"], median, places=12)
        self.assertAlmostEqual(self.row["trace"]["traced_step_time_s"], (traced[2] + traced[3]) / 2, places=12)

    def test_the_report_reads_the_ranges_and_hta_loads_the_ranks(self) -> None:
        hta_python = os.environ.get("DDPBENCH_HTA_PYTHON", "")
        if not hta_python or not Path(hta_python).exists():
            self.skipTest("no DDPBENCH_HTA_PYTHON (scripts/test sets it up): HTA is not installed here")
        figures = self.folder / "figures.json"
        svg = self.folder / "timeline.svg"
        done = subprocess.run([hta_python, str(SOURCE / "scripts" / "lib" / "trace_report.py"), str(self.results),
                               "--ddpbench", BINARY, "--json", str(figures), "--svg", str(svg)],
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("Holistic Trace Analysis: loaded ranks [0, 1]", done.stdout)
        self.assertIn("temporal breakdown: needs GPU kernels", done.stdout)
        found = json.loads(figures.read_text())
        self.assertEqual([r["rank"] for r in found["ranks"]], [0, 1])
        self.assertEqual([r["steps"] for r in found["ranks"]], [len(TRACED)] * 2)
        # Rank 1 spends its delay in the optimizer; rank 0 never does.
        self.assertGreater(found["ranks"][1]["phases_ms"]["optimizer"], 3 * found["ranks"][0]["phases_ms"]["optimizer"])
        self.assertEqual({s["latest_rank"] for s in found["steps"][:-1]}, {1})
        # The verdict is the row's own, as its JSON states it.
        self.assertEqual(found["straggler"]["slowest_rank"], self.row["slowest_rank"])
        self.assertEqual(found["straggler"]["straggler"], self.row["straggler"])
        self.assertIn("straggler (the row's verdict", done.stdout)
        self.assertEqual(found["gpu"], [])
        self.assertIn("<svg", svg.read_text())


@unittest.skipUnless(BINARY, "needs DDPBENCH_BINARY (the ddpbench binary)")
class BadInputTest(unittest.TestCase):
    def test_steps_the_row_never_reaches_are_refused_before_any_work(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            for steps in ("4:14", "2:13", "7:3"):
                argv = [a if a != "4:9" else steps for a in ROW]
                done = subprocess.run([BINARY, *argv, "--out", f"{folder}/row.json"], capture_output=True,
                                      text=True, timeout=120)
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertIn("--trace-steps", done.stderr)
                self.assertEqual(os.listdir(folder), [])
            done = subprocess.run([BINARY, *ROW], capture_output=True, text=True, timeout=120)
            self.assertEqual(done.returncode, 2)
            self.assertIn("give --out", done.stderr)
            # A rank that could not write its trace is found before training, not after it.
            (Path(folder) / "row.rank1.trace.json").mkdir()
            done = subprocess.run([BINARY, *ROW, "--out", f"{folder}/row.json"], capture_output=True, text=True,
                                  timeout=120)
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn("row.rank1.trace.json", done.stderr)
            self.assertNotIn("step", done.stdout)
            self.assertEqual(os.listdir(folder), ["row.rank1.trace.json"])

    def test_trace_never_overwrites_its_inputs_and_refuses_foreign_files(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            results = Path(folder) / "row.json"
            done = subprocess.run([BINARY, *ROW, "--out", str(results)], capture_output=True, text=True, timeout=300)
            self.assertEqual(done.returncode, 0, done.stderr)
            before = results.read_bytes()
            (Path(folder) / "user.txt").write_text("a user's file")
            for out in (results, Path(folder) / "row.rank1.trace.json", Path(folder) / "." / "row.json",
                        Path(folder) / "other.rank0.trace.json", Path(folder) / "user.txt"):
                done = subprocess.run([BINARY, "trace", str(results), "--out", str(out)], capture_output=True, text=True)
                self.assertEqual(done.returncode, 2, done.stderr)
            self.assertEqual(results.read_bytes(), before)
            # A result file may itself be named as merged traces are: still never the output.
            odd = Path(folder) / "odd.merged.trace.json"
            subprocess.run([BINARY, *ROW, "--out", str(odd)], capture_output=True, check=True, timeout=300)
            odd_before = odd.read_bytes()
            done = subprocess.run([BINARY, "trace", str(odd), "--out", str(odd)], capture_output=True, text=True)
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertEqual(odd.read_bytes(), odd_before)
            self.assertEqual((Path(folder) / "user.txt").read_text(), "a user's file")
            self.assertFalse((Path(folder) / "other.rank0.trace.json").exists())
            with open(Path(folder) / "row.rank1.trace.json", "a") as tampered:
                tampered.write(" ")
            done = subprocess.run([BINARY, "trace", str(results)], capture_output=True, text=True)
            self.assertEqual(done.returncode, 2)
            self.assertIn("CRC-32", done.stderr)
            self.assertFalse((Path(folder) / "row.merged.trace.json").exists())
            # Refused for a rank's trace, it made no folder for its --out (one was left).
            done = subprocess.run([BINARY, "trace", str(results), "--out", str(Path(folder) / "newd" / "sub" / "m.json")],
                                  capture_output=True, text=True)
            self.assertEqual(done.returncode, 2)
            self.assertFalse((Path(folder) / "newd").exists())
            untraced = Path(folder) / "untraced.json"
            subprocess.run([BINARY, *[a for a in ROW if a not in ("--trace-steps", "4:9")], "--out", str(untraced)],
                           capture_output=True, check=True, timeout=300)
            done = subprocess.run([BINARY, "trace", str(untraced)], capture_output=True, text=True)
            self.assertEqual(done.returncode, 2)
            self.assertIn("no row in it was traced", done.stderr)


@unittest.skipUnless(BINARY, "needs DDPBENCH_BINARY (the ddpbench binary)")
class HeldByTest(unittest.TestCase):
    """Rank 1 slowed by four times its training in each phase: in every traced step it is
    the rank latest at the ranks' meeting points on the one clock."""

    def test_the_slowed_rank_is_named_whichever_phase_it_was_slowed_in(self) -> None:
        for phase in ("data", "forward", "backward"):
            with self.subTest(phase=phase), tempfile.TemporaryDirectory() as folder:
                results = Path(folder) / "row.json"
                delay = [a if a != "optimizer" else phase for a in DELAY]
                subprocess.run([BINARY, *ROW, *delay, "--out", str(results)], capture_output=True, check=True,
                               timeout=300)
                merged = Path(folder) / "merged.json"
                subprocess.run([BINARY, "trace", str(results), "--out", str(merged)], capture_output=True, check=True)
                alignment = trace_report.step_alignment(trace_report.read_steps(json.loads(merged.read_text())))
                self.assertEqual([row["step"] for row in alignment], list(TRACED), alignment)
                # One step may be lost to a stall of the whole machine (a CI run beside other jobs
                # once saw both ranks ~65 ms late in one step, rank 0 by 3 ms): the slowed rank is
                # named in every other step, and naming the wrong rank names it in most.
                named = [row["latest_rank"] for row in alignment]
                self.assertGreaterEqual(named.count(1), len(TRACED) - 1, alignment)


@unittest.skipUnless(BINARY, "needs DDPBENCH_BINARY (the ddpbench binary)")
class SettingsTest(unittest.TestCase):
    """Settings beside the plain row: a trace across epochs, overlap off, the built-in hook,
    warm-up alone, and the report's outputs never replacing what it read."""

    def run_row(self, folder: str, *extra: str) -> tuple[Path, dict]:
        results = Path(folder) / "row.json"
        argv = [a for a in ROW if a not in ("--trace-steps", "4:9", "--max-steps", "14")]
        done = subprocess.run([BINARY, *argv, *extra, "--out", str(results)], capture_output=True, text=True,
                              timeout=300)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        return results, json.loads(results.read_text())["runs"][0]

    def report(self, results: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(SOURCE / "scripts" / "lib" / "trace_report.py"), str(results),
                               "--ddpbench", BINARY, "--no-hta", *extra], capture_output=True, text=True, timeout=300)

    def test_a_trace_may_start_at_or_span_an_epochs_first_step(self) -> None:
        for steps in ("6:7", "4:9", "12:13"):
            with self.subTest(steps=steps), tempfile.TemporaryDirectory() as folder:
                results, row = self.run_row(folder, "--epochs", "3", "--max-steps", "6", "--trace-steps", steps)
                first, last = (int(x) for x in steps.split(":"))
                for name in row["trace"]["files"]:
                    doc = json.loads((Path(folder) / name).read_text())
                    found = [e["name"] for e in doc["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
                    self.assertEqual(found, [f"ProfilerStep#{s}" for s in range(first, last + 1)])
                self.assertEqual(self.report(results).returncode, 0)

    def test_hidden_allreduce_is_what_ran_before_the_last_gradient(self) -> None:
        hidden = {}
        for overlap in ("--overlap", "--no-overlap"):
            with tempfile.TemporaryDirectory() as folder:
                # Many small buckets: with overlap, the first are launched while backward still works.
                results, _ = self.run_row(folder, "--max-steps", "14", "--trace-steps", "4:9", "--bucket-mb", "0.0001",
                                          overlap)
                done = self.report(results, "--json", f"{folder}/figures.json")
                self.assertEqual(done.returncode, 0, done.stderr)
                hidden[overlap] = [r["hidden_fraction"] for r in json.loads(Path(f"{folder}/figures.json").read_text())["ranks"]]
        self.assertEqual(hidden["--no-overlap"], [0.0, 0.0])  # every bucket launched after backward's work
        self.assertTrue(all(h > 0 for h in hidden["--overlap"]), hidden)

    def test_the_builtin_hook_leaves_allreduce_unmeasured_not_zero(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            results, _ = self.run_row(folder, "--max-steps", "14", "--trace-steps", "4:9", "--comm-hook", "builtin-fp16")
            done = self.report(results, "--json", f"{folder}/figures.json")
            ranks = json.loads(Path(f"{folder}/figures.json").read_text())["ranks"]
            self.assertEqual([(r["allreduce_ms"], r["hidden_fraction"]) for r in ranks], [(None, None)] * 2)
            self.assertIn("no bucket ranges", done.stdout)

    def test_a_warm_up_trace_gives_no_profiler_cost(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            results, row = self.run_row(folder, "--max-steps", "14", "--trace-steps", "0:1")
            self.assertIsNone(row["trace"]["traced_step_time_s"])
            self.assertIn("not measured", self.report(results).stdout)

    def test_the_reports_outputs_never_replace_what_it_read(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            results, row = self.run_row(folder, "--max-steps", "14", "--trace-steps", "4:9")
            (Path(folder) / "other.json").write_text('{"runs": []}')  # a user's file, another row's
            # A user's own drawing: any SVG was taken for an earlier timeline of the report's.
            (Path(folder) / "mine.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"><circle r="5"/></svg>\n')
            before = {p.name: p.read_bytes() for p in Path(folder).iterdir()}
            for extra in (["--json", str(results)], ["--svg", f"{folder}/{row['trace']['files'][0]}"],
                          ["--json", f"{folder}/./row.json"], ["--json", f"{folder}/a", "--svg", f"{folder}/a"],
                          ["--json", f"{folder}/no-such-folder/a.json"], ["--json", f"{folder}/other.json"],
                          ["--svg", f"{folder}/another.rank3.trace.json"], ["--svg", f"{folder}/mine.svg"]):
                done = self.report(results, *extra)
                self.assertEqual(done.returncode, 2, (extra, done.stderr))
            self.assertEqual({p.name: p.read_bytes() for p in Path(folder).iterdir()}, before)
            # Its own earlier outputs it may write again.
            for _ in range(2):
                done = self.report(results, "--json", f"{folder}/figures.json", "--svg", f"{folder}/t.svg")
                self.assertEqual(done.returncode, 0, done.stderr)


@unittest.skipUnless(BINARY, "needs DDPBENCH_BINARY (the ddpbench binary)")
class SweepTest(unittest.TestCase):
    """`sweep --trace-steps`: each mode and repetition keeps its own traces, the twins are skipped
    saying why, the HTML links the files, and `ddpbench trace` never guesses between runs."""

    def test_every_run_of_a_sweep_keeps_its_own_trace(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            subprocess.run([BINARY, "sweep", "--table", "cpu", "--mode", "both", "--rows", "single", "--repeat", "2",
                            "--reference", "--trace-steps", "1:1", "--max-steps", "3", "--warmup-steps", "1",
                            "--model", "tiny", "--num-classes", "10", "--dataset", "synthetic", "--out-dir", folder,
                            "--reports-dir", f"{folder}/reports"],
                           capture_output=True, check=True, timeout=600)
            runs = json.loads((Path(folder) / "reports" / "results.json").read_text())["runs"]
            ours = [r for r in runs if r["strategy"] == "single"]
            self.assertEqual(len(ours), 4)
            files = {f for r in ours for f in r["trace"]["files"]}
            self.assertEqual(files, {"single.r0.rank0.trace.json", "single.r1.rank0.trace.json"})
            for r in ours:
                (name,) = r["trace"]["files"]
                raw = (Path(folder) / "rows" / r["mode"] / name).read_bytes()
                self.assertEqual(zlib.crc32(raw), r["trace"]["crc32"][0])
            twins = [r for r in runs if r["strategy"] != "single"]
            self.assertTrue(twins)
            self.assertTrue(all(r["status"] == "skipped" and "--trace-steps" in r["reason"] for r in twins))
            # Linked from where the page is (--reports-dir) to where the rows are (--out-dir).
            html = (Path(folder) / "reports" / "results.html").read_text()
            self.assertIn('<a href="../rows/controlled/single.r1.rank0.trace.json">', html)
            markdown = (Path(folder) / "reports" / "results.md").read_text()
            self.assertIn("single (controlled) repetition 1: steps 1-1 traced", markdown)
            done = subprocess.run([BINARY, "trace", f"{folder}/reports/results.json"], capture_output=True, text=True)
            self.assertEqual(done.returncode, 2)
            self.assertIn("several traced runs", done.stderr)
            done = subprocess.run([BINARY, "trace", f"{folder}/rows/controlled/single.r1.json"], capture_output=True,
                                  text=True)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertTrue((Path(folder) / "rows" / "controlled" / "single.r1.merged.trace.json").exists())


    def test_trace_finds_a_sweeps_rows_from_its_reports_dir_and_merges_each_row_apart(self) -> None:
        # `trace` of a sweep written with --reports-dir looked for the traces beside the report, not
        # under its rows_href; and two rows merged from one results.json shared one merged file.
        with tempfile.TemporaryDirectory() as folder:
            subprocess.run([BINARY, "sweep", "--table", "cpu", "--mode", "faithful", "--rows", "single,ddp-2gpu",
                            "--trace-steps", "1:1", "--max-steps", "3", "--warmup-steps", "1", "--model", "tiny",
                            "--num-classes", "10", "--dataset", "synthetic", "--out-dir", f"{folder}/out",
                            "--reports-dir", f"{folder}/reports"],
                           capture_output=True, check=True, timeout=600)
            results = f"{folder}/reports/results.json"
            for row, ranks in (("single", 1), ("ddp-2gpu", 2)):
                done = subprocess.run([BINARY, "trace", results, "--row", row], capture_output=True, text=True)
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertIn(f"{ranks} rank", done.stdout)
            rows = Path(folder) / "out" / "rows" / "faithful"
            self.assertTrue((rows / "single.merged.trace.json").exists())
            self.assertTrue((rows / "ddp-2gpu.merged.trace.json").exists())
            self.assertFalse((rows / "results.merged.trace.json").exists())


class GpuFiguresTest(unittest.TestCase):
    """The kernel figures on a fixed merged trace: kernels go to the step that launched them."""

    def test_kernels_per_step_busy_fraction_and_gaps(self) -> None:
        def x(name: str, pid: int, ts: float, dur: float, cat: str, correlation: int | None = None) -> dict:
            event = {"ph": "X", "name": name, "pid": pid, "tid": 1, "ts": ts, "dur": dur, "cat": cat}
            if correlation is not None:
                event["args"] = {"correlation": correlation}
            return event

        merged = {"traceEvents": [
            x("ProfilerStep#1", 0, 0, 100, "user_annotation"), x("ProfilerStep#2", 0, 100, 100, "user_annotation"),
            x("cudaLaunchKernel", 0, 10, 1, "cuda_runtime", 1), x("cudaLaunchKernel", 0, 20, 1, "cuda_runtime", 2),
            x("cudaLaunchKernel", 0, 110, 1, "cuda_runtime", 3),
            # Kernel 2 runs after its step's host code ended: still step 1's.
            x("k1", 1, 30, 10, "kernel", 1), x("k2", 1, 145, 15, "kernel", 2), x("k3", 1, 150, 20, "kernel", 3),
        ]}
        steps = trace_report.read_steps(merged)
        self.assertEqual([len(s.kernels) for s in steps[0]], [2, 1])
        (figures,) = trace_report.gpu_figures(steps)
        self.assertEqual(figures["kernels_per_step"], 1.5)
        self.assertAlmostEqual(figures["busy_fraction"], (10 + 25) / 140)  # k2 and k3 overlap: 145-170
        self.assertEqual(figures["largest_gaps_us"], [105.0])
        self.assertIn("GPU kernel", trace_timeline.draw_timeline(merged))

    def test_longest_host_calls_inside_rank_0s_steps(self) -> None:
        def x(name: str, pid: int, ts: float, dur: float, cat: str) -> dict:
            return {"ph": "X", "name": name, "pid": pid, "tid": 1, "ts": ts, "dur": dur, "cat": cat}

        merged = {"traceEvents": [
            x("ProfilerStep#0", 0, 0, 1000, "user_annotation"), x("ProfilerStep#0", 100, 0, 1000, "user_annotation"),
            x("aten::cudnn_convolution", 0, 10, 300, "cpu_op"), x("aten::cudnn_convolution", 0, 400, 200, "cpu_op"),
            x("cudaMalloc", 0, 20, 600, "cuda_runtime"), x("cuModuleLoadData", 0, 700, 50, "cuda_driver"),
            x("backward", 0, 5, 900, "user_annotation"),  # a range of ddpbench's, not a call
            x("aten::add_", 0, 1500, 5000, "cpu_op"),     # after the traced step
            x("aten::mm", 100, 10, 900, "cpu_op"),        # rank 1's
            x("cudaStreamSynchronize", 0, 900, 5000, "cuda_runtime"),  # runs on past the step: 100 us of it inside
            # No interval on the timeline: left out, as the step reader leaves them out.
            x("aten::bad", 0, 10, -5, "cpu_op"), x("aten::bad", 0, 10, float("nan"), "cpu_op"),
            {"ph": "X", "name": "aten::bad", "pid": 0, "ts": 10, "cat": "cpu_op"},
            {"ph": "X", "pid": 0, "ts": 10, "dur": 5, "cat": "cpu_op"},
            {"ph": "X", "name": "aten::bad", "pid": 0, "ts": 10, "dur": "5", "cat": "cpu_op"},
            {"ph": "X", "name": "aten::bad", "pid": 0, "ts": 10 ** 400, "dur": 5, "cat": "cpu_op"},
            x("ProfilerStep#0", 0, 0, 1000, "user_annotation"),  # the step's range written twice counts once
            x("ProfilerStep#abc", 0, 0, 1000, "user_annotation"),  # no step number: no step
            x("cudaEventSynchronize", 0, -5, 45, "cuda_runtime"),  # began before the step: 40 us inside
        ]}
        calls = trace_report.longest_calls(merged, trace_report.read_steps(merged))
        self.assertEqual([(c["name"], round(c["total_ms"], 6), c["calls"]) for c in calls],
                         [("cudaMalloc", 0.6, 1), ("aten::cudnn_convolution", 0.5, 2), ("cudaStreamSynchronize", 0.1, 1),
                          ("cuModuleLoadData", 0.05, 1), ("cudaEventSynchronize", 0.04, 1)])
        self.assertEqual(trace_report.longest_calls({"traceEvents": None}, {}), [])



class FiguresFileTest(unittest.TestCase):
    def test_only_an_object_with_the_reports_keys_is_an_earlier_figures_file(self) -> None:
        # A user's list of the figure names was taken for an earlier --json and replaced (the attack).
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "columns.json"
            path.write_text(json.dumps(["row", "ranks", "steps", "gpu", "mine"]))
            self.assertFalse(trace_report.is_figures_file(path))
            path.write_text(json.dumps({"row": "ddp-2", "ranks": [], "steps": [], "gpu": None}))
            self.assertTrue(trace_report.is_figures_file(path))
            path.write_text("not json")
            self.assertFalse(trace_report.is_figures_file(path))


if __name__ == "__main__":
    unittest.main()

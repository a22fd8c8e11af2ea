"""scripts/lib/ci_gate/main.py: the gate as one program: its own failure is never the candidate's
(2; 128 under --bisect), a signal to it stops every process it started and leaves no verdict, one
gate at a time uses a folder, and verdict.json says who ended the gate and how.

Run: python3 -m unittest -v test_main (from tests/scripts/ci_gate), with DDPBENCH_BINARY set.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from unittest import mock

from stand_in_repository import StandInRepository

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(SOURCE / "scripts" / "lib"))
from ci_gate import main  # noqa: E402

QUICK = ["--no-twins", "--min-rounds", "2", "--max-rounds", "2"]


def alive(pid: int) -> bool:
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


class OwnFailureTest(unittest.TestCase):
    def test_the_gates_own_error_is_never_the_candidates(self) -> None:
        folder = Path(tempfile.mkdtemp(prefix="ddpbench-main-"))
        self.addCleanup(shutil.rmtree, folder)
        base = SOURCE / "scripts" / "ci-bench.baseline.json"
        argv = ["--out-dir", str(folder / "out"), "--current", str(base), "--baseline", str(base)]
        for flags, code in (([], 2), (["--bisect"], 128)):
            stderr = io.StringIO()
            with mock.patch.object(main, "stored_gate", side_effect=KeyError("a bug")), \
                    mock.patch.dict(os.environ, {"DDPBENCH_BINARY": os.environ.get("DDPBENCH_BINARY", "/bin/true")}), \
                    contextlib.redirect_stderr(stderr):
                self.assertEqual(main.main([*argv, *flags]), code)
            self.assertIn("the gate itself failed (KeyError: 'a bug')", stderr.getvalue())
            self.assertIn("never the candidate's", stderr.getvalue())
            self.assertFalse((folder / "out" / "verdict.txt").exists(), "a gate that failed left a verdict")


    def test_a_signal_while_the_gate_reports_its_own_failure_is_the_signals(self) -> None:
        """A SIGTERM while the traceback of the gate's own failure is written (a slow reader of its
        stderr) left main as an uncaught error: exit 1, under --bisect too ("bad")."""
        folder = Path(tempfile.mkdtemp(prefix="ddpbench-main-"))
        self.addCleanup(shutil.rmtree, folder)
        base = SOURCE / "scripts" / "ci-bench.baseline.json"
        argv = ["--out-dir", str(folder / "out"), "--current", str(base), "--baseline", str(base)]
        for flags in ([], ["--bisect"]):
            with mock.patch.object(main, "stored_gate", side_effect=KeyError("a bug")), \
                    mock.patch.object(main.traceback, "print_exc", side_effect=main.Signalled(signal.SIGTERM)), \
                    mock.patch.dict(os.environ, {"DDPBENCH_BINARY": os.environ.get("DDPBENCH_BINARY", "/bin/true")}), \
                    contextlib.redirect_stderr(io.StringIO()):
                self.assertEqual(main.main([*argv, *flags]), 143, flags)

class LastSignalTest(unittest.TestCase):
    def test_once_the_answer_is_known_the_program_ignores_every_signal_until_it_ends(self) -> None:
        """A SIGTERM after the verdict was written killed the gate by it (143 beside a verdict):
        the program's own run leaves the signals ignored; a caller in the same process (a test)
        gets its handlers back."""
        previous = {sig: signal.getsignal(sig) for sig in main.SIGNALS}
        self.addCleanup(lambda: [signal.signal(sig, handler) for sig, handler in previous.items()])
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main.main(["--help"], restore_handlers=False)
        self.assertEqual({signal.getsignal(sig) for sig in main.SIGNALS}, {signal.SIG_IGN})
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main.main(["--help"])
        self.assertEqual({signal.getsignal(sig) for sig in main.SIGNALS}, {signal.SIG_IGN},
                         "the handlers it found were SIG_IGN's: given back as found")


class FinishTest(unittest.TestCase):
    """The answer and the verdict survive the machine: a reader gone from a pipe changes nothing, a
    full disk is the gate's failure (never a side's), and so is a verdict that cannot be written."""

    def setUp(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-main-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.out = main.OutDir(self.dir / "out", {}, {})
        self.out.claim()
        self.addCleanup(self.out.release)

    def test_a_full_disk_makes_any_sides_failure_the_gates(self) -> None:
        gate = main.GateRun(SOURCE)
        gate.out = self.out
        for side, what in ((main.Side.CANDIDATE, main.What.CRASH), (main.Side.BASELINE, main.What.GARBAGE),
                           (main.Side.CANDIDATE, main.What.CANNOT_JUDGE)):
            with mock.patch.object(main.OutDir, "free_bytes", return_value=0), contextlib.redirect_stderr(io.StringIO()):
                code = gate.finish(main.Outcome(side, what, "compare wrote nothing"), "", bisect=True)
            self.assertEqual(code, 128, (side, what))
            self.assertFalse((self.out.path / "verdict.txt").exists())
        # The candidate filled the disk itself (its folders hold what the run used): its own fault.
        (self.out.path / "candidate").mkdir()
        (self.out.path / "candidate" / "huge").write_bytes(b"x" * 4096)
        self.out.free_at_claim = 5000
        with mock.patch.object(main.OutDir, "free_bytes", return_value=0), contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(gate.finish(main.Outcome(main.Side.CANDIDATE, main.What.CRASH, "x"), "", True), 1)
        with contextlib.redirect_stderr(io.StringIO()):  # room to spare: the side's own failure
            self.assertEqual(gate.finish(main.Outcome(main.Side.CANDIDATE, main.What.CRASH, "x"), "", False), 1)

    def test_a_verdict_that_cannot_be_written_is_the_gates_failure(self) -> None:
        gate = main.GateRun(SOURCE)
        gate.out = self.out
        stderr = io.StringIO()
        with mock.patch.object(main.OutDir, "write", side_effect=OSError(28, "No space left on device")), \
                contextlib.redirect_stderr(stderr):
            code = gate.finish(main.Outcome(main.Side.CANDIDATE, main.What.NO_REGRESSION), "No regression.\n", False)
        self.assertEqual(code, 2)
        self.assertIn("cannot write the verdict", stderr.getvalue())


class EntryTest(unittest.TestCase):
    """scripts/ci-bench, the bash that starts the gate, with a stand-in python3 on PATH."""

    def setUp(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-entry-"))
        self.addCleanup(shutil.rmtree, self.dir)
        # Its version check takes 3 s; the gate itself says where it started and with what core limit.
        (self.dir / "python3").write_text(
            '#!/bin/bash\nif [ "$2" = -c ]; then sleep 3; exit 0; fi\n'
            'echo "gate ran: core $(ulimit -S -c), given ${DDPBENCH_CI_CORE_LIMIT-none}"\n')
        (self.dir / "python3").chmod(0o755)
        self.env = dict(os.environ, PATH=f"{self.dir}:{os.environ['PATH']}")

    def test_a_signal_while_the_version_is_checked_is_the_signals(self) -> None:
        # bash ignores SIGQUIT untrapped: the gate then ran and passed (0); SIGUSR1/2 and SIGALRM alike.
        for signum in (signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGTERM):
            with self.subTest(signal=signum.name):
                entry = subprocess.Popen(["bash", str(SOURCE / "scripts" / "ci-bench"), "--help"], env=self.env,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                time.sleep(1)
                entry.send_signal(signum)
                out, _ = entry.communicate(timeout=30)
                self.assertEqual(entry.returncode, 128 + signum, out)
                self.assertNotIn("gate ran", out)

    def test_the_gate_itself_dumps_no_core_and_gives_the_limit_back(self) -> None:
        done = subprocess.run(["bash", "-c", f'ulimit -S -c 1024; exec bash {SOURCE / "scripts" / "ci-bench"} --help'],
                              env=self.env, capture_output=True, text=True, timeout=30)
        self.assertIn("gate ran: core 0, given 1024", done.stdout)
        with mock.patch.dict(os.environ, {"DDPBENCH_CI_CORE_LIMIT": "0"}):
            before = resource.getrlimit(resource.RLIMIT_CORE)
            self.addCleanup(resource.setrlimit, resource.RLIMIT_CORE, before)
            main.give_back_core_limit()
            self.assertEqual(resource.getrlimit(resource.RLIMIT_CORE), (0, before[1]))
            self.assertNotIn("DDPBENCH_CI_CORE_LIMIT", os.environ)


class GateTest(unittest.TestCase):
    def setUp(self) -> None:
        if not os.environ.get("DDPBENCH_BINARY"):
            self.skipTest("DDPBENCH_BINARY is not set")
        if shutil.which("git") is None:
            self.skipTest("git is not installed")
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-main-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.stand_in = StandInRepository(self.dir)
        self.out = self.stand_in.repo / "results" / "ci-bench"

    def test_verdict_json_says_who_ended_the_gate_and_how(self) -> None:
        done = self.stand_in.gate("--against", "HEAD", *QUICK)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertEqual(json.loads((self.out / "verdict.json").read_text()),
                         {"verdict": "no regression", "exit_code": 0, "bisect": False, "side": "candidate",
                          "what": "no regression", "reason": "No regression."})
        self.assertEqual((self.out / "verdict.txt").read_text(), "no regression\n")
        slow = self.stand_in.gate("--bisect", "--against", "HEAD", *QUICK, faults={"candidate": {"slowdown": 0.5}})
        self.assertEqual(slow.returncode, 1, slow.stdout + slow.stderr)
        record = json.loads((self.out / "verdict.json").read_text())
        self.assertEqual((record["verdict"], record["exit_code"], record["bisect"], record["what"]),
                         ("regression", 1, True, "regression"))

    def test_rows_or_arguments_a_build_refuses_are_decided_before_any_round(self) -> None:
        # Both builds' sweeps refuse: this commit's own sweep file cannot be judged (125: skipped),
        # the user's arguments are bad input (128: stopped); the candidate's alone: it fails.
        both = {"candidate": {"sweep": "refuse"}, "baseline": {"sweep": "refuse"}}
        for faults, args, code, says in ((both, [], 125, "this commit's own sweep file"),
                                         # Its own file however it is spelled (this was 128, the bisection stopped).
                                         (both, ["--sweep-file", "./scripts/ci-bench.sweep.json"], 125,
                                          "this commit's own sweep file"),
                                         (both, ["--", "--threads", "1"], 128, "neither build accepts it"),
                                         ({"candidate": {"sweep": "refuse"}}, [], 1, "which the baseline build's accepts")):
            done = self.stand_in.gate("--bisect", "--against", "HEAD", *QUICK, *args, faults=faults)
            self.assertEqual(done.returncode, code, done.stdout + done.stderr)
            self.assertIn(says, done.stderr)
            self.assertEqual(self.stand_in.runs(), [], "a round ran before the refusal was decided")

    def test_a_candidate_of_another_environment_cannot_be_judged(self) -> None:
        done = self.stand_in.gate("--bisect", "--against", "HEAD", *QUICK, faults={"candidate": {"sweep": "other-env"}})
        self.assertEqual(done.returncode, 125, done.stdout + done.stderr)
        self.assertEqual((self.out / "verdict.txt").read_text(), "cannot judge\n")

    def test_a_candidate_that_writes_over_revs_binary_is_never_a_pass(self) -> None:
        # It runs as the same user: copied over REV's binary, from the next round both "builds" and
        # the judge were its own, and a 50 % slower candidate passed (0).
        rev_binary = self.stand_in.repo / "build-against" / "build" / "ddpbench"
        evil = self.stand_in.folder / "evil-ddpbench"
        evil.write_text(f"#!/bin/sh\ncase \"$*\" in *--dry-run*) ;; sweep*) cp \"$0\" {rev_binary} ;; esac\n"
                        f"exec {self.stand_in.candidate} \"$@\"\n")
        evil.chmod(0o755)
        done = self.stand_in.gate("--bisect", "--against", "HEAD", *QUICK, faults={"candidate": {"slowdown": 0.5}},
                                  DDPBENCH_BINARY=str(evil))
        self.assertEqual(done.returncode, 125, done.stdout + done.stderr)
        self.assertIn("REV's binary", done.stderr)
        self.assertIn("changed since the gate took it", done.stderr)
        self.assertEqual((self.out / "verdict.txt").read_text(), "cannot judge\n")
        # The next gate builds REV afresh (the binary there is not the one it built) and judges.
        done = self.stand_in.gate("--against", "HEAD", *QUICK, faults={"candidate": {"slowdown": 0.5}})
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)

    def test_a_candidates_binary_replaced_between_rounds_judges_nothing(self) -> None:
        # Another build into build/ (a second gate, an IDE) replaced the candidate's binary after
        # its first round: a 50 % slower one was judged this commit's regression (the thirteenth attack).
        evil = self.stand_in.folder / "replaced-ddpbench"
        evil.write_text(f"#!/bin/sh\ncase \"$*\" in *--dry-run*) ;; sweep*) echo '# rebuilt' >> \"$0\" ;; esac\n"
                        f"exec {self.stand_in.candidate} \"$@\"\n")
        evil.chmod(0o755)
        done = self.stand_in.gate("--bisect", "--against", "HEAD", *QUICK, DDPBENCH_BINARY=str(evil))
        self.assertEqual(done.returncode, 125, done.stdout + done.stderr)
        self.assertIn("the candidate's binary", done.stderr)
        self.assertIn("changed since the gate took it", done.stderr)

    def test_a_build_whose_file_leaves_out_time_the_gate_timed_is_never_judged_by_it(self) -> None:
        # A candidate 25 times slower by the gate's clock reported its steps as before: 0.0 %
        # slower, exit 0 (the thirteenth attack). Its turns are the gate's own measurement.
        done = self.stand_in.gate("--bisect", "--against", "HEAD", *QUICK, faults={"candidate": {"sweep": "hide-steps"}})
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("steady steps took less than their turns", done.stderr)
        self.assertIn("its file's steps are not the steps it ran", done.stderr)
        done = self.stand_in.gate("--bisect", "--against", "HEAD", *QUICK, faults={"baseline": {"sweep": "hide-steps"}})
        self.assertEqual(done.returncode, 125, done.stdout + done.stderr)
        self.assertIn("the baseline build's row", done.stderr)

    def test_a_signal_the_caller_ignores_stays_ignored(self) -> None:
        # nohup's SIGHUP: the gate's handler overrode the ignore, and the gate ended 129 (the
        # thirteenth attack); ignored, it runs to its answer.
        shutil.rmtree(self.stand_in.state, ignore_errors=True)
        self.stand_in.state.mkdir()
        gate = subprocess.Popen(["scripts/ci-bench", "--against", "HEAD", *QUICK], cwd=self.stand_in.repo,
                                env=self.stand_in.env({}), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
        for delay in (0.2, 1.0, 2.0):
            time.sleep(delay)
            if gate.poll() is None:
                gate.send_signal(signal.SIGHUP)
        _, stderr = gate.communicate(timeout=300)
        self.assertEqual(gate.returncode, 0, stderr)
        self.assertEqual((self.out / "verdict.txt").read_text(), "no regression\n")

    def test_a_closed_pipe_changes_no_answer(self) -> None:
        # Its stdout, its stderr (every progress line the gate prints: they raised BrokenPipeError,
        # exit 120 and no verdict), or both, gone before the gate says anything (| head -0).
        self.stand_in.state.mkdir(exist_ok=True)
        for closed in (("stdout",), ("stderr",), ("stdout", "stderr")):
            with self.subTest(closed=closed):
                (self.out / "verdict.txt").unlink(missing_ok=True)
                read_end, write_end = os.pipe()
                os.close(read_end)
                streams = {name: write_end if name in closed else subprocess.DEVNULL for name in ("stdout", "stderr")}
                gate = subprocess.Popen(["scripts/ci-bench", "--bisect", "--against", "HEAD", *QUICK],
                                        cwd=self.stand_in.repo, env=self.stand_in.env(), **streams)
                os.close(write_end)
                gate.wait(timeout=120)
                self.assertEqual(gate.returncode, 0, closed)
                self.assertEqual((self.out / "verdict.txt").read_text(), "no regression\n")
        # Its stdout closed before it started (>&-): Python's sys.stdout is None (exit 120 then).
        (self.out / "verdict.txt").unlink(missing_ok=True)
        done = subprocess.run(["bash", "-c", 'exec scripts/ci-bench --bisect --against HEAD "$@" >&- 2>/dev/null', "gate",
                               *QUICK], cwd=self.stand_in.repo, env=self.stand_in.env(), timeout=120)
        self.assertEqual(done.returncode, 0)
        self.assertEqual((self.out / "verdict.txt").read_text(), "no regression\n")

    def test_what_a_build_leaves_at_the_gates_names_is_its_fault_and_never_blocks_a_gate(self) -> None:
        # A folder a build makes at verdict.txt: the verdict could not be written (the gate's own
        # failure, 128 under --bisect, verdict.json saying 1) and every later gate was refused.
        baseline = self.stand_in.stored_baseline(self.dir / "baseline.json", repeat=3)
        stored = ["--baseline", str(baseline), "--repeat", "3", "--min-vs-pytorch", "0.5"]
        for args, side, expected in ((["--against", "HEAD", *QUICK, "--round-level"], "candidate", (1, "regression")),
                                     (["--against", "HEAD", *QUICK, "--round-level"], "baseline", (2, "cannot judge")),
                                     (["--against", "HEAD", *QUICK], "candidate", (2, "cannot judge")),
                                     (["--against", "HEAD", *QUICK, "--bisect"], "candidate", (125, "cannot judge")),
                                     (stored, "candidate", (1, "regression"))):
            with self.subTest(args=args, side=side):
                done = self.stand_in.gate(*args, faults={side: {"sweep": "plant"}})
                said = done.stdout + done.stderr
                self.assertEqual((done.returncode, (self.out / "verdict.txt").read_text().strip()), expected, said)
                record = json.loads((self.out / "verdict.json").read_text())
                self.assertEqual((record["what"], record["exit_code"]), ("garbage", expected[0]), said)
                self.assertIn(f"left {self.out / 'verdict.txt'} at the gate's own name", said)
                if "--against" in args and "--round-level" not in args:
                    self.assertIn("both builds ran at once, so neither can be blamed", said)
                aside = list(self.out.glob("verdict.txt.stranger-*"))
                self.assertEqual(len(aside), 1, said)
                self.assertEqual((aside[0] / "planted").read_text(), "planted by a build\n")  # kept, never removed
                shutil.rmtree(aside[0])
        done = self.stand_in.gate("--against", "HEAD", *QUICK)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)

    def test_a_verdict_a_build_writes_never_stands_for_the_gates(self) -> None:
        # The candidate's sweep writes verdict.txt "no regression" (plain), then hangs: a signalled
        # gate left it standing beside its 143.
        state = self.stand_in.state
        state.mkdir(exist_ok=True)
        for mode in ([], ["--round-level"]):
            with self.subTest(mode=mode):
                env = self.stand_in.env({"candidate": {"sweep": "plant-verdict-hang"}})
                gate = subprocess.Popen(["scripts/ci-bench", "--against", "HEAD", *QUICK, *mode], cwd=self.stand_in.repo,
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(300):
                    if (self.out / "verdict.txt").is_file():
                        break
                    time.sleep(0.1)
                gate.send_signal(signal.SIGTERM)
                _, stderr = gate.communicate(timeout=120)
                self.assertEqual(gate.returncode, 143, stderr)
                self.assertFalse((self.out / "verdict.txt").exists(), stderr)
                self.assertFalse((self.out / "verdict.json").exists(), stderr)
                aside = sorted(self.out.glob("verdict.*.stranger-*"))
                self.assertEqual([p.name.split(".stranger-")[0] for p in aside], ["verdict.json", "verdict.txt"])
                for path in aside:
                    path.unlink()

    def test_a_judges_regression_stands_whatever_the_candidates_compare_says(self) -> None:
        # The candidate's compare exiting 143 (as if SIGTERM stopped it) turned the judge's
        # regression into "the candidate, interrupted": cannot judge, 125 under --bisect.
        for flags, code in (([], 1), (["--bisect"], 1)):
            with self.subTest(flags=flags):
                done = self.stand_in.gate("--against", "HEAD", *QUICK, *flags,
                                          faults={"candidate": {"slowdown": 0.5, "compare": {"paired": "interrupted"}}})
                self.assertEqual(done.returncode, code, done.stdout + done.stderr)
                self.assertEqual((self.out / "verdict.txt").read_text(), "regression\n")

    def test_what_a_build_wrote_is_judged_as_it_was_when_its_process_ended(self) -> None:
        # A 50 % slower candidate that copies its own result file over the baseline build's of the
        # same round, once the baseline build has ended: both sides read alike, "no regression" (0).
        for mode in ([], ["--round-level"]):
            with self.subTest(mode=mode):
                done = self.stand_in.gate("--against", "HEAD", *QUICK, *mode,
                                          faults={"candidate": {"slowdown": 0.5, "sweep": "overwrite-baseline"}})
                self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
                self.assertEqual((self.out / "verdict.txt").read_text(), "regression\n")

    def test_a_dry_run_that_replaces_its_scratch_folder_is_its_sides_fault(self) -> None:
        # The candidate's `sweep --dry-run` made the gate's scratch folder a file: rmtree raised, read
        # as the gate's own failure (128 under --bisect: the bisection stopped).
        for flags, code in (([], 1), (["--bisect"], 1)):
            with self.subTest(flags=flags):
                done = self.stand_in.gate("--against", "HEAD", *QUICK, *flags,
                                          faults={"candidate": {"dry-run": "replace-scratch"}})
                self.assertEqual(done.returncode, code, done.stdout + done.stderr)
                self.assertIn("replaced the gate's scratch folder", done.stderr)
                left = done.stderr.split("replaced the gate's scratch folder ")[1].split(" ")[0]
                Path(left).unlink()  # the stand-in's file, which the gate leaves

    def test_what_a_build_makes_in_the_other_builds_folders_is_its_own_fault(self) -> None:
        # The baseline build's sweep made the candidate's next results.json a folder: the candidate
        # was blamed, 1 under --bisect.
        for flags, code in ((["--round-level"], 2), (["--round-level", "--bisect"], 125), ([], 2)):
            with self.subTest(flags=flags):
                done = self.stand_in.gate("--against", "HEAD", *QUICK, *flags, faults={"baseline": {"sweep": "plant-other"}})
                self.assertEqual(done.returncode, code, done.stdout + done.stderr)
                self.assertIn("round-01/single in the builds' round folders of --out-dir", done.stderr)
        done = self.stand_in.gate("--against", "HEAD", *QUICK, "--round-level", faults={"candidate": {"sweep": "plant-other"}})
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)  # the candidate's own doing
        self.assertIn("the candidate build's sweep of row single made", done.stderr)

    def test_a_gate_started_from_a_folder_it_makes_afresh_is_refused(self) -> None:
        # Started from --out-dir/current/: its claim removed the folder it ran in, every child then
        # ran in a removed folder, and the candidate was blamed (1 under --bisect).
        self.stand_in.gate("--against", "HEAD", *QUICK)
        inside = self.out / "candidate"
        done = subprocess.run([str(self.stand_in.repo / "scripts" / "ci-bench"), "--bisect", "--against", "HEAD", *QUICK],
                              cwd=inside, env=self.stand_in.env(), capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 128, done.stdout + done.stderr)
        self.assertIn("which the gate removes and makes afresh", done.stderr)
        self.assertTrue(inside.is_dir())

    def test_a_link_to_the_entry_starts_the_gate_beside_it(self) -> None:
        # ~/bin/ci-bench -> checkout/scripts/ci-bench: Python found no gate beside the link (exit 2: "bad").
        link = self.dir / "bin" / "ci-bench"
        link.parent.mkdir()
        link.symlink_to(self.stand_in.repo / "scripts" / "ci-bench")
        done = subprocess.run([str(link), "--bisect", "--help"], cwd=self.stand_in.repo, env=self.stand_in.env(),
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 128, done.stdout + done.stderr)
        self.assertIn("--against", done.stdout)

    def test_the_candidates_build_folder_inside_the_out_dir_is_the_inputs_fault(self) -> None:
        # Built by its own set-up into --out-dir/current: the stored gate set its build aside as a
        # stranger's and blamed the candidate (1).
        baseline = self.stand_in.stored_baseline(self.dir / "baseline.json", repeat=3)
        env = self.stand_in.env(DDPBENCH_BUILD_DIR=str(self.out / "current"))
        del env["DDPBENCH_BINARY"]
        for args in (["--baseline", str(baseline)], ["--against", "HEAD", *QUICK]):
            with self.subTest(args=args[0]):
                done = self.stand_in.gate(*args, "--bisect", env=env)
                self.assertEqual(done.returncode, 128, done.stdout + done.stderr)
                self.assertIn("lie one inside the other", done.stderr)

    def test_no_child_outlives_the_gate(self) -> None:
        # A sweep whose child ignores SIGTERM: at the row's deadline, and after a signal to the gate;
        # a sweep that ignores SIGTERM itself, signalled again while the gate waits for it to stop.
        state = self.stand_in.state
        state.mkdir(exist_ok=True)
        for mode, fault, signals in (([], "orphan", ()), (["--round-level"], "orphan", ()),
                                     ([], "orphan", (signal.SIGTERM, signal.SIGINT)),
                                     (["--round-level"], "orphan", (signal.SIGTERM, signal.SIGINT)),
                                     ([], "deaf", (signal.SIGTERM, signal.SIGINT)),
                                     (["--round-level"], "deaf", (signal.SIGTERM, signal.SIGINT)),
                                     ([], "orphan", (signal.SIGUSR1,)), (["--round-level"], "orphan", (signal.SIGQUIT,))):
            with self.subTest(mode=mode, fault=fault, signals=signals):
                (state / "orphans").unlink(missing_ok=True)
                env = self.stand_in.env({"candidate": {"sweep": fault}})
                gate = subprocess.Popen(["scripts/ci-bench", "--against", "HEAD", *QUICK, *mode], cwd=self.stand_in.repo,
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(300):
                    if (state / "orphans").exists() and (state / "orphans").read_text().strip():
                        break
                    time.sleep(0.1)
                for signum in signals:
                    gate.send_signal(signum)
                    time.sleep(1)
                _, stderr = gate.communicate(timeout=180)
                # Any signal whose default ends a process (SIGUSR1 and SIGQUIT left both builds running).
                self.assertEqual(gate.returncode, 128 + signals[0] if signals else 1, f"{mode} {signals}: {stderr}")
                orphan = int((state / "orphans").read_text().split()[0])
                self.assertFalse(alive(orphan), f"{mode} {signals}: the sweep's child outlived the gate")

    def test_a_signalled_gate_stops_every_run_and_a_second_gate_waits_for_no_one(self) -> None:
        state = self.stand_in.state
        state.mkdir(exist_ok=True)
        for mode in ([], ["--round-level"]):
            self.stand_in.gate("--against", "HEAD", *QUICK)  # a finished gate's verdict, to be removed
            (state / "pids").unlink(missing_ok=True)
            env = self.stand_in.env(STAND_IN_TIMES=json.dumps({"sleep_s": 60}), DDPBENCH_CI_ROW_TIMEOUT_S="600")
            command = ["scripts/ci-bench", "--against", "HEAD", *QUICK, *mode]
            first = subprocess.Popen(command, cwd=self.stand_in.repo, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
            for _ in range(300):
                if (state / "pids").exists() and (state / "pids").read_text().strip():
                    break
                time.sleep(0.1)
            second = subprocess.run(command, cwd=self.stand_in.repo, env=env, capture_output=True, text=True,
                                    timeout=60)
            self.assertEqual(second.returncode, 2, second.stderr)
            self.assertIn("another gate is using --out-dir", second.stderr)
            first.send_signal(signal.SIGTERM)
            _, stderr = first.communicate(timeout=120)
            self.assertEqual(first.returncode, 143, f"{mode}: {stderr}")
            self.assertIn("interrupted: stopped by SIGTERM", stderr)
            for pid in (state / "pids").read_text().split():
                self.assertFalse(alive(int(pid)), f"{mode}: sweep {pid} outlived its gate")
            self.assertFalse((self.out / "verdict.txt").exists(), f"{mode}: an interrupted gate left a verdict")


if __name__ == "__main__":
    unittest.main()

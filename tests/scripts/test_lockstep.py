"""scripts/lib/lockstep.py, the coordinator of lockstep runs (scripts/ci-bench --against): the
turn order (ABBA, the first build drawn from the seed and the run), that no two builds' steps
ever overlap, that a build whose training ends first is held until the other's ends, and that a
rank that dies or hangs ends its build's part while the other build and the coordinator finish
within the timeout, the culprit named; on stand-in builds (fake_lockstep_build.py). Then the real
ddpbench in lockstep through the gate's rounds (scripts/lib/ci_gate): a candidate slowed by busy work is
caught, an unchanged one is not, and a rank killed in lockstep fails the candidate's row.

Run: python3 -m unittest -v test_lockstep (from tests/scripts); the real-build tests need
DDPBENCH_BINARY.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import unittest
from collections import Counter
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(SOURCE / "scripts" / "lib"))
import lockstep  # noqa: E402

FAKE = Path(__file__).resolve().parent / "fake_lockstep_build.py"
sys.path.insert(0, str(Path(__file__).resolve().parent / "ci_gate"))
from gate_rounds import run_paired  # noqa: E402


class TurnOrderTest(unittest.TestCase):
    def test_pairs_alternate_abba(self) -> None:
        self.assertEqual(lockstep.turn_order("a", "b", 4), ["a", "b", "b", "a", "a", "b", "b", "a"])
        self.assertEqual(lockstep.pair_order("x", "y", 0), ["x", "y"])
        self.assertEqual(lockstep.pair_order("x", "y", 7), ["y", "x"])

    def test_the_first_build_is_drawn_from_the_seed_and_run_and_reproduced(self) -> None:
        labels = ["baseline", "candidate"]
        firsts = [lockstep.first_build(labels, 5, f"{run}:ddp-2") for run in range(40)]
        self.assertEqual(firsts, [lockstep.first_build(labels, 5, f"{run}:ddp-2") for run in range(40)])
        self.assertEqual(set(firsts), set(labels))
        counts = Counter(firsts)
        self.assertGreaterEqual(min(counts.values()), 10, counts)
        self.assertNotEqual(firsts, [lockstep.first_build(labels, 6, f"{run}:ddp-2") for run in range(40)])
        # The labels' order does not decide it.
        self.assertEqual(lockstep.first_build(["candidate", "baseline"], 5, "3:x"), lockstep.first_build(labels, 5, "3:x"))


class BuildProcessesTest(unittest.TestCase):
    """What the coordinator starts is answered for as children.run answers for its children: a build
    that cannot start is that build's (it was the gate's own failure, 128 under --bisect), and what a
    build leaves running in its group ends with it (a burner outlived the gate)."""

    def setUp(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-lockstep-"))
        self.addCleanup(shutil.rmtree, self.dir)

    def test_what_a_build_leaves_running_ends_with_it(self) -> None:
        builds = [lockstep.Participant(label, ("sh", "-c", f"sleep 120 & echo $! > {self.dir}/{label}; exit 0"),
                                       self.dir / f"{label}.log") for label in ("baseline", "candidate")]
        ran = lockstep.run_lockstep(builds, 1, "leftovers", None, 5, 5, hang_grace_s=1, deadline_s=30)
        self.assertEqual(ran.returncodes, {"baseline": 0, "candidate": 0})
        time.sleep(0.3)
        for label in ("baseline", "candidate"):
            status = Path(f"/proc/{(self.dir / label).read_text().strip()}/status")
            self.assertTrue(not status.exists() or "\nState:\tZ" in status.read_text(), f"{label}'s burner lives on")

    def test_a_signal_while_a_build_starts_stops_the_build(self) -> None:
        # The gate's signal came inside Popen, after its fork: the build was in no one's hands and
        # ran on after the gate. `starting` is the gate's block that holds the signal until the
        # build is registered, then raises it.
        class Signalled(BaseException):
            pass

        @contextlib.contextmanager
        def signalled_while_starting():
            yield
            raise Signalled

        pid_file = self.dir / "pid"
        sleeper = (sys.executable, "-c", f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
                   "time.sleep(60)")
        with self.assertRaises(Signalled):
            lockstep.run_lockstep([lockstep.Participant("baseline", sleeper, self.dir / "b.log")], 1, "0",
                                  deadline_s=10, starting=signalled_while_starting)
        for _ in range(50):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.1)
        if pid_file.exists() and pid_file.read_text():
            self.assertFalse(Path(f"/proc/{pid_file.read_text()}").exists(), "the build outlived the signal")

    def test_a_long_temporary_folder_does_not_stop_the_run(self) -> None:
        # A socket's path has at most 107 characters: TMPDIR's of 110 failed the round after REV's
        # build (the gate's own failure), its folder left behind.
        long_tmp = self.dir / ("t" * 100)
        long_tmp.mkdir()
        before, tempfile.tempdir = tempfile.tempdir, str(long_tmp)
        self.addCleanup(setattr, tempfile, "tempdir", before)
        ran = lockstep.run_lockstep([lockstep.Participant("baseline", ("true",), self.dir / "b.log")], 1, "0",
                                    deadline_s=30)
        self.assertEqual(ran.returncodes, {"baseline": 0})
        self.assertEqual(list(long_tmp.iterdir()), [])

    def test_a_build_that_cannot_start_is_named(self) -> None:
        builds = [lockstep.Participant("baseline", ("true",), self.dir / "baseline.log"),
                  lockstep.Participant("candidate", (str(self.dir / "no-such-binary"),), self.dir / "candidate.log")]
        with self.assertRaises(lockstep.CannotStart) as raised:
            lockstep.run_lockstep(builds, 1, "cannot-start", None, 5, 5, hang_grace_s=1, deadline_s=30)
        self.assertEqual(raised.exception.label, "candidate")


class StandInLockstep(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-lockstep-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.log = self.dir / "steps.log"

    def build(self, label: str, **spec: object) -> lockstep.Participant:
        full = {"rows": ["ddp-2"], "world": 2, "steps": 6, "step_s": 0.02, "log": str(self.log), "die": None,
                "hang": None, "exit": None}
        full.update(spec)
        path = self.dir / f"{label}.json"
        path.write_text(json.dumps(full))
        return lockstep.Participant(label, (sys.executable, str(FAKE), str(path)), self.dir / f"{label}.log")

    @staticmethod
    def run_lockstep(*args: object, **kwargs: object) -> lockstep.LockstepRun:
        """A lockstep run that cannot outlive the test: stopped after a minute."""
        kwargs.setdefault("deadline_s", 60)
        return lockstep.run_lockstep(*args, **kwargs)  # type: ignore[arg-type]

    def steps(self) -> list[tuple[str, str, int, int, float, float]]:
        out = []
        for line in self.log.read_text().splitlines():
            arm, row, rank, step, *times = line.split()
            if step != "held":
                out.append((arm, row, int(rank), int(step), float(times[0]), float(times[1])))
        return out

    def held(self) -> dict[tuple[str, str, int], float]:
        held = {}
        for line in self.log.read_text().splitlines():
            arm, row, rank, step, *times = line.split()
            if step == "held":
                held[(arm, row, int(rank))] = float(times[0])
        return held

    def assert_no_overlap(self, steps: list[tuple[str, str, int, int, float, float]]) -> None:
        for a in steps:
            for b in steps:
                if a[0] != b[0] and a[1] == b[1]:
                    self.assertFalse(a[4] < b[5] and b[4] < a[5], f"steps of two builds overlap: {a} and {b}")


class CoordinatorTest(StandInLockstep):
    def test_two_builds_take_turns_abba_and_never_overlap(self) -> None:
        ran = self.run_lockstep([self.build("baseline"), self.build("candidate")], seed=4, run="0:ddp-2",
                                    record_path=self.dir / "record.json", turn_timeout_s=30)
        self.assertEqual(ran.returncodes, {"baseline": 0, "candidate": 0})
        session, = ran.record["sessions"]
        self.assertEqual(session["culprits"], [])
        first = lockstep.first_build(["baseline", "candidate"], 4, "0:ddp-2")
        self.assertEqual(session["first"], first)
        second = "candidate" if first == "baseline" else "baseline"
        self.assertEqual([t["build"] for t in session["turns"]], lockstep.turn_order(first, second, 6))
        steps = self.steps()
        self.assertEqual(Counter((arm, rank) for arm, _, rank, *_ in steps),
                         {(arm, rank): 6 for arm in ("baseline", "candidate") for rank in (0, 1)})
        self.assert_no_overlap(steps)
        self.assertEqual(json.loads((self.dir / "record.json").read_text())["sessions"][0]["first"], first)

    def test_the_build_that_ends_first_is_held_until_the_other_ends(self) -> None:
        ran = self.run_lockstep([self.build("baseline"), self.build("candidate")], seed=2, run="1:ddp-2")
        self.assertEqual(ran.returncodes, {"baseline": 0, "candidate": 0})
        last_step_end = max(end for *_, end in self.steps())
        for key, released in self.held().items():
            self.assertGreaterEqual(released, last_step_end, f"{key} was released before the last step ended")

    def test_a_build_that_ends_first_is_held_by_bye_not_by_a_turn(self) -> None:
        # The coordinator may give the turn to a build that has just sent "end": only "bye",
        # once the other build's training is over too, releases it.
        ran = self.run_lockstep([self.build("baseline", steps=2, world=1),
                                     self.build("candidate", steps=6, world=1)], seed=2, run="0:ddp-2")
        self.assertEqual(ran.returncodes, {"baseline": 0, "candidate": 0})
        candidate_end = max(end for arm, *_, end in self.steps() if arm == "candidate")
        self.assertGreaterEqual(self.held()[("baseline", "ddp-2", 0)], candidate_end)

    def test_a_build_stuck_after_its_training_is_stopped_and_named(self) -> None:
        began = time.monotonic()
        ran = self.run_lockstep([self.build("baseline"), self.build("candidate", linger_s=600)], seed=1,
                                    run="0:ddp-2", start_timeout_s=3)
        self.assertLess(time.monotonic() - began, 60)
        self.assertEqual(ran.returncodes["baseline"], 0)
        self.assertIn("the candidate build did not end within 3 s of the other build's end and its own last word: "
                      "it is stuck", ran.record["stopped"]["candidate"])

    def test_a_build_left_to_run_alone_is_not_stuck_while_it_runs(self) -> None:
        # The other build failed at once: this one's row, longer than the timeout, is no hang.
        # Its steps (3 s) are longer than the timeout (2 s): it says nothing while it works.
        ran = self.run_lockstep([self.build("baseline", exit=2), self.build("candidate", world=1, steps=3, step_s=3)],
                                seed=1, run="0:ddp-2", start_timeout_s=2)
        self.assertEqual(ran.returncodes, {"baseline": 2, "candidate": 0})
        self.assertEqual(ran.record["stopped"], {})
        self.assertEqual(Counter(arm for arm, *_ in self.steps()), {"candidate": 3})

    def test_a_build_whose_ranks_do_not_come_is_stopped_not_left_to_run_alone_later(self) -> None:
        late = self.dir / "late.sh"
        late.write_text(f"#!/bin/sh\nsleep 600\nexec {sys.executable} {FAKE} {self.dir / 'candidate.json'}\n")
        late.chmod(0o755)
        self.build("candidate")  # writes candidate.json
        began = time.monotonic()
        ran = self.run_lockstep([self.build("baseline"),
                                     lockstep.Participant("candidate", (str(late),), self.dir / "late.log")],
                                    seed=1, run="0:ddp-2", start_timeout_s=3)
        self.assertLess(time.monotonic() - began, 60)
        self.assertEqual(ran.returncodes["baseline"], 0)
        self.assertIn("did not all come within 3 s", ran.record["stopped"]["candidate"])
        self.assertEqual(Counter(arm for arm, *_ in self.steps()), {"baseline": 12})

    def test_a_build_that_floods_the_socket_is_stopped_as_its_culprit(self) -> None:
        # A candidate's thousand connections ran the gate out of files (its own failure, 128) or
        # took the row's deadline (the baseline blamed): the fourteenth attack.
        ran = self.run_lockstep([self.build("base"), self.build("cand", flood=lockstep.MOST_CONNECTIONS + 10)], 1, "r")
        self.assertIn("cand", ran.record["stopped"])
        self.assertIn("flooded the socket", ran.record["stopped"]["cand"])
        self.assertNotIn("base", ran.record["stopped"])

    def test_a_run_past_its_deadline_stops_every_build_still_running(self) -> None:
        began = time.monotonic()
        ran = self.run_lockstep([self.build("baseline", step_s=0.5, steps=40), self.build("candidate", step_s=0.5,
                                                                                           steps=40)],
                                seed=1, run="0:ddp-2", deadline_s=4)
        self.assertLess(time.monotonic() - began, 60)
        self.assertEqual(set(ran.record["stopped"]), {"baseline", "candidate"})
        self.assertIn("passed its deadline of 4 s", ran.record["stopped"]["baseline"])

    def test_rows_run_one_after_the_other_each_in_lockstep(self) -> None:
        ran = self.run_lockstep([self.build("baseline", rows=["single", "single.torch"], world=1),
                                     self.build("candidate", rows=["single", "single.torch"], world=1)],
                                    seed=1, run="0:single")
        self.assertEqual([s["row"] for s in ran.record["sessions"]], ["single", "single.torch"])
        self.assert_no_overlap(self.steps())

    def test_a_rank_that_dies_ends_its_build_and_the_other_runs_on(self) -> None:
        began = time.monotonic()
        ran = self.run_lockstep([self.build("baseline"), self.build("candidate", die=[1, 3])], seed=3,
                                    run="0:ddp-2", turn_timeout_s=30)
        self.assertLess(time.monotonic() - began, 25)
        self.assertEqual(ran.returncodes["baseline"], 0)
        self.assertNotEqual(ran.returncodes["candidate"], 0)
        culprits = ran.record["sessions"][0]["culprits"]
        self.assertEqual(len(culprits), 1, culprits)
        self.assertRegex(culprits[0], r"the candidate build's rank 1 \(pid \d+\) of row ddp-2 hung up in its turn of "
                                      r"pair 3: it died or failed")
        self.assertEqual(Counter(arm for arm, *_ in self.steps())["baseline"], 12, "the baseline build did not finish")

    def test_a_rank_that_hangs_is_named_and_its_build_killed_within_the_timeout(self) -> None:
        began = time.monotonic()
        ran = self.run_lockstep([self.build("baseline"), self.build("candidate", hang=[1, 2])], seed=3,
                                    run="0:ddp-2", turn_timeout_s=2, hang_grace_s=1)
        self.assertLess(time.monotonic() - began, 40, "the coordinator did not end within the timeout")
        self.assertEqual(ran.returncodes["baseline"], 0)
        self.assertNotEqual(ran.returncodes["candidate"], 0)
        self.assertEqual(ran.record["hung"], ["candidate"])
        self.assertIn("gave no answer", ran.record["stopped"]["candidate"])
        culprits = ran.record["sessions"][0]["culprits"]
        self.assertEqual(len(culprits), 1, culprits)
        self.assertRegex(culprits[0], r"the candidate build's row ddp-2: rank 1 \(pid \d+\) gave no answer to its "
                                      r"turn of pair 2 within 2 s: it hangs")
        self.assertEqual(Counter(arm for arm, *_ in self.steps())["baseline"], 12)

    def test_a_build_that_never_connects_leaves_the_other_to_run_alone(self) -> None:
        ran = self.run_lockstep([self.build("baseline"), self.build("candidate", exit=2)], seed=3, run="0:ddp-2")
        self.assertEqual(ran.returncodes, {"baseline": 0, "candidate": 2})
        session, = ran.record["sessions"]
        self.assertEqual(session["builds"], ["baseline"])
        self.assertEqual(Counter(arm for arm, *_ in self.steps()), {"baseline": 12})

    def test_a_stranger_on_the_socket_is_refused_and_named(self) -> None:
        # A hello that names no build of the run (or a rank twice) is dropped, never given turns.
        stranger = self.dir / "stranger.py"
        stranger.write_text(
            "import os, socket\n"
            "s = socket.socket(socket.AF_UNIX); s.connect(os.environ['DDPBENCH_LOCKSTEP_SOCKET'])\n"
            "s.sendall(b'hello intruder ddp-2 0 2 1\\n'); print(s.recv(10))\n")
        ran = self.run_lockstep([self.build("baseline"),
                                     lockstep.Participant("candidate", (sys.executable, str(stranger)),
                                                          self.dir / "candidate.log")], seed=3, run="0")
        self.assertEqual(ran.returncodes["baseline"], 0)
        self.assertIn("hello intruder ddp-2 0 2 1", " ".join(ran.record["problems"]))
        self.assertIn("b''", (self.dir / "candidate.log").read_text(), "the stranger was given a turn")

    def test_a_builds_ranks_in_sessions_of_their_own_are_the_builds(self) -> None:
        # PyTorch's twins fork from the preloaded Python and start sessions of their own: taken by
        # their session alone, every twin rank was "a process of neither build" and refused.
        ran = self.run_lockstep([self.build("baseline", own_session=True), self.build("candidate", own_session=True)],
                                seed=3, run="0")
        self.assertEqual(ran.returncodes, {"baseline": 0, "candidate": 0})
        self.assertEqual(ran.record["problems"], [])
        self.assertEqual(Counter(arm for arm, *_ in self.steps()), {"baseline": 12, "candidate": 12})
        self.assert_no_overlap(self.steps())

    def test_a_build_that_speaks_for_the_other_is_stopped_and_the_other_runs_on(self) -> None:
        # The candidate's process says hello as the baseline's rank 0 before the baseline's own rank
        # 0 comes: the kernel's word on the sender (its session) decides whose it is, not the hello.
        impostor = self.dir / "impostor.py"
        impostor.write_text(
            "import os, socket, time\n"
            "s = socket.socket(socket.AF_UNIX); s.connect(os.environ['DDPBENCH_LOCKSTEP_SOCKET'])\n"
            "s.sendall(b'hello baseline ddp-2 0 2 %d\\n' % os.getpid()); s.recv(10); time.sleep(60)\n")
        baseline = self.build("baseline")
        slow_start = (sys.executable, "-c", "import os, sys, time; time.sleep(0.5); "
                      "os.execv(sys.executable, [sys.executable] + sys.argv[1:])") + baseline.command[1:]
        ran = self.run_lockstep([lockstep.Participant("baseline", slow_start, baseline.log),
                                 lockstep.Participant("candidate", (sys.executable, str(impostor)),
                                                      self.dir / "candidate.log")], seed=3, run="0")
        self.assertEqual(ran.returncodes["baseline"], 0, (self.dir / "baseline.log").read_text())
        self.assertNotEqual(ran.returncodes["candidate"], 0)
        self.assertIn("candidate", ran.record["stopped"])
        self.assertNotIn("baseline", ran.record["stopped"])
        self.assertIn("a process of the candidate build said 'hello baseline", " ".join(ran.record["problems"]))
        self.assertEqual(Counter(arm for arm, *_ in self.steps()), {"baseline": 12})


def real_binary() -> str | None:
    return os.environ.get("DDPBENCH_BINARY")


@unittest.skipUnless(real_binary(), "DDPBENCH_BINARY is not set (the real ddpbench)")
class RealBuildsTest(unittest.TestCase):
    """Two builds of the real ddpbench (one binary; the candidate slowed by --inject-slowdown:
    real busy work in every step) through the gate's rounds in lockstep (ci_gate.adaptive_rounds)."""

    def setUp(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="ddpbench-lockstep-real-"))
        self.addCleanup(shutil.rmtree, self.dir)
        self.sweep = self.dir / "sweep.json"
        self.sweep.write_text(json.dumps({
            "name": "lockstep-test", "baseline": "single",
            "defaults": {"model": "resnet18", "num-classes": 10, "dataset": "synthetic", "synthetic-train-images": 512,
                         "synthetic-test-images": 64, "batch-size": 16, "workers": 0, "device": "cpu", "max-steps": 10,
                         "warmup-steps": 2, "max-eval-batches": 1, "seed": 1, "threads": 1},
            "rows": [{"name": "single", "options": {"strategy": "single"}},
                     {"name": "ddp-2", "devices": 2, "options": {"strategy": "ddp", "nproc": 2, "sync-bn": False}}]}))
        # One binary, two labels: a build whose sweep always adds the candidate's arguments.
        self.candidate = self.dir / "candidate-ddpbench"

    def only_ddp(self) -> Path:
        only_ddp = self.dir / "ddp-2.json"
        sweep = json.loads(self.sweep.read_text())
        sweep["rows"] = [row for row in sweep["rows"] if row["name"] == "ddp-2"]
        sweep["baseline"] = "ddp-2"
        only_ddp.write_text(json.dumps(sweep))
        return only_ddp

    def candidate_with(self, *args: str) -> Path:
        self.candidate.write_text(f"#!/bin/sh\ncmd=$1; shift\nexec {real_binary()} \"$cmd\" \"$@\" "
                                  + " ".join(args) + "\n")
        self.candidate.chmod(0o755)
        return self.candidate

    def gate(self, candidate: Path, *args: str, sweep: Path | None = None):
        sweep = sweep or self.sweep
        rows = tuple(row["name"] for row in json.loads(sweep.read_text())["rows"])
        return run_paired(Path(real_binary()), candidate, sweep, rows, self.dir / "out", "--min-rounds", "3",
                          "--max-rounds", "3", "--metric", "step_time_s", *args, seed=7, lockstep=True)

    def rows(self, label: str, round_index: int, row: str) -> dict:
        path = self.dir / "out" / label / f"round-{round_index:02d}" / row / "results.json"
        return next(r for r in json.loads(path.read_text())["runs"] if r["name"] == row)

    def test_pytorchs_twins_forked_by_the_preloaded_python_take_their_turns(self) -> None:
        """The twins' ranks start sessions of their own (strategies/pytorch/rank_server.py): the
        coordinator took them for strangers, and every twin failed on both builds."""
        participants = []
        for label in ("baseline", "candidate"):
            folder = self.dir / label
            folder.mkdir()
            participants.append(lockstep.Participant(
                label, (real_binary(), "sweep", "--file", str(self.sweep), "--mode", "faithful", "--table", "tutorial",
                        "--rows", "single", "--out-dir", str(folder), "--reference"), folder / "sweep.log"))
        ran = lockstep.run_lockstep(participants, 1, "0", turn_timeout_s=120, start_timeout_s=120, deadline_s=600)
        self.assertEqual(ran.returncodes, {"baseline": 0, "candidate": 0}, (self.dir / "candidate" / "sweep.log").read_text())
        self.assertEqual(ran.record["problems"], [])
        self.assertEqual({s["row"]: s["builds"] for s in ran.record["sessions"]},
                         {"single": ["baseline", "candidate"], "single.torch": ["baseline", "candidate"]})

    def test_a_slowed_candidate_is_caught_and_the_waits_are_not_timed(self) -> None:
        done = self.gate(self.candidate_with("--inject-slowdown", "1.0"))
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        for row in ("single", "ddp-2"):
            self.assertRegex(done.stdout, rf"- {row} \(faithful\) step_time_s: \d+\.\d % slower.*REGRESSION")
        self.assertIn("matched steady steps", done.stdout)
        for round_index in range(3):
            record = json.loads((self.dir / "out" / "baseline" / f"round-{round_index:02d}" / "single" /
                                 "lockstep.json").read_text())
            self.assertEqual([s["culprits"] for s in record["sessions"]], [[]])
            runs = {label: self.rows(label, round_index, "single") for label in ("baseline", "candidate")}
            steps_s = {label: sum(s["time_s"] for s in run["step_records"]) for label, run in runs.items()}
            for label, other in (("baseline", "candidate"), ("candidate", "baseline")):
                run = runs[label]
                # A step's time starts with its turn: the other build's steps are not in it ...
                self.assertLessEqual(steps_s[label], run["train_time_s"] + 1e-3, f"{label}: a wait counted in a step")
                # ... the build waited through every step of the other's ...
                self.assertGreater(run["lockstep_wait_s"], 0.9 * steps_s[other], label)
                # ... and those waits are not in its training time.
                self.assertLess(run["train_time_s"], steps_s[label] + 0.5 * steps_s[other],
                                f"{label}: the waits counted in train_time_s")

    def test_an_unchanged_candidate_is_no_regression(self) -> None:
        # A 50 % threshold: no unchanged build comes near it, so the verdict cannot flake.
        done = self.gate(self.candidate_with(), "--threshold", "0.5")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertNotIn("REGRESSION", done.stdout)

    def test_a_candidate_that_takes_no_turns_fails(self) -> None:
        # Its ranks never hear of the coordinator: they run beside the baseline build's turns.
        self.candidate.write_text(f"#!/bin/sh\nexec env -u DDPBENCH_LOCKSTEP_SOCKET {real_binary()} \"$@\"\n")
        self.candidate.chmod(0o755)
        done = self.gate(self.candidate, "--threshold", "0.5")
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertRegex(done.stderr, r"the candidate build's row \S+ ran without taking turns .*the candidate broke "
                                      r"lockstep: the candidate fails the gate")
        self.assertEqual((self.dir / "out" / "verdict.txt").read_text(), "regression\n")

    def test_a_rank_killed_in_lockstep_fails_the_candidates_row_and_the_gate_ends(self) -> None:
        began = time.monotonic()
        done = self.gate(self.candidate_with("--inject-fault-kind", "kill", "--inject-fault-rank", "1",
                                             "--inject-fault-step", "4"), "--threshold", "0.5", sweep=self.only_ddp())
        self.assertLess(time.monotonic() - began, 600)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertRegex(done.stdout, r"failed on the candidate: ddp-2")
        self.assertRegex(done.stdout, r"What the lockstep coordinator saw:\n- round 1, ddp-2: the candidate build's "
                                      r"rank 1 \(pid \d+\) of row ddp-2 hung up")
        self.assertEqual(self.rows("baseline", 0, "ddp-2")["status"], "ok", "the baseline build did not run on")

    def test_a_rank_hung_in_lockstep_fails_the_candidate_not_interrupts_the_gate(self) -> None:
        # The coordinator stops the hung build (SIGTERM: exit 143); that exit is its doing, not
        # the user's interruption (130).
        began = time.monotonic()
        done = self.gate(self.candidate_with("--inject-fault-kind", "hang", "--inject-fault-rank", "0",
                                             "--inject-fault-step", "3"), "--threshold", "0.5", "--turn-timeout-s",
                         "15", sweep=self.only_ddp())
        self.assertLess(time.monotonic() - began, 300)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertRegex(done.stderr, r"the candidate build's sweep of row ddp-2 .*was stopped by the lockstep "
                                      r"coordinator: the candidate build's row ddp-2: rank .* gave no answer to its "
                                      r"turn of pair \d+ within 15 s: it hangs")


if __name__ == "__main__":
    unittest.main()

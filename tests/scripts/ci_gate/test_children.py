"""scripts/lib/ci_gate/children.py: how a child ended, read knowing its side: a deadline stops it
(a hang), a signal it did not get from the gate is a crash, SIGINT or SIGTERM from someone else an
interruption, exit 2 a refusal; and a signal to the gate stops every child it started.

Run: python3 -m unittest -v test_children (from tests/scripts/ci_gate).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

SOURCE = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(SOURCE / "scripts" / "lib"))
from ci_gate import children  # noqa: E402
from ci_gate.outcomes import Side, Stop, What  # noqa: E402


def alive(pid: int) -> bool:
    """A process that has not ended (a zombie left for a parent that does not reap has ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def sh(script: str, deadline_s: float = 30, **kwargs) -> children.Finished:
    return children.run(Side.CANDIDATE, "the candidate's test", ["sh", "-c", script], deadline_s, **kwargs)


class ProblemTest(unittest.TestCase):
    def test_each_way_a_child_ends(self) -> None:
        cases = (("exit 0", None), ("exit 1", None), ("exit 2", What.REFUSED), ("kill -SEGV $$", What.CRASH),
                 ("kill -KILL $$", What.CRASH), ("exit 139", What.CRASH), ("exit 3", What.CRASH),
                 ("kill -TERM $$", What.INTERRUPTED), ("exit 130", What.INTERRUPTED),
                 ("exit 143", What.INTERRUPTED))
        for script, what in cases:
            with self.subTest(script=script):
                found = sh(script).problem()
                self.assertEqual(None if found is None else found[0], what, found)
        # SIGINT, its default restored (a shell started in the background ignores it).
        interrupted = children.run(Side.CANDIDATE, "the candidate's test", [sys.executable, "-c", (
            "import os, signal; signal.signal(signal.SIGINT, signal.SIG_DFL); os.kill(os.getpid(), signal.SIGINT)")],
            30)
        self.assertEqual(interrupted.problem()[0], What.INTERRUPTED)

    def test_a_child_past_its_deadline_is_stopped_with_what_it_started(self) -> None:
        folder = Path(tempfile.mkdtemp(prefix="ddpbench-children-"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(folder)])
        started = time.monotonic()
        done = sh(f"sleep 300 & echo $! > {folder}/grandchild; wait", deadline_s=1, log=folder / "log")
        self.assertLess(time.monotonic() - started, 20)
        self.assertTrue(done.timed_out)
        self.assertEqual(done.problem()[0], What.HANG)
        time.sleep(0.2)
        self.assertFalse(alive(int((folder / "grandchild").read_text())), "the child's own child outlived its deadline")
        with self.assertRaises(Stop) as raised:
            done.stop_unless_fine()
        self.assertIs(raised.exception.outcome.side, Side.CANDIDATE)
        self.assertIn("ran past its deadline of 1 s", str(raised.exception))

    def test_a_child_that_floods_its_output_costs_the_gate_a_bounded_memory(self) -> None:
        """A compare that prints without end (until its deadline) was kept whole in memory: the
        gate died of MemoryError, "the gate's own failure", where the child was at fault."""
        done = children.run(Side.CANDIDATE, "the candidate's compare",
                            [sys.executable, "-c", "import sys\nsys.stdout.write('first line\\n')\n"
                             "for _ in range(48): sys.stdout.write('y' * (1 << 20))\nsys.stdout.write('\\nlast line\\n')\n"
                             "sys.stderr.write('x' * (20 << 20))"], 60, capture=True)
        self.assertEqual(done.returncode, 0)
        self.assertTrue(done.stdout.startswith("first line\n"))
        self.assertTrue(done.stdout.endswith("last line\n"))
        self.assertIn("bytes left out", done.stdout)
        self.assertLessEqual(len(done.stdout), 2 * children.KEPT_BYTES + 100)
        self.assertLessEqual(len(done.stderr), 2 * children.KEPT_BYTES + 100)
        small = children.run(Side.CANDIDATE, "a child", ["printf", "a\\377b"], 10, capture=True)
        self.assertEqual(small.stdout, "a\ufffdb", "bytes no UTF-8 reads are read, never the gate's failure")

    def test_a_marked_line_drowned_by_a_flood_is_kept(self) -> None:
        """A compare's "Cannot judge" after megabytes of its own output fell between the kept head
        and tail: its answer read as a refusal."""
        flood = ("import sys\nfor _ in range(6): sys.stdout.write('y' * (1 << 20))\n"
                 "sys.stdout.write('\\nCannot judge: too noisy\\nCannot judge in part\\n')\n"
                 "for _ in range(6): sys.stdout.write('z' * (1 << 20))\n")
        done = children.run(Side.CANDIDATE, "the candidate's compare", [sys.executable, "-c", flood], 60,
                            capture=True, markers=("Cannot judge:",))
        lines = done.stdout.splitlines()
        self.assertIn("Cannot judge: too noisy", lines)
        self.assertNotIn("Cannot judge in part", lines, "only lines that start with a marker are kept")
        unmarked = children.run(Side.CANDIDATE, "a child", [sys.executable, "-c", flood], 60, capture=True)
        self.assertNotIn("Cannot judge: too noisy", unmarked.stdout.splitlines())

    def test_what_a_child_leaves_running_in_its_group_ends_with_it(self) -> None:
        """A sweep that starts a burner in the background and exits 0: the burner outlived the gate,
        and its CPU passed for another's load."""
        folder = Path(tempfile.mkdtemp(prefix="ddpbench-children-"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(folder)])
        done = sh(f"sleep 300 & echo $! > {folder}/left; exit 0", deadline_s=30, log=folder / "log")
        self.assertEqual(done.returncode, 0)
        time.sleep(0.2)
        self.assertFalse(alive(int((folder / "left").read_text())), "a child's leftover outlived it")
        # One that moved to a process group of its own (as job control does) is still of its session.
        moved = (f"{sys.executable} -c 'import os, time; os.setpgid(0, 0); "
                 f"open(\"{folder}/moved\", \"w\").write(str(os.getpid())); time.sleep(300)' & "
                 f"while [ ! -s {folder}/moved ]; do sleep 0.05; done; exit 0")
        done = sh(moved, deadline_s=30, log=folder / "log2")
        self.assertEqual(done.returncode, 0)
        time.sleep(0.2)
        self.assertFalse(alive(int((folder / "moved").read_text())), "a child in a group of its own outlived it")

    def test_a_child_that_cannot_start_is_its_sides_crash(self) -> None:
        with self.assertRaises(Stop) as raised:
            children.run(Side.BASELINE, "the baseline build's sweep", ["/no/such/binary"], 10)
        self.assertEqual((raised.exception.outcome.side, raised.exception.outcome.what), (Side.BASELINE, What.CRASH))

    def test_the_gates_own_child_that_cannot_start_is_the_gates_failure(self) -> None:
        # git absent from PATH: a crash of the gate's side has no exit code (a ValueError, caught
        # only by the report's last resort).
        with self.assertRaises(Stop) as raised:
            children.run(Side.GATE, "git rev-parse", ["/nonexistent/git"], 5.0)
        self.assertEqual((raised.exception.outcome.side, raised.exception.outcome.what), (Side.GATE, What.FAILED))
        self.assertEqual(raised.exception.outcome.exit_code(bisect=True), 128)

    def test_a_signal_while_a_child_fails_to_start_is_never_lost(self) -> None:
        # Popen raising OSError after the signal came (a binary gone mid-run): the side's crash
        # went on, the signal dropped, the gate's answer 1 where it was signalled.
        from ci_gate.outcomes import Signalled
        self.addCleanup(setattr, children.Starting, "signal", None)
        with self.assertRaises(Signalled) as raised:
            with children.starting():
                children.Starting.signal = signal.SIGTERM  # as main.on_signal leaves it, mid-start
                raise OSError("exec failed")
        self.assertEqual(raised.exception.signum, signal.SIGTERM)
        with children.starting():  # raised once: the gate's git after stopping its children ended it as 1
            pass

    def test_a_signal_to_the_gate_stops_every_child(self) -> None:
        # A program that runs one child through children.run, signalled while it waits.
        folder = Path(tempfile.mkdtemp(prefix="ddpbench-children-"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(folder)])
        program = (f"import sys; sys.path.insert(0, {str(SOURCE / 'scripts' / 'lib')!r})\n"
                   "import signal\nfrom ci_gate import children\nfrom ci_gate.outcomes import Side, Signalled\n"
                   "def on(n, f): raise Signalled(n)\nsignal.signal(signal.SIGTERM, on)\n"
                   f"try:\n children.run(Side.CANDIDATE, 'x', ['sh', '-c', 'echo $$ > {folder}/pid; sleep 300'], 600)\n"
                   "except Signalled:\n children.stop_all(); sys.exit(143)\n")
        gate = subprocess.Popen([sys.executable, "-c", program])
        for _ in range(100):
            if (folder / "pid").exists() and (folder / "pid").read_text().strip():
                break
            time.sleep(0.1)
        gate.send_signal(signal.SIGTERM)
        self.assertEqual(gate.wait(timeout=30), 143)
        self.assertFalse(alive(int((folder / "pid").read_text())), "the child outlived the gate")

    def test_a_pause_of_the_gate_is_no_childs_hang(self) -> None:
        # SIGSTOP, Ctrl-Z or a frozen job: the deadline ran on the wall clock, and the child that
        # was running when the gate stopped was blamed for a hang (the thirteenth attack: exit 1
        # under --bisect). A child of 6 s, a deadline of 3.5 s, the gate stopped 4 s of it (its
        # waits end each second: a clock that counted the pause finds the deadline passed at 5.3 s).
        # The gate is stopped once its child has started (the child's mark), however slowly the
        # gate itself started on a busy machine.
        folder = Path(tempfile.mkdtemp(prefix="ddpbench-children-"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(folder)])
        program = (f"import sys; sys.path.insert(0, {str(SOURCE / 'scripts' / 'lib')!r})\n"
                   "from ci_gate import children\nfrom ci_gate.outcomes import Side\n"
                   "import running_clock; running_clock.now()\n"
                   f"done = children.run(Side.CANDIDATE, 'x', ['sh', '-c', 'touch {folder}/started; sleep 6'], 3.5)\n"
                   "print('timed out' if done.timed_out else 'ended', done.returncode)\n")
        for pause_s, says in ((4.0, "ended 0"), (0.0, "timed out")):
            with self.subTest(pause_s=pause_s):
                (folder / "started").unlink(missing_ok=True)
                gate = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
                for _ in range(300):
                    if (folder / "started").exists():
                        break
                    time.sleep(0.05)
                if pause_s:
                    gate.send_signal(signal.SIGSTOP)
                    time.sleep(pause_s)
                    gate.send_signal(signal.SIGCONT)
                out, _ = gate.communicate(timeout=30)
                self.assertEqual(out.split("\n")[0].rsplit(" ", 1)[0] if says == "timed out" else out.strip(), says)


if __name__ == "__main__":
    unittest.main()

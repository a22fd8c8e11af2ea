"""strategies/pytorch/rank_server.py and rank_client.py: a rank forked from the preloaded
Python is its client's process in all a supervisor sees (output, environment, folder, exit
code, signals), dies with its client, and a client without a server runs the script in a
Python of its own. Then through the binary: a sweep's PyTorch rows fork their ranks from the
sweep's server (--no-preload-python: they start their own), and the server is gone after it.

Needs DDPBENCH_PYTHON (a Python with torch); the sweep case needs DDPBENCH_BINARY."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[3] / "strategies" / "pytorch"
PYTHON = os.environ.get("DDPBENCH_PYTHON", sys.executable)

RANK = """
import os, sys, time
print("out", os.environ.get("ROW_VALUE"), os.getcwd(), sys.argv[1:], os.environ.get("DDPBENCH_PYTORCH_FORKED", "own"))
print("err", file=sys.stderr, flush=True)
if sys.argv[1] == "interrupt":
    raise KeyboardInterrupt
if sys.argv[1] == "kill":
    os.kill(os.getpid(), 9)
if sys.argv[1] == "wait":
    with open(sys.argv[2] + ".tmp", "w") as pid_file:
        pid_file.write(str(os.getpid()))
    os.replace(sys.argv[2] + ".tmp", sys.argv[2])  # whole when it appears
    time.sleep(60)
sys.exit(int(sys.argv[1]))
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


class RankServerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="ddpbench-rank-server-"))
        self.addCleanup(shutil.rmtree, self.folder, True)
        self.script = self.folder / "rank.py"
        self.script.write_text(RANK)
        self.socket = self.folder / "server.sock"
        self.server = subprocess.Popen([PYTHON, str(SCRIPTS / "rank_server.py"), str(self.socket), str(os.getpid())])
        self.addCleanup(self.stop_server)
        deadline = time.monotonic() + 120
        while not self.socket.exists():
            self.assertIsNone(self.server.poll(), "the server exited before it listened")
            self.assertLess(time.monotonic(), deadline, "the server did not listen within 120 s")
            time.sleep(0.05)

    def stop_server(self) -> None:
        self.server.terminate()
        self.server.wait(timeout=30)

    def waiting_rank(self) -> tuple[subprocess.Popen[str], int]:
        """A client whose rank runs and waits, and the rank's pid."""
        pid_file = self.folder / "pid"
        run = self.client("wait", str(pid_file))
        while not pid_file.exists():
            time.sleep(0.02)
        return run, int(pid_file.read_text())

    def client(self, *args: str, socket: Path | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen([PYTHON, "-S", str(SCRIPTS / "rank_client.py"), str(socket or self.socket),
                                 str(self.script), *args], cwd=self.folder, env=dict(os.environ, ROW_VALUE="7"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def test_the_forked_rank_is_its_clients_process(self) -> None:
        self.assertEqual((self.folder / "server.sock.modules").read_text().split()[0], "torch")
        run = self.client("3")
        out, err = run.communicate(timeout=60)
        self.assertEqual(run.returncode, 3)
        self.assertEqual(out.strip(), f"out 7 {self.folder} ['3'] 1")
        self.assertEqual(err.strip(), "err")

    def test_signals_reach_the_rank_and_its_end_is_the_clients(self) -> None:
        run, rank = self.waiting_rank()
        run.send_signal(signal.SIGTERM)
        run.communicate(timeout=30)
        self.assertEqual(run.returncode, -signal.SIGTERM)  # the rank died of it, so the client did
        self.assertFalse(alive(rank))

    def test_a_rank_that_kills_itself_ends_its_client_the_same_way(self) -> None:
        run = self.client("kill")
        run.communicate(timeout=60)
        self.assertEqual(run.returncode, -signal.SIGKILL)

    def test_an_uncaught_interrupt_ends_the_rank_by_sigint_as_in_its_own_python(self) -> None:
        run = self.client("interrupt")
        _, err = run.communicate(timeout=60)
        self.assertEqual(run.returncode, -signal.SIGINT, err)
        self.assertIn("KeyboardInterrupt", err)

    def test_a_killed_client_takes_its_rank_along(self) -> None:
        run, rank = self.waiting_rank()
        run.kill()
        run.communicate(timeout=30)
        self.assertTrue(gone_within(rank, 10), "the rank outlived its killed client")
        self.assertIsNone(self.server.poll(), "the server went with it")

    def test_a_rank_ends_with_the_server(self) -> None:
        run, rank = self.waiting_rank()
        self.server.kill()
        self.server.wait(timeout=30)
        run.communicate(timeout=30)
        self.assertNotEqual(run.returncode, 0)  # its end is unknown: never a success
        self.assertTrue(gone_within(rank, 10), "the rank outlived the server")

    def test_a_server_gone_after_it_began_forking_never_has_the_rank_run_twice(self) -> None:
        # A stand-in server that says "forking" and dies: the rank may be running, so the client
        # must not start it in a Python of its own as well.
        import socket as sockets
        import threading
        path = self.folder / "dying.sock"
        listener = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(1)

        def serve_once() -> None:
            connection, _ = listener.accept()
            _, fds, _, _ = sockets.recv_fds(connection, 1 << 20, 3)
            for fd in fds:  # the client's output: held here, its reader would never see it end
                os.close(fd)
            connection.sendall(b"forking\n")
            connection.close()

        threading.Thread(target=serve_once, daemon=True).start()
        run = self.client("0", socket=path)
        out, err = run.communicate(timeout=60)
        listener.close()
        self.assertEqual(run.returncode, 1, err)
        self.assertEqual(out, "", "the rank ran a second time")
        self.assertIn("ended while it started the rank", err)

    def test_without_a_server_the_rank_runs_in_a_python_of_its_own(self) -> None:
        run = self.client("0", socket=self.folder / "no-server.sock")
        out, _ = run.communicate(timeout=120)
        self.assertEqual(run.returncode, 0)
        self.assertTrue(out.strip().endswith("['0'] own"), out)


class ServerLifetimeTest(unittest.TestCase):
    def test_the_server_ends_with_its_parent_even_mid_import_and_leaves_nothing(self) -> None:
        for parent_lives_s in (0.2, 1.0):
            folder = Path(tempfile.mkdtemp(prefix="ddpbench-python-"))
            self.addCleanup(shutil.rmtree, folder, True)
            socket = folder / "server.sock"
            # A parent that starts the server, says its pid, and is gone before torch is imported.
            parent = subprocess.run(
                [sys.executable, "-c", "import os, subprocess, sys, time\n"
                 f"p = subprocess.Popen([{PYTHON!r}, {str(SCRIPTS / 'rank_server.py')!r}, {str(socket)!r}, "
                 f"str(os.getpid())])\nprint(p.pid, flush=True)\ntime.sleep({parent_lives_s})"],
                capture_output=True, text=True, timeout=60)
            server = int(parent.stdout.split()[0])
            self.assertTrue(gone_within(server, 120), f"the server outlived its parent ({parent_lives_s} s)")
            self.assertFalse(folder.exists(), list(folder.iterdir()) if folder.exists() else [])


@unittest.skipUnless(os.environ.get("DDPBENCH_BINARY"), "DDPBENCH_BINARY not set")
class SweepTest(unittest.TestCase):
    SWEEP = {"name": "twins", "defaults": {
        "dataset": "synthetic", "model": "tiny", "num-classes": 10, "synthetic-train-images": 512,
        "synthetic-test-images": 128, "batch-size": 64, "max-steps": 6, "warmup-steps": 4, "max-eval-batches": 1,
        "device": "cpu", "cache-dir": "none"},
        "rows": [{"name": "single", "options": {"strategy": "single"}},
                 {"name": "ddp", "options": {"strategy": "ddp", "nproc": 2, "sync-bn": False}}]}

    def sweep(self, *flags: str) -> dict[str, str]:
        folder = Path(tempfile.mkdtemp(prefix="ddpbench-preload-"))
        self.addCleanup(shutil.rmtree, folder, True)
        (folder / "sweep.json").write_text(json.dumps(self.SWEEP))
        # A temporary folder of its own: other tests' sweeps may run beside this one.
        (folder / "tmp").mkdir()
        run = subprocess.run([os.environ["DDPBENCH_BINARY"], "sweep", "--file", str(folder / "sweep.json"),
                              "--reference", "--mode", "faithful", "--out-dir", str(folder / "out"), *flags],
                             capture_output=True, text=True, timeout=600,
                             # A user's variable saying "forked" never makes a rank say so.
                             env=dict(os.environ, DDPBENCH_PYTHON=PYTHON, TMPDIR=str(folder / "tmp"),
                                      DDPBENCH_PYTORCH_FORKED="1"))
        self.assertEqual(run.returncode, 0, run.stderr[-3000:])
        self.assertEqual(list((folder / "tmp").glob("ddpbench-python-*")), [], "the server's folder was left")
        runs = json.loads((folder / "out" / "results.json").read_text())["runs"]
        self.assertEqual({r["name"]: r["status"] for r in runs},
                         {"single": "ok", "single.torch": "ok", "ddp": "ok", "ddp.torch": "ok"})
        return {r["name"]: r["strategy_details"]["python"] for r in runs if r["name"].endswith(".torch")}

    def test_pytorch_rows_fork_their_ranks_from_the_sweeps_python(self) -> None:
        forked = "forked from the sweep's preloaded Python"
        self.assertEqual(self.sweep(), {"single.torch": forked, "ddp.torch": forked})
        own = "a Python of its own"
        self.assertEqual(self.sweep("--no-preload-python"), {"single.torch": own, "ddp.torch": own})


if __name__ == "__main__":
    unittest.main()

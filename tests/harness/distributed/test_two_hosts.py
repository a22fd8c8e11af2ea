"""Two hosts: a ddp row whose ranks sit in two network namespaces joined by a veth pair.

Each namespace is a host with its own address; MASTER_ADDR is the first one's. The row runs
under real torchrun (--nnodes 2, one node per namespace), then under SLURM-style variables
set by hand, and then the link is cut mid-run, once rank 0 has said it trained 3 steps: both
sides must fail within the timeout (and the teardown's seconds), each naming the other. Needs
root and `ip` (Debian's iproute2); skips with the reason where namespaces cannot be made. The namespaces are removed whatever happens.

Run: DDPBENCH_BINARY=build/ddpbench DDPBENCH_TORCHRUN=.../bin/torchrun python3 -m unittest -v test_two_hosts
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support"))
from network_namespaces import ip, join_by_veth, remove_namespaces, why_namespaces_cannot_be_made  # noqa: E402

TIMEOUT_S = 10
ROW = ["run", "--strategy", "ddp", "--model", "tiny", "--num-classes", "10", "--dataset", "synthetic",
       "--synthetic-train-images", "400", "--synthetic-test-images", "101", "--batch-size", "50",
       "--workers", "0", "--threads", "1", "--warmup-steps", "1", "--device", "cpu",
       "--timeout-s", str(TIMEOUT_S)]


class StderrReader:
    """A process's stderr read as it comes, on a thread, so that a test can wait for what the
    process says rather than for a sleep a loaded machine can outrun."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.text = ""
        self.thread = threading.Thread(target=self.read, args=(process,), daemon=True)
        self.thread.start()

    def read(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            self.text += line

    def wait_for(self, text: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while text not in self.text and time.monotonic() < deadline and self.thread.is_alive():
            time.sleep(0.05)
        return text in self.text

    def all(self) -> str:
        self.thread.join(timeout=60)
        return self.text


@dataclass
class Host:
    namespace: str
    interface: str
    address: str


class TwoHostsTest(unittest.TestCase):
    binary: str
    torchrun: str | None

    @classmethod
    def setUpClass(cls) -> None:
        reason = why_namespaces_cannot_be_made()
        if reason:
            raise unittest.SkipTest(reason)
        cls.binary = os.path.abspath(os.environ.get("DDPBENCH_BINARY", "build/ddpbench"))
        cls.torchrun = os.environ.get("DDPBENCH_TORCHRUN") or shutil.which("torchrun")

    def setUp(self) -> None:
        pid = os.getpid()
        subnet = f"10.213.{pid % 250}"
        self.hosts = [Host(f"ddpb-a-{pid}", f"dda{pid}", f"{subnet}.1"),
                      Host(f"ddpb-b-{pid}", f"ddb{pid}", f"{subnet}.2")]
        self.addCleanup(remove_namespaces, self.hosts)
        join_by_veth(*self.hosts)
        self.scratch = Path(tempfile.mkdtemp(prefix="ddpbench-two-hosts-"))
        self.addCleanup(shutil.rmtree, self.scratch, True)
        self.port = 29000 + pid % 1000

    def run_checked(self, *args: str) -> None:
        done = ip(*args)
        self.assertEqual(done.returncode, 0, f"ip {' '.join(args)}: {done.stderr}")

    def start(self, host: Host, command: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
        environment = {k: v for k, v in os.environ.items()
                       if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME")}
        environment.update(env)
        return subprocess.Popen(["ip", "netns", "exec", host.namespace, *command], env=environment,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def slurm_rank(self, rank: int, out: Path, extra: list[str]) -> subprocess.Popen[str]:
        env = {"SLURM_PROCID": str(rank), "SLURM_NTASKS": "2", "SLURM_LOCALID": "0",
               "MASTER_ADDR": self.hosts[0].address, "MASTER_PORT": str(self.port)}
        return self.start(self.hosts[rank], [self.binary, *ROW, *extra, "--out", str(out)], env)

    def row(self, out: Path) -> dict:
        return json.loads(out.read_text())["runs"][0]

    def expect_a_two_host_row(self, result: dict) -> None:
        self.assertEqual(result["status"], "ok", result.get("reason"))
        self.assertEqual(result["world_size"], 2)
        self.assertEqual(result["eval_images"], 101)
        # Not loopback, which the hostname resolves to: the interface that routes to MASTER_ADDR.
        self.assertEqual(result["strategy_details"]["gloo_interface"],
                         f"{self.hosts[0].interface} (routes to MASTER_ADDR {self.hosts[0].address})")

    def test_torchrun_one_node_per_host(self) -> None:
        if self.torchrun is None:
            self.skipTest("torchrun not found (set DDPBENCH_TORCHRUN)")
        outs = [self.scratch / f"node{i}.json" for i in range(2)]
        nodes = []
        for i, host in enumerate(self.hosts):
            command = [self.torchrun, "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(i),
                       "--master-addr", self.hosts[0].address, "--master-port", str(self.port),
                       "--no-python", self.binary, *ROW, "--out", str(outs[i])]
            nodes.append(self.start(host, command, {}))
        for node in nodes:
            _, err = node.communicate(timeout=240)
            self.assertEqual(node.returncode, 0, err[-3000:])
        self.expect_a_two_host_row(self.row(outs[0]))

    def test_slurm_variables_set_by_hand(self) -> None:
        out = self.scratch / "slurm.json"
        ranks = [self.slurm_rank(0, out, []), self.slurm_rank(1, self.scratch / "unused.json", [])]
        for rank in ranks:
            _, err = rank.communicate(timeout=240)
            self.assertEqual(rank.returncode, 0, err[-3000:])
        self.expect_a_two_host_row(self.row(out))

    def test_a_cut_link_fails_both_sides_naming_the_peer(self) -> None:
        out = self.scratch / "cut.json"
        training = ["--epochs", "1000", "--log-interval-steps", "1"]
        ranks = [self.slurm_rank(0, out, training), self.slurm_rank(1, self.scratch / "unused.json", training)]
        readers = [StderrReader(rank) for rank in ranks]
        self.assertTrue(readers[0].wait_for("] step 3/", 120), readers[0].text[-3000:])  # formed and training
        for rank in ranks:
            self.assertIsNone(rank.poll(), "a rank ended before the link was cut")
        for host in self.hosts:
            self.run_checked("-n", host.namespace, "link", "set", host.interface, "down")
        cut_at = time.monotonic()
        errors = []
        for rank, reader in zip(ranks, readers):
            rank.wait(timeout=TIMEOUT_S + 60)
            detected_s = time.monotonic() - cut_at
            err = reader.all()
            errors.append(err)
            print(f"cut link: a rank failed {detected_s:.1f} s after the cut (timeout {TIMEOUT_S} s)")
            self.assertLess(detected_s, TIMEOUT_S + 30)  # the timeout, and teardown on a loaded machine
            self.assertEqual(rank.returncode, 1, err[-3000:])
        reason = self.row(out)["reason"]
        self.assertIn("failed on rank 0: rank 1 stopped answering", reason)
        self.assertIn("failed on rank 1: rank 0 stopped answering", errors[1])


if __name__ == "__main__":
    unittest.main()

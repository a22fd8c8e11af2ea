"""A real two-node SLURM: DDP rows across its nodes, with and without MASTER_ADDR, and the sweep.

Each node is a network namespace (its own address, joined to the other by a veth pair) whose
processes also get their own hostname (a UTS namespace) and a hosts file naming both nodes (a
mount namespace, /etc/hosts bound over). slurmctld and one slurmd run on node1, another slurmd
on node2, from Debian's slurm-wlm, with no authentication (auth/none: the cluster lives and
dies with the test) and no cgroups (proctrack/pgid). srun, salloc and sbatch are typed on node1.

- `srun -N 2 -n 2` runs the DDP row across the nodes with no MASTER_ADDR (the master is the
  step's first node, the port the job's), and with MASTER_ADDR exported.
- A node list the binary cannot use fails at once (exit 2) naming MASTER_ADDR.
- A master the other node cannot reach (127.0.0.1) fails within --timeout-s plus 10 s, and the
  reasons name the address, the port and both nodes.
- `salloc -N 2` with `ddpbench sweep --launcher srun` writes one report with every row, each
  naming its nodes; a row needing 3 nodes is skipped with the reason; a rank killed on node2
  fails its row (never "interrupted") and the sweep. `--resume` in a larger allocation runs
  what the smaller one skipped.
- `sbatch --wait scripts/slurm/ddpbench.sbatch` does the same from the batch script.

Needs root, `ip` (iproute2), nsenter and unshare (util-linux), and slurm-wlm (scripts/test
installs them); skips with the reason where any is missing or namespaces cannot be made.

Run: DDPBENCH_BINARY=build/ddpbench DDPBENCH_SOURCE_DIR=. python3 -m unittest -v test_slurm_cluster
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support"))
from network_namespaces import join_by_veth, remove_namespaces, why_namespaces_cannot_be_made  # noqa: E402

TIMEOUT_S = 10
ROW = ["run", "--strategy", "ddp", "--model", "tiny", "--num-classes", "10", "--dataset", "synthetic",
       "--synthetic-train-images", "400", "--synthetic-test-images", "101", "--batch-size", "50",
       "--workers", "0", "--threads", "1", "--warmup-steps", "1", "--device", "cpu",
       "--timeout-s", str(TIMEOUT_S)]
SLURM_PROGRAMS = ["slurmctld", "slurmd", "srun", "salloc", "sbatch", "sinfo"]
# On node1, as a user logged into it would have it: not the variables of this test's machine.
DROPPED = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
           "GLOO_SOCKET_IFNAME")


@dataclass
class Node:
    name: str
    namespace: str
    interface: str
    address: str


def why_a_cluster_cannot_be_made() -> str | None:
    if reason := why_namespaces_cannot_be_made():
        return reason
    for program in ["nsenter", "unshare", *SLURM_PROGRAMS]:
        if shutil.which(program) is None and not Path("/usr/sbin", program).exists():
            return f"needs `{program}` (Debian's util-linux and slurm-wlm; scripts/test installs them)"
    return None


def daemon(program: str) -> str:
    return shutil.which(program) or str(Path("/usr/sbin", program))


class SlurmClusterTest(unittest.TestCase):
    binary: str
    source_dir: Path
    nodes: list[Node]
    scratch: Path
    conf: Path
    hosts_file: Path

    @classmethod
    def setUpClass(cls) -> None:
        reason = why_a_cluster_cannot_be_made()
        if reason:
            raise unittest.SkipTest(reason)
        cls.binary = os.path.abspath(os.environ.get("DDPBENCH_BINARY", "build/ddpbench"))
        cls.source_dir = Path(os.environ.get("DDPBENCH_SOURCE_DIR", Path(__file__).resolve().parents[3]))
        pid = os.getpid()
        subnet = f"10.214.{pid % 250}"
        cls.nodes = [Node("node1", f"ddpb-s1-{pid}", f"dds1{pid}"[:15], f"{subnet}.1"),
                     Node("node2", f"ddpb-s2-{pid}", f"dds2{pid}"[:15], f"{subnet}.2")]
        cls.scratch = Path(tempfile.mkdtemp(prefix="ddpbench-slurm-"))
        try:
            cls.make_cluster()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def make_cluster(cls) -> None:
        a, b = cls.nodes
        join_by_veth(a, b)
        cls.hosts_file = cls.scratch / "hosts"
        cls.hosts_file.write_text("127.0.0.1 localhost\n" + "".join(f"{n.address} {n.name}\n" for n in cls.nodes))
        for folder in ["state", "log", *(f"spool/{n.name}" for n in cls.nodes)]:
            (cls.scratch / folder).mkdir(parents=True, exist_ok=True)
        cpus = os.cpu_count() or 1
        cls.conf = cls.scratch / "slurm.conf"
        cls.conf.write_text("\n".join([
            "ClusterName=ddpbench", f"SlurmctldHost={a.name}({a.address})",
            "AuthType=auth/none", "CredType=cred/none",
            "ProctrackType=proctrack/pgid", "TaskPlugin=task/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU", "SchedulerType=sched/builtin",
            "ReturnToService=2", "SlurmUser=root", "SlurmdUser=root", "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            f"StateSaveLocation={cls.scratch}/state", f"SlurmdSpoolDir={cls.scratch}/spool/%n",
            f"SlurmctldPidFile={cls.scratch}/slurmctld.pid", f"SlurmdPidFile={cls.scratch}/slurmd.%n.pid",
            f"SlurmctldLogFile={cls.scratch}/log/slurmctld.log", f"SlurmdLogFile={cls.scratch}/log/slurmd.%n.log",
            *(f"NodeName={n.name} NodeAddr={n.address} CPUs={cpus} State=UNKNOWN" for n in cls.nodes),
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""]))
        # slurmctld, then a slurmd on each node; each forks into the background.
        cls.on(a, [daemon("slurmctld"), "-i", "-f", str(cls.conf)], check=True)
        for node in cls.nodes:
            cls.on(node, [daemon("slurmd"), "-f", str(cls.conf)], check=True)
        deadline = time.monotonic() + 60
        states = ""
        while time.monotonic() < deadline:
            states = cls.on(a, ["sinfo", "-h", "-N", "-o", "%N %t"]).stdout
            if all(re.search(rf"^{n.name} idle", states, re.M) for n in cls.nodes):
                return
            time.sleep(0.5)
        raise RuntimeError(f"the nodes never came up: {states!r}\n{cls.logs()}")

    @classmethod
    def tearDownClass(cls) -> None:
        remove_namespaces(getattr(cls, "nodes", []))
        if hasattr(cls, "scratch"):
            shutil.rmtree(cls.scratch, ignore_errors=True)

    @classmethod
    def logs(cls) -> str:
        return "\n".join(f"== {f.name}\n" + f.read_text()[-2000:] for f in sorted((cls.scratch / "log").glob("*.log")))

    @classmethod
    def on(cls, node: Node, command: list[str], env: dict[str, str] | None = None, check: bool = False,
           timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """`command` as typed on `node`: its network, its hostname, the cluster's hosts file."""
        environment = {k: v for k, v in os.environ.items() if k not in DROPPED and not k.startswith("SLURM_")}
        environment["SLURM_CONF"] = str(cls.conf)
        environment.update(env or {})
        wrapped = ["nsenter", f"--net=/run/netns/{node.namespace}", "unshare", "--uts", "--mount",
                   "--propagation", "private", "sh", "-c",
                   'mount --bind "$1" /etc/hosts && hostname "$2" && shift 2 && exec "$@"',
                   "sh", str(cls.hosts_file), node.name, *command]
        done = subprocess.run(wrapped, env=environment, capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} on {node.name}: exit {done.returncode}: {done.stderr[-3000:]}")
        return done

    def srun_row(self, out: Path, env: dict[str, str] | None = None,
                 wrapper: list[str] | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
        command = ["srun", "-N", "2", "-n", "2", "--ntasks-per-node", "1", *(wrapper or []), self.binary, *ROW,
                   "--out", str(out)]
        start = time.monotonic()
        done = self.on(self.nodes[0], command, env, timeout=TIMEOUT_S + 120)
        return done, time.monotonic() - start

    @staticmethod
    def row(out: Path) -> dict:
        return json.loads(out.read_text())["runs"][0]

    def test_a_ddp_row_across_two_nodes_finds_its_master_without_master_addr(self) -> None:
        out = self.scratch / "no-master-addr.json"
        done, _ = self.srun_row(out)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:] + self.logs())
        result = self.row(out)
        self.assertEqual(result["status"], "ok", result["reason"])
        self.assertEqual(result["world_size"], 2)
        self.assertEqual(result["nodes"], ["node1", "node2"])
        self.assertEqual(result["ranks_per_node"], [1, 1])
        # Where the master came from, said by rank 0: the step's first node, the job's port.
        said = re.search(r"the ranks meet at node1:(\d+) \(address: the first host of SLURM_STEP_NODELIST=node\[1-2\]; "
                         r"port: SLURM_JOB_ID=(\d+) and SLURM_STEP_ID=(\d+) ", done.stderr)
        self.assertIsNotNone(said, done.stderr[-3000:])
        assert said is not None
        port, job, step = (int(g) for g in said.groups())
        self.assertEqual(port, 15000 + (37 * (job % 10000) + step) % 10000)
        # The configuration says how the row was placed: 2 processes over 2 nodes.
        self.assertEqual(result["config"]["nproc"], 2)
        self.assertEqual(result["config"]["nodes"], 2)
        self.assertIn(f"{self.nodes[0].interface} (routes to MASTER_ADDR node1)",
                      result["strategy_details"]["gloo_interface"])

    def test_a_ddp_row_across_two_nodes_with_master_addr_exported(self) -> None:
        out = self.scratch / "master-addr.json"
        done, _ = self.srun_row(out, {"MASTER_ADDR": self.nodes[0].address})
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        result = self.row(out)
        self.assertEqual(result["status"], "ok", result["reason"])
        self.assertEqual(result["world_size"], 2)
        self.assertIn(f"the ranks meet at {self.nodes[0].address}:", done.stderr)
        self.assertIn("(address: MASTER_ADDR; port: SLURM_JOB_ID=", done.stderr)

    def test_a_node_list_the_binary_cannot_use_fails_at_once_naming_master_addr(self) -> None:
        # "At once": before any rendezvous, so long before a timeout of 300 s, whatever the
        # machine's load (srun, two nodes and LibTorch's start-up take seconds).
        out = self.scratch / "bad-list.json"
        wrapper = ["sh", "-c", 'SLURM_STEP_NODELIST="node[2-1]" exec "$@" --timeout-s 300', "sh"]
        done, elapsed_s = self.srun_row(out, wrapper=wrapper)
        self.assertNotEqual(done.returncode, 0)
        self.assertLess(elapsed_s, 60, done.stderr[-3000:])
        self.assertNotIn("the ranks meet at", done.stderr)
        self.assertIn("SLURM_STEP_NODELIST='node[2-1]' is not a SLURM host list", done.stderr)
        self.assertIn("export MASTER_ADDR=", done.stderr)
        self.assertFalse(out.exists(), "bad input must leave no result")
        # Every node list gone: the same, at once.
        wrapper = ["sh", "-c", 'unset SLURM_STEP_NODELIST SLURM_NODELIST SLURM_JOB_NODELIST; exec "$@" --timeout-s 300',
                   "sh"]
        done, elapsed_s = self.srun_row(out, wrapper=wrapper)
        self.assertNotEqual(done.returncode, 0)
        self.assertLess(elapsed_s, 60, done.stderr[-3000:])
        self.assertNotIn("the ranks meet at", done.stderr)
        self.assertIn("the 2 ranks span 2 nodes, and no master address was found", done.stderr)

    def test_a_master_the_other_node_cannot_reach_fails_within_the_timeout_naming_both_sides(self) -> None:
        out = self.scratch / "unreachable.json"
        done, elapsed_s = self.srun_row(out, {"MASTER_ADDR": "127.0.0.1"})
        print(f"unreachable master: the step ended after {elapsed_s:.1f} s (--timeout-s {TIMEOUT_S})")
        self.assertNotEqual(done.returncode, 0)
        self.assertLess(elapsed_s, TIMEOUT_S + 30, done.stderr[-3000:])  # the timeout, and teardown on a loaded machine
        # Rank 1, on node2: what it tried to reach, from where.
        self.assertRegex(done.stderr, r"rendezvous failed on rank 1 on node2: could not reach the store at "
                                      r"127\.0\.0\.1:\d+ from node2 within 10 s")
        # Rank 0, on node1: who never joined, where it runs, and what it had to reach.
        reason = self.row(out)["reason"]
        self.assertRegex(reason, r"rendezvous failed on rank 0 on node1: rank 1 never joined; rank 1 runs on node2, "
                                 r"and the store it had to reach is 127\.0\.0\.1:\d+ on node1 \(address from "
                                 r"MASTER_ADDR; a loopback address, which no other node reaches\)")

    def check_sweep(self, out_dir: Path, expected: dict[str, str]) -> list[dict]:
        document = json.loads((out_dir / "results.json").read_text())
        runs = {r["name"]: r for r in document["runs"]}
        self.assertEqual(sorted(runs), sorted(expected))
        for name, status in expected.items():
            self.assertEqual(runs[name]["status"], status, f"{name}: {runs[name]['reason']}")
        markdown = (out_dir / "results.md").read_text()
        html = (out_dir / "results.html").read_text()
        self.assertIn("2 nodes x 1 rank", markdown)
        self.assertIn("2 nodes x 1 rank", html)
        return document["runs"]

    def sweep_file(self) -> Path:
        path = self.scratch / "cluster.sweep.json"
        defaults = {"model": "tiny", "num-classes": 10, "dataset": "synthetic", "synthetic-train-images": 400,
                    "synthetic-test-images": 101, "batch-size": 50, "workers": 0, "threads": 1, "device": "cpu",
                    "warmup-steps": 1, "timeout-s": 30, "sync-bn": False}
        path.write_text(json.dumps({"name": "slurm-test", "baseline": "single", "defaults": defaults, "rows": [
            {"name": "single", "options": {"strategy": "single"}},
            {"name": "ddp-2", "devices": 2, "options": {"strategy": "ddp", "nproc": 2}},
            {"name": "ddp-2node", "devices": 2, "nodes": 2, "options": {"strategy": "ddp", "nproc": 2}},
            {"name": "ddp-3node", "devices": 3, "nodes": 3, "options": {"strategy": "ddp", "nproc": 3}},
            {"name": "broken-2node", "devices": 2, "nodes": 2,
             "options": {"strategy": "ddp", "nproc": 2, "inject-fault-rank": 1, "inject-fault-step": 1}}]}))
        return path

    def test_the_sweep_runs_each_row_as_a_job_step_of_the_allocation(self) -> None:
        out_dir = self.scratch / "sweep"
        command = ["salloc", "-N", "2", "--exclusive", self.binary, "sweep", "--launcher", "srun",
                   "--file", str(self.sweep_file()), "--mode", "controlled", "--out-dir", str(out_dir)]
        done = self.on(self.nodes[0], command, timeout=600)
        # A rank killed on node2 fails its row (never "interrupted"), and so the sweep.
        self.assertEqual(done.returncode, 1, done.stderr[-3000:])
        runs = {r["name"]: r for r in self.check_sweep(
            out_dir, {"single": "ok", "ddp-2": "ok", "ddp-2node": "ok", "ddp-3node": "skipped",
                      "broken-2node": "failed"})}
        self.assertIn("rank 1", runs["broken-2node"]["reason"])
        self.assertEqual(runs["ddp-2node"]["config"]["nodes"], 2)
        self.assertEqual(runs["ddp-2node"]["config"]["nproc"], 2)
        self.assertEqual(runs["ddp-2node"]["nodes"], ["node1", "node2"])
        self.assertEqual(runs["ddp-2node"]["world_size"], 2)
        self.assertEqual(len(runs["ddp-2"]["nodes"]), 1)
        self.assertEqual(runs["ddp-2"]["ranks_per_node"], [2])
        self.assertEqual(runs["single"]["nodes"], ["node1"])
        self.assertEqual(runs["ddp-3node"]["reason"], "needs 3 nodes; the allocation has 2")
        self.assertEqual(runs["ddp-3node"]["world_size"], 3)
        # Outside an allocation: bad input, at once.
        outside = self.on(self.nodes[0], [self.binary, "sweep", "--launcher", "srun", "--file",
                                          str(self.sweep_file()), "--out-dir", str(self.scratch / "outside")])
        self.assertEqual(outside.returncode, 2)
        self.assertIn("--launcher srun: not inside a SLURM allocation (SLURM_JOB_ID is not set)", outside.stderr)

    def test_the_batch_script(self) -> None:
        out_dir = self.scratch / "batch"
        script = self.source_dir / "scripts" / "slurm" / "ddpbench.sbatch"
        env = {"DDPBENCH_BINARY": self.binary, "DDPBENCH_SWEEP_FILE": str(self.sweep_file()),
               "DDPBENCH_OUT_DIR": str(out_dir)}
        # The script's own #SBATCH lines ask for GPUs this cluster has not: the test's lines win.
        command = ["sbatch", "--wait", "--nodes=2", "--ntasks-per-node=1", "--gpus-per-node=0", "--cpus-per-task=1",
                   f"--output={self.scratch}/batch-%j.out", f"--chdir={self.scratch}", str(script),
                   "--mode", "controlled", "--rows", "single,ddp-2node"]
        done = self.on(self.nodes[0], command, env, timeout=600)
        logs = "".join(p.read_text()[-3000:] for p in self.scratch.glob("batch-*.out"))
        self.assertEqual(done.returncode, 0, done.stderr[-2000:] + logs)
        self.check_sweep(out_dir, {"single": "ok", "ddp-2node": "ok", "single.torch": "ok", "ddp-2node.torch": "ok"})

    def test_resume_in_a_larger_allocation_runs_what_the_smaller_one_skipped(self) -> None:
        out_dir = self.scratch / "resume"
        sweep = [self.binary, "sweep", "--launcher", "srun", "--file", str(self.sweep_file()), "--mode", "controlled",
                 "--rows", "single,ddp-2node", "--out-dir", str(out_dir)]
        small = self.on(self.nodes[0], ["salloc", "-N", "1", "--exclusive", *sweep], timeout=600)
        self.assertEqual(small.returncode, 0, small.stderr[-3000:])
        first = {r["name"]: r for r in json.loads((out_dir / "results.json").read_text())["runs"]}
        self.assertEqual(first["ddp-2node"]["reason"], "needs 2 nodes; the allocation has 1")
        large = self.on(self.nodes[0], ["salloc", "-N", "2", "--exclusive", *sweep, "--resume"], timeout=600)
        self.assertEqual(large.returncode, 0, large.stderr[-3000:])
        self.assertIn("single (controlled): done before, kept (--resume)", large.stderr)
        self.assertNotIn("ddp-2node (controlled): done before", large.stderr)
        runs = {r["name"]: r for r in json.loads((out_dir / "results.json").read_text())["runs"]}
        self.assertEqual(runs["ddp-2node"]["status"], "ok", runs["ddp-2node"]["reason"])
        self.assertEqual(runs["ddp-2node"]["nodes"], ["node1", "node2"])


if __name__ == "__main__":
    unittest.main()

"""Emulated hosts: up to N hosts as network namespaces behind a bridge, each capped (a cgroup's
CPU quota) at the same share of the machine's cores whatever the host count, every link shaped
alike with tc; `world` runs a command as the ranks of the first n hosts, one rank each.

The cap makes a host a machine of its own: a host's compute must not change with the cluster's
size. Without it, 3 or 4 ranks sharing 2 cores computed faster when a slow link staggered them
than when a fast link kept them in step, and projecting to more hosts would meet slower
computers. The hosts then have their share only if nothing else takes it: each world records
how busy the machine was outside its ranks (busy_outside_the_ranks), which a validation prints.

tbf shapes the rate; netem adds the delay where the kernel has it (the project's machines do
not: then links are shaped in rate only, and `delay` says so). Needs root, `ip` and `tc`
(Debian's iproute2) and a CPU controller: why_hosts_cannot_be_emulated() says why not. Used as
a context manager, everything made is removed whatever happens, and what a killed earlier run
left is removed on entry. Used by scripts/validate and tests/scripts/test_validate.py.
"""
from __future__ import annotations

import os
import resource
import shutil
import signal
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

# The hosts' share of the cores at the largest host count; the rest for the kernel's shaping.
HOST_SHARE_OF_CORES = 0.9
# The share of the machine busy beside the ranks of the largest world (the median world) past
# which the hosts did not get their share: quiet runs showed 2-10 % (the kernel's packets, the
# hypervisor), a process spinning beside them 32-39 %, slowing 4-host rows 13 % and 2-host rows 2 %.
MOST_BUSY_OUTSIDE_THE_RANKS = 0.2

# The DDP row both validations run on the hosts: ResNet-18 on synthetic images, one thread a rank.
RESNET18_ROW = ["run", "--strategy", "ddp", "--model", "resnet18", "--num-classes", "10", "--dataset", "synthetic",
                "--synthetic-train-images", "1024", "--synthetic-test-images", "64", "--batch-size", "16",
                "--max-steps", "7", "--warmup-steps", "3", "--max-eval-batches", "1", "--workers", "0",
                "--threads", "1", "--device", "cpu", "--no-sync-bn", "--timeout-s", "180"]


@dataclass(frozen=True)
class Shaping:
    rate: str   # tbf's rate, e.g. 1gbit
    delay: str  # netem's, where the kernel has netem
    burst: str  # tbf's burst


class CannotEmulate(Exception):
    """Hosts cannot be emulated on this machine (the reason as the message)."""


class RankFailed(Exception):
    """A rank of a world exited with an error (its stderr's tail in the message)."""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=False)


def checked(*args: str) -> None:
    done = run(*args)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")


def cpu_controller() -> tuple[Path, str] | None:
    """Where to make a cgroup that caps its processes' CPU time, and how: cgroup v2's cpu.max,
    or v1's cpu.cfs_quota_us."""
    unified = Path("/sys/fs/cgroup")
    if (unified / "cgroup.controllers").exists() and "cpu" in (unified / "cgroup.subtree_control").read_text().split():
        return unified, "v2"
    if (unified / "cpu" / "cpu.cfs_quota_us").exists():
        return unified / "cpu", "v1"
    return None


def why_hosts_cannot_be_emulated() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    for program in ("ip", "tc"):
        if shutil.which(program) is None:
            return f"needs `{program}` from Debian's iproute2 (scripts/test installs it)"
    if cpu_controller() is None:
        return "needs a CPU controller (cgroup v1 cpu or v2 cpu.max) to give each host its own share of the cores"
    probe = f"ddpb-tc-{os.getpid()}"
    if run("ip", "netns", "add", probe).returncode != 0:
        return "`ip netns add` failed"
    try:
        run("ip", "-n", probe, "link", "set", "lo", "up")
        shaped = run("ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "100mbit",
                     "burst", "32kb", "latency", "50ms")
        if shaped.returncode != 0:
            return f"tc cannot shape a link here: {shaped.stderr.strip()}"
    finally:
        run("ip", "netns", "del", probe)
    return None


def netem_available() -> bool:
    probe = f"ddpb-netem-{os.getpid()}"
    run("ip", "netns", "add", probe)
    try:
        return run("ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay",
                   "1ms").returncode == 0
    finally:
        run("ip", "netns", "del", probe)


@dataclass
class MachineTime:
    """CPU seconds the cores this process may run on have spent (/proc/stat's line of each: in a
    container held to some of the machine's cores, the others' tenants are not counted)."""
    busy_s: float     # not idle: processes, the kernel, the hypervisor's steal
    softirq_s: float  # of it, the kernel's softirqs (a veth's and a bridge's packets among them)
    steal_s: float    # of it, what the hypervisor gave to other guests


def machine_time() -> MachineTime:
    ours = {f"cpu{core}" for core in os.sched_getaffinity(0)}
    total = MachineTime(0.0, 0.0, 0.0)
    for line in Path("/proc/stat").read_text().splitlines():
        name, *values = line.split()
        if name not in ours:
            continue
        fields = [int(v) / os.sysconf("SC_CLK_TCK") for v in values]
        idle, iowait, softirq, steal = fields[3], fields[4], fields[6], fields[7]
        total.busy_s += sum(fields[:8]) - idle - iowait
        total.softirq_s += softirq
        total.steal_s += steal
    return total


def children_cpu_s() -> float:
    """CPU seconds of this process's children that have ended: the ranks of world()."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def kill_all(pids: list[str]) -> None:
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def remove_what_killed_runs_left() -> None:
    """Namespaces and cgroups of an earlier run that was killed before its cleanup (named
    ddpb-...-PID after a process that is gone)."""
    def gone(name: str) -> bool:
        pid = name.rsplit("-", 1)[-1]
        return name.startswith("ddpb-") and pid.isdigit() and not Path(f"/proc/{pid}").exists()

    for namespace in run("ip", "netns", "list").stdout.split():
        if gone(namespace):
            run("ip", "netns", "del", namespace)
    controller = cpu_controller()
    if controller:
        for cgroup in controller[0].glob("ddpb-*"):
            if gone(cgroup.name) and not (cgroup / "cgroup.procs").read_text().split():
                cgroup.rmdir()


@dataclass
class Host:
    namespace: str
    interface: str  # in the host
    port: str       # its peer, on the bridge
    address: str
    cgroup: Path    # caps the host's CPU time: its own share of the machine's cores


@dataclass
class WorldLoad:
    """How busy the machine was beside one world's ranks, as shares of its cores' time."""
    outside: float  # everything but the ranks: other processes, the kernel's work on the links
    softirq: float
    steal: float


@dataclass
class EmulatedHosts:
    """`count` hosts behind a bridge: enter to make them, leave to remove them."""
    count: int
    hosts: list[Host] = field(default_factory=list)
    delay: bool = False  # links shaped with netem's delay as well as tbf's rate
    # host count: the load beside each world run on that many hosts
    loads: dict[int, list[WorldLoad]] = field(default_factory=dict)

    def __enter__(self) -> EmulatedHosts:
        reason = why_hosts_cannot_be_emulated()
        if reason:
            raise CannotEmulate(reason)
        self.delay = netem_available()
        remove_what_killed_runs_left()
        pid = os.getpid()
        root, self.cgroup_version = cpu_controller()  # type: ignore[misc]
        self.switch = f"ddpb-sw-{pid}"
        self.hosts = [Host(f"ddpb-h{i}-{pid}", f"dh{i}{pid % 100000}", f"ds{i}{pid % 100000}",
                           f"10.214.{pid % 250}.{i + 1}", root / f"ddpb-h{i}-{pid}") for i in range(self.count)]
        self.next_port = 31000 + pid % 1000
        try:
            self.make()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.remove()

    def make(self) -> None:
        for host in self.hosts:
            host.cgroup.mkdir()
        checked("ip", "netns", "add", self.switch)
        checked("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        checked("ip", "-n", self.switch, "link", "set", "br0", "up")
        for host in self.hosts:
            checked("ip", "netns", "add", host.namespace)
            checked("ip", "link", "add", host.interface, "netns", host.namespace, "type", "veth", "peer", "name",
                    host.port, "netns", self.switch)
            checked("ip", "-n", self.switch, "link", "set", host.port, "master", "br0")
            checked("ip", "-n", self.switch, "link", "set", host.port, "up")
            checked("ip", "-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", host.interface)
            checked("ip", "-n", host.namespace, "link", "set", host.interface, "up")
            checked("ip", "-n", host.namespace, "link", "set", "lo", "up")

    def remove(self) -> None:
        """The namespaces and cgroups, and every process still in them."""
        for namespace in [host.namespace for host in self.hosts] + [self.switch]:
            kill_all(run("ip", "netns", "pids", namespace).stdout.split())
            run("ip", "netns", "del", namespace)
        for host in self.hosts:
            if host.cgroup.exists():
                kill_all((host.cgroup / "cgroup.procs").read_text().split())
                for _ in range(50):
                    try:
                        host.cgroup.rmdir()
                        break
                    except OSError:  # busy until its killed processes are reaped
                        time.sleep(0.1)

    def cap_cpu(self, hosts: int) -> None:
        """Each of `hosts` hosts gets the same share of the cores whatever their number
        (HOST_SHARE_OF_CORES of them over the largest host count)."""
        period_us = 100_000
        quota_us = int(HOST_SHARE_OF_CORES * len(os.sched_getaffinity(0)) / self.count * period_us)
        for host in self.hosts[:hosts]:
            if self.cgroup_version == "v2":
                (host.cgroup / "cpu.max").write_text(f"{quota_us} {period_us}")
            else:
                (host.cgroup / "cpu.cfs_period_us").write_text(str(period_us))
                (host.cgroup / "cpu.cfs_quota_us").write_text(str(quota_us))

    def shape(self, shaping: Shaping) -> None:
        """Every link, both ways: the host's side and the bridge's side of its veth."""
        for host in self.hosts:
            for namespace, device in ((host.namespace, host.interface), (self.switch, host.port)):
                run("ip", "netns", "exec", namespace, "tc", "qdisc", "del", "dev", device, "root")
                tbf = ["tbf", "rate", shaping.rate, "burst", shaping.burst, "latency", "100ms"]
                if self.delay:
                    checked("ip", "netns", "exec", namespace, "tc", "qdisc", "add", "dev", device, "root",
                            "handle", "1:", "netem", "delay", shaping.delay)
                    checked("ip", "netns", "exec", namespace, "tc", "qdisc", "add", "dev", device, "parent", "1:",
                            "handle", "2:", *tbf)
                else:
                    checked("ip", "netns", "exec", namespace, "tc", "qdisc", "add", "dev", device, "root", *tbf)

    def world(self, hosts: int, command: list[str], timeout_s: int = 900) -> None:
        """`command` on the first `hosts` hosts, one rank each ("{rank}" in it replaced by the
        rank); raises RankFailed unless every rank succeeds. Records the load beside the ranks."""
        if not 1 <= hosts <= self.count:
            raise ValueError(f"a world of {hosts} hosts on {self.count} emulated hosts")
        self.next_port += 1
        self.cap_cpu(hosts)
        machine_before, ranks_before, started = machine_time(), children_cpu_s(), time.monotonic()
        ranks = []
        for rank in range(hosts):
            env = {k: v for k, v in os.environ.items() if k not in ("GLOO_SOCKET_IFNAME",)}
            env.update({"RANK": str(rank), "WORLD_SIZE": str(hosts), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                        "MASTER_ADDR": self.hosts[0].address, "MASTER_PORT": str(self.next_port)})
            per_rank = [part.replace("{rank}", str(rank)) for part in command]
            # Into the cgroup before `ip netns exec`, whose own /sys does not show it.
            enter = f'echo $$ > {self.hosts[rank].cgroup / "cgroup.procs"} && exec "$@"'
            ranks.append(subprocess.Popen(["sh", "-c", enter, "sh", "ip", "netns", "exec", self.hosts[rank].namespace,
                                           *per_rank], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        failed = []
        for rank, process in enumerate(ranks):
            try:
                _, err = process.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                kill_all([str(p.pid) for p in ranks])
                raise RankFailed(f"rank {rank} of {hosts} ran past {timeout_s} s: {' '.join(command)}") from None
            if process.returncode != 0:
                failed.append(f"rank {rank} of {hosts} exited {process.returncode}: {err[-3000:]}")
        if failed:
            raise RankFailed(f"{' '.join(command)}\n" + "\n".join(failed))
        machine_after = machine_time()
        outside_s = machine_after.busy_s - machine_before.busy_s - (children_cpu_s() - ranks_before)
        machine_s = len(os.sched_getaffinity(0)) * (time.monotonic() - started)
        softirq_s = machine_after.softirq_s - machine_before.softirq_s
        steal_s = machine_after.steal_s - machine_before.steal_s
        self.loads.setdefault(hosts, []).append(WorldLoad(outside_s / machine_s, softirq_s / machine_s,
                                                          steal_s / machine_s))


def busy_outside_the_ranks(loads: dict[int, list[WorldLoad]]) -> str:
    """The machine's cores busy beside the ranks while they ran, per host count: the hosts get
    HOST_SHARE_OF_CORES of the cores at the largest count, so more than what is left slows its
    rows against the model's."""
    def at(hosts: int) -> str:
        worlds = loads[hosts]
        shares = [w.outside for w in worlds]
        return (f"{hosts} hosts: {100 * statistics.median(shares):.0f} % of the machine at the median "
                f"(the machine's softirq {100 * statistics.median(w.softirq for w in worlds):.0f} %, steal "
                f"{100 * statistics.median(w.steal for w in worlds):.0f} %), {100 * max(shares):.0f} % at the worst")
    return "busy outside the ranks while they ran: " + "; ".join(at(hosts) for hosts in sorted(loads))


def hosts_had_their_share(loads: dict[int, list[WorldLoad]]) -> tuple[bool, str]:
    """Whether the largest world's ranks (the median of its worlds) had their share of the
    machine, and the words that say so: where not, its rows measured a machine the models were
    not asked about."""
    largest = max(loads)
    busy = statistics.median(w.outside for w in loads[largest])
    if busy > MOST_BUSY_OUTSIDE_THE_RANKS:
        return False, (f"the machine was {100 * busy:.0f} % busy outside the ranks of {largest} hosts at the median "
                       f"world, more than the {100 * MOST_BUSY_OUTSIDE_THE_RANKS:.0f} % a quiet machine shows: the "
                       f"hosts did not get their share, so the figures that need it do not judge the model")
    return True, (f"the machine was {100 * busy:.0f} % busy outside the ranks of {largest} hosts at the median world "
                  f"(at most {100 * MOST_BUSY_OUTSIDE_THE_RANKS:.0f} %: the hosts had their share)")

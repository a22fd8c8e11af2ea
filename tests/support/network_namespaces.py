"""Test hosts as network namespaces: each its own address, two joined by a veth pair, removed
with every process left in them. Needs root and `ip` (Debian's iproute2, which scripts/test
installs); why_namespaces_cannot_be_made() says why not where they cannot be had."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterable
from typing import Protocol


class Host(Protocol):
    namespace: str
    interface: str  # its end of the veth pair
    address: str


def ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False)


def ip_checked(*args: str) -> None:
    done = ip(*args)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr}")


def why_namespaces_cannot_be_made() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if shutil.which("ip") is None:
        return "needs `ip` from Debian's iproute2 (scripts/test installs it)"
    probe = f"ddpb-probe-{os.getpid()}"
    made = ip("netns", "add", probe)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    ip("netns", "del", probe)
    return None


def join_by_veth(a: Host, b: Host) -> None:
    """Both namespaces made, joined by a veth pair, each end given its host's address (/24)."""
    for host in (a, b):
        ip_checked("netns", "add", host.namespace)
    ip_checked("link", "add", a.interface, "netns", a.namespace, "type", "veth",
               "peer", "name", b.interface, "netns", b.namespace)
    for host in (a, b):
        ip_checked("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", host.interface)
        ip_checked("-n", host.namespace, "link", "set", host.interface, "up")
        ip_checked("-n", host.namespace, "link", "set", "lo", "up")


def remove_namespaces(hosts: Iterable[Host]) -> None:
    """Every process left in each namespace killed, then the namespace deleted."""
    for host in hosts:
        for pid in ip("netns", "pids", host.namespace).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        ip("netns", "del", host.namespace)

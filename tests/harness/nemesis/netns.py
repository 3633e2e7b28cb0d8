"""NetLab: one network namespace per node (ZooKeeper, each broker) on a Linux bridge, so links can be cut for real.

Layout (run tag ``T`` = the runner's pid, subnet ``10.213.S.0/24`` with the first free ``S``):

* bridge ``nmT-br`` in the root namespace holds ``.1``: the clients (producer, consumer, admin) run in the root
  namespace and reach every node through it;
* namespace ``nemT-<node>`` per node with a veth pair (``nmT<node>`` on the bridge, ``nmT<node>p`` inside) and
  its own address (ZooKeeper ``.2``, broker ``i`` ``.10+i``) and its own loopback, so no inter-broker or ZooKeeper
  traffic goes over the root namespace's loopback.

Faults: :meth:`block` adds a blackhole route in ``a``'s namespace towards ``b`` (a one-way cut: ``a``'s packets to
``b`` are dropped); :meth:`cut` blocks both ways; :meth:`isolate` blocks a node from every other node and from the
clients; :meth:`rate_limit` puts a tbf qdisc on both ends of a node's veth (this kernel has no sch_netem, so there
is no delay/loss emulation: a tight tbf rate is the "slow link"). :meth:`heal` removes every active fault.

:func:`remove_leftovers` deletes what a crashed earlier run left (namespaces, links, mounts, processes in those
namespaces), recognised by the name prefixes and a run tag whose runner process is gone.
"""
from __future__ import annotations

import os
import re
import subprocess
from typing import Dict, List, Optional, Set, Tuple

CLIENT = "client"
NS_PREFIX = "nem"
LINK_PREFIX = "nm"
SUBNET_BASE = "10.213"


class NetLabError(RuntimeError):
    """A namespace, veth, bridge, route or qdisc could not be created (not root, no ip/tc, ...)."""


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``ip``/``tc``/``mount`` and fail with the command and its stderr (never a bare traceback)."""
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise NetLabError(f"`{' '.join(args)}` failed ({r.returncode}): {r.stderr.strip()}")
    return r


def _runner_alive(tag: str) -> bool:
    """Whether the runner whose pid is ``tag`` still runs (its command line need not name the nemesis: a pytest
    run of the whole suite does not). A reused pid only delays the clean-up to a later run."""
    try:
        return os.path.exists(f"/proc/{int(tag)}")
    except ValueError:
        return False


def remove_leftovers() -> List[str]:
    """Delete namespaces, links and tmpfs mounts of earlier runs whose runner is gone; returns what was removed."""
    removed: List[str] = []
    out = sh("ip", "netns", "list", check=False).stdout
    for line in out.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.fullmatch(rf"{NS_PREFIX}(\d+)-\w+", name)
        if m and not _runner_alive(m.group(1)):
            for pid in sh("ip", "netns", "pids", name, check=False).stdout.split():
                try:
                    os.kill(int(pid), 9)  # a process of the crashed run (ZooKeeper, a broker)
                except OSError:
                    pass
            sh("ip", "netns", "del", name, check=False)
            removed.append(f"netns {name}")
    for line in sh("ip", "-o", "link", "show", check=False).stdout.splitlines():
        m = re.match(rf"\d+: ({LINK_PREFIX}(\d+)[\w-]*)[@:]", line)
        if m and not _runner_alive(m.group(2)):
            sh("ip", "link", "del", m.group(1), check=False)
            removed.append(f"link {m.group(1)}")
    with open("/proc/mounts") as f:
        mounts = [ln.split()[1] for ln in f]
    for mp in reversed(mounts):
        m = re.search(r"/nemesis-(\d+)-", mp)
        if m and not _runner_alive(m.group(1)):
            sh("umount", "-l", mp, check=False)
            removed.append(f"mount {mp}")
    return removed


def free_subnet() -> str:
    """``10.213.S`` for the first S with no address or route of this machine in it."""
    used = sh("ip", "-4", "-o", "addr", check=False).stdout + sh("ip", "-4", "route", check=False).stdout
    for s in range(256):
        if f"{SUBNET_BASE}.{s}." not in used:
            return f"{SUBNET_BASE}.{s}"
    raise NetLabError(f"no free /24 in {SUBNET_BASE}.0.0/16")


class NetLab:
    """The bridge, the namespaces and the faults on them. Use as a context manager (everything removed on exit)."""

    def __init__(self, nodes: List[str], tag: Optional[str] = None) -> None:
        self.tag = tag or str(os.getpid())
        self.nodes = list(nodes)
        self.prefix = ""
        self.bridge = f"{LINK_PREFIX}{self.tag}-br"
        self.addr: Dict[str, str] = {}
        self._blocks: Set[Tuple[str, str]] = set()
        self._limited: Set[str] = set()
        self._made_ns: List[str] = []
        self._made_links: List[str] = []

    def ns(self, node: str) -> Optional[str]:
        return None if node == CLIENT else f"{NS_PREFIX}{self.tag}-{node}"

    def veth(self, node: str) -> str:
        return f"{LINK_PREFIX}{self.tag}{node}"

    def exec_prefix(self, node: str) -> List[str]:
        """Command prefix that runs a program inside ``node``'s namespace."""
        return ["ip", "netns", "exec", self.ns(node) or ""]

    def _ip(self, node: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        ns = self.ns(node)
        return sh(*(["ip", "-n", ns] if ns else ["ip"]), *args, check=check)

    def setup(self) -> "NetLab":
        if os.geteuid() != 0:
            raise NetLabError("the nemesis needs root (network namespaces, veth pairs, tmpfs mounts)")
        self.prefix = free_subnet()
        self.addr[CLIENT] = f"{self.prefix}.1"
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        self._made_links.append(self.bridge)
        sh("ip", "addr", "add", f"{self.addr[CLIENT]}/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i, node in enumerate(self.nodes):
            self.addr[node] = f"{self.prefix}.{2 if node == 'zk' else 10 + i}"
            ns, outer, inner = self.ns(node), self.veth(node), self.veth(node) + "p"
            assert ns is not None
            sh("ip", "netns", "add", ns)
            self._made_ns.append(ns)
            sh("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
            self._made_links.append(outer)
            sh("ip", "link", "set", inner, "netns", ns)
            sh("ip", "link", "set", outer, "master", self.bridge, "up")
            self._ip(node, "addr", "add", f"{self.addr[node]}/24", "dev", inner)
            self._ip(node, "link", "set", inner, "up")
            self._ip(node, "link", "set", "lo", "up")
        return self

    def teardown(self) -> None:
        for ns in self._made_ns:
            for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), 9)
                except OSError:
                    pass
            sh("ip", "netns", "del", ns, check=False)
        for link in self._made_links:
            sh("ip", "link", "del", link, check=False)
        self._made_ns.clear()
        self._made_links.clear()

    def __enter__(self) -> "NetLab":
        return self.setup()

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    # ------------------------------------------------------------------ faults
    def block(self, a: str, b: str) -> None:
        """Drop every packet ``a`` sends to ``b`` (a blackhole route in ``a``'s namespace)."""
        if (a, b) not in self._blocks:
            self._ip(a, "route", "add", "blackhole", f"{self.addr[b]}/32")
            self._blocks.add((a, b))

    def unblock(self, a: str, b: str) -> None:
        if (a, b) in self._blocks:
            self._ip(a, "route", "del", "blackhole", f"{self.addr[b]}/32", check=False)
            self._blocks.discard((a, b))

    def cut(self, a: str, b: str) -> None:
        """A symmetric partition between ``a`` and ``b``."""
        self.block(a, b)
        self.block(b, a)

    def isolate(self, node: str) -> None:
        """Cut ``node`` from every other node and from the clients."""
        for other in [CLIENT] + self.nodes:
            if other != node:
                self.cut(node, other)

    def rate_limit(self, node: str, rate: str = "256kbit") -> None:
        """tbf on both ends of ``node``'s veth: its traffic both ways is capped at ``rate``."""
        outer, inner = self.veth(node), self.veth(node) + "p"
        sh("tc", "qdisc", "add", "dev", outer, "root", "tbf", "rate", rate, "burst", "16kb", "latency", "500ms")
        sh("ip", "netns", "exec", self.ns(node) or "", "tc", "qdisc", "add", "dev", inner, "root", "tbf",
           "rate", rate, "burst", "16kb", "latency", "500ms")
        self._limited.add(node)

    def heal(self) -> None:
        """Remove every blackhole route and rate limit this lab added."""
        for a, b in list(self._blocks):
            self.unblock(a, b)
        for node in list(self._limited):
            sh("tc", "qdisc", "del", "dev", self.veth(node), "root", check=False)
            sh("ip", "netns", "exec", self.ns(node) or "", "tc", "qdisc", "del", "dev", self.veth(node) + "p",
               "root", check=False)
            self._limited.discard(node)

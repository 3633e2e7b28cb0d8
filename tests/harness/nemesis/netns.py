"""NetLab: one network namespace per node (ZooKeeper, each broker) on a Linux bridge, so links can be cut for real.

Layout (run tag ``T`` = the runner's pid, subnet ``10.213.S.0/24`` with the first free ``S``):

* bridge ``nmT-br`` in the root namespace holds ``.1``: the clients (producer, consumer, admin) run in the root
  namespace and reach every node through it;
* namespace ``nemT-<node>`` per node with a veth pair (``nmT<node>`` on the bridge, ``nmT<node>p`` inside) and
  its own address (ZooKeeper ``.2``, broker ``i`` ``.10+i``) and its own loopback, so no inter-broker or ZooKeeper
  traffic goes over the root namespace's loopback.

Faults: :meth:`block` adds a blackhole route in ``a``'s namespace towards ``b`` (a one-way cut: ``a``'s packets to
``b`` are dropped); :meth:`cut` blocks both ways; :meth:`isolate` blocks a node from every other node and from the
clients; :meth:`rate_limit` puts a tbf qdisc on both ends of a node's veth. This kernel has no sch_netem (and no tc
actions), so loss and latency are done in netfilter instead, one direction each, on arrival in the receiving
node's namespace (prerouting, before conntrack): ``a``'s kernel counts the packet as sent, as with a lossy or long
wire (a drop on ``a``'s own output hook would fail its send with EPERM, and a packet held there would stay charged
to ``a``'s socket):

* :meth:`lossy` drops a share of ``a``'s packets to ``b``: an nft table ``inet nemT`` in ``b``'s namespace with
  ``ip saddr A numgen random mod 100 < P drop``;
* :meth:`delay` holds each of ``a``'s packets to ``b`` for ``ms``: an ``NFQUEUE`` rule hands them to a queue that
  :mod:`tests.harness.nemesis.delayer` (raw netlink, a process in ``b``'s namespace) accepts ``ms`` later.
  Packet-level, so it slows ZooKeeper, replication and clients alike, and TCP sees the longer round trip. The rule
  is iptables' ``NFQUEUE`` target in the raw table (``-m comment --comment nemT``): this kernel has
  nfnetlink_queue and xt_NFQUEUE but not nft's own ``queue`` expression (CONFIG_NFT_QUEUE).

:meth:`heal` removes every active fault (routes, qdiscs, the nft tables, the NFQUEUE rules, then stops the delayers,
which accept what they still hold).

:func:`remove_leftovers` deletes what a crashed earlier run left (namespaces, links, mounts, processes in those
namespaces, its nft table and NFQUEUE rules in the root namespace), recognised by the name prefixes and a run tag
whose runner process is gone.
"""
from __future__ import annotations

import os
import re
import select
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

CLIENT = "client"
NS_PREFIX = "nem"
LINK_PREFIX = "nm"
SUBNET_BASE = "10.213"


DELAYER = Path(__file__).with_name("delayer.py")


class NetLabError(RuntimeError):
    """A namespace, veth, bridge, route, qdisc or netfilter rule could not be created (not root, no ip/tc/nft/
    iptables, ...)."""


def sh(*args: str, check: bool = True, stdin: Optional[str] = None) -> subprocess.CompletedProcess:
    """Run ``ip``/``tc``/``nft``/``iptables``/``mount`` and fail with the command and its stderr (never a bare
    traceback); a missing program fails the same way (or, with ``check=False``, returns code 127)."""
    try:
        r = subprocess.run(list(args), capture_output=True, text=True, input=stdin)
    except FileNotFoundError:
        if check:
            raise NetLabError(f"`{args[0]}` not found: the nemesis needs iproute2, nftables and iptables "
                              "(scripts/install-test.sh installs them)") from None
        return subprocess.CompletedProcess(list(args), 127, "", f"{args[0]} not found")
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
    for line in sh("nft", "list", "tables", check=False).stdout.splitlines():  # a client-side lossy link
        m = re.fullmatch(rf"table inet ({NS_PREFIX}(\d+))", line.strip())
        if m and not _runner_alive(m.group(2)):
            sh("nft", "delete", "table", "inet", m.group(1), check=False)
            removed.append(f"nft table {m.group(1)}")
    for line in sh("iptables", "-w", "-t", "raw", "-S", "PREROUTING", check=False).stdout.splitlines():
        m = re.search(rf"--comment \"?{NS_PREFIX}(\d+)\"?", line)  # a client-side delay
        if line.startswith("-A PREROUTING ") and m and not _runner_alive(m.group(1)):
            sh("iptables", "-w", "-t", "raw", "-D", *shlex.split(line)[1:], check=False)
            removed.append(f"iptables rule {line}")
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
        self._nft_nodes: Set[str] = set()
        self._delays: Dict[Tuple[str, str], Tuple[List[str], subprocess.Popen]] = {}
        self._next_queue = 0
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

    @property
    def table(self) -> str:
        """The nft table (family inet) this lab's lossy links live in, in each receiving node's namespace."""
        return f"{NS_PREFIX}{self.tag}"

    def _in_ns(self, node: str, *args: str) -> List[str]:
        ns = self.ns(node)
        return ["ip", "netns", "exec", ns, *args] if ns else list(args)

    def lossy(self, a: str, b: str, percent: int) -> None:
        """Drop ``percent`` % of the packets ``a`` sends to ``b`` (each drawn at random, on arrival at ``b``; one
        direction)."""
        if not 0 < percent <= 100:
            raise ValueError(f"loss percent {percent} is not in 1..100")
        t = self.table
        draw = "" if percent == 100 else f"numgen random mod 100 < {int(percent)} "  # nft: 100 is out of 0-99
        self._nft_nodes.add(b)
        sh(*self._in_ns(b, "nft", "-f", "-"), stdin=(
            f"add table inet {t}\n"
            f"add chain inet {t} arrive {{ type filter hook prerouting priority -300; policy accept; }}\n"
            f"add rule inet {t} arrive ip saddr {self.addr[a]} {draw}drop\n"))

    def delay(self, a: str, b: str, ms: float) -> None:
        """Hold every packet ``a`` sends to ``b`` for ``ms`` milliseconds (one direction): a delayer process bound
        to a fresh NFQUEUE in ``b``'s namespace, then the rule that queues ``a``'s packets there on arrival."""
        if (a, b) in self._delays:
            raise NetLabError(f"{a} -> {b} is already delayed")
        queue = self._next_queue
        self._next_queue += 1
        err = tempfile.TemporaryFile()
        proc = subprocess.Popen(self._in_ns(b, sys.executable, str(DELAYER), "--queue", str(queue), "--ms", str(ms)),
                                stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
        assert proc.stdout is not None
        ready = select.select([proc.stdout], [], [], 15)[0]
        line = proc.stdout.readline().decode(errors="replace").strip() if ready else ""
        if line != "ready":
            proc.kill()
            proc.wait()
            err.seek(0)
            why = err.read().decode(errors="replace").strip()[-400:] or "no answer in 15 s"
            raise NetLabError(f"the packet delayer for {a} -> {b} did not start: {why}")
        rule = ["PREROUTING", "-s", f"{self.addr[a]}/32", "-m", "comment", "--comment", self.table,
                "-j", "NFQUEUE", "--queue-num", str(queue)]
        try:
            sh(*self._in_ns(b, "iptables", "-w", "-t", "raw", "-A", *rule))
        except NetLabError:
            self._stop_delayer(proc)
            raise
        self._delays[(a, b)] = (rule, proc)

    @staticmethod
    def _stop_delayer(proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def heal(self) -> None:
        """Remove every blackhole route, rate limit, lossy link and delay this lab added (a delayer is stopped only
        after its rule is gone, and accepts what it still holds)."""
        for a, b in list(self._blocks):
            self.unblock(a, b)
        for (a, b), (rule, proc) in list(self._delays.items()):
            sh(*self._in_ns(b, "iptables", "-w", "-t", "raw", "-D", *rule), check=False)
            self._stop_delayer(proc)
            del self._delays[(a, b)]
        for node in list(self._nft_nodes):
            sh(*self._in_ns(node, "nft", "delete", "table", "inet", self.table), check=False)
            self._nft_nodes.discard(node)
        for node in list(self._limited):
            sh("tc", "qdisc", "del", "dev", self.veth(node), "root", check=False)
            sh("ip", "netns", "exec", self.ns(node) or "", "tc", "qdisc", "del", "dev", self.veth(node) + "p",
               "root", check=False)
            self._limited.discard(node)

"""A packet delayer on an NFQUEUE: every packet an nft ``queue num N`` rule hands to queue ``N`` is held ``ms``
milliseconds, then accepted. The "added latency" fault of :meth:`NetLab.delay`, because this kernel has no sch_netem
(and no tc actions), but it has nf_tables and nfnetlink_queue.

Raw netlink (``NETLINK_NETFILTER``, the nfnetlink_queue messages of ``linux/netfilter/nfnetlink_queue.h``), no
library: bind the queue, ask for metadata only (no payload copy), then for each packet message send an ``NF_ACCEPT``
verdict once its time has come. Packets keep their order (one constant delay, verdicts in arrival order). It is
packet-level: TCP sees the longer round trip, retransmits and all, for ZooKeeper, replication and clients alike.

``python -m tests.harness.nemesis.delayer --queue N --ms M`` run inside the sending node's namespace (``ip netns
exec``; queues are per network namespace) prints ``ready`` once bound. SIGTERM (the heal) accepts what it still
holds and exits; it also exits when its parent (the runner) is gone, so a crashed run leaves no delayer behind.
"""
from __future__ import annotations

import argparse
import heapq
import os
import select
import signal
import socket
import struct
import sys
import time
from typing import List, Optional, Tuple

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NF_ACCEPT = 1
NLM_F_REQUEST = 1
NLM_F_ACK = 4
NLMSG_ERROR = 2
NLMSG_HDR = struct.Struct("=IHHII")
NFGEN_HDR = struct.Struct("!BBH")  # family, version, res_id (the queue number, big-endian)


class DelayerError(RuntimeError):
    """The queue could not be bound (no nfnetlink_queue, another listener on it, not root)."""


def _attr(kind: int, payload: bytes) -> bytes:
    n = 4 + len(payload)
    return struct.pack("=HH", n, kind) + payload + b"\0" * ((4 - n % 4) % 4)


def _msg(msg: int, queue: int, attrs: bytes, flags: int, seq: int) -> bytes:
    body = NFGEN_HDR.pack(socket.AF_UNSPEC, 0, queue) + attrs
    return NLMSG_HDR.pack(NLMSG_HDR.size + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg, flags, seq, 0) + body


class Delayer:
    """One bound queue: :meth:`run` holds each packet ``ms`` milliseconds, then accepts it."""

    def __init__(self, queue: int, ms: float, maxlen: int = 65536) -> None:
        self.queue = queue
        self.delay = ms / 1000.0
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind((0, 0))
        self.seq = 0
        self.pending: List[Tuple[float, int]] = []  # (due, packet id)
        self.stopping = False
        self._config(_attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0)))
        self._config(_attr(NFQA_CFG_PARAMS, struct.pack("!IBxxx", 0, NFQNL_COPY_META)))
        self._config(_attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", maxlen)))

    def _config(self, attrs: bytes) -> None:
        """Send a config message with an ACK request; raise with the kernel's errno if it refuses."""
        self.seq += 1
        self.sock.send(_msg(NFQNL_MSG_CONFIG, self.queue, attrs, NLM_F_REQUEST | NLM_F_ACK, self.seq))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            data = self.sock.recv(65536)
            for kind, seq, payload in self._split(data):
                if kind == NLMSG_ERROR and seq == self.seq:
                    err = -struct.unpack_from("=i", payload)[0]
                    if err:
                        raise DelayerError(f"binding NFQUEUE {self.queue} failed: {os.strerror(err)}")
                    return
        raise DelayerError(f"no answer from nfnetlink_queue binding queue {self.queue}")

    @staticmethod
    def _split(data: bytes) -> List[Tuple[int, int, bytes]]:
        out = []
        off = 0
        while off + NLMSG_HDR.size <= len(data):
            n, kind, _flags, seq, _pid = NLMSG_HDR.unpack_from(data, off)
            if n < NLMSG_HDR.size:
                break
            out.append((kind, seq, data[off + NLMSG_HDR.size:off + n]))
            off += (n + 3) & ~3
        return out

    @staticmethod
    def _packet_id(payload: bytes) -> Optional[int]:
        off = NFGEN_HDR.size
        while off + 4 <= len(payload):
            n, kind = struct.unpack_from("=HH", payload, off)
            if n < 4:
                return None
            if kind & 0x7FFF == NFQA_PACKET_HDR:
                return struct.unpack_from("!I", payload, off + 4)[0]
            off += (n + 3) & ~3
        return None

    def _accept(self, pid: int) -> None:
        self.seq += 1
        self.sock.send(_msg(NFQNL_MSG_VERDICT, self.queue, _attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, pid)),
                            NLM_F_REQUEST, self.seq))

    def run(self, parent: int) -> None:
        """Receive, hold, accept, until SIGTERM or the parent's exit; then accept every held packet."""
        packet_type = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET
        while not self.stopping and os.getppid() == parent:
            now = time.monotonic()
            while self.pending and self.pending[0][0] <= now:
                self._accept(heapq.heappop(self.pending)[1])
            wait = min(0.5, self.pending[0][0] - now) if self.pending else 0.5
            try:
                ready, _, _ = select.select([self.sock], [], [], max(0.0, wait))
            except InterruptedError:
                continue
            if not ready:
                continue
            try:
                data = self.sock.recv(1 << 16)
            except OSError as exc:  # ENOBUFS: the kernel dropped messages for us; those packets time out
                print(f"delayer queue {self.queue}: {exc}", file=sys.stderr, flush=True)
                continue
            due = time.monotonic() + self.delay
            for kind, _seq, payload in self._split(data):
                if kind == packet_type:
                    pid = self._packet_id(payload)
                    if pid is not None:
                        heapq.heappush(self.pending, (due, pid))
        while self.pending:
            self._accept(heapq.heappop(self.pending)[1])
        self.sock.close()


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.harness.nemesis.delayer", description=__doc__)
    ap.add_argument("--queue", type=int, required=True)
    ap.add_argument("--ms", type=float, required=True)
    args = ap.parse_args(argv)
    parent = os.getppid()
    try:
        d = Delayer(args.queue, args.ms)
    except (OSError, DelayerError) as exc:
        print(f"delayer: cannot bind NFQUEUE {args.queue}: {exc}", file=sys.stderr, flush=True)
        return 2

    def stop(signum: int, frame: object) -> None:
        d.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)
    d.run(parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())

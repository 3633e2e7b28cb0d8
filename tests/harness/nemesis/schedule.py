"""The seeded fault schedule: which faults, in which order, held how long, with which quiet gap before each.

Targets are picked when a fault starts (the leader of a partition, the controller...), from a number drawn here,
so a seed gives the same sequence of kinds, durations and picks; the broker it lands on depends on where
leadership is at that moment (printed in the summary).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

#: kind -> (min, max) seconds the fault is held. ZooKeeper cuts outlive zookeeper.session.timeout.ms (6 s) and
#: the leader cut outlives replica.lag.time.max.ms (4 s), so the ISR really shrinks and regrows.
DURATIONS: Dict[str, Tuple[float, float]] = {
    "kill9": (1.0, 8.0),              # kill -9 a broker, restart it after the delay
    "kill9_controller": (1.0, 8.0),   # kill -9 the controller, restart it after the delay
    "sigstop": (2.0, 10.0),           # SIGSTOP a broker, SIGCONT after
    "leader_cut": (6.0, 14.0),        # a leader cut from its followers (not from ZooKeeper, not from clients)
    "zk_cut": (7.0, 12.0),            # a broker cut from ZooKeeper past the session timeout
    "all_zk_cut": (3.0, 10.0),        # every broker cut from ZooKeeper
    "client_cut": (3.0, 10.0),        # the clients cut from a leader
    "oneway_cut": (3.0, 10.0),        # packets from one node to another dropped (the other way not)
    "rate_limit": (5.0, 15.0),        # a broker's link capped by tbf (no netem on this kernel)
    "disk_full": (3.0, 10.0),         # a broker's log dir (tmpfs) filled; removed, broker restarted if needed
    "disk_ro": (3.0, 10.0),           # a broker restarted on its log dir remounted read-only; rw and restart
    "disk_eio": (3.0, 10.0),          # a running leader's log dir files: writes/fsyncs fail with EIO (strace)
    "disk_ro_live": (3.0, 10.0),      # the same with EROFS: the dir turns read-only under the running broker
    # the transactional client (own namespace) cut from every broker while a transaction is open: below or
    # past its transaction.timeout.ms (10 s; the coordinator then aborts it and bumps the epoch)
    "txn_client_cut": (3.0, 22.0),
    "lossy_link": (5.0, 15.0),        # 5-30 % packet loss both ways: a leader and a follower, or a leader and clients
    "slow_link": (5.0, 15.0),         # 50-400 ms added each way: a broker and the other brokers, or it and ZooKeeper
    "fd_limit": (5.0, 15.0),          # a leader's soft RLIMIT_NOFILE lowered (prlimit) to what it has open + 16
}
KINDS: List[str] = list(DURATIONS)


@dataclass
class FaultSpec:
    kind: str
    duration: float
    gap: float
    pick: int


def make_schedule(rng: random.Random, count: int, require: Sequence[str] = (),
                  kinds: Sequence[str] = KINDS, gap_s: Tuple[float, float] = (1.0, 5.0)) -> List[FaultSpec]:
    """``require`` first (in that order), then ``count`` random kinds; never the same kind twice in a row."""
    out: List[FaultSpec] = []
    for i in range(len(require) + count):
        if i < len(require):
            kind = require[i]
        else:
            choices = [k for k in kinds if not out or k != out[-1].kind] or list(kinds)
            kind = rng.choice(choices)
        if kind not in DURATIONS:
            raise ValueError(f"unknown fault kind {kind!r} (known: {', '.join(KINDS)})")
        lo, hi = DURATIONS[kind]
        out.append(FaultSpec(kind, round(rng.uniform(lo, hi), 1), round(rng.uniform(*gap_s), 1),
                             rng.randrange(1 << 16)))
    return out

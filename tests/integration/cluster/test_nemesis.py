"""The nemesis (tests/harness/nemesis) in CI: ZooKeeper and 3 broker processes from ``bin/``, each in its own
network namespace, under about 65 s of seeded faults while an idempotent acks=all producer and a read_committed
consumer group run; then the ledger audit (every acknowledged record in the log exactly once at its offset, in
order; read by the group at least once, in offset order; replicas byte-identical up to the high watermark).

The schedule is the four required kinds drawn from a fixed seed (kill -9, a leader cut from its followers, a
broker cut from ZooKeeper past its session, a full log dir), then random kinds from a random seed (printed, and
settable with NEMESIS_SEED) until the budget is spent. Needs root: without namespaces or mounts it fails loudly.
"""
from __future__ import annotations

import os
import random

import pytest

from tests.harness.nemesis.audit import audit, format_summary
from tests.harness.nemesis.runner import Nemesis, remove_workdir
from tests.harness.nemesis.schedule import make_schedule

pytestmark = pytest.mark.slow

FIXED_SEED = 21
REQUIRED = ["kill9", "leader_cut", "zk_cut", "disk_full"]
BUDGET_S = float(os.environ.get("NEMESIS_BUDGET_S", "65"))


def test_nemesis_short_schedule() -> None:
    assert os.geteuid() == 0, "the nemesis test needs root (network namespaces, veth pairs, tmpfs mounts)"
    random_seed = int(os.environ.get("NEMESIS_SEED", str(random.randrange(1 << 30))))
    print(f"\nnemesis seeds: fixed {FIXED_SEED}, random {random_seed}")
    schedule = (make_schedule(random.Random(FIXED_SEED), 0, REQUIRED, gap_s=(0.5, 2.0))
                + make_schedule(random.Random(random_seed), 20, gap_s=(0.5, 2.0)))
    n = Nemesis("ours", partitions=3, tmpfs_mb=64, log=lambda s: print(s, flush=True))
    with n:
        n.result.seed = f"{FIXED_SEED}+{random_seed}"
        res = n.run(schedule, BUDGET_S)
        aud = audit(n, wait_read_s=30)
    summary = format_summary(res, aud)
    print(summary)
    ran = {r.kind for r in res.records}
    assert set(REQUIRED) <= ran, f"the required faults did not all run ({sorted(ran)}):\n{summary}"
    assert aud.counts.acked > 0, summary
    assert aud.passed and not res.problems, summary
    remove_workdir(n.workdir)  # kept (with every broker's log) when the audit fails

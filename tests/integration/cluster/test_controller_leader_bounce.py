"""A controller that dies with a leader (issue 21): kill -9 the broker that is both the controller and the leader
of partitions, restart it inside zookeeper.session.timeout.ms. The restarted broker registers the moment its old
session expires, the same moment /controller vanishes, so the next controller may find it live; it must still
treat it as bounced (bounced_leaders.py): every partition it led gets a new leader epoch (another ISR member
leads, or, on RF 1, it leads again with a new epoch), and every record an idempotent acks=all producer had
acknowledged is still there, exactly once, in order.

Real broker processes from ``bin/`` on the shared real ZooKeeper, stock clients (confluent-kafka). Each run kills
the controller ``BOUNCE_ITERATIONS`` times (3 by default); before the fix about half the kills kept the same
leader epoch.
"""
from __future__ import annotations

import json
import os
import random
import time
from typing import Dict, List, Tuple

import pytest
from confluent_kafka.admin import NewTopic
from kazoo.client import KazooClient

from tests.harness.faults import ProduceLoad, check_exactly_once, partitions_seen_by, read_partitions
from tests.integration.cluster.conftest import ClusterView, wait_for

pytestmark = pytest.mark.slow

SESSION_MS = 6000


def _state(zk: KazooClient, topic: str, partition: int = 0) -> Dict:
    return json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")[0])


def _controller(zk: KazooClient) -> int:
    return int(json.loads(zk.get("/controller")[0])["brokerid"])


def test_controller_and_leader_killed_and_restarted_within_the_session_gets_a_new_leader_epoch(new_cluster
                                                                                                 ) -> None:
    iterations = int(os.environ.get("BOUNCE_ITERATIONS", "3"))
    seed = int(os.environ.get("BOUNCE_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    print(f"\nseed {seed}")
    c = new_cluster(3, overrides={"zookeeper.session.timeout.ms": str(SESSION_MS)})
    zk = KazooClient(hosts=c.zk_connect)
    zk.start(timeout=15)
    outcomes: List[Tuple[int, float, Dict[str, Tuple[int, int, int, int]]]] = []
    try:
        for i in range(iterations):
            victim = wait_for(lambda: (lambda b: [b] if c.broker(b).is_alive() else None)(_controller(zk)), 30,
                              "a controller")[0]
            others = [b.broker_id for b in c.brokers if b.broker_id != victim]
            rf3, rf1 = f"bounce-{i}", f"bounce-solo-{i}"
            # the controller leads both: first in the assignment of an RF 3 partition, sole replica of an RF 1 one
            view = ClusterView(c.bootstrap)
            wait_for(lambda: view.controller() == victim, 30, f"Metadata naming controller {victim}")
            futures = view.admin.create_topics([NewTopic(rf3, num_partitions=1, replica_assignment=[[victim] + others],
                                                         config={"min.insync.replicas": "2"}),
                                                NewTopic(rf1, num_partitions=1, replica_assignment=[[victim]])],
                                               operation_timeout=30)
            for f in futures.values():
                f.result(40)
            wait_for(lambda: (lambda p: p[0] == victim and len(p[2]) == 3)(view.partitions(rf3)[0]), 30,
                     f"{rf3} led by {victim} with a full ISR")
            wait_for(lambda: view.partitions(rf1)[0][0] == victim, 30, f"{rf1} led by {victim}")
            loads = {t: ProduceLoad(c.bootstrap, t, 1, extra={"max.in.flight.requests.per.connection": 1}).start()
                     for t in (rf3, rf1)}
            try:
                for load in loads.values():
                    load.wait_acks(50, 60)
                before = {t: _state(zk, t) for t in (rf3, rf1)}
                assert before[rf3]["leader"] == victim and before[rf1]["leader"] == victim, before
                assert _controller(zk) == victim
                t_kill = time.monotonic()
                c.broker(victim).kill()
                down = rng.uniform(2.0, 3.0)  # back well inside the session timeout
                time.sleep(down)
                c.broker(victim).start(wait=False)
                c.broker(victim).wait_started(60)
                alive = ",".join(b.bootstrap for b in c.brokers)
                wait_for(lambda: (lambda p: p[0] >= 0 and len(p[2]) == 3)(partitions_seen_by(alive, rf3)[0]), 60,
                         f"{rf3}: a leader and a full ISR again")
                wait_for(lambda: partitions_seen_by(alive, rf1)[0][0] == victim, 60, f"{rf1}: led again")
                for t, load in loads.items():
                    load.wait_acks(20, 60, since=time.monotonic())  # production flows again on both
            finally:
                stats = {t: load.stop() for t, load in loads.items()}
            after = {t: _state(zk, t) for t in (rf3, rf1)}
            outcomes.append((victim, down, {t: (before[t]["leader"], before[t]["leader_epoch"], after[t]["leader"],
                                                after[t]["leader_epoch"]) for t in (rf3, rf1)}))
            print(f"kill {i}: controller {victim} down {down:.2f}s; (leader, epoch) before -> after: "
                  + ", ".join(f"{t} ({a}, {b}) -> ({x}, {y})" for t, (a, b, x, y) in outcomes[-1][2].items())
                  + f"; settled after {time.monotonic() - t_kill:.1f}s")
            for t in (rf3, rf1):
                assert after[t]["leader_epoch"] > before[t]["leader_epoch"], (
                    f"kill {i}: {t} kept leader {after[t]['leader']} with leader epoch {after[t]['leader_epoch']} "
                    f"(before the kill: leader {before[t]['leader']}, epoch {before[t]['leader_epoch']}); "
                    f"outcomes so far {outcomes}")
            for t, s in stats.items():
                assert not s.errors, f"{t}: {len(s.errors)} delivery errors, first {s.errors[:5]}"
                log = read_partitions(c.bootstrap, t, [0])
                checked = check_exactly_once(s, log)
                assert checked == s.produced, f"{t}: {s.produced} produced, {checked} acknowledged and found"
    finally:
        zk.stop()
        zk.close()
    detected = sum(f.read_text(errors="replace").count("treating it as bounced")
                   for b in c.brokers for f in b.logs_dir.glob("controller.log*"))
    print(f"outcomes (victim, downtime, {{topic: (leader, epoch before, leader, epoch after)}}): {outcomes}; "
          f"bounced leaders found at controller failover: {detected} of {iterations} kills")

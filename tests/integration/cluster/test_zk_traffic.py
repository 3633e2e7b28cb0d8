"""At inter.broker.protocol.version=3.9 ISR changes go to the controller with AlterPartition: no broker announces
them under /isr_change_notification, and brokers learn partition state only from the controller (UpdateMetadata,
LeaderAndIsr), never by reading ``/brokers/topics/<t>/partitions/<p>/state`` themselves.

Proved on real traffic: each broker's ZooKeeper connection goes through its own LoggingZkProxy, which decodes
every request the broker sends (tests/harness/zk_traffic.py), while a kazoo ChildrenWatch (our own session, not
proxied) watches /isr_change_notification for the whole scenario: ISRs shrink (a follower SIGSTOPped past
replica.lag.time.max.ms) and expand (it resumes), then the controller is killed, a new one takes over, and the
old one comes back as a plain broker and rejoins the ISRs.
"""
from __future__ import annotations

import json
import re
import threading
import time
from typing import Dict, List

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from tests.harness.faults import ProduceLoad, check_exactly_once, partitions_seen_by, read_partitions
from tests.harness.zk_traffic import READ_OPS, WRITE_OPS, LoggingZkProxy, split_zk_connect
from tests.integration.cluster.conftest import ClusterView, wait_for

pytestmark = pytest.mark.slow

STATE_PATH = re.compile(r"/brokers/topics/[^/]+/partitions/\d+/state$")
ISR_NOTIFICATION = re.compile(r"/isr_change_notification/.")


def test_only_the_controller_reads_partition_state_and_no_isr_change_notification(new_cluster) -> None:
    session_ms, lag_ms = 6000, 1500
    c = new_cluster(3, overrides={"inter.broker.protocol.version": "3.9",
                                  "zookeeper.session.timeout.ms": str(session_ms),
                                  "replica.lag.time.max.ms": str(lag_ms)}, start=False)
    host, port, chroot = split_zk_connect(c.zk_connect)
    proxies = {b.broker_id: LoggingZkProxy(host, port, f"broker-{b.broker_id}") for b in c.brokers}
    for b in c.brokers:
        b.overrides["zookeeper.connect"] = proxies[b.broker_id].address + chroot
    zk = KazooClient(hosts=c.zk_connect)
    seen_children: List[List[str]] = []
    lock = threading.Lock()
    load = None
    try:
        c.start()
        zk.start(timeout=15)
        assert zk.exists("/isr_change_notification"), "brokers create /isr_change_notification at start-up"

        @zk.ChildrenWatch("/isr_change_notification")
        def _watch(children: List[str]) -> None:
            with lock:
                seen_children.append(list(children))

        view = ClusterView(c.bootstrap)
        first = view.controller()
        s = next(b for b in range(3) if b != first)  # the broker that will be SIGSTOPped: a follower only
        other = next(b for b in range(3) if b not in (first, s))
        topic = "zk-traffic"
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=2, replica_assignment=[[first, other, s],
                                                                                   [other, first, s]],
                                      config={"min.insync.replicas": "2"})], operation_timeout=30)[topic].result(40)
        full = lambda v=view: all(l >= 0 and len(i) == 3 for l, _, i in v.partitions(topic).values())  # noqa: E731
        wait_for(full, 30, "topic online with full ISRs")
        load = ProduceLoad(c.bootstrap, topic, 2).start()
        load.wait_acks(50, 30, partition=0)
        load.wait_acks(50, 30, partition=1)

        # ISR shrink and expansion (AlterPartition at IBP 3.9)
        c.broker(s).pause()
        try:
            running = f"{c.broker(first).bootstrap},{c.broker(other).bootstrap}"
            wait_for(lambda: all(s not in i for _, _, i in partitions_seen_by(running, topic).values()), 20,
                     f"broker {s} out of the ISRs", interval_s=0.3)
        finally:
            c.broker(s).resume()
        wait_for(full, 30, f"broker {s} back in the ISRs")

        # controller failover
        t_kill = time.monotonic()
        c.broker(first).kill()
        new = wait_for(lambda: (lambda b: [b] if b != first else None)(
            int(json.loads(zk.get("/controller")[0])["brokerid"])), session_ms / 1000 + 15, "a new controller")[0]
        live = ClusterView(f"{c.broker(s).bootstrap},{c.broker(other).bootstrap}")
        wait_for(lambda: all(l in (s, other) for l, _, _ in live.partitions(topic).values()), 30,
                 "live leaders for every partition")
        load.wait_acks(50, 60, since=time.monotonic())
        # the old controller comes back as an ordinary broker: the ISRs expand again
        c.broker(first).start()
        wait_for(full, 60, f"broker {first} back in the ISRs")
        load.wait_acks(50, 60, since=time.monotonic())
        stats = load.stop()
        load = None
        assert not stats.errors, stats.errors[:5]
        check_exactly_once(stats, read_partitions(c.bootstrap, topic, range(2)))
    finally:
        if load is not None:
            load.stop()
        zk.stop()
        zk.close()
        for p in proxies.values():
            p.close()

    logs = {b: p.log for b, p in proxies.items()}
    summary = {b: (len(lg.snapshot()), dict(lg.counters)) for b, lg in logs.items()}
    print(f"\ncontrollers: {first} then {new}; requests and decoder counters per broker: {summary}")
    for b, lg in logs.items():
        assert len(lg.snapshot()) > 20 and lg.counters["connects"] >= 1, f"broker {b}: no traffic decoded"
        assert lg.counters["abandoned"] == 0, f"broker {b}: decoder lost the framing {lg.counters}"

    # /isr_change_notification: never a child, neither in the watch nor on the wire
    assert seen_children and all(ch == [] for ch in seen_children), f"isr_change_notification: {seen_children}"
    for b, lg in logs.items():
        created = lg.matching(ISR_NOTIFICATION, WRITE_OPS)
        assert not created, f"broker {b} wrote {[(q.name, q.path) for q in created]}"

    # partition state: read (and written) only by the controller of the moment
    reads: Dict[int, list] = {b: lg.matching(STATE_PATH, READ_OPS) for b, lg in logs.items()}
    writes: Dict[int, list] = {b: lg.matching(STATE_PATH, WRITE_OPS) for b, lg in logs.items()}
    before = {b for b in logs if any(q.t < t_kill for q in reads[b] + writes[b])}
    after = {b for b in logs if any(q.t >= t_kill for q in reads[b] + writes[b])}
    detail = {b: sorted({(q.name, q.path.split("/brokers/")[-1]) for q in reads[b] + writes[b]}) for b in logs}
    assert before <= {first}, f"before the kill only controller {first} may touch state znodes: {detail}"
    assert writes[first], f"controller {first} created the partition states, the decoder must have seen it"
    assert after == {new}, f"after the kill only the new controller {new} may read state znodes: {detail}"
    assert any(q.t >= t_kill for q in reads[new]), f"new controller {new} loads the partition states: {detail}"
    print(f"state znode requests: {[(b, len(reads[b]), len(writes[b])) for b in logs]} (broker, reads, writes)")

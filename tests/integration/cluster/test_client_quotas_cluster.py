"""AlterClientQuotas sent to one broker reaches every broker of a 3-broker cluster within seconds (through
/config/changes), and each broker then throttles that client on its own partitions; replication is never
throttled by client quotas."""
from __future__ import annotations

import time
import uuid
from typing import Callable

from broker.protocol.api import ApiKey
from broker.protocol.records.builder import build_batch
from tests.harness.cluster_ops import call
from tests.integration.broker.wire import RawClient
from tests.integration.cluster.conftest import ClusterView
from tools.cluster import LocalCluster


def test_quota_change_reaches_every_broker_and_replication_is_not_throttled(
        new_cluster: Callable[..., LocalCluster]) -> None:
    cluster = new_cluster(3)
    view = ClusterView(cluster.bootstrap)
    topic = f"q-{uuid.uuid4().hex[:8]}"
    view.create_topic(topic, partitions=3, rf=3)
    leaders = {p: leader for p, (leader, _, _) in view.partitions(topic).items()}
    by_leader = {leader: p for p, leader in leaders.items()}
    assert set(by_leader) == {0, 1, 2}, leaders  # Kafka's placement: one leader per broker
    client_id = f"tenant-{uuid.uuid4().hex[:6]}"
    r = call(cluster.broker(0), ApiKey.ALTER_CLIENT_QUOTAS, 1, {"validate_only": False, "entries": [{
        "entity": [{"entity_type": "client-id", "entity_name": client_id}],
        "ops": [{"key": "producer_byte_rate", "value": 10240.0, "remove": False}]}]})
    assert r.entries[0].error_code == 0
    batch = build_batch([(None, b"q" * 1000)] * 100)  # ~100 KB, more than the 11 x 10 KB burst
    for broker_id, partition in sorted(by_leader.items()):
        b = cluster.broker(broker_id)
        described = call(b, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"strict": True, "components": [
            {"entity_type": "client-id", "match_type": 0, "match": client_id}]})
        assert [(v.key, v.value) for v in described.entries[0].values] == [("producer_byte_rate", 10240.0)]
        deadline = time.monotonic() + 30
        throttle = 0
        with RawClient(b.bootstrap, timeout_s=60) as c:
            while throttle == 0:
                assert time.monotonic() < deadline, f"broker {broker_id} never throttled {client_id}"
                resp = c.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                                                      "topic_data": [{"name": topic, "partition_data": [
                                                          {"index": partition, "records": batch}]}]},
                                 client_id=client_id)
                code = resp.responses[0].partition_responses[0].error_code
                if code == 3:  # UNKNOWN_TOPIC_OR_PARTITION: this leader has not had its LeaderAndIsr yet
                    time.sleep(0.1)
                    continue
                assert code == 0
                throttle = resp.throttle_time_ms
        # acks=all answered: the followers fetched these bytes although the producer is throttled
        assert throttle > 0
    # replicas are in sync: replication was not slowed by the client's quota
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if all(len(isr) == 3 for _, _, isr in view.partitions(topic).values()):
            break
        time.sleep(0.2)
    assert all(len(isr) == 3 for _, _, isr in view.partitions(topic).values())

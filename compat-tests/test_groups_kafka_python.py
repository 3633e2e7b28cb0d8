"""kafka-python consumer groups (classic protocol) against a real broker process."""
from __future__ import annotations

import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic


def _produce(bootstrap: str, topic: str, start: int, end: int) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(start, end):
        p.send(topic, key=f"k{i}".encode(), value=str(i).encode())
    p.flush(30)
    p.close()


def _consumer(bootstrap: str, group: str, topic: str) -> KafkaConsumer:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest", session_timeout_ms=10000, heartbeat_interval_ms=500)
    c.subscribe([topic])
    return c


def test_group_assignment_commit_and_resume(broker) -> None:
    topic = f"kpg-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 6, 1)])
    group = f"{topic}-g"

    c1, c2 = _consumer(broker.bootstrap, group, topic), _consumer(broker.bootstrap, group, topic)
    # Both members join (and hold partitions) before any record exists.
    deadline = time.monotonic() + 60
    while (not c1.assignment() or not c2.assignment()) and time.monotonic() < deadline:
        for c in (c1, c2):
            c.poll(timeout_ms=100)
    _produce(broker.bootstrap, topic, 0, 3000)
    seen: set = set()
    dups = 0
    deadline = time.monotonic() + 60
    while len(seen) < 3000 and time.monotonic() < deadline:
        for c in (c1, c2):
            for recs in c.poll(timeout_ms=100).values():
                for r in recs:
                    v = int(r.value)
                    dups += v in seen
                    seen.add(v)
    a1, a2 = c1.assignment(), c2.assignment()
    assert len(seen) == 3000 and dups == 0
    assert a1 and a2 and not (a1 & a2) and len(a1 | a2) == 6
    c1.commit()
    c2.commit()
    c1.close()
    c2.close()

    _produce(broker.bootstrap, topic, 3000, 4000)
    c = _consumer(broker.bootstrap, group, topic)
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 1000 and time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=200).values():
            got.extend(int(r.value) for r in recs)
    c.commit()
    c.close()
    assert sorted(got) == list(range(3000, 4000))

    listed = admin.list_groups()
    groups = {g["group_id"] if isinstance(g, dict) else g[0] for g in listed}
    assert group in groups
    offsets = admin.list_group_offsets(group)
    per_group = offsets.get(group, offsets)  # {group: {tp: OffsetAndMetadata}}
    assert sum(o.offset for o in per_group.values()) == 4000
    admin.close()

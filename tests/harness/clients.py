"""Stock-client helpers shared by integration and compatibility tests."""
from __future__ import annotations

import time
import uuid
from typing import Dict, List, Optional, Sequence, Tuple

from confluent_kafka import Consumer, KafkaException, TopicPartition


def consume_from_start(bootstrap: str, partitions: Sequence[Tuple[str, int]], expected: int,
                       timeout_s: float = 60.0, extra: Optional[Dict[str, object]] = None) -> List:
    """Read up to ``expected`` records from offset 0 of ``partitions`` with confluent-kafka (assign, no commits).

    Stops at ``expected`` records or after ``timeout_s``; a record error raises KafkaException.
    """
    conf: Dict[str, object] = {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                               "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    conf.update(extra or {})
    c = Consumer(conf)
    c.assign([TopicPartition(t, p, 0) for t, p in partitions])
    got: List = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < expected and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error():
                    raise KafkaException(m.error())
                got.append(m)
    finally:
        c.close()
    return got

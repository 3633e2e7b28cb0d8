"""``init_transactions`` of a confluent-kafka producer checked by its cause, not its duration: the call succeeds
within the given (generous) bound and no request of the client timed out on the way, which is how a broker that
leaves a FindCoordinator or InitProducerId unanswered makes the client wait out its timeouts."""
from __future__ import annotations

import json
import time
from typing import Any, Dict, List

from confluent_kafka import Producer

#: producer settings that make librdkafka publish its statistics (per-broker ``req_timeouts`` among them)
STATS_CONF: Dict[str, Any] = {"statistics.interval.ms": 100}


def stats_producer(conf: Dict[str, Any]) -> "tuple[Producer, List[dict]]":
    """A producer with ``conf`` whose statistics (librdkafka's JSON, decoded) are appended to the returned list."""
    seen: List[dict] = []
    producer = Producer({**conf, **STATS_CONF, "stats_cb": lambda s: seen.append(json.loads(s))})
    return producer, seen


def init_transactions_without_timeouts(producer: Producer, stats: List[dict], timeout_s: float = 60.0) -> None:
    """``init_transactions(timeout_s)`` then a statistics report taken after it: fails the test if any request timed
    out (librdkafka's per-broker ``req_timeouts``)."""
    producer.init_transactions(timeout_s)
    before = len(stats)
    deadline = time.monotonic() + 10
    while len(stats) == before:  # stats callbacks are served by poll()
        assert time.monotonic() < deadline, "librdkafka published no statistics within 10 s"
        producer.poll(0.1)
    timed_out = {b["name"]: b["req_timeouts"] for b in stats[-1]["brokers"].values() if b["req_timeouts"]}
    assert not timed_out, f"requests of init_transactions timed out (per broker): {timed_out}"

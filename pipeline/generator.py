"""Produces the event stream (pipeline/events.py) with confluent-kafka: keys, headers, event-time timestamps.

The producer is idempotent with acks=all and librdkafka's default batching; every delivery is checked, so a
returned :class:`ProduceResult` means every record is in the log. ``rate_per_s`` spreads the events over time
(the runner's live mode); 0 sends them as fast as the client batches them.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from confluent_kafka import Producer

from pipeline.events import ORDER, Event, User
from pipeline.topics import Topics


@dataclass
class ProduceResult:
    """Where each record landed: (topic, partition, offset) per event id, and counts per topic."""

    offsets: Dict[str, Tuple[str, int, int]] = field(default_factory=dict)
    per_topic: Counter = field(default_factory=Counter)

    @property
    def count(self) -> int:
        return len(self.offsets)


class DeliveryFailed(RuntimeError):
    """A record was not acknowledged."""


def topic_of(event: Event, topics: Topics) -> str:
    return topics.orders if event.event_type == ORDER else topics.page_views


def _producer(bootstrap: str, extra: Optional[Dict[str, object]]) -> Producer:
    conf: Dict[str, object] = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                               "message.timeout.ms": 120_000}
    conf.update(extra or {})
    return Producer(conf)


def produce_events(bootstrap: str, events: Sequence[Event], topics: Topics, rate_per_s: float = 0.0,
                   on_progress: Optional[Callable[[int], None]] = None,
                   extra: Optional[Dict[str, object]] = None, timeout_s: float = 120.0) -> ProduceResult:
    """Produce ``events`` in order; raises DeliveryFailed unless every one is acknowledged."""
    p = _producer(bootstrap, extra)
    result = ProduceResult()
    errors: List[str] = []

    def delivered(event_id: str) -> Callable[..., None]:
        def cb(err: object, msg: object) -> None:
            if err is not None:
                errors.append(f"{event_id}: {err}")
            else:
                result.offsets[event_id] = (msg.topic(), msg.partition(), msg.offset())  # type: ignore[attr-defined]
                result.per_topic[msg.topic()] += 1  # type: ignore[attr-defined]
        return cb

    t0 = time.monotonic()
    for i, e in enumerate(events):
        if rate_per_s > 0:
            wait = t0 + i / rate_per_s - time.monotonic()
            if wait > 0:
                p.poll(wait)
        while True:
            try:
                p.produce(topic_of(e, topics), key=e.key, value=e.value(), headers=e.kafka_headers(),
                          timestamp=e.event_time_ms, on_delivery=delivered(e.event_id))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
        if on_progress is not None and (i + 1) % 500 == 0:
            on_progress(i + 1)
    left = p.flush(timeout_s)
    if left or errors:
        raise DeliveryFailed(f"{left} records undelivered after {timeout_s}s; errors: {errors[:5]}")
    return result


def produce_users(bootstrap: str, users: Sequence[User], topics: Topics, timeout_s: float = 60.0) -> None:
    """The users dimension, one record per user keyed by user id, into the compacted users topic."""
    p = _producer(bootstrap, None)
    errors: List[str] = []
    for u in users:
        p.produce(topics.users, key=u.user_id.encode(), value=u.value(),
                  on_delivery=lambda err, msg: errors.append(str(err)) if err is not None else None)
    left = p.flush(timeout_s)
    if left or errors:
        raise DeliveryFailed(f"users: {left} undelivered; errors: {errors[:5]}")

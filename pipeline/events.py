"""The pipeline's event stream, generated deterministically from a seed (pure: no Kafka here).

Users browse pages and place orders. Each event carries its event time (``event_time_ms``, also the Kafka record
timestamp), is keyed by user id, and has headers (``event-type``, ``source``, ``schema``). Events come in
"generation order": a clock advances evenly over ``span_ms``; most events are a few seconds behind it (out of
order), a few are minutes behind (late), but never more than :data:`MAX_LATENESS_MS`, well inside the streaming
job's allowed lateness, so none of them is dropped whatever the micro-batch boundaries are.

Two special kinds exist for the end of a run: :func:`watermark_push` (one event an hour past the last one, which
moves the job's watermark beyond every window so append mode emits them all) and :func:`too_late` (events older
than that watermark: the job must drop them, which makes the result deterministic and checkable).
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

COUNTRIES = ("DE", "FR", "JP", "US", "BR")
SEGMENTS = ("free", "pro", "enterprise")
PAGES = ("/", "/search", "/product", "/cart", "/checkout", "/help")
SOURCES = ("web", "ios", "android")
PAGE_VIEW = "page_view"
ORDER = "order"
#: the most an ordinary late event trails the generation clock
MAX_LATENESS_MS = 3 * 60_000
#: how far past the last event the watermark-pushing event lies
PUSH_AHEAD_MS = 60 * 60_000


@dataclass(frozen=True)
class User:
    user_id: str
    country: str
    segment: str

    def value(self) -> bytes:
        return json.dumps({"user_id": self.user_id, "country": self.country, "segment": self.segment},
                          sort_keys=True).encode()


@dataclass(frozen=True)
class Event:
    """One page view or order; ``late`` marks an event generated minutes behind the clock."""

    event_id: str
    event_type: str
    user_id: str
    event_time_ms: int
    source: str
    page: Optional[str] = None
    order_id: Optional[str] = None
    amount_cents: int = 0
    late: bool = False

    @property
    def key(self) -> bytes:
        return self.user_id.encode()

    def value(self) -> bytes:
        body: Dict[str, object] = {"event_id": self.event_id, "type": self.event_type, "user_id": self.user_id,
                                   "event_time_ms": self.event_time_ms}
        if self.event_type == PAGE_VIEW:
            body["page"] = self.page
        else:
            body["order_id"] = self.order_id
            body["amount_cents"] = self.amount_cents
        return json.dumps(body, sort_keys=True).encode()

    def kafka_headers(self) -> List[Tuple[str, bytes]]:
        return [("event-type", self.event_type.encode()), ("source", self.source.encode()), ("schema", b"1")]


@dataclass(frozen=True)
class EventPlan:
    """Everything a run produces, in production order."""

    seed: int
    start_ms: int
    span_ms: int
    users: List[User]
    events: List[Event]

    @property
    def max_event_time_ms(self) -> int:
        return max(e.event_time_ms for e in self.events)


def aligned_start_ms(span_ms: int, now_ms: Optional[int] = None) -> int:
    """A start time on a whole minute, ``span_ms`` back from now (recent, so time-based retention keeps it)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return (now - span_ms) // 60_000 * 60_000


def generate(seed: int = 7, num_events: int = 3000, num_users: int = 40, span_ms: int = 20 * 60_000,
             start_ms: Optional[int] = None, order_fraction: float = 0.2, late_fraction: float = 0.05) -> EventPlan:
    """The same seed and start give the same users and events, byte for byte."""
    rng = random.Random(seed)
    start = aligned_start_ms(span_ms) if start_ms is None else start_ms
    users = [User(f"u{i:03d}", rng.choice(COUNTRIES), rng.choice(SEGMENTS)) for i in range(num_users)]
    events: List[Event] = []
    for i in range(num_events):
        clock = start + span_ms * i // num_events
        late = rng.random() < late_fraction
        lateness = rng.randint(30_000, MAX_LATENESS_MS) if late else rng.randint(0, 5_000)
        t = max(start, clock - lateness)
        user = rng.choice(users)
        source = rng.choice(SOURCES)
        if rng.random() < order_fraction:
            events.append(Event(f"{seed}-{i}", ORDER, user.user_id, t, source, order_id=f"o{seed}-{i}",
                                amount_cents=rng.randint(500, 25_000), late=late))
        else:
            events.append(Event(f"{seed}-{i}", PAGE_VIEW, user.user_id, t, source, page=rng.choice(PAGES),
                                late=late))
    return EventPlan(seed, start, span_ms, users, events)


def watermark_push(plan: EventPlan) -> Event:
    """A page view an hour after the plan's last event: once processed, the watermark passes every window."""
    return Event(f"{plan.seed}-push", PAGE_VIEW, plan.users[0].user_id, plan.max_event_time_ms + PUSH_AHEAD_MS,
                 "web", page="/")


def too_late(plan: EventPlan, n: int = 20) -> List[Event]:
    """Events from the plan's first half: behind the watermark once :func:`watermark_push` was processed."""
    rng = random.Random(plan.seed + 1)
    out = []
    for i in range(n):
        t = plan.start_ms + rng.randint(0, plan.span_ms // 2)
        user = rng.choice(plan.users)
        if i % 2:
            out.append(Event(f"{plan.seed}-tl{i}", ORDER, user.user_id, t, "web", order_id=f"tl{plan.seed}-{i}",
                             amount_cents=999, late=True))
        else:
            out.append(Event(f"{plan.seed}-tl{i}", PAGE_VIEW, user.user_id, t, "web", page="/", late=True))
    return out

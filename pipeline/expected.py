"""What the streaming job must output for a set of events, computed in plain Python (the runner's self-check).

Per (window start ms, country): (page views, orders, revenue in cents), over tumbling windows of ``window_ms``
aligned on the epoch, as Spark's ``window()`` aligns them.
"""
from __future__ import annotations

from typing import Dict, Iterable, Tuple

from pipeline.events import ORDER, Event, User

WindowKey = Tuple[int, str]


def window_stats(events: Iterable[Event], users: Iterable[User], window_ms: int = 60_000
                 ) -> Dict[WindowKey, Tuple[int, int, int]]:
    country = {u.user_id: u.country for u in users}
    out: Dict[WindowKey, Tuple[int, int, int]] = {}
    for e in events:
        if e.user_id not in country:
            continue
        k = (e.event_time_ms - e.event_time_ms % window_ms, country[e.user_id])
        views, orders, revenue = out.get(k, (0, 0, 0))
        if e.event_type == ORDER:
            out[k] = (views, orders + 1, revenue + e.amount_cents)
        else:
            out[k] = (views + 1, orders, revenue)
    return out

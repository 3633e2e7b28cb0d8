"""The pipeline's topic names (one prefix, so runs and tests can share a cluster) and their creation."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


@dataclass(frozen=True)
class Topics:
    prefix: str = "pipeline."

    @property
    def page_views(self) -> str:
        return f"{self.prefix}page-views"

    @property
    def orders(self) -> str:
        return f"{self.prefix}orders"

    @property
    def users(self) -> str:
        """The users dimension: a compacted topic keyed by user id."""
        return f"{self.prefix}users"

    @property
    def window_stats(self) -> str:
        """The streaming job's Kafka output."""
        return f"{self.prefix}window-stats"

    @property
    def report(self) -> str:
        """The batch job's Kafka output."""
        return f"{self.prefix}report"

    @property
    def input_pattern(self) -> str:
        """subscribePattern of the streaming job: page views and orders."""
        return re.escape(self.prefix) + "(page-views|orders)"

    def all(self) -> List[str]:
        return [self.page_views, self.orders, self.users, self.window_stats, self.report]


def create_topics(bootstrap: str, topics: Topics, partitions: int = 3, replication_factor: int = 1,
                  extra_config: Optional[Dict[str, str]] = None, timeout_s: float = 60.0) -> None:
    """Create every pipeline topic that does not exist yet (the users topic compacted)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    base = dict(extra_config or {})
    new = []
    for name in topics.all():
        cfg = dict(base)
        if name == topics.users:
            cfg["cleanup.policy"] = "compact"
        new.append(NewTopic(name, partitions, replication_factor, config=cfg))
    for name, fut in admin.create_topics(new, operation_timeout=timeout_s).items():
        try:
            fut.result(timeout_s)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise

"""DynamicBrokerConfig: the broker's current config, replaced as a whole when a dynamic value changes.

AlterConfigs on a BROKER resource (or a ``/config/brokers/...`` change notification written by
another broker) builds a new :class:`KafkaConfig` with the new dynamic layer; every component holds
this one object and reads ``.current`` when it needs a value, so nobody keeps a stale copy.
Components that must react at once (log configs of hosted partitions, replication throttles)
register a listener.

Loop affinity: ``update`` runs on the event loop; ``current`` may be read from any thread (it is
one attribute read of an immutable object).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, List

from broker.config.kafka_config import KafkaConfig

log = logging.getLogger(__name__)

Listener = Callable[[KafkaConfig, KafkaConfig], None]


class DynamicBrokerConfig:
    def __init__(self, initial: KafkaConfig) -> None:
        self._current = initial
        self._listeners: List[Listener] = []

    @property
    def current(self) -> KafkaConfig:
        return self._current

    def get(self, name: str) -> Any:
        """The current value of ``name`` (as ``KafkaConfig.get``)."""
        return self._current.get(name)

    @property
    def broker_id(self) -> int:
        return self._current.broker_id

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(old, new)`` after every update."""
        self._listeners.append(listener)

    def update(self, new: KafkaConfig) -> None:
        old, self._current = self._current, new
        for listener in list(self._listeners):
            try:
                listener(old, new)
            except Exception:
                log.exception("Applying a dynamic broker config change failed in %r", listener)

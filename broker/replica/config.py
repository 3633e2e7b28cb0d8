"""ReplicaConfig: the broker settings that govern replication, typed once and passed in.

Keys and defaults are Kafka 3.9's (``replica.*``, ``num.replica.fetchers``, ``broker.rack``,
``inter.broker.protocol.version``). Build it from the broker config with :meth:`from_props`
(string or typed values) so the replica layer never parses configuration itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"


def _ibp_tuple(version: str) -> tuple[int, int]:
    """'3.9' / '3.9-IV0' / '2.7-IV2' -> (3, 9); '0.10.2' -> (0, 10)."""
    head = version.split("-")[0].strip()
    parts = head.split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return (3, 9)


@dataclass(frozen=True)
class ReplicaConfig:
    """Replication settings (attribute = Kafka key with '.' -> '_')."""

    replica_lag_time_max_ms: int = 30000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_response_max_bytes: int = 10485760
    replica_fetch_backoff_ms: int = 1000
    replica_socket_timeout_ms: int = 30000
    num_replica_fetchers: int = 1
    replica_high_watermark_checkpoint_interval_ms: int = 5000
    replica_selector_class: Optional[str] = None
    broker_rack: Optional[str] = None
    inter_broker_protocol_version: str = "3.9"
    #: backoff between AlterPartition retries of one partition (Kafka retries at once; we pause briefly)
    alter_partition_retry_backoff_ms: int = 50

    @property
    def truncation_on_fetch(self) -> bool:
        """IBP >= 2.7: followers detect divergence from the Fetch response (KIP-320) instead of
        a separate OffsetForLeaderEpoch round trip."""
        return _ibp_tuple(self.inter_broker_protocol_version) >= (2, 7)

    @property
    def uses_rack_aware_selector(self) -> bool:
        selector = self.replica_selector_class
        return bool(selector) and selector is not None and selector.strip() == RACK_AWARE_REPLICA_SELECTOR

    @classmethod
    def from_props(cls, get: Callable[[str], Any]) -> "ReplicaConfig":
        """Build from a ``get(key)`` lookup (e.g. the broker config's ``get``); missing keys keep defaults.

        ``get`` may raise KeyError or return None for unset keys.
        """
        values: dict[str, Any] = {}
        for name, conv in _FIELDS.items():
            key = name.replace("_", ".")
            try:
                raw = get(key)
            except KeyError:
                continue
            if raw is None:
                continue
            values[name] = conv(raw)
        return cls(**values)


def _opt_str(v: Any) -> Optional[str]:
    s = str(v).strip()
    return s or None


_FIELDS: dict[str, Callable[[Any], Any]] = {
    "replica_lag_time_max_ms": int,
    "replica_fetch_wait_max_ms": int,
    "replica_fetch_min_bytes": int,
    "replica_fetch_max_bytes": int,
    "replica_fetch_response_max_bytes": int,
    "replica_fetch_backoff_ms": int,
    "replica_socket_timeout_ms": int,
    "num_replica_fetchers": int,
    "replica_high_watermark_checkpoint_interval_ms": int,
    "replica_selector_class": _opt_str,
    "broker_rack": _opt_str,
    "inter_broker_protocol_version": lambda v: str(v).strip(),
}

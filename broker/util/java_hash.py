"""Java's String.hashCode and Kafka's Utils.abs, and with them which ``__consumer_offsets`` (or
``__transaction_state``) partition coordinates a group (or transactional id). Shared by the coordinators, the
replica layer and the config layer (Java HashMap iteration order), so it lives in util.

Kafka uses ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``; Java's
``String.hashCode`` runs over UTF-16 code units with int32 overflow, and ``Utils.abs`` is ``Math.abs``
except that Integer.MIN_VALUE maps to 0 (not ``x & 0x7fffffff``, which is ``Utils.toPositive``). Python's salted ``hash()`` must never be used here.
"""
from __future__ import annotations

import functools


def java_string_hash_code(s: str) -> int:
    """Java ``String.hashCode()`` of ``s`` as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: non-negative, with Integer.MIN_VALUE mapped to 0."""
    return 0 if n == -(1 << 31) else abs(n)


@functools.lru_cache(maxsize=65536)
def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition whose leader coordinates ``group_id`` (cached: every group request
    routes through it, and the hash walks the id one UTF-16 unit at a time)."""
    return kafka_abs(java_string_hash_code(group_id)) % num_partitions

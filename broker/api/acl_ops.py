"""Authorized-operation bit sets reported when a client asks for them (no authorizer: all allowed).

Values are Kafka's AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
"""
from __future__ import annotations

#: Kafka's "not requested" sentinel (Integer.MIN_VALUE)
NOT_REQUESTED = -2147483648


def _bits(*ops: int) -> int:
    v = 0
    for op in ops:
        v |= 1 << op
    return v


TOPIC_OPERATIONS = _bits(3, 4, 5, 6, 7, 8, 10, 11)
CLUSTER_OPERATIONS = _bits(5, 7, 8, 9, 10, 11, 12)
GROUP_OPERATIONS = _bits(3, 6, 8)

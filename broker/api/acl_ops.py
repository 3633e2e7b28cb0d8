"""Authorized-operation bit sets reported when a client asks for them (no authorizer: all supported ones).

Values are Kafka's AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12, CREATE_TOKENS 13,
DESCRIBE_TOKENS 14. Bit ``code`` is set for each allowed operation (Kafka's Utils.to32BitField).
"""
from __future__ import annotations

from typing import Dict, Iterable, Tuple

from broker.security.acl import AclOperation as Op, ResourceType

#: Kafka's "not requested" sentinel (Integer.MIN_VALUE)
NOT_REQUESTED = -2147483648

#: The operations each resource type supports (Kafka's AclEntry.supportedOperations), in Kafka's order.
SUPPORTED_OPERATIONS: Dict[ResourceType, Tuple[Op, ...]] = {
    ResourceType.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
                         Op.ALTER_CONFIGS),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE),
    ResourceType.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
                           Op.ALTER, Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}


def bits(ops: Iterable[int]) -> int:
    """The 32-bit field with bit ``code`` set for each operation."""
    v = 0
    for op in ops:
        v |= 1 << int(op)
    return v


TOPIC_OPERATIONS = bits(SUPPORTED_OPERATIONS[ResourceType.TOPIC])
CLUSTER_OPERATIONS = bits(SUPPORTED_OPERATIONS[ResourceType.CLUSTER])
GROUP_OPERATIONS = bits(SUPPORTED_OPERATIONS[ResourceType.GROUP])


def all_operations(resource_type: ResourceType) -> int:
    """Every supported operation of the resource type: what a broker without authorizer reports."""
    return bits(SUPPORTED_OPERATIONS.get(resource_type, ()))

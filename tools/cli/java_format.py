"""How Kafka's Java tools render values, where their output depends on Java itself.

- Topic ids print as Kafka's ``Uuid.toString``: URL-safe base64 without padding (librdkafka prints standard
  base64, with ``/`` and ``+``).
- Several tools print the entries of a ``java.util.HashMap`` (a topic's configs in ``kafka-topics --describe``,
  for one): their order is the map's bucket order, which ``hashmap_order`` reproduces from ``String.hashCode``.
- Errors print as ``<Java exception class>: <message>``; ``exception_line`` gives Kafka's class name and default
  message for an error code (the broker's own message wins when it sent one).
"""
from __future__ import annotations

import base64
import datetime as _dt
import uuid as _uuid
from typing import Any, Iterable, List, Optional, Sequence, TypeVar

__all__ = ["uuid_text", "java_string_hash", "topic_partition_hash", "hashmap_order", "exception_name", "exception_line",
           "iso_timestamp"]

T = TypeVar("T")


def uuid_text(value: Any) -> str:
    """Kafka's Uuid.toString of a ``uuid.UUID``, 16 bytes, or a confluent-kafka ``Uuid``."""
    if isinstance(value, _uuid.UUID):
        raw = value.bytes
    elif isinstance(value, (bytes, bytearray)):
        raw = bytes(value)
    elif hasattr(value, "get_most_significant_bits"):
        raw = (value.get_most_significant_bits() & (2 ** 64 - 1)).to_bytes(8, "big") + \
              (value.get_least_significant_bits() & (2 ** 64 - 1)).to_bytes(8, "big")
    else:  # already text (librdkafka's base64): make it URL-safe
        return str(value).replace("+", "-").replace("/", "_").rstrip("=")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def java_string_hash(s: str) -> int:
    """java.lang.String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    for unit in _utf16_units(s):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _utf16_units(s: str) -> Iterable[int]:
    for ch in s:
        cp = ord(ch)
        if cp < 0x10000:
            yield cp
        else:
            cp -= 0x10000
            yield 0xD800 + (cp >> 10)
            yield 0xDC00 + (cp & 0x3FF)


def topic_partition_hash(topic: str, partition: int) -> int:
    """org.apache.kafka.common.TopicPartition.hashCode."""
    h = 31 * (31 + partition) + java_string_hash(topic)
    h &= 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def hashmap_order(items: Sequence[T], key: Any = None, initial_capacity: int = 16, hash_fn: Any = None) -> List[T]:
    """``items`` in the iteration order of a java.util.HashMap (``new HashMap<>(initial_capacity)``, load factor
    0.75) into which they were put in the given order, keyed by ``key(item)`` (default: the item, a string) whose
    Java hashCode is ``hash_fn(key)`` (default: String.hashCode)."""
    keyf = key or (lambda x: x)
    hashf = hash_fn or java_string_hash
    capacity = 1
    while capacity < initial_capacity:  # HashMap.tableSizeFor
        capacity *= 2
    while len(items) > capacity * 0.75:
        capacity *= 2

    def bucket(k: Any) -> int:
        h = hashf(k) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    indexed = [(bucket(keyf(item)), i, item) for i, item in enumerate(items)]
    return [item for _, _, item in sorted(indexed, key=lambda t: (t[0], t[1]))]


#: error code -> (Java exception class, Kafka's default message), for the errors the tools meet
_EXCEPTIONS = {
    -1: ("UnknownServerException", "The server experienced an unexpected error when processing the request."),
    1: ("OffsetOutOfRangeException", "The requested offset is not within the range of offsets maintained by the "
                                     "server."),
    3: ("UnknownTopicOrPartitionException", "This server does not host this topic-partition."),
    5: ("LeaderNotAvailableException", "There is no leader for this topic-partition as we are in the middle of a "
                                       "leadership election."),
    6: ("NotLeaderOrFollowerException", "For requests intended only for the leader, this error indicates that the "
                                        "broker is not the current leader. For requests intended for any replica, "
                                        "this error indicates that the broker is not a replica of the topic "
                                        "partition."),
    7: ("TimeoutException", "The request timed out."),
    10: ("RecordTooLargeException", "The request included a message larger than the max message size the server "
                                    "will accept."),
    15: ("CoordinatorNotAvailableException", "The coordinator is not available."),
    16: ("NotCoordinatorException", "This is not the correct coordinator."),
    17: ("InvalidTopicException", "The request attempted to perform an operation on an invalid topic."),
    18: ("RecordBatchTooLargeException", "The request included message batch larger than the configured segment "
                                         "size on the server."),
    19: ("NotEnoughReplicasException", "Messages are rejected since there are fewer in-sync replicas than required."),
    20: ("NotEnoughReplicasAfterAppendException", "Messages are written to the log, but to fewer in-sync replicas "
                                                  "than required."),
    24: ("InvalidGroupIdException", "The configured groupId is invalid."),
    29: ("TopicAuthorizationException", "Topic authorization failed."),
    30: ("GroupAuthorizationException", "Group authorization failed."),
    31: ("ClusterAuthorizationException", "Cluster authorization failed."),
    35: ("UnsupportedVersionException", "The version of API is not supported."),
    36: ("TopicExistsException", "Topic with this name already exists."),
    37: ("InvalidPartitionsException", "Number of partitions is below 1."),
    38: ("InvalidReplicationFactorException", "Replication factor is below 1 or larger than the number of available "
                                              "brokers."),
    39: ("InvalidReplicaAssignmentException", "Replica assignment is invalid."),
    40: ("InvalidConfigurationException", "Configuration is invalid."),
    41: ("NotControllerException", "This is not the correct controller for this cluster."),
    42: ("InvalidRequestException", "This most likely occurs because of a request being malformed by the client "
                                    "library or the message was sent to an incompatible broker. See the broker "
                                    "logs for more details."),
    44: ("PolicyViolationException", "Request parameters do not satisfy the configured policy."),
    58: ("SaslAuthenticationException", "SASL Authentication failed."),
    68: ("GroupNotEmptyException", "The group is not empty."),
    69: ("GroupIdNotFoundException", "The group id does not exist."),
    86: ("GroupSubscribedToTopicException", "Deleting offsets of a topic is forbidden while the consumer group is "
                                            "actively subscribed to it."),
    87: ("InvalidRecordException", "This record has failed the validation on broker and hence will be rejected."),
    89: ("ThrottlingQuotaExceededException", "The throttling quota has been exceeded."),
    60: ("ReassignmentInProgressException", "A partition reassignment is in progress."),
    80: ("PreferredLeaderNotAvailableException", "The preferred leader was not available."),
    83: ("EligibleLeadersNotAvailableException", "Eligible topic partition leaders are not available."),
    84: ("ElectionNotNeededException", "Leader election not needed for topic partition."),
    85: ("NoReassignmentInProgressException", "No partition reassignment is in progress."),
}


def exception_name(code: int) -> str:
    """The fully qualified Java exception class Kafka's clients raise for an error code."""
    name = _EXCEPTIONS.get(code, ("UnknownServerException", ""))[0]
    return f"org.apache.kafka.common.errors.{name}"


def exception_line(code: int, message: Optional[str] = None, qualified: bool = True) -> str:
    """``<exception class>: <message>`` as Java's Throwable.toString prints it."""
    name, default = _EXCEPTIONS.get(code, ("UnknownServerException", f"Unexpected error code {code}."))
    cls = f"org.apache.kafka.common.errors.{name}" if qualified else name
    return f"{cls}: {default if message is None else message}"


def iso_timestamp(ms: int) -> str:
    """Kafka's ``yyyy-MM-dd'T'HH:mm:ss.SSSXXX`` in the local time zone."""
    t = _dt.datetime.fromtimestamp(ms / 1000.0).astimezone()
    text = t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}"
    off = t.utcoffset() or _dt.timedelta(0)
    if off == _dt.timedelta(0):
        return text + "Z"
    total = int(off.total_seconds() // 60)
    sign = "+" if total >= 0 else "-"
    total = abs(total)
    return text + f"{sign}{total // 60:02d}:{total % 60:02d}"

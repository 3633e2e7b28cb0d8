"""Keys and values of ``__transaction_state`` records, exactly as Kafka 3.9 writes them (transaction.version 0).

Byte layout (all integers big-endian; a string is int16 length + UTF-8):

  key   = int16 key version (0), then TransactionLogKey v0: transactional_id string
  value = int16 value version (0), then TransactionLogValue v0 (null value = tombstone):
          producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
          transaction_status int8 (the state id, see ``metadata``),
          transaction_partitions nullable array (int32 count, -1 = null) of
              (topic string, partition_ids array of int32),
          transaction_last_update_timestamp_ms int64, transaction_start_timestamp_ms int64

Kafka writes a null partition array in state Empty and the partitions grouped by topic otherwise.
Readers accept values v0 and v1 (v1 is flexible: compact strings and tagged fields); a key of another
version is not a transaction record (Kafka skips it with a warning).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple

from broker.protocol.api import data_codec

TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0

TopicPartition = Tuple[str, int]
Record = Tuple[bytes, Optional[bytes]]

_I16 = struct.Struct(">h")


@dataclass(frozen=True)
class TxnLogValue:
    """A decoded TransactionLogValue (any version)."""
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    partitions: Tuple[TopicPartition, ...]
    last_update_timestamp_ms: int
    start_timestamp_ms: int


def key_bytes(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + data_codec("TransactionLogKey", KEY_VERSION).encode(
        {"transactional_id": transactional_id})


def value_bytes(producer_id: int, producer_epoch: int, timeout_ms: int, status: int,
                partitions: Optional[Iterable[TopicPartition]], last_update_ms: int, start_ms: int) -> bytes:
    """``partitions`` None writes the null array Kafka writes for state Empty."""
    grouped: Optional[List[dict]] = None
    if partitions is not None:
        by_topic: Dict[str, List[int]] = {}
        for topic, p in sorted(partitions):
            by_topic.setdefault(topic, []).append(p)
        grouped = [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()]
    return _I16.pack(VALUE_VERSION) + data_codec("TransactionLogValue", VALUE_VERSION).encode({
        "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_timeout_ms": timeout_ms,
        "transaction_status": status, "transaction_partitions": grouped,
        "transaction_last_update_timestamp_ms": last_update_ms, "transaction_start_timestamp_ms": start_ms})


def decode_key(key: bytes) -> Optional[str]:
    """The transactional id of a record key, or None when the key is not a version-0 transaction key."""
    version = _I16.unpack_from(key, 0)[0]
    if version != KEY_VERSION:
        return None
    m, _ = data_codec("TransactionLogKey", KEY_VERSION).decode(key, 2)
    return str(m.transactional_id)


def decode_value(value: Optional[bytes]) -> Optional[TxnLogValue]:
    """None for a tombstone; raises ValueError for an unknown value version."""
    if value is None:
        return None
    version = _I16.unpack_from(value, 0)[0]
    try:
        codec = data_codec("TransactionLogValue", version)
    except KeyError:
        raise ValueError(f"unknown __transaction_state value version {version}") from None
    m, _ = codec.decode(value, 2)
    parts = tuple((ps.topic, int(p)) for ps in (m.transaction_partitions or ()) for p in ps.partition_ids)
    return TxnLogValue(int(m.producer_id), int(m.producer_epoch), int(m.transaction_timeout_ms),
                       int(m.transaction_status), parts, int(m.transaction_last_update_timestamp_ms),
                       int(m.transaction_start_timestamp_ms))

"""``__transaction_state`` records byte for byte against hand-built bytes (Kafka's TransactionLogKey/Value)."""
from __future__ import annotations

import struct

import pytest

from broker.coordinator.transaction import records as rec


def _str(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_key_is_version_0_then_the_transactional_id() -> None:
    assert rec.key_bytes("tx") == b"\x00\x00" + b"\x00\x02tx"
    assert rec.decode_key(b"\x00\x00\x00\x02tx") == "tx"


def test_key_of_another_version_is_not_a_transaction_key() -> None:
    assert rec.decode_key(b"\x00\x01\x00\x02tx") is None


def test_ongoing_value_groups_partitions_by_topic() -> None:
    expected = (b"\x00\x00"                                   # value version 0
                + struct.pack(">qhib", 1000, 3, 60000, 1)       # producer id, epoch, timeout, status Ongoing
                + struct.pack(">i", 2)                          # two topics
                + _str("a") + struct.pack(">iii", 2, 0, 2)
                + _str("b") + struct.pack(">ii", 1, 1)
                + struct.pack(">qq", 1700000000000, 1699999999000))
    got = rec.value_bytes(1000, 3, 60000, 1, [("b", 1), ("a", 2), ("a", 0)], 1700000000000, 1699999999000)
    assert got == expected
    v = rec.decode_value(got)
    assert v == rec.TxnLogValue(1000, 3, 60000, 1, (("a", 0), ("a", 2), ("b", 1)), 1700000000000, 1699999999000)


def test_empty_state_writes_a_null_partition_array() -> None:
    got = rec.value_bytes(7, 0, 1000, 0, None, 5, -1)
    assert got == b"\x00\x00" + struct.pack(">qhib", 7, 0, 1000, 0) + b"\xff\xff\xff\xff" + struct.pack(">qq", 5, -1)
    assert rec.decode_value(got) == rec.TxnLogValue(7, 0, 1000, 0, (), 5, -1)


def test_tombstone_decodes_to_none() -> None:
    assert rec.decode_value(None) is None


def test_flexible_value_version_1_is_read() -> None:
    """What a Kafka 4 coordinator at transaction.version 2 writes: compact arrays/strings and tagged fields."""
    value = (b"\x00\x01" + struct.pack(">qhib", 9, 2, 500, 4)
             + bytes([2]) + bytes([2]) + b"t" + bytes([2]) + struct.pack(">i", 3) + b"\x00"  # [("t",[3])] + tags
             + struct.pack(">qq", 11, 10)
             + bytes([1]) + bytes([0, 8]) + struct.pack(">q", 4))  # one unknown tagged field (tag 0, 8 bytes)
    assert rec.decode_value(value) == rec.TxnLogValue(9, 2, 500, 4, (("t", 3),), 11, 10)


def test_unknown_value_version_is_refused() -> None:
    with pytest.raises(ValueError):
        rec.decode_value(b"\x00\x07" + bytes(40))

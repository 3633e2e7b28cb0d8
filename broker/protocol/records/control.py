"""End-transaction markers: the control records that commit or abort a transaction (Kafka's EndTransactionMarker).

A marker is a batch with attributes control + transactional, the transaction's producer id and epoch, base
sequence -1, and one record::

    key    version int16 (0) | type int16   (0 = ABORT, 1 = COMMIT; Kafka's ControlRecordType)
    value  version int16 (0) | coordinator epoch int32

Readers accept a longer key or value (a newer version), as Kafka does.
"""
from __future__ import annotations

import struct
import time
from typing import NamedTuple, Optional, Sequence

from .builder import build_batch

ABORT = 0
COMMIT = 1
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class EndTxnMarker(NamedTuple):
    committed: bool
    coordinator_epoch: int


def end_txn_marker_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int, committed: bool,
                         timestamp_ms: Optional[int] = None) -> bytes:
    """The one-record control batch a partition leader appends for WriteTxnMarkers (offset 0, no leader epoch)."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    key = _KEY.pack(CONTROL_KEY_VERSION, COMMIT if committed else ABORT)
    value = _VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    return build_batch([(key, value, [], ts)], producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=-1, is_transactional=True, is_control=True)


def control_type(key: Optional[bytes]) -> int:
    """The control record type in a control record's key; -1 when the key is missing or too short."""
    if key is None or len(key) < _KEY.size:
        return -1
    return int(_KEY.unpack_from(key, 0)[1])


def parse_end_txn_marker(records: Sequence[object]) -> Optional[EndTxnMarker]:
    """The marker of a control batch's records; None for an empty batch (cleaned) or another control type."""
    if not records:
        return None
    rec = records[0]
    ctype = control_type(getattr(rec, "key", None))
    if ctype not in (ABORT, COMMIT):
        return None
    value = getattr(rec, "value", None)
    epoch = -1
    if value is not None and len(value) >= _VALUE.size:
        epoch = int(_VALUE.unpack_from(value, 0)[1])
    return EndTxnMarker(ctype == COMMIT, epoch)

"""What an append and a read of one partition give back (Kafka's LogAppendResult / LogReadResult): made by Partition,
the gate of both, and carried by the ReplicaManager to the API handlers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple, Union

from broker.util.file_slice import FileSlice

__all__ = ["ProduceResult", "ReadResult"]


@dataclass(slots=True)
class ProduceResult:
    """One partition's append outcome (slots and no per-result list: a Produce may carry thousands)."""

    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: Sequence[Tuple[int, Optional[str]]] = ()
    error_message: Optional[str] = None
    last_offset: int = -1
    #: Kafka's hasCustomErrorMessage: the message goes on the wire (record validation, KIP-890 verification)
    custom_message: bool = False


@dataclass
class ReadResult:
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    #: the log's read (a FileSlice), or bytes once down-converted for a Fetch v0-v3 client
    records: Union[FileSlice, bytes, bytearray, None] = None
    size: int = 0
    log_end_offset: int = -1
    #: (epoch, end offset) when the fetcher's last fetched epoch diverges from this log (Fetch v12+)
    diverging_epoch: Optional[Tuple[int, int]] = None
    #: KIP-392: the replica the consumer should fetch from instead (-1 = none)
    preferred_read_replica: int = -1
    #: read_committed reads: (producer id, first offset) of the aborted transactions overlapping the data
    #: (None for other reads: Kafka's response then carries null)
    aborted_transactions: Optional[List[Tuple[int, int]]] = None
    #: KIP-405: a consumer's offset only remote storage holds: (fetch offset, max bytes, min one message,
    #: read_committed) for the ReplicaManager's remote read (Kafka's RemoteStorageFetchInfo); no records until then
    remote_fetch: Optional[Tuple[int, int, bool, bool]] = None

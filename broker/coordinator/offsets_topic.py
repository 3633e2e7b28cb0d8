"""Reading and writing ``__consumer_offsets`` and ``__transaction_state`` partitions: the coordinator log that
:class:`~broker.coordinator.runtime.CoordinatorRuntime` loads from and appends to.

The coordinator produces its records (offset commits, group metadata, tombstones) here as
ordinary record batches, appended as leader with acks=all, and replays a partition from its
log start offset when it becomes the partition's leader. Keys and values are the already
encoded bytes of Kafka's OffsetCommitKey/Value and GroupMetadataKey/Value.

Loading (reading a whole partition and replaying it) runs on the coordinator's own loader
thread, never on the disk I/O workers, so a large load cannot delay appends or fetches. It streams:
the log is read ``offsets.load.buffer.size`` bytes at a time (Kafka's loadBufferSize) and each batch is
handed to the replay at once, so a partition of a million records is never held in memory as a list.

Coordinator batches (every offset commit is one) are built here directly: one timestamp for all records,
no headers, the layout of ``broker.protocol.records.builder.build_batch`` (a unit test compares the two).

A load pauses CPython's automatic garbage collection (process-wide, counted across concurrent loads, the
previous setting restored after): replaying a million records allocates a few objects per record, and the
collector would otherwise run dozens of full collections over the whole heap while the state grows (measured:
60 % of a 1 M-record load's CPU). The loaded offsets are tuples of atomic values, which the first collection
after the load stops tracking.
"""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from broker.accel import varint as _varint
from broker.errors import KafkaError, error_for_code
from broker.protocol.records.batch_info import TRANSACTIONAL_MASK
from broker.protocol.records.builder import encode_batch
from broker.util.clock import SYSTEM_CLOCK, Clock
from broker.util.executor import NamedExecutor

if TYPE_CHECKING:
    from broker.protocol.records.batch_info import Record
    from broker.replica.manager import ReplicaManager
    from broker.storage.partition_log import PartitionLog

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
#: origin of coordinator appends: no client sequence checks (Kafka's AppendOrigin.COORDINATOR)
_COORDINATOR_ORIGIN = False


#: Kafka's offsets.load.buffer.size default
DEFAULT_LOAD_BUFFER_BYTES = 5 * 1024 * 1024

#: on_batch(records, producer_id, marker): a batch's records (objects with offset, key, value), the producer id of
#: a transactional batch (else -1), and for a control batch its marker (True COMMIT, False ABORT; records is then
#: the one control record)
BatchConsumer = Callable[[Sequence["Record"], int, Optional[bool]], None]



def coordinator_batch(records: Sequence[Tuple[bytes, Optional[bytes]]], timestamp_ms: int, producer_id: int = -1,
                      producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False) -> bytearray:
    """A magic-2 batch of ``(key, value)`` records (value None: tombstone), all at ``timestamp_ms``, uncompressed."""
    enc = _varint.encode_varint
    parts: List[bytes] = []
    for i, (key, value) in enumerate(records):
        body = b"".join((b"\x00\x00", enc(i), enc(len(key)), key,
                         enc(-1) if value is None else enc(len(value)), value or b"", b"\x00"))
        parts.append(enc(len(body)))
        parts.append(body)
    n = len(records)
    return bytearray(encode_batch(b"".join(parts), record_count=n, last_offset_delta=n - 1,
                                  attributes=TRANSACTIONAL_MASK if transactional else 0, base_timestamp=timestamp_ms,
                                  max_timestamp=timestamp_ms, producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=base_sequence))


class LoadedRecord(NamedTuple):
    """One record or transaction marker of a loaded partition."""

    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    producer_id: int = -1          # the producer of a transactional batch, else -1
    marker: Optional[bool] = None  # a control batch: True COMMIT, False ABORT


class OffsetsTopicIO:
    def __init__(self, replica_manager: "ReplicaManager", loader: NamedExecutor,
                 topic: str = GROUP_METADATA_TOPIC_NAME, required_acks: int = -1, commit_timeout_ms: int = 5000,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.replica_manager = replica_manager
        #: the batches' timestamps (wall_ms, as Kafka's time.milliseconds() in the coordinator's appends)
        self.clock = clock
        self.loader = loader
        self.topic = topic
        #: offsets.commit.required.acks / offsets.commit.timeout.ms: a commit is answered once replicated
        self.required_acks = required_acks
        self.commit_timeout_ms = commit_timeout_ms

    async def append(self, partition: int, records: Sequence[Tuple[bytes, Optional[bytes]]],
                     base_sequence: int = -1) -> int:
        """Append ``(key, value)`` records (value None = tombstone); return the last offset written.

        ``base_sequence`` is the batch header's (no producer id either way): Kafka writes offset commits at 0.

        Raises the KafkaError of the append's error code (e.g. NOT_LEADER_OR_FOLLOWER), which the
        coordinator maps as Kafka does (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE...).
        """
        batch = coordinator_batch(records, self.clock.wall_ms(), base_sequence=base_sequence)
        tp = (self.topic, partition)
        result = (await self.replica_manager.append_records(self.required_acks, {tp: batch},
                                                            timeout_ms=self.commit_timeout_ms))[tp]
        if result.error_code:
            raise error_for_code(result.error_code)(result.error_message or "")
        return result.base_offset + len(records) - 1

    def start_verification(self, partition: int, producer_id: int, producer_epoch: int) -> Optional[object]:
        """KIP-890: the guard a transactional append to ``partition`` needs, None if it needs no verification."""
        return self.replica_manager.start_transaction_verification((self.topic, partition), producer_id,
                                                                   producer_epoch)

    async def append_transactional(self, partition: int, records: Sequence[Tuple[bytes, Optional[bytes]]],
                                   producer_id: int, producer_epoch: int, guard: Optional[object] = None) -> int:
        """Append ``records`` as one transactional batch of the producer (TxnOffsetCommit); the last offset.

        Built at sequence 0 like Kafka's, and appended with the coordinator's origin, which skips the
        client sequence check but keeps the producer epoch check (a fenced producer is refused).
        """
        batch = coordinator_batch(records, self.clock.wall_ms(), producer_id, producer_epoch, 0, True)
        tp = (self.topic, partition)
        result = (await self.replica_manager.append_records(self.required_acks, {tp: batch},
                                                            timeout_ms=self.commit_timeout_ms,
                                                            is_from_client=_COORDINATOR_ORIGIN,
                                                            verification_guards={tp: guard} if guard else None))[tp]
        if result.error_code:
            raise error_for_code(result.error_code)(result.error_message or "")
        return result.base_offset + len(records) - 1

    async def load(self, partition: int, on_batch: BatchConsumer, buffer_bytes: int = DEFAULT_LOAD_BUFFER_BYTES,
                   on_end: Optional[Callable[[], None]] = None) -> Tuple[int, int]:
        """Hand every batch of the partition up to its log end to ``on_batch``, then call ``on_end`` (both on the
        loader thread, in log order, with the garbage collector paused); (records read, the end offset read to)."""
        p = self.replica_manager.get_partition((self.topic, partition))
        if p is None:
            raise error_for_code(3)(f"{self.topic}-{partition} is not hosted here")
        return await self.loader.run(_load, p.log, on_batch, buffer_bytes, on_end)

    def is_leader(self, partition: int) -> bool:
        p = self.replica_manager.get_partition((self.topic, partition))
        return p is not None and p.leader_id == self.replica_manager.broker_id


_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Automatic garbage collection off while at least one caller is inside (see the module docstring)."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def _load(log: PartitionLog, on_batch: BatchConsumer, buffer_bytes: int, on_end: Optional[Callable[[], None]]
          ) -> Tuple[int, int]:
    with gc_paused():
        out = read_batches(log, on_batch, buffer_bytes)
        if on_end is not None:
            on_end()
        return out


def read_batches(log: PartitionLog, on_batch: BatchConsumer, buffer_bytes: int) -> Tuple[int, int]:
    """Kafka's doLoadGroupsAndOffsets read loop: from the log start offset up to the log end, ``buffer_bytes``
    at a time (at least one whole batch), each batch to ``on_batch``; (records read, the end offset)."""
    from broker.accel import record_batch
    from broker.storage.cleaner_batch import iter_stored_records  # compacted batches have offset gaps
    offset = log.log_start_offset
    # Up to the log end, as Kafka's doLoadGroupsAndOffsets (FetchIsolation.LOG_END): a follower that just became
    # leader may not have learnt the high watermark yet, but every record in its log is the partition's now.
    end = log.log_end_offset
    n = 0
    while offset < end:
        info = log.read(offset, buffer_bytes, end, True)
        recs = getattr(info, "records", None)
        if recs is None or len(recs) == 0:
            break
        data = recs.read() if hasattr(recs, "read") else bytes(recs)
        infos, _ = record_batch.scan_batches(data)
        if not infos:
            break
        for bi in infos:
            records = iter_stored_records(data[bi.position:bi.position + bi.size])
            if bi.base_offset < offset:  # the read starts inside this batch (after a compaction)
                records = [r for r in records if r.offset >= offset]
            if bi.is_control:
                for r in records:
                    if r.key is not None and len(r.key) >= 4:
                        # EndTransactionMarker key: version int16, type int16 (0 ABORT, 1 COMMIT)
                        on_batch((r,), bi.producer_id, int.from_bytes(bytes(r.key[2:4]), "big") == 1)
            else:
                on_batch(records, bi.producer_id if bi.is_transactional else -1, None)
                n += len(records)
            offset = max(offset, bi.base_offset + bi.last_offset_delta + 1)
    return n, end


__all__ = ["OffsetsTopicIO", "GROUP_METADATA_TOPIC_NAME", "KafkaError", "LoadedRecord"]

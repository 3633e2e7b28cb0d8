"""Reading and writing ``__consumer_offsets`` partitions for the group coordinator.

The coordinator produces its records (offset commits, group metadata, tombstones) here as
ordinary record batches, appended as leader with acks=all, and replays a partition from its
log start offset when it becomes the partition's leader. Keys and values are the already
encoded bytes of Kafka's OffsetCommitKey/Value and GroupMetadataKey/Value.

Loading (reading a whole partition and replaying it) runs on the coordinator's own loader
thread, never on the disk I/O workers, so a large load cannot delay appends or fetches.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, List, NamedTuple, Optional, Sequence, Tuple

from broker.errors import KafkaError, error_for_code
from broker.protocol.records.builder import build_batch
from broker.util.executor import NamedExecutor

if TYPE_CHECKING:
    from broker.replica.manager import ReplicaManager

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
#: origin of coordinator appends: no client sequence checks (Kafka's AppendOrigin.COORDINATOR)
_COORDINATOR_ORIGIN = False


class LoadedRecord(NamedTuple):
    """One record or transaction marker of a loaded partition."""

    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    producer_id: int = -1          # the producer of a transactional batch, else -1
    marker: Optional[bool] = None  # a control batch: True COMMIT, False ABORT


class OffsetsTopicIO:
    def __init__(self, replica_manager: "ReplicaManager", loader: NamedExecutor,
                 topic: str = GROUP_METADATA_TOPIC_NAME, required_acks: int = -1, commit_timeout_ms: int = 5000) -> None:
        self.replica_manager = replica_manager
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
        now = int(time.time() * 1000)
        batch = bytearray(build_batch([(k, v, [], now) for k, v in records], base_sequence=base_sequence))
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
        now = int(time.time() * 1000)
        batch = bytearray(build_batch([(k, v, [], now) for k, v in records], producer_id=producer_id,
                                      producer_epoch=producer_epoch, base_sequence=0, is_transactional=True))
        tp = (self.topic, partition)
        result = (await self.replica_manager.append_records(self.required_acks, {tp: batch},
                                                            timeout_ms=self.commit_timeout_ms,
                                                            is_from_client=_COORDINATOR_ORIGIN,
                                                            verification_guards={tp: guard} if guard else None))[tp]
        if result.error_code:
            raise error_for_code(result.error_code)(result.error_message or "")
        return result.base_offset + len(records) - 1

    async def read_all_with_markers(self, partition: int) -> Tuple[List[LoadedRecord], int]:
        """Every record and transaction marker up to the log end; (records, the log end offset read to)."""
        p = self.replica_manager.get_partition((self.topic, partition))
        if p is None:
            raise error_for_code(3)(f"{self.topic}-{partition} is not hosted here")
        return await self.loader.run(_read_with_markers, p.log)  # type: ignore[no-any-return]

    async def read_all(self, partition: int) -> List[Tuple[int, Optional[bytes], Optional[bytes]]]:
        """Every record of the partition up to its log end offset, as (offset, key, value)."""
        p = self.replica_manager.get_partition((self.topic, partition))
        if p is None:
            raise error_for_code(3)(f"{self.topic}-{partition} is not hosted here")
        return await self.loader.run(_read_all, p.log)

    async def run_io(self, fn: Any, *args: Any) -> Any:
        """Run ``fn`` on the loader thread (rebuilding state off the event loop and off the I/O workers)."""
        return await self.loader.run(fn, *args)

    def is_leader(self, partition: int) -> bool:
        p = self.replica_manager.get_partition((self.topic, partition))
        return p is not None and p.leader_id == self.replica_manager.broker_id


def _read_all(log: Any) -> List[Tuple[int, Optional[bytes], Optional[bytes]]]:
    records, _end = _read_with_markers(log)
    return [(r.offset, r.key, r.value) for r in records if r.marker is None]


def _read_with_markers(log: Any) -> Tuple[List[LoadedRecord], int]:
    from broker.accel import record_batch
    from broker.storage.cleaner_batch import iter_stored_records  # compacted batches have offset gaps
    out: List[LoadedRecord] = []
    offset = log.log_start_offset
    # Up to the log end, as Kafka's doLoadGroupsAndOffsets (FetchIsolation.LOG_END): a follower that just became
    # leader may not have learnt the high watermark yet, but every record in its log is the partition's now.
    end = log.log_end_offset
    while offset < end:
        info = log.read(offset, 1 << 20, end, True)
        recs = getattr(info, "records", None)
        if recs is None or len(recs) == 0:
            break
        data = recs.read() if hasattr(recs, "read") else bytes(recs)
        infos, _ = record_batch.scan_batches(data)
        if not infos:
            break
        for bi in infos:
            batch = data[bi.position:bi.position + bi.size]
            if bi.is_control:
                for r in iter_stored_records(batch):
                    if r.offset >= offset and r.key is not None and len(r.key) >= 4:
                        # EndTransactionMarker key: version int16, type int16 (0 ABORT, 1 COMMIT)
                        out.append(LoadedRecord(r.offset, None, None, bi.producer_id,
                                                int.from_bytes(bytes(r.key[2:4]), "big") == 1))
            else:
                pid = bi.producer_id if bi.is_transactional else -1
                for r in iter_stored_records(batch):
                    if r.offset >= offset:
                        out.append(LoadedRecord(r.offset, r.key, r.value, pid))
            offset = max(offset, bi.base_offset + bi.last_offset_delta + 1)
    return out, end


__all__ = ["OffsetsTopicIO", "GROUP_METADATA_TOPIC_NAME", "KafkaError", "LoadedRecord"]

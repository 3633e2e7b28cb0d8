"""The MetadataTopicPort of the topic-based RemoteLogMetadataManager over the running broker: ``__remote_log_metadata``
is created as an internal topic (the ``rlmm.config.`` partitions and replication factor, as Kafka's
TopicBasedRemoteLogMetadataManager.createRemoteLogMetadataTopic), appended to with Produce (acks=all) at the leader of
the metadata partition, and read back with Fetch from that leader up to its high watermark: the producer and consumer
Kafka's manager uses, on the broker's own inter-broker channel (the leader may be this broker).

Every method blocks its caller until the event loop has done the work, so it is called only from the
RemoteLogManager's own threads (never from the loop: that would wait for itself).
"""
from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from broker.accel import record_batch
from broker.errors import ErrorCode
from broker.protocol.api import ApiKey
from broker.protocol.records.builder import build_batch
from broker.storage.cleaner_batch import iter_stored_records
from broker.storage.remote.storage_manager import RemoteStorageException
from broker.util.broker_channel import BrokerChannel, BrokerChannelError, BrokerNode
from broker.util.clock import SYSTEM_CLOCK, Clock

logger = logging.getLogger(__name__)

#: (name, partitions, replication factor, configs) -> 0 once the topic exists, else an error code
EnsureTopic = Callable[[str, int, int, Dict[str, str]], Awaitable[int]]
#: (topic, partition) -> the leader's inter-broker address, None while unknown
LeaderLookup = Callable[[str, int], Optional[BrokerNode]]

_RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
              ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
              ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
PRODUCE_VERSION = 9
FETCH_VERSION = 12
FETCH_MAX_BYTES = 1 << 20


class BrokerMetadataTopic:
    """MetadataTopicPort over the broker (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, channel: BrokerChannel, leader_of: LeaderLookup,
                 ensure_topic: EnsureTopic, *, request_timeout_ms: int = 30000, retry_timeout_ms: int = 120000,
                 retry_interval_ms: int = 100, clock: Clock = SYSTEM_CLOCK) -> None:
        """``clock``: its ``mono_ms()`` bounds the retries (retry_timeout_ms), and the interval between two attempts is
        its ``sleep_ms`` on the event loop, which the calling thread (a RemoteLogManager thread) waits for as for any
        call here: a ManualClock's ``advance`` releases it, no real time passes."""
        self._loop = loop
        self._clock = clock
        self._channel = channel
        self._leader_of = leader_of
        self._ensure_topic = ensure_topic
        self.request_timeout_ms = request_timeout_ms
        self.retry_timeout_ms = retry_timeout_ms
        self.retry_interval_ms = retry_interval_ms
        self.num_partitions: Dict[str, int] = {}
        self._closed = False

    def close(self) -> None:
        """Shutdown: calls under way stop retrying."""
        self._closed = True

    def _run(self, coro: Awaitable[Any]) -> Any:
        if threading.current_thread() is threading.main_thread() and self._loop.is_running():
            raise RuntimeError("BrokerMetadataTopic called on the event loop's thread")
        if self._closed or self._loop.is_closed():
            close = getattr(coro, "close", None)
            if close is not None:
                close()
            raise RemoteStorageException("The broker is shutting down")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()  # type: ignore[arg-type]

    def _retry(self, what: str, attempt: Callable[[], Tuple[bool, Any]]) -> Any:
        """Call ``attempt`` until it reports done, every retry interval, for at most the retry timeout."""
        clock = self._clock
        deadline = clock.mono_ms() + self.retry_timeout_ms
        last: Any = None
        while True:
            try:
                done, value = attempt()
            except (BrokerChannelError, asyncio.TimeoutError, OSError) as exc:
                done, value = False, exc
            if done:
                return value
            last = value
            if clock.mono_ms() >= deadline or self._closed:
                raise RemoteStorageException(f"{what} did not succeed within {self.retry_timeout_ms} ms: {last}")
            self._run(clock.sleep_ms(self.retry_interval_ms))

    # ------------------------------------------------------------------ MetadataTopicPort
    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: Mapping[str, str]) -> None:
        def attempt() -> Tuple[bool, Any]:
            code = self._run(self._ensure_topic(name, num_partitions, replication_factor, dict(configs)))
            if code:
                return False, ErrorCode(code).name
            missing = [p for p in range(num_partitions) if self._leader_of(name, p) is None]
            return (not missing), f"no leader yet for {len(missing)} partitions"
        self._retry(f"Creating {name}", attempt)
        self.num_partitions[name] = num_partitions
        logger.info("Topic %s is ready (%d partitions, replication factor %d)", name, num_partitions,
                    replication_factor)

    def append(self, topic: str, partition: int, value: bytes) -> int:
        batch = bytes(build_batch([(None, value, [], self._clock.wall_ms())]))

        def attempt() -> Tuple[bool, Any]:
            node = self._leader_of(topic, partition)
            if node is None:
                return False, "no leader"
            body = {"transactional_id": None, "acks": -1, "timeout_ms": self.request_timeout_ms,
                    "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}
            resp = self._run(self._channel.send(node, ApiKey.PRODUCE, PRODUCE_VERSION, body,
                                                self.request_timeout_ms + 5000))
            pr = resp.responses[0].partition_responses[0]
            if pr.error_code == 0:
                return True, int(pr.base_offset)
            if pr.error_code in _RETRIABLE:
                return False, ErrorCode(pr.error_code).name
            raise RemoteStorageException(f"Producing to {topic}-{partition} failed: {ErrorCode(pr.error_code).name}")
        return int(self._retry(f"Producing to {topic}-{partition}", attempt))

    def read(self, topic: str, partition: int, offset: int) -> Sequence[Tuple[int, bytes]]:
        out: List[Tuple[int, bytes]] = []
        position = [offset]

        def attempt() -> Tuple[bool, Any]:
            node = self._leader_of(topic, partition)
            if node is None:
                return False, "no leader"
            body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": FETCH_MAX_BYTES,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                    "topics": [{"topic": topic, "partitions": [{
                        "partition": partition, "current_leader_epoch": -1, "fetch_offset": position[0],
                        "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": FETCH_MAX_BYTES}]}],
                    "forgotten_topics_data": [], "rack_id": ""}
            resp = self._run(self._channel.send(node, ApiKey.FETCH, FETCH_VERSION, body, self.request_timeout_ms))
            pd = resp.responses[0].partitions[0]
            if pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and position[0] < pd.log_start_offset:
                position[0] = pd.log_start_offset  # retention removed the oldest records (retention.ms set)
                return False, "offset out of range"
            if pd.error_code:
                if pd.error_code in _RETRIABLE:
                    return False, ErrorCode(pd.error_code).name
                raise RemoteStorageException(f"Fetching {topic}-{partition} failed: {ErrorCode(pd.error_code).name}")
            data = bytes(pd.records or b"")
            infos, _ = record_batch.scan_batches(data)
            for bi in infos:
                if bi.is_control:
                    position[0] = max(position[0], bi.base_offset + bi.last_offset_delta + 1)
                    continue
                for r in iter_stored_records(data[bi.position:bi.position + bi.size]):
                    if r.offset >= position[0] and r.value is not None:
                        out.append((r.offset, bytes(r.value)))
                position[0] = max(position[0], bi.base_offset + bi.last_offset_delta + 1)
            return position[0] >= int(pd.high_watermark) or not infos, None
        while True:
            before = position[0]
            self._retry(f"Fetching {topic}-{partition}", attempt)
            if position[0] == before:
                return out

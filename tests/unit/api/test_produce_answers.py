"""The Produce handler's answers on the wire, at every version: successful partitions pre-encoded
(``codec.element_layout``) encode exactly as ``partition_answer``'s dicts do, next to errors and refusals, in the
request's order; acks=0 answers nothing, or closes the connection when a partition failed."""
from __future__ import annotations

import asyncio
import types
from typing import Any, Dict, List, Tuple

import pytest

from broker.api import produce
from broker.api.registry import CLOSE_CONNECTION
from broker.errors import ErrorCode
from broker.protocol import api as proto
from broker.protocol.api import ApiKey
from broker.protocol.records.builder import build_batch
from broker.replica.manager import ProduceResult

BATCH = bytes(build_batch([(b"k", b"v", [], 1_700_000_000_000)]))


class FakeReplicaManager:
    """Answers each partition from ``outcomes`` (default: appended at offset 10 * partition)."""

    def __init__(self, outcomes: Dict[Tuple[str, int], ProduceResult]) -> None:
        self.outcomes = outcomes
        self.appended: List[Tuple[str, int]] = []

    async def append_records(self, acks: int, entries: Dict[Tuple[str, int], Any], timeout_ms: int = 30000,
                             **_kw: Any) -> Dict[Tuple[str, int], ProduceResult]:
        self.appended.extend(entries)
        return {tp: self.outcomes.get(tp) or ProduceResult(0, 10 * tp[1], -1, 3, (), None, 10 * tp[1])
                for tp in entries}


class FakeMetadata:
    def __init__(self, topics: Dict[str, int]) -> None:
        self.topics = {name: types.SimpleNamespace(partitions=dict.fromkeys(range(n))) for name, n in topics.items()}

    def topic(self, name: str) -> Any:
        return self.topics.get(name)


def _request(acks: int, version: int) -> Any:
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": i, "records": BATCH} for i in (2, 0, 1, 5)]},
        {"name": "u", "partition_data": [{"index": 0, "records": BATCH}, {"index": 1, "records": b"short"}]}]}
    frame = memoryview(bytearray(proto.encode_request(ApiKey.PRODUCE, version, 1, "c", body)))[4:]
    _, offset = proto.decode_request_header(frame)
    return proto.decode_request(ApiKey.PRODUCE, version, frame, offset)


@pytest.mark.parametrize("version", range(3, 12))
def test_answers_encode_as_the_dict_answers(version: int) -> None:
    failed = ProduceResult(ErrorCode.CORRUPT_MESSAGE, -1, -1, 7, (), "bad crc", -1)
    rm = FakeReplicaManager({("t", 1): failed})
    ctx = types.SimpleNamespace(api_version=version, listener_name="PLAINTEXT")
    out = asyncio.run(produce.handle(ctx, _request(1, version), replica_manager=rm,  # type: ignore[arg-type]
                                     metadata=FakeMetadata({"t": 3, "u": 2})))  # type: ignore[arg-type]
    ok = lambda i: produce.partition_answer(i, ProduceResult(0, 10 * i, -1, 3, (), None, 10 * i))  # noqa: E731
    refused = lambda i, code: {"index": i, "error_code": code, "base_offset": -1,  # noqa: E731
                               "log_append_time_ms": -1, "log_start_offset": -1, "record_errors": [],
                               "error_message": None}
    expected = {"throttle_time_ms": 0, "responses": [
        {"name": "t", "partition_responses": [ok(2), ok(0), produce.partition_answer(1, failed),
                                              refused(5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]},
        {"name": "u", "partition_responses": [ok(0), refused(1, ErrorCode.CORRUPT_MESSAGE)]}]}
    assert proto.encode_response(ApiKey.PRODUCE, version, 9, out) == \
        proto.encode_response(ApiKey.PRODUCE, version, 9, expected)
    assert sorted(rm.appended) == [("t", 0), ("t", 1), ("t", 2), ("u", 0)]


def test_acks_zero_answers_nothing_or_closes_on_a_failure() -> None:
    ctx = types.SimpleNamespace(api_version=9, listener_name="PLAINTEXT")
    everything = FakeMetadata({"t": 6, "u": 2})
    request = _request(0, 9)
    request.topic_data = request.topic_data[:1]  # t's partitions only: all append
    assert asyncio.run(produce.handle(ctx, request, replica_manager=FakeReplicaManager({}),  # type: ignore
                                      metadata=everything)) is None
    assert asyncio.run(produce.handle(ctx, _request(0, 9), replica_manager=FakeReplicaManager({}),  # type: ignore
                                      metadata=everything)) is CLOSE_CONNECTION  # u-1's records are refused
    failing = FakeReplicaManager({("t", 5): ProduceResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)})
    assert asyncio.run(produce.handle(ctx, request, replica_manager=failing,  # type: ignore[arg-type]
                                      metadata=everything)) is CLOSE_CONNECTION

"""WriteTxnMarkers handler: one answer per producer id, per-partition errors from the replica manager, the
broker's request.timeout.ms, and authorization (ALTER or CLUSTER_ACTION on the cluster, KIP-1037); plus the
Fetch response's aborted_transactions (null unless read_committed)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, Dict, List, Tuple

import pytest

from broker.api import fetch, write_txn_markers
from broker.api.dispatcher import ConnectionContext, RequestContext
from broker.errors import ErrorCode
from broker.protocol import api as proto
from broker.protocol.api import ApiKey
from broker.replica.manager import ReadResult
from broker.security.acl import (CLUSTER_RESOURCE_NAME, AccessControlEntry, AclOperation as Op, AclPermissionType,
                                 PatternType, ResourcePattern, ResourceType as RT)
from broker.security.authorizer import AclCache

from .test_authorization import RecordingAuthz

TP = Tuple[str, int]


class FakeReplicaManager:
    """Records append_txn_markers calls; answers the error given per partition (default 0)."""

    def __init__(self, errors: Dict[TP, int]) -> None:
        self.errors = errors
        self.calls: List[Tuple[int, int, int, bool, List[TP], int]] = []

    async def append_txn_markers(self, pid: int, epoch: int, coordinator_epoch: int, committed: bool,
                                 partitions: List[TP], timeout_ms: int) -> Dict[TP, int]:
        self.calls.append((pid, epoch, coordinator_epoch, committed, list(partitions), timeout_ms))
        return {tp: self.errors.get(tp, 0) for tp in partitions}


class Config:
    def __init__(self, timeout: Any) -> None:
        self.timeout = timeout

    def get(self, key: str) -> Any:
        return self.timeout if key == "request.timeout.ms" else None


def ctx(version: int) -> RequestContext:
    conn = ConnectionContext("c1", "10.0.0.1", 5555, "PLAINTEXT")
    conn.principal = "User:coordinator"
    return RequestContext(conn, SimpleNamespace(api_key=ApiKey.WRITE_TXN_MARKERS, api_version=version,
                                                correlation_id=1, client_id="broker-0"))


def request(version: int, markers: List[dict]) -> Any:
    frame = memoryview(proto.encode_request(ApiKey.WRITE_TXN_MARKERS, version, 1, "broker-0",
                                            {"markers": markers}))[4:]
    _, offset = proto.decode_request_header(frame)
    return proto.decode_request(ApiKey.WRITE_TXN_MARKERS, version, frame, offset)


def marker(pid: int, committed: bool, topics: Dict[str, List[int]], epoch: int = 0, coordinator_epoch: int = 1) -> dict:
    return {"producer_id": pid, "producer_epoch": epoch, "transaction_result": committed,
            "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}


def answers(resp: dict) -> Dict[int, Dict[TP, int]]:
    return {m["producer_id"]: {(t["name"], p["partition_index"]): p["error_code"] for t in m["topics"]
                               for p in t["partitions"]} for m in resp["markers"]}


@pytest.mark.parametrize("version", [0, 1])
def test_each_marker_is_appended_and_answered_per_producer(version: int) -> None:
    rm = FakeReplicaManager({("t", 1): int(ErrorCode.NOT_LEADER_OR_FOLLOWER)})
    req = request(version, [marker(7, True, {"t": [0, 1, 0]}), marker(8, False, {"u": [3]}, coordinator_epoch=4),
                            marker(7, False, {"v": [0]})])
    resp = asyncio.run(write_txn_markers.handle(ctx(version), req, replica_manager=rm, config=Config(1234)))
    proto.encode_response(ApiKey.WRITE_TXN_MARKERS, version, 1, resp)
    assert answers(resp) == {7: {("t", 0): 0, ("t", 1): ErrorCode.NOT_LEADER_OR_FOLLOWER, ("v", 0): 0},
                             8: {("u", 3): 0}}
    assert rm.calls == [(7, 0, 1, True, [("t", 0), ("t", 1)], 1234), (8, 0, 4, False, [("u", 3)], 1234),
                        (7, 0, 1, False, [("v", 0)], 1234)]


def test_default_timeout_and_empty_request() -> None:
    rm = FakeReplicaManager({})
    assert asyncio.run(write_txn_markers.handle(ctx(1), request(1, []), replica_manager=rm,
                                                config=Config(None))) == {"markers": []}
    asyncio.run(write_txn_markers.handle(ctx(1), request(1, [marker(1, True, {"t": [0]})]), replica_manager=rm,
                                         config=Config(None)))
    assert rm.calls[0][-1] == 30000


def _cache_with(op: Op) -> AclCache:
    cache = AclCache()
    cache.add(ResourcePattern(RT.CLUSTER, CLUSTER_RESOURCE_NAME, PatternType.LITERAL),
              [AccessControlEntry("User:coordinator", "*", op, AclPermissionType.ALLOW)])
    return cache


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("granted", [None, Op.CLUSTER_ACTION, Op.ALTER])
def test_authorization_alter_or_cluster_action(version: int, granted: Any) -> None:
    authz = RecordingAuthz(_cache_with(granted) if granted is not None else None)
    rm = FakeReplicaManager({})
    req = request(version, [marker(7, True, {"t": [0, 1]})])
    resp = asyncio.run(write_txn_markers.handle(ctx(version), req, replica_manager=rm, config=Config(100),
                                                authz=authz))
    proto.encode_response(ApiKey.WRITE_TXN_MARKERS, version, 1, resp)
    assert authz.checks[0] == (Op.ALTER, RT.CLUSTER, CLUSTER_RESOURCE_NAME)
    if granted is None:
        assert answers(resp) == {7: {("t", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                     ("t", 1): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}}
        assert rm.calls == [] and (Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_RESOURCE_NAME) in authz.checks
    else:
        assert answers(resp) == {7: {("t", 0): 0, ("t", 1): 0}} and len(rm.calls) == 1


def test_fetch_aborted_transactions_null_unless_read_committed() -> None:
    res = ReadResult(0, 10, 4, 0, None, 0, 10)
    assert fetch._partition_entry(0, 0, res)["aborted_transactions"] is None
    res.aborted_transactions = [(7, 2), (9, 3)]
    assert fetch._partition_entry(0, 0, res)["aborted_transactions"] == [
        {"producer_id": 7, "first_offset": 2}, {"producer_id": 9, "first_offset": 3}]
    res.aborted_transactions = []
    assert fetch._partition_entry(0, 0, res)["aborted_transactions"] == []

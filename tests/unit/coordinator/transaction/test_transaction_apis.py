"""The transaction APIs at every version Kafka 3.9 accepts, through the real codec, the real registry entries and
the real TransactionCoordinator (``__transaction_state`` in memory, markers answered by a fake broker): answers,
Kafka's down-mapping of errors for old versions, and authorization as KafkaApis checks it.
"""
from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any, Callable, Dict, Iterable, List, Set, Tuple

import pytest

from broker.api import (add_offsets_to_txn, add_partitions_to_txn, describe_transactions, end_txn, find_coordinator,
                        init_producer_id, list_transactions)
from broker.api.authz import Authz
from broker.cluster.metadata_cache import BrokerEndpoint, BrokerMeta, MetadataCache, PartitionMeta, TopicMeta
from broker.util.java_hash import partition_for
from broker.coordinator.transaction.marker_channel import TransactionMarkerChannelManager
from broker.coordinator.transaction.service import TransactionCoordinator
from broker.errors import ErrorCode as E
from broker.protocol import api as proto
from broker.protocol.api import ApiKey
from broker.security.acl import AclOperation as Op, ResourceType as RT
from broker.util.broker_channel import BrokerNode
from broker.util.clock import ManualClock
from tests.unit.coordinator.transaction.test_marker_channel import FakeChannel
from tests.unit.replica.harness import wait_until
from tests.unit.coordinator.transaction.test_service import Config, FakeLog, Ids, Topics, logged_and_applied

MODULES = {ApiKey.INIT_PRODUCER_ID: init_producer_id, ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn,
           ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn, ApiKey.END_TXN: end_txn,
           ApiKey.DESCRIBE_TRANSACTIONS: describe_transactions, ApiKey.LIST_TRANSACTIONS: list_transactions}
NUM_TXN_PARTITIONS = 2


def versions(key: ApiKey) -> range:
    m = MODULES[key]
    return range(m.MIN_VERSION, m.MAX_VERSION + 1)


def test_handlers_cover_exactly_the_schema_versions() -> None:
    for key, mod in MODULES.items():
        assert (mod.MIN_VERSION, mod.MAX_VERSION) == tuple(proto.API_VERSIONS_RANGE[key]), key.name


class DenyAuthz(Authz):
    """An authorizer that refuses exactly the (operation, resource type, name) in ``denied``."""

    enabled = True

    def __init__(self, *denied: Tuple[Op, RT, str]) -> None:
        self.denied: Set[Tuple[Op, RT, str]] = set(denied)
        self.checks: List[Tuple[Op, RT, str]] = []

    def allowed(self, ctx: Any, operation: Op, resource_type: RT, name: str, **kw: Any) -> bool:
        self.checks.append((operation, resource_type, name))
        return (operation, resource_type, name) not in self.denied

    def filter_allowed(self, ctx: Any, operation: Op, resource_type: RT, names: Iterable[str], **kw: Any) -> Set[str]:
        return {n for n in names if self.allowed(ctx, operation, resource_type, n)}


class Broker:
    def __init__(self) -> None:
        self.metadata = MetadataCache(0)
        self.metadata.set_brokers({0: BrokerMeta(0, (BrokerEndpoint("PLAINTEXT", "broker0", 9092),))})
        for name, n in (("t", 3), ("__consumer_offsets", 1), ("__transaction_state", NUM_TXN_PARTITIONS)):
            self.metadata.put_topic(TopicMeta(name, uuid.uuid4(),
                                              {p: PartitionMeta(p, 0, 4, (0,), (0,)) for p in range(n)}))
        self.log, self.channel, self.clock = FakeLog(), FakeChannel(), ManualClock()
        markers = TransactionMarkerChannelManager(self.channel, lambda t, p: (True, BrokerNode(0, "broker0", 9092)),
                                                  retry_backoff_ms=10, clock=self.clock)
        self.tc = TransactionCoordinator(Config(**{"transaction.state.log.num.partitions": NUM_TXN_PARTITIONS,
                                                   "transaction.max.timeout.ms": 900000}),
                                         self.log, Topics(), Ids(), lambda p: 4, markers, clock=self.clock)
        self.group = SimpleNamespace(partition_for=lambda g: 0)

    async def call(self, key: ApiKey, version: int, body: Dict[str, Any], authz: Authz = Authz()) -> Any:
        frame = memoryview(proto.encode_request(key, version, 7, "client-x", body))[4:]
        _, offset = proto.decode_request_header(frame)
        request = proto.decode_request(key, version, frame, offset)
        ctx = SimpleNamespace(api_version=version, listener_name="PLAINTEXT")
        extra: Dict[str, Any] = {"authz": authz}
        if key == ApiKey.FIND_COORDINATOR:
            extra.update(coordinator=SimpleNamespace(), metadata=self.metadata, txn_coordinator=self.tc)
        elif key == ApiKey.INIT_PRODUCER_ID:
            extra = {"producer_ids": Ids(), "txn_coordinator": self.tc}
        else:
            extra["txn_coordinator"] = self.tc
            if key == ApiKey.ADD_PARTITIONS_TO_TXN:
                extra["metadata"] = self.metadata
            if key == ApiKey.ADD_OFFSETS_TO_TXN:
                extra["group_coordinator"] = self.group
        mod = find_coordinator if key == ApiKey.FIND_COORDINATOR else MODULES[key]
        response = await mod.handle(ctx, request, **extra)
        return proto.decode_response(key, version, b"".join(proto.encode_response(key, version, 7, response)))

    # shortcuts at the newest versions ---------------------------------------------------------------------------
    async def init(self, tid: str = "tx", version: int = 5, **kw: Any) -> Any:
        return await self.call(ApiKey.INIT_PRODUCER_ID, version,
                               {"transactional_id": tid, "transaction_timeout_ms": 60000, **kw})

    async def add(self, tid: str, pid: int, epoch: int, tps: List[Tuple[str, int]], version: int = 3,
                  authz: Authz = Authz()) -> Dict[Tuple[str, int], int]:
        topics: Dict[str, List[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        r = await self.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, {
            "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}, authz)
        return {(t.name, p.partition_index): p.partition_error_code
                for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}

    async def end(self, tid: str, pid: int, epoch: int, commit: bool, version: int = 4) -> int:
        r = await self.call(ApiKey.END_TXN, version, {"transactional_id": tid, "producer_id": pid,
                                                     "producer_epoch": epoch, "committed": commit})
        return int(r.error_code)


def run(scenario: Callable[[Broker], Any]) -> None:
    async def main() -> None:
        b = Broker()
        b.tc.start()
        for p in range(NUM_TXN_PARTITIONS):
            await b.tc.on_become_leader("__transaction_state", p)
        await b.tc.wait_loaded()
        try:
            await scenario(b)
        finally:
            await b.tc.stop()
    asyncio.run(main())


# ====================================================================================== FindCoordinator
@pytest.mark.parametrize("version", range(1, 7))
def test_find_coordinator_for_a_transactional_id(version: int) -> None:
    async def scenario(b: Broker) -> None:
        body: Dict[str, Any] = {"key_type": 1}
        body.update({"coordinator_keys": ["tx"]} if version >= 4 else {"key": "tx"})
        r = await b.call(ApiKey.FIND_COORDINATOR, version, body)
        e = r.coordinators[0] if version >= 4 else r
        assert (e.error_code, e.node_id, e.host, e.port) == (0, 0, "broker0", 9092)
        refused = await b.call(ApiKey.FIND_COORDINATOR, version, body,
                               DenyAuthz((Op.DESCRIBE, RT.TRANSACTIONAL_ID, "tx")))
        e = refused.coordinators[0] if version >= 4 else refused
        assert e.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    run(scenario)


# ====================================================================================== InitProducerId
@pytest.mark.parametrize("version", versions(ApiKey.INIT_PRODUCER_ID))
def test_init_producer_id_with_a_transactional_id(version: int) -> None:
    async def scenario(b: Broker) -> None:
        r = await b.init(version=version)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1000, 0)
        r = await b.init(version=version)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1000, 1)
        r = await b.init(version=version, transaction_timeout_ms=0)
        assert r.error_code == E.INVALID_TRANSACTION_TIMEOUT
        if version >= 3:
            r = await b.init(version=version, producer_id=1000, producer_epoch=1)      # KIP-360 bump
            assert (r.error_code, r.producer_epoch) == (0, 2)
            r = await b.init(version=version, producer_id=999, producer_epoch=2)
            assert r.error_code == (E.PRODUCER_FENCED if version >= 4 else E.INVALID_PRODUCER_EPOCH)
            r = await b.init(version=version, producer_id=1000, producer_epoch=-1)
            assert (r.error_code, r.producer_id) == (E.INVALID_REQUEST, -1)
    run(scenario)


def test_init_producer_id_fencing_an_open_transaction_answers_concurrent_transactions() -> None:
    async def scenario(b: Broker) -> None:
        r = await b.init()
        assert await b.add("tx", r.producer_id, 0, [("t", 0)]) == {("t", 0): 0}
        r2 = await b.init()
        assert r2.error_code == E.CONCURRENT_TRANSACTIONS
        await logged_and_applied(b.tc, b.log, partition_for("tx", NUM_TXN_PARTITIONS), "tx", 5)
        r3 = await b.init()
        assert (r3.error_code, r3.producer_epoch) == (0, 2)
        assert await b.end("tx", 1000, 0, True, version=1) == E.INVALID_PRODUCER_EPOCH
        assert await b.end("tx", 1000, 0, True, version=2) == E.PRODUCER_FENCED
    run(scenario)


# ====================================================================================== AddPartitionsToTxn
@pytest.mark.parametrize("version", range(0, 4))
def test_add_partitions_v0_to_v3(version: int) -> None:
    async def scenario(b: Broker) -> None:
        pid = (await b.init()).producer_id
        assert await b.add("tx", pid, 0, [("t", 0), ("t", 2)], version) == {("t", 0): 0, ("t", 2): 0}
        assert await b.add("tx", pid, 0, [("t", 1), ("nope", 0)], version) == {
            ("t", 1): E.OPERATION_NOT_ATTEMPTED, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        # internal topics are never added this way (AddOffsetsToTxn is for __consumer_offsets)
        assert await b.add("tx", pid, 0, [("__consumer_offsets", 0)], version) == {
            ("__consumer_offsets", 0): E.TOPIC_AUTHORIZATION_FAILED}
        fenced = E.INVALID_PRODUCER_EPOCH if version < 2 else E.PRODUCER_FENCED
        assert await b.add("tx", pid, 5, [("t", 1)], version) == {("t", 1): fenced}
        assert await b.add("tx", pid + 1, 0, [("t", 1)], version) == {("t", 1): E.INVALID_PRODUCER_ID_MAPPING}
        d = b.tc.describe_transaction("tx")
        assert d["transaction_state"] == "Ongoing" and d["topics"] == [{"topic": "t", "partitions": [0, 2]}]
    run(scenario)


@pytest.mark.parametrize("version", [4, 5])
def test_add_partitions_batched_with_verify_only(version: int) -> None:
    async def scenario(b: Broker) -> None:
        pid1 = (await b.init("one")).producer_id
        pid2 = (await b.init("two")).producer_id
        await b.add("one", pid1, 0, [("t", 0)])
        r = await b.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, {"transactions": [
            {"transactional_id": "one", "producer_id": pid1, "producer_epoch": 0, "verify_only": True,
             "topics": [{"name": "t", "partitions": [0, 1]}]},
            {"transactional_id": "two", "producer_id": pid2, "producer_epoch": 0, "verify_only": False,
             "topics": [{"name": "t", "partitions": [2]}]},
            {"transactional_id": "one", "producer_id": pid1, "producer_epoch": 3, "verify_only": True,
             "topics": [{"name": "t", "partitions": [0]}]}]})
        assert r.error_code == 0
        got = [(x.transactional_id, {(t.name, p.partition_index): p.partition_error_code
                                     for t in x.topic_results for p in t.results_by_partition})
               for x in r.results_by_transaction]
        assert got == [("one", {("t", 0): 0, ("t", 1): E.TRANSACTION_ABORTABLE}), ("two", {("t", 2): 0}),
                       ("one", {("t", 0): E.PRODUCER_FENCED})]
        assert b.tc.describe_transaction("two")["topics"] == [{"topic": "t", "partitions": [2]}]
        refused = await b.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, {"transactions": []},
                               DenyAuthz((Op.CLUSTER_ACTION, RT.CLUSTER, "kafka-cluster")))
        assert (refused.error_code, refused.results_by_transaction) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    run(scenario)


def test_add_partitions_authorization() -> None:
    async def scenario(b: Broker) -> None:
        pid = (await b.init()).producer_id
        assert await b.add("tx", pid, 0, [("t", 0)], authz=DenyAuthz((Op.WRITE, RT.TRANSACTIONAL_ID, "tx"))) == {
            ("t", 0): E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
        got = await b.add("tx", pid, 0, [("t", 0), ("nope", 0)], authz=DenyAuthz((Op.WRITE, RT.TOPIC, "t")))
        assert got == {("t", 0): E.TOPIC_AUTHORIZATION_FAILED, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert b.tc.describe_transaction("tx")["transaction_state"] == "Empty"
    run(scenario)


# ====================================================================================== AddOffsetsToTxn
@pytest.mark.parametrize("version", versions(ApiKey.ADD_OFFSETS_TO_TXN))
def test_add_offsets_adds_the_groups_offsets_partition(version: int) -> None:
    async def scenario(b: Broker) -> None:
        pid = (await b.init()).producer_id
        body = {"transactional_id": "tx", "producer_id": pid, "producer_epoch": 0, "group_id": "g"}
        assert (await b.call(ApiKey.ADD_OFFSETS_TO_TXN, version, body)).error_code == 0
        assert b.tc.describe_transaction("tx")["topics"] == [{"topic": "__consumer_offsets", "partitions": [0]}]
        fenced = await b.call(ApiKey.ADD_OFFSETS_TO_TXN, version, {**body, "producer_epoch": 9})
        assert fenced.error_code == (E.INVALID_PRODUCER_EPOCH if version < 2 else E.PRODUCER_FENCED)
        r = await b.call(ApiKey.ADD_OFFSETS_TO_TXN, version, body, DenyAuthz((Op.WRITE, RT.TRANSACTIONAL_ID, "tx")))
        assert r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        r = await b.call(ApiKey.ADD_OFFSETS_TO_TXN, version, body, DenyAuthz((Op.READ, RT.GROUP, "g")))
        assert r.error_code == E.GROUP_AUTHORIZATION_FAILED
    run(scenario)


# ====================================================================================== EndTxn
@pytest.mark.parametrize("version", versions(ApiKey.END_TXN))
def test_end_txn(version: int) -> None:
    async def scenario(b: Broker) -> None:
        pid = (await b.init()).producer_id
        await b.add("tx", pid, 0, [("t", 0)])
        assert await b.end("tx", pid, 1, True, version) == (E.INVALID_PRODUCER_EPOCH if version < 2
                                                              else E.PRODUCER_FENCED)
        assert await b.end("tx", pid, 0, True, version) == 0
        await wait_until(lambda: b.tc.describe_transaction("tx")["transaction_state"] == "CompleteCommit", b.clock)
        assert await b.end("tx", pid, 0, True, version) == 0
        assert await b.end("tx", pid, 0, False, version) == E.INVALID_TXN_STATE
        r = await b.call(ApiKey.END_TXN, version, {"transactional_id": "tx", "producer_id": pid,
                                                    "producer_epoch": 0, "committed": True},
                         DenyAuthz((Op.WRITE, RT.TRANSACTIONAL_ID, "tx")))
        assert r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    run(scenario)


# ====================================================================================== Describe / List
def test_describe_transactions() -> None:
    async def scenario(b: Broker) -> None:
        pid = (await b.init("tx")).producer_id
        await b.add("tx", pid, 0, [("t", 1), ("t", 0)])
        await b.init("other")
        r = await b.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx", "missing", "other"]})
        tx, missing, other = r.transaction_states
        assert (tx.error_code, tx.transaction_state, tx.producer_id, tx.producer_epoch,
                tx.transaction_timeout_ms) == (0, "Ongoing", pid, 0, 60000)
        assert [(t.topic, list(t.partitions)) for t in tx.topics] == [("t", [0, 1])]
        assert missing.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        assert other.transaction_state == "Empty"
        r = await b.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx", "other"]},
                         DenyAuthz((Op.DESCRIBE, RT.TRANSACTIONAL_ID, "other"), (Op.DESCRIBE, RT.TOPIC, "t")))
        tx, other = r.transaction_states
        assert tx.error_code == 0 and tx.topics == []          # topics the principal may not describe are hidden
        assert other.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    run(scenario)


@pytest.mark.parametrize("version", versions(ApiKey.LIST_TRANSACTIONS))
def test_list_transactions(version: int) -> None:
    async def scenario(b: Broker) -> None:
        pid = (await b.init("a")).producer_id
        await b.add("a", pid, 0, [("t", 0)])
        await b.init("b")

        async def listed(authz: Authz = Authz(), **body: Any) -> Tuple[int, List[str], List[Tuple[str, str]]]:
            req = {"state_filters": [], "producer_id_filters": [], **body}
            if version < 1:
                req.pop("duration_filter", None)
            r = await b.call(ApiKey.LIST_TRANSACTIONS, version, req, authz)
            return r.error_code, list(r.unknown_state_filters), sorted(
                (s.transactional_id, s.transaction_state) for s in r.transaction_states)
        assert await listed() == (0, [], [("a", "Ongoing"), ("b", "Empty")])
        assert await listed(state_filters=["Ongoing", "Weird"]) == (0, ["Weird"], [("a", "Ongoing")])
        assert await listed(producer_id_filters=[pid]) == (0, [], [("a", "Ongoing")])
        assert await listed(DenyAuthz((Op.DESCRIBE, RT.TRANSACTIONAL_ID, "a"))) == (0, [], [("b", "Empty")])
        if version >= 1:
            assert await listed(duration_filter=3600000) == (0, [], [("b", "Empty")])   # b never started
    run(scenario)

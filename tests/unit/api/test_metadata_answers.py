"""Prepared Metadata answers (broker.api.metadata_answers) against the per-partition walk they replace.

The walk (``broker.api.metadata.topic_entry``, and the handler bound without ``answers``) is the oracle: for caches
in varied states (dead leaders, leaders without the client's listener, offline replicas, several listeners,
deleted topics and partitions, topic ids), every Metadata version and request shape, the prepared answer must encode
to exactly the walk's bytes. Then: each kind of UpdateMetadata change rebuilds exactly the entries it affects.
"""
from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Sequence

import pytest

from broker.api import metadata as metadata_api
from broker.api.authz import Authz
from broker.api.dispatcher import ConnectionContext, RequestContext
from broker.api.metadata_answers import ENTRY_VERSION, MetadataAnswers
from broker.cluster.metadata_cache import BrokerMeta, MetadataCache, PartitionMeta, TopicMeta
from broker.config.kafka_config import Endpoint
from broker.protocol import api as proto
from broker.protocol.api import ApiKey
from broker.protocol.codec import PreEncoded, element_encoder
from broker.security.acl import AclOperation as Op, ResourceType as RT

ALPHA, NOID_ZERO, BIG, GONE, SHRUNK = (uuid.UUID(int=i) for i in (1, 0, 3, 4, 5))
LISTENERS = ("PLAINTEXT", "INTERNAL", "MISSING")
VERSIONS = range(13)


# ------------------------------------------------------------------------------------------------ building caches
def broker(bid: int, *listeners: str, host: str = "h") -> Dict[str, Any]:
    return {"id": bid, "rack": f"r{bid}", "endpoints": [
        {"port": 9000 + 10 * bid + i, "host": f"{host}{bid}", "listener": name, "security_protocol": 0}
        for i, name in enumerate(listeners)]}


def partition(p: int, leader: int, replicas: Sequence[int], isr: Sequence[int], offline: Sequence[int] = (),
              epoch: int = 5) -> Dict[str, Any]:
    return {"partition_index": p, "controller_epoch": 1, "leader": leader, "leader_epoch": epoch, "isr": list(isr),
            "zk_version": 1, "replicas": list(replicas), "offline_replicas": list(offline)}


#: broker 0 has both listeners, 1 only PLAINTEXT, 2 only INTERNAL; broker 3 is dead (named in replicas and leaders)
BROKERS = [broker(0, "PLAINTEXT", "INTERNAL"), broker(1, "PLAINTEXT"), broker(2, "INTERNAL")]


def topics_state() -> List[Dict[str, Any]]:
    return [
        {"topic_name": "alpha", "topic_id": ALPHA, "partition_states": [  # out of order, every leader case
            partition(2, 0, [0, 1, 2], [0, 1]),
            partition(0, 1, [1, 2, 3], [1], offline=[3]),
            partition(1, 2, [2, 0], [2, 0]),
            partition(3, 3, [3, 0], [3]),
            partition(4, -1, [1], [])]},
        {"topic_name": "__consumer_offsets", "topic_id": uuid.UUID(int=2),
         "partition_states": [partition(p, 0, [0, 1], [0, 1]) for p in range(3)]},
        {"topic_name": "noid", "topic_id": NOID_ZERO, "partition_states": [partition(0, 1, [1, 0], [1, 0])]},
        {"topic_name": "big", "topic_id": BIG, "partition_states": [
            partition(p, p % 4, [p % 4, (p + 1) % 4], [p % 4], offline=[3] if p % 4 != 3 and p % 2 else [])
            for p in range(50)]},
        {"topic_name": "gone", "topic_id": GONE, "partition_states": [partition(p, 0, [0], [0]) for p in range(2)]},
        {"topic_name": "shrunk", "topic_id": SHRUNK, "partition_states": [partition(p, 1, [1], [1]) for p in range(3)]},
    ]


def update_metadata(m: MetadataCache, topic_states: List[Dict[str, Any]], brokers: Optional[List[Any]] = None,
                    version: int = 8) -> None:
    """Apply an UpdateMetadata as the controller sends it: encoded, decoded, applied."""
    body = {"controller_id": 0, "controller_epoch": 1, "broker_epoch": 1, "topic_states": topic_states,
            "live_brokers": BROKERS if brokers is None else brokers}
    frame = memoryview(proto.encode_request(ApiKey.UPDATE_METADATA, version, 1, "controller", body))[4:]
    _, offset = proto.decode_request_header(frame)
    m.update_metadata(proto.decode_request(ApiKey.UPDATE_METADATA, version, frame, offset), version)


def varied_cache() -> MetadataCache:
    m = MetadataCache(0)
    m.cluster_id = "cluster"
    update_metadata(m, topics_state())
    update_metadata(m, [  # deletions: a whole topic, and one partition of another
        {"topic_name": "gone", "topic_id": GONE, "partition_states": [partition(p, -2, [0], [0]) for p in range(2)]},
        {"topic_name": "shrunk", "topic_id": SHRUNK, "partition_states": [partition(1, -2, [1], [1])]}])
    assert "gone" not in m.topics and sorted(m.topics["shrunk"].partitions) == [0, 2]
    return m


# ------------------------------------------------------------------------------------------------ calling Metadata
class Config:
    def __init__(self, auto_create: bool = False) -> None:
        self.auto_create = auto_create

    def get(self, key: str) -> Any:
        assert key == "auto.create.topics.enable"
        return self.auto_create


class PartialAuthz(Authz):
    """An authorizer: topics named hidden* may not be described, only new-ok* created; per-topic operations."""

    enabled = True

    def allowed(self, ctx: Any, operation: Any, resource_type: Any, name: str, **kw: Any) -> bool:
        return resource_type == RT.CLUSTER and operation == Op.DESCRIBE

    def filter_allowed(self, ctx: Any, operation: Any, resource_type: Any, names: Any, **kw: Any) -> set:
        if operation == Op.CREATE:
            return {n for n in names if n.startswith("new-ok")}
        return {n for n in names if not n.startswith("hidden")}

    def authorized_operations(self, ctx: Any, resource_type: Any, name: str) -> int:
        return (sum(map(ord, name)) * 7919) & 0x7FFFFFFF


class CreatingAdmin:
    """Auto-creation that (like the controller, later) puts the topic in the cache; 'slow*' stays unannounced."""

    def __init__(self, m: MetadataCache) -> None:
        self.m = m

    async def auto_create_topic(self, name: str) -> int:
        alpha = self.m.topics["alpha"]  # meanwhile, an UpdateMetadata moves a leader of a topic answered earlier
        self.m.put_partition("alpha", alpha.partitions[2]._replace(leader=1, leader_epoch=9))
        if not name.startswith("slow"):
            self.m.put_topic(TopicMeta(name, uuid.UUID(int=99), {0: PartitionMeta(0, 0, 1, (0,), (0,))}))
        return 0


def metadata_request(version: int, topics: Optional[List[Dict[str, Any]]], include_ops: bool = False) -> Any:
    body: Dict[str, Any] = {"topics": topics, "allow_auto_topic_creation": True}
    if version >= 8:
        body["include_topic_authorized_operations"] = include_ops
        body["include_cluster_authorized_operations"] = include_ops and version <= 10
    frame = memoryview(proto.encode_request(ApiKey.METADATA, version, 1, "client", body))[4:]
    _, offset = proto.decode_request_header(frame)
    return proto.decode_request(ApiKey.METADATA, version, frame, offset)


def answer(m: MetadataCache, answers: Optional[MetadataAnswers], version: int, listener: str, request: Any,
           authz: Authz = Authz(), admin: Any = None, auto_create: bool = False) -> bytes:
    """The Metadata response frame, with the prepared answers or (answers=None) the walk."""
    ctx = RequestContext(ConnectionContext("c", "10.0.0.1", 5555, listener),
                         SimpleNamespace(api_key=ApiKey.METADATA, api_version=version, correlation_id=1,
                                         client_id="client"))
    body = asyncio.run(metadata_api.handle(ctx, request, metadata=m, admin=admin, config=Config(auto_create),
                                           authz=authz, answers=answers))
    return b"".join(proto.encode_response(ApiKey.METADATA, version, 1, body))


def all_topics(version: int, include_ops: bool = False) -> Any:
    return metadata_request(version, [] if version == 0 else None, include_ops)


def assert_same_as_walk(m: MetadataCache, answers: MetadataAnswers, versions: Any = VERSIONS,
                        listeners: Sequence[str] = LISTENERS) -> None:
    for version in versions:
        for listener in listeners:
            request = all_topics(version)
            assert answer(m, answers, version, listener, request) == answer(m, None, version, listener, request), \
                (version, listener)


# ------------------------------------------------------------------------------------------------ equivalence
def test_every_topic_entry_is_the_walks_encoding() -> None:
    m = varied_cache()
    answers = MetadataAnswers(m)
    for version in VERSIONS:
        encode = element_encoder(proto.response_schema(ApiKey.METADATA, version), ("topics",), version)
        for listener in LISTENERS:
            for name, meta in m.topics.items():
                walked = encode(metadata_api.topic_entry(m, name, version, False, listener=listener))
                assert answers.answer(meta, version, listener).entry == walked, (name, version, listener)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("listener", LISTENERS)
def test_all_topics_answer_is_the_walks(version: int, listener: str) -> None:
    m = varied_cache()
    answers = MetadataAnswers(m)
    for include_ops in (False, True):
        request = all_topics(version, include_ops)
        walked = answer(m, None, version, listener, request)
        assert answer(m, answers, version, listener, request) == walked
        assert answer(m, answers, version, listener, request) == walked  # from the cache this time
        authz = PartialAuthz()
        m.put_topic(TopicMeta("hidden-topic", uuid.UUID(int=50), {0: PartitionMeta(0, 0, 1, (0,), (0,))}))
        assert answer(m, answers, version, listener, request, authz) == answer(m, None, version, listener, request,
                                                                               authz)


def named_topics(version: int) -> List[Dict[str, Any]]:
    names = ["big", "alpha", "missing", "bad name!", "__consumer_offsets", "hidden-x", "alpha", "__internal-new"]
    topics: List[Dict[str, Any]] = [{"name": n} for n in names]
    if version >= 10:
        topics += [{"name": None, "topic_id": BIG}, {"name": None, "topic_id": uuid.UUID(int=12345)}]
    return topics


@pytest.mark.parametrize("version", VERSIONS)
def test_named_topics_answer_is_the_walks(version: int) -> None:
    m = varied_cache()
    answers = MetadataAnswers(m)
    for listener in ("PLAINTEXT", "INTERNAL"):
        for include_ops in (False, True):
            for authz in (Authz(), PartialAuthz()):
                request = metadata_request(version, named_topics(version), include_ops)
                assert answer(m, answers, version, listener, request, authz) == \
                    answer(m, None, version, listener, request, authz), (listener, include_ops, authz)


@pytest.mark.parametrize("version", [0, 4, 7, 9, 12])
def test_auto_created_topics_answer_is_the_walks(version: int) -> None:
    """Entries are taken when their topic is reached: an UpdateMetadata during a later auto-creation changes none."""
    request = metadata_request(version, [{"name": n} for n in ("alpha", "new-ok-1", "slow-1", "new-2", "alpha")],
                               include_ops=True)
    got = {}
    for prepared in (True, False):
        for authz in (Authz(), PartialAuthz()):
            m = varied_cache()
            answers = MetadataAnswers(m) if prepared else None
            if answers is not None:
                answers.answer(m.topics["alpha"], version, "PLAINTEXT")  # prepared before the request
            got[prepared, authz.enabled] = answer(m, answers, version, "PLAINTEXT", request, authz,
                                                  admin=CreatingAdmin(m), auto_create=True)
    assert got[True, False] == got[False, False] and got[True, True] == got[False, True]


def test_versions_sharing_an_entry_encode_it_alike() -> None:
    m = varied_cache()
    for version in VERSIONS:
        encode = element_encoder(proto.response_schema(ApiKey.METADATA, version), ("topics",), version)
        shared = element_encoder(proto.response_schema(ApiKey.METADATA, ENTRY_VERSION[version]), ("topics",),
                                 ENTRY_VERSION[version])
        for name in m.topics:
            entry = metadata_api.topic_entry(m, name, version, False, listener="PLAINTEXT")
            assert encode(entry) == shared(entry), (name, version)


# ------------------------------------------------------------------------------------------------ invalidation
def cached(answers: MetadataAnswers, listener: str = "PLAINTEXT", version: int = 12) -> Dict[str, Any]:
    return {name: answers.cached(name, version, listener) for name in answers.metadata.topics}


def prepared(listeners: Sequence[str] = ("PLAINTEXT",)) -> MetadataAnswers:
    m = varied_cache()
    answers = MetadataAnswers(m)
    for listener in listeners:
        answer(m, answers, 12, listener, all_topics(12))
    assert all(v is not None for listener in listeners for v in cached(answers, listener).values())
    return answers


def test_unchanged_update_metadata_keeps_every_entry() -> None:
    answers = prepared()
    m = answers.metadata
    before, metas, brokers = cached(answers), dict(m.topics), m.brokers
    update_metadata(m, [t for t in topics_state() if t["topic_name"] not in ("gone", "shrunk")])  # a full resend
    assert m.brokers is brokers and all(m.topics[n] is metas[n] for n in metas)
    assert cached(answers) == before and all(cached(answers)[n] is before[n] for n in before)


@pytest.mark.parametrize("change", [
    {"leader": 0}, {"leader_epoch": 6}, {"isr": [1, 2]}, {"replicas": [1, 2]}, {"offline_replicas": []},
    {"zk_version": 2}])
def test_a_partition_change_rebuilds_only_its_topic(change: Dict[str, Any]) -> None:
    answers = prepared()
    m = answers.metadata
    before = cached(answers)
    update_metadata(m, [{"topic_name": "alpha", "topic_id": ALPHA,
                         "partition_states": [partition(0, 1, [1, 2, 3], [1], offline=[3]) | change]}])
    after = cached(answers)
    assert after["alpha"] is None
    assert all(after[n] is before[n] for n in before if n != "alpha")
    assert_same_as_walk(m, answers)


def test_a_new_partition_and_a_new_topic_id_rebuild_the_topic() -> None:
    answers = prepared()
    m = answers.metadata
    update_metadata(m, [{"topic_name": "noid", "topic_id": uuid.UUID(int=77), "partition_states": []}])
    assert cached(answers)["noid"] is None and m.topics["noid"].topic_id == uuid.UUID(int=77)
    assert_same_as_walk(m, answers, listeners=["PLAINTEXT"])
    update_metadata(m, [{"topic_name": "shrunk", "topic_id": SHRUNK, "partition_states": [partition(5, 0, [0], [0])]}])
    assert cached(answers)["shrunk"] is None and cached(answers)["noid"] is not None
    assert_same_as_walk(m, answers)


@pytest.mark.parametrize("brokers, rebuilt", [
    ([broker(0, "PLAINTEXT", "INTERNAL"), broker(2, "INTERNAL")], set(LISTENERS)),  # broker 1 died: every listener
    ([broker(0, "PLAINTEXT", "INTERNAL"), broker(1, "INTERNAL"), broker(2, "INTERNAL")],  # 1 lost PLAINTEXT
     {"PLAINTEXT", "INTERNAL"}),
    ([broker(0, "PLAINTEXT", "INTERNAL"), broker(1, "PLAINTEXT"), broker(2, "INTERNAL", "PLAINTEXT")],  # 2 gained it
     {"PLAINTEXT"}),
    (BROKERS + [broker(3, "MISSING")], {"PLAINTEXT", "INTERNAL", "MISSING"}),  # broker 3 came back, a new listener
    ([broker(0, "PLAINTEXT", "INTERNAL", host="moved"), broker(1, "PLAINTEXT"), broker(2, "INTERNAL")], set()),
])
def test_broker_changes_rebuild_the_listeners_they_affect(brokers: List[Any], rebuilt: set) -> None:
    answers = prepared(LISTENERS)
    m = answers.metadata
    before = {listener: cached(answers, listener) for listener in LISTENERS}
    update_metadata(m, [], brokers)
    for listener in LISTENERS:
        after = cached(answers, listener)
        if listener in rebuilt:
            assert all(v is None for v in after.values()), listener
        else:
            assert all(after[n] is before[listener][n] for n in after), listener
    assert_same_as_walk(m, answers)  # the broker list (hosts) is never cached


def test_deleted_topics_leave_the_answer_and_the_cache() -> None:
    answers = prepared()
    m = answers.metadata
    update_metadata(m, [{"topic_name": "big", "topic_id": BIG,
                         "partition_states": [partition(p, -2, [0], [0]) for p in range(50)]}])
    assert "big" not in m.topics and answers.cached("big", 12, "PLAINTEXT") is None
    assert_same_as_walk(m, answers)
    update_metadata(m, [{"topic_name": "big", "topic_id": uuid.UUID(int=33),  # created again: a new id
                         "partition_states": [partition(0, 0, [0], [0])]}])
    assert_same_as_walk(m, answers)
    update_metadata(m, [{"topic_name": "big", "topic_id": uuid.UUID(int=33),
                         "partition_states": [partition(0, -2, [0], [0])]}])
    answer(m, answers, 12, "PLAINTEXT", all_topics(12))
    m.put_topic(TopicMeta("fresh", uuid.UUID(int=34), {0: PartitionMeta(0, 0, 1, (0,), (0,))}))
    answer(m, answers, 12, "PLAINTEXT", all_topics(12))
    assert set(answers._topics) == set(m.topics)  # the deleted topic's entries were dropped


def test_direct_cache_updates_invalidate_too() -> None:
    answers = prepared()
    m = answers.metadata
    m.put_partition("alpha", m.topics["alpha"].partitions[4]._replace(leader=0))
    assert cached(answers)["alpha"] is None and cached(answers)["big"] is not None
    m.put_topic(TopicMeta("noid", uuid.UUID(int=8), dict(m.topics["noid"].partitions)))
    assert cached(answers)["noid"] is None
    assert_same_as_walk(m, answers, listeners=["PLAINTEXT"])
    m.set_brokers({0: BrokerMeta(0, (Endpoint("PLAINTEXT", "h", 1, "PLAINTEXT"),))})
    assert all(v is None for v in cached(answers).values())
    assert_same_as_walk(m, answers)
    m.remove_topic("alpha")
    assert_same_as_walk(m, answers)


def test_update_metadata_v4_and_older_answer_the_same() -> None:
    """UpdateMetadata v0-4 carry ungrouped partition states and no topic ids (v0: one PLAINTEXT endpoint)."""
    for um_version in (0, 1, 4):
        m = MetadataCache(0)
        states = [dict(ps, topic_name=t["topic_name"]) for t in topics_state() for ps in t["partition_states"]]
        body = {"controller_id": 0, "controller_epoch": 1, "ungrouped_partition_states": states,
                "live_brokers": [{"id": b, "v0_host": f"h{b}", "v0_port": 9000 + b} for b in (0, 1)]
                if um_version == 0 else [broker(0, "PLAINTEXT"), broker(1, "PLAINTEXT")]}
        frame = memoryview(proto.encode_request(ApiKey.UPDATE_METADATA, um_version, 1, "controller", body))[4:]
        _, offset = proto.decode_request_header(frame)
        request = proto.decode_request(ApiKey.UPDATE_METADATA, um_version, frame, offset)
        m.update_metadata(request, um_version)
        answers = MetadataAnswers(m)
        assert_same_as_walk(m, answers, listeners=["PLAINTEXT"])
        before = cached(answers)
        m.update_metadata(request, um_version)  # resent unchanged: nothing rebuilt
        assert all(cached(answers)[n] is before[n] for n in before)


# ------------------------------------------------------------------------------------------------ the handler
def test_known_topics_are_answered_pre_encoded() -> None:
    m = varied_cache()
    ctx = RequestContext(ConnectionContext("c", "h", 1, "PLAINTEXT"),
                         SimpleNamespace(api_key=ApiKey.METADATA, api_version=12, correlation_id=1, client_id=None))
    body = asyncio.run(metadata_api.handle(ctx, metadata_request(12, [{"name": "alpha"}, {"name": "nope"}]),
                                           metadata=m, admin=None, config=Config(), answers=MetadataAnswers(m)))
    alpha, nope = body["topics"]
    assert isinstance(alpha, PreEncoded) and nope["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION stays a dict


@pytest.mark.parametrize("version", [10, 11])
def test_topic_ids_before_v12_are_an_invalid_request(version: int) -> None:
    """Kafka 3.9 throws InvalidRequestException (KafkaApis.handleTopicMetadataRequest); MetadataRequest's
    getErrorResponse answers every topic INVALID_REQUEST, a null name as ""."""
    m = varied_cache()
    request = metadata_request(version, [{"name": "alpha"}, {"name": None, "topic_id": BIG}])
    for answers in (MetadataAnswers(m), None):
        frame = answer(m, answers, version, "PLAINTEXT", request)
        resp = proto.decode_response(ApiKey.METADATA, version, frame).to_dict()
        assert resp["brokers"] == [] and resp["controller_id"] == -1 and resp["cluster_id"] is None
        assert [(t["error_code"], t["name"], t["topic_id"], t["partitions"]) for t in resp["topics"]] == [
            (42, "alpha", uuid.UUID(int=0), []), (42, "", BIG, [])]

"""Kafka's ZooKeeper ACL layout: paths, znode JSON and change notifications, byte for byte."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.security.acl import (
    AccessControlEntry, AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType,
)
from broker.security.acl_zk_format import (
    CHANGE_SEQUENCE_PREFIX, acl_path, change_notification, decode_acls, encode_acls, parse_change_notification,
    pattern_from_path, resource_type_dir, store_root, store_roots,
)

RT, PT, OP, PERM = ResourceType, PatternType, AclOperation, AclPermissionType


@pytest.mark.parametrize("pattern,path", [
    (ResourcePattern(RT.TOPIC, "orders", PT.LITERAL), "/kafka-acl/Topic/orders"),
    (ResourcePattern(RT.TOPIC, "*", PT.LITERAL), "/kafka-acl/Topic/*"),
    (ResourcePattern(RT.CLUSTER, "kafka-cluster", PT.LITERAL), "/kafka-acl/Cluster/kafka-cluster"),
    (ResourcePattern(RT.TRANSACTIONAL_ID, "tx", PT.LITERAL), "/kafka-acl/TransactionalId/tx"),
    (ResourcePattern(RT.DELEGATION_TOKEN, "tok", PT.LITERAL), "/kafka-acl/DelegationToken/tok"),
    (ResourcePattern(RT.USER, "User:bob", PT.LITERAL), "/kafka-acl/User/User:bob"),
    (ResourcePattern(RT.GROUP, "grp-", PT.PREFIXED), "/kafka-acl-extended/prefixed/Group/grp-"),
    (ResourcePattern(RT.TOPIC, "ü nicode %20", PT.PREFIXED), "/kafka-acl-extended/prefixed/Topic/ü nicode %20"),
])
def test_acl_paths_round_trip(pattern, path) -> None:
    assert acl_path(pattern) == path
    assert pattern_from_path(path) == pattern


def test_store_layout() -> None:
    assert store_root(PT.LITERAL) == "/kafka-acl"
    assert store_root(PT.PREFIXED) == "/kafka-acl-extended/prefixed"
    assert resource_type_dir(PT.PREFIXED, RT.TOPIC) == "/kafka-acl-extended/prefixed/Topic"
    assert store_roots() == ("/kafka-acl", "/kafka-acl-extended/prefixed", "/kafka-acl-changes",
                             "/kafka-acl-extended-changes")
    for bad in (PT.ANY, PT.MATCH, PT.UNKNOWN):
        with pytest.raises(ValueError):
            store_root(bad)
    with pytest.raises(ValueError):
        acl_path(ResourcePattern(RT.ANY, "x", PT.LITERAL))


def test_pattern_from_path_accepts_kafka_spellings_and_keeps_slashes() -> None:
    assert pattern_from_path("/kafka-acl/TOPIC/x") == ResourcePattern(RT.TOPIC, "x", PT.LITERAL)
    assert pattern_from_path("/kafka-acl/Topic/a/b") == ResourcePattern(RT.TOPIC, "a/b", PT.LITERAL)


@pytest.mark.parametrize("path", [
    "/kafka-acl", "/kafka-acl/Topic", "/kafka-acl/Topic/", "/kafka-acl/Nope/x", "/kafka-acl/Any/x",
    "/kafka-acl-extended/literal/Topic/x", "/kafka-acl-extended/prefixed/Topic", "/brokers/topics/x",
])
def test_pattern_from_path_rejects(path) -> None:
    with pytest.raises(ValueError):
        pattern_from_path(path)


def test_encode_acls_exact_bytes() -> None:
    entries = {AccessControlEntry("User:bob", "10.0.0.1", OP.DESCRIBE_CONFIGS, PERM.DENY),
               AccessControlEntry("User:alice", "*", OP.READ, PERM.ALLOW)}
    assert encode_acls(entries) == (
        b'{"version":1,"acls":['
        b'{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},'
        b'{"principal":"User:bob","permissionType":"Deny","operation":"DescribeConfigs","host":"10.0.0.1"}]}')
    assert decode_acls(encode_acls(entries)) == entries
    assert encode_acls([]) == b'{"version":1,"acls":[]}'


def test_decode_acls_as_kafka_writes_them() -> None:
    data = (b'{"version": 1, "acls": [ {"host":"host1", "permissionType": "Deny","operation": "IdempotentWrite",'
            b'"principal": "User:alice", "extra": 7}, {"host":"*","permissionType":"ALLOW","operation":"ALL",'
            b'"principal":"User:*"}, {"host":"*","permissionType":"Allow","operation":"Teleport",'
            b'"principal":"Group:ops"}], "future": true}')
    assert decode_acls(data) == {
        AccessControlEntry("User:alice", "host1", OP.IDEMPOTENT_WRITE, PERM.DENY),
        AccessControlEntry("User:*", "*", OP.ALL, PERM.ALLOW),
        AccessControlEntry("Group:ops", "*", OP.UNKNOWN, PERM.ALLOW),
    }
    assert decode_acls(b"") == set() and decode_acls(None) == set()


@pytest.mark.parametrize("data", [
    b"{not json", b"\xff\xfe", b"[]", b'{"acls":[]}', b'{"version":2,"acls":[]}', b'{"version":"1","acls":[]}',
    b'{"version":1}', b'{"version":1,"acls":{}}', b'{"version":1,"acls":[1]}',
    b'{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","operation":"Read","host":"*"}]}',
    b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Read"}]}',
    b'{"version":1,"acls":[{"principal":"User:a","permissionType":3,"operation":"Read","host":"*"}]}',
])
def test_decode_acls_rejects(data) -> None:
    with pytest.raises(ValueError):
        decode_acls(data)


def test_literal_change_notification() -> None:
    pattern = ResourcePattern(RT.TRANSACTIONAL_ID, "tx:1", PT.LITERAL)
    parent, data = change_notification(pattern)
    assert (parent, data) == ("/kafka-acl-changes", b"TRANSACTIONAL_ID:tx:1")
    assert parse_change_notification(parent, data) == pattern
    # Older brokers and hand-written notifications use the PascalCase name.
    assert parse_change_notification("/kafka-acl-changes", b"Topic:orders") == ResourcePattern(
        RT.TOPIC, "orders", PT.LITERAL)
    assert parse_change_notification("/kafka-acl-changes/", b"TransactionalId:t") == ResourcePattern(
        RT.TRANSACTIONAL_ID, "t", PT.LITERAL)
    assert CHANGE_SEQUENCE_PREFIX == "acl_changes_"


def test_extended_change_notification() -> None:
    pattern = ResourcePattern(RT.TOPIC, "orders-", PT.PREFIXED)
    parent, data = change_notification(pattern)
    assert parent == "/kafka-acl-extended-changes"
    assert json.loads(data) == {"version": 1, "resourceType": "TOPIC", "name": "orders-", "patternType": "PREFIXED"}
    assert data == b'{"version":1,"resourceType":"TOPIC","name":"orders-","patternType":"PREFIXED"}'
    assert parse_change_notification(parent, data) == pattern
    assert parse_change_notification(parent, b'{"version":1,"resourceType":"Group","name":"g","patternType":'
                                             b'"Prefixed","x":1}') == ResourcePattern(RT.GROUP, "g", PT.PREFIXED)
    with pytest.raises(ValueError):
        change_notification(ResourcePattern(RT.TOPIC, "x", PT.MATCH))


@pytest.mark.parametrize("parent,data", [
    ("/kafka-acl-changes", b"no-colon"),
    ("/kafka-acl-changes", b"Nope:x"),
    ("/kafka-acl-changes", b"\xff"),
    ("/kafka-acl-extended-changes", b"nope"),
    ("/kafka-acl-extended-changes", b"[]"),
    ("/kafka-acl-extended-changes", b'{"version":2,"resourceType":"TOPIC","name":"x","patternType":"PREFIXED"}'),
    ("/kafka-acl-extended-changes", b'{"version":1,"resourceType":"TOPIC","patternType":"PREFIXED"}'),
    ("/kafka-acl-extended-changes", b'{"version":1,"resourceType":"TOPIC","name":"x","patternType":"MATCH"}'),
    ("/kafka-acl-extended-changes", b'{"version":1,"resourceType":"ANY","name":"x","patternType":"PREFIXED"}'),
    ("/config/changes", b"TOPIC:x"),
])
def test_parse_change_notification_rejects(parent, data) -> None:
    with pytest.raises(ValueError):
        parse_change_notification(parent, data)


names = st.text(min_size=1).filter(lambda s: "/" not in s)
patterns = st.builds(ResourcePattern, st.sampled_from([RT.TOPIC, RT.GROUP, RT.CLUSTER, RT.TRANSACTIONAL_ID,
                                                       RT.DELEGATION_TOKEN, RT.USER]),
                     names, st.sampled_from([PT.LITERAL, PT.PREFIXED]))
entries = st.builds(AccessControlEntry, st.text().map(lambda s: "User:" + s), st.text(),
                    st.sampled_from([op for op in OP if op not in (OP.ANY, OP.UNKNOWN)]),
                    st.sampled_from([PERM.ALLOW, PERM.DENY]))


@given(patterns, st.frozensets(entries, max_size=5))
def test_round_trips(pattern, acl_set) -> None:
    assert pattern_from_path(acl_path(pattern)) == pattern
    assert parse_change_notification(*change_notification(pattern)) == pattern
    assert decode_acls(encode_acls(acl_set)) == acl_set

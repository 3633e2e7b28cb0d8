"""The ACL model: Kafka's codes and names, filter matching and creation validation."""
from __future__ import annotations

import pytest

from broker.security.acl import (
    ANY_ACL_FILTER, AccessControlEntry, AccessControlEntryFilter, AclBinding, AclBindingFilter, AclOperation,
    AclPermissionType, PatternType, ResourcePattern, ResourcePatternFilter, ResourceType, validate_binding,
    validate_filter,
)

RT, PT, OP, PERM = ResourceType, PatternType, AclOperation, AclPermissionType


def test_wire_codes() -> None:
    assert [(m.name, int(m)) for m in RT] == [
        ("UNKNOWN", 0), ("ANY", 1), ("TOPIC", 2), ("GROUP", 3), ("CLUSTER", 4), ("TRANSACTIONAL_ID", 5),
        ("DELEGATION_TOKEN", 6), ("USER", 7)]
    assert [(m.name, int(m)) for m in PT] == [
        ("UNKNOWN", 0), ("ANY", 1), ("MATCH", 2), ("LITERAL", 3), ("PREFIXED", 4)]
    assert [int(m) for m in OP] == list(range(15))
    assert (OP.IDEMPOTENT_WRITE, OP.CREATE_TOKENS, OP.DESCRIBE_TOKENS) == (12, 13, 14)
    assert [(m.name, int(m)) for m in PERM] == [("UNKNOWN", 0), ("ANY", 1), ("DENY", 2), ("ALLOW", 3)]


def test_unknown_codes_decode_to_unknown() -> None:
    assert RT.from_code(99) is RT.UNKNOWN
    assert OP.from_code(3) is OP.READ
    assert PERM.from_code(-1) is PERM.UNKNOWN


@pytest.mark.parametrize("member,name", [
    (RT.TOPIC, "Topic"), (RT.GROUP, "Group"), (RT.CLUSTER, "Cluster"), (RT.TRANSACTIONAL_ID, "TransactionalId"),
    (RT.DELEGATION_TOKEN, "DelegationToken"), (RT.USER, "User"),
    (OP.READ, "Read"), (OP.WRITE, "Write"), (OP.CREATE, "Create"), (OP.DELETE, "Delete"), (OP.ALTER, "Alter"),
    (OP.DESCRIBE, "Describe"), (OP.CLUSTER_ACTION, "ClusterAction"), (OP.DESCRIBE_CONFIGS, "DescribeConfigs"),
    (OP.ALTER_CONFIGS, "AlterConfigs"), (OP.IDEMPOTENT_WRITE, "IdempotentWrite"), (OP.CREATE_TOKENS, "CreateTokens"),
    (OP.DESCRIBE_TOKENS, "DescribeTokens"), (OP.ALL, "All"),
    (PERM.ALLOW, "Allow"), (PERM.DENY, "Deny"), (PT.LITERAL, "Literal"), (PT.PREFIXED, "Prefixed"),
])
def test_kafka_names_round_trip(member, name) -> None:
    assert member.kafka_name == name
    cls = type(member)
    for spelling in (name, name.upper(), name.lower(), member.name, member.name.lower()):
        assert cls.from_name(spelling) is member


@pytest.mark.parametrize("cls,text", [(RT, "Topics"), (OP, ""), (PERM, "permit"), (PT, "regex"), (RT, "Transactional-Id")])
def test_unknown_names_parse_to_unknown(cls, text) -> None:
    assert cls.from_name(text) is cls.UNKNOWN


def _binding(rt=RT.TOPIC, name="t", pt=PT.LITERAL, principal="User:alice", host="*", op=OP.READ,
             perm=PERM.ALLOW) -> AclBinding:
    return AclBinding(ResourcePattern(rt, name, pt), AccessControlEntry(principal, host, op, perm))


def _pf(rt=RT.ANY, name=None, pt=PT.ANY) -> ResourcePatternFilter:
    return ResourcePatternFilter(rt, name, pt)


@pytest.mark.parametrize("flt,pattern,expected", [
    # ANY resource type / pattern type and a None name match everything.
    (_pf(), ResourcePattern(RT.GROUP, "g", PT.PREFIXED), True),
    (_pf(RT.TOPIC), ResourcePattern(RT.GROUP, "g", PT.LITERAL), False),
    # Exact pattern type compares names exactly.
    (_pf(RT.TOPIC, "t", PT.LITERAL), ResourcePattern(RT.TOPIC, "t", PT.LITERAL), True),
    (_pf(RT.TOPIC, "t", PT.LITERAL), ResourcePattern(RT.TOPIC, "*", PT.LITERAL), False),
    (_pf(RT.TOPIC, "t", PT.LITERAL), ResourcePattern(RT.TOPIC, "t", PT.PREFIXED), False),
    (_pf(RT.TOPIC, "tea", PT.PREFIXED), ResourcePattern(RT.TOPIC, "te", PT.PREFIXED), False),
    # ANY pattern type: any pattern type, exact name only.
    (_pf(RT.TOPIC, "t", PT.ANY), ResourcePattern(RT.TOPIC, "t", PT.PREFIXED), True),
    (_pf(RT.TOPIC, "t", PT.ANY), ResourcePattern(RT.TOPIC, "t", PT.LITERAL), True),
    (_pf(RT.TOPIC, "tea", PT.ANY), ResourcePattern(RT.TOPIC, "te", PT.PREFIXED), False),
    (_pf(RT.TOPIC, "t", PT.ANY), ResourcePattern(RT.TOPIC, "*", PT.LITERAL), False),
    # MATCH: what applies to a resource with that name.
    (_pf(RT.TOPIC, "tea", PT.MATCH), ResourcePattern(RT.TOPIC, "tea", PT.LITERAL), True),
    (_pf(RT.TOPIC, "tea", PT.MATCH), ResourcePattern(RT.TOPIC, "*", PT.LITERAL), True),
    (_pf(RT.TOPIC, "tea", PT.MATCH), ResourcePattern(RT.TOPIC, "te", PT.PREFIXED), True),
    (_pf(RT.TOPIC, "tea", PT.MATCH), ResourcePattern(RT.TOPIC, "tea", PT.PREFIXED), True),
    (_pf(RT.TOPIC, "tea", PT.MATCH), ResourcePattern(RT.TOPIC, "team", PT.PREFIXED), False),
    (_pf(RT.TOPIC, "tea", PT.MATCH), ResourcePattern(RT.TOPIC, "te", PT.LITERAL), False),
    (_pf(RT.TOPIC, "tea", PT.MATCH), ResourcePattern(RT.TOPIC, "*", PT.PREFIXED), False),
    (_pf(RT.TOPIC, None, PT.MATCH), ResourcePattern(RT.TOPIC, "x", PT.PREFIXED), True),
    (_pf(RT.ANY, "tea", PT.MATCH), ResourcePattern(RT.GROUP, "t", PT.PREFIXED), True),
])
def test_resource_pattern_filter(flt, pattern, expected) -> None:
    assert flt.matches(pattern) is expected


@pytest.mark.parametrize("flt,expected", [
    (AccessControlEntryFilter(None, None, OP.ANY, PERM.ANY), True),
    (AccessControlEntryFilter("User:alice", None, OP.ANY, PERM.ANY), True),
    (AccessControlEntryFilter("User:bob", None, OP.ANY, PERM.ANY), False),
    (AccessControlEntryFilter("User:*", None, OP.ANY, PERM.ANY), False),  # not a wildcard inside filters
    (AccessControlEntryFilter(None, "*", OP.ANY, PERM.ANY), False),
    (AccessControlEntryFilter(None, "10.0.0.1", OP.ANY, PERM.ANY), True),
    (AccessControlEntryFilter(None, None, OP.READ, PERM.ANY), True),
    (AccessControlEntryFilter(None, None, OP.ALL, PERM.ANY), False),
    (AccessControlEntryFilter(None, None, OP.ANY, PERM.DENY), False),
    (AccessControlEntryFilter("User:alice", "10.0.0.1", OP.READ, PERM.ALLOW), True),
])
def test_entry_filter(flt, expected) -> None:
    binding = _binding(host="10.0.0.1")
    assert flt.matches(binding.entry) is expected
    assert AclBindingFilter(_pf(), flt).matches(binding) is expected


def test_binding_filters() -> None:
    b = _binding()
    assert ANY_ACL_FILTER.matches(b)
    assert b.to_filter().matches(b)
    assert b.to_filter().matches_at_most_one()
    assert not b.to_filter().matches(_binding(op=OP.WRITE))
    assert not AclBindingFilter(_pf(RT.GROUP), ANY_ACL_FILTER.entry_filter).matches(b)


@pytest.mark.parametrize("flt,reason", [
    (_pf(RT.ANY, "t", PT.LITERAL), "Resource type is ANY."),
    (_pf(RT.UNKNOWN, "t", PT.LITERAL), "Resource type is UNKNOWN."),
    (_pf(RT.TOPIC, None, PT.LITERAL), "Resource name is NULL."),
    (_pf(RT.TOPIC, "t", PT.MATCH), "Resource pattern type is MATCH."),
    (_pf(RT.TOPIC, "t", PT.UNKNOWN), "Resource pattern type is UNKNOWN."),
    (_pf(RT.TOPIC, "t", PT.ANY), None),  # Kafka does not flag ANY here
    (_pf(RT.TOPIC, "t", PT.PREFIXED), None),
])
def test_pattern_filter_indefinite_field(flt, reason) -> None:
    assert flt.find_indefinite_field() == reason


@pytest.mark.parametrize("entry_filter,reason", [
    (AccessControlEntryFilter(None, "*", OP.READ, PERM.ALLOW), "Principal is NULL"),
    (AccessControlEntryFilter("User:a", None, OP.READ, PERM.ALLOW), "Host is NULL"),
    (AccessControlEntryFilter("User:a", "*", OP.ANY, PERM.ALLOW), "Operation is ANY"),
    (AccessControlEntryFilter("User:a", "*", OP.UNKNOWN, PERM.ALLOW), "Operation is UNKNOWN"),
    (AccessControlEntryFilter("User:a", "*", OP.READ, PERM.ANY), "Permission type is ANY"),
    (AccessControlEntryFilter("User:a", "*", OP.READ, PERM.UNKNOWN), "Permission type is UNKNOWN"),
    (AccessControlEntryFilter("User:a", "*", OP.READ, PERM.ALLOW), None),
])
def test_entry_filter_indefinite_field(entry_filter, reason) -> None:
    assert entry_filter.find_indefinite_field() == reason
    full = AclBindingFilter(_pf(RT.TOPIC, "t", PT.LITERAL), entry_filter)
    assert full.find_indefinite_field() == reason
    assert full.matches_at_most_one() is (reason is None)


@pytest.mark.parametrize("binding,reason", [
    (_binding(), None),
    (_binding(pt=PT.PREFIXED, name="orders-"), None),
    (_binding(rt=RT.CLUSTER, name="kafka-cluster", op=OP.IDEMPOTENT_WRITE), None),
    (_binding(name="*", principal="User:*", op=OP.ALL, perm=PERM.DENY), None),
    (_binding(principal="User:"), None),  # Kafka only needs the colon
    (_binding(rt=RT.ANY), "resourceType must not be ANY"),
    (_binding(pt=PT.MATCH), "patternType must not be MATCH"),
    (_binding(pt=PT.ANY), "patternType must not be ANY"),
    (_binding(op=OP.ANY), "operation must not be ANY"),
    (_binding(perm=PERM.ANY), "permissionType must not be ANY"),
    (_binding(rt=RT.UNKNOWN), "You can not create ACL bindings with unknown elements"),
    (_binding(pt=PT.UNKNOWN), "You can not create ACL bindings with unknown elements"),
    (_binding(op=OP.UNKNOWN), "You can not create ACL bindings with unknown elements"),
    (_binding(perm=PERM.UNKNOWN), "You can not create ACL bindings with unknown elements"),
    (_binding(rt=RT.CLUSTER, name="c"), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (_binding(name=""), "Invalid empty resource name"),
    (_binding(name="", pt=PT.PREFIXED), "Invalid empty resource name"),
    (_binding(name="a/b"), "ACL binding contains invalid resource name: a/b"),
    (_binding(principal="alice"), "expected a string in format principalType:principalName but got alice"),
    (_binding(principal=""), "expected a string in format principalType:principalName but got "),
])
def test_validate_binding(binding, reason) -> None:
    assert validate_binding(binding) == reason


@pytest.mark.parametrize("flt,reason", [
    (ANY_ACL_FILTER, None),
    (AclBindingFilter(_pf(RT.TOPIC, "t", PT.MATCH), ANY_ACL_FILTER.entry_filter), None),
    (AclBindingFilter(_pf(RT.UNKNOWN), ANY_ACL_FILTER.entry_filter), "Filter contain UNKNOWN elements"),
    (AclBindingFilter(_pf(pt=PT.UNKNOWN), ANY_ACL_FILTER.entry_filter), "Filter contain UNKNOWN elements"),
    (AclBindingFilter(_pf(), AccessControlEntryFilter(None, None, OP.UNKNOWN, PERM.ANY)),
     "Filter contain UNKNOWN elements"),
    (AclBindingFilter(_pf(), AccessControlEntryFilter(None, None, OP.ANY, PERM.UNKNOWN)),
     "Filter contain UNKNOWN elements"),
])
def test_validate_filter(flt, reason) -> None:
    assert validate_filter(flt) == reason


def test_str_forms() -> None:
    assert str(ResourcePattern(RT.TOPIC, "t", PT.LITERAL)) == "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"

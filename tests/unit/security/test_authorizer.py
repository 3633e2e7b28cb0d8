"""Authorization decisions: Kafka 3.9 AclAuthorizer rules as tables, then against a brute-force model."""
from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.security.acl import (
    ANY_ACL_FILTER, AccessControlEntry, AccessControlEntryFilter, AclBinding, AclBindingFilter, AclOperation,
    AclPermissionType, PatternType, ResourcePattern, ResourcePatternFilter, ResourceType,
)
from broker.security.authorizer import (
    TRACE, AclAuthorizer, AclCache, by_resource_type_log_pattern, decision_log_level, decision_log_line,
    parse_super_users,
)

#: run once, in the native pass of the unit lane (scripts/test.sh): ACL authorization: no record, codec, CRC, varint
#: or index code (no twin) is imported
pytestmark = pytest.mark.twin_independent

RT, PT, OP, PERM = ResourceType, PatternType, AclOperation, AclPermissionType
LIT, PRE = PT.LITERAL, PT.PREFIXED
ALLOW, DENY = PERM.ALLOW, PERM.DENY
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def acl(name: str, op: AclOperation = OP.READ, perm: AclPermissionType = ALLOW, principal: str = ALICE,
        host: str = "*", pt: PatternType = LIT, rt: ResourceType = RT.TOPIC) -> AclBinding:
    return AclBinding(ResourcePattern(rt, name, pt), AccessControlEntry(principal, host, op, perm))


def make(bindings: list[AclBinding], super_users: set[str] = frozenset(), allow_everyone: bool = False
         ) -> AclAuthorizer:
    cache = AclCache()
    for b in bindings:
        cache.add(b.pattern, [b.entry])
    return AclAuthorizer(cache, super_users, allow_everyone)


# (acls, principal, host, operation, topic name, expected)
AUTHORIZE_CASES = [
    pytest.param([acl("t")], ALICE, HOST, OP.READ, "t", True, id="literal allow"),
    pytest.param([acl("t")], BOB, HOST, OP.READ, "t", False, id="other principal"),
    pytest.param([acl("t")], ALICE, HOST, OP.WRITE, "t", False, id="other operation"),
    pytest.param([acl("t")], ALICE, HOST, OP.READ, "u", False, id="other topic, no acls -> default deny"),
    pytest.param([acl("t", rt=RT.GROUP)], ALICE, HOST, OP.READ, "t", False, id="other resource type"),
    pytest.param([acl("t"), acl("t", perm=DENY)], ALICE, HOST, OP.READ, "t", False, id="deny beats allow"),
    pytest.param([acl("t", op=OP.ALL), acl("t", op=OP.WRITE, perm=DENY)], ALICE, HOST, OP.READ, "t", True,
                 id="deny of another op"),
    pytest.param([acl("t"), acl("t", op=OP.ALL, perm=DENY)], ALICE, HOST, OP.READ, "t", False, id="deny ALL"),
    pytest.param([acl("t", op=OP.ALL)], ALICE, HOST, OP.ALTER_CONFIGS, "t", True, id="allow ALL"),
    pytest.param([acl("t", op=OP.READ)], ALICE, HOST, OP.DESCRIBE, "t", True, id="READ implies DESCRIBE"),
    pytest.param([acl("t", op=OP.WRITE)], ALICE, HOST, OP.DESCRIBE, "t", True, id="WRITE implies DESCRIBE"),
    pytest.param([acl("t", op=OP.DELETE)], ALICE, HOST, OP.DESCRIBE, "t", True, id="DELETE implies DESCRIBE"),
    pytest.param([acl("t", op=OP.ALTER)], ALICE, HOST, OP.DESCRIBE, "t", True, id="ALTER implies DESCRIBE"),
    pytest.param([acl("t", op=OP.CREATE)], ALICE, HOST, OP.DESCRIBE, "t", False, id="CREATE does not"),
    pytest.param([acl("t", op=OP.ALTER_CONFIGS)], ALICE, HOST, OP.DESCRIBE_CONFIGS, "t", True,
                 id="ALTER_CONFIGS implies DESCRIBE_CONFIGS"),
    pytest.param([acl("t", op=OP.DESCRIBE)], ALICE, HOST, OP.READ, "t", False, id="no reverse implication"),
    pytest.param([acl("t", op=OP.ALTER)], ALICE, HOST, OP.DESCRIBE_CONFIGS, "t", False, id="ALTER not configs"),
    pytest.param([acl("t", op=OP.READ), acl("t", op=OP.DESCRIBE, perm=DENY)], ALICE, HOST, OP.DESCRIBE, "t",
                 False, id="deny DESCRIBE beats implied allow"),
    pytest.param([acl("t", op=OP.READ), acl("t", op=OP.READ, perm=DENY, principal=BOB)], ALICE, HOST, OP.READ,
                 "t", True, id="deny for someone else"),
    pytest.param([acl("t", principal="User:*")], BOB, HOST, OP.READ, "t", True, id="wildcard principal"),
    pytest.param([acl("t", principal="Group:*")], BOB, HOST, OP.READ, "t", False, id="only User:* is wildcard"),
    pytest.param([acl("t"), acl("t", perm=DENY, principal="User:*")], ALICE, HOST, OP.READ, "t", False,
                 id="wildcard principal deny"),
    pytest.param([acl("t", host=HOST)], ALICE, HOST, OP.READ, "t", True, id="exact host"),
    pytest.param([acl("t", host="10.0.0.2")], ALICE, HOST, OP.READ, "t", False, id="other host"),
    pytest.param([acl("t"), acl("t", host="10.0.0.2", perm=DENY)], ALICE, HOST, OP.READ, "t", True,
                 id="deny from other host"),
    pytest.param([acl("*")], ALICE, HOST, OP.READ, "anything", True, id="wildcard resource"),
    pytest.param([acl("t"), acl("*", perm=DENY)], ALICE, HOST, OP.READ, "t", False, id="wildcard deny"),
    pytest.param([acl("*", pt=PRE)], ALICE, HOST, OP.READ, "t", False, id="prefixed * is a literal prefix"),
    pytest.param([acl("*", pt=PRE)], ALICE, HOST, OP.READ, "*x", True, id="prefixed * matches *x"),
    pytest.param([acl("or", pt=PRE)], ALICE, HOST, OP.READ, "orders", True, id="prefixed allow"),
    pytest.param([acl("orders", pt=PRE)], ALICE, HOST, OP.READ, "orders", True, id="prefix equal to name"),
    pytest.param([acl("ordersx", pt=PRE)], ALICE, HOST, OP.READ, "orders", False, id="longer prefix"),
    pytest.param([acl("Or", pt=PRE)], ALICE, HOST, OP.READ, "orders", False, id="case sensitive"),
    pytest.param([acl("orders"), acl("ord", pt=PRE, perm=DENY)], ALICE, HOST, OP.READ, "orders", False,
                 id="prefixed deny beats literal allow"),
    pytest.param([acl("o", pt=PRE), acl("orders", perm=DENY)], ALICE, HOST, OP.READ, "orders", False,
                 id="literal deny beats prefixed allow"),
    pytest.param([acl("o", pt=PRE), acl("orders", perm=DENY)], ALICE, HOST, OP.READ, "other", True,
                 id="literal deny of another topic"),
    pytest.param([acl("t", perm=PERM.UNKNOWN)], ALICE, HOST, OP.READ, "t", False, id="unknown permission"),
]


@pytest.mark.parametrize("acls,principal,host,op,name,expected", AUTHORIZE_CASES)
def test_authorize(acls, principal, host, op, name, expected) -> None:
    assert make(acls).authorize(principal, host, op, RT.TOPIC, name) is expected


def test_super_users_bypass_denies() -> None:
    authz = make([acl("t", op=OP.ALL, perm=DENY, principal="User:*")], super_users={"User:admin"})
    assert authz.authorize("User:admin", HOST, OP.WRITE, RT.TOPIC, "t")
    assert authz.authorize("User:admin", HOST, OP.CLUSTER_ACTION, RT.CLUSTER, "kafka-cluster")
    assert not authz.authorize(ALICE, HOST, OP.WRITE, RT.TOPIC, "t")
    assert authz.is_super_user("User:admin") and not authz.is_super_user("User:Admin")


def test_allow_everyone_only_when_resource_has_no_acls_at_all() -> None:
    # An ACL for another principal/operation on the resource disables allow.everyone for everybody.
    authz = make([acl("t", principal=BOB, op=OP.WRITE)], allow_everyone=True)
    assert authz.authorize(ALICE, HOST, OP.READ, RT.TOPIC, "other")
    assert not authz.authorize(ALICE, HOST, OP.READ, RT.TOPIC, "t")
    # ACLs reached through the wildcard or a prefix count too.
    authz = make([acl("*", principal=BOB)], allow_everyone=True)
    assert not authz.authorize(ALICE, HOST, OP.READ, RT.TOPIC, "x")
    assert authz.authorize(ALICE, HOST, OP.READ, RT.GROUP, "x")
    authz = make([acl("ab", pt=PRE, principal=BOB)], allow_everyone=True)
    assert not authz.authorize(ALICE, HOST, OP.READ, RT.TOPIC, "abc")
    assert authz.authorize(ALICE, HOST, OP.READ, RT.TOPIC, "a")
    assert not make([], allow_everyone=False).authorize(ALICE, HOST, OP.READ, RT.TOPIC, "t")


# (acls, operation, expected, allow_everyone)
BY_TYPE_CASES = [
    pytest.param([], OP.WRITE, False, False, id="no acls"),
    pytest.param([], OP.WRITE, True, True, id="no acls, allow everyone"),
    pytest.param([acl("t", op=OP.WRITE)], OP.WRITE, True, False, id="literal allow"),
    pytest.param([acl("t", op=OP.ALL)], OP.WRITE, True, False, id="allow ALL"),
    pytest.param([acl("t", op=OP.READ)], OP.WRITE, False, False, id="other op"),
    pytest.param([acl("t", op=OP.READ)], OP.DESCRIBE, False, False, id="no implied ops"),
    pytest.param([acl("t", op=OP.WRITE, principal=BOB)], OP.WRITE, False, False, id="other principal"),
    pytest.param([acl("t", op=OP.WRITE, rt=RT.GROUP)], OP.WRITE, False, False, id="other resource type"),
    pytest.param([acl("t", op=OP.WRITE, pt=PRE)], OP.WRITE, True, False, id="prefixed allow"),
    pytest.param([acl("t", op=OP.WRITE), acl("t", op=OP.WRITE, perm=DENY)], OP.WRITE, False, False,
                 id="same literal denied"),
    pytest.param([acl("t", op=OP.WRITE), acl("u", op=OP.WRITE)] + [acl("t", op=OP.WRITE, perm=DENY)], OP.WRITE,
                 True, False, id="one literal left"),
    pytest.param([acl("t", op=OP.WRITE), acl("*", op=OP.WRITE, perm=DENY)], OP.WRITE, False, True,
                 id="deny * beats allow everyone"),
    pytest.param([acl("t", op=OP.WRITE, perm=DENY)], OP.WRITE, True, True, id="allow everyone despite deny"),
    pytest.param([acl("*", op=OP.WRITE), acl("t", pt=PRE, op=OP.WRITE, perm=DENY)], OP.WRITE, True, False,
                 id="allow * never dominated by prefix"),
    pytest.param([acl("*", op=OP.WRITE), acl("*", op=OP.WRITE, perm=DENY)], OP.WRITE, False, False,
                 id="allow * and deny *"),
    pytest.param([acl("abc", op=OP.WRITE), acl("ab", pt=PRE, op=OP.WRITE, perm=DENY)], OP.WRITE, False, False,
                 id="literal dominated by deny prefix"),
    pytest.param([acl("abc", pt=PRE, op=OP.WRITE), acl("ab", pt=PRE, op=OP.WRITE, perm=DENY)], OP.WRITE, False,
                 False, id="prefix dominated by shorter deny prefix"),
    pytest.param([acl("ab", pt=PRE, op=OP.WRITE), acl("abc", pt=PRE, op=OP.WRITE, perm=DENY)], OP.WRITE, True,
                 False, id="prefix not dominated by longer deny prefix"),
    pytest.param([acl("ab", pt=PRE, op=OP.WRITE), acl("ab", op=OP.WRITE, perm=DENY)], OP.WRITE, True,
                 False, id="prefix not dominated by literal deny"),
    pytest.param([acl("abc", op=OP.WRITE), acl("", pt=PRE, op=OP.WRITE, perm=DENY)], OP.WRITE, False, False,
                 id="empty deny prefix dominates all"),
    pytest.param([acl("t", op=OP.WRITE), acl("x", op=OP.ALL, perm=DENY, principal="User:*", host=HOST)],
                 OP.WRITE, True, False, id="deny elsewhere"),
]


@pytest.mark.parametrize("acls,op,expected,allow_everyone", BY_TYPE_CASES)
def test_authorize_by_resource_type(acls, op, expected, allow_everyone) -> None:
    authz = make(acls, allow_everyone=allow_everyone)
    assert authz.authorize_by_resource_type(ALICE, HOST, op, RT.TOPIC) is expected


def test_authorize_by_resource_type_super_user_and_args() -> None:
    authz = make([acl("*", op=OP.ALL, perm=DENY, principal="User:*")], super_users={BOB})
    assert authz.authorize_by_resource_type(BOB, HOST, OP.WRITE, RT.TOPIC)
    assert not authz.authorize_by_resource_type(ALICE, HOST, OP.WRITE, RT.TOPIC)
    for rt, op in ((RT.ANY, OP.WRITE), (RT.UNKNOWN, OP.WRITE), (RT.TOPIC, OP.ANY), (RT.TOPIC, OP.UNKNOWN)):
        with pytest.raises(ValueError):
            authz.authorize_by_resource_type(ALICE, HOST, op, rt)


def test_cache_add_remove_replace() -> None:
    cache = AclCache()
    p = ResourcePattern(RT.TOPIC, "ab", PRE)
    e1 = AccessControlEntry(ALICE, "*", OP.READ, ALLOW)
    e2 = AccessControlEntry(BOB, "*", OP.READ, DENY)
    assert cache.add(p, [e1, e2])
    assert not cache.add(p, [e1])
    assert cache.acls(p) == {e1, e2} and len(cache) == 2
    assert sorted(cache.matching_acls(RT.TOPIC, "abc"), key=str) == sorted([e1, e2], key=str)
    assert cache.matching_acls(RT.TOPIC, "a") == []
    assert cache.remove(p, [e2]) and cache.acls(p) == {e1}
    assert cache.replace(p, [e2]) and cache.acls(p) == {e2}
    assert cache.replace(p, []) and cache.patterns() == [] and len(cache) == 0
    assert cache.matching_acls(RT.TOPIC, "abc") == []
    assert not cache.remove(p, [e1])
    with pytest.raises(ValueError):
        cache.replace(ResourcePattern(RT.TOPIC, "x", PT.MATCH), [e1])


def test_cache_literal_wildcard_lookup() -> None:
    cache = AclCache()
    e = AccessControlEntry(ALICE, "*", OP.READ, ALLOW)
    cache.add(ResourcePattern(RT.TOPIC, "*", LIT), [e])
    assert cache.matching_acls(RT.TOPIC, "*") == [e]  # not counted twice
    assert cache.matching_acls(RT.TOPIC, "x") == [e]


def test_describe() -> None:
    bindings = [acl("t"), acl("t", pt=PRE, perm=DENY), acl("*", principal=BOB), acl("g", rt=RT.GROUP)]
    authz = make(bindings)
    assert authz.describe(ANY_ACL_FILTER) == sorted(bindings, key=lambda b: (
        b.pattern.resource_type, b.pattern.pattern_type, b.pattern.name, b.entry.principal))
    match_t = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "tx", PT.MATCH), ANY_ACL_FILTER.entry_filter)
    assert set(authz.describe(match_t)) == {bindings[1], bindings[2]}
    bob = AclBindingFilter(ResourcePatternFilter(RT.ANY, None, PT.ANY),
                           AccessControlEntryFilter(BOB, None, OP.ANY, PERM.ANY))
    assert authz.describe(bob) == [bindings[2]]


def test_decision_log_line() -> None:
    line = decision_log_line(ALICE, "127.0.0.1", OP.READ, ResourcePattern(RT.TOPIC, "t1", LIT), False, "Fetch")
    assert line == ("Principal = User:alice is Denied Operation = Read from host = 127.0.0.1 on resource = "
                    "Topic:LITERAL:t1 for request = Fetch with resourceRefCount = 1")
    line = decision_log_line(ALICE, "::1", OP.WRITE, by_resource_type_log_pattern(RT.TOPIC), True,
                             "InitProducerId", 0)
    assert line == ("Principal = User:alice is Allowed Operation = Write from host = ::1 on resource = "
                    "Topic:UNKNOWN:NONE for request = InitProducerId with resourceRefCount = 0")
    assert decision_log_level(True) == logging.DEBUG
    assert decision_log_level(False) == logging.INFO
    assert decision_log_level(True, log_if_allowed=False) == TRACE
    assert decision_log_level(False, log_if_denied=False) == TRACE


def test_parse_super_users() -> None:
    assert parse_super_users(" User:admin ; User:kafka;;") == {"User:admin", "User:kafka"}
    assert parse_super_users("") == set() and parse_super_users(None) == set()


# --- property tests against a deliberately naive model --------------------------------------------------------

NAMES = ["a", "ab", "abc", "b", "ba", "*"]
PRINCIPALS = [ALICE, BOB, "User:*"]
HOSTS = ["h1", "h2", "*"]
OPS = [OP.ALL, OP.READ, OP.WRITE, OP.CREATE, OP.DELETE, OP.ALTER, OP.DESCRIBE, OP.DESCRIBE_CONFIGS,
       OP.ALTER_CONFIGS]
QUERY_OPS = [op for op in OPS if op is not OP.ALL] + [OP.IDEMPOTENT_WRITE]

bindings_st = st.lists(st.builds(
    lambda rt, name, pt, principal, host, op, perm: AclBinding(
        ResourcePattern(rt, name, pt), AccessControlEntry(principal, host, op, perm)),
    st.sampled_from([RT.TOPIC, RT.GROUP]), st.sampled_from(NAMES), st.sampled_from([LIT, PRE]),
    st.sampled_from(PRINCIPALS), st.sampled_from(HOSTS), st.sampled_from(OPS), st.sampled_from([ALLOW, DENY]),
), max_size=12)
query_st = st.tuples(st.sampled_from([ALICE, BOB]), st.sampled_from(["h1", "h2"]), st.sampled_from(QUERY_OPS),
                     st.sampled_from([RT.TOPIC, RT.GROUP]), st.sampled_from(NAMES + ["c", "abcd"]))


def model_authorize(bindings, supers, allow_everyone, principal, host, op, rt, name) -> bool:
    """Brute force over the binding list, straight from the documented rules."""
    if principal in supers:
        return True
    relevant = [b for b in bindings if b.pattern.resource_type == rt and (
        (b.pattern.pattern_type == LIT and b.pattern.name in (name, "*"))
        or (b.pattern.pattern_type == PRE and name.startswith(b.pattern.name)))]
    if not relevant:
        return allow_everyone

    def applies(b: AclBinding, ops: set) -> bool:
        e = b.entry
        return e.principal in (principal, "User:*") and e.host in (host, "*") and (e.operation in ops or
                                                                                  e.operation == OP.ALL)

    if any(b.entry.permission_type == DENY and applies(b, {op}) for b in relevant):
        return False
    implied = {op}
    if op == OP.DESCRIBE:
        implied |= {OP.READ, OP.WRITE, OP.DELETE, OP.ALTER}
    if op == OP.DESCRIBE_CONFIGS:
        implied.add(OP.ALTER_CONFIGS)
    return any(b.entry.permission_type == ALLOW and applies(b, implied) for b in relevant)


def model_by_resource_type(bindings, supers, allow_everyone, principal, host, op, rt) -> bool:
    """Kafka's KIP-679 algorithm spelled out over the raw list."""
    if principal in supers:
        return True
    mine = [b for b in bindings if b.pattern.resource_type == rt and b.entry.principal in (principal, "User:*")
            and b.entry.host in (host, "*") and b.entry.operation in (op, OP.ALL)]

    def names(perm, pt):
        return {b.pattern.name for b in mine if b.entry.permission_type == perm and b.pattern.pattern_type == pt}

    deny_lit, deny_pre = names(DENY, LIT), names(DENY, PRE)
    if "*" in deny_lit:
        return False
    if allow_everyone:
        return True

    def dominated(n: str) -> bool:
        return any(n.startswith(d) for d in deny_pre)

    return (any(not dominated(p) for p in names(ALLOW, PRE))
            or any(n == "*" or (n not in deny_lit and not dominated(n)) for n in names(ALLOW, LIT)))


@settings(max_examples=400, deadline=None)
@given(bindings_st, st.booleans(), st.booleans(), query_st)
def test_authorize_matches_model(bindings, bob_is_super, allow_everyone, query) -> None:
    supers = {BOB} if bob_is_super else set()
    authz = make(bindings, supers, allow_everyone)
    principal, host, op, rt, name = query
    assert authz.authorize(principal, host, op, rt, name) == model_authorize(
        bindings, supers, allow_everyone, principal, host, op, rt, name)


@settings(max_examples=400, deadline=None)
@given(bindings_st, st.booleans(), st.booleans(), query_st)
def test_authorize_by_resource_type_matches_model(bindings, bob_is_super, allow_everyone, query) -> None:
    supers = {BOB} if bob_is_super else set()
    authz = make(bindings, supers, allow_everyone)
    principal, host, op, rt, _ = query
    assert authz.authorize_by_resource_type(principal, host, op, rt) == model_by_resource_type(
        bindings, supers, allow_everyone, principal, host, op, rt)


@settings(max_examples=400, deadline=None)
@given(bindings_st, st.booleans(), query_st)
def test_allowed_resource_implies_allowed_by_type(bindings, allow_everyone, query) -> None:
    """KIP-679's soundness: if some resource of the type is authorized, the by-type check agrees (implied
    operations aside, which authorize_by_resource_type deliberately ignores)."""
    principal, host, op, rt, name = query
    if op in (OP.DESCRIBE, OP.DESCRIBE_CONFIGS):
        return
    authz = make(bindings, allow_everyone=allow_everyone)
    if authz.authorize(principal, host, op, rt, name):
        assert authz.authorize_by_resource_type(principal, host, op, rt)


@settings(max_examples=200, deadline=None)
@given(bindings_st, st.lists(st.integers(min_value=0, max_value=11), max_size=6))
def test_cache_replace_keeps_index_consistent(bindings, removals) -> None:
    """After arbitrary adds and per-pattern removals the cache equals a plain set of what is left."""
    cache = AclCache()
    expected = set(bindings)
    for b in bindings:
        cache.add(b.pattern, [b.entry])
    for i in removals:
        if i < len(bindings):
            pattern = bindings[i].pattern
            cache.replace(pattern, [])
            expected = {b for b in expected if b.pattern != pattern}
    assert set(cache.bindings()) == expected
    for rt in (RT.TOPIC, RT.GROUP):
        for name in NAMES + ["abcd"]:
            want = [b.entry for b in expected if b.pattern.resource_type == rt and (
                (b.pattern.pattern_type == LIT and b.pattern.name in (name, "*"))
                or (b.pattern.pattern_type == PRE and name.startswith(b.pattern.name)))]
            assert sorted(cache.matching_acls(rt, name), key=str) == sorted(want, key=str)

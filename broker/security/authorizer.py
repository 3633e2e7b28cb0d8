"""Authorization decisions with the semantics of Kafka 3.9's AclAuthorizer (ZooKeeper mode), independent of storage.

`AclCache` holds the ACLs per resource pattern exactly as the ZooKeeper store hands them over (one znode = one
pattern's full ACL set); `AclAuthorizer` answers questions against it. Neither does I/O: whoever watches ZooKeeper
calls `AclCache.replace` on change notifications, and whoever serves requests calls `authorize` and logs
`decision_log_line`.
"""
from __future__ import annotations

import logging
from collections import Counter
from typing import Iterable, Iterator

from broker.security.acl import (
    WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE, AccessControlEntry, AclBinding, AclBindingFilter,
    AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType,
)

_Key = tuple[PatternType, str]
_Aces = frozenset[AccessControlEntry]

# Allowing any of these operations also allows the key operation (Kafka's ACL inheritance); ALL allows everything.
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}

TRACE = 5  # Kafka logs non-explicit decisions at TRACE, a level Python's logging lacks.


class AclCache:
    """ACL sets keyed by resource pattern, indexed for the authorizer's lookups.

    Kept per resource type, then by (pattern type, name); the lengths of stored prefixes are counted so that
    finding the prefixed patterns of a name costs one lookup per distinct prefix length, not per stored prefix.
    """

    def __init__(self) -> None:
        self._by_type: dict[ResourceType, dict[_Key, _Aces]] = {}
        self._prefix_lengths: dict[ResourceType, Counter[int]] = {}

    def acls(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        """The ACL set of one pattern (empty if none)."""
        return self._by_type.get(pattern.resource_type, {}).get((pattern.pattern_type, pattern.name), frozenset())

    def replace(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> bool:
        """Make `entries` the whole ACL set of `pattern` (empty removes it), as a ZooKeeper read provides them.

        Returns whether anything changed.
        """
        if not pattern.pattern_type.is_specific:
            raise ValueError(f"only LITERAL and PREFIXED patterns can hold ACLs, got {pattern}")
        new = frozenset(entries)
        table = self._by_type.setdefault(pattern.resource_type, {})
        key = (pattern.pattern_type, pattern.name)
        old = table.get(key, frozenset())
        if new == old:
            if not table:
                del self._by_type[pattern.resource_type]
            return False
        lengths = self._prefix_lengths.setdefault(pattern.resource_type, Counter())
        if new:
            table[key] = new
            if not old and pattern.pattern_type is PatternType.PREFIXED:
                lengths[len(pattern.name)] += 1
        else:
            del table[key]
            if pattern.pattern_type is PatternType.PREFIXED:
                lengths[len(pattern.name)] -= 1
                if not lengths[len(pattern.name)]:
                    del lengths[len(pattern.name)]
            if not table:
                del self._by_type[pattern.resource_type]
        return True

    def add(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> bool:
        """Add entries to the pattern's set; returns whether anything changed."""
        return self.replace(pattern, self.acls(pattern) | frozenset(entries))

    def remove(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> bool:
        """Remove entries from the pattern's set; returns whether anything changed."""
        return self.replace(pattern, self.acls(pattern) - frozenset(entries))

    def clear(self) -> None:
        self._by_type.clear()
        self._prefix_lengths.clear()

    def patterns(self) -> list[ResourcePattern]:
        """Every pattern that currently has ACLs."""
        return [ResourcePattern(rt, name, pt) for rt, table in self._by_type.items() for (pt, name) in table]

    def bindings(self) -> Iterator[AclBinding]:
        for rt, table in self._by_type.items():
            for (pt, name), aces in table.items():
                pattern = ResourcePattern(rt, name, pt)
                for ace in aces:
                    yield AclBinding(pattern, ace)

    def __len__(self) -> int:
        """The number of bindings (ACLs), not patterns."""
        return sum(len(aces) for table in self._by_type.values() for aces in table.values())

    def of_type(self, resource_type: ResourceType) -> Iterator[tuple[PatternType, str, _Aces]]:
        """(pattern type, name, entries) of every pattern of one resource type."""
        for (pt, name), aces in self._by_type.get(resource_type, {}).items():
            yield pt, name, aces

    def matching_acls(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """Every ACL that applies to the resource whatever the principal: literal name, literal `*`, prefixes.

        Like Kafka's ordered-map range scan, an (uncreatable) empty prefix only covers the empty name.
        """
        table = self._by_type.get(resource_type)
        if not table:
            return []
        found: list[AccessControlEntry] = []
        wildcard = table.get((PatternType.LITERAL, WILDCARD_RESOURCE))
        if wildcard:
            found.extend(wildcard)
        if name != WILDCARD_RESOURCE:
            literal = table.get((PatternType.LITERAL, name))
            if literal:
                found.extend(literal)
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name) or (length == 0 and name):
                continue
            prefixed = table.get((PatternType.PREFIXED, name[:length]))
            if prefixed:
                found.extend(prefixed)
        return found


def _principal_and_host_apply(ace: AccessControlEntry, principal: str, host: str) -> bool:
    return ((ace.principal == principal or ace.principal == WILDCARD_PRINCIPAL)
            and (ace.host == host or ace.host == WILDCARD_HOST))


class AclAuthorizer:
    """Kafka's AclAuthorizer decisions over an `AclCache` that the caller keeps in sync with the store."""

    def __init__(self, cache: AclCache, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.cache = cache
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found

    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  resource_name: str) -> bool:
        """May `principal` connecting from `host` perform `operation` on the named (literal) resource?

        Super users always may. Otherwise the ACLs applying to the resource are collected (any principal); if there
        are none at all, `allow.everyone.if.no.acl.found` decides. Else a matching DENY for the operation (or ALL)
        refuses, and a matching ALLOW for the operation, ALL or an operation implying it grants.
        """
        if principal in self.super_users:
            return True
        acls = self.cache.matching_acls(resource_type, resource_name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        allow_ops = _IMPLIED_BY.get(operation)
        allowed = False
        for ace in acls:
            if not _principal_and_host_apply(ace, principal, host):
                continue
            op = ace.operation
            if ace.permission_type is AclPermissionType.DENY:
                if op == operation or op is AclOperation.ALL:
                    return False
            elif not allowed and ace.permission_type is AclPermissionType.ALLOW:
                allowed = op is AclOperation.ALL or op == operation or (allow_ops is not None and op in allow_ops)
        return allowed

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """KIP-679: could the principal perform `operation` on at least one resource of this type?

        Used e.g. for the IDEMPOTENT_WRITE fallback "WRITE on any topic". Only the operation itself and ALL count
        (no implied operations). A literal `*` DENY refuses outright; then `allow.everyone.if.no.acl.found` grants
        (Kafka checks it here whether or not ACLs exist); otherwise an ALLOW grants unless a DENY dominates it:
        a literal allow is dominated by the same literal deny or a deny prefix of it, a prefixed allow by a deny
        prefix of its prefix (including the empty prefix); an allow of literal `*` is never dominated.
        """
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"authorize_by_resource_type needs a concrete resource type, got {resource_type.name}")
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"authorize_by_resource_type needs a concrete operation, got {operation.name}")
        if principal in self.super_users:
            return True
        deny_literals: set[str] = set()
        deny_prefixes: set[str] = set()
        allow_literals: set[str] = set()
        allow_prefixes: set[str] = set()
        for pattern_type, name, aces in self.cache.of_type(resource_type):
            for ace in aces:
                if ace.operation != operation and ace.operation is not AclOperation.ALL:
                    continue
                if not _principal_and_host_apply(ace, principal, host):
                    continue
                deny = ace.permission_type is AclPermissionType.DENY
                if not deny and ace.permission_type is not AclPermissionType.ALLOW:
                    continue
                if pattern_type is PatternType.LITERAL:
                    (deny_literals if deny else allow_literals).add(name)
                elif pattern_type is PatternType.PREFIXED:
                    (deny_prefixes if deny else allow_prefixes).add(name)
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True

        def dominated(name: str) -> bool:
            return any(name[:i] in deny_prefixes for i in range(len(name) + 1))

        if any(not dominated(prefix) for prefix in allow_prefixes):
            return True
        return any(literal == WILDCARD_RESOURCE or (literal not in deny_literals and not dominated(literal))
                   for literal in allow_literals)

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """All ACLs matching the filter, in a stable order (resource type, pattern type, name, entry)."""
        found = [b for b in self.cache.bindings() if binding_filter.matches(b)]
        found.sort(key=_binding_sort_key)
        return found


def _binding_sort_key(b: AclBinding) -> tuple[int, int, str, str, str, int, int]:
    e = b.entry
    return (b.pattern.resource_type, b.pattern.pattern_type, b.pattern.name, e.principal, e.host, e.operation,
            e.permission_type)


def parse_super_users(value: str | None) -> set[str]:
    """`super.users` as Kafka reads it: principals separated by ';', each trimmed; empty entries are ignored."""
    if not value:
        return set()
    return {p.strip() for p in value.split(";") if p.strip()}


def by_resource_type_log_pattern(resource_type: ResourceType) -> ResourcePattern:
    """The placeholder resource Kafka logs for authorize_by_resource_type decisions (with resourceRefCount 0)."""
    return ResourcePattern(resource_type, "NONE", PatternType.UNKNOWN)


def decision_log_line(principal: str, host: str, operation: AclOperation, pattern: ResourcePattern,
                      authorized: bool, request: str, resource_ref_count: int = 1) -> str:
    """The audit line of Kafka's `kafka.authorizer.logger`, so existing log tooling keeps working.

    `request` is the API name as Kafka prints it (ApiKeys.name, e.g. "Fetch", "Produce").
    """
    result = "Allowed" if authorized else "Denied"
    resource = f"{pattern.resource_type.kafka_name}:{pattern.pattern_type.name}:{pattern.name}"
    return (f"Principal = {principal} is {result} Operation = {operation.kafka_name} from host = {host} "
            f"on resource = {resource} for request = {request} with resourceRefCount = {resource_ref_count}")


def decision_log_level(authorized: bool, log_if_allowed: bool = True, log_if_denied: bool = True) -> int:
    """Kafka's level for the audit line: explicit grants at DEBUG, explicit refusals at INFO, the rest at TRACE."""
    if authorized:
        return logging.DEBUG if log_if_allowed else TRACE
    return logging.INFO if log_if_denied else TRACE

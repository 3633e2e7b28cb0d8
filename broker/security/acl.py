"""The ACL model of Kafka's authorizer (Kafka 3.9): enums with Kafka's wire codes and names, bindings, filters and
the validation Kafka applies before an ACL may be created.

Pure data and rules only; storage (acl_zk_format) and decisions (authorizer) build on this module.

Names: Kafka stores and prints enums in PascalCase ("TransactionalId", "DescribeConfigs", "Allow") and parses them
like SecurityUtils does: the exact PascalCase name, else the upper-cased input compared with the upper-cased
PascalCase name. We additionally accept the Java enum constant name in any case ("TRANSACTIONAL_ID", "prefixed"),
which is what the Java enums' fromString accepts, so text written by either path parses. Unknown text maps to
UNKNOWN, never an exception, because Kafka treats unknown names as values that match nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from functools import cache
from typing import TypeVar

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_RESOURCE_NAME = "kafka-cluster"

_E = TypeVar("_E", bound="KafkaEnum")


def _pascal(constant: str) -> str:
    return "".join(part[:1].upper() + part[1:].lower() for part in constant.split("_"))


@cache
def _names(cls: type[IntEnum]) -> dict[str, IntEnum]:
    """Upper-cased accepted spellings of each member of one enum, built once per enum."""
    table: dict[str, IntEnum] = {}
    for member in cls:
        table[member.name] = member
        table[_pascal(member.name).upper()] = member
    return table


class KafkaEnum(IntEnum):
    """Shared naming for Kafka's ACL enums (members are defined by the subclasses)."""

    @property
    def kafka_name(self) -> str:
        """The PascalCase name Kafka writes into ZooKeeper JSON and prints in kafka-acls output."""
        return _pascal(self.name)

    @classmethod
    def from_name(cls: type[_E], text: str) -> _E:
        """Parse a Kafka name case-insensitively; unknown text gives UNKNOWN, as Kafka's parsers do."""
        return _names(cls).get(text.upper(), cls["UNKNOWN"])  # type: ignore[return-value]

    @classmethod
    def from_code(cls: type[_E], code: int) -> _E:
        """Decode a wire code; codes this broker does not know become UNKNOWN, as in Kafka's fromCode."""
        try:
            return cls(code)
        except ValueError:
            return cls["UNKNOWN"]


class ResourceType(KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @property
    def is_specific(self) -> bool:
        """Whether a stored ACL may carry this pattern type (the others exist only in filters)."""
        return self in (PatternType.LITERAL, PatternType.PREFIXED)


class AclOperation(KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True)
class ResourcePattern:
    """A stored pattern: LITERAL (exact name or the `*` wildcard) or PREFIXED (name is a prefix)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def to_filter(self) -> ResourcePatternFilter:
        """The filter that matches exactly this pattern (used to describe or delete one resource's ACLs)."""
        return ResourcePatternFilter(self.resource_type, self.name, self.pattern_type)

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


@dataclass(frozen=True)
class AccessControlEntry:
    """Who (principal "Type:name"), from where (host), may or may not (permission) do what (operation)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def to_filter(self) -> AccessControlEntryFilter:
        """The filter that matches exactly this entry."""
        return AccessControlEntryFilter(self.principal, self.host, self.operation, self.permission_type)

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")


@dataclass(frozen=True)
class AclBinding:
    """One ACL: an entry bound to a resource pattern."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    def to_filter(self) -> AclBindingFilter:
        """The filter that matches exactly this binding."""
        return AclBindingFilter(self.pattern.to_filter(), self.entry.to_filter())

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"


@dataclass(frozen=True)
class ResourcePatternFilter:
    """Selects patterns for DescribeAcls/DeleteAcls; ANY and a None name are wildcards, MATCH resolves patterns."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        """Kafka's ResourcePatternFilter.matches.

        A filter of type ANY or of the pattern's own type compares names exactly; MATCH instead asks which stored
        patterns would apply to a resource of that name (the name itself, the literal `*`, or a prefix of it).
        """
        if self.resource_type is not ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if (self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
                and self.pattern_type != pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type is PatternType.ANY or self.pattern_type == pattern.pattern_type:
            return self.name == pattern.name
        # pattern_type is MATCH from here on.
        if pattern.pattern_type is PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type is PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        # Kafka throws here; a stored pattern is always LITERAL or PREFIXED, so "no match" is the safe reading.
        return False

    def find_indefinite_field(self) -> str | None:
        """Why this filter may match more than one pattern (Kafka's wording), or None."""
        if self.resource_type is ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type is ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type is PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type is PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    @property
    def is_unknown(self) -> bool:
        return self.resource_type is ResourceType.UNKNOWN or self.pattern_type is PatternType.UNKNOWN


@dataclass(frozen=True)
class AccessControlEntryFilter:
    """Selects entries; None principal/host and ANY operation/permission match anything, the rest exactly.

    Note that `User:*` or host `*` in a filter are not wildcards: they select the wildcard ACLs themselves.
    """

    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission_type is AclPermissionType.ANY or self.permission_type == entry.permission_type

    def find_indefinite_field(self) -> str | None:
        """Why this filter may match more than one entry (Kafka's wording), or None."""
        if self.principal is None:
            return "Principal is NULL"
        if self.host is None:
            return "Host is NULL"
        if self.operation is AclOperation.ANY:
            return "Operation is ANY"
        if self.operation is AclOperation.UNKNOWN:
            return "Operation is UNKNOWN"
        if self.permission_type is AclPermissionType.ANY:
            return "Permission type is ANY"
        if self.permission_type is AclPermissionType.UNKNOWN:
            return "Permission type is UNKNOWN"
        return None

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    @property
    def is_unknown(self) -> bool:
        return self.operation is AclOperation.UNKNOWN or self.permission_type is AclPermissionType.UNKNOWN


@dataclass(frozen=True)
class AclBindingFilter:
    """A pattern filter and an entry filter; a binding matches when both parts match."""

    pattern_filter: ResourcePatternFilter
    entry_filter: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)

    def find_indefinite_field(self) -> str | None:
        return self.pattern_filter.find_indefinite_field() or self.entry_filter.find_indefinite_field()

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    @property
    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown or self.entry_filter.is_unknown


ANY_ACL_FILTER = AclBindingFilter(
    ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
    AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY),
)


def principal_parse_error(principal: str) -> str | None:
    """Kafka's SecurityUtils.parseKafkaPrincipal check: only a colon separating type and name is required."""
    if not principal or ":" not in principal:
        return f"expected a string in format principalType:principalName but got {principal}"
    return None


def validate_binding(binding: AclBinding) -> str | None:
    """Why Kafka (ZooKeeper mode) refuses to create this ACL, in its wording, or None if it may be created.

    Checks run in Kafka's order: ResourcePattern / AccessControlEntry constructors (ANY, MATCH), CreateAclsRequest
    validation (UNKNOWN elements), KafkaApis (cluster name, empty name), AclAuthorizer ('/' would break the znode
    path) and finally principal parsing when the ACL entry is built.
    """
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type is ResourceType.ANY:
        return "resourceType must not be ANY"
    if pattern.pattern_type in (PatternType.MATCH, PatternType.ANY):
        return f"patternType must not be {pattern.pattern_type.name}"
    if entry.operation is AclOperation.ANY:
        return "operation must not be ANY"
    if entry.permission_type is AclPermissionType.ANY:
        return "permissionType must not be ANY"
    if (pattern.resource_type is ResourceType.UNKNOWN or pattern.pattern_type is PatternType.UNKNOWN
            or entry.operation is AclOperation.UNKNOWN or entry.permission_type is AclPermissionType.UNKNOWN):
        return "You can not create ACL bindings with unknown elements"
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_RESOURCE_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_RESOURCE_NAME}"
    if not pattern.name:
        return "Invalid empty resource name"
    if "/" in pattern.name:
        return f"ACL binding contains invalid resource name: {pattern.name}"
    return principal_parse_error(entry.principal)


def validate_filter(binding_filter: AclBindingFilter) -> str | None:
    """Why Kafka refuses a DescribeAcls/DeleteAcls filter, or None: only UNKNOWN elements are refused."""
    if binding_filter.is_unknown:
        return "Filter contain UNKNOWN elements"
    return None

"""Kafka's ZooKeeper representation of ACLs (ZooKeeper mode, Kafka 3.9), as pure functions.

Byte-compatible with Kafka's ZkAclStore / ZkAclChangeStore / AclEntry so that Kafka brokers and kafka-acls
(--authorizer-properties zookeeper.connect=...) share ACLs with us. Verified against Kafka's ZkData.scala and
AclEntry.java:

  /kafka-acl/<Type>/<name>                      LITERAL ACLs of one resource
  /kafka-acl-extended/prefixed/<Type>/<name>    PREFIXED ACLs (the pattern type's enum name, lower-cased)
      value: {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}
      <Type> is the PascalCase resource type ("Topic", "TransactionalId"); <name> is written raw, not URL-encoded
      (Kafka refuses to create ACLs whose name contains '/').
  /kafka-acl-changes/acl_changes_<10 digits>    (persistent sequential) change of a LITERAL pattern; data is the
      legacy string "<Java enum name>:<name>", e.g. "TOPIC:orders" (Kafka writes ResourceType.toString, i.e.
      "TOPIC", and reads it back case-insensitively).
  /kafka-acl-extended-changes/acl_changes_<10 digits>   change of any other pattern; data is JSON with Java enum
      names: {"version":1,"resourceType":"TOPIC","name":"orders","patternType":"PREFIXED"}

A change notification only says "re-read this pattern's znode"; the reader then replaces the cached set.
"""
from __future__ import annotations

import json
from typing import Any, Iterable

from broker.security.acl import (
    AccessControlEntry, AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType,
    principal_parse_error,
)

LITERAL_ACL_ROOT = "/kafka-acl"
EXTENDED_ACL_ROOT = "/kafka-acl-extended"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
CHANGE_SEQUENCE_PREFIX = "acl_changes_"
ACL_VERSION = 1
CHANGE_EVENT_VERSION = 1


def _json(obj: Any) -> bytes:
    # Compact, UTF-8, non-ASCII unescaped: what Kafka's Jackson-based Json.encodeAsBytes produces.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def store_root(pattern_type: PatternType) -> str:
    """The znode under which one pattern type's ACLs live; its children are resource type names."""
    if pattern_type is PatternType.LITERAL:
        return LITERAL_ACL_ROOT
    if pattern_type is PatternType.PREFIXED:
        return f"{EXTENDED_ACL_ROOT}/{pattern_type.name.lower()}"
    raise ValueError(f"no ACL store for pattern type {pattern_type.name}")


def store_roots() -> tuple[str, ...]:
    """Every ACL and change-notification root a broker creates at startup (Kafka's createAclPaths)."""
    return (store_root(PatternType.LITERAL), store_root(PatternType.PREFIXED), LITERAL_CHANGES_PATH,
            EXTENDED_CHANGES_PATH)


def resource_type_dir(pattern_type: PatternType, resource_type: ResourceType) -> str:
    """The znode whose children are the resource names that have ACLs of this pattern and resource type."""
    return f"{store_root(pattern_type)}/{resource_type.kafka_name}"


def acl_path(pattern: ResourcePattern) -> str:
    """The znode holding one pattern's ACL set."""
    if pattern.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise ValueError(f"no ACL path for resource type {pattern.resource_type.name}")
    return f"{resource_type_dir(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def _resource_type_segment(segment: str) -> ResourceType:
    resource_type = ResourceType.from_name(segment)
    if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        # Kafka skips such directories with a warning when loading; the caller can do the same.
        raise ValueError(f"unknown ACL resource type {segment!r}")
    return resource_type


def pattern_from_path(path: str) -> ResourcePattern:
    """The pattern whose ACLs a znode holds (inverse of acl_path); the name is everything after the type."""
    for pattern_type in (PatternType.PREFIXED, PatternType.LITERAL):
        root = store_root(pattern_type) + "/"
        if path.startswith(root):
            type_segment, sep, name = path[len(root):].partition("/")
            if not sep or not name:
                break
            return ResourcePattern(_resource_type_segment(type_segment), name, pattern_type)
    raise ValueError(f"not an ACL znode path: {path!r}")


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """A pattern's ACL set as Kafka stores it in the znode (entries sorted for a stable byte form)."""
    acls = [{"principal": e.principal, "permissionType": e.permission_type.kafka_name,
             "operation": e.operation.kafka_name, "host": e.host}
            for e in sorted(set(entries), key=lambda e: (e.principal, e.host, e.operation, e.permission_type))]
    return _json({"version": ACL_VERSION, "acls": acls})


def _str_field(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise ValueError(f"ACL entry field {key!r} must be a string, got {value!r}")
    return value


def decode_acls(data: bytes | None) -> set[AccessControlEntry]:
    """Parse a pattern's znode value; empty data means no ACLs, as in Kafka.

    Unknown extra fields are ignored and unknown operation/permission names become UNKNOWN (such entries never
    match), as Kafka does. Malformed JSON, a version other than 1 or a bad principal raise ValueError (Kafka
    would silently read unparsable JSON as "no ACLs"; the caller should rather notice).
    """
    if not data:
        return set()
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"ACL znode data is not valid JSON: {e}") from e
    if not isinstance(doc, dict):
        raise ValueError("ACL znode data must be a JSON object")
    version = doc.get("version")
    if type(version) is not int or version != ACL_VERSION:
        raise ValueError(f"unsupported ACL znode version {version!r}")
    items = doc.get("acls")
    if not isinstance(items, list):
        raise ValueError("ACL znode data has no 'acls' array")
    entries: set[AccessControlEntry] = set()
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"ACL entry must be a JSON object, got {item!r}")
        principal = _str_field(item, "principal")
        error = principal_parse_error(principal)
        if error:
            raise ValueError(error)
        entries.add(AccessControlEntry(
            principal=principal,
            host=_str_field(item, "host"),
            operation=AclOperation.from_name(_str_field(item, "operation")),
            permission_type=AclPermissionType.from_name(_str_field(item, "permissionType")),
        ))
    return entries


def change_notification(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(parent path, data) of the sequential znode announcing that a pattern's ACLs changed.

    Create it as a persistent sequential node at f"{parent}/{CHANGE_SEQUENCE_PREFIX}".
    """
    if pattern.pattern_type is PatternType.LITERAL:
        return LITERAL_CHANGES_PATH, f"{pattern.resource_type.name}:{pattern.name}".encode("utf-8")
    if pattern.pattern_type is PatternType.PREFIXED:
        return EXTENDED_CHANGES_PATH, _json({"version": CHANGE_EVENT_VERSION,
                                             "resourceType": pattern.resource_type.name,
                                             "name": pattern.name,
                                             "patternType": pattern.pattern_type.name})
    raise ValueError(f"no change notifications for pattern type {pattern.pattern_type.name}")


def parse_change_notification(parent_path: str, data: bytes) -> ResourcePattern:
    """The pattern a change notification under `parent_path` refers to; ValueError if it cannot be used."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"ACL change notification is not UTF-8: {e}") from e
    parent = parent_path.rstrip("/")
    if parent == LITERAL_CHANGES_PATH:
        type_text, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"expected a string in format ResourceType:ResourceName but got {text}")
        return ResourcePattern(_resource_type_segment(type_text), name, PatternType.LITERAL)
    if parent == EXTENDED_CHANGES_PATH:
        try:
            event = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"Failed to parse ACL change event: {e}") from e
        if not isinstance(event, dict):
            raise ValueError("Failed to parse ACL change event: not a JSON object")
        version = event.get("version")
        if type(version) is not int or version > CHANGE_EVENT_VERSION:
            raise ValueError(f"Acl change event received for unsupported version: {version!r}")
        fields = [event.get(k) for k in ("resourceType", "name", "patternType")]
        strings = [f for f in fields if isinstance(f, str)]
        if len(strings) != len(fields):
            raise ValueError(f"Failed to parse ACL change event: {text}")
        type_text, name, pattern_text = strings
        pattern_type = PatternType.from_name(pattern_text)
        if not pattern_type.is_specific:
            raise ValueError(f"Failed to convert ACL change event to resource: pattern type {pattern_text!r}")
        return ResourcePattern(_resource_type_segment(type_text), name, pattern_type)
    raise ValueError(f"not an ACL change notification path: {parent_path!r}")

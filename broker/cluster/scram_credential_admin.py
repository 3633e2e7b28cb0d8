"""DescribeUserScramCredentials / AlterUserScramCredentials against ZooKeeper (KIP-554), as Kafka 3.9's
ZkAdminManager answers them.

A user's SCRAM credentials live beside its client quotas in ``/config/users/<sanitized user>``
(``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=8192",
"producer_byte_rate":"1024"}}``). Alter rewrites only the mechanism keys it names, keeps every other
key, and writes a ``/config/changes`` notification, so every broker (this one included) reloads the
user's credentials into its ScramCredentialCache through the DynamicConfigManager.

The client never sends a password: an upsertion carries the salt, the iteration count and
``SaltedPassword = Hi(password, salt, iterations)``; the broker derives StoredKey and ServerKey
from it (Kafka's ScramFormatter.generateCredential).

Checks, in Kafka's order: an empty user name or a bad iteration count (outside 4096..16384) is
UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM (these fail every
alteration of that user), a (user, mechanism) pair named twice DUPLICATE_RESOURCE, deleting a
credential that does not exist RESOURCE_NOT_FOUND. Deviations: an upsertion with an empty salt
or salted password is refused (UNACCEPTABLE_CREDENTIAL) rather than stored unusable; and
describing all users answers with the user names, not their sanitized znode names.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from broker.errors import ErrorCode, error_for_code
from broker.quota.entity import DEFAULT, desanitize, sanitize
from broker.security.scram import SCRAM_MECHANISM_NAMES, ScramCredential, format_credential, parse_credential, \
    scram_mechanism

if TYPE_CHECKING:
    from broker.util.executor import NamedExecutor
    from broker.zk.client import KafkaZkClient

log = logging.getLogger(__name__)

#: Kafka's org.apache.kafka.clients.admin.ScramMechanism type bytes (0 = UNKNOWN).
MECHANISM_TYPES: Dict[int, str] = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_TYPE_OF: Dict[str, int] = {v: k for k, v in MECHANISM_TYPES.items()}
MAX_ITERATIONS = 16384

USERNAME_EMPTY = "Username must not be empty"
DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist"
DESCRIBE_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"
TOO_FEW_ITERATIONS = "Too few iterations"
TOO_MANY_ITERATIONS = "Too many iterations"
ALTER_TWICE = "A user credential cannot be altered twice in the same request"
DELETE_MISSING = "Attempt to delete a user credential that does not exist"


@dataclass(frozen=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes = field(repr=False)


@dataclass(frozen=True)
class Deletion:
    name: str
    mechanism: int


@dataclass
class DescribeResult:
    user: str
    error_code: int = 0
    error_message: Optional[str] = None
    #: (mechanism type byte, iterations)
    credentials: List[Tuple[int, int]] = field(default_factory=list)


#: (user, error code, error message) per altered user
AlterResult = Tuple[str, int, Optional[str]]


def credential_from_salted_password(mechanism: str, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    """RFC 5802 keys from SaltedPassword: StoredKey = H(HMAC(sp, "Client Key")), ServerKey = HMAC(sp, "Server Key")."""
    mech = scram_mechanism(mechanism)
    if mech is None:
        raise ValueError(f"Unknown SCRAM mechanism {mechanism}")
    client_key = mech.hmac(salted_password, b"Client Key")
    return ScramCredential(salt, mech.hash(client_key), mech.hmac(salted_password, b"Server Key"), iterations)


def credential_infos(config: Dict[str, str]) -> List[Tuple[int, int]]:
    """(mechanism type, iterations) of each SCRAM credential in a user's config; ValueError for a corrupt one."""
    return [(MECHANISM_TYPE_OF[m], parse_credential(config[m]).iterations) for m in SCRAM_MECHANISM_NAMES
            if m in config]


def _has_credential(config: Dict[str, str]) -> bool:
    return any(m in config for m in SCRAM_MECHANISM_NAMES)


def _upsertion_problem(u: Upsertion) -> Optional[Tuple[int, str]]:
    if not u.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, USERNAME_EMPTY
    mech = scram_mechanism(MECHANISM_TYPES.get(u.mechanism, ""))
    if mech is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM
    if u.iterations < mech.min_iterations:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, TOO_FEW_ITERATIONS
    if u.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, TOO_MANY_ITERATIONS
    if not u.salt:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt must not be empty"
    if not u.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "SaltedPassword must not be empty"
    return None


def _deletion_problem(d: Deletion) -> Optional[Tuple[int, str]]:
    if not d.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, USERNAME_EMPTY
    if d.mechanism not in MECHANISM_TYPES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM
    return None


def plan_alterations(upsertions: Sequence[Upsertion], deletions: Sequence[Deletion]
                     ) -> Tuple[List[AlterResult], List[str]]:
    """The users refused by the request alone (with their errors) and the users left to alter, in request order."""
    order: List[str] = []
    for name in [d.name for d in deletions] + [u.name for u in upsertions]:
        if name not in order:
            order.append(name)
    problems: Dict[str, Tuple[int, str]] = {}
    for d in deletions:  # as Kafka: an upsertion's problem replaces a deletion's for the same user
        p = _deletion_problem(d)
        if p is not None:
            problems[d.name] = p
    for u in upsertions:
        p = _upsertion_problem(u)
        if p is not None:
            problems[u.name] = p
    refused: List[AlterResult] = [(n, *problems[n]) for n in order if n in problems]
    pairs = [(u.name, u.mechanism) for u in upsertions if u.name not in problems] + \
            [(d.name, d.mechanism) for d in deletions if d.name not in problems]
    seen, duplicated = set(), set()
    for pair in pairs:
        if pair in seen:
            duplicated.add(pair[0])
        seen.add(pair)
    refused += [(n, ErrorCode.DUPLICATE_RESOURCE, ALTER_TWICE) for n in order if n in duplicated]
    valid = [n for n in order if n not in problems and n not in duplicated]
    return refused, valid


def apply_alterations(user: str, config: Dict[str, str], upsertions: Sequence[Upsertion],
                      deletions: Sequence[Deletion]) -> Optional[Dict[str, str]]:
    """The user's new config (deletions first, then upsertions), or None if it deletes a missing credential."""
    new = dict(config)
    for d in deletions:
        if d.name == user and MECHANISM_TYPES[d.mechanism] not in new:
            return None
    for d in deletions:
        if d.name == user:
            new.pop(MECHANISM_TYPES[d.mechanism], None)
    for u in upsertions:
        if u.name == user:
            mech = MECHANISM_TYPES[u.mechanism]
            new[mech] = format_credential(credential_from_salted_password(mech, u.salt, u.salted_password,
                                                                          u.iterations))
    return new


def _unexpected(exc: Exception) -> Tuple[int, Optional[str]]:
    code = getattr(exc, "code", None)
    if isinstance(code, int) and code != 0:
        return code, str(exc) or error_for_code(code).message
    return ErrorCode.UNKNOWN_SERVER_ERROR, None


class ScramCredentialAdmin:
    """Reads and writes users' SCRAM credentials in ZooKeeper for the two admin APIs."""

    def __init__(self, zk: "KafkaZkClient", zk_calls: "NamedExecutor") -> None:
        self.zk = zk
        self.zk_calls = zk_calls

    # ------------------------------------------------------------------ describe
    def _all_user_configs(self) -> Dict[str, Dict[str, str]]:
        """zk-call thread: {user name: config} of every /config/users/<user> (the default entity excluded)."""
        out = {}
        for child in self.zk.get_children("/config/users"):
            if child != DEFAULT:
                out[desanitize(child)] = self.zk.get_entity_config("users", child)
        return out

    async def describe(self, users: Optional[Sequence[str]]) -> Tuple[int, Optional[str], List[DescribeResult]]:
        """(top-level error, message, results): all users with credentials when `users` is None or empty."""
        try:
            if not users:
                results = []
                for user, config in sorted((await self.zk_calls.run(self._all_user_configs)).items()):
                    if _has_credential(config):
                        results.append(self._describe_one(user, config))
                return 0, None, results
            by_user: Dict[str, DescribeResult] = {}
            counts: Dict[str, int] = {}
            for u in users:
                counts[u] = counts.get(u, 0) + 1
            for user in counts:
                if not user:
                    by_user[user] = DescribeResult(user, ErrorCode.RESOURCE_NOT_FOUND, USERNAME_EMPTY)
                elif counts[user] > 1:
                    by_user[user] = DescribeResult(user, ErrorCode.DUPLICATE_RESOURCE, f"{DESCRIBE_TWICE}: {user}")
                else:
                    try:
                        config = await self.zk_calls.run(self.zk.get_entity_config, "users", sanitize(user))
                    except Exception as exc:
                        log.error("Error processing describe user SCRAM credential configs request", exc_info=True)
                        by_user[user] = DescribeResult(user, *_unexpected(exc))
                        continue
                    if _has_credential(config):
                        by_user[user] = self._describe_one(user, config)
                    else:
                        by_user[user] = DescribeResult(user, ErrorCode.RESOURCE_NOT_FOUND,
                                                       f"{DESCRIBE_MISSING}: {user}")
            return 0, None, [by_user[u] for u in counts]
        except Exception as exc:
            log.error("Error processing describe user SCRAM credential configs request", exc_info=True)
            code, message = _unexpected(exc)
            return code, message or error_for_code(code).message, []

    @staticmethod
    def _describe_one(user: str, config: Dict[str, str]) -> DescribeResult:
        try:
            return DescribeResult(user, credentials=credential_infos(config))
        except (ValueError, KeyError):
            log.error("Corrupt SCRAM credential of user %s in ZooKeeper", user, exc_info=True)
            return DescribeResult(user, ErrorCode.UNKNOWN_SERVER_ERROR, None)

    # ------------------------------------------------------------------ alter
    async def alter(self, upsertions: Sequence[Upsertion], deletions: Sequence[Deletion]) -> List[AlterResult]:
        results, valid = plan_alterations(upsertions, deletions)
        configs: Dict[str, Dict[str, str]] = {}
        for user in valid:
            try:
                configs[user] = await self.zk_calls.run(self.zk.get_entity_config, "users", sanitize(user))
            except Exception as exc:
                log.info("Error encountered while altering user SCRAM credentials", exc_info=True)
                results.append((user, *_unexpected(exc)))
        prepared: Dict[str, Dict[str, str]] = {}
        for user in valid:
            if user not in configs:
                continue
            try:
                new = apply_alterations(user, configs[user], upsertions, deletions)
            except Exception as exc:
                log.info("Error encountered while altering user SCRAM credentials", exc_info=True)
                results.append((user, *_unexpected(exc)))
                continue
            if new is None:
                results.append((user, ErrorCode.RESOURCE_NOT_FOUND, DELETE_MISSING))
            else:
                prepared[user] = new
        for user, new in prepared.items():
            try:
                await self.zk_calls.run(self.zk.set_entity_config, "users", sanitize(user), new)
            except Exception as exc:
                log.info("Error encountered while altering user SCRAM credentials", exc_info=True)
                results.append((user, *_unexpected(exc)))
                continue
            log.info("SCRAM credentials of user %s set (%s)", user,
                     ", ".join(m for m in SCRAM_MECHANISM_NAMES if m in new) or "none left")
            results.append((user, 0, None))
        return results


__all__ = ["ScramCredentialAdmin", "Upsertion", "Deletion", "DescribeResult", "MECHANISM_TYPES",
           "credential_from_salted_password", "plan_alterations", "apply_alterations"]

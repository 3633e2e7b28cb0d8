"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): users' SCRAM credentials (KIP-554).

Describe needs DESCRIBE on the cluster and is answered by any broker; Alter needs ALTER on the
cluster and, as in Kafka's ZooKeeper mode, only the active controller answers it (others say
NOT_CONTROLLER; Kafka's admin client sends it to the controller). Refusals of the whole request
repeat the error for every user named, as Kafka's getErrorResponse does.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from broker.cluster.scram_credential_admin import Deletion, Upsertion
from broker.errors import ErrorCode, error_for_code
from broker.security.acl import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.api.authz import Authz
    from broker.api.dispatcher import RequestContext
    from broker.cluster.controller import KafkaController
    from broker.cluster.scram_credential_admin import ScramCredentialAdmin

DESCRIBE_MIN, DESCRIBE_MAX = 0, 0
ALTER_MIN, ALTER_MAX = 0, 0


#: Kafka's Errors messages for the whole-request refusals (ApiError.fromThrowable of the error's exception)
_KAFKA_MESSAGES: dict[int, str] = {ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
                   ErrorCode.NOT_CONTROLLER: "This is not the correct controller for this cluster."}


def _message(code: int) -> str:
    return _KAFKA_MESSAGES.get(code) or error_for_code(code).message


async def describe(ctx: "RequestContext", request: Any, *, admin: "ScramCredentialAdmin", authz: "Authz") -> dict:
    users: Optional[list] = None if request.users is None else [u.name for u in request.users]
    if not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return {"throttle_time_ms": 0, "error_code": denied, "error_message": _message(denied), "results": [
            {"user": "", "error_code": denied, "error_message": _message(denied), "credential_infos": []}
            for _ in users or []]}
    code, message, results = await admin.describe(users)
    # Kafka 3.9.1 (ZooKeeper mode) sends empty messages, not null, with successes
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message if code else "", "results": [
        {"user": r.user, "error_code": r.error_code, "error_message": r.error_message if r.error_code else "",
         "credential_infos": [{"mechanism": m, "iterations": i} for m, i in r.credentials]} for r in results]}


async def alter(ctx: "RequestContext", request: Any, *, admin: "ScramCredentialAdmin", controller: "KafkaController",
                authz: "Authz") -> dict:
    upsertions = [Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
                  for u in request.upsertions]
    deletions = [Deletion(d.name, d.mechanism) for d in request.deletions]
    refusal = None
    if not controller.is_active:
        refusal = ErrorCode.NOT_CONTROLLER
    elif not authz.allowed(ctx, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
        refusal = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if refusal is not None:
        users = sorted({d.name for d in deletions} | {u.name for u in upsertions})
        return {"throttle_time_ms": 0, "results": [
            {"user": user, "error_code": refusal, "error_message": _message(refusal)} for user in users]}
    results = await admin.alter(upsertions, deletions)
    # Kafka 3.9.1 (ZooKeeper mode) answers a user whose changes all succeeded with an empty message, not null
    return {"throttle_time_ms": 0, "results": [
        {"user": user, "error_code": code, "error_message": message if code else ""}
        for user, code, message in results]}

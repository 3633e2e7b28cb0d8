"""InitProducerId: a producer id and epoch for an idempotent or transactional producer.

Without a transactional id the answer is always a fresh producer id at epoch 0 (ids come in blocks from the
controller or ZooKeeper), even when the request names its old one. With one, the transaction coordinator answers:
a new id, or the same id at a bumped epoch (fencing the previous producer of that transactional id and aborting its
open transaction), or, from v3, the KIP-360 bump of the producer id/epoch the request names. As Kafka: a request that
names only one of producer id and epoch is INVALID_REQUEST, and PRODUCER_FENCED reaches clients below v4 as
INVALID_PRODUCER_EPOCH. Without a transaction coordinator (unit tests) transactional ids get COORDINATOR_NOT_AVAILABLE.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Optional

from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.producer_ids import ProducerIdManager
    from broker.coordinator.transaction.service import TransactionCoordinator

log = logging.getLogger(__name__)

MIN_VERSION, MAX_VERSION = 0, 5
NO_PRODUCER_ID, NO_PRODUCER_EPOCH = -1, -1


def _answer(error: int, pid: int = -1, epoch: int = -1) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(error), "producer_id": pid, "producer_epoch": epoch}


async def handle(ctx: "RequestContext", request: Any, *, producer_ids: "ProducerIdManager",
                 txn_coordinator: Optional["TransactionCoordinator"] = None) -> dict:
    pid = getattr(request, "producer_id", NO_PRODUCER_ID)
    epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
        return _answer(ErrorCode.INVALID_REQUEST)
    tid = request.transactional_id
    if tid is None:
        try:
            new_pid = await producer_ids.generate()
        except Exception as exc:
            log.warning("Could not allocate a producer id: %s", exc)
            return _answer(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return _answer(0, new_pid, 0)
    if txn_coordinator is None:
        return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    expected = (pid, epoch) if pid != NO_PRODUCER_ID else None
    error, new_pid, new_epoch = await txn_coordinator.init_producer_id(tid, request.transaction_timeout_ms, expected)
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 4:
        error = ErrorCode.INVALID_PRODUCER_EPOCH  # older clients do not know PRODUCER_FENCED
    return _answer(error, new_pid, new_epoch)

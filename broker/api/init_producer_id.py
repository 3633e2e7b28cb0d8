"""InitProducerId: a new producer id, epoch 0, for an idempotent producer.

Ids come in blocks from ZooKeeper (``/latest_producer_id_block``). As in Kafka, a request
without a transactional id always gets a fresh id, even when it names its old one.
Transactional ids need a transaction coordinator, which is not built yet: they get
COORDINATOR_NOT_AVAILABLE (retriable), what a cluster without a live coordinator answers.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from broker.errors import ErrorCode

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext
    from broker.coordinator.producer_ids import ProducerIdManager

log = logging.getLogger(__name__)

MIN_VERSION, MAX_VERSION = 0, 5


def _answer(error: int, pid: int = -1, epoch: int = -1) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "producer_id": pid, "producer_epoch": epoch}


async def handle(ctx: "RequestContext", request: Any, *, producer_ids: "ProducerIdManager") -> dict:
    if request.transactional_id is not None:
        return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    try:
        pid = await producer_ids.generate()
    except Exception as exc:
        log.warning("Could not allocate a producer id: %s", exc)
        return _answer(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    return _answer(0, pid, 0)

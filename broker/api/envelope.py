"""Envelope (KIP-590 forwarding): advertised, and answered by closing the connection, as Kafka 3.9 in ZooKeeper mode.

A ZooKeeper-mode broker accepts enveloped (forwarded) requests only during a KRaft migration, which this
broker does not do; Kafka then logs one line and closes the connection, treating the request as one it
cannot parse. So do we.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from broker.api.registry import CLOSE_CONNECTION

if TYPE_CHECKING:
    from broker.api.dispatcher import RequestContext

log = logging.getLogger(__name__)

MIN_VERSION, MAX_VERSION = 0, 0


async def handle(ctx: "RequestContext", request: Any) -> Any:
    log.info("Closing connection %s because it sent an Envelope request even though forwarding has not been "
             "enabled", getattr(ctx, "connection_id", "?"))
    return CLOSE_CONNECTION

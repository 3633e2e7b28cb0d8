"""BrokerToControllerChannel: requests from this broker to whichever broker is the controller now.

In ZooKeeper mode a broker learns the controller from UpdateMetadata (the metadata cache's
``controller_id``) or, before the first one, from the ``/controller`` watch every broker's
KafkaController keeps. ControlledShutdown and AllocateProducerIds go through here; a request is
retried, after ``retry_backoff_ms``, while no controller is known, the connection fails, or the
answer is NOT_CONTROLLER (the controller moved), until its deadline.

Loop affinity: the event loop.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Optional

from broker.errors import ErrorCode
from broker.util.broker_channel import BrokerChannel, BrokerChannelError, BrokerNode

log = logging.getLogger(__name__)


class ControllerUnavailableError(Exception):
    """No controller answered before the request's deadline."""


class BrokerToControllerChannel:
    def __init__(self, channel: BrokerChannel, controller_node: Callable[[], Optional[BrokerNode]],
                 retry_backoff_ms: int = 100) -> None:
        self.channel = channel
        self.controller_node = controller_node
        self.retry_backoff_ms = retry_backoff_ms

    async def send(self, api_key: int, api_version: int, body: Any, timeout_ms: int) -> Any:
        """The controller's response; raises ControllerUnavailableError after ``timeout_ms``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000.0
        last = "no controller known"
        while True:
            remaining_ms = int((deadline - loop.time()) * 1000)
            if remaining_ms <= 0:
                raise ControllerUnavailableError(last)
            node = self.controller_node()
            if node is not None:
                try:
                    response = await self.channel.send(node, api_key, api_version, body, remaining_ms)
                except (BrokerChannelError, asyncio.TimeoutError) as exc:
                    last = f"controller {node.broker_id} at {node.host}:{node.port}: {exc or type(exc).__name__}"
                else:
                    if getattr(response, "error_code", 0) != ErrorCode.NOT_CONTROLLER:
                        return response
                    last = f"broker {node.broker_id} is no longer the controller"
            await asyncio.sleep(min(self.retry_backoff_ms / 1000.0, max(deadline - loop.time(), 0)))

    async def close(self) -> None:
        await self.channel.close()

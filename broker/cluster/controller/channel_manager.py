"""ControllerChannelManager: the controller's requests to brokers (LeaderAndIsr, UpdateMetadata, StopReplica).

One sender per broker on the broker's asyncio loop, as Kafka has one RequestSendThread per broker: requests to a
broker are sent one at a time in the order the controller queued them (a broker must see an UpdateMetadata
before the LeaderAndIsr that follows it); a request that fails (unreachable broker, timeout) is retried after a
short backoff until it succeeds or the broker is removed (it died, or re-registered with a new epoch). Only
successful responses reach the callback, on the loop thread; the controller turns them into events.

All public methods are thread-safe (the controller calls them from its event thread).
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from broker.util.broker_channel import BrokerChannel, BrokerChannelError, BrokerChannelFactory, BrokerNode

log = logging.getLogger(__name__)

API_NAMES = {4: "LeaderAndIsr", 5: "StopReplica", 6: "UpdateMetadata"}


@dataclass
class _QueuedRequest:
    api_key: int
    api_version: int
    body: Any
    callback: Callable[[Any], None] | None


@dataclass
class _BrokerState:
    node: BrokerNode
    queue: "asyncio.Queue[_QueuedRequest]" = field(default_factory=asyncio.Queue)
    task: "asyncio.Task[None] | None" = None


class ControllerChannelManager:
    def __init__(self, channel_factory: BrokerChannelFactory, loop: asyncio.AbstractEventLoop, broker_id: int,
                 request_timeout_ms: int = 30000, retry_backoff_ms: int = 100) -> None:
        self._factory = channel_factory
        self._loop = loop
        self._client_id = f"controller-{broker_id}"
        self._timeout_ms = request_timeout_ms
        self._backoff_s = retry_backoff_ms / 1000.0
        self._channel: BrokerChannel | None = None
        self._brokers: dict[int, _BrokerState] = {}

    # ------------------------------------------------------------------ thread-safe API
    def startup(self, brokers: dict[int, BrokerNode]) -> None:
        for bid, node in brokers.items():
            self.add_broker(bid, node)

    def add_broker(self, broker_id: int, node: BrokerNode) -> None:
        """Start a sender for the broker (a known broker whose address changed gets the new address)."""
        self._call(self._add_broker, broker_id, node)

    def remove_broker(self, broker_id: int) -> None:
        """Stop the broker's sender and drop its queued requests."""
        self._call(self._remove_broker, broker_id)

    def send_request(self, broker_id: int, api_key: int, api_version: int, body: Any,
                     callback: Callable[[Any], None] | None = None) -> None:
        self._call(self._enqueue, broker_id, _QueuedRequest(api_key, api_version, body, callback))

    def shutdown(self) -> None:
        """Stop every sender and close the channel (pending requests are dropped). The manager can be used
        again (the controller resigns, and may be elected again later): a new channel is made on demand."""
        self._call(self._shutdown)

    # ------------------------------------------------------------------ on the loop
    def _call(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            fn(*args)
        else:
            self._loop.call_soon_threadsafe(fn, *args)

    def _ensure_channel(self) -> BrokerChannel:
        if self._channel is None:
            self._channel = self._factory(self._client_id)
        return self._channel

    def _add_broker(self, broker_id: int, node: BrokerNode) -> None:
        state = self._brokers.get(broker_id)
        if state is not None:
            if state.node != node:
                state.node = node  # the sender uses the new address from its next request on
            return
        state = _BrokerState(node)
        self._brokers[broker_id] = state
        state.task = self._loop.create_task(self._sender(broker_id, state), name=f"controller-send-{broker_id}")

    def _remove_broker(self, broker_id: int) -> None:
        state = self._brokers.pop(broker_id, None)
        if state is None:
            return
        if state.task is not None:
            state.task.cancel()
        if self._channel is not None:
            self._channel.disconnect(broker_id)

    def _enqueue(self, broker_id: int, req: _QueuedRequest) -> None:
        state = self._brokers.get(broker_id)
        if state is None:
            log.warning("Not sending %s to broker %d: it is not (or no longer) a known live broker",
                        API_NAMES.get(req.api_key, req.api_key), broker_id)
            return
        state.queue.put_nowait(req)

    def _shutdown(self) -> None:
        for bid in list(self._brokers):
            self._remove_broker(bid)
        channel, self._channel = self._channel, None
        if channel is not None:
            self._loop.create_task(channel.close())

    async def _sender(self, broker_id: int, state: _BrokerState) -> None:
        channel = self._ensure_channel()
        while True:
            req = await state.queue.get()
            name = API_NAMES.get(req.api_key, str(req.api_key))
            failures = 0
            while True:
                try:
                    response = await channel.send(state.node, req.api_key, req.api_version, req.body,
                                                  self._timeout_ms)
                    break
                except asyncio.CancelledError:
                    raise
                except (BrokerChannelError, asyncio.TimeoutError, OSError) as e:
                    failures += 1
                    if failures == 1:
                        log.warning("Controller's connection to broker %d (%s:%d) failed sending %s (%s); "
                                    "retrying", broker_id, state.node.host, state.node.port, name, e or type(e))
                    await asyncio.sleep(self._backoff_s)
                except Exception:
                    log.exception("Sending %s to broker %d failed; dropping the request", name, broker_id)
                    response = None
                    break
            if response is not None and req.callback is not None:
                try:
                    req.callback(response)
                except Exception:
                    log.exception("Handling the %s response of broker %d failed", name, broker_id)

    # ------------------------------------------------------------------ introspection (tests)
    def queue_size(self, broker_id: int) -> int:
        state = self._brokers.get(broker_id)
        return state.queue.qsize() if state is not None else 0

    @property
    def broker_ids(self) -> set[int]:
        return set(self._brokers)

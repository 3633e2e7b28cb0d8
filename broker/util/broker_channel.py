"""The one seam between brokers: send a Kafka request to another broker, get its decoded response.

The controller (LeaderAndIsr, UpdateMetadata, StopReplica), the replica fetchers (Fetch,
OffsetForLeaderEpoch, ListOffsets) and the broker-to-controller channel (AlterPartition,
ControlledShutdown, AllocateProducerIds) all talk to other brokers through a
:class:`BrokerChannel`. The real one is ``broker.network.client.NetworkClient`` (only
``server.py`` builds it, keeping the network layer out of the layers below); unit tests pass
fakes. Each component owns its own channel, as each Kafka component owns its NetworkClient,
so a long-polling replica Fetch never delays a controller request on the same connection.

Loop affinity: ``send`` is a coroutine of the broker's event loop.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol


class BrokerNode(NamedTuple):
    """Where to reach a broker: its id and the host/port of its inter-broker listener."""

    broker_id: int
    host: str
    port: int


class BrokerChannelError(Exception):
    """The peer could not be reached, or the connection broke before its response arrived."""


class BrokerChannel(Protocol):
    """Requests to other brokers over Kafka's wire protocol (one connection per peer)."""

    async def send(self, node: BrokerNode, api_key: int, api_version: int, body: Any,
                   timeout_ms: int) -> Any:
        """Send ``body`` (a dict or protocol Message) as ``api_key`` v``api_version``; return the response Message.

        Raises BrokerChannelError when the peer is unreachable or the connection drops, and
        asyncio.TimeoutError after ``timeout_ms`` without a response (the connection is then
        closed, as Kafka's NetworkClient does, so a late response can never be misread).
        """
        ...

    def disconnect(self, broker_id: int) -> None:
        """Close the connection to ``broker_id`` (e.g. it left the cluster); pending sends fail."""
        ...

    async def close(self) -> None:
        """Close every connection; pending sends fail with BrokerChannelError."""
        ...


#: Builds a channel for one component; the argument is the client id it sends (e.g. "replica-fetcher-1").
BrokerChannelFactory = Callable[[str], BrokerChannel]

"""How long shutdown may wait for a ZooKeeper that is gone (issue 17 point 5).

BrokerServer.controlled_shutdown: at most controlled.shutdown.max.retries attempts, each waiting at most
request.timeout.ms, controlled.shutdown.retry.backoff.ms apart (Kafka's bound); an attempt begun or still waiting
while this broker's ZooKeeper connection is down fails at once, so without ZooKeeper the whole controlled shutdown
takes (max.retries - 1) x backoff. ControllerEventManager.close stops waiting for the event in progress once its
``give_up`` says so (the controller passes "ZooKeeper is disconnected")."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Dict, List

from broker.cluster.controller.event_manager import ControllerEvent, ControllerEventManager
from broker.config.kafka_config import KafkaConfig
from broker.server import BrokerServer


class _Zk:
    def __init__(self, connected: bool) -> None:
        self.connected = connected


class _Response:
    error_code = 0
    remaining_partitions: List[Any] = []


class _Controller:
    """to_controller stand-in: answers after ``delay_s`` (never, if None); counts the requests."""

    def __init__(self, delay_s: float | None) -> None:
        self.delay_s = delay_s
        self.sent = 0

    async def send(self, api_key: int, api_version: int, body: Any, timeout_ms: int) -> Any:
        self.sent += 1
        if self.delay_s is None:
            await asyncio.sleep(timeout_ms / 1000.0)
            from broker.cluster.controller_channel import ControllerUnavailableError
            raise ControllerUnavailableError("no answer")
        await asyncio.sleep(self.delay_s)
        return _Response()


def _server(zk: _Zk, controller: _Controller, **props: str) -> BrokerServer:
    base: Dict[str, str] = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:1",
                            "controlled.shutdown.retry.backoff.ms": "300", "request.timeout.ms": "30000"}
    base.update(props)
    server = BrokerServer(KafkaConfig(base))
    server.zk = zk  # type: ignore[assignment]
    server.to_controller = controller  # type: ignore[assignment]
    server._registered = True
    server._broker_epoch = lambda: 7  # type: ignore[method-assign]
    return server


def test_without_zookeeper_every_attempt_fails_at_once() -> None:
    controller = _Controller(delay_s=0.0)
    server = _server(_Zk(connected=False), controller)
    t0 = time.monotonic()
    assert asyncio.run(server.controlled_shutdown()) is False
    elapsed = time.monotonic() - t0
    assert controller.sent == 0  # nothing can be moved without ZooKeeper: not even asked
    assert 0.55 <= elapsed < 2.0, elapsed  # (3 - 1) x 300 ms of backoff, no request timeout


def test_zookeeper_lost_during_an_attempt_ends_it_without_waiting_for_the_request_timeout() -> None:
    zk = _Zk(connected=True)
    controller = _Controller(delay_s=None)  # a controller that never answers (it waits for ZooKeeper itself)
    server = _server(zk, controller, **{"controlled.shutdown.max.retries": "2"})

    async def run() -> bool:
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, lambda: setattr(zk, "connected", False))
        return await server.controlled_shutdown()

    t0 = time.monotonic()
    assert asyncio.run(run()) is False
    elapsed = time.monotonic() - t0
    assert controller.sent == 1
    assert elapsed < 3.0, elapsed  # 0.3 s + 300 ms backoff + an attempt that fails at once; not 30 s


def test_with_zookeeper_an_answer_ends_the_controlled_shutdown() -> None:
    controller = _Controller(delay_s=0.05)
    server = _server(_Zk(connected=True), controller)
    assert asyncio.run(server.controlled_shutdown()) is True
    assert controller.sent == 1


class _Blocking(ControllerEvent):
    def __init__(self, release: threading.Event) -> None:
        self.release = release


def test_event_manager_close_gives_up_on_an_event_that_cannot_finish() -> None:
    release, started = threading.Event(), threading.Event()

    def process(event: ControllerEvent) -> None:
        started.set()
        release.wait(30)  # an event waiting for a ZooKeeper that is gone

    manager = ControllerEventManager(process)
    manager.start()
    manager.put(_Blocking(release))
    assert started.wait(5)
    manager.close(timeout_s=30, give_up=lambda: True)
    assert manager.is_running  # returned with the event still in progress, not after it
    release.set()

    release2, started2, finished2 = threading.Event(), threading.Event(), threading.Event()
    polls: List[bool] = []

    def process2(event: ControllerEvent) -> None:
        started2.set()
        release2.wait(30)
        finished2.set()

    def zookeeper_there() -> bool:
        """close() asks while the event is in progress; the event may finish (released at the first question)."""
        polls.append(finished2.is_set())
        release2.set()
        return False

    manager2 = ControllerEventManager(process2)
    manager2.start()
    manager2.put(ControllerEvent())
    assert started2.wait(5)
    manager2.close(timeout_s=30, give_up=zookeeper_there)
    assert polls and polls[0] is False  # close() was still waiting for the event when it asked
    assert finished2.is_set() and not manager2.is_running  # and returned only once the event had finished


def test_requests_failed_by_our_own_close_end_a_controller_event_quietly() -> None:
    """A controller write still waiting when the broker closes its ZooKeeper session fails as ControllerMovedError
    (ZkClientClosedError), which the controller's state machines pass up instead of logging a traceback; before
    the close, a lost connection is reported as it is."""
    from kazoo.exceptions import ConnectionLoss

    from broker.zk.client import KafkaZkClient
    from broker.zk.errors import ControllerMovedError, ZkClientClosedError

    class _Kazoo:
        connected = False

        def stop(self) -> None:
            pass

        def close(self) -> None:
            pass

    class _Pending:
        def get(self) -> None:
            raise ConnectionLoss()

    client = KafkaZkClient("127.0.0.1:1", kazoo_client=_Kazoo())
    assert not client.connected
    [(_, error)] = client._pipelined([_Pending])
    assert type(error) is ConnectionLoss
    client.close()
    [(_, error)] = client._pipelined([_Pending])
    assert isinstance(error, ZkClientClosedError) and isinstance(error, ControllerMovedError)

"""NetworkClient against a tiny in-process asyncio broker on 127.0.0.1 (real sockets, ephemeral ports).

The fake broker decodes every request with the real protocol layer and answers in request order,
as a Kafka broker does per connection; each test scripts its answers through a handler.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import socket
import struct
import uuid
from typing import Any, Awaitable, Callable, Optional

import pytest

from broker.network.client import NetworkClient
from broker.protocol.api import ApiKey, RequestHeader, decode_request, decode_request_header, encode_response
from broker.util.broker_channel import BrokerChannelError, BrokerNode
from broker.util.clock import ManualClock

CLOSE = object()  # handler result: close the connection without answering
ZERO_UUID = uuid.UUID(int=0)
Handler = Callable[[RequestHeader, Any], Awaitable[Any]]


class FakeBroker:
    """Answers requests of each connection in order with what ``handler`` returns.

    Handler results: a dict (response body, encoded for the request's api/version/correlation id),
    bytes (written raw), None (no answer, go on with the next request) or CLOSE.
    """

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.port = 0
        self.connections = 0
        self.closed_connections = 0
        self.requests: list[tuple[RequestHeader, Any]] = []
        self._changed = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._server: Optional[asyncio.base_events.Server] = None

    async def start(self, port: int = 0) -> "FakeBroker":
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def node(self, broker_id: int = 1) -> BrokerNode:
        return BrokerNode(broker_id, "127.0.0.1", self.port)

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            self._changed.clear()
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        me = asyncio.current_task()
        assert me is not None
        self._tasks.add(me)
        self.connections += 1
        self._notify()
        queue: asyncio.Queue[Any] = asyncio.Queue()

        async def read_loop() -> None:
            try:
                while True:
                    size = struct.unpack(">i", await reader.readexactly(4))[0]
                    frame = memoryview(await reader.readexactly(size))
                    header, offset = decode_request_header(frame)
                    request = decode_request(header.api_key, header.api_version, frame, offset)
                    self.requests.append((header, request))
                    self._notify()
                    queue.put_nowait((header, request))
            except (asyncio.IncompleteReadError, ConnectionError):
                me.cancel()  # the client went away: stop answering (even a handler that hangs)

        reader_task = asyncio.get_running_loop().create_task(read_loop())
        try:
            while True:
                header, request = await queue.get()
                result = await self.handler(header, request)
                if result is CLOSE:
                    break
                if result is None:
                    continue
                if isinstance(result, bytes):
                    writer.write(result)
                else:
                    for part in encode_response(header.api_key, header.api_version, header.correlation_id, result):
                        writer.write(part)
                await writer.drain()
        except asyncio.CancelledError:
            pass
        finally:
            reader_task.cancel()
            writer.close()
            self.closed_connections += 1
            self._notify()
            self._tasks.discard(me)

    async def drop_connections(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.wait_for(lambda: not self._tasks)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self.drop_connections()
        await self._server.wait_closed()


def metadata_response(request: Any, **extra: Any) -> dict:
    """Metadata v12 answer echoing the requested topic names."""
    return {"brokers": [{"node_id": 1, "host": "h1", "port": 9092, "rack": None}], "cluster_id": "c1",
            "controller_id": 1, "topics": [{"error_code": 0, "name": t.name, "topic_id": ZERO_UUID, "partitions": []}
                                           for t in request.topics], **extra}


async def echo(header: RequestHeader, request: Any) -> Any:
    if header.api_key == ApiKey.API_VERSIONS:
        return {"error_code": 0, "api_keys": [{"api_key": 3, "min_version": 0, "max_version": 12}],
                "throttle_time_ms": 0}
    return metadata_response(request)


def metadata_request(*names: str) -> dict:
    return {"topics": [{"name": n, "topic_id": ZERO_UUID} for n in names], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}


def names(response: Any) -> list[str]:
    return [t.name for t in response.topics]


def free_port() -> int:
    """A port nobody listens on (bound then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


async def until(cond: Callable[[], bool]) -> None:
    """Loop turns until ``cond`` holds (a socket event the loop has to read; bound it with asyncio.wait_for)."""
    while not cond():
        await asyncio.sleep(0)


def run(test: Callable[[], Awaitable[None]]) -> None:
    async def main() -> None:
        async with asyncio.timeout(5):
            await test()
    asyncio.run(main())


META = ApiKey.METADATA


# ----------------------------------------------------------------------------------------
def test_round_trip_of_real_requests_over_one_lazy_connection() -> None:
    async def main() -> None:
        broker = await FakeBroker(echo).start()
        client = NetworkClient("test-client")
        assert broker.connections == 0 and not client.is_connected(1)  # lazy
        resp = await client.send(broker.node(), META, 12, metadata_request("a", "b"), 5000)
        assert names(resp) == ["a", "b"]
        assert resp.cluster_id == "c1" and resp.brokers[0].host == "h1"
        resp = await client.send(broker.node(), ApiKey.API_VERSIONS, 3,
                                 {"client_software_name": "x", "client_software_version": "1"}, 5000)
        assert resp.error_code == 0 and resp.api_keys[0].max_version == 12
        resp = await client.send(broker.node(), META, 1, metadata_request("old"), 5000)  # non-flexible version
        assert names(resp) == ["old"]
        assert broker.connections == 1 and client.is_connected(1)
        headers = [h for h, _ in broker.requests]
        assert [h.client_id for h in headers] == ["test-client"] * 3
        assert len({h.correlation_id for h in headers}) == 3
        sock = client._conns[1].transport.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        await client.close()
        await broker.stop()
    run(main)


def test_pipelined_requests_are_matched_in_order() -> None:
    async def main() -> None:
        broker: FakeBroker

        async def after_all_arrived(header: RequestHeader, request: Any) -> Any:
            await broker.wait_for(lambda: len(broker.requests) >= 5)  # all five in flight at once
            return metadata_response(request)

        broker = await FakeBroker(after_all_arrived).start()
        client = NetworkClient("test-client")
        results = await asyncio.gather(*(client.send(broker.node(), META, 12, metadata_request(f"t{i}"), 5000)
                                         for i in range(5)))
        assert [names(r) for r in results] == [[f"t{i}"] for i in range(5)]
        assert broker.connections == 1
        await client.close()
        await broker.stop()
    run(main)


def test_timeout_closes_the_connection_and_fails_the_other_pending_requests() -> None:
    async def main() -> None:
        async def slow_ones_hang(header: RequestHeader, request: Any) -> Any:
            if names(request) == ["slow"]:
                await asyncio.Event().wait()
            return metadata_response(request)

        broker = await FakeBroker(slow_ones_hang).start()
        client = NetworkClient("test-client")
        slow = asyncio.create_task(client.send(broker.node(), META, 12, metadata_request("slow"), 50))
        await broker.wait_for(lambda: len(broker.requests) == 1)
        # "other" may wait an hour: within run()'s 5 s bound only the 50 ms timeout of "slow" can end it
        other = asyncio.create_task(client.send(broker.node(), META, 12, metadata_request("other"), 3_600_000))
        await broker.wait_for(lambda: len(broker.requests) == 2)
        with pytest.raises(asyncio.TimeoutError, match="within 50 ms"):
            await slow
        with pytest.raises(BrokerChannelError, match=r"request \d+ to .* timed out; connection closed"):
            await other
        await broker.wait_for(lambda: broker.closed_connections == 1)  # the broker saw the close
        assert names(await client.send(broker.node(), META, 12, metadata_request("next"), 5000)) == ["next"]
        assert broker.connections == 2
        await client.close()
        await broker.stop()
    run(main)


def test_broker_closing_mid_request_gives_broker_channel_error_without_traceback(caplog: Any) -> None:
    caplog.set_level(logging.DEBUG, logger="broker.network.client")

    async def main() -> None:
        async def close_on_request(header: RequestHeader, request: Any) -> Any:
            return CLOSE if names(request) == ["close"] else metadata_response(request)

        broker = await FakeBroker(close_on_request).start()
        client = NetworkClient("test-client")
        with pytest.raises(BrokerChannelError, match="lost"):
            await client.send(broker.node(), META, 12, metadata_request("close"), 5000)
        assert not client.is_connected(1)
        assert client.connection_delay_ms(1) == 0  # a dropped (not refused) connection may reconnect at once
        assert names(await client.send(broker.node(), META, 12, metadata_request("again"), 5000)) == ["again"]
        await client.close()
        await broker.stop()
    run(main)
    records = [r for r in caplog.records if r.name == "broker.network.client"]
    assert records and all(r.exc_info is None and r.levelno <= logging.INFO for r in records)


def test_idle_connection_dropped_by_the_peer_is_reopened() -> None:
    async def main() -> None:
        broker = await FakeBroker(echo).start()
        client = NetworkClient("test-client")
        await client.send(broker.node(), META, 12, metadata_request("a"), 5000)
        await broker.drop_connections()
        await asyncio.wait_for(until(lambda: not client.is_connected(1)), 5)  # the client read the peer's EOF
        assert names(await client.send(broker.node(), META, 12, metadata_request("b"), 5000)) == ["b"]
        assert broker.connections == 2
        await client.close()
        await broker.stop()
    run(main)


def test_unreachable_port_fails_fast() -> None:
    async def main() -> None:
        client = NetworkClient("test-client")
        node = BrokerNode(7, "127.0.0.1", free_port())
        # an hour's request timeout: within run()'s 5 s bound only the refusal itself can end the send
        with pytest.raises(BrokerChannelError, match="cannot connect") as refused:
            await client.send(node, META, 12, metadata_request("a"), 3_600_000)
        assert f"[Errno {errno.ECONNREFUSED}]" in str(refused.value), refused.value
        assert "connect timed out" not in str(refused.value)
        assert client.connection_delay_ms(7) > 0
        await client.close()
    run(main)


def test_reconnect_backoff_is_exponential_and_fails_fast_while_it_lasts() -> None:
    async def main() -> None:
        clock = ManualClock()
        client = NetworkClient("test-client", reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000,
                               reconnect_backoff_jitter=0.0, clock=clock)
        port = free_port()
        node = BrokerNode(1, "127.0.0.1", port)
        for expected in (50, 100, 200, 400, 800, 1000, 1000):
            with pytest.raises(BrokerChannelError, match="cannot connect"):
                await client.send(node, META, 12, metadata_request("a"), 5000)
            assert client.connection_delay_ms(1) == pytest.approx(expected)
            clock.advance(expected - 1)
            with pytest.raises(BrokerChannelError, match="reconnect backoff"):  # no attempt made
                await client.send(node, META, 12, metadata_request("a"), 5000)
            clock.advance(1)
        broker = await FakeBroker(echo).start(port)  # the broker comes (back) up on that port
        assert names(await client.send(node, META, 12, metadata_request("up"), 5000)) == ["up"]
        assert client.connection_delay_ms(1) == 0 and client.is_connected(1)
        await client.close()
        await broker.stop()
    run(main)


def test_backoff_jitter_stays_within_bounds_and_cap() -> None:
    client = NetworkClient("test-client", reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000)
    for _ in range(200):
        assert 40.0 <= client._backoff_ms(1) <= 60.0
        assert 640.0 <= client._backoff_ms(5) <= 960.0
        assert client._backoff_ms(12) <= 1000.0


def test_connect_timeout_and_send_deadline_during_connect() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        gate = asyncio.Event()

        async def hanging_connect(*args: Any, **kwargs: Any) -> Any:
            await gate.wait()
            raise AssertionError("not reached")

        loop.create_connection = hanging_connect  # type: ignore[method-assign]
        node = BrokerNode(3, "127.0.0.1", 1)
        client = NetworkClient("test-client", connect_timeout_ms=60)
        # A send whose own deadline is shorter than the connect timeout times out; the shared attempt
        # goes on for a second sender, and the attempt's own timeout then fails that one.
        short = asyncio.create_task(client.send(node, META, 12, metadata_request("a"), 20))
        longer = asyncio.create_task(client.send(node, META, 12, metadata_request("b"), 5000))
        with pytest.raises(asyncio.TimeoutError):
            await short
        with pytest.raises(BrokerChannelError, match="connect timed out"):
            await longer
        assert client.connection_delay_ms(3) > 0
        await client.close()
    run(main)


def test_node_address_change_opens_a_new_connection() -> None:
    async def main() -> None:
        async def hang_on_wait(header: RequestHeader, request: Any) -> Any:
            if names(request) == ["wait"]:
                await asyncio.Event().wait()
            return metadata_response(request)

        old = await FakeBroker(hang_on_wait).start()
        new = await FakeBroker(echo).start()
        client = NetworkClient("test-client")
        assert names(await client.send(old.node(1), META, 12, metadata_request("a"), 5000)) == ["a"]
        pending = asyncio.create_task(client.send(old.node(1), META, 12, metadata_request("wait"), 5000))
        await old.wait_for(lambda: len(old.requests) == 2)
        assert names(await client.send(new.node(1), META, 12, metadata_request("b"), 5000)) == ["b"]
        with pytest.raises(BrokerChannelError, match="moved"):
            await pending
        await old.wait_for(lambda: old.closed_connections == 1)
        assert old.connections == 1 and new.connections == 1
        assert client._conns[1].node == new.node(1)
        await client.close()
        await old.stop()
        await new.stop()
    run(main)


def test_cancelled_send_keeps_the_stream_aligned() -> None:
    async def main() -> None:
        gate = asyncio.Event()

        async def first_waits(header: RequestHeader, request: Any) -> Any:
            if names(request) == ["first"]:
                await gate.wait()
            return metadata_response(request)

        broker = await FakeBroker(first_waits).start()
        client = NetworkClient("test-client")
        first = asyncio.create_task(client.send(broker.node(), META, 12, metadata_request("first"), 5000))
        await broker.wait_for(lambda: len(broker.requests) == 1)
        second = asyncio.create_task(client.send(broker.node(), META, 12, metadata_request("second"), 5000))
        await broker.wait_for(lambda: len(broker.requests) == 2)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        gate.set()  # the answer to "first" arrives now and must be dropped, not handed to "second"
        assert names(await second) == ["second"]
        assert names(await client.send(broker.node(), META, 12, metadata_request("third"), 5000)) == ["third"]
        assert broker.connections == 1
        await client.close()
        await broker.stop()
    run(main)


def test_cancelled_send_during_connect_leaves_the_attempt_to_others() -> None:
    async def main() -> None:
        broker = await FakeBroker(echo).start()
        client = NetworkClient("test-client")
        first = asyncio.create_task(client.send(broker.node(), META, 12, metadata_request("x"), 5000))
        second = asyncio.create_task(client.send(broker.node(), META, 12, metadata_request("y"), 5000))
        await asyncio.sleep(0)  # both are waiting for the same connect
        first.cancel()
        assert names(await second) == ["y"]
        assert broker.connections == 1
        await client.close()
        await broker.stop()
    run(main)


def test_correlation_id_mismatch_closes_and_fails_all_pending(caplog: Any) -> None:
    async def main() -> None:
        async def wrong_id(header: RequestHeader, request: Any) -> Any:
            if len(broker.requests) < 2:
                await broker.wait_for(lambda: len(broker.requests) >= 2)
            return b"".join(encode_response(header.api_key, header.api_version, header.correlation_id + 1,
                                            metadata_response(request)))

        broker = await FakeBroker(wrong_id).start()
        client = NetworkClient("test-client")
        results = await asyncio.gather(*(client.send(broker.node(), META, 12, metadata_request(n), 5000)
                                         for n in ("a", "b")), return_exceptions=True)
        assert all(isinstance(r, BrokerChannelError) and "correlation id mismatch" in str(r) for r in results)
        assert not client.is_connected(1)
        await client.close()
        await broker.stop()
    run(main)
    assert any(r.levelno == logging.WARNING and "mismatch" in r.getMessage() for r in caplog.records)


def test_malformed_response_closes_the_connection() -> None:
    async def main() -> None:
        async def truncated(header: RequestHeader, request: Any) -> Any:
            if names(request) == ["bad"]:
                return struct.pack(">ii", 6, header.correlation_id) + b"\x00\x05"  # body cut short
            return metadata_response(request)

        broker = await FakeBroker(truncated).start()
        client = NetworkClient("test-client")
        with pytest.raises(BrokerChannelError, match="malformed"):
            await client.send(broker.node(), META, 12, metadata_request("bad"), 5000)
        assert not client.is_connected(1)
        assert names(await client.send(broker.node(), META, 12, metadata_request("ok"), 5000)) == ["ok"]
        assert broker.connections == 2
        await client.close()
        await broker.stop()
    run(main)


def test_oversized_response_closes_the_connection() -> None:
    async def main() -> None:
        async def huge(header: RequestHeader, request: Any) -> Any:
            return struct.pack(">ii", 200 * 1024 * 1024, header.correlation_id)

        broker = await FakeBroker(huge).start()
        client = NetworkClient("test-client")
        with pytest.raises(BrokerChannelError, match="exceeds"):
            await client.send(broker.node(), META, 12, metadata_request("a"), 5000)
        assert not client.is_connected(1)
        await client.close()
        await broker.stop()
    run(main)


def test_unsolicited_response_closes_the_connection() -> None:
    async def main() -> None:
        async def answer_twice(header: RequestHeader, request: Any) -> Any:
            one = b"".join(encode_response(header.api_key, header.api_version, header.correlation_id,
                                           metadata_response(request)))
            return one + one

        broker = await FakeBroker(answer_twice).start()
        client = NetworkClient("test-client")
        assert names(await client.send(broker.node(), META, 12, metadata_request("a"), 5000)) == ["a"]
        await asyncio.wait_for(until(lambda: not client.is_connected(1)), 5)  # the client read the peer's EOF
        await client.close()
        await broker.stop()
    run(main)


def test_disconnect_and_close_fail_pending_sends() -> None:
    async def main() -> None:
        async def never(header: RequestHeader, request: Any) -> Any:
            if names(request) == ["hang"]:
                await asyncio.Event().wait()
            return metadata_response(request)

        broker = await FakeBroker(never).start()
        client = NetworkClient("test-client")
        pending = asyncio.create_task(client.send(broker.node(), META, 12, metadata_request("hang"), 5000))
        await broker.wait_for(lambda: len(broker.requests) == 1)
        client.disconnect(1)
        with pytest.raises(BrokerChannelError, match="closed by client"):
            await pending
        assert client.connection_delay_ms(1) == 0
        pending = asyncio.create_task(client.send(broker.node(), META, 12, metadata_request("hang"), 5000))
        await broker.wait_for(lambda: len(broker.requests) == 2)
        assert broker.connections == 2
        await client.close()
        with pytest.raises(BrokerChannelError, match="closed"):
            await pending
        with pytest.raises(BrokerChannelError, match="is closed"):
            await client.send(broker.node(), META, 12, metadata_request("a"), 5000)
        client.disconnect(1)  # harmless when not connected
        await broker.stop()
    run(main)

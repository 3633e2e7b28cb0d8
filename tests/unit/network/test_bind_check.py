"""The start-up probe of listener ports: a port in use gives Kafka's message naming the listener."""
from __future__ import annotations

import socket

from broker.network.bind_check import bind_error, first_bind_error


def test_free_and_taken_ports() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        expected = f"Socket server failed to bind to 127.0.0.1:{port}: Address already in use."
        assert bind_error("127.0.0.1", port) == expected
        message = first_bind_error([("INTERNAL", "127.0.0.1", 0), ("EXTERNAL", "127.0.0.1", port)])
        assert message is not None and message.endswith("(listener EXTERNAL)")
    assert bind_error("127.0.0.1", port) is None  # free again, and the probe left nothing bound
    assert bind_error("127.0.0.1", 0) is None


def test_unresolvable_host_is_reported_not_raised() -> None:
    message = bind_error("no-such-host.invalid", 9092)
    assert message is not None and message.startswith("Socket server failed to bind to no-such-host.invalid:9092:")

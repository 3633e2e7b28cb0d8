"""A minimal raw Kafka client for integration tests: send hand-made (or deliberately broken) frames, read replies.

Only for tests: one blocking socket, one request in flight, frames built with broker.protocol.api.
"""
from __future__ import annotations

import socket
import struct
import time
from typing import Any, Optional

from broker.protocol.api import decode_response_with_header, encode_request

_I32 = struct.Struct(">i")


class ConnectionClosed(Exception):
    """The broker closed the connection (EOF or reset) before a whole response arrived."""


class RawClient:
    """One TCP connection to a broker."""

    def __init__(self, bootstrap: str, timeout_s: float = 15.0, source_ip: Optional[str] = None) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s,
                                             source_address=(source_ip, 0) if source_ip else None)
        self._correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            try:
                b = self.sock.recv(n)
            except ConnectionResetError:
                raise ConnectionClosed("connection reset") from None
            if not b:
                raise ConnectionClosed("EOF")
            chunks.append(b)
            n -= len(b)
        return b"".join(chunks)

    def recv_frame(self) -> bytes:
        """One whole response frame, size prefix included."""
        size = _I32.unpack(self._recv_exact(4))[0]
        return _I32.pack(size) + self._recv_exact(size)

    def request(self, api_key: int, version: int, message: Any, client_id: Optional[str] = "robustness") -> Any:
        """Send one request and return the decoded response body (checks the correlation id)."""
        self._correlation_id += 1
        cid = self._correlation_id
        self.send_raw(encode_request(api_key, version, cid, client_id, message))
        got_cid, body = decode_response_with_header(api_key, version, self.recv_frame())
        assert got_cid == cid, f"correlation id {got_cid} != {cid}"
        return body

    def request_timed(self, api_key: int, version: int, message: Any) -> tuple[Any, float]:
        """Like request(), also returning the elapsed seconds (for figures in failure messages, never asserted
        against a wall clock bound alone)."""
        t0 = time.monotonic()
        body = self.request(api_key, version, message)
        return body, time.monotonic() - t0

    def closed_by_peer(self, wait_s: float = 10.0) -> bool:
        """True when the broker closes the connection (EOF/reset) within wait_s without sending anything."""
        self.sock.settimeout(wait_s)
        try:
            data = self.sock.recv(1)
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
        return data == b""

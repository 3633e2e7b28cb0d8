"""What a broker asks ZooKeeper, seen on the wire: a TcpProxy that decodes the client -> server direction.

ZooKeeper's client protocol is a stream of length-prefixed jute records. The first record of a connection is a
ConnectRequest (no header); every later one starts with a RequestHeader (xid int32, type int32) followed by the
operation's record, which for every path operation begins with the path (int32 length + UTF-8). A multi (type 14)
is a sequence of (MultiHeader type int32, done bool, err int32; op record) ending with done=true.

The decoder is deliberately small and tolerant: what it cannot parse it skips (that frame only) and counts in
``unparsed``; a frame length that cannot be right (negative or huge) stops decoding that connection (counted in
``abandoned``) while its bytes keep flowing, so the proxy never disturbs the broker.
"""
from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from tests.harness.tcp_proxy import TcpProxy

OP_NAMES = {1: "create", 2: "delete", 3: "exists", 4: "getData", 5: "setData", 6: "getACL", 7: "setACL",
            8: "getChildren", 9: "sync", 11: "ping", 12: "getChildren2", 13: "check", 14: "multi", 15: "create2",
            16: "reconfig", 17: "checkWatches", 18: "removeWatches", 19: "createContainer", 20: "deleteContainer",
            21: "createTTL", 22: "multiRead", 100: "auth", 101: "setWatches", 102: "sasl", 103: "getEphemerals",
            104: "getAllChildrenNumber", 105: "setWatches2", 106: "addWatch", -10: "createSession",
            -11: "closeSession"}
#: Operations whose record starts with the path.
PATH_OPS = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 15, 17, 18, 19, 20, 21, 103, 104, 106}
#: Operations that read a znode (data, existence or children).
READ_OPS = {3, 4, 8, 12}
WRITE_OPS = {1, 2, 5, 15, 19, 21}
MAX_FRAME = 64 * 1024 * 1024


@dataclass(frozen=True)
class ZkRequest:
    """One decoded request: ``op`` is the ZooKeeper operation type; a multi yields one per sub-operation
    (``in_multi`` True)."""

    t: float
    op: int
    path: str
    in_multi: bool = False

    @property
    def name(self) -> str:
        return OP_NAMES.get(self.op, str(self.op))


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def int32(self) -> int:
        v = struct.unpack_from(">i", self.buf, self.pos)[0]
        self.pos += 4
        return int(v)

    def int64(self) -> int:
        v = struct.unpack_from(">q", self.buf, self.pos)[0]
        self.pos += 8
        return int(v)

    def boolean(self) -> bool:
        if self.pos >= len(self.buf):
            raise ValueError("short")
        v = self.buf[self.pos]
        self.pos += 1
        return v != 0

    def buffer(self) -> bytes:
        n = self.int32()
        if n < 0:
            return b""
        if self.pos + n > len(self.buf):
            raise ValueError("short")
        v = self.buf[self.pos:self.pos + n]
        self.pos += n
        return v

    def string(self) -> str:
        return self.buffer().decode("utf-8")


def _skip_op_body(r: _Reader, op: int) -> None:
    """Skip the rest of a multi sub-operation after its path (only the kinds a multi may carry)."""
    if op in (1, 15, 19, 21):  # create: data, acl vector, flags [, ttl]
        r.buffer()
        for _ in range(max(0, r.int32())):
            r.int32()
            r.string()
            r.string()
        r.int32()
        if op == 21:
            r.int64()
    elif op in (2, 13):  # delete / check: version
        r.int32()
    elif op == 5:  # setData: data, version
        r.buffer()
        r.int32()
    elif op in (4, 8, 12):  # multiRead parts: path only
        pass
    else:
        raise ValueError(f"op {op} in multi")


def decode_request(frame: bytes, t: float) -> List[ZkRequest]:
    """Requests in one client frame (after the ConnectRequest). Raises ValueError if it cannot parse it."""
    r = _Reader(frame)
    r.int32()  # xid
    op = r.int32()
    if op in PATH_OPS:
        return [ZkRequest(t, op, r.string())]
    if op in (14, 22):
        out: List[ZkRequest] = []
        while True:
            sub = r.int32()
            done = r.boolean()
            r.int32()  # err
            if done or sub == -1:
                return out
            path = r.string()
            out.append(ZkRequest(t, sub, path, in_multi=True))
            _skip_op_body(r, sub)
    return [ZkRequest(t, op, "")]


class ZkStreamDecoder:
    """Frames one client -> server byte stream and decodes each request (see module docstring)."""

    def __init__(self, sink: "ZkTrafficLog") -> None:
        self.sink = sink
        self.buf = bytearray()
        self.connected = False
        self.dead = False

    def feed(self, data: bytes) -> None:
        if self.dead:
            return
        self.buf += data
        while len(self.buf) >= 4:
            n = struct.unpack_from(">i", self.buf, 0)[0]
            if n < 0 or n > MAX_FRAME:
                self.dead = True
                self.sink.count("abandoned")
                self.buf.clear()
                return
            if len(self.buf) < 4 + n:
                return
            frame = bytes(self.buf[4:4 + n])
            del self.buf[:4 + n]
            if not self.connected:  # ConnectRequest: protocolVersion, lastZxid, timeout, sessionId, passwd
                self.connected = True
                self.sink.count("connects")
                continue
            try:
                reqs = decode_request(frame, time.monotonic())
            except (ValueError, struct.error, UnicodeDecodeError):
                self.sink.count("unparsed")
                continue
            self.sink.add(reqs)


class ZkTrafficLog:
    """Thread-safe record of the requests of one client (all its connections)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._lock = threading.Lock()
        self.requests: List[ZkRequest] = []
        self.counters: Dict[str, int] = {"connects": 0, "unparsed": 0, "abandoned": 0, "frames": 0}

    def count(self, key: str) -> None:
        with self._lock:
            self.counters[key] = self.counters.get(key, 0) + 1

    def add(self, reqs: List[ZkRequest]) -> None:
        with self._lock:
            self.counters["frames"] += 1
            self.requests.extend(reqs)

    def snapshot(self) -> List[ZkRequest]:
        with self._lock:
            return list(self.requests)

    def matching(self, pattern: "object", ops: Optional[set] = None, since: float = float("-inf")
                 ) -> List[ZkRequest]:
        """Requests whose path matches ``pattern`` (a compiled regex, searched) and op is in ``ops``."""
        return [q for q in self.snapshot() if q.t >= since and (ops is None or q.op in ops)
                and pattern.search(q.path)]  # type: ignore[attr-defined]


class LoggingZkProxy(TcpProxy):
    """A TcpProxy (so it can also be cut/restored) that decodes every request its client sends to ZooKeeper."""

    def __init__(self, target_host: str, target_port: int, label: str) -> None:
        self.log = ZkTrafficLog(label)
        super().__init__(target_host, target_port)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            client_side = src.getsockname()[1] == self.port  # accepted sockets have the proxy's local port
        except OSError:
            client_side = False
        if not client_side:
            super()._pump(src, dst)
            return
        decoder = ZkStreamDecoder(self.log)
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                try:
                    decoder.feed(data)
                except Exception:  # never let decoding disturb the traffic
                    decoder.dead = True
                    self.log.count("abandoned")
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                try:
                    s.close()
                except OSError:
                    pass


def split_zk_connect(connect: str) -> Tuple[str, int, str]:
    """'127.0.0.1:2181/chroot' -> ('127.0.0.1', 2181, '/chroot')."""
    hosts, _, chroot = connect.partition("/")
    host, _, port = hosts.split(",")[0].rpartition(":")
    return host, int(port), ("/" + chroot) if chroot else ""

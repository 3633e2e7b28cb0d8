"""Idle client connections against a broker: each connects, sends one ApiVersions v3 request, reads the answer,
then stays open and silent (what a fleet of mostly idle clients costs a broker).

    .venv/bin/python -m tools.bench.idle_connections --bootstrap-server 127.0.0.1:9092 --count 10000 \
        [--processes 2] [--concurrency 128] [--source-ips 127.0.0.2,127.0.0.3] [--hold-seconds 60] [--json]

Library use (``tools/bench/scale_bench.py``):

- :func:`open_idle_connections` (async, in the calling process) returns an :class:`IdleConnections` holding the
  sockets, with the outcome of every attempt (:class:`OpenResult`);
- :class:`IdleConnectionsProcess` runs them in child processes (this module's CLI with ``--serve``), so the
  caller's own descriptors (20,000 per process here) stay free for its producers and consumers.

The request is built by hand (the flexible header v2 and the ApiVersions v3 body), so the tool does not depend on
the broker's codec and works the same against a real Kafka 3.9 broker, which checks that
``client_software_name``/``version`` match ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?``. Kafka closes
connections idle for ``connections.max.idle.ms`` (10 min by default): :meth:`IdleConnections.count_open` tells
how many the broker has closed since.

Outcomes of one attempt: ``answered`` (ApiVersions error code 0), ``error`` (another code), ``closed`` (the
broker accepted the TCP connection, then closed it before answering: a refusal by ``max.connections``,
``max.connections.per.ip`` or the descriptor reserve), ``refused`` (the TCP connect itself failed), ``timeout``.
Loop affinity: an :class:`IdleConnections` belongs to the loop that opened it.
"""
from __future__ import annotations

import argparse
import asyncio
import errno
import json
import os
import socket
import struct
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[2]
API_VERSIONS = 18
SOFTWARE_NAME = "idle-connections"
SOFTWARE_VERSION = "1.0"
OUTCOMES = ("answered", "error", "closed", "refused", "timeout")


def api_versions_v3_request(correlation_id: int, client_id: str = "idle-connections") -> bytes:
    """A size-prefixed ApiVersions v3 request: header v2 (flexible), body with the client software name/version."""
    cid = client_id.encode()
    header = struct.pack(">hhih", API_VERSIONS, 3, correlation_id, len(cid)) + cid + b"\x00"  # no tagged fields
    name, version = SOFTWARE_NAME.encode(), SOFTWARE_VERSION.encode()
    # compact strings: unsigned varint length+1 (all short here: one byte), then the bytes; then no tagged fields
    body = bytes([len(name) + 1]) + name + bytes([len(version) + 1]) + version + b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def parse_api_versions_response(frame: bytes, correlation_id: int) -> int:
    """The error code of an ApiVersions response frame (without its size prefix); response header v0 always."""
    if len(frame) < 6:
        raise ValueError(f"ApiVersions response of {len(frame)} bytes")
    cid, error_code = struct.unpack_from(">ih", frame, 0)
    if cid != correlation_id:
        raise ValueError(f"correlation id {cid}, expected {correlation_id}")
    return int(error_code)


@dataclass
class OpenResult:
    """What happened to the connection attempts of one :func:`open_idle_connections` call."""

    requested: int = 0
    outcomes: Counter = field(default_factory=Counter)
    error_codes: Counter = field(default_factory=Counter)
    #: connect start -> ApiVersions answer, per answered connection (ms)
    latencies_ms: List[float] = field(default_factory=list)
    seconds: float = 0.0
    #: first few failure descriptions, for a readable report
    samples: List[str] = field(default_factory=list)

    @property
    def answered(self) -> int:
        return self.outcomes["answered"]

    def merge(self, other: "OpenResult") -> None:
        self.requested += other.requested
        self.outcomes.update(other.outcomes)
        self.error_codes.update(other.error_codes)
        self.latencies_ms.extend(other.latencies_ms)
        self.seconds = max(self.seconds, other.seconds)
        self.samples.extend(other.samples[: max(0, 5 - len(self.samples))])

    def summary(self, with_latencies: bool = False) -> Dict[str, object]:
        lat = sorted(self.latencies_ms)

        def pct(q: float) -> float:
            return round(lat[min(len(lat) - 1, int(q * (len(lat) - 1) + 0.5))], 2) if lat else float("nan")
        return {"requested": self.requested, **{k: self.outcomes[k] for k in OUTCOMES},
                "error_codes": dict(self.error_codes), "seconds": round(self.seconds, 3),
                "answer_ms_p50": pct(0.5), "answer_ms_p99": pct(0.99), "answer_ms_max": pct(1.0),
                "samples": self.samples, **({"latencies_ms": [round(x, 2) for x in lat]} if with_latencies else {})}

    @classmethod
    def from_summary(cls, d: Dict[str, object]) -> "OpenResult":
        r = cls(requested=int(d["requested"]), seconds=float(d["seconds"]))  # type: ignore[arg-type]
        r.outcomes.update({k: int(d[k]) for k in OUTCOMES})  # type: ignore[call-overload]
        r.error_codes.update({int(k): v for k, v in dict(d["error_codes"]).items()})  # type: ignore[call-overload]
        r.samples = list(d.get("samples") or [])  # type: ignore[call-overload]
        r.latencies_ms = list(d.get("latencies_ms") or [])  # type: ignore[call-overload]
        return r


class IdleConnections:
    """Sockets that were answered and are now idle; :meth:`close` closes them all."""

    def __init__(self) -> None:
        self.sockets: List[socket.socket] = []
        self.result = OpenResult()

    def count_open(self) -> int:
        """How many of the idle sockets the broker has not closed (a peek that never blocks)."""
        n = 0
        for s in self.sockets:
            try:
                if s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                    n += 1  # unsolicited bytes: still open (a broker never sends them, but it is not closed)
            except (BlockingIOError, InterruptedError):
                n += 1
            except OSError:
                pass
        return n

    def close(self) -> None:
        for s in self.sockets:
            s.close()
        self.sockets.clear()

    def __len__(self) -> int:
        return len(self.sockets)


async def _read_exactly(loop: asyncio.AbstractEventLoop, sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = await loop.sock_recv(sock, n - len(buf))
        if not chunk:
            raise ConnectionResetError(errno.ECONNRESET, "closed by the broker")
        buf += chunk
    return bytes(buf)


async def _open_one(loop: asyncio.AbstractEventLoop, host: str, port: int, source_ip: Optional[str],
                    correlation_id: int, timeout_s: float, result: OpenResult, into: IdleConnections) -> None:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    t0 = time.perf_counter()
    stage = "connect"
    try:
        if source_ip:
            sock.bind((source_ip, 0))

        async def exchange() -> int:
            nonlocal stage
            await loop.sock_connect(sock, (host, port))
            stage = "answer"
            await loop.sock_sendall(sock, api_versions_v3_request(correlation_id))
            size = struct.unpack(">i", await _read_exactly(loop, sock, 4))[0]
            return parse_api_versions_response(await _read_exactly(loop, sock, size), correlation_id)
        code = await asyncio.wait_for(exchange(), timeout_s)
    except asyncio.TimeoutError:
        outcome, detail = "timeout", f"no {stage} within {timeout_s} s"
    except OSError as exc:
        outcome = "refused" if stage == "connect" else "closed"
        detail = f"{stage}: {exc.strerror or exc}"
    except ValueError as exc:
        outcome, detail = "error", str(exc)
    else:
        if code == 0:
            result.outcomes["answered"] += 1
            result.latencies_ms.append((time.perf_counter() - t0) * 1000.0)
            into.sockets.append(sock)
            return
        result.error_codes[code] += 1
        outcome, detail = "error", f"error code {code}"
    result.outcomes[outcome] += 1
    if len(result.samples) < 5:
        result.samples.append(f"{outcome}: {detail}")
    sock.close()


async def open_idle_connections(bootstrap: str, count: int, concurrency: int = 128,
                                source_ips: Sequence[str] = (), timeout_s: float = 30.0,
                                into: Optional[IdleConnections] = None) -> IdleConnections:
    """Open ``count`` connections to ``bootstrap`` (host:port), each answered by ApiVersions v3, then idle.

    At most ``concurrency`` attempts are in flight at once. A broker's listen backlog is
    ``socket.listen.backlog.size`` (Kafka's default 50): a burst beyond what it accepts in time overflows it, and the
    kernel drops SYNs that the client resends after 1 s (then 3 s, 7 s...): a large ``concurrency`` is a connection
    storm, a small one a steady stream. ``source_ips`` (e.g. 127.0.0.2, 127.0.0.3: any
    127/8 address works on Linux) spreads the connections over client addresses, round robin, for
    ``max.connections.per.ip``. More connections can be added to ``into`` by a later call.
    """
    host, _, port_text = bootstrap.rpartition(":")
    host, port = host.strip("[]") or "127.0.0.1", int(port_text)
    conns = into if into is not None else IdleConnections()
    result = OpenResult(requested=count)
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(max(1, concurrency))
    t0 = time.perf_counter()

    async def one(i: int) -> None:
        async with gate:
            ip = source_ips[i % len(source_ips)] if source_ips else None
            await _open_one(loop, host, port, ip, i, timeout_s, result, conns)
    await asyncio.gather(*(one(i) for i in range(count)))
    result.seconds = time.perf_counter() - t0
    conns.result.merge(result)
    return conns


class ResponsivenessProbe:
    """One connection sending ApiVersions every ``interval_s`` from a thread, recording each round trip (ms).

    An ApiVersions costs the broker next to nothing, so a long round trip means its event loop was busy with
    something else: run the probe while connections are being accepted to see whether accepting stalls the loop.
    """

    def __init__(self, bootstrap: str, interval_s: float = 0.005) -> None:
        import threading
        host, _, port = bootstrap.rpartition(":")
        self._sock = socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=30)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.interval_s = interval_s
        self.rtts_ms: List[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="responsiveness-probe", daemon=True)

    def _exchange(self, cid: int) -> None:
        self._sock.sendall(api_versions_v3_request(cid))
        head = self._recv(4)
        parse_api_versions_response(self._recv(struct.unpack(">i", head)[0]), cid)

    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionResetError("probe connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def _run(self) -> None:
        cid = 0
        while not self._stop.is_set():
            t0 = time.perf_counter()
            self._exchange(cid)
            self.rtts_ms.append((time.perf_counter() - t0) * 1000.0)
            cid += 1
            self._stop.wait(self.interval_s)

    def start(self) -> "ResponsivenessProbe":
        self._exchange(-1)  # warm: the first request of a connection is not a sample
        self._thread.start()
        return self

    def stop(self) -> Dict[str, float]:
        self._stop.set()
        self._thread.join(60)
        self._sock.close()
        lat = sorted(self.rtts_ms)
        if not lat:
            return {"samples": 0}
        return {"samples": len(lat), "p50_ms": round(lat[len(lat) // 2], 2),
                "p99_ms": round(lat[min(len(lat) - 1, int(0.99 * (len(lat) - 1) + 0.5))], 2),
                "max_ms": round(lat[-1], 2)}


# -------------------------------------------------------------------------------------------- child processes
class IdleConnectionsProcess:
    """Idle connections held by ``processes`` child processes (this module's ``--serve`` mode).

    :meth:`start` returns once every child has opened its share; :meth:`count_open` asks each child how many
    of its connections are still open; :meth:`stop` closes them and ends the children.
    """

    def __init__(self, bootstrap: str, count: int, processes: int = 1, concurrency: int = 128,
                 source_ips: Sequence[str] = (), timeout_s: float = 30.0) -> None:
        self.bootstrap = bootstrap
        self.count = count
        self.processes = max(1, processes)
        self.concurrency = concurrency
        self.source_ips = list(source_ips)
        self.timeout_s = timeout_s
        self._children: List[subprocess.Popen[str]] = []
        self.result = OpenResult()

    def start(self) -> OpenResult:
        shares = [self.count // self.processes + (1 if i < self.count % self.processes else 0)
                  for i in range(self.processes)]
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        for share in shares:
            cmd = [sys.executable, "-m", "tools.bench.idle_connections", "--bootstrap-server", self.bootstrap,
                   "--count", str(share), "--concurrency", str(max(1, self.concurrency // self.processes)),
                   "--timeout", str(self.timeout_s), "--serve"]
            if self.source_ips:
                cmd += ["--source-ips", ",".join(self.source_ips)]
            self._children.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                                   cwd=str(ROOT), env=env))
        for child in self._children:
            line = self._read_line(child)
            self.result.merge(OpenResult.from_summary(json.loads(line)))
        return self.result

    @staticmethod
    def _read_line(child: "subprocess.Popen[str]") -> str:
        assert child.stdout is not None
        line = child.stdout.readline()
        if not line:
            raise RuntimeError(f"idle-connection child {child.pid} exited with {child.wait()}")
        return line

    def count_open(self) -> int:
        total = 0
        for child in self._children:
            assert child.stdin is not None
            child.stdin.write("status\n")
            child.stdin.flush()
            total += int(json.loads(self._read_line(child))["open"])
        return total

    def stop(self) -> None:
        for child in self._children:
            try:
                assert child.stdin is not None
                child.stdin.close()
            except OSError:
                pass
        for child in self._children:
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            if child.stdout is not None:
                child.stdout.close()
        self._children.clear()

    def __enter__(self) -> "IdleConnectionsProcess":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _serve(args: argparse.Namespace) -> int:
    """--serve: open, print the summary as one JSON line, then answer "status" lines until stdin closes."""
    conns = await open_idle_connections(args.bootstrap_server, args.count, args.concurrency, _ips(args),
                                        args.timeout)
    print(json.dumps(conns.result.summary(with_latencies=True)), flush=True)
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line or line.strip() == "close":
            break
        if line.strip() == "status":
            print(json.dumps({"open": conns.count_open()}), flush=True)
    conns.close()
    return 0


def _ips(args: argparse.Namespace) -> Tuple[str, ...]:
    return tuple(ip.strip() for ip in (args.source_ips or "").split(",") if ip.strip())


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--processes", type=int, default=1, help="child processes sharing the connections")
    ap.add_argument("--concurrency", type=int, default=128, help="connection attempts in flight at once (all "
                    "processes together)")
    ap.add_argument("--source-ips", default="", help="comma list of client addresses, used round robin")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds for one connect + answer")
    ap.add_argument("--hold-seconds", type=float, default=0.0, help="keep the connections open this long")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of text")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        return asyncio.run(_serve(args))
    load = IdleConnectionsProcess(args.bootstrap_server, args.count, args.processes, args.concurrency,
                                  _ips(args), args.timeout)
    try:
        result = load.start()
        out = result.summary()
        if args.hold_seconds > 0:
            time.sleep(args.hold_seconds)
            out["still_open_after_hold"] = load.count_open()
    finally:
        load.stop()
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>22}: {v}")
    return 0 if out["answered"] == args.count else 1


if __name__ == "__main__":
    sys.exit(main())

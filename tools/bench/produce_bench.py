"""A Produce spread over many partitions beside one as large to a single partition, in process (no ZooKeeper, no
sockets).

    .venv/bin/python -m tools.bench.produce_bench [--partitions 1000] [--records 10] [--requests 30] [--fast]

Each request goes through what a broker does with it after the socket: decode, the Produce handler, the appends
on the ReplicaManager's I/O workers (one leader replica per partition, acks=1, records of 100 B), the encoded
answer. Printed per request shape: the process's CPU per request (best and median of 5 rounds), the event loop
thread's share of it, and the CPU per partition. ``spread`` is ``--partitions`` partitions of ``--records``
records; ``single`` is one partition with as many records in one batch (its topic's max.message.bytes raised to
take it: at the default 1 MiB, 10,000 records of 100 B are refused, which costs little and measures nothing).
The end-to-end figures (a broker process, a confluent-kafka producer, Kafka 3.9.1 beside it) are what the issue
measured; this isolates the broker's own per-partition cost from the client and the machine's network stack.
Figures only; no assertions.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
import types
from typing import Any, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from broker.api import produce  # noqa: E402
from broker.api.dispatcher import ConnectionContext, RequestContext  # noqa: E402
from broker.protocol import api as proto  # noqa: E402
from broker.protocol.api import ApiKey  # noqa: E402
from broker.protocol.records.builder import build_batch  # noqa: E402
from broker.replica.manager import ReplicaManager  # noqa: E402
from broker.storage.config import LogConfig  # noqa: E402
from broker.storage.log_manager import LogManager  # noqa: E402
from broker.storage.scheduler import Scheduler  # noqa: E402

VERSION = 9
ROUNDS = 5


class _Metadata:
    """The metadata cache's answer for the two topics here: every partition asked for exists."""

    def __init__(self, partitions: int) -> None:
        self._topic = types.SimpleNamespace(partitions=dict.fromkeys(range(partitions)))

    def topic(self, name: str) -> Any:
        return self._topic


def request_frame(topic: str, partitions: int, records: int) -> bytes:
    """The body of a Produce v9 request (after the size prefix): ``records`` records of 100 B per partition."""
    batch = bytes(build_batch([(None, b"x" * 100, [], 1_700_000_000_000 + i) for i in range(records)]))
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
        {"name": topic, "partition_data": [{"index": p, "records": batch} for p in range(partitions)]}]}
    return proto.encode_request(ApiKey.PRODUCE, VERSION, 1, "produce-bench", body)[4:]


async def measure(partitions: int, records: int, requests: int) -> List[Tuple[str, int, List[float], List[float]]]:
    root = tempfile.mkdtemp(prefix="produce-bench-")
    log_manager = LogManager([root], LogConfig(), broker_id=0, scheduler=Scheduler())
    rm = ReplicaManager(0, log_manager, io_threads=4)
    try:
        for p in range(partitions):
            await rm.make_leader("spread", p, None, 0, [0], [0], LogConfig())
        # one batch holds the single partition's records: let the topic take it (10,000 x 100 B is over 1 MiB)
        await rm.make_leader("single", 0, None, 0, [0], [0], LogConfig(max_message_bytes=64 << 20))
        metadata = _Metadata(partitions)
        connection = ConnectionContext("bench", "localhost", 1, "PLAINTEXT")

        async def one(frame: bytes) -> None:
            data = memoryview(bytearray(frame))
            header, offset = proto.decode_request_header(data)
            request = proto.decode_request(ApiKey.PRODUCE, VERSION, data, offset)
            answer = await produce.handle(RequestContext(connection, header), request, replica_manager=rm,
                                          metadata=metadata)  # type: ignore[arg-type]
            proto.encode_response(ApiKey.PRODUCE, VERSION, header.correlation_id, answer)
            failed = [p for t in answer["responses"] for p in t["partition_responses"]
                      if isinstance(p, dict) and p["error_code"]]
            if failed:
                raise RuntimeError("the benchmark's appends failed: %s" % failed[:3])

        rows = []
        for name, shape, n in (("spread", ("spread", partitions, records), partitions),
                               ("single", ("single", 1, partitions * records), 1)):
            frame = request_frame(*shape)
            for _ in range(3):
                await one(frame)
            total, loop = [], []
            for _ in range(ROUNDS):
                c0, l0 = time.process_time(), time.thread_time()
                for _ in range(requests):
                    await one(frame)
                total.append((time.process_time() - c0) / requests)
                loop.append((time.thread_time() - l0) / requests)
            rows.append((name, n, total, loop))
        return rows
    finally:
        await rm.stop()
        log_manager.shutdown()
        rm.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--records", type=int, default=10, help="records per partition in the spread request")
    parser.add_argument("--requests", type=int, default=30, help="requests per round (5 rounds)")
    parser.add_argument("--fast", action="store_true", help="a small run (CI smoke): 50 partitions, 3 requests")
    args = parser.parse_args()
    if args.fast:
        args.partitions, args.requests = 50, 3
    rows = asyncio.run(measure(args.partitions, args.records, args.requests))
    records = args.partitions * args.records
    print("%-8s %10s %8s %26s %22s %14s" % ("request", "partitions", "records", "CPU ms/request best, med",
                                            "loop thread ms, med", "us/partition"))
    for name, n, total, loop in rows:
        per_partition = "%14.2f" % (min(total) / n * 1e6) if n > 1 else "%14s" % "-"
        print("%-8s %10d %8d %17.2f %8.2f %22.2f %s" % (name, n, records, min(total) * 1e3,
                                                        statistics.median(total) * 1e3,
                                                        statistics.median(loop) * 1e3, per_partition))
    spread, single = rows[0][2], rows[1][2]
    print("%d records per request: spread costs %.1fx single (best of %d rounds)" % (records,
                                                                                 min(spread) / min(single), ROUNDS))


if __name__ == "__main__":
    main()

"""Protocol codec throughput: Produce v9 request decode (1 MiB records) and Fetch v12 response encode.

Usage: python tools/bench/protocol_bench.py [--seconds N]. Prints messages per second.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from broker.protocol.api import (  # noqa: E402
    ApiKey, decode_request, decode_request_header, decode_response, encode_request, encode_response,
)


def _rate(fn, seconds: float) -> float:
    n = 0
    start = time.perf_counter()
    while True:
        for _ in range(100):
            fn()
        n += 100
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed


def main() -> None:
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 1.0
    produce = {"acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": "bench", "partition_data": [{"index": 0, "records": b"\x00" * (1 << 20)}]}]}
    frame = memoryview(encode_request(ApiKey.PRODUCE, 9, 1, "bench", produce))[4:]

    def decode_produce() -> None:
        header, offset = decode_request_header(frame)
        decode_request(header.api_key, header.api_version, frame, offset)

    fetch = {"responses": [{"topic": "bench", "partitions": [
        {"partition_index": i, "high_watermark": 1000, "last_stable_offset": 1000, "log_start_offset": 0,
         "records": b"\x00" * 1024} for i in range(10)]}]}

    def encode_fetch() -> None:
        encode_response(ApiKey.FETCH, 12, 1, fetch)

    print(f"produce v9 request decode (1 MiB records): {_rate(decode_produce, seconds):,.0f} msgs/s")
    print(f"fetch v12 response encode (10 partitions, dicts): {_rate(encode_fetch, seconds):,.0f} msgs/s")
    fetch_obj = decode_response(ApiKey.FETCH, 12, encode_response(ApiKey.FETCH, 12, 1, fetch)[0])
    print(f"fetch v12 response encode (10 partitions, objects): "
          f"{_rate(lambda: encode_response(ApiKey.FETCH, 12, 1, fetch_obj), seconds):,.0f} msgs/s")


if __name__ == "__main__":
    main()

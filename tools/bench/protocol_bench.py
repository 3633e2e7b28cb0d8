"""Protocol codec cost per call: the generated codec (broker.protocol.api) against the closure engine.

The "engine" column replays the previous entry points (broker.protocol.interp plus the old header
and coalescing code) in the same process, so the ratio compares like with like on this machine.

Usage: python tools/bench/protocol_bench.py [--repeat N] [--number N]. Prints µs per call (best of
N repeats) and engine/generated ratios.
"""
from __future__ import annotations

import struct
import sys
import tempfile
import timeit
import uuid
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from broker.protocol import api  # noqa: E402
from broker.protocol.api import (  # noqa: E402
    ApiKey, RequestHeader, decode_request, decode_request_header, encode_request, encode_response,
)
from broker.protocol.codec import coalesce  # noqa: E402
from broker.protocol.interp import engine_codec  # noqa: E402
from broker.protocol.schema import load_apis  # noqa: E402
from broker.util.file_slice import FileSlice  # noqa: E402

_APIS = load_apis()
_HDR = struct.Struct(">hhi")
_I32 = struct.Struct(">i")


# ---------------------------------------------------------------- the previous entry points, for comparison


def old_decode_request_header(frame: Any) -> tuple[RequestHeader, int]:
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    api_key, api_version, correlation_id = _HDR.unpack_from(buf, 0)
    hv = api.request_header_version(api_key, api_version)
    if hv == 0:
        return RequestHeader(api_key, api_version, correlation_id, None, 0), 8
    client_id, pos = api._read_client_id(buf, 8)
    if hv == 2:
        pos = api._skip_tagged_fields(buf, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, hv), pos


def old_decode_request(api_key: int, version: int, frame: Any, offset: int) -> Any:
    return engine_codec(api._api(api_key, version).request, version).decode(frame, offset)[0]


def old_encode_response(api_key: int, version: int, correlation_id: int, message: Any) -> list[Any]:
    parts = engine_codec(api._api(api_key, version).response, version).encode_parts(message)
    hdr = _I32.pack(correlation_id)
    if api.response_header_version(api_key, version) == 1:
        hdr += b"\x00"
    size = len(hdr) + sum(len(p) for p in parts)
    return coalesce([_I32.pack(size) + hdr, *parts])


# ---------------------------------------------------------------- cases


def _cases(fs: FileSlice) -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    cases = []
    for label, size in (("~100 B batch", 100), ("1 MiB batch", 1 << 20)):
        produce = {"acks": -1, "timeout_ms": 30000, "topic_data": [
            {"name": "bench-topic", "partition_data": [{"index": 0, "records": b"\x01" * size}]}]}
        frame = memoryview(encode_request(ApiKey.PRODUCE, 9, 1, "rdkafka", produce))[4:]

        def new(frame: memoryview = frame) -> Any:
            h, off = decode_request_header(frame)
            return decode_request(h.api_key, h.api_version, frame, off)

        def old(frame: memoryview = frame) -> Any:
            h, off = old_decode_request_header(frame)
            return old_decode_request(h.api_key, h.api_version, frame, off)

        cases.append((f"Produce v9 request decode ({label})", new, old))

    def encode_case(label: str, key: ApiKey, version: int, msg: Any) -> None:
        cases.append((label, lambda: encode_response(key, version, 7, msg),
                      lambda: old_encode_response(key, version, 7, msg)))

    encode_case("Produce v9 response encode (1 partition)", ApiKey.PRODUCE, 9, {"responses": [
        {"name": "bench-topic", "partition_responses": [
            {"index": 0, "error_code": 0, "base_offset": 1234, "log_append_time_ms": -1, "log_start_offset": 0}]}],
        "throttle_time_ms": 0})
    topic_id = uuid.uuid4()

    def fetch(n: int) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
            {"topic_id": topic_id, "partitions": [
                {"partition_index": i, "error_code": 0, "high_watermark": 1000, "last_stable_offset": 1000,
                 "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
                 "records": fs} for i in range(n)]}]}

    encode_case("Fetch v15 response encode (1 partition, FileSlice)", ApiKey.FETCH, 15, fetch(1))
    encode_case("Fetch v15 response encode (10 partitions, FileSlices)", ApiKey.FETCH, 15, fetch(10))
    metadata = {"throttle_time_ms": 0, "cluster_id": "cluster-1", "controller_id": 0,
                "brokers": [{"node_id": 0, "host": "localhost", "port": 9092, "rack": None}],
                "topics": [{"error_code": 0, "name": f"topic-{t}", "topic_id": uuid.uuid4(), "is_internal": False,
                            "partitions": [{"error_code": 0, "partition_index": p, "leader_id": 0,
                                            "leader_epoch": 0, "replica_nodes": [0], "isr_nodes": [0],
                                            "offline_replicas": []} for p in range(3)],
                            "topic_authorized_operations": -2147483648} for t in range(10)]}
    encode_case("Metadata v12 response encode (10 topics x 3 partitions)", ApiKey.METADATA, 12, metadata)
    api_versions = {"error_code": 0, "throttle_time_ms": 0, "api_keys": [
        {"api_key": int(k), "min_version": lo, "max_version": hi} for k, (lo, hi) in api.API_VERSIONS_RANGE.items()]}
    encode_case("ApiVersions v3 response encode (all APIs)", ApiKey.API_VERSIONS, 3, api_versions)
    return cases


def _best_us(fn: Callable[[], Any], number: int, repeat: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 5
    number = int(sys.argv[sys.argv.index("--number") + 1]) if "--number" in sys.argv else 2000
    with tempfile.TemporaryFile() as f:
        f.write(b"\x00" * 4096)
        f.flush()
        fs = FileSlice(f, 0, 4096)
        print(f"{'case':58} {'engine µs':>10} {'generated µs':>13} {'ratio':>6}")
        for label, new, old in _cases(fs):
            assert new() == old(), label  # same message / same parts before timing anything
            old_us = _best_us(old, number, repeat)
            new_us = _best_us(new, number, repeat)
            print(f"{label:58} {old_us:10.2f} {new_us:13.2f} {old_us / new_us:5.1f}x")


if __name__ == "__main__":
    main()

"""Codec cost per small request: the generated Python ("before") against its Cython twin ("after",
broker._native.protocol_codecs), same process, same messages.

Decode takes the body bytes as the broker gets them (a memoryview of the frame). Encode writes into a fresh
bytearray holding a response header, as broker.protocol.api.encode_response does, from the dicts the handlers
build. Prints µs per call (best of --repeat interleaved rounds of --number calls) and the ratio python/compiled.

Usage: python tools/bench/codec_bench.py [--repeat N] [--number N]
"""
from __future__ import annotations

import argparse
import sys
import timeit
import uuid
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from broker.protocol import api  # noqa: E402
from broker.protocol.api import ApiKey  # noqa: E402
from broker.protocol.codec import MessageCodec  # noqa: E402
from broker.protocol.schema import load_apis  # noqa: E402

_APIS = load_apis()
_BATCH = bytes(range(100))  # one ~100 B record batch (its content is never parsed by the codec)


def _fetch_request(partitions: int) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic_id": uuid.UUID(int=7), "partitions": [
                {"partition": p, "current_leader_epoch": 0, "fetch_offset": 100, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1048576} for p in range(partitions)]}],
            "forgotten_topics_data": [], "rack_id": ""}


def _fetch_response(partitions: int) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic_id": uuid.UUID(int=7), "partitions": [
            {"partition_index": p, "error_code": 0, "high_watermark": 1000, "last_stable_offset": 1000,
             "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
             "records": _BATCH} for p in range(partitions)]}]}


def messages() -> list[tuple[str, ApiKey, int, str, dict[str, Any]]]:
    """(label, api, version, 'request' | 'response', message) of each benchmarked message."""
    metadata = {"throttle_time_ms": 0, "cluster_id": "cluster-1", "controller_id": 0,
                "brokers": [{"node_id": 0, "host": "localhost", "port": 9092, "rack": None}],
                "topics": [{"error_code": 0, "name": f"topic-{t}", "topic_id": uuid.UUID(int=t + 1),
                            "is_internal": False,
                            "partitions": [{"error_code": 0, "partition_index": p, "leader_id": 0,
                                            "leader_epoch": 0, "replica_nodes": [0], "isr_nodes": [0],
                                            "offline_replicas": []} for p in range(3)],
                            "topic_authorized_operations": -2147483648} for t in range(10)]}
    return [
        ("ApiVersions v3 request", ApiKey.API_VERSIONS, 3, "request",
         {"client_software_name": "librdkafka", "client_software_version": "2.3.0"}),
        ("ApiVersions v3 response (all APIs)", ApiKey.API_VERSIONS, 3, "response", {
            "error_code": 0, "throttle_time_ms": 0, "api_keys": [
                {"api_key": int(k), "min_version": lo, "max_version": hi}
                for k, (lo, hi) in api.API_VERSIONS_RANGE.items()]}),
        ("Heartbeat v4 request", ApiKey.HEARTBEAT, 4, "request",
         {"group_id": "group-1", "generation_id": 3, "member_id": "rdkafka-0c5e6f2a-9b1d", "group_instance_id": None}),
        ("Heartbeat v4 response", ApiKey.HEARTBEAT, 4, "response", {"throttle_time_ms": 0, "error_code": 0}),
        ("Produce v9 request (1 partition, 100 B)", ApiKey.PRODUCE, 9, "request", {
            "transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
                {"name": "bench-topic", "partition_data": [{"index": 0, "records": _BATCH}]}]}),
        ("Produce v9 response (1 partition)", ApiKey.PRODUCE, 9, "response", {"responses": [
            {"name": "bench-topic", "partition_responses": [
                {"index": 0, "error_code": 0, "base_offset": 1234, "log_append_time_ms": -1,
                 "log_start_offset": 0}]}], "throttle_time_ms": 0}),
        ("Fetch v13 request (1 partition)", ApiKey.FETCH, 13, "request", _fetch_request(1)),
        ("Fetch v13 request (10 partitions)", ApiKey.FETCH, 13, "request", _fetch_request(10)),
        ("Fetch v13 response (1 partition, 100 B)", ApiKey.FETCH, 13, "response", _fetch_response(1)),
        ("Fetch v13 response (10 partitions, 100 B each)", ApiKey.FETCH, 13, "response", _fetch_response(10)),
        ("Metadata v12 response (10 topics x 3 partitions)", ApiKey.METADATA, 12, "response", metadata),
    ]


def _best_pair_us(before: Callable[[], Any], after: Callable[[], Any], number: int,
                  repeat: int) -> tuple[float, float]:
    """Best µs per call of each, their rounds interleaved so both see the same machine load."""
    b = a = float("inf")
    for _ in range(repeat):
        b = min(b, timeit.timeit(before, number=number) / number * 1e6)
        a = min(a, timeit.timeit(after, number=number) / number * 1e6)
    return b, a


def _pair(codec: MessageCodec, msg: dict[str, Any], data: memoryview) -> tuple[Callable[[], Any], Callable[[], Any]]:
    dec, enc = codec.decode_fn, codec.encode_fn

    def decode() -> Any:
        return dec(data, 0)

    def encode() -> Any:
        return enc(bytearray(9), [], msg)

    return decode, encode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--number", type=int, default=5000)
    args = parser.parse_args(argv)
    print(f"{'message':50} {'op':6} {'python µs':>10} {'compiled µs':>12} {'ratio':>6}")
    for label, key, version, side, msg in messages():
        schema = getattr(_APIS[key], side)
        py, cy = MessageCodec(schema, version, engine="python"), MessageCodec(schema, version, engine="compiled")
        data = memoryview(py.encode(msg))
        assert cy.encode(msg) == bytes(data) and cy.decode(data)[0] == py.decode(data)[0], label
        (py_decode, py_encode), (cy_decode, cy_encode) = _pair(py, msg, data), _pair(cy, msg, data)
        b, a = _best_pair_us(py_decode, cy_decode, args.number, args.repeat)
        print(f"{label:50} {'decode':6} {b:10.2f} {a:12.2f} {b / a:5.2f}x")
        b, a = _best_pair_us(py_encode, cy_encode, args.number, args.repeat)
        print(f"{label:50} {'encode':6} {b:10.2f} {a:12.2f} {b / a:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Metadata at 10,000 partitions, in process: the per-partition walk against the prepared answers.

    python -m tools.bench.metadata_bench [--fast] [--requests N] [--brokers N]

Fills a MetadataCache from one UpdateMetadata v8 request (as the controller sends it), for 100 topics of
100 partitions and 1,000 topics of 10, and prints:

- UpdateMetadata: decoding the request and applying it (to an empty cache, then the same request again);
- all-topics Metadata, handler plus response encoding, p50/p99 in ms at several versions, for the walk
  (``answers=None``: every request walks every partition, as before) and the prepared answers, and the
  walk/prepared ratio;
- the first request after a change: one topic's partitions changed (that topic re-encoded), a listener
  was added (no entry changes), a broker joined (the live brokers changed: every topic re-encoded).

Figures only, no assertions (the machine is shared); GC stays on, as in the broker.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from broker.api import metadata as metadata_api  # noqa: E402
from broker.api.dispatcher import ConnectionContext, RequestContext  # noqa: E402
from broker.api.metadata_answers import MetadataAnswers  # noqa: E402
from broker.cluster.metadata_cache import MetadataCache  # noqa: E402
from broker.protocol import api as proto  # noqa: E402
from broker.protocol.api import ApiKey  # noqa: E402

VERSIONS = (1, 9, 12)
LISTENER = "PLAINTEXT"


def update_metadata_body(topics: int, partitions: int, brokers: int, leader_epoch: int = 1,
                         listeners: tuple = (LISTENER,)) -> Dict[str, Any]:
    """An UpdateMetadata v8 body: every partition led by broker p % brokers, replicated on all brokers."""
    def replicas(p: int) -> List[int]:
        return [(p + i) % brokers for i in range(brokers)]
    return {
        "controller_id": 0, "controller_epoch": 1, "broker_epoch": 1,
        "topic_states": [{"topic_name": f"topic-{t:04d}", "topic_id": uuid.UUID(int=t + 1), "partition_states": [
            {"partition_index": p, "controller_epoch": 1, "leader": p % brokers, "leader_epoch": leader_epoch,
             "isr": replicas(p), "zk_version": 1, "replicas": replicas(p), "offline_replicas": []}
            for p in range(partitions)]} for t in range(topics)],
        "live_brokers": [{"id": b, "rack": None, "endpoints": [
            {"port": 9092 + b, "host": f"broker{b}", "listener": name, "security_protocol": 0} for name in listeners]}
            for b in range(brokers)],
    }


def decode_update_metadata(body: Dict[str, Any]) -> Any:
    frame = memoryview(proto.encode_request(ApiKey.UPDATE_METADATA, 8, 1, "controller", body))[4:]
    _, offset = proto.decode_request_header(frame)
    return proto.decode_request(ApiKey.UPDATE_METADATA, 8, frame, offset)


def all_topics_call(metadata: MetadataCache, answers: Optional[MetadataAnswers], version: int) -> Callable[[], Any]:
    """One all-topics Metadata request: the handler (run to completion: it does not wait) and the encoding."""
    conn = ConnectionContext("bench", "127.0.0.1", 1, LISTENER)
    ctx = RequestContext(conn, SimpleNamespace(api_key=ApiKey.METADATA, api_version=version, correlation_id=1,
                                               client_id="bench"))
    request = SimpleNamespace(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False,
                              include_cluster_authorized_operations=False)
    config = SimpleNamespace(get=lambda key: False)

    def call() -> Any:
        coro = metadata_api.handle(ctx, request, metadata=metadata, admin=None, config=config,  # type: ignore[arg-type]
                                   answers=answers)
        try:
            coro.send(None)
        except StopIteration as done:
            return proto.encode_response(ApiKey.METADATA, version, 1, done.value)
        raise RuntimeError("the Metadata handler waited")
    return call


def timed_ms(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def percentiles(fn: Callable[[], Any], n: int) -> tuple:
    fn()  # warm: codecs compiled, entries prepared
    samples = sorted(timed_ms(fn) for _ in range(n))
    return samples[len(samples) // 2], samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def run_layout(topics: int, partitions: int, brokers: int, requests: int) -> None:
    label = f"{topics}x{partitions}"
    body = update_metadata_body(topics, partitions, brokers)
    decode_update_metadata(update_metadata_body(1, 1, brokers))  # the codec is generated on first use
    t0 = time.perf_counter()
    request = decode_update_metadata(body)
    decode_ms = (time.perf_counter() - t0) * 1e3
    metadata = MetadataCache(0)
    metadata.cluster_id = "bench"
    apply_ms = timed_ms(lambda: metadata.update_metadata(request, 8))
    again_ms = timed_ms(lambda: metadata.update_metadata(request, 8))
    print(f"{label:>9} UpdateMetadata v8 decode {decode_ms:7.2f} ms  apply {apply_ms:7.2f} ms  "
          f"apply unchanged {again_ms:7.2f} ms")
    answers = MetadataAnswers(metadata)
    for version in VERSIONS:
        walk = all_topics_call(metadata, None, version)
        prepared = all_topics_call(metadata, answers, version)
        if walk() != prepared():
            raise AssertionError(f"prepared answer differs from the walk at v{version}")
        w50, w99 = percentiles(walk, requests)
        p50, p99 = percentiles(prepared, requests)
        print(f"{label:>9} all topics v{version:<2} walk p50/p99 {w50:7.2f} / {w99:7.2f} ms   prepared "
              f"{p50:6.3f} / {p99:6.3f} ms   ratio {w50 / p50:6.1f}x / {w99 / p99:6.1f}x")
    prepared = all_topics_call(metadata, answers, 12)
    prepared()
    one = update_metadata_body(1, partitions, brokers, leader_epoch=2)
    one["topic_states"][0]["partition_states"][0]["leader_epoch"] = 3
    metadata.update_metadata(decode_update_metadata(one), 8)
    print(f"{label:>9} v12 first request after one topic changed    {timed_ms(prepared):7.2f} ms")
    endpoints = decode_update_metadata(update_metadata_body(0, 0, brokers, listeners=(LISTENER, "INTERNAL")))
    metadata.update_metadata(endpoints, 8)
    print(f"{label:>9} v12 first request after a listener was added  {timed_ms(prepared):7.2f} ms "
          "(nothing re-encoded)")
    joined = decode_update_metadata(update_metadata_body(0, 0, brokers + 1))
    metadata.update_metadata(joined, 8)
    print(f"{label:>9} v12 first request after a broker joined     {timed_ms(prepared):7.2f} ms "
          "(every topic re-encoded)")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200, help="requests timed per row (default 200)")
    ap.add_argument("--brokers", type=int, default=1, help="live brokers, and replicas per partition (default 1)")
    ap.add_argument("--fast", action="store_true", help="small sizes: only proves the script runs")
    a = ap.parse_args(argv)
    layouts = [(10, 10)] if a.fast else [(100, 100), (1000, 10)]
    for topics, partitions in layouts:
        run_layout(topics, partitions, a.brokers, 5 if a.fast else a.requests)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Segments to dump: the same traffic written by a broker (ours or a real Kafka 3.9.1), then the broker stopped
cleanly so that its indexes are trimmed and its producer snapshots written.

Traffic: keyed records with headers in several small batches (so the offset and time indexes get entries), each
compression codec, a committed and an aborted transaction (markers, a .txnindex entry), and a consumer group that
commits offsets (``__consumer_offsets``: GroupMetadata and OffsetCommit records; ``__transaction_state``).
"""
from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Dict, List

#: topic -> its settings; index.interval.bytes=1 makes every batch an index entry
TOPICS: Dict[str, Dict[str, str]] = {
    "plain": {"index.interval.bytes": "1"},
    "gzip": {}, "snappy": {}, "lz4": {}, "zstd": {},
    "txn": {"index.interval.bytes": "1"},
}
#: a transaction over many partitions: the transaction log decoder prints them in Scala HashSet order
MULTI_TOPIC, MULTI_PARTITIONS = "multi", 12


def write_traffic(bootstrap: str) -> None:
    """Produce the traffic above to the broker at ``bootstrap`` (confluent-kafka)."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, 1, 1, config=c) for t, c in TOPICS.items()]
                                  + [NewTopic(MULTI_TOPIC, MULTI_PARTITIONS, 1)])
    for f in futures.values():
        f.result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})
    for i in range(6):
        headers = [("h1", b"v1"), ("h2", None)] if i % 2 == 0 else []
        key = None if i == 3 else f"key-{i}".encode()
        p.produce("plain", value=f"value {i} \u00e9".encode() if i != 4 else None, key=key, headers=headers,
                  timestamp=1_700_000_000_000 + i * 1000)
        p.flush(30)
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        cp = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 50})
        for i in range(5):
            cp.produce(codec, value=(f"{codec} record {i} " * 5).encode(), key=str(i).encode(),
                       timestamp=1_700_000_000_000 + i)
        cp.flush(30)
    tp = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"dump-{uuid.uuid4().hex[:6]}",
                   "linger.ms": 0})
    tp.init_transactions(30)
    for commit in (True, False, True):
        tp.begin_transaction()
        for i in range(3):
            tp.produce("txn", value=f"txn {commit} {i}".encode(), key=b"k")
        tp.flush(30)
        if commit:
            tp.commit_transaction(30)
        else:
            tp.abort_transaction(30)
    tp.begin_transaction()
    for p in range(MULTI_PARTITIONS):
        tp.produce(MULTI_TOPIC, value=b"m", partition=p)
    for t in ("gzip", "snappy", "lz4"):
        tp.produce(t, value=b"in a transaction", key=b"t")
    tp.flush(30)
    tp.commit_transaction(30)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dump-group", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["plain"])
    got = 0
    for _ in range(60):
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got += 1
            if got == 6:
                break
    assert got == 6, f"the consumer read {got} of 6 records"
    c.commit(asynchronous=False)
    c.close()


def copy_log_dir(log_dir: Path, dest: Path) -> Path:
    """A copy of a stopped broker's log dir (the files are then read by both tools)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(log_dir, dest)
    return dest


def segment_files(log_dir: Path, partitions: List[str]) -> List[Path]:
    """Every segment, index, snapshot and transaction index file of ``partitions`` (directory names)."""
    out: List[Path] = []
    for part in partitions:
        for f in sorted((log_dir / part).iterdir()):
            if f.suffix in (".log", ".index", ".timeindex", ".snapshot", ".txnindex"):
                out.append(f)
    return out


def write_legacy_segments(directory: Path) -> List[Path]:
    """Segments in the pre-0.11 formats (magic 0 and 1, plain and in gzip/snappy wrappers, CreateTime and
    LogAppendTime), as Kafka brokers before 0.11 wrote them: the broker never stores these, but old logs have them."""
    import struct
    import zlib
    from types import SimpleNamespace as R

    from broker.protocol.records.compression import GZIP, SNAPPY, compress
    from broker.protocol.records.legacy import build_legacy_message_set

    def wrapper(inner: bytes, magic: int, codec: int, offset: int, ts: int = 7, log_append: bool = False) -> bytes:
        value = compress(codec, inner)
        body = struct.pack(">bb", magic, codec | (0x08 if log_append else 0))
        if magic == 1:
            body += struct.pack(">q", ts)
        body += struct.pack(">ii", -1, len(value)) + value
        return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body) & 0xFFFFFFFF) + body

    def recs(first: int, n: int, key: bool = True) -> List[R]:
        return [R(offset=first + i, timestamp=1_600_000_000_000 + i, key=b"k%d" % i if key else None,
                  value=None if (first + i) % 4 == 3 else b"v%d" % i) for i in range(n)]

    directory.mkdir(parents=True, exist_ok=True)
    plain = build_legacy_message_set(recs(0, 2), 0) + build_legacy_message_set(recs(2, 3), 1)
    wrapped = (wrapper(build_legacy_message_set(recs(0, 3), 1), 1, GZIP, 7)  # relative inner offsets 0..2
               + wrapper(build_legacy_message_set(recs(8, 2), 0), 0, GZIP, 9)  # absolute inner offsets
               + wrapper(build_legacy_message_set(recs(0, 2, key=False), 1), 1, SNAPPY, 11, ts=999, log_append=True))
    out = [directory / "00000000000000000000.log", directory / "00000000000000000005.log"]
    out[0].write_bytes(plain)
    out[1].write_bytes(wrapped)
    return out

"""kafka-dump-log without a broker: segments built with the broker's own record builder, and the decoders'
renderings (the expected texts are what Kafka 3.9.1's DumpLogSegments printed for the same kind of data; the
integration test tests/integration/tools/test_tools_logs_features.py compares the two tools on real segments)."""
from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace
from typing import List, Tuple

import pytest

from broker.coordinator.group import records as group_records
from broker.coordinator.transaction import records as txn_records
from broker.protocol.records.builder import build_batch
from broker.protocol.records.control import end_txn_marker_batch
from broker.storage.producer_state import BatchMetadata, ProducerStateEntry, encode_snapshot
from broker.storage.txn_index import AbortedTxn
from tools.cli import dump_log
from tools.cli.dump_log_decoders import (consumer_subscription_json, json_string, offsets_parser,
                                         scala_hash_set_order, transaction_log_parser)


def _run(capsys: pytest.CaptureFixture, *args: str) -> Tuple[int, List[str], str]:
    code = dump_log.main(list(args))
    out = capsys.readouterr()
    return code, out.out.splitlines(), out.err


def _segment(tmp_path: Path) -> Path:
    d = tmp_path / "t-0"
    d.mkdir()
    data = build_batch([(b"k1", b"v1", [("h", b"x")], 1000), (None, b"v2", [], 1005)], base_offset=0,
                       producer_id=7, producer_epoch=1, base_sequence=0, partition_leader_epoch=3)
    marker = bytearray(end_txn_marker_batch(7, 1, 5, committed=True, timestamp_ms=2000))
    marker[0:8] = struct.pack(">q", 2)
    data += bytes(marker)
    data += build_batch([(b"k", None, [], 3000)], base_offset=5)  # offsets 3 and 4 were cleaned away
    (d / "00000000000000000000.log").write_bytes(data)
    return d / "00000000000000000000.log"


def test_log_batches_and_records(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    log = _segment(tmp_path)
    code, lines, err = _run(capsys, "--files", str(log), "--print-data-log")
    assert code == 0
    assert lines[0] == f"Dumping {log}" and lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 7 "
                               "producerEpoch: 1 partitionLeaderEpoch: 3 isTransactional: false isControl: false "
                               "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1005 size: ")
    assert lines[2].endswith("magic: 2 compresscodec: none crc: " + lines[2].split("crc: ")[1].split()[0] +
                             " isvalid: true")
    assert lines[3] == "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 2 sequence: 0 headerKeys: [h] key: k1 " \
                       "payload: v1"
    assert lines[4] == "| offset: 1 CreateTime: 1005 keySize: -1 valueSize: 2 sequence: 1 headerKeys: [] payload: v2"
    assert "isTransactional: true isControl: true" in lines[5]
    assert lines[6] == "| offset: 2 CreateTime: 2000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] " \
                       "endTxnMarker: COMMIT coordinatorEpoch: 5"
    assert lines[8] == "| offset: 5 CreateTime: 3000 keySize: 1 valueSize: -1 sequence: -1 headerKeys: [] key: k"
    assert err == f"Non-consecutive offsets in {log.absolute()}\n  2 is followed by 5\n"


def test_skip_metadata_invalid_crc_and_torn_tail(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    log = _segment(tmp_path)
    data = bytearray(log.read_bytes())
    last = len(data) - len(build_batch([(b"k", None, [], 3000)], base_offset=5))
    data[last + 17] ^= 0xFF  # the last batch's stored CRC: it no longer matches, the records still read
    log.write_bytes(bytes(data) + b"\x00" * 10)  # fewer bytes than a batch header: a torn tail
    code, lines, _ = _run(capsys, "--files", str(log), "--print-data-log", "--skip-record-metadata")
    assert code == 0
    assert lines[3] == "| key: k1 payload: v1" and lines[4] == " payload: v2"
    assert lines[-3].endswith("isvalid: false")
    assert lines[-1] == f"Found 10 invalid bytes at the end of {log.name}"


def test_indexes_snapshot_and_txn_index(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    log = _segment(tmp_path)
    d = log.parent
    second = log.read_bytes().index(build_batch([(b"k", None, [], 3000)], base_offset=5)[:8])
    # entry 0 points at the first batch, whose last offset is 1: a mismatch, reported as Kafka does
    (d / "00000000000000000000.index").write_bytes(struct.pack(">ii", 0, 0) + struct.pack(">ii", 5, second))
    (d / "00000000000000000000.timeindex").write_bytes(struct.pack(">qi", 2000, 2) + struct.pack(">qi", 3000, 5))
    entry = ProducerStateEntry(7, 1, coordinator_epoch=5, current_txn_first_offset=-1, last_timestamp=2000)
    entry.batches.append(BatchMetadata(0, 1, 0, 1, 1005))
    (d / "00000000000000000006.snapshot").write_bytes(encode_snapshot([entry]))
    (d / "00000000000000000000.txnindex").write_bytes(AbortedTxn(7, 0, 2, 3).encode())
    files = ",".join(str(d / n) for n in ("00000000000000000000.index", "00000000000000000000.timeindex",
                                          "00000000000000000006.snapshot", "00000000000000000000.txnindex"))
    code, lines, err = _run(capsys, "--files", files)
    assert code == 0
    assert f"offset: 5 position: {second}" in lines
    assert "timestamp: 3000 offset: 5" in lines and "timestamp: 2000 offset: 2" in lines
    assert "producerId: 7 producerEpoch: 1 coordinatorEpoch: 5 currentTxnFirstOffset: OptionalLong.empty " \
           "lastTimestamp: 2000 firstSequence: 0 lastSequence: 1 lastOffset: 1 offsetDelta: 1 timestamp: 2000" in lines
    assert lines[-1] == "version: 0 producerId: 7 firstOffset: 0 lastOffset: 2 lastStableOffset: 3"
    assert err == f"Mismatches in :{d.absolute() / '00000000000000000000.index'}\n  Index offset: 0, log offset: 1\n"
    code, lines, _ = _run(capsys, "--files", files.split(",")[0], "--index-sanity-check")
    assert lines[-1].endswith("00000000000000000000.index passed sanity check.")


def test_decoders_render_as_kafka() -> None:
    assert json_string('a"b\\c\x01\n\u00e9') == '"a\\"b\\\\c\\u0001\\n\u00e9"'
    key = group_records.offset_commit_key("g", "t", 0)
    value = group_records.offset_commit_value(6, 0, "", 123, None)
    assert offsets_parser(SimpleNamespace(offset=1, key=key, value=value)) == (
        '{"type":"1","data":{"group":"g","topic":"t","partition":0}}',
        '{"version":"3","data":{"offset":6,"leaderEpoch":0,"metadata":"","commitTimestamp":123}}')
    assert offsets_parser(SimpleNamespace(offset=1, key=key, value=None))[1] == "<DELETE>"
    assert offsets_parser(SimpleNamespace(offset=4, key=b"\x00\x09xx", value=None)) == \
        ("Unknown record type 9 at offset 4, skipping.", None)
    sub = struct.pack(">hi", 3, 1) + struct.pack(">h", 5) + b"plain" + struct.pack(">i", 0) + \
        struct.pack(">i", 0) + struct.pack(">i", -1) + struct.pack(">h", 0)
    assert consumer_subscription_json(sub) == {"topics": ["plain"], "userData": "", "ownedPartitions": [],
                                               "generationId": -1, "rackId": ""}
    txn_key = txn_records.key_bytes("tx")
    txn_value = txn_records.value_bytes(1, 0, 60000, 1, [("txn", 0)], 55, 50)
    assert transaction_log_parser(SimpleNamespace(offset=0, key=txn_key, value=txn_value)) == (
        "transaction_metadata::transactionalId=tx",
        "producerId:1,producerEpoch:0,state=Ongoing,partitions=[txn-0],txnLastUpdateTimestamp=55,txnTimeoutMs=60000")
    assert transaction_log_parser(SimpleNamespace(offset=0, key=txn_key, value=None))[1] == "<DELETE>"
    assert transaction_log_parser(SimpleNamespace(offset=0, key=key, value=value)) == ("unknown::version=1", None)


def test_transaction_partitions_in_scala_hash_set_order() -> None:
    """The order Kafka 3.9.1's tool printed for one transaction over these 15 partitions."""
    tps = [("multi", p) for p in range(12)] + [("gzip", 0), ("snappy", 0), ("lz4", 0)]
    expected = ("multi-4,multi-3,multi-6,multi-5,multi-8,multi-7,lz4-0,multi-10,multi-9,gzip-0,multi-0,snappy-0,"
                "multi-2,multi-1,multi-11")
    assert ",".join(f"{t}-{p}" for t, p in scala_hash_set_order(tps)) == expected


def test_refused_options(capsys: pytest.CaptureFixture) -> None:
    code, _, err = _run(capsys, "--files", "x.log", "--cluster-metadata-decoder")
    assert code == 1 and "not supported by this broker's tools" in err
    code, _, err = _run(capsys)
    assert code == 1 and err.startswith('Missing required argument "[files]"')

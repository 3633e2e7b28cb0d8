"""Tagged fields: written only when not default, in tag order; unknown tags skipped."""
from __future__ import annotations

import uuid

from broker.protocol.api import ApiKey
from broker.protocol.codec import codec_for
from broker.protocol.schema import load_apis

FETCH_RESPONSE = load_apis()[ApiKey.FETCH].response


def _partition(**extra):
    p = {"partition_index": 0, "error_code": 0, "high_watermark": 5, "records": b"R"}
    p.update(extra)
    return {"responses": [{"topic_id": uuid.UUID(int=1), "partitions": [p]}]}


def test_default_tagged_fields_are_not_written():
    codec = codec_for(FETCH_RESPONSE, 12)
    data = codec.encode(_partition(diverging_epoch={"epoch": -1, "end_offset": -1}))
    assert data == codec.encode(_partition())
    # partition ends: preferred_read_replica -1, records (len 1 + 1, b"R"), tag count 0
    assert data.endswith(b"\xff\xff\xff\xff" + b"\x02R" + b"\x00" + b"\x00" + b"\x00")


def test_non_default_tagged_fields_are_written_in_tag_order():
    codec = codec_for(FETCH_RESPONSE, 12)
    data = codec.encode(_partition(current_leader={"leader_id": 3, "leader_epoch": 7},
                                   diverging_epoch={"epoch": 2, "end_offset": -1}))
    tail = (b"\x02R" + b"\x02"
            + b"\x00\x0d" + b"\x00\x00\x00\x02" + b"\xff" * 8 + b"\x00"
            + b"\x01\x09" + b"\x00\x00\x00\x03" + b"\x00\x00\x00\x07" + b"\x00")
    assert tail in data
    decoded, _ = codec.decode(data)
    part = decoded.responses[0].partitions[0]
    assert (part.current_leader.leader_id, part.diverging_epoch.epoch) == (3, 2)
    assert part.snapshot_id.end_offset == -1


def test_unknown_tags_are_skipped():
    codec = codec_for(load_apis()[ApiKey.API_VERSIONS].request, 3)
    plain = codec.encode({"client_software_name": "a", "client_software_version": "b"})
    assert plain.endswith(b"\x00")
    with_unknown = plain[:-1] + b"\x01" + b"\x63\x03xyz"
    decoded, end = codec.decode(with_unknown)
    assert end == len(with_unknown)
    assert decoded.client_software_name == "a"

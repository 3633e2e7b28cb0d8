"""Headers, request/response entry points, FileSlice pass-through."""
from __future__ import annotations

import tempfile

import pytest

from broker.errors import UnsupportedVersionError
from broker.protocol.api import (
    API_VERSIONS_RANGE, ApiKey, decode_request, decode_request_header, decode_response,
    decode_response_with_header, encode_request, encode_response, is_flexible,
)
from broker.protocol.exceptions import MalformedMessageError, TruncatedHeaderError
from broker.util.file_slice import FileSlice


def test_api_keys_and_ranges():
    assert ApiKey.PRODUCE == 0 and ApiKey.API_VERSIONS == 18 and ApiKey.LIST_OFFSETS == 2
    assert API_VERSIONS_RANGE[ApiKey.PRODUCE] == (0, 11)
    assert API_VERSIONS_RANGE[ApiKey.FETCH] == (0, 17)
    assert is_flexible(ApiKey.PRODUCE, 9) and not is_flexible(ApiKey.PRODUCE, 8)


def test_request_round_trip_and_header():
    msg = {"acks": -1, "timeout_ms": 30000,
           "topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": b"batch"}]}]}
    frame = encode_request(ApiKey.PRODUCE, 9, 42, "client-é", msg)
    header, offset = decode_request_header(memoryview(frame)[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (0, 9, 42, "client-é")
    req = decode_request(header.api_key, header.api_version, memoryview(frame)[4:], offset)
    records = req.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and bytes(records) == b"batch"
    assert req.transactional_id is None


def test_header_v1_for_non_flexible_and_null_client_id():
    frame = memoryview(encode_request(ApiKey.METADATA, 8, 7, None, {"topics": None}))[4:]
    header, offset = decode_request_header(frame)
    assert header.client_id is None and header.header_version == 1 and offset == 10


def test_unknown_api_and_version_still_give_a_header():
    header, _ = decode_request_header(b"\x03\xe7\x00\x05\x00\x00\x00\x09")
    assert (header.api_key, header.api_version, header.correlation_id) == (999, 5, 9)
    assert not header.is_supported
    header, _ = decode_request_header(b"\x00\x12\x00\x63\x00\x00\x00\x01\x00\x01x\x00")
    assert header.api_key == ApiKey.API_VERSIONS and header.api_version == 99 and header.client_id == "x"
    with pytest.raises(UnsupportedVersionError):
        decode_request(ApiKey.API_VERSIONS, 99, b"", 0)


def test_truncated_header():
    with pytest.raises(TruncatedHeaderError):
        decode_request_header(b"\x00\x00\x00")
    with pytest.raises(MalformedMessageError):
        decode_request_header(b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x09ab")


def test_api_versions_response_uses_header_v0():
    parts = encode_response(ApiKey.API_VERSIONS, 3, 5, {"api_keys": [{"api_key": 0, "max_version": 11}]})
    assert len(parts) == 1 and isinstance(parts[0], bytes)
    assert parts[0][4:8] == b"\x00\x00\x00\x05" and parts[0][8:10] == b"\x00\x00"  # error_code right after
    resp = decode_response(ApiKey.API_VERSIONS, 3, parts[0])
    assert resp.api_keys[0].max_version == 11


def test_flexible_response_header_v1():
    parts = encode_response(ApiKey.METADATA, 12, 5, {})
    assert parts[0][4:9] == b"\x00\x00\x00\x05\x00"
    assert decode_response_with_header(ApiKey.METADATA, 12, parts[0])[0] == 5


def test_file_slice_is_passed_through():
    with tempfile.TemporaryFile() as f:
        f.write(b"0123456789")
        f.flush()
        fs = FileSlice(f, 2, 5)
        msg = {"responses": [{"topic": "t", "partitions": [
            {"partition_index": 0, "records": fs}, {"partition_index": 1, "records": [b"ab", fs]}]}]}
        parts = encode_response(ApiKey.FETCH, 11, 1, msg)
        assert [type(p) for p in parts] == [bytes, FileSlice, bytes, FileSlice]  # v11: nothing after
        assert int.from_bytes(parts[0][:4], "big") == sum(len(p) for p in parts) - 4
        data = b"".join(p if isinstance(p, bytes) else p.read() for p in parts)
        resp = decode_response(ApiKey.FETCH, 11, data)
        assert bytes(resp.responses[0].partitions[0].records) == b"23456"
        assert bytes(resp.responses[0].partitions[1].records) == b"ab23456"


def test_message_objects_encode_like_dicts():
    frame = encode_request(ApiKey.FIND_COORDINATOR, 4, 1, "c", {"key_type": 1, "coordinator_keys": ["g"]})
    header, off = decode_request_header(memoryview(frame)[4:])
    req = decode_request(ApiKey.FIND_COORDINATOR, 4, memoryview(frame)[4:], off)
    assert encode_request(ApiKey.FIND_COORDINATOR, 4, 1, "c", req) == frame
    assert req == {"key": "", "key_type": 1, "coordinator_keys": ["g"]}

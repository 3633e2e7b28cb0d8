"""Malformed input raises MalformedMessageError and nothing else."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol.api import ApiKey, decode_request, decode_request_header, encode_request
from broker.protocol.codec import codec_for
from broker.protocol.exceptions import MalformedMessageError
from broker.protocol.schema import load_apis

APIS = load_apis()
SAMPLE = [(ApiKey.PRODUCE, 3), (ApiKey.PRODUCE, 9), (ApiKey.FETCH, 12), (ApiKey.METADATA, 12),
          (ApiKey.JOIN_GROUP, 9), (ApiKey.OFFSET_COMMIT, 8), (ApiKey.API_VERSIONS, 3), (ApiKey.CREATE_TOPICS, 7)]
_settings = settings(max_examples=40, deadline=None, database=None,
                     suppress_health_check=[HealthCheck.too_slow])


def _produce_frame(version: int) -> bytes:
    msg = {"acks": 1, "timeout_ms": 5, "transactional_id": "tx",
           "topic_data": [{"name": "topic", "partition_data": [{"index": 0, "records": b"x" * 20}]}]}
    return encode_request(ApiKey.PRODUCE, version, 1, "client", msg)[4:]


@pytest.mark.parametrize("version", [3, 9])
def test_every_truncation_of_a_produce_request_is_malformed(version):
    frame = _produce_frame(version)
    header, offset = decode_request_header(memoryview(frame))
    for cut in range(offset, len(frame)):
        with pytest.raises(MalformedMessageError):
            decode_request(ApiKey.PRODUCE, version, memoryview(frame[:cut]), offset)


def test_negative_lengths():
    codec = codec_for(APIS[ApiKey.METADATA].request, 8)
    for body in (b"\xff\xff\xff\xfe", b"\x00\x00\x00\x01\xff\xfe", b"\x00\x00\x00\x01\x00\x05ab"):
        with pytest.raises(MalformedMessageError):
            codec.decode(body + b"\x00\x00\x00")
    # -1 is null, which MetadataRequest v8 topics allows
    assert codec.decode(b"\xff\xff\xff\xff\x00\x00\x00")[0].topics is None


def test_bad_utf8_and_overlong_varint():
    codec = codec_for(APIS[ApiKey.FIND_COORDINATOR].request, 1)
    with pytest.raises(MalformedMessageError):
        codec.decode(b"\x00\x02\xff\xfe\x00")
    flexible = codec_for(APIS[ApiKey.FIND_COORDINATOR].request, 3)
    with pytest.raises(MalformedMessageError):
        flexible.decode(b"\xff\xff\xff\xff\xff\xff\x01")


@pytest.mark.parametrize("api_key,version", SAMPLE)
def test_random_bytes_never_raise_anything_else(api_key, version):
    codec = codec_for(APIS[api_key].request, version)

    @_settings
    @given(st.binary(max_size=64))
    def check(data):
        try:
            codec.decode(data)
        except MalformedMessageError:
            pass

    check()


@pytest.mark.parametrize("api_key,version", SAMPLE)
def test_mutated_valid_frames_never_raise_anything_else(api_key, version):
    from .strategies import struct_strategy
    schema = APIS[api_key].request

    @_settings
    @given(st.data())
    def check(data):
        good = codec_for(schema, version).encode(data.draw(struct_strategy(schema.fields, version)))
        cut = data.draw(st.integers(0, len(good)))
        pos = data.draw(st.integers(0, max(len(good) - 1, 0)))
        byte = data.draw(st.integers(0, 255))
        bad = bytearray(good[:cut] if data.draw(st.booleans()) else good)
        if bad:
            bad[min(pos, len(bad) - 1)] = byte
        try:
            codec_for(schema, version).decode(bytes(bad))
        except MalformedMessageError:
            pass

    check()


@given(st.binary(max_size=40))
@_settings
def test_request_header_random_bytes(data):
    try:
        decode_request_header(data)
    except MalformedMessageError:
        pass

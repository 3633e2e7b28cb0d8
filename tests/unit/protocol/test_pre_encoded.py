"""PreEncoded struct elements: ``element_encoder`` output put back into its array encodes to the same bytes.

For every schema at every version and every array of structs at the top of the message: a random message encoded
with plain dict elements, and with those elements pre-encoded (all of them, or every other one), gives identical
bytes. Metadata's partitions (an array inside an array) are checked too, as the Metadata handler relies on both.
"""
from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol import api as proto
from broker.protocol.api import ApiKey
from broker.protocol.codec import PreEncoded, codec_for, element_encoder, element_layout
from broker.protocol.schema import load_messages

from .strategies import struct_strategy

CASES = [(m, v, f.name) for m in load_messages().values()
         for v in range(m.versions.low, (m.versions.high or 0) + 1)
         for f in m.fields if f.is_array and f.is_struct and v in f.versions and "records" not in repr(f.fields)]


@pytest.mark.parametrize("schema, version, field", CASES,
                         ids=[f"{m.name}-v{v}-{f}" for m, v, f in CASES])
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_pre_encoded_elements_encode_alike(schema, version, field, data) -> None:
    message = data.draw(struct_strategy(schema.fields, version))
    codec = codec_for(schema, version)
    expected = codec.encode(message)
    elements = message.get(field)
    if not elements:
        return
    encode = element_encoder(schema, (field,), version)
    for every in (1, 2):
        mixed = [encode(e) if i % every == 0 else e for i, e in enumerate(elements)]
        assert all(isinstance(e, PreEncoded) for e in mixed[::every])
        assert codec.encode({**message, field: mixed}) == expected


def test_nested_pre_encoded_elements_and_their_limits() -> None:
    version = 12
    schema = proto.response_schema(ApiKey.METADATA, version)
    part = {"error_code": 0, "partition_index": 3, "leader_id": 1, "leader_epoch": 4, "replica_nodes": [1, 2],
            "isr_nodes": [1], "offline_replicas": [2]}
    topic = {"error_code": 0, "name": "t", "topic_id": uuid.uuid4(), "is_internal": False, "partitions": [part, part],
             "topic_authorized_operations": 8}
    body = {"brokers": [{"node_id": 1, "host": "h", "port": 1}], "topics": [topic]}
    expected = codec_for(schema, version).encode(body)
    partition = element_encoder(schema, ("topics", "partitions"), version)
    inner = {**topic, "partitions": [partition(part), part]}
    assert codec_for(schema, version).encode({**body, "topics": [inner]}) == expected
    assert codec_for(schema, version).encode(
        {**body, "topics": [element_encoder(schema, ("topics",), version)(inner)]}) == expected
    with pytest.raises(ValueError):
        element_encoder(schema, ("brokers", "host"), version)
    with pytest.raises(ValueError):
        element_encoder(schema, ("cluster_id",), version)


LEADING = ("index", "error_code", "base_offset", "log_append_time_ms", "log_start_offset")
PATH = ("responses", "partition_responses")


@pytest.mark.parametrize("version", range(5, 12))
@settings(max_examples=20, deadline=None)
@given(values=st.tuples(st.integers(-2**31, 2**31 - 1), st.integers(-2**15, 2**15 - 1),
                        *[st.integers(-2**63, 2**63 - 1)] * 3))
def test_element_layout_packs_what_the_encoder_writes(version, values) -> None:
    schema = proto.response_schema(ApiKey.PRODUCE, version)
    layout = element_layout(schema, PATH, version, LEADING)
    element = dict(zip(LEADING, values))
    assert layout.prefix.pack(*values) + layout.suffix == element_encoder(schema, PATH, version)(element).data
    message = {"responses": [{"name": "t", "partition_responses": [element, element]}], "throttle_time_ms": 0}
    laid_out = PreEncoded(layout.prefix.pack(*values) + layout.suffix)
    assert codec_for(schema, version).encode({**message, "responses": [
        {"name": "t", "partition_responses": [laid_out, element]}]}) == codec_for(schema, version).encode(message)


def test_element_layout_refuses_what_is_not_a_leading_fixed_width_field() -> None:
    schema = proto.response_schema(ApiKey.PRODUCE, 9)
    with pytest.raises(ValueError):
        element_layout(schema, PATH, 9, ("error_code",))  # not the first field
    with pytest.raises(ValueError):
        element_layout(schema, PATH, 9, LEADING + ("record_errors",))  # an array
    with pytest.raises(ValueError):
        element_layout(schema, PATH, 1, LEADING)  # log_append_time_ms and log_start_offset are not in v1
    with pytest.raises(ValueError):
        element_layout(schema, ("responses", "name"), 9, ("index",))
    assert element_layout(schema, ("responses",), 9, ()).prefix.size == 0

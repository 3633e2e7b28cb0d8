"""Hypothesis round trip of every (api, version) request and response in the schemas."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from broker.protocol.codec import codec_for
from broker.protocol.schema import load_apis

from .strategies import struct_strategy

CASES = [
    (api.name, kind, msg, v)
    for api in load_apis().values()
    for kind, msg in (("request", api.request), ("response", api.response))
    for v in range(msg.versions.low, (msg.versions.high or 0) + 1)
]


@pytest.mark.parametrize("name,kind,schema,version", CASES, ids=[f"{c[0]}-{c[1]}-v{c[3]}" for c in CASES])
def test_round_trip(name, kind, schema, version):
    codec = codec_for(schema, version)

    @settings(max_examples=6, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(struct_strategy(schema.fields, version))
    def check(message):
        data = codec.encode(message)
        decoded, end = codec.decode(data)
        assert end == len(data)
        assert decoded.to_dict() == message
        assert codec.encode(decoded) == data

    check()

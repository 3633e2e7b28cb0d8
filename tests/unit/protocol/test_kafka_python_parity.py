"""Parity with kafka-python 3.x's own JSON-schema codec (kafka.protocol): bytes from our encoder decode
with kafka-python and re-encode to the same bytes, and kafka-python's bytes decode with ours."""
from __future__ import annotations

import importlib
import pkgutil
import warnings

import pytest
from hypothesis import HealthCheck, given, settings

from broker.protocol.api import ApiKey
from broker.protocol.codec import codec_for
from broker.protocol.schema import load_apis

from .strategies import struct_strategy

SAMPLE_APIS = [ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.OFFSET_COMMIT,
               ApiKey.OFFSET_FETCH, ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP,
               ApiKey.HEARTBEAT, ApiKey.API_VERSIONS, ApiKey.CREATE_TOPICS, ApiKey.INIT_PRODUCER_ID,
               ApiKey.DESCRIBE_CONFIGS]


def _kafka_python_classes():
    import kafka.protocol as kp_protocol
    from kafka.protocol.api_message import ApiMessage

    found = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for info in pkgutil.walk_packages(kp_protocol.__path__, "kafka.protocol."):
            try:
                mod = importlib.import_module(info.name)
            except Exception:  # noqa: BLE001 - optional submodules
                continue
            for obj in vars(mod).values():
                if isinstance(obj, type) and issubclass(obj, ApiMessage) and getattr(obj, "_json", None):
                    found[(obj.API_KEY, obj.is_request())] = obj
    return found


KP = _kafka_python_classes()
APIS = load_apis()
CASES = []
for _key in SAMPLE_APIS:
    for _is_req in (True, False):
        _schema = APIS[_key].request if _is_req else APIS[_key].response
        _kp = KP[(int(_key), _is_req)]
        _lo = max(_schema.versions.low, _kp.valid_versions[0])
        _hi = min(_schema.versions.high, _kp.valid_versions[1])
        for _v in range(_lo, _hi + 1):
            CASES.append((_key, _is_req, _v))


def test_enough_cases():
    assert len(CASES) > 150


@pytest.mark.parametrize("key,is_request,version", CASES,
                         ids=[f"{k.name}-{'req' if r else 'resp'}-v{v}" for k, r, v in CASES])
def test_parity(key, is_request, version):
    schema = APIS[key].request if is_request else APIS[key].response
    codec = codec_for(schema, version)
    kp_cls = KP[(int(key), is_request)]

    @settings(max_examples=3, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(struct_strategy(schema.fields, version))
    def check(message):
        if key == ApiKey.API_VERSIONS and not is_request:
            message["error_code"] = 0  # kafka-python decodes any error response as v0 (Kafka sends v0 then)
        ours = codec.encode(message)
        theirs = kp_cls.decode(ours, version=version).encode()
        assert theirs == ours
        assert codec.decode(theirs)[0].to_dict() == message

    check()

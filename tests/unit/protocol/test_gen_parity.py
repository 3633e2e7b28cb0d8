"""Differential test: the generated codec, as Python and (for the APIs broker.protocol.gen_pyx compiles) as its
Cython twin, against the closure engine (interp, the oracle).

For every schema at every version: identical bytes for random full and sparse messages (dicts,
decoded Message objects and plain attribute objects), equal decoded messages, and identical
outcomes (equal message or MalformedMessageError) on truncated and mutated input. The compiled twin is
loaded explicitly, so both test lanes (native and BROKER_NO_EXTENSIONS) run all three engines.
"""
from __future__ import annotations

import tempfile
import types
import uuid
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol.api import ApiKey
from broker.protocol.codec import MessageCodec, coalesce
from broker.protocol.exceptions import MalformedMessageError
from broker.protocol.gen import BIG_RECORDS, generate
from broker.protocol.gen_pyx import compiled_cases
from broker.protocol.interp import engine_codec
from broker.protocol.schema import Field, load_apis, load_messages
from broker.util.file_slice import FileSlice

from .strategies import field_strategy

APIS = load_apis()
SCHEMAS = [m for m in load_messages().values()]
CASES = [(m, v) for m in SCHEMAS for v in range(m.versions.low, (m.versions.high or 0) + 1)]
COMPILED = {(m.name, v) for m, v in compiled_cases()}


@lru_cache(maxsize=None)
def engines(schema, version):
    """The codecs under test: the generated Python, and its compiled twin where there is one."""
    found = [MessageCodec(schema, version, engine="python")]
    if (schema.name, version) in COMPILED:
        found.append(MessageCodec(schema, version, engine="compiled"))
    return found


def sparse_struct_strategy(fields: tuple[Field, ...], version: int) -> st.SearchStrategy[dict]:
    """Like strategies.struct_strategy but any field may be missing (the encoder's default path)."""
    opt = {}
    for f in fields:
        tagged = f.tag is not None and version in f.tagged_versions
        if version not in f.versions and not tagged:
            continue
        if f.is_struct:
            elem = sparse_struct_strategy(f.fields, version)
            value = st.lists(elem, max_size=2) if f.is_array else elem
            if version in f.nullable:
                value = st.one_of(st.none(), value)
        else:
            value = field_strategy(f, version)
        opt[f.name] = value
    return st.fixed_dictionaries({}, optional=opt)


def _outcome(codec, data):
    try:
        msg, end = codec.decode(data)
    except MalformedMessageError:
        return "malformed"
    return msg.to_dict(), end


def _as_namespace(value):
    if isinstance(value, dict):
        return types.SimpleNamespace(**{k: _as_namespace(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_as_namespace(v) for v in value]
    return value


def test_every_schema_version_is_covered():
    assert len(CASES) > 550
    assert {m.kind for m, _ in CASES} == {"request", "response", "header", "data"}
    assert len(COMPILED) > 150 and COMPILED <= {(m.name, v) for m, v in CASES}


@pytest.mark.parametrize("schema,version", CASES, ids=[f"{m.name}-v{v}" for m, v in CASES])
def test_generated_matches_engine(schema, version):
    gens, ref = engines(schema, version), engine_codec(schema, version)
    assert [g.engine for g in gens] == ["python", "compiled"][:len(gens)]

    @settings(max_examples=4, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def check(data):
        message = data.draw(sparse_struct_strategy(schema.fields, version))
        expected = ref.encode(message)
        cut = data.draw(st.integers(0, len(expected)))
        bad = bytearray(expected)
        if expected:
            bad[data.draw(st.integers(0, len(bad) - 1))] = data.draw(st.integers(0, 255))
        for gen in gens:
            assert gen.encode(message) == expected
            assert gen.encode(_as_namespace(message)) == expected
            decoded, end = gen.decode(expected)
            assert end == len(expected)
            assert decoded == ref.decode(expected)[0]
            assert type(decoded) is type(ref.decode(expected)[0])
            assert gen.encode(decoded) == expected
            assert _outcome(gen, expected[:cut]) == _outcome(ref, expected[:cut])
            assert _outcome(gen, bytes(bad)) == _outcome(ref, bytes(bad))

    check()


@settings(max_examples=60, deadline=None, database=None)
@given(st.binary(max_size=48), st.sampled_from([(ApiKey.PRODUCE, 9), (ApiKey.FETCH, 15), (ApiKey.METADATA, 12),
                                                 (ApiKey.JOIN_GROUP, 5), (ApiKey.API_VERSIONS, 3)]))
def test_random_bytes_same_outcome(data, case):
    schema = APIS[case[0]].request
    expected = _outcome(engine_codec(schema, case[1]), data)
    for gen in engines(schema, case[1]):
        assert _outcome(gen, data) == expected


@pytest.mark.parametrize("api_key,version,body", [
    (ApiKey.FIND_COORDINATOR, 1, b"\xff\xff\x00"),  # non-nullable string with length -1
    (ApiKey.FIND_COORDINATOR, 1, b"\xff\xfe\x00"),  # length -2
    (ApiKey.PRODUCE, 3, b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x00\x05" + b"\xff\xff\xff\xff"),  # null array
    (ApiKey.PRODUCE, 9, b"\x00" + b"\x00\x01" + b"\x00\x00\x00\x05" + b"\x00\x00"),  # compact null array
    (ApiKey.METADATA, 8, b"\xff\xff\xff\xfe\x00\x00\x00"),  # nullable array, length -2
])
def test_bad_lengths_are_malformed_in_both(api_key, version, body):
    schema = APIS[api_key].request
    for codec in (*engines(schema, version), engine_codec(schema, version)):
        with pytest.raises(MalformedMessageError):
            codec.decode(body)


def _fetch_response(records_a, records_b):
    return {"responses": [{"topic_id": uuid.uuid4(), "partitions": [
        {"partition_index": 0, "high_watermark": 9, "records": records_a},
        {"partition_index": 1, "records": records_b, "aborted_transactions": None}]}]}


@pytest.mark.parametrize("version", [4, 11, 12, 15, 16])
def test_file_slices_and_large_records_are_out_of_line_parts(version):
    schema = APIS[ApiKey.FETCH].response
    big = bytes(range(256)) * (BIG_RECORDS // 256 + 1)
    with tempfile.TemporaryFile() as f:
        f.write(b"0123456789")
        f.flush()
        fs = FileSlice(f, 2, 5)
        for a, b in [(fs, [b"ab", fs]), (big, fs), ([fs, fs], b"xy"), (big, None), (b"small", big)]:
            msg = _fetch_response(a, b)
            for gen in engines(schema, version):
                parts = gen.encode_parts(msg)
                assert parts == coalesce(engine_codec(schema, version).encode_parts(msg))
                assert all(len(p) > 0 or isinstance(p, FileSlice) for p in parts)
                assert gen.encode(msg) == engine_codec(schema, version).encode(msg)


def test_large_records_are_not_copied_on_decode():
    schema = APIS[ApiKey.PRODUCE].request
    msg = {"acks": -1, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"r" * 100_000}]}]}
    for gen in engines(schema, 9):
        data = bytearray(gen.encode(msg))
        records = gen.decode(data)[0].topic_data[0].partition_data[0].records
        assert isinstance(records, memoryview) and records.obj is data


def test_source_is_inspectable_and_uses_combined_structs():
    source, _ = generate(APIS[ApiKey.PRODUCE].response, 9)
    # index, error_code, base_offset, log_append_time_ms, log_start_offset: one pack and one unpack
    assert source.count(".pack(index_") == 1 and "unpack_from(buf, pos)" in source
    assert "def encode(w, ins, msg):" in source and "def decode(data, pos=0):" in source

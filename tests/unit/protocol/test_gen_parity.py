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


# ---------------------------------------------------------------- encoders: the compiled twin's own edges


def _compiled_pair(api_key, version, side="request"):
    schema = getattr(APIS[api_key], side)
    py, cy = MessageCodec(schema, version, engine="python"), MessageCodec(schema, version, engine="compiled")
    assert cy.encode_engine == "compiled" and py.encode_engine == "python"
    return schema, py, cy


def test_every_compiled_case_has_a_compiled_encoder():
    for schema, version in compiled_cases():
        assert MessageCodec(schema, version, engine="compiled").encode_engine == "compiled", (schema.name, version)


@pytest.mark.parametrize("size", [0, 1, 126, 127, 128, 300, 20_000])
def test_tagged_fields_of_every_size(size):
    """A tagged value's size slot is one byte until 127 and is widened after the fact above it (the compiled
    encoder writes the value first): every size, also between other tagged fields, in all three engines."""
    schema, _, _ = _compiled_pair(ApiKey.FETCH, 12)
    msg = {"max_wait_ms": 5, "cluster_id": "c" * size,
           "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 3}]}]}
    for version in (12, 15):
        expected = engine_codec(schema, version).encode(msg)
        for gen in engines(schema, version):
            assert gen.encode(msg) == expected
    features = [{"name": "f" * (size % 300), "min_version": 1, "max_version": 2}] * (1 + size // 1000)
    resp = {"api_keys": [{"api_key": 0, "min_version": 0, "max_version": 9}], "supported_features": features,
            "finalized_features_epoch": size, "finalized_features": features, "zk_migration_ready": True}
    schema = APIS[ApiKey.API_VERSIONS].response
    expected = engine_codec(schema, 3).encode(resp)
    for gen in engines(schema, 3):
        assert gen.encode(resp) == expected
        assert gen.decode(expected)[0] == engine_codec(schema, 3).decode(expected)[0]


def test_big_messages_grow_the_buffer_and_keep_what_was_in_it():
    """The compiled encoder appends to the bytearray it is given (a response header is already in it) and grows it
    many times for a big message; out-of-line parts are at the same positions as in the Python twin."""
    schema = APIS[ApiKey.METADATA].response
    msg = {"brokers": [{"node_id": i, "host": f"host-{i}", "port": 9092} for i in range(50)],
           "topics": [{"name": f"topic-{t}", "topic_id": uuid.UUID(int=t + 1),
                       "partitions": [{"partition_index": p, "replica_nodes": list(range(40)), "isr_nodes": [0]}
                                      for p in range(30)]} for t in range(40)]}
    for version in (1, 9, 12):
        py, cy = (MessageCodec(schema, version, engine=e) for e in ("python", "compiled"))
        outputs = []
        for codec in (py, cy):
            w = bytearray(b"header---")
            ins: list = []
            codec.encode_fn(w, ins, msg)
            outputs.append((bytes(w), ins))
        assert outputs[0] == outputs[1] and outputs[0][0].startswith(b"header---") and len(outputs[0][0]) > 100_000
    big = bytes(BIG_RECORDS)
    fetch = APIS[ApiKey.FETCH].response
    msg = _fetch_response(big, [b"ab", b"cd"])
    for version in (4, 13):
        seen = []
        for engine in ("python", "compiled"):
            w, ins = bytearray(b"hdr"), []
            MessageCodec(fetch, version, engine=engine).encode_fn(w, ins, msg)
            seen.append((bytes(w), [(at, id(p)) for at, p in ins]))
        assert seen[0] == seen[1] and seen[0][1][0][0] > 3


class _Code(int):
    """An int subclass (an IntEnum's kind): not an exact int, so the compiled encoder takes struct.pack's path."""


def _produce(**partition):
    return {"acks": -1, "timeout_ms": 5, "topic_data": [{"name": "t", "partition_data": [{"index": 0, **partition}]}]}


@pytest.mark.parametrize("api_key,version,side,msg", [
    (ApiKey.HEARTBEAT, 4, "request", {"group_id": "g", "generation_id": 2 ** 31}),  # int32 out of range
    (ApiKey.HEARTBEAT, 4, "request", {"group_id": "g", "generation_id": -2 ** 31 - 1}),
    (ApiKey.HEARTBEAT, 4, "request", {"group_id": "g", "generation_id": 2 ** 70}),
    (ApiKey.HEARTBEAT, 4, "request", {"group_id": "g", "generation_id": 1.5}),  # not an integer
    (ApiKey.HEARTBEAT, 4, "request", {"group_id": "g", "generation_id": "1"}),
    (ApiKey.HEARTBEAT, 4, "request", {"group_id": "g", "generation_id": None}),
    (ApiKey.HEARTBEAT, 4, "request", {"group_id": None}),  # null non-nullable string
    (ApiKey.HEARTBEAT, 4, "request", {"group_id": b"bytes"}),  # not a str
    (ApiKey.HEARTBEAT, 4, "request", {"group_id": 7}),
    (ApiKey.HEARTBEAT, 4, "request", {"group_id": "\ud800"}),  # not encodable
    (ApiKey.HEARTBEAT, 0, "request", {"group_id": "g" * 0x8000}),  # int16 length
    (ApiKey.HEARTBEAT, 4, "response", {"error_code": 2 ** 15}),  # int16 out of range
    (ApiKey.PRODUCE, 9, "request", {"acks": 2 ** 15}),
    (ApiKey.PRODUCE, 9, "request", {"topic_data": None}),  # null non-nullable array
    (ApiKey.PRODUCE, 9, "request", {"topic_data": 5}),  # not a sequence
    (ApiKey.PRODUCE, 3, "request", _produce(records="not bytes")),
    (ApiKey.PRODUCE, 9, "request", _produce(records=5)),
    (ApiKey.FETCH, 13, "request", {"topics": [{"topic_id": "not-a-uuid"}]}),
    (ApiKey.FETCH, 13, "request", {"topics": [{"topic_id": uuid.uuid4(), "partitions": [{"fetch_offset": 2 ** 63}]}]}),
    (ApiKey.METADATA, 12, "response", {"brokers": [{"node_id": 1, "host": "h", "port": 2 ** 31}]}),
    (ApiKey.METADATA, 12, "response", {"topics": [{"name": "t", "partitions": [{"replica_nodes": [1, 2 ** 40]}]}]}),
    (ApiKey.METADATA, 12, "response", {"topics": [{"name": "t", "partitions": [{"replica_nodes": [1, None]}]}]}),
    (ApiKey.API_VERSIONS, 3, "response", {"supported_features": [{"name": None}]}),
    (ApiKey.API_VERSIONS, 3, "response", {"finalized_features_epoch": 2 ** 64}),
    (ApiKey.LEADER_AND_ISR, 7, "request", {"controller_epoch": 2 ** 31}),
])
def test_encoding_errors_are_the_python_twins(api_key, version, side, msg):
    schema = getattr(APIS[api_key], side)
    outcomes = []
    for gen in engines(schema, version):
        try:
            gen.encode(msg)
        except Exception as e:  # noqa: BLE001 - the very exception is what is compared
            outcomes.append((type(e), str(e)))
        else:
            outcomes.append(None)
    assert len(outcomes) == 2 and outcomes[0] is not None and outcomes[0] == outcomes[1], outcomes
    # what is left in the bytearray: the Python twin's partial encoding, at most the rest of a fixed-width run
    # longer (the compiled one stores a run field by field; its spare capacity is never left in w)
    left = []
    for gen in engines(schema, version):
        w = bytearray(b"header")
        try:
            gen.encode_fn(w, [], msg)
        except outcomes[0][0]:
            pass  # (a record set that is no bytes-like fails later, when codec.encode reads it as a FileSlice)
        left.append(bytes(w))
    assert left[1].startswith(left[0]) and len(left[1]) - len(left[0]) < 32, left


@pytest.mark.parametrize("api_key,version,side,msg", [
    (ApiKey.HEARTBEAT, 4, "request", {"group_id": "g", "generation_id": True, "member_id": "é✓"}),
    (ApiKey.HEARTBEAT, 4, "request", {"group_id": "g", "generation_id": _Code(-7), "group_instance_id": ""}),
    (ApiKey.HEARTBEAT, 4, "response", {"error_code": _Code(27), "throttle_time_ms": -2 ** 31}),
    (ApiKey.HEARTBEAT, 0, "request", {"group_id": "g" * 0x7FFF}),
    (ApiKey.PRODUCE, 9, "request", _produce(records=bytearray(b"xyz"))),
    (ApiKey.PRODUCE, 9, "request", _produce(records=memoryview(b"abcdef")[1:4])),
    (ApiKey.PRODUCE, 3, "request", _produce(records=[b"ab", memoryview(b"cd")])),
    (ApiKey.PRODUCE, 8, "request", _produce(records=None)),
    (ApiKey.PRODUCE, 9, "request", {"transactional_id": "tx", "topic_data": ({"name": "t"},)}),  # a tuple
    (ApiKey.FETCH, 13, "request", {"topics": [{"topic_id": str(uuid.UUID(int=5)),
                                               "partitions": [{"fetch_offset": -2 ** 63}]}]}),
    (ApiKey.FETCH, 13, "request", {"topics": [{"topic_id": uuid.UUID(int=5).bytes}]}),
    (ApiKey.METADATA, 12, "response", {"topics": [{"name": None, "partitions": [{"replica_nodes": (1, _Code(2))}]}]}),
    (ApiKey.API_VERSIONS, 3, "response", {"zk_migration_ready": 1, "finalized_features_epoch": 2 ** 63 - 1}),
])
def test_values_struct_pack_accepts_encode_the_same(api_key, version, side, msg):
    """Values off the compiled fast path (bool, int subclasses, bytes-likes, tuples, uuids as text or bytes)
    are accepted exactly as the Python twin accepts them."""
    schema = getattr(APIS[api_key], side)
    expected = engine_codec(schema, version).encode(msg)
    for gen in engines(schema, version):
        assert gen.encode(msg) == expected

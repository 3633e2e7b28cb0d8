"""The compiled protocol codecs (broker._native.protocol_codecs): what they cover, how codec_for picks them, and
that a module or codec built from other schemas is refused (loudly under BROKER_REQUIRE_NATIVE)."""
from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from broker.protocol import compiled
from broker.protocol.api import ApiKey
from broker.protocol.codec import MessageCodec, codec_for
from broker.protocol.gen import generate
from broker.protocol.gen_pyx import COMPILED_APIS, compiled_cases, schema_digest
from broker.protocol.schema import load_apis

ROOT = Path(__file__).resolve().parents[3]
APIS = load_apis()


def test_every_version_of_the_compiled_apis_has_a_current_compiled_codec():
    module = compiled.load_module()
    assert module.DIGEST == schema_digest()
    expected = {(m.name, v) for key in COMPILED_APIS for m in (APIS[key].request, APIS[key].response)
                for v in range(m.versions.low, (m.versions.high or 0) + 1)}
    assert set(module.FACTORIES) == expected == {(m.name, v) for m, v in compiled_cases()}
    for schema, version in compiled_cases():
        codec = MessageCodec(schema, version, engine="compiled")
        assert codec.engine == codec.encode_engine == "compiled"


def test_codec_for_follows_the_choice_made_at_import():
    schema = APIS[ApiKey.HEARTBEAT].request
    chosen = "compiled" if compiled.IMPLEMENTATION == "native" else "python"
    assert codec_for(schema, 4).engine == codec_for(schema, 4).encode_engine == chosen
    assert codec_for(APIS[ApiKey.JOIN_GROUP].request, 5).engine == "python"  # not compiled
    assert codec_for(APIS[ApiKey.JOIN_GROUP].request, 5).encode_engine == "python"
    native = os.environ.get("BROKER_NO_EXTENSIONS", "") not in ("1", "true", "yes", "on")
    assert compiled.IMPLEMENTATION == ("native" if native else "pure")


def test_a_codec_that_is_not_compiled_cannot_be_asked_for():
    with pytest.raises(LookupError):
        MessageCodec(APIS[ApiKey.JOIN_GROUP].request, 5, engine="compiled")
    with pytest.raises(ValueError):
        MessageCodec(APIS[ApiKey.HEARTBEAT].request, 4, engine="rust")


def test_a_codec_compiled_from_other_source_is_not_used(monkeypatch, caplog):
    schema = APIS[ApiKey.HEARTBEAT].request
    source, ns = generate(schema, 4)
    module = compiled.load_module()
    stale = source.replace("group_id", "group_idx")
    for chooser in (compiled.compiled_decoder, compiled.compiled_encoder):
        assert chooser(schema, 4, source, ns, module) is not None
        monkeypatch.delenv("BROKER_REQUIRE_NATIVE", raising=False)
        caplog.clear()
        assert chooser(schema, 4, stale, ns, module) is None
        assert "stale" in caplog.text
        monkeypatch.setenv("BROKER_REQUIRE_NATIVE", "1")
        with pytest.raises(RuntimeError, match="differs from the generated source"):
            chooser(schema, 4, stale, ns, module)


def test_a_module_built_from_other_schemas_is_refused(monkeypatch):
    module = compiled.load_module()
    monkeypatch.setattr(module, "DIGEST", "0" * 64)
    with pytest.raises(ImportError, match="other schema files"):
        compiled.load_module()


def _run(env: dict[str, str], code: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("BROKER_NO_EXTENSIONS", "BROKER_REQUIRE_NATIVE")}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full, capture_output=True, text=True,
                          timeout=60)


def test_missing_module_is_fatal_only_when_native_is_required():
    block = "import sys; sys.modules['broker._native.protocol_codecs'] = None; "
    code = block + "from broker.protocol import compiled; print(compiled.IMPLEMENTATION)"
    required = _run({"BROKER_REQUIRE_NATIVE": "1"}, code)
    assert required.returncode != 0 and "BROKER_REQUIRE_NATIVE" in required.stderr
    fallback = _run({}, code)
    assert fallback.returncode == 0 and fallback.stdout.strip() == "pure"
    assert "Compiled protocol codecs unavailable" in fallback.stderr
    at_start_up = _run({"BROKER_REQUIRE_NATIVE": "1"}, block + "import broker.protocol.api")
    assert at_start_up.returncode != 0 and "BROKER_REQUIRE_NATIVE" in at_start_up.stderr
    switched_off = _run({"BROKER_NATIVE_CODECS": "0", "BROKER_REQUIRE_NATIVE": "1"},
                        "from broker.protocol import compiled; print(compiled.IMPLEMENTATION)")
    assert switched_off.returncode == 0 and switched_off.stdout.strip() == "pure"


def test_compiled_and_python_decode_to_the_same_classes():
    schema = APIS[ApiKey.PRODUCE].request
    msg = {"acks": -1, "timeout_ms": 5, "topic_data": [{"name": "t", "partition_data": [
        {"index": 0, "records": b"abc"}]}]}
    py, cy = MessageCodec(schema, 9, engine="python"), MessageCodec(schema, 9, engine="compiled")
    data = py.encode(msg)
    assert cy.encode(msg) == data
    a, b = py.decode(data)[0], cy.decode(data)[0]
    assert type(a) is type(b) and a == b
    assert cy.decode(data)[0].topic_data[0].partition_data[0].records == b"abc"
    assert cy.encode(types.SimpleNamespace(acks=1, timeout_ms=2, topic_data=[])) == py.encode(
        {"acks": 1, "timeout_ms": 2})

"""The committed .schema files match a fresh import, and parse into what the codec expects."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from broker.protocol.schema import SCHEMA_DIR, VersionRange, load_apis, load_messages, parse_schema_text

ROOT = Path(__file__).resolve().parents[3]
SPEC_DIR = Path("/work/shared/reference/kafka-3.9-message-specs")


def _importer():
    spec = importlib.util.spec_from_file_location("import_specs", ROOT / "tools/codegen/import_specs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(not SPEC_DIR.is_dir(), reason="Kafka JSON specs not present on this machine")
def test_committed_schemas_are_fresh():
    mod = _importer()
    files, apis = mod.build(SPEC_DIR)
    on_disk = {p.name: p.read_text() for p in SCHEMA_DIR.glob("*.schema")}
    assert on_disk == files
    assert (ROOT / "broker/protocol/api_keys.py").read_text() == mod.api_keys_source(apis)


def test_no_prose_copied():
    for path in SCHEMA_DIR.glob("*.schema"):
        text = path.read_text()
        assert "about" not in text and "//" not in text, path.name


def test_parsed_facts():
    apis = load_apis()
    assert len(apis) == 62
    produce = apis[0]
    assert produce.name == "produce" and str(produce.request.flexible) == "9+"
    tid = produce.request.fields[0]
    assert (tid.name, tid.type, str(tid.versions), str(tid.nullable), tid.default) == (
        "transactional_id", "string", "3+", "3+", None)
    msgs = load_messages()
    assert {"RequestHeader", "ResponseHeader", "OffsetCommitKey", "GroupMetadataValue",
            "TransactionLogValue"} <= set(msgs)
    client_id = msgs["RequestHeader"].fields[3]
    assert str(client_id.flexible_override) == "none"


def test_format_details():
    _, _, [msg] = parse_schema_text(
        'data X versions=0-2 flexible=2+\n  a string v=1+ default="x y" tag=3 tagv=2+ ignorable\n'
        '  b []S v=0+\n    c int32 v=0+ default=-1\n')
    a, b = msg.fields
    assert a.default == "x y" and a.tag == 3 and a.ignorable and 2 in a.tagged_versions
    assert b.is_array and b.is_struct and b.fields[0].default == -1
    assert 5 in VersionRange.parse("2+") and 1 not in VersionRange.parse("none")

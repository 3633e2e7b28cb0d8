"""Request frames captured from real clients (tools/codegen/capture_golden.py) decode and re-encode byte-identically."""
from __future__ import annotations

from pathlib import Path

import pytest

from broker.protocol.api import ApiKey, decode_request, decode_request_header, encode_request

GOLDEN = Path(__file__).resolve().parents[3] / "compat-tests" / "golden"
FRAMES = sorted(GOLDEN.glob("*_req_v*.hex"))


def test_golden_frames_exist():
    clients = {p.stem.split("_")[-2] for p in FRAMES}
    assert {"confluent", "kafkapython"} <= clients
    assert any(p.name.startswith("produce_req_") for p in FRAMES)


@pytest.mark.parametrize("path", FRAMES, ids=[p.stem for p in FRAMES])
def test_golden_frame_round_trip(path):
    frame = bytes.fromhex(path.read_text().strip())
    api_name, _, version_part = path.stem.split("_req_")[0], None, path.stem.split("_req_v")[1]
    version = int(version_part.split("_")[0])
    header, offset = decode_request_header(memoryview(frame))
    assert header.api_key == ApiKey[api_name.upper()]
    assert header.api_version == version
    message = decode_request(header.api_key, header.api_version, memoryview(frame), offset)
    again = encode_request(header.api_key, header.api_version, header.correlation_id, header.client_id, message)
    assert again[4:] == frame

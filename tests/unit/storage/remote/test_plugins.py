"""The plug-in class names resolve to RemoteStorageManager implementations; the S3 manager's keys; a missing boto3
is one clear line."""
from __future__ import annotations

import importlib
import sys

import pytest

from broker.config.tiered_storage import REMOTE_STORAGE_MANAGERS
from broker.storage.remote.s3_storage import MIN_PART_SIZE, S3Config, S3RemoteStorageManager
from broker.storage.remote.storage_manager import RemoteStorageException, RemoteStorageManager


@pytest.mark.parametrize("class_name", sorted(REMOTE_STORAGE_MANAGERS))
def test_class_names_resolve(class_name: str) -> None:
    module, _, cls = REMOTE_STORAGE_MANAGERS[class_name].partition(":")
    assert issubclass(getattr(importlib.import_module(module), cls), RemoteStorageManager)


def test_s3_config_defaults_and_endpoint() -> None:
    c = S3Config.parse({"s3.bucket.name": "b"})
    assert (c.region, c.endpoint_url, c.path_style, c.part_size, c.max_attempts) == (
        "us-east-1", None, False, 16 * 1024 * 1024, 5)
    c = S3Config.parse({"s3.bucket.name": "b", "s3.endpoint.url": "http://127.0.0.1:9000"})
    assert c.path_style


@pytest.mark.parametrize("configs,message", [
    ({}, "s3.bucket.name"),
    ({"s3.bucket.name": "b", "s3.multipart.part.size": str(MIN_PART_SIZE - 1)}, "s3.multipart.part.size"),
    ({"s3.bucket.name": "b", "s3.retry.max.attempts": "x"}, "s3.retry.max.attempts"),
    ({"s3.bucket.name": "b", "s3.access.key.id": "k"}, "set together"),
])
def test_s3_config_refusals(configs: dict, message: str) -> None:
    with pytest.raises(RemoteStorageException, match=message):
        S3Config.parse(configs)


def test_missing_boto3_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 raises ImportError
    with pytest.raises(RemoteStorageException) as e:
        S3RemoteStorageManager().configure({"s3.bucket.name": "b"})
    assert "needs boto3" in str(e.value) and "\n" not in str(e.value)


def test_s3_segment_fetch_is_one_ranged_get() -> None:
    """fetch_log_segment(start, end) is one GetObject with ``Range: bytes=start-end`` (what the remote reader asks
    for: from the offset index's position up to the fetch's max bytes), its body bounded to that length."""
    import io
    import uuid

    from broker.storage.remote.metadata import (RemoteLogSegmentId, RemoteLogSegmentMetadata,
                                                TopicIdPartition)

    calls = []

    class Client:
        def get_object(self, **kw: object) -> dict:
            calls.append(kw)
            lo, hi = (int(x) for x in str(kw["Range"]).split("=")[1].split("-"))
            return {"ContentLength": hi - lo + 1, "Body": io.BytesIO(bytes(range(256)) * 40)}

    rsm = S3RemoteStorageManager()
    rsm.config = S3Config.parse({"s3.bucket.name": "b"})
    rsm._client = Client()
    tip = TopicIdPartition(uuid.UUID(int=1), "t", 0)
    md = RemoteLogSegmentMetadata(RemoteLogSegmentId(tip, uuid.UUID(int=2)), 0, 9, 0, 0, 0, 10_000, {0: 0})
    with rsm.fetch_log_segment(md, 4096, 4096 + 999) as f:
        assert len(f.read()) == 1000
    assert calls[-1]["Range"] == "bytes=4096-5095" and calls[-1]["Bucket"] == "b"
    with rsm.fetch_log_segment(md, 9000) as f:  # no end: to the segment's last byte
        assert len(f.read()) == 1000
    assert calls[-1]["Range"] == "bytes=9000-9999"

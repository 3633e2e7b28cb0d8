"""The S3 RemoteStorageManager against a real S3 server (S3Proxy, tests/harness/s3_server.py) on segments written by
the project's Log: copy, ranged fetch and index fetch byte-exact, delete, multipart upload of a segment larger than
the part size, and a copy cut short by the server's death never reported as copied (and copied again once the
server is back)."""
from __future__ import annotations

import socket
import threading
import time
from typing import Iterator, List

import pytest

from broker.storage.remote.metadata import RemoteLogSegmentId, TopicIdPartition, random_uuid
from broker.storage.remote.s3_storage import MIN_PART_SIZE, S3RemoteStorageManager
from broker.storage.remote.storage_manager import (
    IndexType, RemoteResourceNotFoundException, RemoteStorageException,
)
from tests.harness.s3_server import S3Server
from tests.harness.tiered_segments import RolledSegment, rolled_segments, write_log

BUCKET = "tiered-storage"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with S3Server() as server:
        server.create_bucket(BUCKET)
        yield server


def _rsm(server: S3Server, endpoint: str | None = None, **extra: object) -> S3RemoteStorageManager:
    rsm = S3RemoteStorageManager()
    cfg = server.rsm_configs(BUCKET, **{"s3.key.prefix": f"it-{random_uuid().hex[:8]}/", **extra})
    if endpoint is not None:
        cfg["s3.endpoint.url"] = endpoint
    rsm.configure(cfg)
    return rsm


@pytest.fixture(scope="module")
def small_segments(tmp_path_factory: pytest.TempPathFactory) -> Iterator[List[RolledSegment]]:
    log = write_log(tmp_path_factory.mktemp("small") / "orders-0", batches=120, epochs=(0, 5))
    yield rolled_segments(log, TopicIdPartition(random_uuid(), "orders", 0))
    log.close()


@pytest.fixture(scope="module")
def big_segment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RolledSegment]:
    """One segment of about 12 MiB (2.4 parts of S3's 5 MiB minimum part size)."""
    log = write_log(tmp_path_factory.mktemp("big") / "big-0", batches=1200, records_per_batch=10, value_size=1000,
                    segment_bytes=64 * 1024 * 1024)
    [seg] = rolled_segments(log, TopicIdPartition(random_uuid(), "big", 0))
    assert seg.metadata.segment_size_in_bytes > 2 * MIN_PART_SIZE
    yield seg
    log.close()


def test_copy_fetch_delete(s3: S3Server, small_segments: List[RolledSegment]) -> None:
    rsm = _rsm(s3)
    assert len(small_segments) >= 2
    for s in small_segments:
        assert rsm.copy_log_segment_data(s.metadata, s.data) is None
    client = s3.client()
    for s in small_segments:
        whole = s.data.log_segment.read_bytes()
        size = len(whole)
        assert size == s.metadata.segment_size_in_bytes
        assert rsm.fetch_log_segment(s.metadata, 0).read() == whole
        assert rsm.fetch_log_segment(s.metadata, 1000, 4999).read() == whole[1000:5000]
        assert rsm.fetch_log_segment(s.metadata, size - 10, size).read() == whole[-10:]
        assert rsm.fetch_log_segment(s.metadata, 777).read() == whole[777:]
        assert rsm.fetch_index(s.metadata, IndexType.OFFSET).read() == s.data.offset_index.read_bytes()
        assert rsm.fetch_index(s.metadata, IndexType.TIMESTAMP).read() == s.data.time_index.read_bytes()
        assert rsm.fetch_index(s.metadata, IndexType.PRODUCER_SNAPSHOT).read() == \
            s.data.producer_snapshot_index.read_bytes()
        assert rsm.fetch_index(s.metadata, IndexType.LEADER_EPOCH).read() == s.data.leader_epoch_index
        with pytest.raises(RemoteResourceNotFoundException):
            rsm.fetch_index(s.metadata, IndexType.TRANSACTION)
        head = client.head_object(Bucket=BUCKET, Key=rsm.object_key(s.metadata, ".index"))
        assert head["Metadata"]["sha256"]  # the checksum fetch_index verifies
    first = small_segments[0]
    rsm.delete_log_segment_data(first.metadata)
    rsm.delete_log_segment_data(first.metadata)  # idempotent
    with pytest.raises(RemoteResourceNotFoundException):
        rsm.fetch_log_segment(first.metadata, 0)
    with pytest.raises(RemoteResourceNotFoundException):
        rsm.fetch_index(first.metadata, IndexType.OFFSET)
    prefix = rsm.object_key(first.metadata, "")
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("KeyCount", 0)
    assert listed == 0
    assert rsm.fetch_log_segment(small_segments[1].metadata, 0).read() == \
        small_segments[1].data.log_segment.read_bytes()  # the others stay
    rsm.close()


def test_multipart_upload(s3: S3Server, big_segment: RolledSegment) -> None:
    rsm = _rsm(s3, **{"s3.multipart.part.size": MIN_PART_SIZE})
    calls: List[str] = []  # the S3 operations the manager sent (botocore's event hooks; the server did the work)
    rsm._client.meta.events.register("before-call.s3", lambda model, **kw: calls.append(model.name))
    rsm.copy_log_segment_data(big_segment.metadata, big_segment.data)
    whole = big_segment.data.log_segment.read_bytes()
    parts = -(-len(whole) // MIN_PART_SIZE)
    assert calls.count("UploadPart") == parts and calls.count("CompleteMultipartUpload") == 1
    assert calls.count("PutObject") == 4  # offset, time, producer snapshot, leader-epoch: one PUT each
    head = s3.client().head_object(Bucket=BUCKET, Key=rsm.object_key(big_segment.metadata, ".log"))
    assert head["ContentLength"] == len(whole)
    assert rsm.fetch_log_segment(big_segment.metadata, 0).read() == whole
    boundary = MIN_PART_SIZE
    assert rsm.fetch_log_segment(big_segment.metadata, boundary - 100, boundary + 99).read() == \
        whole[boundary - 100:boundary + 100]
    rsm.delete_log_segment_data(big_segment.metadata)
    rsm.close()


class _SlowProxy:
    """A loopback TCP proxy that forwards client-to-server bytes at a bounded rate, so an upload is still running
    when the test kills the server (the server's death, not the proxy, is what the copy meets)."""

    def __init__(self, target_port: int, bytes_per_second: int) -> None:
        self._target = ("127.0.0.1", target_port)
        self._rate = bytes_per_second
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                try:
                    client.close()  # type: ignore[possibly-undefined]
                except Exception:
                    pass
                continue
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, slow: bool) -> None:
        try:
            while True:
                data = src.recv(16384)
                if not data:
                    break
                dst.sendall(data)
                if slow:
                    time.sleep(len(data) / self._rate)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self._server.close()


def test_copy_interrupted_by_server_death_is_not_reported(s3: S3Server, big_segment: RolledSegment) -> None:
    proxy = _SlowProxy(s3.port, bytes_per_second=4 * 1024 * 1024)
    rsm = _rsm(s3, endpoint=f"http://127.0.0.1:{proxy.port}", **{"s3.multipart.part.size": MIN_PART_SIZE,
                                                                 "s3.retry.max.attempts": 2,
                                                                 "s3.api.call.timeout.ms": 5000})
    md = big_segment.metadata
    key = rsm.object_key(md, ".log")
    outcome: List[BaseException] = []

    def copy() -> None:
        try:
            rsm.copy_log_segment_data(md, big_segment.data)
        except BaseException as exc:  # noqa: BLE001  (the assertion below names what was raised)
            outcome.append(exc)
        else:
            outcome.append(AssertionError("the copy returned although the server died during it"))

    t = threading.Thread(target=copy)
    t.start()
    client = s3.client()
    deadline = time.monotonic() + 60
    while True:  # kill the server once its first part is stored (more remain: 12 MiB at 4 MiB/s)
        assert time.monotonic() < deadline, "no part of the multipart upload reached the server in 60 s"
        uploads = [u for u in client.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) if u["Key"] == key]
        if uploads and client.list_parts(Bucket=BUCKET, Key=key, UploadId=uploads[0]["UploadId"]).get("Parts"):
            break
        assert t.is_alive(), f"the copy ended before any part was listed: {outcome}"
        time.sleep(0.02)
    s3.kill()
    t.join(120)
    assert not t.is_alive(), "the copy did not give up after the server died"
    proxy.close()
    [exc] = outcome
    assert isinstance(exc, RemoteStorageException), repr(exc)
    s3.start()
    client = s3.client()
    assert client.list_objects_v2(Bucket=BUCKET, Prefix=rsm.object_key(md, "")).get("KeyCount", 0) == 0
    back = _rsm(s3)
    back_md_key = back.object_key(md, ".log")
    with pytest.raises(RemoteResourceNotFoundException):
        back.fetch_log_segment(md, 0)
    # the RemoteLogManager copies again under a new segment id once the store is back
    retry = RemoteLogSegmentId(md.topic_id_partition, random_uuid())
    from dataclasses import replace
    md2 = replace(md, remote_log_segment_id=retry)
    back.copy_log_segment_data(md2, big_segment.data)
    assert back.fetch_log_segment(md2, 0).read() == big_segment.data.log_segment.read_bytes()
    assert back_md_key != back.object_key(md2, ".log")
    back.close()

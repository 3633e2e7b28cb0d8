"""A RemoteStorageManager on an S3-compatible object store (AWS S3, or any server speaking its API), through boto3.

Why boto3: it is AWS's own SDK, released weekly, and speaks every S3 feature used here (multipart upload, ranged
GET, Content-MD5, path-style addressing for non-AWS servers) with botocore's retry modes (exponential backoff with
jitter on throttling, 5xx and connection errors) and the standard credential chain. aiobotocore would tie the copier
to asyncio for no gain (the RemoteLogManager runs copies on its own thread pool, as Kafka's does) and minio-py's
retries and credential sources are narrower. boto3 is imported on first use only: a broker without tiered storage
does not need it (pyproject extra ``s3``), and one without it that asks for this class gets one line naming it.

Objects, under ``s3.key.prefix``, as Kafka's LocalTieredStorage lays out files::

    <prefix><topic>-<partition>-<topic id>/<20-digit start offset>-<segment id>.{log,index,timeindex,txnindex,
                                                                               leader_epoch_checkpoint,snapshot}

Integrity: every PUT and every multipart part carries Content-MD5 (the server refuses a corrupted body with
BadDigest) and its returned ETag is compared with the MD5; single-PUT objects (the indexes) also carry their SHA-256
in ``x-amz-meta-sha256``, checked when they are fetched. A segment larger than ``s3.multipart.part.size`` goes up in
parts; a failed upload is aborted. ``copy_log_segment_data`` returns only after every object of the segment is
written, otherwise it removes what it wrote (best effort) and raises RemoteStorageException, so the RemoteLogManager
never records a partial copy as COPY_SEGMENT_FINISHED.

Keys (under ``remote.log.storage.manager.impl.prefix``, default ``rsm.config.``): ``s3.bucket.name`` (required),
``s3.region`` (us-east-1), ``s3.endpoint.url`` (AWS when unset), ``s3.path.style.access.enabled`` (true when an
endpoint is set), ``s3.key.prefix`` (""), ``s3.access.key.id``/``s3.secret.access.key`` (both or neither; boto3's
credential chain when neither), ``s3.multipart.part.size`` (16777216; 5 MiB to 5 GiB), ``s3.retry.max.attempts``
(5), ``s3.api.call.timeout.ms`` (30000).
"""
from __future__ import annotations

import base64
import hashlib
import io
import logging
from dataclasses import dataclass
from typing import Any, BinaryIO, Dict, List, Mapping, Optional, Tuple

from broker.storage.remote.local_tiered_storage import (
    ALL_SUFFIXES, LEADER_EPOCH_CHECKPOINT, OFFSET_INDEX, PRODUCER_SNAPSHOT, SEGMENT, TIME_INDEX, TRANSACTION_INDEX,
    _INDEX_SUFFIX, partition_dir_name, segment_file_name,
)
from broker.storage.remote.metadata import RemoteLogSegmentMetadata, uuid_to_string
from broker.storage.remote.storage_manager import (
    BoundedReader, IndexType, LogSegmentData, RemoteResourceNotFoundException, RemoteStorageException,
    RemoteStorageManager, check_fetch_range,
)

log = logging.getLogger(__name__)

MIN_PART_SIZE = 5 * 1024 * 1024
MAX_PART_SIZE = 5 * 1024 * 1024 * 1024
_NOT_FOUND = ("NoSuchKey", "404", "NotFound")


@dataclass(frozen=True)
class S3Config:
    """The S3 RemoteStorageManager's keys, typed."""

    bucket: str
    region: str = "us-east-1"
    endpoint_url: Optional[str] = None
    path_style: bool = False
    key_prefix: str = ""
    access_key_id: Optional[str] = None
    secret_access_key: Optional[str] = None
    part_size: int = 16 * 1024 * 1024
    max_attempts: int = 5
    timeout_ms: int = 30000

    @classmethod
    def parse(cls, configs: Mapping[str, object]) -> "S3Config":
        """Raises RemoteStorageException naming the key of a missing or invalid value."""
        def get(name: str) -> Optional[str]:
            v = configs.get(name)
            return None if v is None else str(v).strip()

        def integer(name: str, default: int, lo: int, hi: int) -> int:
            raw = get(name)
            if raw is None:
                return default
            try:
                value = int(raw)
            except ValueError:
                raise RemoteStorageException(f"Invalid value {raw} for configuration {name}: not a number") from None
            if not lo <= value <= hi:
                raise RemoteStorageException(f"Invalid value {raw} for configuration {name}: must be in [{lo},{hi}]")
            return value

        bucket = get("s3.bucket.name")
        if not bucket:
            raise RemoteStorageException("Missing required configuration s3.bucket.name of the S3 remote storage "
                                         "manager (set rsm.config.s3.bucket.name)")
        endpoint = get("s3.endpoint.url") or None
        path_style = get("s3.path.style.access.enabled")
        key_id, secret = get("s3.access.key.id"), get("s3.secret.access.key")
        if (key_id is None) != (secret is None):
            raise RemoteStorageException("s3.access.key.id and s3.secret.access.key must be set together")
        return cls(bucket=bucket, region=get("s3.region") or "us-east-1", endpoint_url=endpoint,
                   path_style=(path_style.lower() == "true") if path_style else endpoint is not None,
                   key_prefix=get("s3.key.prefix") or "", access_key_id=key_id, secret_access_key=secret,
                   part_size=integer("s3.multipart.part.size", 16 * 1024 * 1024, MIN_PART_SIZE, MAX_PART_SIZE),
                   max_attempts=integer("s3.retry.max.attempts", 5, 1, 100),
                   timeout_ms=integer("s3.api.call.timeout.ms", 30000, 1, 3_600_000))


def _md5(data: bytes) -> Tuple[str, str]:
    """(Content-MD5 header value, hex digest as in the ETag)."""
    d = hashlib.md5(data)
    return base64.b64encode(d.digest()).decode("ascii"), d.hexdigest()


def _etag(response: Mapping[str, Any]) -> str:
    return str(response.get("ETag", "")).strip('"').lower()


class _GuardedStream(io.RawIOBase):
    """A response body whose read errors (the server gone mid-stream) surface as RemoteStorageException."""

    def __init__(self, body: Any, key: str) -> None:
        super().__init__()
        self._body = body
        self._key = key

    def readable(self) -> bool:
        return True

    def readinto(self, b: "bytearray | memoryview") -> int:  # type: ignore[override]
        try:
            chunk = self._body.read(len(b))
        except Exception as exc:  # urllib3/botocore stream errors have no common base class
            raise RemoteStorageException(f"Reading s3 object {self._key} failed: {exc}") from exc
        b[:len(chunk)] = chunk
        return len(chunk)

    def close(self) -> None:
        try:
            self._body.close()
        finally:
            super().close()


class S3RemoteStorageManager(RemoteStorageManager):
    """RemoteStorageManager on S3 (class name broker.storage.remote.S3RemoteStorageManager)."""

    def __init__(self) -> None:
        self.config: Optional[S3Config] = None
        self._client: Any = None
        self._errors: Tuple[type[BaseException], ...] = ()
        self._client_error: Any = None

    def configure(self, configs: Mapping[str, object]) -> None:
        self.config = S3Config.parse(configs)
        try:
            import boto3
            from botocore.config import Config
            from botocore.exceptions import BotoCoreError, ClientError
        except ImportError:
            raise RemoteStorageException("The S3 remote storage manager needs boto3, which is not installed: "
                                         "pip install boto3 (or the package's [s3] extra)") from None
        c = self.config
        boto_config = Config(
            region_name=c.region, retries={"max_attempts": c.max_attempts, "mode": "standard"},
            connect_timeout=c.timeout_ms / 1000, read_timeout=c.timeout_ms / 1000,
            s3={"addressing_style": "path" if c.path_style else "auto"},
            # Content-MD5 is the integrity check here: the newer trailing CRC headers are not understood by every
            # S3-compatible server
            request_checksum_calculation="when_required", response_checksum_validation="when_required")
        kwargs: Dict[str, Any] = {"config": boto_config}
        if c.endpoint_url:
            kwargs["endpoint_url"] = c.endpoint_url
        if c.access_key_id is not None:
            kwargs.update(aws_access_key_id=c.access_key_id, aws_secret_access_key=c.secret_access_key)
        self._client = boto3.session.Session().client("s3", **kwargs)
        self._errors = (BotoCoreError, ClientError)
        self._client_error = ClientError

    # ------------------------------------------------------------------ names
    def object_key(self, metadata: RemoteLogSegmentMetadata, suffix: str) -> str:
        """The object key of one file of a segment."""
        assert self.config is not None, "configure() first"
        return (f"{self.config.key_prefix}{partition_dir_name(metadata.topic_id_partition)}/"
                f"{segment_file_name(metadata, suffix)}")

    def _c(self) -> Any:
        if self._client is None or self.config is None:
            raise RemoteStorageException("The S3 remote storage manager was not configured")
        return self._client

    def _is_not_found(self, exc: BaseException) -> bool:
        if self._client_error is not None and isinstance(exc, self._client_error):
            err = exc.response.get("Error", {})
            return str(err.get("Code")) in _NOT_FOUND
        return False

    # ------------------------------------------------------------------ copy
    def _put(self, key: str, data: bytes) -> None:
        content_md5, md5_hex = _md5(data)
        r = self._c().put_object(Bucket=self.config.bucket, Key=key, Body=data,  # type: ignore[union-attr]
                                 ContentMD5=content_md5, Metadata={"sha256": hashlib.sha256(data).hexdigest()})
        if _etag(r) != md5_hex:
            raise RemoteStorageException(f"s3 object {key}: ETag {_etag(r)} is not the MD5 {md5_hex} of what was "
                                         "sent")

    def _put_file(self, key: str, path: Any) -> None:
        size = path.stat().st_size
        if size <= self.config.part_size:  # type: ignore[union-attr]
            self._put(key, path.read_bytes())
        else:
            self._multipart(key, path)

    def _multipart(self, key: str, path: Any) -> None:
        c, bucket, part_size = self._c(), self.config.bucket, self.config.part_size  # type: ignore[union-attr]
        upload_id = c.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        try:
            parts: List[Dict[str, Any]] = []
            with open(path, "rb") as f:
                number = 1
                while True:
                    chunk = f.read(part_size)
                    if not chunk:
                        break
                    content_md5, md5_hex = _md5(chunk)
                    r = c.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=chunk,
                                      ContentMD5=content_md5)
                    if _etag(r) != md5_hex:
                        raise RemoteStorageException(f"s3 object {key} part {number}: ETag {_etag(r)} is not the MD5 "
                                                     f"{md5_hex} of what was sent")
                    parts.append({"PartNumber": number, "ETag": r["ETag"]})
                    number += 1
            c.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id,
                                        MultipartUpload={"Parts": parts})
        except BaseException:
            try:
                c.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
            except Exception as exc:  # the store may be the thing that failed; the upload expires server-side
                log.warning("Could not abort the multipart upload of s3 object %s: %s", key, exc)
            raise

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> Optional[bytes]:
        files = [(data.log_segment, SEGMENT), (data.offset_index, OFFSET_INDEX), (data.time_index, TIME_INDEX)]
        if data.transaction_index is not None:
            files.append((data.transaction_index, TRANSACTION_INDEX))
        files.append((data.producer_snapshot_index, PRODUCER_SNAPSHOT))
        written: List[str] = []
        try:
            for path, suffix in files:
                key = self.object_key(metadata, suffix)
                written.append(key)
                self._put_file(key, path)
            key = self.object_key(metadata, LEADER_EPOCH_CHECKPOINT)
            written.append(key)
            self._put(key, data.leader_epoch_index)
        except (OSError, RemoteStorageException) + self._errors as exc:
            self._delete_keys(written, quiet=True)
            if isinstance(exc, RemoteStorageException):
                raise
            raise RemoteStorageException(f"Copying segment {uuid_to_string(metadata.remote_log_segment_id.id)} "
                                         f"of {metadata.topic_id_partition} to s3 failed: {exc}") from exc
        log.info("Copied segment %s of %s (offsets %d-%d) to s3://%s", uuid_to_string(metadata.remote_log_segment_id.id),
                 metadata.topic_id_partition, metadata.start_offset, metadata.end_offset,
                 self.config.bucket)  # type: ignore[union-attr]
        return None

    # ------------------------------------------------------------------ fetch
    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: Optional[int] = None) -> BinaryIO:
        end = min(check_fetch_range(metadata, start_position, end_position), metadata.segment_size_in_bytes - 1)
        if end < start_position:
            return io.BytesIO(b"")
        key = self.object_key(metadata, SEGMENT)
        try:
            r = self._c().get_object(Bucket=self.config.bucket, Key=key,  # type: ignore[union-attr]
                                     Range=f"bytes={start_position}-{end}")
        except self._errors as exc:
            if self._is_not_found(exc):
                raise RemoteResourceNotFoundException(f"s3 object {key} not found") from exc
            raise RemoteStorageException(f"Fetching s3 object {key} failed: {exc}") from exc
        expected = end - start_position + 1
        if int(r.get("ContentLength", -1)) != expected:
            r["Body"].close()
            raise RemoteStorageException(f"s3 object {key}: {r.get('ContentLength')} bytes answered for a range of "
                                         f"{expected}")
        return BoundedReader(_GuardedStream(r["Body"], key), expected)  # type: ignore[arg-type, return-value]

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        key = self.object_key(metadata, _INDEX_SUFFIX[index_type])
        try:
            r = self._c().get_object(Bucket=self.config.bucket, Key=key)  # type: ignore[union-attr]
            body = r["Body"].read()
        except self._errors as exc:
            if self._is_not_found(exc):
                raise RemoteResourceNotFoundException(f"Index file for type: {index_type.value} not found for segment "
                                                      f"{uuid_to_string(metadata.remote_log_segment_id.id)}") from exc
            raise RemoteStorageException(f"Fetching s3 object {key} failed: {exc}") from exc
        except Exception as exc:  # the body stream broke
            raise RemoteStorageException(f"Reading s3 object {key} failed: {exc}") from exc
        want = (r.get("Metadata") or {}).get("sha256")
        if want is not None and hashlib.sha256(body).hexdigest() != want:
            raise RemoteStorageException(f"s3 object {key}: SHA-256 mismatch (corrupted in the store or in transit)")
        return io.BytesIO(body)

    # ------------------------------------------------------------------ delete
    def _delete_keys(self, keys: List[str], quiet: bool = False) -> None:
        """One DeleteObject per key: DeleteObjects needs a request checksum header that not every S3-compatible
        server accepts, and a segment has at most six objects. Deleting a missing key succeeds (S3 answers 204)."""
        for key in keys:
            try:
                self._c().delete_object(Bucket=self.config.bucket, Key=key)  # type: ignore[union-attr]
            except self._errors as exc:
                if self._is_not_found(exc):
                    continue
                if quiet:
                    log.warning("Could not delete s3 object %s of a failed copy: %s", key, exc)
                    continue
                raise RemoteStorageException(f"Deleting s3 object {key} failed: {exc}") from exc

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        self._delete_keys([self.object_key(metadata, s) for s in ALL_SUFFIXES])

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


__all__ = ["S3RemoteStorageManager", "S3Config", "MIN_PART_SIZE"]

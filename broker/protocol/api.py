"""Public entry points of the sans-IO protocol layer: headers, requests and responses.

Frame layouts (all integers big-endian; the 4-byte size prefix counts the bytes after it)::

    request  = int32 size | request header | body
    request header v0 = int16 api_key | int16 api_version | int32 correlation_id
    request header v1 = v0 | client_id (int16 length, -1 = null, UTF-8)
    request header v2 = v1 | tagged fields (flexible encoding; client_id stays non-compact)
    response = int32 size | response header | body
    response header v0 = int32 correlation_id ; v1 = v0 | tagged fields

Header version: v2/v1 when the API version is flexible, else v1/v0; ControlledShutdown v0 uses
request header v0; ApiVersions responses always use response header v0.
"""
from __future__ import annotations

import struct
from typing import Any

from broker.errors import UnsupportedVersionError

from . import compiled  # noqa: F401 - chooses the codec engine now: a missing required build fails at start-up
from .api_keys import ApiKey
from .codec import MessageCodec, assemble, codec_for, read_uvarint
from .exceptions import MalformedMessageError, TruncatedHeaderError
from .schema import ApiSchema, MessageSchema, load_apis, load_messages

__all__ = [
    "ApiKey", "API_VERSIONS_RANGE", "RequestHeader", "is_flexible", "request_header_version",
    "response_header_version", "decode_request_header", "decode_request", "encode_request",
    "encode_response", "decode_response", "decode_response_with_header", "data_codec", "response_schema",
]

_APIS: dict[int, ApiSchema] = load_apis()
API_VERSIONS_RANGE: dict[ApiKey, tuple[int, int]] = {}
for _key, _schema in sorted(_APIS.items()):
    _hi = _schema.request.versions.high
    assert _hi is not None
    API_VERSIONS_RANGE[ApiKey(_key)] = (_schema.request.versions.low, _hi)

_HDR = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_SIZE_CID = struct.Struct(">ii")


class RequestHeader:
    """A decoded request header. ``client_id`` is None when absent (header v0) or null."""

    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "header_version")

    def __init__(self, api_key: int, api_version: int, correlation_id: int,
                 client_id: str | None, header_version: int) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.header_version = header_version

    @property
    def is_supported(self) -> bool:
        """True when this broker knows the API key and version."""
        rng = API_VERSIONS_RANGE.get(self.api_key)  # type: ignore[call-overload]
        return rng is not None and rng[0] <= self.api_version <= rng[1]

    def __repr__(self) -> str:
        return (f"RequestHeader(api_key={self.api_key}, api_version={self.api_version}, "
                f"correlation_id={self.correlation_id}, client_id={self.client_id!r})")


def is_flexible(api_key: int, version: int) -> bool:
    """Whether (api, version) uses the flexible encoding (open-ended: also for future versions)."""
    api = _APIS.get(api_key)
    return api is not None and version in api.request.flexible


def request_header_version(api_key: int, version: int) -> int:
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and version == 0:
        return 0
    return 2 if is_flexible(api_key, version) else 1


def response_header_version(api_key: int, version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    api = _APIS.get(api_key)
    return 1 if api is not None and version in api.response.flexible else 0


def decode_request_header(frame: memoryview | bytes) -> tuple[RequestHeader, int]:
    """Parse the request header; returns it and the offset of the body.

    Unknown keys/versions still yield (api_key, api_version, correlation_id) so the caller can
    answer UNSUPPORTED_VERSION; their client_id is parsed on a best-effort basis.
    Raises TruncatedHeaderError if the fixed 8 bytes are missing, MalformedMessageError if the
    rest of a known header is bad.
    """
    if len(frame) < 8:
        raise TruncatedHeaderError(f"request frame of {len(frame)} bytes holds no header")
    buf = frame if frame.__class__ is memoryview else memoryview(frame)
    api_key, api_version, correlation_id = _HDR.unpack_from(buf, 0)
    hv = _REQ_HV.get((api_key, api_version))
    if hv is None:
        hv = request_header_version(api_key, api_version)
    if hv == 0:
        return RequestHeader(api_key, api_version, correlation_id, None, 0), 8
    try:
        client_id, pos = _read_client_id(buf, 8)
        if hv == 2:
            if len(buf) > pos and buf[pos] == 0:
                pos += 1
            else:
                pos = _skip_tagged_fields(buf, pos)
    except MalformedMessageError:
        if api_key in _APIS:
            raise
        return RequestHeader(api_key, api_version, correlation_id, None, hv), 8
    return RequestHeader(api_key, api_version, correlation_id, client_id, hv), pos


def _read_client_id(buf: memoryview, pos: int) -> tuple[str | None, int]:
    if len(buf) < pos + 2:
        raise MalformedMessageError("request header truncated in client_id")
    n = _I16.unpack_from(buf, pos)[0]
    pos += 2
    if n == -1:
        return None, pos
    if n < 0 or pos + n > len(buf):
        raise MalformedMessageError(f"bad client_id length {n}")
    try:
        return str(buf[pos:pos + n], "utf-8"), pos + n
    except UnicodeDecodeError as exc:
        raise MalformedMessageError(f"client_id is not UTF-8: {exc}") from None


def _skip_tagged_fields(buf: memoryview, pos: int) -> int:
    try:
        count, pos = read_uvarint(buf, pos)
        for _ in range(count):
            _tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            pos += size
    except IndexError:
        raise MalformedMessageError("header tagged fields truncated") from None
    if pos > len(buf):
        raise MalformedMessageError("header tagged field runs past the end")
    return pos


_REQ_HV: dict[tuple[int, int], int] = {
    (key, v): request_header_version(key, v)
    for key, (lo, hi) in API_VERSIONS_RANGE.items() for v in range(lo, hi + 1)
}
_REQ_DECODERS: dict[tuple[int, int], Any] = {}
_RESP_ENCODERS: dict[tuple[int, int], tuple[Any, int]] = {}


def _api(api_key: int, version: int) -> ApiSchema:
    api = _APIS.get(api_key)
    if api is None or version not in api.request.versions:
        raise UnsupportedVersionError(f"api_key {api_key} version {version} is not supported")
    return api


def decode_request(api_key: int, version: int, frame: memoryview | bytes, offset: int) -> Any:
    """Decode a request body starting at ``offset`` of the frame (as returned with the header).

    Raises UnsupportedVersionError (a KafkaError) for unknown (api, version) and
    MalformedMessageError for a bad body.
    """
    dec = _REQ_DECODERS.get((api_key, version))
    if dec is None:
        dec = _REQ_DECODERS[(api_key, version)] = codec_for(_api(api_key, version).request, version).decode_fn
    return dec(frame, offset)[0]


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None,
                   message: Any) -> bytes:
    """A whole request frame with its 4-byte size prefix (for tests and our own tools)."""
    body = codec_for(_api(api_key, version).request, version).encode(message)
    hv = request_header_version(api_key, version)
    hdr = _HDR.pack(api_key, version, correlation_id)
    if hv >= 1:
        if client_id is None:
            hdr += _I16.pack(-1)
        else:
            cid = client_id.encode("utf-8")
            hdr += _I16.pack(len(cid)) + cid
    if hv == 2:
        hdr += b"\x00"
    return _I32.pack(len(hdr) + len(body)) + hdr + body


def encode_response(api_key: int, version: int, correlation_id: int, message: Any) -> list[Any]:
    """Response frame parts with the 4-byte size prefix: bytes, and FileSlices passed through.

    Adjacent bytes are joined, so a response without FileSlices is a single bytes object.
    """
    entry = _RESP_ENCODERS.get((api_key, version))
    if entry is None:
        entry = _RESP_ENCODERS[(api_key, version)] = (
            codec_for(_api(api_key, version).response, version).encode_fn,
            9 if response_header_version(api_key, version) == 1 else 8)
    enc, header_len = entry
    w = bytearray(header_len)  # size, correlation_id and (header v1) an empty tagged-field section
    ins: list[tuple[int, Any]] = []
    enc(w, ins, message)
    if not ins:
        _SIZE_CID.pack_into(w, 0, len(w) - 4, correlation_id)
        return [bytes(w)]
    _SIZE_CID.pack_into(w, 0, len(w) - 4 + sum(len(p) for _, p in ins), correlation_id)
    return assemble(w, ins, 0)


def decode_response_with_header(api_key: int, version: int, data: memoryview | bytes,
                                has_size_prefix: bool = True) -> tuple[int, Any]:
    """Decode a response frame; returns (correlation_id, message)."""
    buf = data if isinstance(data, memoryview) else memoryview(data)
    pos = 0
    if has_size_prefix:
        if len(buf) < 4 or _I32.unpack_from(buf, 0)[0] != len(buf) - 4:
            raise MalformedMessageError("response size prefix does not match the data")
        pos = 4
    if len(buf) < pos + 4:
        raise MalformedMessageError("response too short for a header")
    correlation_id = _I32.unpack_from(buf, pos)[0]
    pos += 4
    if response_header_version(api_key, version) == 1:
        pos = _skip_tagged_fields(buf, pos)
    return correlation_id, codec_for(_api(api_key, version).response, version).decode(buf, pos)[0]


def decode_response(api_key: int, version: int, data: memoryview | bytes,
                    has_size_prefix: bool = True) -> Any:
    """Decode a response frame (by default as produced by encode_response, size prefix included)."""
    return decode_response_with_header(api_key, version, data, has_size_prefix)[1]


def response_schema(api_key: int, version: int) -> MessageSchema:
    """The response schema of (api, version), e.g. for ``codec.element_encoder``."""
    return _api(api_key, version).response


def data_codec(name: str, version: int) -> MessageCodec:
    """Codec of a non-API schema: internal-topic records (OffsetCommitKey/Value, GroupMetadataKey/Value,
    TransactionLogKey/Value; the int16 key version that selects them is not part of the schema)."""
    msg = load_messages().get(name)
    if msg is None or version not in msg.versions:
        raise KeyError(f"no schema {name} v{version}")
    return codec_for(msg, version)
